"""The etcd client's TLS material, re-read when its files change (etcd link rotation).

The API server talks to etcd with `--etcd-ca/--etcd-cert/--etcd-key`. `kse certs rotate --identity
apiserver-etcd-client` and every CA rotation phase rewrite those files while the API server runs;
grpcio cannot change a channel's credentials, so the etcd client builds new channels and moves its
callers over (kse.etcdclient.client, "Credential reload"). This object only answers "are there new
credentials?": it wraps `certs.source.FileCredentialSource` (the same reader the API server's
serving side and the clients use: three `stat`s when nothing changed, never a torn cert/key pair).

Server-only TLS (a CA bundle, no client pair) is not followed: it is not a topology kse runs (etcd
always has --client-cert-auth here), and a lone CA bundle needs no pair check.
"""

from __future__ import annotations

import grpc

from certs.source import CredentialError, Credentials, FileCredentialSource
from kse.etcdclient.errors import EtcdError
from kse.etcdclient.model import EtcdTLS


def channel_credentials(creds: Credentials) -> grpc.ChannelCredentials:
    """grpc credentials presenting the client pair of `creds` and trusting its CA bundle."""
    return grpc.ssl_channel_credentials(
        root_certificates=creds.ca_pem, private_key=creds.key_pem, certificate_chain=creds.cert_pem
    )


def static_credentials(tls: EtcdTLS) -> grpc.ChannelCredentials:
    """Credentials read once from `tls` (no reload: server-only TLS, or reload turned off)."""
    return grpc.ssl_channel_credentials(
        root_certificates=tls.ca_file.read_bytes(),
        private_key=tls.key_file.read_bytes() if tls.key_file else None,
        certificate_chain=tls.cert_file.read_bytes() if tls.cert_file else None,
    )


class EtcdCredentialSource:
    """The client pair and CA bundle of an `EtcdTLS` with a client identity, followed on disk."""

    def __init__(self, tls: EtcdTLS) -> None:
        if tls.cert_file is None or tls.key_file is None:
            raise ValueError("EtcdCredentialSource needs a client pair (cert_file and key_file)")
        self.tls = tls
        self._files = FileCredentialSource(tls.cert_file, tls.key_file, tls.ca_file)
        try:
            self._current = self._files.load()
        except CredentialError as e:
            raise EtcdError(f"etcd client TLS: {e}") from e

    @property
    def credentials(self) -> Credentials:
        """The credentials the current channels were built with (`.version` counts changes)."""
        return self._current

    @property
    def last_error(self) -> str | None:
        """Why changed files were not taken (a torn pair, a bad file); None once taken."""
        return self._files.last_error

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return channel_credentials(self._current)

    def poll(self) -> Credentials | None:
        """New credentials if the files changed to a consistent new set since the last look."""
        creds = self._files.poll()
        if creds is not None:
            self._current = creds
        return creds
