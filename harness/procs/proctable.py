"""What Linux's /proc says about a process: the one place kse's harness, chaos backends and benches
read it.

`/proc/<pid>/stat` is "pid (comm) state ppid pgrp ... utime stime ... starttime ...": the command
name may hold spaces and parentheses, so every field is counted from the *last* ")" (proc(5)).
Every reader returns None (or a safe answer, documented per function) when the process is gone or
/proc cannot be read, and never raises for that: a process can exit between any two reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "CLK_TCK",
    "all_threads_stopped",
    "cmdline",
    "group_has_live_members",
    "live_pids",
    "peak_rss_mib",
    "pid_alive",
    "process_cpu_seconds",
    "schedstat",
    "start_time",
    "system_busy_seconds",
]

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_GONE_STATES = (b"Z", b"X")  # zombie, dead: exited already
_STOPPED_STATES = ("T", "t")  # stopped by a signal, or by a tracer


def _stat_fields(path: str) -> list[bytes] | None:
    """The fields of a stat file after the ")" closing the command name: [state, ppid, pgrp, ...]."""
    try:
        with open(path, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def live_pids() -> Iterator[int]:
    """Every pid /proc lists now (nothing when /proc cannot be read)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if entry.isdigit():
            yield int(entry)


def pid_alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (without /proc: whether it can be signalled)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in _GONE_STATES
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, stat field 22): with the pid, it names one
    process for good (pids are reused, start times of one pid are not)."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def cmdline(pid: int) -> list[str] | None:
    """The argv `pid` was started with; None if it is gone (a zombie's is empty)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def all_threads_stopped(pid: int) -> bool | None:
    """True when every thread of `pid` is stopped (SIGSTOP delivered: the signal is asynchronous,
    so a process "paused" a moment ago may still run a request); False while one still runs; None
    when it cannot be told (the process is gone, or no /proc). Callers choose what None means."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    if not tids:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue  # a thread that just exited
        if state not in _STOPPED_STATES:
            return False
    return True


def group_has_live_members(pgid: int) -> bool:
    """Whether process group `pgid` has a member that is not a zombie (True without /proc: then
    only killpg(pgid, 0) can tell, and it counts zombies too).

    Orphaned group members are reparented to init, and some inits (e.g. in microVMs) reap only
    every second or so; a zombie has already exited, so counting it would stall every shutdown."""
    if not os.path.isdir("/proc"):
        return True
    for pid in live_pids():
        fields = _stat_fields(f"/proc/{pid}/stat")  # [state, ppid, pgrp, ...]
        if fields is not None and len(fields) > 2 and int(fields[2]) == pgid:
            if fields[0] not in _GONE_STATES:
                return True
    return False


def _status_mib(pid: int, field: str) -> float | None:
    """A memory field of /proc/<pid>/status ("VmRSS", "VmHWM") in MiB; None if unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_mib(pid: int) -> float | None:
    """The resident set (VmRSS) of a live process, in MiB; None once it is gone."""
    return _status_mib(pid, "VmRSS")


def peak_rss_mib(pid: int | None) -> float | None:
    """The peak resident set (VmHWM) of a live process, in MiB; None if unreadable."""
    if pid is None:
        return None
    peak = _status_mib(pid, "VmHWM")
    return None if peak is None else round(peak, 1)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a live process has used; None if unreadable."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        # utime and stime: the 12th and 13th fields after the command name
        return (int(fields[11]) + int(fields[12])) / CLK_TCK if fields is not None else None
    except (IndexError, ValueError):
        return None


def system_busy_seconds() -> float | None:
    """CPU seconds all CPUs have spent busy since boot (/proc/stat: not idle, not iowait)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    # guest time is already counted in user; do not count it twice
    busy = sum(values[:8]) - idle
    return busy / CLK_TCK


def schedstat(pid: int) -> tuple[float, float, int] | None:
    """(seconds on a CPU, seconds runnable but waiting for one, timeslices) summed over the
    process's threads (/proc/<pid>/task/*/schedstat); None if it is gone. The wait says whether a
    slow timing was the process starved of CPU on a busy host."""
    run = wait = 0.0
    slices = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                a, b, c = f.read().split()[:3]
        except (OSError, ValueError):
            continue  # a thread that just exited
        run += int(a) / 1e9
        wait += int(b) / 1e9
        slices += int(c)
    return run, wait, slices
