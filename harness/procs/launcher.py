"""Child processes kse starts, controls and always cleans up: `kse up`, benchmarks, chaos, tests.

A `ManagedProcess` is one component process (`python -m kse apiserver ...`): its argv and env, a log
file under a data dir (stdout and stderr, appended across restarts), and optionally a *ready file*
the child writes once it serves. Control is by signal, which is what chaos needs: `terminate(grace)`
(SIGTERM, then SIGKILL after the grace period), `kill()` (SIGKILL), `stop_signal(SIGSTOP/SIGCONT)`
(freeze and thaw), `restart()`.

Nothing is left behind: every child is started in its own session, hence its own process group, and
every signal goes to the whole group, so helpers a child forks die with it. A child's own session
also keeps a terminal Ctrl-C away from the children: the parent gets the KeyboardInterrupt and shuts
its children down in order, instead of every process dying at once. `Launcher` is the lifetime: an
(async) context manager that stops, in reverse start order, every process it started, also on an
exception or Ctrl-C; a second Ctrl-C during that shutdown kills what is left at once. An `atexit`
hook SIGKILLs any group still running when the interpreter exits. A parent killed by SIGKILL cannot
clean up, so on Linux the kernel does it: a child started from the main thread asks for SIGKILL when
its parent dies (prctl PR_SET_PDEATHSIG, set by `die_with_parent.py` in a fresh interpreter before it
execs the command, never by a `preexec_fn` in the forked copy of this multi-threaded process), so a
`kill -9` of `kse up` takes its children with it.
Not for children started from other threads: the kernel ties that signal to the thread that forked,
and a worker thread ending would kill a child meant to outlive it.

Waiting is by polling (`Popen.poll`, a ready file) at `POLL_INTERVAL`, so the same object works from
sync code (test fixtures, `*_sync` methods) and from any event loop (`await p.wait_ready()`), with no
child watcher tied to one loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from harness.procs.proctable import group_has_live_members

DEFAULT_GRACE = 5.0
DEFAULT_READY_TIMEOUT = 30.0
LOG_TAIL_LINES = 30
POLL_INTERVAL = 0.01
# After SIGKILL a process dies at once unless stuck in the kernel (D state); do not wait forever.
_KILL_WAIT = 10.0

# A ready check reads the ready file and returns what it says (truthy or not), or None while the file
# is absent or incomplete.
ReadyCheck = Callable[[Path], Any]


class LaunchError(RuntimeError):
    """A process could not be started or controlled as asked."""


class NotReadyError(LaunchError):
    """A process did not write its ready file in time, or exited first. The message has the log tail."""

    def __init__(self, message: str, *, name: str, log_path: Path, returncode: int | None, log_tail: str):
        super().__init__(message)
        self.name = name
        self.log_path = log_path
        self.returncode = returncode
        self.log_tail = log_tail


def ready_file_exists(path: Path) -> str | None:
    """Ready as soon as the file exists; returns its text."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def ready_file_json(path: Path) -> dict[str, Any] | None:
    """Ready once the file holds a complete JSON object (a half-written file counts as not yet)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_bytes: int = 64 * 1024) -> str:
    """The last `lines` lines of a log file ('' when it does not exist)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _child_env(env: Mapping[str, str | None] | None, inherit: bool) -> dict[str, str]:
    merged = dict(os.environ) if inherit else {}
    merged.setdefault("PYTHONUNBUFFERED", "1")  # logs reach the file as they happen
    for key, value in (env or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


_start_counter = 0
_LIVE: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()


_DIE_WITH_PARENT_SCRIPT = Path(__file__).with_name("die_with_parent.py")


def _die_with_parent_argv(argv: list[str]) -> list[str]:
    """`argv` run so that it dies with this process (see the module doc): through
    `die_with_parent.py` when on Linux and started from the main thread; `argv` as it is otherwise."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return argv
    return [sys.executable, "-I", "-S", str(_DIE_WITH_PARENT_SCRIPT), str(os.getpid()), "--", *argv]


def _next_start_seq() -> int:
    global _start_counter
    _start_counter += 1
    return _start_counter


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        with contextlib.suppress(Exception):
            proc.kill()


# A step generator yields when it wants to sleep one poll interval; drivers run it from sync or async.
_Steps = Generator[None, None, Any]


def _drive_sync(steps: _Steps) -> Any:
    try:
        while True:
            next(steps)
            time.sleep(POLL_INTERVAL)
    except StopIteration as stop:
        return stop.value


async def _drive_async(steps: _Steps) -> Any:
    try:
        while True:
            next(steps)
            await asyncio.sleep(POLL_INTERVAL)
    except StopIteration as stop:
        return stop.value


@dataclass(slots=True)
class ProcessLife:
    """One start of a managed process, on the wall clock (for reports: the timeline's replica lanes).

    `ended_at` is when the launcher first saw the exit (a poll, a wait, a kill), None while it runs
    or if nobody looked before the end; `label` is what the start was known as (a scheduler
    replica's election identity)."""

    pid: int
    started_at: float
    label: str = ""
    ended_at: float | None = None
    exit_code: int | None = None


class ManagedProcess:
    """One child process with a log file, an optional ready file, and signal-based control.

    `argv[0]` is executed as given (use `sys.executable` for Python children). `env` is added to the
    parent's environment (`inherit_env=False`: used alone); a value of None removes a variable.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        data_dir: Path,
        env: Mapping[str, str | None] | None = None,
        inherit_env: bool = True,
        cwd: Path | None = None,
        ready_file: Path | None = None,
        ready_check: ReadyCheck = ready_file_exists,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        if not argv:
            raise ValueError(f"{name}: empty argv")
        self.name = name
        self.argv: list[str] = [str(a) for a in argv]
        self.data_dir = Path(data_dir)
        self.log_path = self.data_dir / "logs" / f"{name}.log"
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.cwd = cwd
        self.ready_file = ready_file
        self.ready_check = ready_check
        self.ready_timeout = ready_timeout
        self.grace = grace
        self.ready_info: Any = None
        self.starts = 0
        self.lives: list[ProcessLife] = []  # every start, oldest first
        self.start_seq = 0  # global order of the latest start; Launcher stops in reverse of it
        self.paused = False
        self._popen: subprocess.Popen[bytes] | None = None
        self._group_gone = True

    def __repr__(self) -> str:
        state = "not started" if self._popen is None else f"pid {self.pid}, returncode {self.returncode}"
        return f"<{type(self).__name__} {self.name} ({state})>"

    # ------------------------------------------------------------------ state

    @property
    def pid(self) -> int | None:
        """The pid of the latest start (also its process group id), None before the first start."""
        return None if self._popen is None else self._popen.pid

    @property
    def returncode(self) -> int | None:
        """None while running (or never started); else the exit code, or -N for death by signal N."""
        return None if self._popen is None else self._poll()

    @property
    def running(self) -> bool:
        return self._popen is not None and self._poll() is None

    def _poll(self) -> int | None:
        """`Popen.poll()` of the latest start, noting on its `ProcessLife` when the exit was seen."""
        assert self._popen is not None
        code = self._popen.poll()
        if code is not None and self.lives and self.lives[-1].ended_at is None:
            self.lives[-1].ended_at = time.time()
            self.lives[-1].exit_code = code
        return code

    def life_label(self) -> str:
        """What the start about to happen is known as (`ProcessLife.label`); subclasses name it."""
        return ""

    def command_line(self) -> list[str]:
        """The argv the next start uses (subclasses may adjust it, e.g. to pin a port on restart)."""
        return list(self.argv)

    # ------------------------------------------------------------------ start

    def start(self) -> ManagedProcess:
        """Start the process (in a new session and process group); does not wait for readiness."""
        if self.running:
            raise LaunchError(f"{self.name} is already running (pid {self.pid})")
        if self._popen is not None:
            self._reap_group()  # stragglers of the previous run must not outlive it
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.ready_file is not None:
            self.ready_file.parent.mkdir(parents=True, exist_ok=True)
            self.ready_file.unlink(missing_ok=True)
        argv = self.command_line()
        self.ready_info = None
        self.paused = False
        self.starts += 1
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        with self.log_path.open("ab") as log:
            log.write(f"=== kse launcher: start #{self.starts} of {self.name} at {stamp}: {argv}\n".encode())
            log.flush()
            env = _child_env(self.env, self.inherit_env)
            if shutil.which(argv[0], path=env.get("PATH", os.defpath)) is None:
                raise LaunchError(f"cannot start {self.name}: {argv[0]} not found or not executable")
            try:
                self._popen = subprocess.Popen(
                    _die_with_parent_argv(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.cwd,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as e:
                raise LaunchError(f"cannot start {self.name} ({argv[0]}): {e}") from e
        self._group_gone = False
        self.lives.append(ProcessLife(self._popen.pid, time.time(), self.life_label()))
        self.start_seq = _next_start_seq()
        _LIVE.add(self)
        return self

    def _ready_steps(self, timeout: float | None) -> _Steps:
        if self._popen is None:
            raise LaunchError(f"{self.name} was never started")
        if self.ready_file is None:
            return None
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            info = self.ready_check(self.ready_file)
            if info is not None:
                self.ready_info = info
                return info
            code = self._poll()
            if code is not None:
                raise self._not_ready(f"{self.name} exited with code {code} before it was ready")
            if time.monotonic() >= deadline:
                error = self._not_ready(
                    f"{self.name} (pid {self.pid}) was not ready within {timeout:g} s "
                    f"(no ready file {self.ready_file}); it has been killed"
                )
                self.kill()
                raise error
            yield

    def _not_ready(self, what: str) -> NotReadyError:
        tail = log_tail(self.log_path)
        shown = "\n".join(f"  | {line}" for line in tail.splitlines()) or "  | (empty)"
        return NotReadyError(
            f"{what}. Last lines of {self.log_path}:\n{shown}",
            name=self.name,
            log_path=self.log_path,
            returncode=self.returncode,
            log_tail=tail,
        )

    async def wait_ready(self, ready_timeout: float | None = None) -> Any:
        """Wait until the ready check passes; returns what it read (None without a ready file).

        Raises NotReadyError (with the log tail) if the process exits first or the deadline
        (`ready_timeout`, default `self.ready_timeout`) passes; on a deadline the process is killed.
        """
        return await _drive_async(self._ready_steps(ready_timeout))

    def wait_ready_sync(self, ready_timeout: float | None = None) -> Any:
        return _drive_sync(self._ready_steps(ready_timeout))

    # ------------------------------------------------------------------ signals

    def _signal_group(self, sig: int) -> bool:
        """Signal the whole process group; False once it has no members left."""
        if self._popen is None or self._group_gone:
            return False
        try:
            os.killpg(self._popen.pid, sig)
        except ProcessLookupError:
            if self._poll() is not None:
                self._group_gone = True  # never signal this pgid again: the number may be reused
            return False
        except PermissionError:
            # A group member we may not signal (setuid helper): at least signal the leader.
            if self._poll() is None:
                self._popen.send_signal(sig)
        return True

    def _group_alive(self) -> bool:
        """Whether any member of the group still runs (zombies waiting for a slow init do not count)."""
        if not self._signal_group(0):
            return False
        assert self._popen is not None
        if self._poll() is None:
            return True
        return group_has_live_members(self._popen.pid)

    def send_signal(self, sig: int) -> None:
        """Send `sig` to the process group (no-op when nothing is left)."""
        self._signal_group(sig)

    def stop_signal(self, sig: int = signal.SIGSTOP) -> None:
        """Freeze (SIGSTOP) or thaw (SIGCONT) the process group: a paused process, as chaos wants."""
        if sig not in (signal.SIGSTOP, signal.SIGCONT):
            raise ValueError(f"stop_signal takes SIGSTOP or SIGCONT, got {signal.Signals(sig).name}")
        if not self.running:
            raise LaunchError(f"{self.name} is not running")
        self._signal_group(sig)
        self.paused = sig == signal.SIGSTOP

    def pause(self) -> None:
        self.stop_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.stop_signal(signal.SIGCONT)

    def _terminate_steps(self, grace: float | None) -> _Steps:
        if self._popen is None:
            return None
        grace = self.grace if grace is None else grace
        deadline = time.monotonic() + grace
        if self._signal_group(signal.SIGTERM):
            self._signal_group(signal.SIGCONT)  # a stopped process only acts on SIGTERM once continued
        self.paused = False
        while time.monotonic() < deadline:
            if self._poll() is not None and not self._group_alive():
                return self._popen.returncode
            yield
        self._signal_group(signal.SIGKILL)
        yield from self._kill_wait_steps()
        return self._popen.returncode

    def _kill_wait_steps(self) -> _Steps:
        assert self._popen is not None
        deadline = time.monotonic() + _KILL_WAIT
        while (self._poll() is None or self._group_alive()) and time.monotonic() < deadline:
            self._signal_group(signal.SIGKILL)
            yield
        if self._poll() is None:
            raise LaunchError(f"{self.name} (pid {self.pid}) survived SIGKILL for {_KILL_WAIT:g} s")
        _LIVE.discard(self)
        return None

    async def terminate(self, grace: float | None = None) -> int | None:
        """SIGTERM the group, wait up to `grace` (default `self.grace`) for it to empty, then SIGKILL.

        Returns the leader's exit code (None if never started). Safe to call when already exited:
        it still makes sure no member of the group is left.
        """
        result = await _drive_async(self._terminate_steps(grace))
        _LIVE.discard(self)
        return result  # type: ignore[no-any-return]

    def terminate_sync(self, grace: float | None = None) -> int | None:
        result = _drive_sync(self._terminate_steps(grace))
        _LIVE.discard(self)
        return result  # type: ignore[no-any-return]

    def kill(self) -> int | None:
        """SIGKILL the group and wait (briefly, synchronously) until it is gone; returns the exit code."""
        if self._popen is None:
            return None
        self._signal_group(signal.SIGKILL)
        self.paused = False
        _drive_sync(self._kill_wait_steps())
        return self._popen.returncode

    def _reap_group(self) -> None:
        if self._popen is not None and not self._group_gone:
            self.kill()

    async def wait(self) -> int:
        """Wait for the process to exit by itself (bound it with `asyncio.timeout`)."""
        if self._popen is None:
            raise LaunchError(f"{self.name} was never started")
        popen = self._popen

        def steps() -> _Steps:
            while (self._poll() if popen is self._popen else popen.poll()) is None:
                yield
            return popen.returncode

        return await _drive_async(steps())  # type: ignore[no-any-return]

    async def restart(self, grace: float | None = None, *, wait_ready: bool = True) -> Any:
        """Terminate (if running), start again with the same settings, and wait until ready."""
        await self.terminate(grace)
        self.start()
        return await self.wait_ready() if wait_ready else None

    def restart_sync(self, grace: float | None = None, *, wait_ready: bool = True) -> Any:
        self.terminate_sync(grace)
        self.start()
        return self.wait_ready_sync() if wait_ready else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)


P = TypeVar("P", bound=ManagedProcess)


class Launcher:
    """The lifetime of a set of processes: whatever it started is stopped when the block exits.

    ```
    async with Launcher(data_dir) as launcher:
        api = await launcher.start(ApiServerProcess(...))  # started and ready
        ...
    # every process stopped (reverse start order), also after an exception or Ctrl-C
    ```
    Works as a plain `with` too (for sync code such as test fixtures).
    """

    def __init__(self, data_dir: Path, *, grace: float = DEFAULT_GRACE) -> None:
        self.data_dir = Path(data_dir)
        self.grace = grace
        self._procs: list[ManagedProcess] = []

    @property
    def processes(self) -> tuple[ManagedProcess, ...]:
        return tuple(self._procs)

    def get(self, name: str) -> ManagedProcess:
        for p in self._procs:
            if p.name == name:
                return p
        raise KeyError(f"no process {name!r}; have: {', '.join(p.name for p in self._procs) or 'none'}")

    def add(self, proc: ManagedProcess) -> ManagedProcess:
        """Track `proc` (not started) so the block's exit stops it."""
        if any(p.name == proc.name for p in self._procs if p is not proc):
            raise ValueError(f"a process named {proc.name!r} is already tracked (its log file would clash)")
        if proc not in self._procs:
            self._procs.append(proc)
        return proc

    def process(self, name: str, argv: Sequence[str], **kwargs: Any) -> ManagedProcess:
        """Build and track a `ManagedProcess` with its log under this launcher's data dir."""
        kwargs.setdefault("data_dir", self.data_dir)
        kwargs.setdefault("grace", self.grace)
        return self.add(ManagedProcess(name, argv, **kwargs))

    async def start(self, proc: P, *, wait_ready: bool = True) -> P:
        """Track, start and (by default) wait until ready; a process that fails to come up is stopped."""
        self.add(proc)
        proc.start()
        if wait_ready:
            await proc.wait_ready()
        return proc

    def start_sync(self, proc: P, *, wait_ready: bool = True) -> P:
        self.add(proc)
        proc.start()
        if wait_ready:
            proc.wait_ready_sync()
        return proc

    def _stop_order(self, procs: Iterable[ManagedProcess] | None) -> list[ManagedProcess]:
        chosen = self._procs if procs is None else list(procs)
        return sorted(chosen, key=lambda p: p.start_seq, reverse=True)

    async def stop_all(self, grace: float | None = None) -> None:
        """Terminate every tracked process, newest first (schedulers before the API server before etcd)."""
        for proc in self._stop_order(None):
            await proc.terminate(grace)

    def stop_all_sync(self, grace: float | None = None) -> None:
        for proc in self._stop_order(None):
            proc.terminate_sync(grace)

    def kill_all(self) -> None:
        for proc in self._stop_order(None):
            with contextlib.suppress(Exception):
                proc.kill()

    async def __aenter__(self) -> Launcher:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.stop_all()
        except BaseException:
            # Cancelled again (a second Ctrl-C) or a failure mid-shutdown: nothing may be left behind.
            self.kill_all()
            raise

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.stop_all_sync()
        except BaseException:
            self.kill_all()
            raise


def python_argv(*args: str, module: str = "kse") -> list[str]:
    """`[sys.executable, -m, module, *args]`: the way every kse component is launched."""
    return [sys.executable, "-m", module, *args]
