"""Conditional writes to etcd: the only place the API server writes.

Every write is one transaction guarded by a compare on the object's key (`version == 0` to create,
`mod_revision == rv` to update or delete) plus any `guards` the caller adds (leader fencing). The
failure branch reads the key back, so a failed write costs no extra round trip: the caller decides
from what it returns (conflict, stale cache, gone) with the current object in hand.

A fence guard (`apiserver_mock.fencing`) that failed only because its Lease moved while still
matching the token (a renewal landed in between) is re-derived from the failure branch's read and
the transaction retried here, so the caller sees a fenced write fail only when the fence is broken
or the object changed. `WriteResult.guard` is the guard for the caller's next attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from apiserver_mock.fencing import MAX_LEASE_RENEWALS, NO_GUARD, Guard
from kse.etcdclient import Compare, EtcdClient, KeyValue, Op, RangeResult

log = logging.getLogger(__name__)


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
        return await self._txn(Compare.version(key) == 0, Op.put(key, value), key, 0, guard)

    async def update(
        self, key: bytes, value: bytes, mod_revision: int, guard: Guard = NO_GUARD
    ) -> WriteResult:
        """Put `key` if nobody wrote it since `mod_revision` (and the guard holds)."""
        compare = Compare.mod_revision(key) == mod_revision
        return await self._txn(compare, Op.put(key, value), key, mod_revision, guard)

    async def delete(self, key: bytes, mod_revision: int, guard: Guard = NO_GUARD) -> WriteResult:
        """Delete `key` if nobody wrote it since `mod_revision` (and the guard holds)."""
        compare = Compare.mod_revision(key) == mod_revision
        return await self._txn(compare, Op.delete(key), key, mod_revision, guard)

    async def _txn(self, compare: Compare, op: Op, key: bytes, expect: int, guard: Guard) -> WriteResult:
        """Run `compare` (+ the guard's compares) -> `op`. `compare` holds iff the key's mod_revision
        is `expect` (0: absent), which tells a failure of the guard alone from one of the object."""
        reads = [Op.get(key), *(Op.get(k) for k in guard.keys)]
        for _ in range(MAX_LEASE_RENEWALS + 1):
            compares: Sequence[Compare] = (compare, *guard.compares) if guard.compares else (compare,)
            res = await self.etcd.txn(compares, [op], reads)
            if res.succeeded:
                return WriteResult(True, res.revision, guard=guard)
            values = [r.kvs[0] if isinstance(r, RangeResult) and r.kvs else None for r in res.responses]
            current = values[0] if values else None
            guard_values = tuple(values[1:])
            renewed = guard.renewed(guard_values) if guard.keys else None
            if renewed is None:  # the guard held (the object failed), or it is broken: the caller decides
                break
            guard = renewed
            if (current.mod_revision if current is not None else 0) != expect:
                break  # the object changed too: the caller re-decides, with the renewed guard
            log.debug(
                "fence lease %s renewed (revision %d) during a write; retrying",
                guard.lease,
                guard.lease_revision,
            )
        return WriteResult(False, res.revision, current, guard_values, guard)
