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
from certs.rotation import (
    CAPhase,
    CARotationStatus,
    CertRenewer,
    PhaseResult,
    RotatedLeaf,
    RotationError,
    RotationOrderError,
    ca_rotation_status,
    pki_lock,
    rotate,
    rotate_ca,
    rotate_ca_add,
    rotate_ca_remove,
    rotate_ca_switch,
    rotation_deadline,
)
from certs.source import CredentialError, Credentials, FileCredentialSource

__all__ = [
    "PKI",
    "CAPhase",
    "CARotationStatus",
    "CertKeyPair",
    "CertPaths",
    "CertRenewer",
    "CredentialError",
    "Credentials",
    "FileCredentialSource",
    "Identity",
    "LeafSpec",
    "PhaseResult",
    "RotatedLeaf",
    "RotationError",
    "RotationOrderError",
    "ca_rotation_status",
    "identity_from_auth_context",
    "identity_from_pem",
    "init_pki",
    "issue_leaf",
    "key_matches_cert",
    "leaf_specs",
    "load_ca",
    "make_ca",
    "pki_lock",
    "reissue",
    "rotate",
    "rotate_ca",
    "rotate_ca_add",
    "rotate_ca_remove",
    "rotate_ca_switch",
    "rotate_leaf",
    "rotation_deadline",
    "write_ca_bundle",
    "write_pair",
]
