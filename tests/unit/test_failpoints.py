"""kse.failpoints: the spec syntax, counts, and what each action does at a call site."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

from kse import failpoints
from kse.failpoints import FailpointError, FailpointSpecError


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    failpoints.disable()
    yield
    failpoints.disable()


def test_off_by_default_and_after_disable() -> None:
    assert failpoints.ENABLED is False
    assert failpoints.check("watchcache/dispatch") is None
    failpoints.enable("watchcache/dispatch=drop")
    assert failpoints.ENABLED is True
    failpoints.disable()
    assert failpoints.ENABLED is False and failpoints.check("watchcache/dispatch") is None


def test_counts_and_sequences_as_gofail() -> None:
    failpoints.enable("watchcache/dispatch=2*off->1*drop->duplicate")
    got = [failpoints.check("watchcache/dispatch") for _ in range(5)]
    assert got == [None, None, "drop", "duplicate", "duplicate"]
    assert failpoints.hits("watchcache/dispatch") == 5


def test_a_counted_action_then_nothing() -> None:
    failpoints.enable("watchcache/dispatch=1*drop")
    assert [failpoints.check("watchcache/dispatch") for _ in range(3)] == ["drop", None, None]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope=crash", "unknown failpoint 'nope'"),
        ("storage/after-commit", "expected name=action"),
        ("storage/after-commit=explode", "unknown action 'explode'"),
        ("watchcache/dispatch=delay(5)", "action 'delay' does not apply here"),
        ("storage/after-commit=delay(soon)", "delay needs milliseconds"),
        ("storage/after-commit=x*crash", "cannot parse 'x*crash'"),
    ],
)
def test_bad_specs_are_refused_with_the_reason(spec: str, message: str) -> None:
    with pytest.raises(FailpointSpecError, match=re.escape(message)):
        failpoints.enable(spec)
    assert failpoints.ENABLED is False


async def test_error_raises_and_delay_sleeps() -> None:
    failpoints.enable("storage/before-commit=1*error(etcd is on fire)->delay(30)")
    with pytest.raises(FailpointError, match="etcd is on fire"):
        await failpoints.inject("storage/before-commit")
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await failpoints.inject("storage/before-commit") is None
    assert loop.time() - start >= 0.03


async def test_pause_holds_until_the_failpoint_changes() -> None:
    failpoints.enable("binder/bind=pause")
    task = asyncio.create_task(failpoints.inject("binder/bind"))
    await asyncio.sleep(0)
    assert not task.done()
    failpoints.enable("")  # changing the failpoints releases the paused call site
    assert await asyncio.wait_for(task, 5) is None


def test_every_point_names_where_it_is() -> None:
    for name, (where, actions) in failpoints.POINTS.items():
        assert "/" in name and where and set(actions) <= set(failpoints.ACTIONS)
