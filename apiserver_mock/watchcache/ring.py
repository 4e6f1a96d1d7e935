"""The ring of recent events of one resource, grouped by revision.

The ring covers the revisions (floor, newest]: every change of this resource at a revision in that
range is in it, so a watch from any resourceVersion >= floor can be replayed exactly. Capacity is
counted in events; when exceeded, whole revisions are dropped from the old end and `floor` moves
up to the newest dropped revision. Storage is a list with a moving start index (compacted when
half of it is garbage), so append, drop and the bisect of `since()` are all cheap. A dropped slot
lets go of its group at once, so the ring holds `capacity` events' objects, not up to twice that
until the next compaction of the list.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar, cast


class Revisioned(Protocol):
    @property
    def revision(self) -> int: ...

    def __len__(self) -> int: ...


G = TypeVar("G", bound=Revisioned)


class TooOld(Exception):
    def __init__(self, requested: int, floor: int) -> None:
        super().__init__(f"too old resource version: {requested} ({floor})")
        self.requested = requested
        self.floor = floor


class EventRing(Generic[G]):
    def __init__(self, capacity: int, floor: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"ring capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.floor = floor
        self._groups: list[G | None] = []  # None: dropped, before `_start`
        self._revs: list[int] = []
        self._start = 0
        self._events = 0

    def __len__(self) -> int:
        """Number of revision groups held."""
        return len(self._groups) - self._start

    @property
    def events(self) -> int:
        return self._events

    @property
    def newest(self) -> int:
        """The newest revision held (or the floor when empty)."""
        return self._revs[-1] if len(self) else self.floor

    def reset(self, floor: int) -> None:
        """Forget everything: the ring now covers nothing before `floor` (after a relist)."""
        self._groups.clear()
        self._revs.clear()
        self._start = 0
        self._events = 0
        self.floor = floor

    def append(self, group: G) -> None:
        rev = group.revision
        if rev <= self.newest:
            raise ValueError(f"revision {rev} is not after the ring's newest {self.newest}")
        self._groups.append(group)
        self._revs.append(rev)
        self._events += len(group)
        while self._events > self.capacity and len(self) > 1:
            self._drop_oldest()

    def raise_floor(self, revision: int) -> None:
        """Nothing at or before `revision` may be served any more (e.g. etcd compacted it)."""
        while len(self) and self._revs[self._start] <= revision:
            self._drop_oldest()
        self.floor = max(self.floor, revision)

    def _drop_oldest(self) -> None:
        group = self._groups[self._start]
        assert group is not None
        self._events -= len(group)
        self._groups[self._start] = None
        self.floor = self._revs[self._start]
        self._start += 1
        if self._start > 64 and self._start * 2 > len(self._groups):
            del self._groups[: self._start]
            del self._revs[: self._start]
            self._start = 0

    def since(self, revision: int) -> Sequence[G]:
        """The groups with revision > `revision`, oldest first. Raises TooOld below the floor."""
        if revision < self.floor:
            raise TooOld(revision, self.floor)
        i = bisect.bisect_right(self._revs, revision, lo=self._start)
        return cast("list[G]", self._groups[i:])  # i >= _start: no dropped slot
