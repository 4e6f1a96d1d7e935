"""The clocks leader election reads: one protocol, a real clock, a manual clock, a skewed clock.

Leader election measures every duration on the candidate's own clock (client-go's rule, see
`elector`), so the clock is injected, never read from `time` directly:

* `now()` - monotonic seconds. Only differences of two readings of the same clock mean anything;
  this is what lease expiry, renew deadlines and retry periods are measured with.
* `wall()` - an aware UTC datetime, written into the Lease (acquireTime, renewTime). Other
  candidates never compare it with their own time; it is informational (kubectl, the chaos history).
* `sleep_until(deadline)` / `timeout_at(deadline)` - wait for, or bound an operation by, a
  `now()` reading.

`RealClock` is the process's clock. `FakeClock` only moves when a test moves it, so elections run
deterministically. `SkewedClock` runs another clock at an offset and a rate (a replica whose clock
is wrong, or runs fast or slow), for the chaos scenarios. All three also have `sleep(seconds)`, so
they serve as the `now()`/`sleep()` clocks of `kse.client.ratelimit` and `nodesim.workload` too.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

__all__ = ["Clock", "FakeClock", "RealClock", "SkewedClock"]


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds; only differences between readings are meaningful."""
        ...

    def wall(self) -> datetime:
        """The wall-clock time (aware, UTC), for timestamps written into objects."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return once `now() >= deadline` (at once if it already is)."""
        ...

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[Any]:
        """Like `asyncio.timeout_at`, on this clock: cancel the body at `deadline`, raise TimeoutError."""
        ...


class RealClock:
    """The process's monotonic clock (the event loop's own) and the system wall clock."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - self.now()))

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self.now() + seconds)

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[Any]:
        # The loop's clock is time.monotonic() by default; translate anyway, in case it is not.
        loop = asyncio.get_running_loop()
        return asyncio.timeout_at(loop.time() + (deadline - self.now()))


class FakeClock:
    """A clock that moves only when told to (`advance`, `step`, `set`).

    Sleepers and timeouts registered for a deadline fire when the clock reaches it. `advance()`
    moves time in steps, from one pending deadline to the next, and lets the event loop run after
    each step, so tasks woken at one deadline can register the next before time moves on (the
    shape of Kubernetes' fake clock with `HasWaiters` + `Step`).
    """

    def __init__(self, start: float = 1000.0, wall_start: datetime | None = None) -> None:
        self._now = start
        self._start = start
        self._wall_start = wall_start or datetime(2025, 1, 1, tzinfo=UTC)
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._timeouts: dict[int, tuple[float, asyncio.Timeout]] = {}

    # -- reading

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._now - self._start)

    # -- waiting

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._now:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._seq), fut))
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()  # a cancelled sleeper: drop it from the count on the next fire()

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._now + seconds)

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[None]:
        return self._timeout_at(deadline)

    @contextlib.asynccontextmanager
    async def _timeout_at(self, deadline: float) -> AsyncIterator[None]:
        async with asyncio.timeout(None) as cm:
            key = next(self._seq)
            if deadline <= self._now:
                cm.reschedule(asyncio.get_running_loop().time())
            else:
                self._timeouts[key] = (deadline, cm)
            try:
                yield
            finally:
                self._timeouts.pop(key, None)

    # -- inspecting

    def pending(self) -> int:
        """How many sleepers and timeouts are waiting for a future time."""
        return sum(1 for _, _, f in self._sleepers if not f.done()) + len(self._timeouts)

    def next_deadline(self) -> float | None:
        """The earliest deadline anything waits for, or None."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        candidates = [d for d, _ in self._timeouts.values()]
        if self._sleepers:
            candidates.append(self._sleepers[0][0])
        return min(candidates) if candidates else None

    # -- moving

    def set(self, now: float) -> None:
        """Jump to `now` (never backwards) and fire everything due; does not run the loop."""
        if now < self._now:
            raise ValueError(f"a monotonic clock does not go back: {now} < {self._now}")
        self._now = now
        self._fire()

    def _fire(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
        if self._timeouts:
            loop = asyncio.get_running_loop()
            for key, (deadline, cm) in list(self._timeouts.items()):
                if deadline <= self._now:
                    del self._timeouts[key]
                    cm.reschedule(loop.time())

    async def settle(self, rounds: int = 50) -> None:
        """Let every runnable task run until it blocks again (time does not move)."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def step(self) -> float | None:
        """Settle, jump to the next pending deadline (if any), settle again; returns the new time."""
        await self.settle()
        deadline = self.next_deadline()
        if deadline is None:
            return None
        self.set(max(deadline, self._now))
        await self.settle()
        return self._now

    async def advance(self, seconds: float) -> None:
        """Move `seconds` forward, stopping at every deadline on the way and settling there."""
        target = self._now + seconds
        while True:
            await self.settle()
            deadline = self.next_deadline()
            if deadline is None or deadline > target:
                break
            self.set(max(deadline, self._now))
        self.set(target)
        await self.settle()


class SkewedClock:
    """`base` seen from a machine whose clock is off by `offset` seconds and runs at `rate`.

    now() = now₀ + (base.now() - base₀) · rate + offset, anchored when built (or re-anchored by
    `set_skew`); wall() is skewed the same way. Sleeps and timeouts are translated back onto `base`,
    so a clock running at rate 2 sleeps half as long in base time. A sleeper already waiting when the
    rate changes wakes by the old mapping (then sleeps more if it woke early).
    """

    def __init__(self, base: Clock, *, offset: float = 0.0, rate: float = 1.0) -> None:
        if rate <= 0:
            raise ValueError(f"a clock rate must be positive, got {rate}")
        self._base = base
        self._offset = offset
        self._rate = rate
        self._base0 = base.now()
        self._local0 = self._base0
        self._wall_base0 = base.wall()
        self._wall_local0 = self._wall_base0

    @property
    def offset(self) -> float:
        return self._offset

    @property
    def rate(self) -> float:
        return self._rate

    def set_skew(self, *, offset: float | None = None, rate: float | None = None) -> None:
        """Change the skew from now on; `now()` continues from its current reading (plus any new offset)."""
        if rate is not None and rate <= 0:
            raise ValueError(f"a clock rate must be positive, got {rate}")
        local_now = self.now() - self._offset
        wall_now = self.wall() - timedelta(seconds=self._offset)
        self._base0 = self._base.now()
        self._local0 = local_now
        self._wall_base0 = self._base.wall()
        self._wall_local0 = wall_now
        if offset is not None:
            self._offset = offset
        if rate is not None:
            self._rate = rate

    def now(self) -> float:
        return self._local0 + (self._base.now() - self._base0) * self._rate + self._offset

    def wall(self) -> datetime:
        elapsed = (self._base.wall() - self._wall_base0).total_seconds()
        return self._wall_local0 + timedelta(seconds=elapsed * self._rate + self._offset)

    def _to_base(self, deadline: float) -> float:
        return self._base0 + (deadline - self._offset - self._local0) / self._rate

    async def sleep_until(self, deadline: float) -> None:
        while True:
            base_deadline = self._to_base(deadline)
            await self._base.sleep_until(base_deadline)
            # Loop only if the skew changed while asleep (the deadline moved later in base time).
            if self.now() >= deadline or self._base.now() >= self._to_base(deadline):
                return

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self.now() + seconds)

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[Any]:
        return self._base.timeout_at(self._to_base(deadline))
