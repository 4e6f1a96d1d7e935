"""kse.tasks: owned background tasks end with their owner, and their failures are reported."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kse.tasks import TaskSet, background
from tests.fixtures.polling import until


async def test_aclose_cancels_and_awaits_running_tasks() -> None:
    ended: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ended.append(name)

    tasks = TaskSet("owner")
    a = tasks.spawn(forever("a"), name="a")
    b = tasks.spawn(forever("b"), name="b")
    await asyncio.sleep(0)
    assert len(tasks) == 2
    await tasks.aclose()
    assert a.cancelled() and b.cancelled()
    assert sorted(ended) == ["a", "b"]  # their finally blocks ran before aclose returned
    assert len(tasks) == 0 and tasks.closed
    await tasks.aclose()  # idempotent


async def test_finished_tasks_leave_the_set() -> None:
    tasks = TaskSet("owner")
    done = tasks.spawn(asyncio.sleep(0, result=7))
    assert await done == 7
    await until(lambda: len(tasks) == 0, "the finished task left the set")
    await tasks.aclose()


async def test_spawn_after_close_is_refused_without_a_never_awaited_warning() -> None:
    tasks = TaskSet("owner")
    await tasks.aclose()
    coro = asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="task set 'owner' is closed"):
        tasks.spawn(coro, name="late")
    assert coro.cr_frame is None  # closed, not left pending


async def test_a_failure_is_logged_when_it_happens(caplog: pytest.LogCaptureFixture) -> None:
    async def boom() -> None:
        raise ValueError("broken on purpose")

    log = logging.getLogger("test.tasks")
    tasks = TaskSet("owner", logger=log)
    with caplog.at_level(logging.DEBUG, logger="test.tasks"):
        task = tasks.spawn(boom(), name="boom")
        await asyncio.wait([task])
        await until(lambda: tasks.failures == 1, "the failure counted")
    (record,) = [r for r in caplog.records if r.name == "test.tasks"]
    assert record.levelno == logging.ERROR
    assert "owner: task boom failed" in record.getMessage() and "broken on purpose" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    await tasks.aclose()  # does not raise: the failure was reported already


async def test_failure_level_for_owners_whose_callers_read_results(caplog: pytest.LogCaptureFixture) -> None:
    async def boom() -> None:
        raise ValueError("read by the caller")

    log = logging.getLogger("test.tasks.quiet")
    async with TaskSet("race", logger=log, failure_level=logging.DEBUG) as tasks:
        with caplog.at_level(logging.DEBUG, logger="test.tasks.quiet"):
            task = tasks.spawn(boom())
            with pytest.raises(ValueError):
                await task
    assert [r.levelno for r in caplog.records if r.name == "test.tasks.quiet"] == [logging.DEBUG]


async def test_an_expected_failure_is_logged_without_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """An etcd member down under a write is normal operation: logged, but no traceback (which means
    a bug); any other error keeps its traceback."""

    async def fail(error: Exception) -> None:
        raise error

    log = logging.getLogger("test.tasks.expected")
    async with TaskSet(
        "writes", logger=log, failure_level=logging.DEBUG, expected=(ConnectionError,)
    ) as tasks:
        with caplog.at_level(logging.DEBUG, logger="test.tasks.expected"):
            for error in (ConnectionResetError("member down"), ValueError("a bug")):
                await asyncio.wait([tasks.spawn(fail(error))])
            await until(lambda: tasks.failures == 2, "both failures counted")
    records = [r for r in caplog.records if r.name == "test.tasks.expected"]
    assert [(("member down" in r.getMessage()), r.exc_info is not None) for r in records] == [
        (True, False),
        (False, True),
    ]


async def test_leaving_the_block_cancels_the_losers_of_a_race() -> None:
    async with TaskSet("race") as tasks:
        fast = tasks.spawn(asyncio.sleep(0, result="fast"))
        slow = tasks.spawn(asyncio.Event().wait())
        done, _ = await asyncio.wait({fast, slow}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {fast}
    assert slow.cancelled()


async def test_a_cancelled_owner_still_ends_its_tasks() -> None:
    inner: list[asyncio.Task[object]] = []

    async def owner() -> None:
        async with TaskSet("owner") as tasks:
            inner.append(tasks.spawn(asyncio.Event().wait()))
            await asyncio.Event().wait()

    task = asyncio.create_task(owner())
    await until(lambda: bool(inner), "the owner started its task")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner[0].cancelled()


async def test_background_raises_the_tasks_crash_from_the_block() -> None:
    async def boom() -> None:
        raise ValueError("crashed")

    with pytest.raises(ValueError, match="crashed"):
        async with background(boom(), name="boom"):
            await asyncio.Event().wait()  # cancelled by the crash
