"""kse.pprof: the CPU sampler's profile opens with the standard pstats and names the hot function;
the stack dump shows every thread and every task's await chain; the loop watchdog records the stack
that blocked the loop; the routes refuse bad parameters by name."""

from __future__ import annotations

import asyncio
import json
import pstats
import threading
import time
from pathlib import Path

import pytest

from kse.pprof import LoopWatch, Pprof
from kse.pprof.sampler import IDLE, Profile, ProfilerBusy, Sampler
from kse.pprof.stacks import dump


def burn_cpu(until: float) -> int:
    """The hot spot of the profiles below: pure-Python arithmetic."""
    n = 0
    while time.process_time() < until:
        n += sum(i * i for i in range(200))
    return n


def _busy(seconds: float) -> None:
    burn_cpu(time.process_time() + seconds)


def test_cpu_profile_is_a_pstats_file_naming_the_hot_spot(tmp_path: Path) -> None:
    sampler = Sampler(hz=200)
    sampler.start()
    try:
        _busy(0.4)
    finally:
        profile = sampler.stop()
    assert profile.samples >= 20, profile.samples  # ~80 expected at 200 Hz over 0.4 s of CPU
    path = tmp_path / "cpu.pstats"
    path.write_bytes(profile.to_pstats())
    stats = pstats.Stats(str(path))  # the standard tool opens it
    by_name = {func[2]: row for func, row in stats.stats.items()}  # type: ignore[attr-defined]
    hot = [name for name in by_name if name.endswith("burn_cpu")]
    assert hot, sorted(by_name)
    _cc, nc, _tt, ct, callers = by_name[hot[0]]
    assert nc >= 1
    assert ct >= 0.5 * profile.samples * profile.interval  # most samples are under burn_cpu
    assert any(c[2].endswith("_busy") for c in callers)  # its caller, as an edge
    assert "burn_cpu" in profile.collapsed()
    assert "burn_cpu" in profile.text()


def test_one_profile_at_a_time() -> None:
    first = Sampler()
    first.start()
    try:
        with pytest.raises(ProfilerBusy, match="cpu profiling already in use"):
            Sampler().start()
    finally:
        first.stop()
    with pytest.raises(ValueError, match="hz: must be between 1 and 1000"):
        Sampler(hz=0)


def test_idle_samples_are_labelled() -> None:
    p = Profile(interval=0.01)
    p.stacks[(IDLE,)] += 3
    assert p.collapsed() == "<event loop idle: CPU used outside Python code> 3\n"


async def test_stack_dump_shows_threads_and_task_await_chains() -> None:
    release = asyncio.Event()

    async def inner_wait() -> None:
        await release.wait()

    async def outer() -> None:
        await inner_wait()

    task = asyncio.create_task(outer(), name="the-waiting-task")
    await asyncio.sleep(0)  # let it start and park
    try:
        text = dump(debug=2)
        assert "thread" in text and '"MainThread" [main]' in text
        block = text[text.index('task "the-waiting-task"') :].split("\n\n")[0]
        assert "outer" in block and "inner_wait" in block and "awaiting" in block
        assert "await release.wait()" in block  # debug=2 shows source lines
        grouped = dump(debug=1)
        assert 'task "the-waiting-task"' in grouped and "await release.wait()" not in grouped
    finally:
        release.set()
        await task


def _block_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # the blocking call under test: it must show up as the stall's stack


async def test_loop_watch_records_what_blocked_the_loop() -> None:
    async with LoopWatch(interval=0.02, threshold=0.05) as watch:
        deadline = time.monotonic() + 10
        while watch.lag.ticks < 2:  # the watch runs
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        _block_the_loop(0.3)
        while not watch.stalls:
            assert time.monotonic() < deadline, watch.report()
            await asyncio.sleep(0.01)
    report = watch.report()
    (stall,) = report["stalls"]
    assert stall["count"] == 1 and stall["total_seconds"] >= 0.25
    assert any("_block_the_loop" in f for f in stall["stack"]), stall["stack"]
    assert report["lag"]["max_seconds"] >= 0.25
    assert "_block_the_loop" in watch.text()


async def test_routes() -> None:
    pprof = Pprof()
    status, body, _ = await pprof.answer("GET", "/debug/pprof/", "")
    assert status == 200 and b"profile?seconds=30" in body and b"off: run with --contention-profiling" in body
    assert (await pprof.answer("GET", "/debug/pprof/profile", "seconds=0"))[:2] == (
        400,
        b"seconds: must be an integer from 1 to 300, got '0'\n",
    )
    assert (await pprof.answer("GET", "/debug/pprof/profile", "format=svg"))[0] == 400
    assert (await pprof.answer("GET", "/debug/pprof/block", ""))[0] == 404
    assert (await pprof.answer("POST", "/debug/pprof/", ""))[0] == 405
    assert (await pprof.answer("GET", "/debug/pprof/nothing", ""))[0] == 404
    status, body, _ = await pprof.answer("GET", "/debug/pprof/heap", "limit=5")
    assert status == 200 and b"objects tracked by the gc" in body
    assert (await pprof.answer("HEAD", "/debug/pprof/profile", ""))[0] == 405
    assert (await pprof.answer("GET", "/debug/pprof/cmdline", ""))[0] == 200
    status, body, _ = await pprof.answer("GET", "/debug/pprof/goroutine", "debug=2")
    assert status == 200 and b"MainThread" in body

    # A CPU profile of the live loop while a worker thread and the loop itself burn CPU.
    stop = threading.Event()

    async def spin() -> None:
        while not stop.is_set():
            _busy(0.01)
            await asyncio.sleep(0)

    spinner = asyncio.create_task(spin())
    try:
        status, body, ctype = await pprof.answer(
            "GET", "/debug/pprof/profile", "seconds=1&format=collapsed&hz=200"
        )
    finally:
        stop.set()
        await spinner
    assert status == 200 and "burn_cpu" in body.decode()

    async with LoopWatch() as watch:
        status, body, ctype = await Pprof(watch).answer("GET", "/debug/pprof/block", "format=json")
    assert status == 200 and ctype == "application/json" and "lag" in json.loads(body)


async def test_stack_dump_of_a_task_not_started_yet() -> None:
    async def never_started() -> None:
        pass

    task = asyncio.create_task(never_started(), name="not-started")
    assert 'task "not-started" [pending]' in dump(debug=2)  # no line number yet: the def line
    await task
