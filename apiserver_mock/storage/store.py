"""Conditional writes to etcd: the only place the API server writes.

Every write is one transaction guarded by a compare on the object's key (`version == 0` to create,
`mod_revision == rv` to update or delete) plus any `guards` the caller adds (leader fencing). The
failure branch reads the key back, so a failed write costs no extra round trip: the caller decides
from what it returns (conflict, stale cache, gone) with the current object in hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apiserver_mock.fencing import NO_GUARD, Guard
from kse.etcdclient import Compare, EtcdClient, KeyValue, Op, RangeResult


@dataclass(frozen=True, slots=True)
class WriteResult:
    """Outcome of a conditional write. On failure, `current` is the key as it is now (None: absent)
    and `guard_values` the guard's keys as they are now."""

    succeeded: bool
    revision: int
    current: KeyValue | None = None
    guard_values: tuple[KeyValue | None, ...] = ()


class Store:
    def __init__(self, etcd: EtcdClient) -> None:
        self.etcd = etcd

    async def get(self, key: bytes) -> tuple[KeyValue | None, int]:
        return await self.etcd.get(key)

    async def range(self, start: bytes, end: bytes, *, revision: int = 0, limit: int = 0) -> RangeResult:
        return await self.etcd.range(start, end, revision=revision, limit=limit)

    async def current_revision(self, key: bytes) -> int:
        """etcd's current revision, from a count-only read of one key."""
        res = await self.etcd.range(key, None, count_only=True)
        return res.revision

    async def create(self, key: bytes, value: bytes, guard: Guard = NO_GUARD) -> WriteResult:
        """Put `key` if it does not exist (and the guard holds)."""
        return await self._txn(Compare.version(key) == 0, Op.put(key, value), key, guard)

    async def update(
        self, key: bytes, value: bytes, mod_revision: int, guard: Guard = NO_GUARD
    ) -> WriteResult:
        """Put `key` if nobody wrote it since `mod_revision` (and the guard holds)."""
        return await self._txn(Compare.mod_revision(key) == mod_revision, Op.put(key, value), key, guard)

    async def delete(self, key: bytes, mod_revision: int, guard: Guard = NO_GUARD) -> WriteResult:
        """Delete `key` if nobody wrote it since `mod_revision` (and the guard holds)."""
        return await self._txn(Compare.mod_revision(key) == mod_revision, Op.delete(key), key, guard)

    async def _txn(self, compare: Compare, op: Op, key: bytes, guard: Guard) -> WriteResult:
        compares: Sequence[Compare] = (compare, *guard.compares) if guard.compares else (compare,)
        reads = [Op.get(key), *(Op.get(k) for k in guard.keys)]
        res = await self.etcd.txn(compares, [op], reads)
        if res.succeeded:
            return WriteResult(True, res.revision)
        values = [r.kvs[0] if isinstance(r, RangeResult) and r.kvs else None for r in res.responses]
        current = values[0] if values else None
        return WriteResult(False, res.revision, current, tuple(values[1:]))
