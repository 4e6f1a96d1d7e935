"""The watch cache of one resource: one etcd watch, the current objects, a ring of recent events.

Life cycle (`run`): list the resource's prefix at one revision R, then watch etcd from R + 1. Every
etcd batch (all events of one revision) updates the objects, is appended to the ring as one
`RevisionGroup`, and is offered to every client watcher, in order, synchronously (so a watcher's
stream is ordered, unique and atomic per revision by construction). If etcd's watch reports that its
resume point was compacted, the cache re-lists, and its watchers are closed (they resume, and get
"too old" if they must re-list too).

`revision` is the etcd revision the cache is known to be complete up to. It advances with events,
with etcd's progress notifications, and with the resource's *progress marker*: the key
`<prefix>/<resource>` (no trailing slash, so no object key and no list range contains it) lies in the
watched range, so a write to it comes back through this watch, after every earlier event. That is a
progress request that is ordered on every etcd release (etcd's own WatchProgressRequest is not before
3.5.8, see kse/etcdclient/watch.py). The cache writes it for consistent reads and for bookmarks on a
resource that sees no writes.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import logging
from collections.abc import Iterator, Sequence

import grpc

from apiserver_mock import wire
from apiserver_mock.watchcache.model import CachedObject, CacheEvent, Filter, RevisionGroup
from apiserver_mock.watchcache.ring import EventRing, TooOld
from apiserver_mock.watchcache.watcher import Watcher
from kse import failpoints
from kse.etcdclient import (
    CompactedError,
    EtcdClient,
    EtcdError,
    EtcdUnavailableError,
    WatchBatch,
    prefix_range_end,
)
from kse.objects.kinds import Kind
from kse.tasks import TaskSet

log = logging.getLogger(__name__)

LIST_PAGE = 1000
INITIAL_EVENTS_PER_BATCH = 500
_RETRY_START = 0.1
_RETRY_MAX = 2.0


class WatchCache:
    def __init__(
        self,
        kind: Kind,
        etcd: EtcdClient,
        prefix: bytes,
        *,
        capacity: int = 10_000,
        queue_limit: int = 1000,
        bookmark_interval: float = 1.0,
    ) -> None:
        self.kind = kind
        self._etcd = etcd
        self.marker_key = prefix + b"/" + kind.resource.encode()
        self.key_prefix = self.marker_key + b"/"
        self._range_end = prefix_range_end(self.key_prefix)
        self.objects: dict[bytes, CachedObject] = {}
        self._sorted: list[bytes] | None = None
        self.ring: EventRing[RevisionGroup] = EventRing(capacity)
        self.revision = 0
        self.ready = asyncio.Event()
        self.queue_limit = queue_limit
        self.bookmark_interval = bookmark_interval
        self._watchers: set[Watcher] = set()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._marker: asyncio.Task[int] | None = None
        # The shared progress-marker write outlives a caller that gives up on it, so the cache
        # owns it; run() closes this when it ends. Every caller awaits the write's result, so a
        # failure (etcd down) reaches them and is only logged at debug level here.
        self._background = TaskSet(
            f"{kind.resource}-watch-cache", logger=log, failure_level=logging.DEBUG, expected=(EtcdError,)
        )
        self.relists = 0

    # ------------------------------------------------------------------ keys

    def key(self, namespace: str, name: str) -> bytes:
        if self.kind.namespaced:
            return self.key_prefix + namespace.encode() + b"/" + name.encode()
        return self.key_prefix + name.encode()

    def range_for(self, namespace: str) -> tuple[bytes, bytes]:
        """The etcd key range of one namespace (or of the whole resource when "" or cluster-scoped)."""
        if namespace and self.kind.namespaced:
            start = self.key_prefix + namespace.encode() + b"/"
            return start, prefix_range_end(start)
        return self.key_prefix, self._range_end

    def get(self, key: bytes) -> CachedObject | None:
        return self.objects.get(key)

    @property
    def watcher_count(self) -> int:
        return len(self._watchers)

    @property
    def wants_bookmarks(self) -> bool:
        return any(w.bookmarks for w in self._watchers)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """List, then watch, forever (re-listing after a compaction); cancel to stop."""
        try:
            await self._list_and_watch()
        finally:
            await self._background.aclose()

    async def _list_and_watch(self) -> None:
        delay = _RETRY_START
        while True:
            try:
                rev = await self._list()
                delay = _RETRY_START
                watch = self._etcd.watch(
                    self.marker_key,
                    self._range_end,
                    start_revision=rev + 1,
                    prev_kv=False,
                    progress_notify=True,
                )
                async with watch:
                    async for batch in watch:
                        self._apply(batch)
            except asyncio.CancelledError:
                raise
            except CompactedError as e:
                log.warning(
                    "%s watch cache: etcd compacted past revision %d; re-listing",
                    self.kind.resource,
                    e.requested_revision,
                )
            except Exception as e:  # etcd down during the list, or a bug: log, back off, re-list
                log.warning(
                    "%s watch cache: %s: %s; re-listing in %.1fs",
                    self.kind.resource,
                    type(e).__name__,
                    e,
                    delay,
                    exc_info=not _is_etcd_error(e),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
            self._close_watchers(grpc.StatusCode.UNAVAILABLE, "watch cache re-initialized; resume the watch")

    async def _list(self) -> int:
        objects: dict[bytes, CachedObject] = {}
        start, rev = self.key_prefix, 0
        while True:
            res = await self._etcd.range(start, self._range_end, revision=rev, limit=LIST_PAGE)
            rev = rev or res.revision
            for kv in res.kvs:
                obj = self.decode(kv.key, kv.value, kv.mod_revision)
                if obj is not None:
                    objects[kv.key] = obj
            if not res.more or not res.kvs:
                break
            start = res.kvs[-1].key + b"\x00"
        if self.ready.is_set():
            self.relists += 1
        self.objects = objects
        self._sorted = None
        self.ring.reset(rev)
        self._advance(rev)
        self.ready.set()
        log.info("%s watch cache: listed %d objects at revision %d", self.kind.resource, len(objects), rev)
        return rev

    def decode(self, key: bytes, value: bytes, revision: int) -> CachedObject | None:
        try:
            return CachedObject(self.kind, key, value, revision, len(self.key_prefix))
        except Exception as e:  # a key that is not UTF-8 must not stop the cache
            log.error(
                "%s watch cache: cannot take %r at revision %d: %s", self.kind.resource, key, revision, e
            )
            return None

    def _apply(self, batch: WatchBatch) -> None:
        rev = batch.revision
        events: list[CacheEvent] = []
        prefix, objects = self.key_prefix, self.objects
        for ev in batch.events:
            key = ev.kv.key
            if not key.startswith(prefix):
                continue  # the progress marker (or a stray key): progress only
            prev = objects.get(key)
            if ev.type == "PUT":
                cur = self.decode(key, ev.kv.value, rev)
                if cur is None:
                    continue
                objects[key] = cur
                if prev is None:
                    self._sorted = None
                events.append(CacheEvent(rev, cur, prev))
            elif prev is not None:
                del objects[key]
                self._sorted = None
                events.append(CacheEvent(rev, None, prev))
        group = RevisionGroup(rev, tuple(events)) if events else None
        if group is not None:
            self.ring.append(group)
        self._dispatch(group, rev)
        self._advance(rev)

    def _dispatch(self, group: RevisionGroup | None, rev: int) -> None:
        if not self._watchers:
            return
        if failpoints.ENABLED and group is not None:
            injected = failpoints.check("watchcache/dispatch")
            if injected == "drop":
                return  # the revision is in the cache and its ring, but no watcher is told
            if injected == "duplicate":
                self._offer(group, rev)
        self._offer(group, rev)

    def _offer(self, group: RevisionGroup | None, rev: int) -> None:
        now = asyncio.get_running_loop().time()
        interval = self.bookmark_interval
        for w in self._watchers:
            data = w.filter.batch(group) if group is not None else None
            if data is not None:
                w.offer(data, rev)
            elif w.bookmarks and now >= w.next_bookmark:
                w.offer_bookmark(rev, now, interval)

    def _advance(self, rev: int) -> None:
        if rev > self.revision:
            self.revision = rev
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.revision:
            _, _, fut = heapq.heappop(waiters)
            if not fut.done():
                fut.set_result(None)

    def _close_watchers(self, code: grpc.StatusCode, message: str) -> None:
        for w in list(self._watchers):
            w.close(code, message)

    def close_all(self, message: str) -> None:
        self._close_watchers(grpc.StatusCode.UNAVAILABLE, message)

    # ------------------------------------------------------------------ freshness

    async def request_progress(self) -> int:
        """Write the progress marker; returns its revision (the cache reaches it through its watch).

        Concurrent callers share one write."""
        fut = self._marker
        if fut is None or fut.done():
            fut = self._background.spawn(self._write_marker(), name=f"{self.kind.resource}-progress-marker")
            self._marker = fut
        return await asyncio.shield(fut)

    async def _write_marker(self) -> int:
        # Only its revision matters, so writing it twice is harmless: retried across members.
        return await self._etcd.put(self.marker_key, b"", repeatable=True)

    async def wait_for(self, rev: int, within: float) -> bool:
        """Wait until the cache is complete up to `rev`; False on timeout."""
        if self.revision >= rev:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (rev, next(self._seq), fut))
        try:
            await asyncio.wait_for(fut, within)
            return True
        except TimeoutError:
            return False
        finally:
            if not fut.done():
                fut.cancel()

    async def sync(self, within: float = 3.0) -> bool:
        """Make the cache as fresh as etcd is now (a consistent read point); False on timeout.

        etcd's current revision R comes from a count-only read of the marker key; if the cache has
        reached R, it is fresh. Otherwise the marker is written: its revision is at least R, and it
        comes back through the watch after everything before it, so waiting for it is waiting for
        everything committed so far (and costs one small write only when the cache is behind).
        """
        res = await self._etcd.range(self.marker_key, None, count_only=True)
        if self.revision >= res.revision:
            return True
        marker_rev = await self.request_progress()
        return await self.wait_for(marker_rev, within)

    async def wait_fresh(self, rev: int, within: float = 3.0) -> bool:
        """Wait until the cache reaches `rev` (a revision a client saw elsewhere), asking for progress."""
        if self.revision >= rev:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        marker_rev = await self.request_progress()
        if marker_rev < rev:
            return False  # etcd itself has not reached `rev`
        return await self.wait_for(rev, max(0.0, deadline - loop.time()))

    async def check_compaction(self, rev: int) -> None:
        """Raise TooOld if etcd compaction has removed events after `rev` (rev < self.revision).

        One count-only read at `rev + 1`. If etcd cannot answer, the ring alone decides: it holds
        every event it claims to, so serving from it stays correct during an etcd outage.
        """
        if rev + 1 > self.revision or rev < self.ring.floor:
            return
        try:
            await self._etcd.range(self.marker_key, None, revision=rev + 1, count_only=True)
        except EtcdUnavailableError as e:
            log.debug("%s watch cache: compaction check skipped: %s", self.kind.resource, e)
        except CompactedError as e:
            if e.compact_revision:
                self.ring.raise_floor(e.compact_revision - 1)
            raise TooOld(rev, max(self.ring.floor, e.compact_revision - 1)) from None

    # ------------------------------------------------------------------ reads

    def sorted_keys(self) -> list[bytes]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def snapshot(self, filt: Filter, start_after: bytes = b"") -> Iterator[CachedObject]:
        """The current objects matching `filt`, in key order (optionally after a key)."""
        keys = self.sorted_keys()
        start, end = self.range_for(filt.namespace)
        if start_after and start_after >= start:
            start = start_after + b"\x00"
        lo = bisect.bisect_left(keys, start)
        hi = bisect.bisect_left(keys, end, lo)
        objects = self.objects
        if filt.labels is None and filt.fields is None:
            return (objects[k] for k in keys[lo:hi])
        return (o for k in keys[lo:hi] if filt.matches(o := objects[k]))

    # ------------------------------------------------------------------ watchers

    def add_watcher(
        self,
        filt: Filter,
        *,
        from_revision: int | None,
        send_initial_events: bool,
        bookmarks: bool,
        peer: str = "",
    ) -> Watcher:
        """Register a watcher at the cache's current revision. Synchronous on purpose: the replay or
        snapshot and the registration happen with no event in between.

        from_revision: replay the ring from there (raises TooOld below the ring's floor); None: start now.
        """
        now = asyncio.get_running_loop().time()
        rev = self.revision
        backlog: Iterator[bytes] | None = None
        if send_initial_events:
            backlog = _initial_events(list(self.snapshot(filt)), rev)
        elif from_revision is not None and from_revision < rev:
            backlog = _replay(self.ring.since(from_revision), filt)
        w = Watcher(
            filt,
            start_revision=rev,
            limit=self.queue_limit,
            bookmarks=bookmarks,
            next_bookmark=now + self.bookmark_interval,
            backlog=backlog,
            peer=peer,
        )
        self._watchers.add(w)
        return w

    def remove_watcher(self, w: Watcher) -> None:
        self._watchers.discard(w)


def _replay(groups: Sequence[RevisionGroup], filt: Filter) -> Iterator[bytes]:
    for group in groups:
        data = filt.batch(group)
        if data is not None:
            yield data


def _initial_events(objects: list[CachedObject], rev: int) -> Iterator[bytes]:
    for i in range(0, len(objects), INITIAL_EVENTS_PER_BATCH):
        yield b"".join(
            wire.frame_event(wire.watch_event(wire.ADDED, o.wire, o.revision))
            for o in objects[i : i + INITIAL_EVENTS_PER_BATCH]
        )
    yield wire.bookmark_batch(rev)


def _is_etcd_error(e: Exception) -> bool:
    return isinstance(e, EtcdError)


__all__ = ["TooOld", "WatchCache"]
