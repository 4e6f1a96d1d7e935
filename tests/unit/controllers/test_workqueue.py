"""The work queue's guarantees (client-go's queue_test.go / rate_limiting_queue_test.go)."""

from __future__ import annotations

import asyncio

import pytest

from controllers.workqueue import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    QueueShutDown,
    RateLimitingQueue,
)


async def test_a_key_added_many_times_is_processed_once_and_never_by_two_workers() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue("t")
    for key in ("a", "b", "a", "a"):
        q.add(key)
    assert len(q) == 2
    first = await q.get()
    assert first == "a"
    q.add("a")  # while it is processed: not handed out again ...
    assert await q.get() == "b"
    assert len(q) == 0
    q.done("a")  # ... until done
    assert await q.get() == "a"


async def test_get_waits_for_an_add_and_shut_down_ends_it() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue("t")
    async with asyncio.TaskGroup() as tg:
        getter = tg.create_task(q.get())
        await asyncio.sleep(0)
        q.add("x")
    assert getter.result() == "x"
    q.shut_down()
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_add_after_keeps_the_earliest_timer() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue("t")
    q.add_after("x", 30.0)
    q.add_after("x", 0.01)
    q.add_after("x", 60.0)  # later than the pending one: ignored
    async with asyncio.timeout(5):
        assert await q.get() == "x"
    q.shut_down()


def test_item_backoff_doubles_up_to_the_cap_and_forget_resets_it() -> None:
    rl: ItemExponentialRateLimiter[str] = ItemExponentialRateLimiter(base_delay=0.001, max_delay=1.0)
    assert [rl.when("x") for _ in range(4)] == [0.001, 0.002, 0.004, 0.008]
    assert rl.num_requeues("x") == 4
    for _ in range(20):
        rl.when("x")
    assert rl.when("x") == 1.0
    rl.forget("x")
    assert rl.when("x") == 0.001


def test_the_bucket_admits_a_burst_then_paces() -> None:
    now = [0.0]
    b = BucketRateLimiter(qps=10.0, burst=2, clock=lambda: now[0])
    assert b.when() == 0.0 and b.when() == 0.0
    assert b.when() == pytest.approx(0.1)
    now[0] = 10.0
    assert b.when() == 0.0
