"""One client watch: a bounded queue of serialized batches fed by the cache, drained by the gRPC stream.

The cache never waits for a watcher: `offer()` appends and returns. A watcher whose queue is full
is closed at once with RESOURCE_EXHAUSTED (its client resumes from the last revision it received),
so one slow client costs the others nothing. Replayed history and initial events come from a lazy
`backlog` iterator (references into the ring or a snapshot, serialized as they are sent); live
batches queue behind it, so order is kept.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator

import grpc

from apiserver_mock import wire
from apiserver_mock.watchcache.model import Filter


class WatchClosed(Exception):
    """The watch ended with an error status for the client."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Watcher:
    __slots__ = (
        "_backlog",
        "_end",
        "_live",
        "_waiter",
        "bookmarks",
        "filter",
        "last_revision",
        "limit",
        "next_bookmark",
        "peer",
        "start_revision",
    )

    def __init__(
        self,
        filt: Filter,
        *,
        start_revision: int,
        limit: int,
        bookmarks: bool,
        next_bookmark: float,
        backlog: Iterator[bytes] | None = None,
        peer: str = "",
    ) -> None:
        self.filter = filt
        self.limit = limit
        self.bookmarks = bookmarks
        self.next_bookmark = next_bookmark
        self.last_revision = start_revision
        self.start_revision = start_revision
        self.peer = peer
        self._backlog = backlog
        self._live: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._end: WatchClosed | bool | None = False  # False: open; None: ended OK; WatchClosed: error

    @property
    def closed(self) -> bool:
        return self._end is not False

    @property
    def error(self) -> WatchClosed | None:
        """Why the watch was closed with an error (None while open or after a normal end)."""
        return self._end if isinstance(self._end, WatchClosed) else None

    @property
    def queued(self) -> int:
        return len(self._live)

    def offer(self, data: bytes, revision: int) -> None:
        """Queue one batch (called by the cache, in revision order). Never blocks."""
        if self._end is not False:
            return
        if len(self._live) >= self.limit:
            self.close(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"watch closed: the client is too slow ({len(self._live)} batches queued, "
                f"limit {self.limit}); "
                f"resume from resourceVersion {self.last_revision}",
            )
            return
        self._live.append(data)
        self.last_revision = revision
        self._wake()

    def offer_bookmark(self, revision: int, now: float, interval: float) -> None:
        """Queue a BOOKMARK at `revision` if this watcher asked for bookmarks and one is due."""
        # Half an interval, not a whole one: progress ticks arrive every `interval` with jitter (the
        # marker write's latency), and a full interval here made a watcher skip every other tick,
        # doubling how long an idle informer waits to learn the cache's revision (a new leader's
        # catch-up waits on exactly that).
        self.next_bookmark = now + 0.5 * interval
        if self._end is not False or self._live or revision < self.last_revision:
            return  # queued events already carry progress; a full queue needs no more
        self._live.append(wire.bookmark_batch(revision))
        self.last_revision = revision
        self._wake()

    def close(self, code: grpc.StatusCode, message: str) -> None:
        if self._end is not False:
            return
        self._end = WatchClosed(code, message)
        self._live.clear()
        self._backlog = None
        self._wake()

    def finish(self) -> None:
        """End the stream with OK (timeoutSeconds reached)."""
        if self._end is not False:
            return
        self._end = None
        self._live.clear()
        self._backlog = None
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self) -> bytes | None:
        """The next serialized batch; None when the watch ended normally; raises WatchClosed."""
        while True:
            end = self._end
            if end is None:
                return None
            if isinstance(end, WatchClosed):
                raise end
            if self._backlog is not None:
                item = next(self._backlog, None)
                if item is not None:
                    return item
                self._backlog = None
                continue
            if self._live:
                return self._live.popleft()
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
