"""One timer heap for many deadlines, and a bounded worker pool: how one process drives thousands of
simulated nodes without a task (or a sleep) per node or per pod.

    timers = TimerHeap(on_due=pool.submit)        # what to do with an item when it is due
    timers.push(loop.time() + 10, ("renew", node))
    async with asyncio.TaskGroup() as tg:
        tg.create_task(timers.run())               # one coroutine sleeps until the earliest deadline
        tg.create_task(pool.run())                 # K workers run the submitted coroutines

Both run until cancelled and start no tasks outside their caller's task group, so cancelling the
group leaves nothing behind (DESIGN.md: structured lifetimes).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class TimerHeap(Generic[T]):
    """Items with deadlines (event-loop time); `run()` hands each to `on_due` once it is due.

    Items due at the same time come out in push order. `on_due` is synchronous (enqueue work, do
    not await); an exception in it is logged and the heap goes on.
    """

    def __init__(self, on_due: Callable[[T], object], *, time: Callable[[], float] | None = None) -> None:
        self._on_due = on_due
        self._time = time
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        self._wake: asyncio.Event | None = None

    def _now(self) -> float:
        return self._time() if self._time is not None else asyncio.get_running_loop().time()

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, due: float, item: T) -> None:
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (due, next(self._seq), item))
        if self._wake is not None and (earliest is None or due < earliest):
            self._wake.set()

    def pop_due(self, now: float) -> list[T]:
        """Remove and return every item due at or before `now` (for callers that drive time)."""
        out: list[T] = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    async def run(self) -> None:
        self._wake = asyncio.Event()
        try:
            while True:
                for item in self.pop_due(self._now()):
                    try:
                        self._on_due(item)
                    except Exception:
                        log.exception("timer handler failed for %r", item)
                self._wake.clear()
                due = self.next_due()
                if due is None:
                    await self._wake.wait()
                    continue
                delay = due - self._now()
                if delay > 0:
                    try:
                        async with asyncio.timeout(delay):
                            await self._wake.wait()
                    except TimeoutError:
                        pass
        finally:
            self._wake = None


class WorkerPool:
    """A queue of coroutine factories run by `size` workers: bounded concurrency, no task per job.

    `submit(fn)` never blocks; `fn()` is called (and awaited) by a worker. A failing job is logged
    and counted; the pool goes on. `idle()` waits until the queue is empty and no job runs.
    """

    def __init__(self, size: int, *, name: str = "pool") -> None:
        if size < 1:
            raise ValueError(f"worker pool size must be >= 1, got {size}")
        self.size = size
        self.name = name
        self._queue: asyncio.Queue[Callable[[], Awaitable[Any]]] = asyncio.Queue()
        self.running = 0
        self.failures = 0

    def submit(self, job: Callable[[], Awaitable[Any]]) -> None:
        self._queue.put_nowait(job)

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

    async def idle(self) -> None:
        await self._queue.join()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for i in range(self.size):
                tg.create_task(self._worker(), name=f"{self.name}-{i}")

    async def _worker(self) -> None:
        while True:
            job = await self._queue.get()
            self.running += 1
            try:
                await job()
            except Exception:
                self.failures += 1
                log.exception("%s: job failed", self.name)
            finally:
                self.running -= 1
                self._queue.task_done()
