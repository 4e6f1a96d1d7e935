"""The outcome of one conditional write, shared by the store and its group committer."""

from __future__ import annotations

from dataclasses import dataclass

from apiserver_mock.fencing import NO_GUARD, Guard
from kse.etcdclient import KeyValue


@dataclass(frozen=True, slots=True)
class WriteResult:
    """Outcome of a conditional write. On failure, `current` is the key as it is now (None: absent),
    `guard_values` the guard's keys as they are now, and `guard` the guard to retry with (renewed
    when its Lease moved but still matches the token)."""

    succeeded: bool
    revision: int
    current: KeyValue | None = None
    guard_values: tuple[KeyValue | None, ...] = ()
    guard: Guard = NO_GUARD
