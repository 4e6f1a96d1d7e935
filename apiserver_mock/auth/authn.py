"""Who is calling: the verified client certificate's CN and O, read from grpc's auth context."""

from __future__ import annotations

import logging
import threading

import grpc.aio

from apiserver_mock.errors import Unauthenticated
from certs.identity import X509_PEM_CERT, Identity, identity_from_pem

log = logging.getLogger(__name__)

_CACHE_LIMIT = 4096


class Authenticator:
    """Maps a peer certificate to an Identity, parsing each distinct certificate once."""

    def __init__(self) -> None:
        self._cache: dict[bytes, Identity] = {}
        self._lock = threading.Lock()

    def identify(self, context: grpc.aio.ServicerContext) -> Identity:  # type: ignore[type-arg]
        pems = context.auth_context().get(X509_PEM_CERT)
        if not pems:
            # Unreachable with require_client_auth=True, kept as a guard against misconfiguration.
            raise Unauthenticated("no client certificate presented")
        pem = pems[0]
        ident = self._cache.get(pem)
        if ident is not None:
            return ident
        try:
            ident = identity_from_pem(pem)
        except ValueError as e:
            log.warning("refusing client certificate: %s", e)
            raise Unauthenticated(f"client certificate carries no usable identity: {e}") from None
        with self._lock:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[pem] = ident
        return ident
