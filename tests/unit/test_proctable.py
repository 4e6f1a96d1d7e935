"""`harness.procs.proctable` against real processes: liveness (a zombie is not alive), start
times, command lines, stopped threads, process groups, CPU and schedstat figures; every reader
answers for a pid that does not exist instead of raising."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.procs import proctable as pt
from tests.fixtures.polling import truthy

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux /proc")


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--marker-proctable"], start_new_session=True
    )
    yield p
    if p.poll() is None:
        with_signal(p, signal.SIGCONT)
        p.kill()
    p.wait()


def with_signal(p: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


async def test_a_live_process(child: subprocess.Popen[bytes]) -> None:
    assert pt.pid_alive(child.pid) and pt.pid_alive(os.getpid())
    # Popen returns once the child's exec has begun (vfork); the kernel sets the new argv a
    # moment later, and until then /proc/<pid>/cmdline reads empty.
    await truthy(lambda: pt.cmdline(child.pid), 5, "the child's command line")
    argv = pt.cmdline(child.pid)
    assert argv is not None and argv[-1] == "--marker-proctable"
    start = pt.start_time(child.pid)
    assert start is not None and start == pt.start_time(child.pid) and start >= pt.start_time(1)  # type: ignore[operator]
    assert child.pid in set(pt.live_pids())
    assert pt.group_has_live_members(child.pid)  # its own group leader
    cpu = pt.process_cpu_seconds(os.getpid())
    assert cpu is not None and cpu > 0
    run, wait, slices = pt.schedstat(os.getpid()) or (0.0, 0.0, 0)
    assert run > 0 and wait >= 0 and slices > 0
    busy = pt.system_busy_seconds()
    assert busy is not None and busy > 0


async def test_stopped_threads(child: subprocess.Popen[bytes]) -> None:
    assert pt.all_threads_stopped(child.pid) is False
    os.killpg(child.pid, signal.SIGSTOP)
    await truthy(lambda: pt.all_threads_stopped(child.pid) is True, 5, "the child to stop")
    os.killpg(child.pid, signal.SIGCONT)
    await truthy(lambda: pt.all_threads_stopped(child.pid) is False, 5, "the child to run again")


async def test_a_zombie_is_not_alive(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    # Not reaped yet: a zombie, which has exited already.
    await truthy(lambda: not pt.pid_alive(child.pid), 5, "the child to become a zombie")
    assert not pt.group_has_live_members(child.pid)


def test_a_pid_that_does_not_exist() -> None:
    pid = _dead_pid()
    assert not pt.pid_alive(pid)
    assert pt.start_time(pid) is None and pt.cmdline(pid) is None
    assert pt.all_threads_stopped(pid) is None
    assert pt.process_cpu_seconds(pid) is None and pt.schedstat(pid) is None
    assert not pt.group_has_live_members(pid)


@pytest.fixture
def oddly_named() -> Iterator[subprocess.Popen[bytes]]:
    """A process that renames itself (prctl PR_SET_NAME) to ") Z 1 (x"."""
    code = "import ctypes, time; ctypes.CDLL(None).prctl(15, b') Z 1 (x', 0, 0, 0); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code])
    yield p
    p.kill()
    p.wait()


async def test_a_process_name_with_parentheses_and_spaces(oddly_named: subprocess.Popen[bytes]) -> None:
    """stat fields are counted from the last ")": a command name may contain ") Z 1 (" (a zombie's
    state, if the fields were counted from the first one)."""
    pid = oddly_named.pid
    await truthy(lambda: b") Z 1 (" in Path(f"/proc/{pid}/stat").read_bytes(), 5, "the new name")
    assert pt.pid_alive(pid) and pt.start_time(pid) == pt.start_time(pid) is not None
    assert pt.all_threads_stopped(pid) is False


def test_peak_rss_mib() -> None:
    from harness.procs.proctable import peak_rss_mib

    mine = peak_rss_mib(os.getpid())
    assert mine is not None and mine > 1.0
    assert peak_rss_mib(None) is None
    assert peak_rss_mib(2**22 + 12345) is None  # above pid_max: never a live process
