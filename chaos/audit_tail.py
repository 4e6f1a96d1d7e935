"""Follows the API server's audit log while a run goes on: accepted binds per fence term.

Only the driver's waits read it (`chaos.waits`: "has the new leader bound pods yet?"), to pace a
run; the checkers read the whole audit log afterwards (`chaos.history`), never this.
"""

from __future__ import annotations

import os
from collections import Counter, deque
from collections.abc import Sequence
from pathlib import Path

__all__ = ["AuditTail"]

BIND_TIMES_KEPT = 100_000


class AuditTail:
    """Accepted binds per fence term (holder, leaseTransitions) and per holder, read incrementally
    from one or more audit logs (a torn last line is kept for the next read)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self._offsets = [0] * len(self.paths)
        self._inodes: list[int | None] = [None] * len(self.paths)
        self._partial = [b""] * len(self.paths)
        self.binds: Counter[tuple[str, int]] = Counter()
        self.by_holder: Counter[str] = Counter()
        # When each accepted bind was audited, per holder (the newest BIND_TIMES_KEPT), for rates.
        self.bind_times: dict[str, deque[float]] = {}

    def poll(self) -> None:
        from kse.audit import AuditRecord

        for i, path in enumerate(self.paths):
            try:
                with path.open("rb") as f:
                    inode = os.fstat(f.fileno()).st_ino
                    if inode != self._inodes[i]:  # rotated (--audit-log-maxsize): a new file
                        self._inodes[i], self._offsets[i], self._partial[i] = inode, 0, b""
                    f.seek(self._offsets[i])
                    data = f.read()
            except FileNotFoundError:
                continue
            self._offsets[i] += len(data)
            lines = (self._partial[i] + data).split(b"\n")
            self._partial[i] = lines.pop()
            for raw in lines:
                if b'"bind"' not in raw:
                    continue
                try:
                    rec = AuditRecord.from_json(raw.decode())
                except (ValueError, TypeError):
                    continue
                if rec.verb == "bind" and rec.code == "OK" and rec.fence is not None:
                    self.binds[(rec.fence.holder, rec.fence.transitions)] += 1
                    self.by_holder[rec.fence.holder] += 1
                    times = self.bind_times.setdefault(rec.fence.holder, deque(maxlen=BIND_TIMES_KEPT))
                    times.append(rec.ts)

    def rate(self, holder: str, window: float, now: float) -> float:
        """Accepted binds per second by `holder` over the `window` seconds before `now` (wall clock)."""
        self.poll()
        times = self.bind_times.get(holder, ())
        return sum(1 for t in times if now - window <= t <= now) / window

    def count(self, holder: str, transitions: int | None = None) -> int:
        """Accepted binds by `holder` so far (under its term `transitions`, if given)."""
        self.poll()
        if transitions is None:
            return self.by_holder[holder]
        return self.binds[(holder, transitions)]
