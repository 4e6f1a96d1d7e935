"""Group commit: concurrent single-key writes coalesced into one etcd transaction.

Why: every write is one etcd txn, and on this machine the API server's cost per txn (building the
request, one grpc call into the etcd client, parsing the answer) is about a fifth of a bind's CPU;
etcd's cost per txn (a raft entry, a boltdb transaction) is paid per txn too. Under load many binds
(or creates) are in flight at once, each waiting for its own txn. Coalescing what is queued into
one txn pays those costs once per batch, as etcd's own backend batches its commits and as
databases group-commit their log.

Semantics kept, write by write:

* **Each write keeps its own compare.** The batch's txn carries every write's compare (its key's
  `mod_revision`, or `version == 0` for a create) and the batch's guard compares once (all writes
  of a batch share one guard: writes are grouped by their guard's compares). etcd applies a txn's
  success ops only if *every* compare holds, so the batch lands whole or not at all; it lands at
  one revision, every write's resourceVersion is that revision, and the watch delivers the whole
  batch as one atomic revision (as an eviction's pod and budget already are).
* **A failed batch is decided per write, as `Store._txn` decides one.** The failure branch reads
  every key and the guard's keys. A guard that merely moved (a renewal) is re-derived and the batch
  retried; a broken guard fails every write with the guard's current values (the caller answers
  FencedOff); otherwise the writes whose key moved fail with their key's current value (the caller
  answers Conflict or retries on the current object, exactly as after a single txn), and the rest
  are retried as a smaller batch.
* **An unknown outcome** (the etcd member died mid-txn) is resolved per write by the single-write
  path (`Store._txn(in_doubt=True)`): each write's CAS is re-sent, and a failing compare is checked
  for the write having landed. A batch lands whole or not at all, so each write finds out alone.
* **No write waits for a batch to fill.** A write is sent at once when fewer than `max_inflight`
  batch txns are in flight; only while they are all busy do new writes queue, and the next txn
  takes everything queued (up to etcd's `--max-txn-ops` 128 per list, and `max_bytes`). At low
  load every batch is one write, sent as before; the batches grow with the load by themselves.
* Two writes to the same key never share a txn (etcd refuses a duplicate key in one txn, and the
  second CAS must see the first's result): the second waits for the next batch.
* A write whose caller was cancelled before its batch was sent is not sent.

kube-apiserver does not batch (its etcd3 store sends one txn per write,
`staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`); this is kse's departure for a Python
write path, kept invisible to clients but for the shared revision.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field

from apiserver_mock.fencing import MAX_LEASE_RENEWALS, Guard
from apiserver_mock.storage.results import WriteResult
from kse import failpoints
from kse.etcdclient import (
    Compare,
    EtcdClient,
    EtcdOutcomeUnknownError,
    KeyValue,
    Op,
    RangeResult,
)
from kse.tasks import TaskSet

log = logging.getLogger(__name__)

# etcd's default --max-txn-ops is 128 per list (compares, success ops, failure ops each); the
# failure branch reads every key plus the guard's keys, so a batch stays under it with room.
MAX_BATCH_WRITES = 100
# etcd's default --max-request-bytes is 1.5 MiB.
MAX_BATCH_BYTES = 1 << 20
DEFAULT_MAX_INFLIGHT = 2


@dataclass(slots=True)
class PendingWrite:
    """One write waiting for its batch: put `value` at `key` (None: delete) if `compare` holds."""

    key: bytes
    compare: Compare
    op: Op
    expect: int
    value: bytes | None
    guard: Guard
    future: asyncio.Future[Outcome]
    size: int = field(default=0)


# What a batch decides for one write: its WriteResult, as a txn of its own would have answered
# it; None when the batch's outcome is unknown, so the caller resolves this write on its own.
Outcome = WriteResult | None


def guard_group(guard: Guard) -> tuple[bytes, ...]:
    """Writes with equal guard compares may share a txn."""
    return tuple(c.pb.SerializeToString() for c in guard.compares)


class GroupCommitter:
    """Coalesces concurrent writes into batch txns; `submit` returns each write's own outcome."""

    def __init__(
        self,
        etcd: EtcdClient,
        *,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
        max_writes: int = MAX_BATCH_WRITES,
        max_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        if max_inflight < 1 or max_writes < 1:
            raise ValueError("max_inflight and max_writes must be >= 1")
        self.etcd = etcd
        self.max_inflight = max_inflight
        self.max_writes = max_writes
        self.max_bytes = max_bytes
        self._queue: deque[PendingWrite] = deque()
        self._committers = 0
        self._tasks = TaskSet("group-commit", logger=log)
        self.batches = 0
        """Batch txns sent (for metrics and tests)."""
        self.batched_writes = 0
        """Writes that went out in those txns (batched_writes / batches = the mean batch size)."""

    async def aclose(self) -> None:
        await self._tasks.aclose()

    def submit(
        self, key: bytes, compare: Compare, op: Op, expect: int, value: bytes | None, guard: Guard
    ) -> asyncio.Future[Outcome]:
        """Queue one write; the future holds its outcome (or the etcd error that stopped its batch)."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        size = len(key) + (len(value) if value is not None else 0)
        self._queue.append(PendingWrite(key, compare, op, expect, value, guard, future, size))
        if self._committers < self.max_inflight:
            self._committers += 1
            self._tasks.spawn(self._commit_loop(), name="group-commit")
        return future

    async def _commit_loop(self) -> None:
        """One in-flight slot: commit batches while writes are queued, then end."""
        try:
            while batch := self._take():
                try:
                    await self._commit(batch)
                except BaseException as e:
                    for w in batch:
                        if not w.future.done():
                            if isinstance(e, asyncio.CancelledError):
                                w.future.cancel()
                            else:
                                w.future.set_exception(e)
                    if isinstance(e, asyncio.CancelledError):
                        raise
        finally:
            self._committers -= 1
            if self._tasks.closed:  # the server is stopping: what is still queued is never sent
                for w in self._queue:
                    w.future.cancel()
                self._queue.clear()

    def _take(self) -> list[PendingWrite]:
        """The next batch: the oldest live write, and every later one with the same guard and a key
        not already in the batch, up to the caps; the others stay queued in their order."""
        queue = self._queue
        while queue and queue[0].future.done():  # its caller went away before it was sent
            queue.popleft()
        if not queue:
            return []
        first = queue.popleft()
        batch = [first]
        if not queue:
            return batch
        group = guard_group(first.guard)
        keys = {first.key}
        size = first.size
        kept: deque[PendingWrite] = deque()
        while queue:
            w = queue.popleft()
            if w.future.done():
                continue
            if (
                len(batch) < self.max_writes
                and size + w.size <= self.max_bytes
                and w.key not in keys
                and (w.guard is first.guard or guard_group(w.guard) == group)
            ):
                batch.append(w)
                keys.add(w.key)
                size += w.size
            else:
                kept.append(w)
        self._queue = kept
        return batch

    async def _commit(self, batch: list[PendingWrite]) -> None:
        """Send `batch` as one txn and settle every write's future (module doc)."""
        guard = batch[0].guard
        renewals = 0
        while batch:
            self.batches += 1
            self.batched_writes += len(batch)
            compares = [w.compare for w in batch]
            compares.extend(guard.compares)
            reads = [Op.get(w.key) for w in batch]
            reads.extend(Op.get(k) for k in guard.keys)
            try:
                if failpoints.ENABLED:
                    await failpoints.inject("storage/before-commit")
                res = await self.etcd.txn(compares, [w.op for w in batch], reads)
            except EtcdOutcomeUnknownError:
                for w in batch:
                    _settle(w, None)
                return
            if res.succeeded:
                if failpoints.ENABLED:
                    await failpoints.inject("storage/after-commit")
                done = WriteResult(True, res.revision, guard=guard)
                for w in batch:
                    _settle(w, done)
                return
            values = [r.kvs[0] if isinstance(r, RangeResult) and r.kvs else None for r in res.responses]
            n = len(batch)
            guard_values = tuple(values[n:])
            renewed = guard.renewed(guard_values) if guard.keys else None
            if renewed is not None and renewals < MAX_LEASE_RENEWALS:
                # The Lease moved but still matches the token: the same writes, the new compare.
                # A write whose key moved too fails now (its caller re-decides with the new guard).
                guard = renewed
                renewals += 1
                log.debug(
                    "fence lease %s renewed (revision %d) during a batch of %d writes; retrying",
                    guard.lease,
                    guard.lease_revision,
                    len(batch),
                )
                batch = self._fail_moved(batch, values, res.revision, guard_values, guard)
                continue
            if guard.keys and renewed is None and _guard_failed(guard, guard_values):
                for w, current in zip(batch, values, strict=False):
                    _settle(w, WriteResult(False, res.revision, current, guard_values, guard))
                return
            left = self._fail_moved(batch, values, res.revision, guard_values, guard)
            if len(left) == len(batch):
                # No key moved and the guard held: nothing explains the failure (cannot happen
                # with etcd's txn semantics); decide each write on its own rather than loop.
                for w in left:
                    _settle(w, None)
                return
            batch = left

    @staticmethod
    def _fail_moved(
        batch: list[PendingWrite],
        values: list[KeyValue | None],
        revision: int,
        guard_values: tuple[KeyValue | None, ...],
        guard: Guard,
    ) -> list[PendingWrite]:
        """Fail the writes whose key is no longer at their compared revision; return the others."""
        left = []
        for w, current in zip(batch, values, strict=False):
            if (current.mod_revision if current is not None else 0) != w.expect:
                _settle(w, WriteResult(False, revision, current, guard_values, guard))
            elif not w.future.done():
                left.append(w)
        return left


def _guard_failed(guard: Guard, guard_values: tuple[KeyValue | None, ...]) -> bool:
    """The fence's Lease is no longer at the revision the guard compares (`apiserver_mock.fencing`)."""
    kv = guard_values[0] if guard_values else None
    return (kv.mod_revision if kv is not None else 0) != guard.lease_revision


def _settle(w: PendingWrite, outcome: Outcome) -> None:
    if not w.future.done():
        w.future.set_result(outcome)
