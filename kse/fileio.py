"""Replacing small files atomically: the ready files, connection files, cluster.json, clock-skew
files and layouts that one process writes while another may be reading them.

A reader sees the old content or the new, never a mix: the text goes to a temp file in the same
directory (a unique name, so two writers never share one) and is renamed over the target.
`durable=True` also fsyncs the file before the rename, for files that must survive a crash of the
machine (connection files); the rest only need to be whole for a reader on the same machine.
Certificates and keys have their own writer (`certs.pki.atomic_write`: final mode from the start,
directory fsync).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, text: str, *, durable: bool = False) -> None:
    """Replace `path` with `text` (its directory created if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
