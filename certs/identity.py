"""Who a verified client certificate says it is, read the way Kubernetes' x509 authenticator reads it.

CN is the user name and each O is a group. This module only parses: the TLS layer has already
verified the chain (grpc with `require_client_auth=True`), so a cert reaching here is trusted.
Kubernetes' authenticator chain then adds `system:authenticated`; that belongs to the API server's
authn step, not to the certificate, so it is not added here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

# The auth-context property grpc fills with the peer's leaf cert in PEM (see DEPENDENCIES.md).
X509_PEM_CERT = "x509_pem_cert"


@dataclass(frozen=True)
class Identity:
    """An authenticated user: name and groups, as authorizers consume it."""

    user: str
    groups: tuple[str, ...] = ()

    def in_group(self, group: str) -> bool:
        return group in self.groups


def identity_from_pem(cert_pem: bytes | str) -> Identity:
    """Identity of a (first) PEM certificate. Raises ValueError when it carries no usable CN.

    An empty CN is refused rather than mapped to an anonymous user: granting anything to "" would
    make every CN-less cert from the CA an identity.
    """
    data = cert_pem.encode() if isinstance(cert_pem, str) else cert_pem
    cert = x509.load_pem_x509_certificate(data)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(names) != 1 or not _text(names[0].value):
        raise ValueError(
            f"certificate subject {cert.subject.rfc4514_string()!r} needs exactly one non-empty CN"
        )
    groups = tuple(_text(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return Identity(_text(names[0].value), groups)


def identity_from_auth_context(auth_context: Mapping[str, Iterable[bytes]]) -> Identity | None:
    """Identity from grpc's `ServicerContext.auth_context()`, or None if the peer sent no cert.

    None (rather than raising) lets the caller answer UNAUTHENTICATED with its own message.
    """
    pems = list(auth_context.get(X509_PEM_CERT, ()))
    if not pems:
        return None
    return identity_from_pem(pems[0])


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
