"""The client token bucket, driven by a fake clock (no real time passes in these tests)."""

from __future__ import annotations

import asyncio
import heapq
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kse.client.ratelimit import TokenBucketRateLimiter, new_token_bucket


class FakeClock:
    """A clock whose time moves only when the test advances it."""

    def __init__(self) -> None:
        self.t = 1000.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.t + seconds, next(self._seq), fut))
        await fut

    def sleepers(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking sleepers in due order, and let woken tasks run."""
        end = self.t + seconds
        while self._sleepers and self._sleepers[0][0] <= end + 1e-12:
            due, _, fut = heapq.heappop(self._sleepers)
            self.t = max(self.t, due)
            if not fut.done():
                fut.set_result(None)
            await settle()
        self.t = end
        await settle()


async def settle() -> None:
    """Let every ready task run until it blocks again (no time passes)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_burst_is_available_at_once() -> None:
    clock = FakeClock()
    rl = TokenBucketRateLimiter(qps=2, burst=3, clock=clock)
    for _ in range(3):
        assert await rl.acquire() == 0.0
    assert rl.stats.calls == 3
    assert rl.stats.waited == 0
    assert clock.sleepers() == 0


async def test_waiters_are_spaced_by_one_over_qps_in_call_order() -> None:
    clock = FakeClock()
    rl = TokenBucketRateLimiter(qps=2, burst=1, clock=clock)
    assert await rl.acquire() == 0.0
    order: list[int] = []

    async def caller(i: int) -> float:
        waited = await rl.acquire()
        order.append(i)
        return waited

    tasks = [asyncio.create_task(caller(i)) for i in range(3)]
    await settle()
    assert clock.sleepers() == 3
    assert order == []
    await clock.advance(0.5)
    assert order == [0]
    await clock.advance(0.5)
    assert order == [0, 1]
    await clock.advance(0.5)
    assert order == [0, 1, 2]
    assert [t.result() for t in tasks] == pytest.approx([0.5, 1.0, 1.5])
    assert rl.stats.waited == 3
    assert rl.stats.total_seconds == pytest.approx(3.0)
    assert rl.stats.max_seconds == pytest.approx(1.5)
    assert rl.stats.last_seconds == pytest.approx(1.5)


async def test_refill_is_capped_at_burst() -> None:
    clock = FakeClock()
    rl = TokenBucketRateLimiter(qps=10, burst=2, clock=clock)
    await rl.acquire()
    await rl.acquire()
    await clock.advance(100.0)  # a long idle period refills only up to the burst
    assert rl.tokens() == pytest.approx(2.0)
    assert await rl.acquire() == 0.0
    assert await rl.acquire() == 0.0
    task = asyncio.create_task(rl.acquire())
    await settle()
    assert not task.done()
    await clock.advance(0.1)
    assert task.done()
    assert task.result() == pytest.approx(0.1)


async def test_partial_refill_shortens_the_wait() -> None:
    clock = FakeClock()
    rl = TokenBucketRateLimiter(qps=4, burst=1, clock=clock)
    await rl.acquire()
    await clock.advance(0.125)  # half a token back
    task = asyncio.create_task(rl.acquire())
    await settle()
    await clock.advance(0.125)
    assert task.done()
    assert task.result() == pytest.approx(0.125)


@pytest.mark.parametrize("qps", [0, -1])
async def test_non_positive_qps_disables_limiting(qps: float) -> None:
    clock = FakeClock()
    rl = new_token_bucket(qps, 0, clock=clock)
    assert not rl.enabled
    for _ in range(1000):
        assert await rl.acquire() == 0.0
    assert rl.try_accept()
    assert clock.sleepers() == 0
    assert rl.stats.calls == 1000


async def test_try_accept_never_waits() -> None:
    clock = FakeClock()
    rl = TokenBucketRateLimiter(qps=1, burst=2, clock=clock)
    assert rl.try_accept()
    assert rl.try_accept()
    assert not rl.try_accept()
    await clock.advance(1.0)
    assert rl.try_accept()
    assert not rl.try_accept()


async def test_a_cancelled_waiter_gives_its_token_back() -> None:
    clock = FakeClock()
    rl = TokenBucketRateLimiter(qps=1, burst=1, clock=clock)
    await rl.acquire()
    victim = asyncio.create_task(rl.acquire())
    await settle()
    victim.cancel()
    with pytest.raises(asyncio.CancelledError):
        await victim
    # The reservation was returned: the next caller waits one interval, not two.
    nxt = asyncio.create_task(rl.acquire())
    await settle()
    await clock.advance(1.0)
    assert nxt.done()
    assert nxt.result() == pytest.approx(1.0)
    assert rl.stats.waited == 1  # the cancelled wait is not recorded


async def test_observer_sees_every_call() -> None:
    clock = FakeClock()
    seen: list[float] = []
    rl = TokenBucketRateLimiter(qps=1, burst=1, clock=clock, on_wait=seen.append)
    await rl.acquire()
    task = asyncio.create_task(rl.acquire())
    await settle()
    await clock.advance(1.0)
    await task
    assert seen == pytest.approx([0.0, 1.0])


def test_burst_must_be_positive_when_limiting() -> None:
    with pytest.raises(ValueError, match="burst"):
        TokenBucketRateLimiter(qps=5, burst=0)


@settings(max_examples=60, deadline=None)
@given(
    qps=st.sampled_from([1.0, 2.0, 5.0, 50.0]),
    burst=st.integers(min_value=1, max_value=8),
    gaps=st.lists(st.floats(min_value=0.0, max_value=2.0), min_size=1, max_size=40),
)
def test_grants_never_exceed_the_bucket(qps: float, burst: int, gaps: list[float]) -> None:
    """Over any window [a, b] the number of grants is at most burst + qps * (b - a)."""

    async def scenario() -> list[float]:
        clock = FakeClock()
        rl = TokenBucketRateLimiter(qps=qps, burst=burst, clock=clock)
        grants: list[float] = []

        async def caller() -> None:
            await rl.acquire()
            grants.append(clock.now())

        tasks = []
        for gap in gaps:
            await clock.advance(gap)
            tasks.append(asyncio.create_task(caller()))
            await settle()
        await clock.advance(len(gaps) / qps + 1.0)
        await asyncio.gather(*tasks)
        return grants

    grants = sorted(asyncio.run(scenario()))
    assert len(grants) == len(gaps)
    for i in range(len(grants)):
        for j in range(i, len(grants)):
            assert j - i + 1 <= burst + qps * (grants[j] - grants[i]) + 1e-6
