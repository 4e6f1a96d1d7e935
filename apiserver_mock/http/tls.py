"""The HTTPS serving context: mutual TLS, reloaded from the same files as the gRPC side.

`ssl.SSLContext.load_cert_chain` on a live context would change it for new handshakes, but
`load_verify_locations` only ever adds CAs, so a CA rotation could never drop the old one. Instead
each handshake's server-name callback (which OpenSSL calls for every ClientHello, with or without
SNI) polls the `FileCredentialSource` (a few stats when nothing changed) and, when the files
changed to a consistent new state, builds a fresh context from them; the connection is then
switched onto the current context (`SSLObject.context = ...`), so its certificate and client-CA
store are the new ones. Established connections keep what they were handshaken with, as on the gRPC
side; the HTTP server closes idle keep-alive connections, so clients re-handshake soon.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile

from certs.source import Credentials, FileCredentialSource

log = logging.getLogger(__name__)


def context_for(creds: Credentials) -> ssl.SSLContext:
    """A server context requiring a client certificate that chains to `creds.ca_pem`."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=creds.ca_pem.decode())
    # load_cert_chain reads files only: hand it the PEMs through a private temporary file.
    fd, path = tempfile.mkstemp(prefix="kse-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(creds.cert_pem + b"\n" + creds.key_pem)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class ReloadingContext:
    """The context the listening socket uses, switching each new connection onto current credentials."""

    def __init__(self, source: FileCredentialSource) -> None:
        self.source = source
        creds = source.load()
        self.version = creds.version
        self.current = context_for(creds)
        self.listening = context_for(creds)
        self.listening.sni_callback = self._on_hello
        self._reported: str | None = None

    def _on_hello(self, sslobj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        try:
            creds = self.source.poll()
            if creds is not None and creds.version != self.version:
                self.current = context_for(creds)
                self.version = creds.version
                self._reported = None
                log.info("HTTPS credentials reloaded (version %d)", creds.version)
            elif creds is None and self.source.last_error and self.source.last_error != self._reported:
                self._reported = self.source.last_error
                log.warning("HTTPS credential files changed but were not reloaded: %s", self._reported)
        except Exception:  # never fail a handshake because of the reload path
            log.exception("reloading HTTPS credentials failed; keeping the current ones")
        sslobj.context = self.current
