"""PKI for kse: the CA, serving and client certs, their file layout, identities, and reloading.

Import from here; the submodules are split by job (issue, name files, read identity, reload).
"""

from certs.identity import Identity, identity_from_auth_context, identity_from_pem
from certs.layout import PKI, CertPaths, LeafSpec, leaf_specs
from certs.pki import (
    CertKeyPair,
    init_pki,
    issue_leaf,
    key_matches_cert,
    load_ca,
    make_ca,
    reissue,
    rotate_leaf,
    write_ca_bundle,
    write_pair,
)
from certs.source import CredentialError, Credentials, FileCredentialSource

__all__ = [
    "PKI",
    "CertKeyPair",
    "CertPaths",
    "CredentialError",
    "Credentials",
    "FileCredentialSource",
    "Identity",
    "LeafSpec",
    "identity_from_auth_context",
    "identity_from_pem",
    "init_pki",
    "issue_leaf",
    "key_matches_cert",
    "leaf_specs",
    "load_ca",
    "make_ca",
    "reissue",
    "rotate_leaf",
    "write_ca_bundle",
    "write_pair",
]
