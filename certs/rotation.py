"""Rotation: new leaves from the same CA, the three phases of a CA rotation, and renewal of short-lived
leaves. Everything here rewrites files in a PKI directory; running processes pick the new files up
through their reloaders (`certs.source.FileCredentialSource`: servers per handshake, clients through
`kse.client.credentials.ReloadingChannelSource`).

Leaf rotation (`rotate`) gives an identity a new key and serial from the current CA, with the same
subject, SANs and usages.

CA rotation follows the order of Kubernetes' "Manual Rotation of CA Certificates": trust the new CA
everywhere first, then move every certificate to it, and only then stop trusting the old one. Each
step waits for the previous one to have reached every process (here: their next file poll or
handshake), so at no point does a process meet a peer it cannot verify.

    phase    files afterwards                                   trust bundle      leaves signed by
    (idle)   ca.crt/.key                                        [ca]              ca
    add      ca.crt/.key (old), ca-next.crt/.key (new)          [old, new]        old
    switch   ca.crt/.key (new), ca-prev.crt (old, no key)       [old, new]        new (all reissued)
    remove   ca.crt/.key (new)                                  [new]             new

The state is read from the files themselves, never from a progress record, so every phase is
idempotent (running it again completes what a crash interrupted, or reports that nothing is left to
do), and a phase run out of order is refused with a message naming the phase to run instead.

Every writer that signs takes an exclusive lock on `<dir>/.lock` (`pki_lock`): a rotation, a CA
phase and a `CertRenewer` never interleave, so a renewal can never sign with a CA that a `switch` is
replacing.

Renewal of short-lived leaves: kse has no CSR API, so a process cannot ask the API server for a new
certificate as a kubelet does. Instead, whoever holds the CA key path (`kse up` runs everything from
one data dir) runs a `CertRenewer` per identity, which reissues the pair at a jittered 70-90 % of its
lifetime (client-go's certificate manager rule); the process using the identity just re-reads its
files (its channel source does, at the same kind of deadline and on every poll).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import fcntl
import logging
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from certs.layout import (
    CA_NEXT_STEM,
    CA_PREV_STEM,
    CA_STEM,
    PKI,
    CertPaths,
    ca_bundle_path,
    cert_path,
    key_path,
)
from certs.pki import (
    CA_COMMON_NAME,
    CA_TTL,
    CertKeyPair,
    atomic_write,
    key_matches_cert,
    leaf_ttl,
    load_ca,
    load_pair,
    make_ca,
    reissue,
    write_ca_bundle,
    write_pair,
)

log = logging.getLogger(__name__)

ALL = "all"
LOCK_FILE = ".lock"
# client-go's certificate manager: renew at a uniformly random point in [70 %, 90 %] of the lifetime.
RENEW_AT = (0.7, 0.9)


class RotationError(Exception):
    """A rotation that cannot be done as asked; the message says why and what to run instead."""


class RotationOrderError(RotationError):
    """A CA rotation phase run out of order."""


# ---------------------------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def pki_lock(pki_dir: Path) -> Iterator[None]:
    """Hold the PKI directory's writer lock (blocking; an flock, released when the process dies)."""
    fd = os.open(Path(pki_dir) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def rotation_deadline(cert: x509.Certificate, rng: random.Random | None = None) -> datetime:
    """When to renew `cert`: a uniformly random point in 70-90 % of its validity window.

    As client-go's certificate manager (`nextRotationDeadline`): the jitter spreads the renewals of
    many holders of same-aged certs, and the last 10 % is the margin for a failed attempt to retry.
    """
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    fraction = (rng or random).uniform(*RENEW_AT)
    return start + (end - start) * fraction


def _read_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(Path(path).read_bytes())


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether `ca` signed `cert` (signature check, not just a name match: both CAs may share names)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _bundle_certs(pki_dir: Path) -> list[x509.Certificate]:
    path = ca_bundle_path(pki_dir)
    return x509.load_pem_x509_certificates(path.read_bytes()) if path.is_file() else []


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _bundle_is(pki_dir: Path, cas: list[x509.Certificate]) -> bool:
    return [_der(c) for c in _bundle_certs(pki_dir)] == [_der(c) for c in cas]


def _ensure_bundle(pki_dir: Path, cas: list[x509.Certificate], actions: list[str]) -> None:
    if not _bundle_is(pki_dir, cas):
        write_ca_bundle(pki_dir, [_pem(c) for c in cas])
        actions.append(f"trust bundle now holds {_names(cas)}")


def _names(cas: list[x509.Certificate]) -> str:
    return " + ".join(_cn(c) for c in cas)


def _cn(cert: x509.Certificate) -> str:
    attrs = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    value = attrs[0].value if attrs else "?"
    return value.decode() if isinstance(value, bytes) else value


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def _leaves(pki_dir: Path) -> dict[str, CertPaths]:
    return dict(PKI.from_dir(pki_dir).leaves)


# ---------------------------------------------------------------------------------------------- leaves


@dataclass(frozen=True)
class RotatedLeaf:
    """One reissued identity: its stem, new serial, expiry and issuer CN."""

    stem: str
    serial: int
    not_after: datetime
    issuer: str


def _reissue(
    pki_dir: Path, paths: CertPaths, ca: CertKeyPair, ttl: timedelta | None, now: datetime | None
) -> RotatedLeaf:
    template = _read_cert(paths.cert)
    pair = reissue(ca, template, ttl=ttl or leaf_ttl(template), now=now)
    write_pair(paths, pair)
    cert = pair.certificate
    return RotatedLeaf(paths.stem, cert.serial_number, cert.not_valid_after_utc, _cn(ca.certificate))


def rotate(
    pki_dir: Path, identity: str, *, ttl: timedelta | None = None, now: datetime | None = None
) -> list[RotatedLeaf]:
    """New key and cert for `identity` (a stem such as "scheduler-1", or "all"), from the current CA.

    Without `ttl` each leaf keeps the lifetime it was issued with. Raises RotationError for an unknown
    identity or a CA stem (the CA is rotated with the CA phases, not here).
    """
    pki_dir = Path(pki_dir)
    with pki_lock(pki_dir):
        leaves = _leaves(pki_dir)
        if identity == ALL:
            chosen = list(leaves.values())
        elif identity in (CA_STEM, CA_NEXT_STEM, CA_PREV_STEM):
            raise RotationError(
                f"{identity!r} is a CA, not an identity: rotate CAs with `kse certs rotate-ca`"
            )
        elif identity in leaves:
            chosen = [leaves[identity]]
        else:
            raise RotationError(
                f"no identity {identity!r} in {pki_dir}; have: {', '.join(leaves) or 'none'} (or 'all')"
            )
        ca = load_ca(pki_dir)
        return [_reissue(pki_dir, paths, ca, ttl, now) for paths in chosen]


# ---------------------------------------------------------------------------------------------- CA rotation


class CAPhase(enum.Enum):
    """Where a PKI directory is in a CA rotation (read from its files)."""

    IDLE = "idle"  # one CA, nothing in progress
    ADDED = "added"  # new CA trusted beside the old one; leaves still on the old one
    SWITCHING = "switching"  # a switch was interrupted: run switch again
    SWITCHED = "switched"  # leaves on the new CA, old CA still trusted


_NEXT_STEP = {
    CAPhase.IDLE: "add",
    CAPhase.ADDED: "switch",
    CAPhase.SWITCHING: "switch",
    CAPhase.SWITCHED: "remove",
}


@dataclass(frozen=True)
class CARotationStatus:
    phase: CAPhase
    bundle: tuple[str, ...]  # CNs of the trusted CAs, in bundle order
    leaves_not_on_ca: tuple[str, ...]  # stems of leaves that ca.crt did not sign

    @property
    def next_phase(self) -> str:
        return _NEXT_STEP[self.phase]

    def describe(self) -> str:
        trusted = " + ".join(self.bundle) or "nothing"
        text = {
            CAPhase.IDLE: "no CA rotation in progress",
            CAPhase.ADDED: "CA rotation: new CA added and trusted; next: --phase switch",
            CAPhase.SWITCHING: "CA rotation: a switch was interrupted; next: --phase switch (again)",
            CAPhase.SWITCHED: "CA rotation: leaves moved to the new CA, old CA still trusted; "
            "next: --phase remove",
        }[self.phase]
        stale = f"; not signed by ca.crt: {', '.join(self.leaves_not_on_ca)}" if self.leaves_not_on_ca else ""
        return f"{text} (trust bundle: {trusted}){stale}"


def _phase(pki_dir: Path) -> CAPhase:
    has_next = cert_path(pki_dir, CA_NEXT_STEM).is_file()
    has_prev = cert_path(pki_dir, CA_PREV_STEM).is_file()
    if has_next and has_prev:
        return CAPhase.SWITCHING
    if has_next:
        return CAPhase.ADDED
    if has_prev:
        return CAPhase.SWITCHED
    return CAPhase.IDLE


def ca_rotation_status(pki_dir: Path) -> CARotationStatus:
    """The rotation state of `pki_dir`, with the trusted CAs and any leaf the current CA did not sign."""
    pki_dir = Path(pki_dir)
    ca = _read_cert(cert_path(pki_dir, CA_STEM))
    stale = tuple(s for s, p in _leaves(pki_dir).items() if not issued_by(_read_cert(p.cert), ca))
    return CARotationStatus(_phase(pki_dir), tuple(_cn(c) for c in _bundle_certs(pki_dir)), stale)


@dataclass(frozen=True)
class PhaseResult:
    """What a CA phase did: `changed` is False when it found its work already done."""

    phase: str
    changed: bool
    actions: tuple[str, ...]
    status: CARotationStatus


def _result(pki_dir: Path, phase: str, actions: list[str]) -> PhaseResult:
    return PhaseResult(phase, bool(actions), tuple(actions), ca_rotation_status(pki_dir))


def _valid_pair(stem_paths: CertPaths) -> bool:
    try:
        return key_matches_cert(stem_paths.cert.read_bytes(), stem_paths.key.read_bytes())
    except (OSError, ValueError, TypeError):
        return False


def rotate_ca_add(pki_dir: Path, *, ca_ttl: timedelta = CA_TTL, now: datetime | None = None) -> PhaseResult:
    """Phase 1: make the new CA (`ca-next.crt/.key`) and trust it beside the old one.

    Wait for every process to reload the bundle (their next poll; servers at their next handshake)
    before `switch`: after it, peers present certs only the new CA signed.
    """
    pki_dir = Path(pki_dir)
    with pki_lock(pki_dir):
        phase = _phase(pki_dir)
        if phase is CAPhase.SWITCHING:
            raise RotationOrderError(
                "a switch to the new CA was interrupted; run `--phase switch` again to finish it"
            )
        if phase is CAPhase.SWITCHED:
            raise RotationOrderError(
                "the previous rotation is not finished: every leaf is on the new CA but the old one is "
                "still trusted; run `--phase remove` before starting another rotation"
            )
        actions: list[str] = []
        old = _read_cert(cert_path(pki_dir, CA_STEM))
        next_paths = CertPaths.in_dir(pki_dir, CA_NEXT_STEM)
        if phase is CAPhase.IDLE or not _valid_pair(next_paths):
            # IDLE, or an add that died between writing the key and the cert: (re)make the CA.
            stamp = (now or datetime.now(UTC)).strftime("%Y%m%d%H%M%S")
            new_ca = make_ca(f"{CA_COMMON_NAME}-{stamp}", ttl=ca_ttl, now=now)
            write_pair(next_paths, new_ca)
            actions.append(f"new CA {_cn(new_ca.certificate)} written to {next_paths.cert.name}")
        new = _read_cert(next_paths.cert)
        _ensure_bundle(pki_dir, [old, new], actions)
        return _result(pki_dir, "add", actions)


def rotate_ca_switch(
    pki_dir: Path, *, ttl: timedelta | None = None, now: datetime | None = None
) -> PhaseResult:
    """Phase 2: the new CA becomes `ca.crt/.key` (the old cert kept as `ca-prev.crt`), every leaf is
    reissued from it (same subject and SANs; without `ttl`, the lifetime each had), and the bundle
    still trusts both, so peers that have not reloaded yet are still verified.

    Wait for every process to pick up its new pair before `remove`.
    """
    pki_dir = Path(pki_dir)
    with pki_lock(pki_dir):
        phase = _phase(pki_dir)
        if phase is CAPhase.IDLE:
            raise RotationOrderError(
                "no CA rotation in progress: run `--phase add` first, and let every process pick up "
                "the new trust bundle, before switching certificates to the new CA"
            )
        actions: list[str] = []
        ca_paths = CertPaths.in_dir(pki_dir, CA_STEM)
        next_paths = CertPaths.in_dir(pki_dir, CA_NEXT_STEM)
        prev_cert = cert_path(pki_dir, CA_PREV_STEM)
        if phase in (CAPhase.ADDED, CAPhase.SWITCHING):
            next_ca = load_pair(next_paths.cert, next_paths.key) if next_paths.key.is_file() else None
            current = ca_paths.cert.read_bytes()
            if next_ca is None or not key_matches_cert(next_ca.cert_pem, next_ca.key_pem):
                if phase is CAPhase.ADDED:
                    raise RotationError(
                        f"{next_paths.cert.name} has no matching key: run `--phase add` again to remake it"
                    )
                if current != next_paths.cert.read_bytes():
                    raise RotationError(
                        f"{next_paths.key.name} is missing but {next_paths.cert.name} is not ca.crt: "
                        "the directory was changed by hand; restore it from a backup"
                    )
                next_ca = load_ca(pki_dir)  # already in place: only the clean-up was interrupted
            if not prev_cert.is_file():
                # Before ca.crt changes: a crash after this leaves SWITCHING, which resumes here.
                atomic_write(prev_cert, current)
                actions.append(f"old CA kept as {prev_cert.name}")
            if current != next_ca.cert_pem or ca_paths.key.read_bytes() != next_ca.key_pem:
                write_pair(ca_paths, next_ca)
                actions.append(f"{_cn(next_ca.certificate)} is now ca.crt/ca.key")
            # The cert last: it is what marks the phase, so its key is never lost while it marks it.
            _unlink(next_paths.key)
            _unlink(next_paths.cert)
        ca = load_ca(pki_dir)
        old = _read_cert(prev_cert)
        _ensure_bundle(pki_dir, [old, ca.certificate], actions)
        moved = [
            _reissue(pki_dir, paths, ca, ttl, now)
            for paths in _leaves(pki_dir).values()
            if not issued_by(_read_cert(paths.cert), ca.certificate)
        ]
        if moved:
            actions.append(f"reissued from {_cn(ca.certificate)}: {', '.join(r.stem for r in moved)}")
        return _result(pki_dir, "switch", actions)


def rotate_ca_remove(pki_dir: Path) -> PhaseResult:
    """Phase 3: trust only the new CA; `ca-prev.crt` is deleted.

    Refused while any leaf is still signed by the old CA. Connections already established with an
    old-CA certificate live on until the server's max connection age closes them.
    """
    pki_dir = Path(pki_dir)
    with pki_lock(pki_dir):
        phase = _phase(pki_dir)
        if phase is CAPhase.ADDED:
            raise RotationOrderError(
                "nothing is signed by the new CA yet: run `--phase switch` first (removing the old CA "
                "now would cut off every certificate in use)"
            )
        if phase is CAPhase.SWITCHING:
            raise RotationOrderError("a switch was interrupted; run `--phase switch` again first")
        ca = _read_cert(cert_path(pki_dir, CA_STEM))
        if phase is CAPhase.IDLE:
            if not _bundle_is(pki_dir, [ca]):
                raise RotationError(
                    f"no CA rotation in progress, but {ca_bundle_path(pki_dir).name} does not hold just "
                    "ca.crt; not touching a bundle this tool did not write"
                )
            return _result(pki_dir, "remove", [])
        stale = [s for s, p in _leaves(pki_dir).items() if not issued_by(_read_cert(p.cert), ca)]
        if stale:
            raise RotationError(
                f"still signed by the old CA: {', '.join(stale)}; run `--phase switch` again to reissue "
                "them before removing the old CA"
            )
        actions: list[str] = []
        _ensure_bundle(pki_dir, [ca], actions)
        if _unlink(cert_path(pki_dir, CA_PREV_STEM)):  # after the bundle: it marks the phase
            actions.append(f"{CA_PREV_STEM}.crt deleted")
        _unlink(key_path(pki_dir, CA_NEXT_STEM))  # a stray from an interrupted switch, if any
        return _result(pki_dir, "remove", actions)


PHASES = ("add", "switch", "remove")


def rotate_ca(
    pki_dir: Path,
    phase: str,
    *,
    ttl: timedelta | None = None,
    ca_ttl: timedelta = CA_TTL,
    now: datetime | None = None,
) -> PhaseResult:
    """Run one CA rotation phase by name ("add", "switch", "remove")."""
    if phase == "add":
        return rotate_ca_add(pki_dir, ca_ttl=ca_ttl, now=now)
    if phase == "switch":
        return rotate_ca_switch(pki_dir, ttl=ttl, now=now)
    if phase == "remove":
        return rotate_ca_remove(pki_dir)
    raise ValueError(f"unknown CA rotation phase {phase!r}; phases: {', '.join(PHASES)}")


# ---------------------------------------------------------------------------------------------- renewal


class CertRenewer:
    """Reissue one identity's pair from the CA at a jittered 70-90 % of its lifetime, again and again.

        async with CertRenewer(pki_dir, "scheduler-1", timedelta(minutes=5)):
            ...   # scheduler-1.crt/.key are renewed in place; its holder re-reads them

    For processes that hold the CA key path (kse has no CSR API; see the module doc). Without `ttl`
    each renewal keeps the lifetime of the cert on disk. A cert rewritten by someone else (`kse certs
    rotate`) moves the deadline to the new cert's. An expired cert is renewed at once.
    """

    def __init__(
        self,
        pki_dir: Path,
        stem: str,
        ttl: timedelta | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        if stem in (CA_STEM, CA_NEXT_STEM, CA_PREV_STEM):
            raise ValueError(f"{stem!r} is a CA; a CertRenewer renews leaves")
        self.pki_dir = Path(pki_dir)
        self.stem = stem
        self.ttl = ttl
        self.paths = CertPaths.in_dir(self.pki_dir, stem)
        if not self.paths.cert.is_file():
            raise FileNotFoundError(f"no certificate {self.paths.cert} to renew")
        self._rng = rng or random.Random()
        self._task: asyncio.Task[None] | None = None
        self.renewals = 0
        self.deadline: datetime | None = None  # the next planned renewal
        self.last_error: BaseException | None = None
        # The most recent renewals done by `run()`: (serial replaced, planned deadline, done at).
        self.history: collections.deque[tuple[int, datetime, datetime]] = collections.deque(maxlen=32)

    def renew_now(self, now: datetime | None = None) -> RotatedLeaf:
        """Reissue the pair now (blocking: takes the directory lock and writes two files)."""
        with pki_lock(self.pki_dir):
            leaf = _reissue(self.pki_dir, self.paths, load_ca(self.pki_dir), self.ttl, now)
        self.renewals += 1
        log.info("renewed %s: serial %x, expires %s", self.stem, leaf.serial, leaf.not_after.isoformat())
        return leaf

    async def run(self) -> None:
        """Renew at each deadline until cancelled; a failed renewal is retried after a short pause."""
        failures = 0
        while True:
            cert = await asyncio.to_thread(_read_cert, self.paths.cert)
            self.deadline = rotation_deadline(cert, self._rng)
            wait = (self.deadline - datetime.now(UTC)).total_seconds()
            if wait > 0:
                await asyncio.sleep(wait)
                current = await asyncio.to_thread(_read_cert, self.paths.cert)
                if current.serial_number != cert.serial_number:
                    continue  # rotated by someone else meanwhile: plan from the new cert
            try:
                await asyncio.to_thread(self.renew_now)
            except Exception as e:  # a transient I/O error must not end renewal for good
                failures += 1
                self.last_error = e
                log.error("renewing %s failed (%s); retrying", self.stem, e)
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))
            else:
                failures = 0
                self.history.append((cert.serial_number, self.deadline, datetime.now(UTC)))

    async def __aenter__(self) -> CertRenewer:
        # One task owned by this renewer: started here, cancelled and awaited by aclose(). (certs/
        # imports nothing of ours, so not kse.tasks; the same rules by hand.) A crash is logged when
        # it happens and raised again by aclose().
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"cert-renewer-{self.stem}")
            self._task.add_done_callback(self._crashed)
        return self

    def _crashed(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            log.error("renewing %s stopped: %r", self.stem, error, exc_info=error)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
