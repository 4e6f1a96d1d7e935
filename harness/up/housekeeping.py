"""D/run housekeeping for `kse up`: one `kse up` per data dir (a lock), and a pid table so that a
later run can clean up after one that was itself SIGKILLed and could not stop its children.

Only the very process recorded is ever killed: the same pid *and* start time (pids are reused),
with the data dir on its command line.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from harness.procs.proctable import cmdline, pid_alive, start_time
from harness.up.plan import UpError
from kse.fileio import write_atomic

__all__ = ["DataDirLock", "PidTable"]

LOCK_FILE = "up.lock"
PID_TABLE = "pids.json"
_REAP_WAIT_S = 5.0


class DataDirLock:
    """An exclusive flock on D/run/up.lock holding the owner's pid (for the message a second
    `kse up` on the same data dir gets)."""

    def __init__(self, run_dir: Path, data_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        self.data_dir = data_dir
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def take(self) -> None:
        """Take the lock, or raise UpError naming the pid of the `kse up` that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise UpError(f"another `kse up` (pid {holder}) is using {self.data_dir}") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


class PidTable:
    """D/run/pids.json: {"owner": pid, "processes": [{"name", "pid", "start"}]} of what runs."""

    def __init__(self, run_dir: Path, data_dir: Path) -> None:
        self.path = run_dir / PID_TABLE
        self.data_dir = data_dir

    def write(self, running: Iterable[tuple[str, int]]) -> None:
        """Record the (name, pid) pairs with their start times (best effort: never raises)."""
        entries = [{"name": name, "pid": pid, "start": start_time(pid)} for name, pid in running]
        with contextlib.suppress(OSError):
            table = {"owner": os.getpid(), "processes": entries}
            write_atomic(self.path, json.dumps(table, indent=1) + "\n")

    def reap(self, progress: Callable[[str], None]) -> None:
        """Kill the process groups a previous, SIGKILLed `kse up` on this data dir left running
        (see the module doc for what is touched), then forget the table."""
        try:
            table = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        entries = table.get("processes", []) if isinstance(table, dict) else []
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            pid, start = entry.get("pid"), entry.get("start")
            if not isinstance(pid, int) or start is None or not pid_alive(pid):
                continue
            if start_time(pid) != start or str(self.data_dir) not in " ".join(cmdline(pid) or []):
                continue
            progress(f"killing {entry.get('name')} (pid {pid}), left running by an earlier kse up")
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + _REAP_WAIT_S
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
        self.remove()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
