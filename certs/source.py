"""A file-backed credential source that servers and clients reload their TLS material from.

grpc's dynamic server credentials call a fetcher on every new handshake, on a grpc core thread, and
keep the old config when it returns None. So `poll()` must be cheap when nothing changed (three
`stat` calls), thread-safe, and must never hand out a torn pair: rotation writes cert and key with
two separate renames, and a reader can land between them. A pair whose key does not match its cert,
or a file that does not parse, is treated as "not changed yet"; the next rename makes it consistent
and changes the stat, and the next poll picks it up.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from certs.layout import CertPaths
from certs.pki import key_matches_cert

_StatKey = tuple[int, int, int]  # (mtime_ns, size, inode): an atomic replace always changes the inode


@dataclass(frozen=True)
class Credentials:
    """One consistent snapshot of the TLS material. `version` increases by one per accepted change."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes
    version: int


class CredentialError(Exception):
    """No consistent credentials could be read, and there were none before to fall back on."""


class FileCredentialSource:
    """Cert, key and CA bundle read from files, re-read when the files change.

    The first `poll()` (or `load()`) reads the files; after that `poll()` returns new credentials
    only when the content changed and is consistent, else None.
    """

    def __init__(self, cert_path: Path, key_path: Path, ca_bundle_path: Path) -> None:
        self._paths = (Path(cert_path), Path(key_path), Path(ca_bundle_path))
        self._lock = threading.Lock()
        self._seen: tuple[_StatKey, ...] | None = None
        self._digest: bytes | None = None
        self._current: Credentials | None = None
        self._last_error: str | None = None

    @classmethod
    def from_paths(cls, paths: CertPaths) -> FileCredentialSource:
        """Source for one identity of a PKI dir."""
        return cls(paths.cert, paths.key, paths.ca_bundle)

    @property
    def paths(self) -> tuple[Path, Path, Path]:
        """(cert, key, CA bundle), in that order."""
        return self._paths

    @property
    def current(self) -> Credentials | None:
        """The last accepted credentials, without touching the files."""
        with self._lock:
            return self._current

    @property
    def last_error(self) -> str | None:
        """Why the most recent change was not accepted (for logs); None after an accepted change."""
        with self._lock:
            return self._last_error

    def load(self) -> Credentials:
        """The current credentials, re-reading the files if they changed.

        Raises CredentialError only when no consistent credentials were ever read; once some were,
        an inconsistent state on disk leaves them in place (see the module docstring).
        """
        with self._lock:
            self._refresh()
            if self._current is None:
                raise CredentialError(
                    f"no usable credentials in {', '.join(map(str, self._paths))}: {self._last_error}"
                )
            return self._current

    def poll(self) -> Credentials | None:
        """New credentials if the files changed to a consistent new state since the last read, else None."""
        with self._lock:
            return self._current if self._refresh() else None

    def _refresh(self) -> bool:
        """Read the files if their stat changed; True when new credentials were accepted. Lock held."""
        try:
            stats = tuple(_stat_key(p) for p in self._paths)
        except OSError as e:
            self._last_error = f"stat: {e}"
            return False
        if stats == self._seen:
            return False
        try:
            # Stat before read: if a file changes after the stat, the next poll sees a new stat and
            # reads again, so no change is missed.
            cert_pem, key_pem, ca_pem = (p.read_bytes() for p in self._paths)
        except OSError as e:
            self._last_error = f"read: {e}"
            return False
        self._seen = stats
        digest = _digest(cert_pem, key_pem, ca_pem)
        if digest == self._digest:
            return False
        error = _inconsistency(cert_pem, key_pem, ca_pem)
        if error is not None:
            self._last_error = error
            return False
        version = 1 if self._current is None else self._current.version + 1
        self._current = Credentials(cert_pem, key_pem, ca_pem, version)
        self._digest = digest
        self._last_error = None
        return True


def _stat_key(path: Path) -> _StatKey:
    st = os.stat(path)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _digest(*parts: bytes) -> bytes:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def _inconsistency(cert_pem: bytes, key_pem: bytes, ca_pem: bytes) -> str | None:
    """Why these bytes must not be served (torn pair, unparsable file), or None if they are fine."""
    try:
        if not x509.load_pem_x509_certificates(ca_pem):
            return "CA bundle holds no certificate"
        if not key_matches_cert(cert_pem, key_pem):
            return "private key does not match certificate (pair mid-rotation?)"
    except Exception as e:  # any parse failure means "not ready", never a crash on a grpc core thread
        return f"unparsable credentials: {type(e).__name__}: {e}"
    return None
