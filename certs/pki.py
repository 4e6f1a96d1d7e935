"""Issue the cluster's CA and leaf certificates and write them where processes will reload them.

Keys are ECDSA P-256: generation takes well under a millisecond (RSA-2048 takes ~50 ms), so a
test session or a chaos rotation step can mint dozens of identities without noticing, and every TLS
stack we talk to (grpc's BoringSSL, etcd's Go TLS) accepts them.

Every file is written atomically (temp file in the same directory, fsync, `os.replace`) because
servers and clients hot-reload these paths: a reader sees the old file or the new one, never half
of one. A cert and its key are still two renames, so readers must check that a pair matches
(`certs.source` does) instead of relying on write order.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.layout import (
    CA_BUNDLE_FILE,
    CA_STEM,
    CERT_SUFFIX,
    KEY_SUFFIX,
    PKI,
    CertPaths,
    LeafSpec,
    ca_bundle_path,
    cert_path,
    key_path,
    leaf_specs,
)

CA_COMMON_NAME = "kse-ca"
CA_TTL = timedelta(days=3650)
LEAF_TTL = timedelta(days=365)
# Backdating not_before absorbs small clock differences between the issuer and a verifier; without it
# a cert minted a moment ago can be "not yet valid" on a host whose clock is slightly behind.
CLOCK_SKEW = timedelta(minutes=1)
# ...but never by more than this share of a leaf's lifetime: a 3-second cert backdated by a minute
# would look 63 seconds long to anything that plans by its validity window (a renewer renewing at
# 70-90 % of it, as kubelet does, would renew a 3 s cert only after it expired).
MAX_BACKDATE_FRACTION = 0.1
CERT_MODE = 0o644
KEY_MODE = 0o600

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class CertKeyPair:
    """A certificate and its private key, as PEM bytes (the form files and grpc both take)."""

    cert_pem: bytes
    key_pem: bytes

    @cached_property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @cached_property
    def private_key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"expected an EC private key, got {type(key).__name__}")
        return key

    @property
    def serial(self) -> int:
        return self.certificate.serial_number


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (naive datetimes are ambiguous across hosts)")
    return now


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca(
    common_name: str = CA_COMMON_NAME, *, ttl: timedelta = CA_TTL, now: datetime | None = None
) -> CertKeyPair:
    """A self-signed CA that may sign leaves only (path length 0: no intermediates to reason about)."""
    now = _now(now)
    key = _new_key()
    name = _name(common_name)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + ttl)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertKeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_leaf(
    ca: CertKeyPair,
    common_name: str,
    organizations: Sequence[str] = (),
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str | IPAddress] = (),
    server: bool = False,
    client: bool = True,
    ttl: timedelta = LEAF_TTL,
    now: datetime | None = None,
) -> CertKeyPair:
    """A new key and a cert for it signed by `ca`. CN is the user, O the groups (Kubernetes' x509 authn).

    `now` lets callers mint certs that are already expired (or not yet valid) for expiry tests and
    chaos, without touching the clock.
    """
    if not common_name:
        raise ValueError("a leaf needs a non-empty common name: it is the user name (Kubernetes x509 authn)")
    if not (server or client):
        raise ValueError(f"certificate for {common_name!r} must allow server or client use (or both)")
    if server and not (dns_names or ip_addresses):
        raise ValueError(f"server certificate for {common_name!r} needs at least one DNS or IP SAN")
    key = _new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    cert = _sign(
        ca,
        _name(common_name, organizations),
        key,
        x509.ExtendedKeyUsage(usages),
        x509.SubjectAlternativeName(sans) if sans else None,
        ttl,
        _now(now),
    )
    return CertKeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def reissue(
    ca: CertKeyPair, template: x509.Certificate, *, ttl: timedelta = LEAF_TTL, now: datetime | None = None
) -> CertKeyPair:
    """A new key and cert with the same subject, SANs and usages as `template`: what rotation means."""
    try:
        eku = template.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        eku = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    try:
        san: x509.SubjectAlternativeName | None = template.extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        ).value
    except x509.ExtensionNotFound:
        san = None
    key = _new_key()
    cert = _sign(ca, template.subject, key, eku, san, ttl, _now(now))
    return CertKeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _sign(
    ca: CertKeyPair,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    eku: x509.ExtendedKeyUsage,
    san: x509.SubjectAlternativeName | None,
    ttl: timedelta,
    now: datetime,
) -> x509.Certificate:
    ca_ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Whole seconds, as the certificate stores them: the window is then exactly the backdating
        # plus the ttl, whatever the sub-second part of `now`, and `leaf_ttl` can read the ttl back.
        .not_valid_before(now.replace(microsecond=0) - leaf_backdate(ttl))
        .not_valid_after(now.replace(microsecond=0) + ttl)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,  # ECDSA signs the handshake; there is no key encipherment
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(eku, critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return builder.sign(ca.private_key, hashes.SHA256())


def leaf_backdate(ttl: timedelta) -> timedelta:
    """How far a leaf's not_before is set before its issue time: CLOCK_SKEW, or for short ttls a tenth
    of the ttl, rounded up to a whole second."""
    tenth = math.ceil(ttl.total_seconds() * MAX_BACKDATE_FRACTION)
    return min(CLOCK_SKEW, timedelta(seconds=max(1, tenth)))


def leaf_ttl(cert: x509.Certificate) -> timedelta:
    """The ttl a leaf was issued with (its validity window minus the backdating `_sign` added).

    Rotation and renewal reissue with it by default, so a short-lived identity stays short-lived (and
    does not drift). Exact for whole-second ttls issued here; for other certs it is the window less
    the backdating this module would have used.
    """
    window = int((cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds())
    skew = int(CLOCK_SKEW.total_seconds())
    for seconds in range(window - 1, max(0, window - skew) - 1, -1):
        if seconds + leaf_backdate(timedelta(seconds=seconds)).total_seconds() == window:
            return timedelta(seconds=seconds)
    return timedelta(seconds=max(1, round(window / (1 + MAX_BACKDATE_FRACTION))))


def key_matches_cert(cert_pem: bytes, key_pem: bytes) -> bool:
    """Whether `key_pem` is the private half of the cert's public key (guards against torn pairs)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    return bool(cert.public_key().public_bytes(der, spki) == key.public_key().public_bytes(der, spki))


def atomic_write(path: Path, data: bytes, mode: int = CERT_MODE) -> None:
    """Replace `path` with `data` so a concurrent reader sees the old or the new content, never a mix.

    The temp file is created with its final mode, so a key is never readable by others even briefly.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; a crash then cannot bring back the old file after a rotation.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_pair(paths: CertPaths, pair: CertKeyPair) -> None:
    """Write a pair, key first: a reader that catches the gap sees a mismatch and keeps the old pair."""
    atomic_write(paths.key, pair.key_pem, KEY_MODE)
    atomic_write(paths.cert, pair.cert_pem, CERT_MODE)


def write_ca_bundle(pki_dir: Path, ca_pems: Sequence[bytes]) -> None:
    """Write the trust bundle. More than one CA is the overlap window of a CA rotation."""
    if not ca_pems:
        raise ValueError("a CA bundle needs at least one CA")
    atomic_write(ca_bundle_path(pki_dir), b"".join(p if p.endswith(b"\n") else p + b"\n" for p in ca_pems))


def load_pair(cert_file: Path, key_file: Path) -> CertKeyPair:
    """Read a pair from disk (no match check: use `key_matches_cert` where files may be mid-rotation)."""
    return CertKeyPair(Path(cert_file).read_bytes(), Path(key_file).read_bytes())


def load_ca(pki_dir: Path) -> CertKeyPair:
    """The signing CA of a PKI dir, for issuing more leaves later (rotation, chaos, tests)."""
    return load_pair(cert_path(pki_dir, CA_STEM), key_path(pki_dir, CA_STEM))


def issue_spec(
    ca: CertKeyPair, spec: LeafSpec, *, ttl: timedelta = LEAF_TTL, now: datetime | None = None
) -> CertKeyPair:
    """Issue the leaf a `LeafSpec` from the layout describes."""
    return issue_leaf(
        ca,
        spec.common_name,
        spec.organizations,
        spec.dns_names,
        spec.ip_addresses,
        server=spec.server,
        client=spec.client,
        ttl=ttl,
        now=now,
    )


def init_pki(
    dir: Path,
    *,
    scheduler_replicas: int = 3,
    nodes: Sequence[str] = (),
    server_hosts: Sequence[str] = (),
    leaf_ttl: timedelta = LEAF_TTL,
    ca_ttl: timedelta = CA_TTL,
    overwrite: bool = False,
    now: datetime | None = None,
) -> PKI:
    """Create a CA, the trust bundle and every leaf of the layout in `dir`.

    Refuses (FileExistsError) when `dir` already holds a CA unless `overwrite`: a new CA silently
    invalidates every cert running processes hold. With `overwrite`, leaves of the old layout that the
    new one does not have are removed, since nothing would trust them any more.
    """
    pki_dir = Path(dir)
    specs = leaf_specs(scheduler_replicas=scheduler_replicas, nodes=nodes, server_hosts=server_hosts)
    existing = [p for p in (cert_path(pki_dir, CA_STEM), key_path(pki_dir, CA_STEM)) if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{pki_dir} already holds a CA ({existing[0].name})")
    pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = _now(now)
    ca = make_ca(ttl=ca_ttl, now=now)
    ca_paths = CertPaths.in_dir(pki_dir, CA_STEM)
    write_pair(ca_paths, ca)
    write_ca_bundle(pki_dir, [ca.cert_pem])
    leaves: dict[str, CertPaths] = {}
    for spec in specs:
        paths = CertPaths.in_dir(pki_dir, spec.stem)
        write_pair(paths, issue_spec(ca, spec, ttl=leaf_ttl, now=now))
        leaves[spec.stem] = paths
    if overwrite:
        _remove_stale(pki_dir, keep={CA_STEM, *leaves})
    return PKI(pki_dir, leaves)


def _remove_stale(pki_dir: Path, keep: set[str]) -> None:
    for path in [*pki_dir.glob(f"*{CERT_SUFFIX}"), *pki_dir.glob(f"*{KEY_SUFFIX}")]:
        if path.name == CA_BUNDLE_FILE or path.name.startswith("."):
            continue
        if path.name[: -len(path.suffix)] not in keep:
            path.unlink()


def rotate_leaf(
    pki_dir: Path, identity_file_stem: str, *, ttl: timedelta = LEAF_TTL, now: datetime | None = None
) -> CertKeyPair:
    """Replace one identity's pair with a new key and serial from the same CA, same subject and SANs.

    Holders of the files pick the new pair up through their reloaders. With `now` in the past and a
    short `ttl` this is also how chaos makes an identity's cert expire.
    """
    if identity_file_stem == CA_STEM:
        raise ValueError("rotate_leaf rotates leaves; the CA is rotated through the trust bundle")
    paths = CertPaths.in_dir(Path(pki_dir), identity_file_stem)
    if not paths.cert.is_file():
        raise FileNotFoundError(f"no certificate {paths.cert} to rotate")
    template = x509.load_pem_x509_certificate(paths.cert.read_bytes())
    pair = reissue(load_ca(pki_dir), template, ttl=ttl, now=now)
    write_pair(paths, pair)
    return pair
