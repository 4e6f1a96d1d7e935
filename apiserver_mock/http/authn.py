"""Who is calling over HTTPS: the verified client certificate's CN (user) and O (groups).

The same rule as the gRPC side (`apiserver_mock.auth.authn`, `certs.identity`): the TLS layer
verified the chain (CERT_REQUIRED), so a certificate reaching here is trusted; one without a usable
CN is refused as 401. Each distinct certificate is parsed once.
"""

from __future__ import annotations

import ssl
from typing import Any

from apiserver_mock.errors import Unauthenticated
from certs.identity import Identity, identity_from_pem

_CACHE_LIMIT = 4096


class CertAuthenticator:
    def __init__(self) -> None:
        self._cache: dict[bytes, Identity] = {}

    def identify(self, transport: Any) -> Identity:
        """The identity of the peer on `transport` (an aiohttp request's transport)."""
        sslobj = transport.get_extra_info("ssl_object") if transport is not None else None
        der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
        if not der:
            raise Unauthenticated("Unauthorized: no client certificate presented")
        ident = self._cache.get(der)
        if ident is not None:
            return ident
        try:
            ident = identity_from_pem(ssl.DER_cert_to_PEM_cert(der))
        except ValueError as e:
            raise Unauthenticated(
                f"Unauthorized: client certificate carries no usable identity: {e}"
            ) from None
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[der] = ident
        return ident
