"""A rate-limited work queue of object keys, as client-go's `util/workqueue`.

The properties controllers rely on (client-go's queue.go doc):

* fair: keys are processed in the order they were added;
* stingy: a key added many times before it is processed is processed once (the dirty set);
* a key is never processed by two workers at once: a key added while it is being processed is
  queued again when `done(key)` is called (the processing set), not handed to another worker.

On top, `add_after` (delaying queue: a timer on the loop, no task) and `add_rate_limited` with
client-go's default controller rate limiter: per item exponential backoff 5 ms·2^n up to 1000 s,
combined (the max) with an overall token bucket of 10 qps, burst 100. `forget` resets an item's
backoff after a successful sync.

Metrics (upstream names, `workqueue_*{name}`) go to a `WorkqueueMetrics` if one is given.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)

# client-go DefaultControllerRateLimiter: ItemExponentialFailureRateLimiter(5ms, 1000s) combined
# with a BucketRateLimiter(rate.NewLimiter(10, 100)).
BASE_DELAY_S = 0.005
MAX_DELAY_S = 1000.0
BUCKET_QPS = 10.0
BUCKET_BURST = 100


class QueueShutDown(Exception):
    """`get()` on a queue that was shut down and has nothing left."""


class WorkqueueMetrics(Protocol):
    """What a queue reports (client-go's workqueue MetricsProvider, by queue name)."""

    def depth(self, name: str, value: int) -> None: ...
    def add(self, name: str) -> None: ...
    def retry(self, name: str) -> None: ...
    def queue_latency(self, name: str, seconds: float) -> None: ...
    def work_duration(self, name: str, seconds: float) -> None: ...


@dataclass
class ItemExponentialRateLimiter(Generic[K]):
    """Per-item exponential backoff: base·2^failures, capped (client-go ItemExponentialFailureRateLimiter)."""

    base_delay: float = BASE_DELAY_S
    max_delay: float = MAX_DELAY_S
    failures: dict[K, int] = field(default_factory=dict)

    def when(self, item: K) -> float:
        n = self.failures.get(item, 0)
        self.failures[item] = n + 1
        if n > 64:  # 2**n would overflow a float's useful range long before; cap early
            return self.max_delay
        return min(self.base_delay * (2**n), self.max_delay)

    def forget(self, item: K) -> None:
        self.failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self.failures.get(item, 0)


@dataclass
class BucketRateLimiter:
    """The overall token bucket: the wait before the next token (client-go BucketRateLimiter)."""

    qps: float = BUCKET_QPS
    burst: int = BUCKET_BURST
    clock: Callable[[], float] = time.monotonic
    _tokens: float = -1.0
    _last: float = 0.0

    def when(self) -> float:
        now = self.clock()
        if self._tokens < 0:
            self._tokens, self._last = float(self.burst), now
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0  # reserve, as rate.Limiter.Reserve: a debt is a wait
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps


class RateLimitingQueue(Generic[K]):
    """The queue (see the module doc). asyncio-safe; not thread-safe."""

    def __init__(
        self,
        name: str,
        *,
        metrics: WorkqueueMetrics | None = None,
        item_limiter: ItemExponentialRateLimiter[K] | None = None,
        bucket: BucketRateLimiter | None = None,
    ) -> None:
        self.name = name
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._waiting: dict[K, asyncio.TimerHandle] = {}
        self._getters: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._metrics = metrics
        self._items = item_limiter or ItemExponentialRateLimiter()
        self._bucket = bucket or BucketRateLimiter()

    # -- adding

    def add(self, item: K) -> None:
        """Queue `item` unless it is already waiting; a key being processed is re-queued at `done`."""
        if self._shutting_down or item in self._dirty:
            return
        if self._metrics is not None:
            self._metrics.add(self.name)
        self._dirty.add(item)
        self._added_at.setdefault(item, time.monotonic())
        if item in self._processing:
            return
        self._queue.append(item)
        self._report_depth()
        self._wake()

    def add_after(self, item: K, delay: float) -> None:
        """Add `item` after `delay` seconds (at once when <= 0). An earlier pending timer wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        pending = self._waiting.get(item)
        if pending is not None:
            if pending.when() <= due:
                return
            pending.cancel()
        self._waiting[item] = loop.call_at(due, self._fire, item)

    def _fire(self, item: K) -> None:
        self._waiting.pop(item, None)
        self.add(item)

    def add_rate_limited(self, item: K) -> None:
        """Add after the rate limiters' delay: the item's backoff or the bucket's, whichever is longer."""
        if self._metrics is not None:
            self._metrics.retry(self.name)
        self.add_after(item, max(self._items.when(item), self._bucket.when()))

    def forget(self, item: K) -> None:
        """Stop tracking `item`'s failures (after a successful sync)."""
        self._items.forget(item)

    def num_requeues(self, item: K) -> int:
        return self._items.num_requeues(item)

    # -- taking

    async def get(self) -> K:
        """The next key (waits); the caller must call `done(key)` when finished with it."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown(self.name)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._getters:
                    self._getters.remove(waiter)
        item = self._queue.popleft()
        now = time.monotonic()
        added = self._added_at.pop(item, now)
        if self._metrics is not None:
            self._metrics.queue_latency(self.name, now - added)
        self._processing.add(item)
        self._started_at[item] = now
        self._dirty.discard(item)
        self._report_depth()
        return item

    def done(self, item: K) -> None:
        """Finished with `item`; if it was added meanwhile, it is queued again now."""
        self._processing.discard(item)
        started = self._started_at.pop(item, None)
        if self._metrics is not None and started is not None:
            self._metrics.work_duration(self.name, time.monotonic() - started)
        if item in self._dirty:
            self._queue.append(item)
            self._report_depth()
            self._wake()

    def __len__(self) -> int:
        return len(self._queue)

    def shut_down(self) -> None:
        """No more adds; `get` raises QueueShutDown once the queue is empty. Timers are cancelled."""
        self._shutting_down = True
        for handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        self._wake()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # -- internals

    def _report_depth(self) -> None:
        if self._metrics is not None:
            self._metrics.depth(self.name, len(self._queue))

    def _wake(self) -> None:
        """Wake every waiting `get`; those that find the queue empty again wait again."""
        for waiter in self._getters:
            if not waiter.done():
                waiter.set_result(None)
