"""Conditional writes to etcd: the only place the API server writes.

Every write is one transaction guarded by a compare on the object's key (`version == 0` to create,
`mod_revision == rv` to update or delete) plus any `guards` the caller adds (leader fencing). The
failure branch reads the key back, so a failed write costs no extra round trip: the caller decides
from what it returns (conflict, stale cache, gone) with the current object in hand.

A fence guard (`apiserver_mock.fencing`) that failed only because its Lease moved while still
matching the token (a renewal landed in between) is re-derived from the failure branch's read and
the transaction retried here, so the caller sees a fenced write fail only when the fence is broken
or the object changed. `WriteResult.guard` is the guard for the caller's next attempt.

**Writes whose outcome is unknown** (the etcd member died between receiving the txn and answering:
`EtcdOutcomeUnknownError`, see kse.etcdclient.retry) are resolved here, the one layer that knows, for
every registry write, the key, the compared revision and what the write would leave there:

1. The same transaction is sent again (the client has already moved to another member). It is a
   compare-and-swap on the object's `mod_revision` (or on its absence), so it applies at most once
   whatever happened to the first copy: if the first one did not land, this one does (the normal
   answer); if it did land, this one's compare fails, and its failure branch reads the key.
2. A failure after an unknown outcome is checked for our own write before being taken as a conflict
   (`_landed`): the key still at the compared revision -> it did not land (only a guard failed); the
   key holding exactly our bytes -> it landed; otherwise the *first* write to the key after the
   compared revision decides (one short watch from `expect + 1`: a CAS on `expect` that applied is
   by construction that first write), and for a create the value at the key's `create_revision`.
   Landed -> success with that write's revision; not landed -> the usual failure (Conflict,
   AlreadyExists, NotFound, FencedOff), exactly what the CAS would have answered.
3. `EtcdOutcomeUnknownError` reaches the caller only when this cannot be decided within
   `resolve_budget` (no member answers, or compaction removed the history it needs).

Nothing is added to the happy path (no read before or after a write). kube-apiserver does not do
this: its etcd3 store (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go` GuaranteedUpdate)
returns the error of a failed txn to the client, and clientv3 does not retry it
(`client/v3/retry.go` isSafeRetryMutableRPC); the client retries on its own fresh read. Here the
same CAS reasoning is applied inside the API server, so the client never sees the failure.

Residual case, documented rather than guessed: a create whose first copy landed and whose object
was then deleted by someone else before step 1 re-sent it (a client that learned of the object in
the few hundred milliseconds of the failover) would be created again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from apiserver_mock.fencing import MAX_LEASE_RENEWALS, NO_GUARD, Guard
from apiserver_mock.storage.groupcommit import GroupCommitter
from apiserver_mock.storage.results import WriteResult
from kse import failpoints
from kse.etcdclient import (
    CompactedError,
    Compare,
    EtcdClient,
    EtcdOutcomeUnknownError,
    EtcdUnavailableError,
    KeyValue,
    Op,
    RangeResult,
    WatchEvent,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KeyWrite:
    """One key of a multi-key write: put `value` (None: delete the key) if the key's mod_revision
    is still `mod_revision`."""

    key: bytes
    value: bytes | None
    mod_revision: int


@dataclass(frozen=True, slots=True)
class ManyWriteResult:
    """Outcome of `Store.write_all`: as `WriteResult`, with `currents` one per written key (in the
    order given; None: absent) when it failed."""

    succeeded: bool
    revision: int
    currents: tuple[KeyValue | None, ...] = ()
    guard_values: tuple[KeyValue | None, ...] = ()
    guard: Guard = NO_GUARD


class Store:
    def __init__(
        self,
        etcd: EtcdClient,
        *,
        resolve_budget: float | None = None,
        group_commit: GroupCommitter | None = None,
    ) -> None:
        """`resolve_budget`: how long, from the first unknown outcome, a write keeps trying to find
        out whether it landed (default: twice the etcd client's per-call timeout, which fits inside
        the API clients' own request deadline). `group_commit`: coalesces the writes asked for with
        `grouped=True` into batch txns (`apiserver_mock.storage.groupcommit`); None: each write
        is its own txn."""
        self.etcd = etcd
        self.group_commit = group_commit
        self.resolve_budget = 2 * etcd.timeout if resolve_budget is None else resolve_budget
        self.resolved_landed = 0
        """Writes whose outcome was unknown and turned out applied (for logs, metrics and tests)."""
        self.resolved_not_landed = 0
        """Writes whose outcome was unknown and turned out not applied (then re-sent, or refused)."""

    async def get(self, key: bytes) -> tuple[KeyValue | None, int]:
        return await self.etcd.get(key)

    async def range(self, start: bytes, end: bytes, *, revision: int = 0, limit: int = 0) -> RangeResult:
        return await self.etcd.range(start, end, revision=revision, limit=limit)

    async def current_revision(self, key: bytes) -> int:
        """etcd's current revision, from a count-only read of one key."""
        res = await self.etcd.range(key, None, count_only=True)
        return res.revision

    async def create(
        self, key: bytes, value: bytes, guard: Guard = NO_GUARD, *, lease: int = 0, grouped: bool = False
    ) -> WriteResult:
        """Put `key` if it does not exist (and the guard holds); with a `lease`, etcd deletes it
        when that expires (`apiserver_mock.storage.leases`). `grouped`: may share a txn with
        concurrent writes (`group_commit`)."""
        op = Op.put(key, value, lease=lease)
        return await self._write(Compare.version(key) == 0, op, key, 0, guard, value, grouped)

    async def update(
        self,
        key: bytes,
        value: bytes,
        mod_revision: int,
        guard: Guard = NO_GUARD,
        *,
        lease: int = 0,
        grouped: bool = False,
    ) -> WriteResult:
        """Put `key` if nobody wrote it since `mod_revision` (and the guard holds). `grouped`: may
        share a txn with concurrent writes (`group_commit`)."""
        compare = Compare.mod_revision(key) == mod_revision
        op = Op.put(key, value, lease=lease)
        return await self._write(compare, op, key, mod_revision, guard, value, grouped)

    async def _write(
        self,
        compare: Compare,
        op: Op,
        key: bytes,
        expect: int,
        guard: Guard,
        value: bytes | None,
        grouped: bool,
    ) -> WriteResult:
        """One write: through the group committer when `grouped` and there is one, answered exactly
        as its own txn (`_txn`) answers it; else its own txn."""
        if not grouped or self.group_commit is None:
            return await self._txn(compare, op, key, expect, guard, value)
        result = await self.group_commit.submit(key, compare, op, expect, value, guard)
        if result is None:  # the batch's txn may or may not have landed: resolve this write alone
            return await self._txn(compare, op, key, expect, guard, value, in_doubt=True)
        return result

    async def delete(self, key: bytes, mod_revision: int, guard: Guard = NO_GUARD) -> WriteResult:
        """Delete `key` if nobody wrote it since `mod_revision` (and the guard holds)."""
        compare = Compare.mod_revision(key) == mod_revision
        return await self._txn(compare, Op.delete(key), key, mod_revision, guard, None)

    async def write_all(self, writes: Sequence[KeyWrite], guard: Guard = NO_GUARD) -> ManyWriteResult:
        """Apply every write in ONE transaction, or none: each compared on its key's mod_revision
        (plus the guard). For writes that must land together, as an eviction's PDB status and its
        pod (apiserver_mock.registry.eviction). An unknown outcome is resolved as for one key
        (module doc), on the first write that puts a value: all of them landed, or none did."""
        if not writes:
            raise ValueError("write_all needs at least one write")
        marker = next((w for w in writes if w.value is not None), writes[0])
        own = [Compare.mod_revision(w.key) == w.mod_revision for w in writes]
        ops = [Op.delete(w.key) if w.value is None else Op.put(w.key, w.value) for w in writes]
        reads = [*(Op.get(w.key) for w in writes), *(Op.get(k) for k in guard.keys)]
        n = len(writes)
        renewals = 0
        give_up: float | None = None
        while True:
            try:
                res = await self.etcd.txn((*own, *guard.compares), ops, reads)
            except EtcdOutcomeUnknownError as err:
                give_up = self._unknown(marker.key, err, give_up)
                continue
            except EtcdUnavailableError as err:
                if give_up is None:
                    raise
                why = f"no etcd member answered the re-sent write: {err}"
                raise self._unresolved(marker.key, why) from err
            if res.succeeded:
                if give_up is not None:
                    self.resolved_not_landed += 1
                return ManyWriteResult(True, res.revision, guard=guard)
            values = [r.kvs[0] if isinstance(r, RangeResult) and r.kvs else None for r in res.responses]
            currents = tuple(values[:n])
            if give_up is not None:
                now_there = currents[writes.index(marker)]
                landed = await self._landed(marker.key, marker.value, marker.mod_revision, now_there, give_up)
                if landed is not None:
                    self.resolved_landed += 1
                    return ManyWriteResult(True, landed, guard=guard)
            guard_values = tuple(values[n:])
            renewed = guard.renewed(guard_values) if guard.keys else None
            if renewed is None:
                break
            guard = renewed
            moved = any(
                (kv.mod_revision if kv is not None else 0) != w.mod_revision
                for kv, w in zip(currents, writes, strict=True)
            )
            renewals += 1
            if moved or renewals > MAX_LEASE_RENEWALS:
                break
        return ManyWriteResult(False, res.revision, currents, guard_values, guard)

    async def _txn(
        self,
        compare: Compare,
        op: Op,
        key: bytes,
        expect: int,
        guard: Guard,
        value: bytes | None,
        *,
        in_doubt: bool = False,
    ) -> WriteResult:
        """Run `compare` (+ the guard's compares) -> `op`. `compare` holds iff the key's mod_revision
        is `expect` (0: absent), which tells a failure of the guard alone from one of the object.
        `value` is what `op` writes (None: a delete), to recognise our own write after an unknown
        outcome (module doc). `in_doubt`: the same write was already sent once (in a batch) with
        an unknown outcome, so this starts at the module doc's step 1."""
        reads = [Op.get(key), *(Op.get(k) for k in guard.keys)]
        renewals = 0
        # Set by the first unknown outcome.
        give_up: float | None = time.monotonic() + self.resolve_budget if in_doubt else None
        while True:
            compares: Sequence[Compare] = (compare, *guard.compares) if guard.compares else (compare,)
            try:
                if failpoints.ENABLED:
                    await failpoints.inject("storage/before-commit")
                res = await self.etcd.txn(compares, [op], reads)
            except EtcdOutcomeUnknownError as err:
                give_up = self._unknown(key, err, give_up)
                continue  # re-send the same CAS (module doc, step 1)
            except EtcdUnavailableError as err:
                if give_up is None:
                    raise  # never sent anywhere: nothing was applied
                raise self._unresolved(key, f"no etcd member answered the re-sent write: {err}") from err
            if res.succeeded:
                if failpoints.ENABLED:
                    await failpoints.inject("storage/after-commit")
                if give_up is not None:
                    self.resolved_not_landed += 1
                    log.info("write to %r: the first copy did not land; the re-sent one did", key)
                return WriteResult(True, res.revision, guard=guard)
            values = [r.kvs[0] if isinstance(r, RangeResult) and r.kvs else None for r in res.responses]
            current = values[0] if values else None
            if give_up is not None:
                landed = await self._landed(key, value, expect, current, give_up)
                if landed is not None:
                    self.resolved_landed += 1
                    log.info("write to %r: outcome was unknown; it landed at revision %d", key, landed)
                    return WriteResult(True, landed, guard=guard)
            guard_values = tuple(values[1:])
            renewed = guard.renewed(guard_values) if guard.keys else None
            if renewed is None:  # the guard held (the object failed), or it is broken: the caller decides
                break
            guard = renewed
            if (current.mod_revision if current is not None else 0) != expect:
                break  # the object changed too: the caller re-decides, with the renewed guard
            renewals += 1
            if renewals > MAX_LEASE_RENEWALS:
                break
            log.debug(
                "fence lease %s renewed (revision %d) during a write; retrying",
                guard.lease,
                guard.lease_revision,
            )
        return WriteResult(False, res.revision, current, guard_values, guard)

    def _unknown(self, key: bytes, err: EtcdOutcomeUnknownError, give_up: float | None) -> float:
        """Account for one unknown outcome; returns the resolution deadline, or raises when it passed."""
        now = time.monotonic()
        if give_up is None:
            log.info("write to %r: outcome unknown (%s); resolving", key, err)
            return now + self.resolve_budget
        if now >= give_up:
            raise self._unresolved(key, str(err)) from err
        return give_up

    def _unresolved(self, key: bytes, why: str) -> EtcdOutcomeUnknownError:
        log.warning(
            "write to %r: outcome could not be resolved within %g s: %s", key, self.resolve_budget, why
        )
        return EtcdOutcomeUnknownError(
            f"write to {key!r}: outcome unknown and not resolved within {self.resolve_budget:g} s: {why}"
        )

    async def _landed(
        self, key: bytes, value: bytes | None, expect: int, current: KeyValue | None, give_up: float
    ) -> int | None:
        """After an unknown outcome and a failed re-send: the revision at which our write (CAS on
        `expect`, writing `value`, None: deleting) landed, or None if it did not (module doc, step 2)."""
        if (current.mod_revision if current is not None else 0) == expect:
            return None  # the object is as we compared it: only the guard failed, ours never applied
        if value is not None and current is not None and current.value == value:
            return current.mod_revision
        try:
            if expect == 0:
                if current is None:
                    return None
                # A create: was the key's current incarnation created by our write?
                first = await self.etcd.range(key, None, revision=current.create_revision)
                if first.kvs and first.kvs[0].value == value:
                    return current.create_revision
                return None
            # An update or delete of the version at `expect`: had it applied, it would be the first
            # write to the key after `expect` (its compare held only until then).
            event = await self._first_event(key, expect + 1, give_up)
        except CompactedError as err:
            raise self._unresolved(key, f"the key's history was compacted: {err}") from err
        except EtcdUnavailableError as err:
            raise self._unresolved(key, str(err)) from err
        if value is None:
            ours = event.type == "DELETE"
        else:
            ours = event.type == "PUT" and event.kv.value == value
        return event.kv.mod_revision if ours else None

    async def _first_event(self, key: bytes, start: int, give_up: float) -> WatchEvent:
        """The first event on `key` at or after revision `start` (the caller knows there is one)."""
        watch = self.etcd.watch(key, start_revision=start, prev_kv=False, progress_notify=False)
        try:
            async with asyncio.timeout(max(0.5, give_up - time.monotonic())):
                async for batch in watch:
                    if batch.events:
                        return batch.events[0]
        except TimeoutError:
            raise self._unresolved(key, f"no event on the key since revision {start} arrived") from None
        finally:
            watch.close_nowait()
        raise self._unresolved(key, "the history watch ended")
