"""Restart processes that exit, as the kubelet restarts a crashing container (restartPolicy Always).

The kubelet's CrashLoopBackOff, with kse's numbers: after the n-th consecutive exit the process is
started again `initial * 2**(n-1)` seconds later (1 s, 2 s, 4 s, ...), capped at 5 min; a process
that ran for 10 min before exiting counts as healthy, so its next exit starts the count afresh.
Every exit and restart is recorded (`RestartRecord`), which is what `kse up` shows and what the
chaos checker reads.

    supervisor = Supervisor(BackoffPolicy())
    supervisor.add(proc)                  # a started ManagedProcess
    async with supervisor.running():      # watches every added process until the block ends
        ...
        supervisor.hold(proc.name)        # it may exit now and stays down (chaos: kill, keep down)
        supervisor.release(proc.name)     # back under supervision (restarted at once if down)

The clock (`clock`) and the backoff wait (`sleep`) are injectable, so the schedule is testable
without waiting minutes. Exits are noticed by polling (`ManagedProcess` is poll-based too), so the
supervisor works from any event loop with no child watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from harness.procs.launcher import LaunchError, ManagedProcess
from kse.tasks import TaskSet, background

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.05

State = Literal["running", "backoff", "held", "exited"]


@dataclass(frozen=True)
class BackoffPolicy:
    """Kubelet-like crash-loop backoff: `initial` doubling up to `cap`, forgotten after `reset_after`
    seconds of running."""

    initial: float = 1.0
    cap: float = 300.0
    reset_after: float = 600.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.cap < self.initial or self.reset_after <= 0:
            raise ValueError(f"invalid backoff policy {self}: need 0 <= initial <= cap and reset_after > 0")

    def delay(self, consecutive_exits: int) -> float:
        """The wait before restarting after the `consecutive_exits`-th exit in a row (1-based)."""
        if consecutive_exits < 1:
            return 0.0
        # 2**n overflows float only past n ~ 1000; the cap is reached long before.
        return float(min(self.cap, self.initial * 2 ** min(consecutive_exits - 1, 64)))


class CrashLoopBackoff:
    """The backoff state of one process: how many exits in a row, decided on an injected clock."""

    def __init__(self, policy: BackoffPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self.consecutive_exits = 0
        self.started_at: float | None = None

    def started(self) -> None:
        """The process (re)started now."""
        self.started_at = self.clock()

    def exited(self) -> tuple[float, float]:
        """The process exited now: returns (uptime, delay before the restart)."""
        now = self.clock()
        uptime = 0.0 if self.started_at is None else max(0.0, now - self.started_at)
        if uptime >= self.policy.reset_after:
            self.consecutive_exits = 0
        self.consecutive_exits += 1
        self.started_at = None
        return uptime, self.policy.delay(self.consecutive_exits)


@dataclass(frozen=True)
class RestartRecord:
    """One exit and the restart that followed (`restarted_at` None: not restarted, e.g. held)."""

    name: str
    exit_code: int | None
    exited_at: float  # wall clock (time.time()), for reports
    uptime_s: float
    delay_s: float
    restarted_at: float | None = None
    pid: int | None = None  # the new pid

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "exit_code": self.exit_code,
            "exited_at": self.exited_at,
            "uptime_s": round(self.uptime_s, 3),
            "delay_s": self.delay_s,
            "restarted_at": self.restarted_at,
            "pid": self.pid,
        }


@dataclass(eq=False)
class Supervised:
    """One process under supervision and what happened to it."""

    proc: ManagedProcess
    backoff: CrashLoopBackoff
    restarts: int = 0
    held: bool = False
    state: State = "running"
    restart_at: float | None = None  # supervisor clock time of the pending restart
    history: list[RestartRecord] = field(default_factory=list)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def name(self) -> str:
        return self.proc.name

    def backoff_remaining(self, now: float) -> float | None:
        """Seconds until the pending restart (None when none is pending)."""
        if self.state != "backoff" or self.restart_at is None:
            return None
        return max(0.0, self.restart_at - now)


class Supervisor:
    """Watches processes and restarts those that exit (see the module doc)."""

    def __init__(
        self,
        policy: BackoffPolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        poll_interval: float = POLL_INTERVAL,
        on_restart: Callable[[RestartRecord], None] | None = None,
        on_exit: Callable[[RestartRecord], None] | None = None,
    ) -> None:
        self.policy = policy or BackoffPolicy()
        self.on_exit = on_exit  # an exit was noticed (before any backoff): kse up rewrites cluster.json
        self.clock = clock
        self.wall = wall
        self._sleep = sleep
        self.poll_interval = poll_interval
        self.on_restart = on_restart
        self._items: dict[str, Supervised] = {}
        self._tg: asyncio.TaskGroup | None = None

    # ------------------------------------------------------------------ what is supervised

    def add(self, proc: ManagedProcess) -> Supervised:
        """Supervise `proc` (normally already started; its start counts as the first)."""
        if proc.name in self._items:
            raise ValueError(f"{proc.name} is already supervised")
        item = Supervised(proc, CrashLoopBackoff(self.policy, self.clock))
        if proc.running:
            item.backoff.started()
        self._items[proc.name] = item
        if self._tg is not None:
            self._tg.create_task(self._watch(item), name=f"supervise-{proc.name}")
        return item

    def get(self, name: str) -> Supervised:
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"{name!r} is not supervised; have: {', '.join(self._items) or 'none'}") from None

    def items(self) -> list[Supervised]:
        return list(self._items.values())

    def has(self, name: str) -> bool:
        return name in self._items

    @property
    def history(self) -> list[RestartRecord]:
        """Every exit of every supervised process, in time order."""
        return sorted((r for i in self._items.values() for r in i.history), key=lambda r: r.exited_at)

    def hold(self, name: str) -> None:
        """Do not restart `name` when it exits (it may still be running; it is not signalled)."""
        item = self.get(name)
        item.held = True
        item._wake.set()

    def release(self, name: str) -> None:
        """Supervise `name` again; if it is down it is started at once (no backoff)."""
        item = self.get(name)
        item.held = False
        item.restart_at = None
        item._wake.set()

    # ------------------------------------------------------------------ the loops

    async def run(self) -> None:
        """Supervise until cancelled."""
        if self._tg is not None:
            raise RuntimeError("supervisor is already running")
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            try:
                for item in self._items.values():
                    tg.create_task(self._watch(item), name=f"supervise-{item.name}")
                await asyncio.get_running_loop().create_future()
            finally:
                self._tg = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Supervisor]:
        """Supervise for the duration of the block; on leaving, nothing more is restarted. A crash
        of the supervisor ends the block at once and is raised from it."""
        async with background(self.run(), name="supervisor"):
            yield self

    async def _wait_wake(self, item: Supervised, seconds: float) -> None:
        item._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await item._wake.wait()

    async def _backoff_wait(self, item: Supervised, delay: float) -> None:
        """Wait `delay` (through the injected sleep, if any), ending early on release or hold."""
        item._wake.clear()
        sleeper = self._sleep or asyncio.sleep
        async with TaskSet(f"backoff-{item.name}", logger=log) as race:  # the loser ends with the block
            sleep_task = race.spawn(_awaited(sleeper(delay)), name=f"backoff-sleep-{item.name}")
            wake_task = race.spawn(item._wake.wait(), name=f"backoff-wake-{item.name}")
            await asyncio.wait({sleep_task, wake_task}, return_when=asyncio.FIRST_COMPLETED)

    async def _watch(self, item: Supervised) -> None:
        proc = item.proc
        pending: RestartRecord | None = None  # an exit noticed, not yet followed by a start
        while True:
            if proc.running:
                if pending is not None:  # started by someone else meanwhile (a manual start)
                    item.backoff.started()
                    pending = None
                item.state = "running"
                await self._wait_wake(item, self.poll_interval)
                continue
            if item.held:
                if pending is None:
                    # Down on purpose: recorded, but no crash for the backoff to count.
                    pending = self._record(item, counted=False)
                item.state = "held"
                item.restart_at = None
                await self._wait_wake(item, self.poll_interval)
                continue
            if pending is None:
                pending = self._record(item, counted=True)
                item.state = "backoff"
                item.restart_at = self.clock() + pending.delay_s
                await self._backoff_wait(item, pending.delay_s)
                continue  # held or started meanwhile? look again before starting
            item.restart_at = None
            try:
                proc.start()
            except LaunchError as e:
                log.error("cannot restart %s: %s", proc.name, e)
                item.backoff.started()  # counts as a start that failed at once
                pending = None
                continue
            item.backoff.started()
            item.restarts += 1
            record = RestartRecord(
                pending.name, pending.exit_code, pending.exited_at, pending.uptime_s, pending.delay_s,
                restarted_at=self.wall(), pid=proc.pid,
            )  # fmt: skip
            item.history[-1] = record
            pending = None
            item.state = "running"
            if self.on_restart is not None:
                try:
                    self.on_restart(record)
                except Exception:
                    log.exception("on_restart callback failed")

    def _record(self, item: Supervised, *, counted: bool) -> RestartRecord:
        """Note an exit; `counted`: a crash the backoff counts (else a stop on purpose, delay 0)."""
        code = item.proc.returncode
        if counted:
            uptime, delay = item.backoff.exited()
        else:
            started = item.backoff.started_at
            uptime = 0.0 if started is None else max(0.0, self.clock() - started)
            item.backoff.started_at = None
            delay = 0.0
        record = RestartRecord(item.name, code, self.wall(), uptime, delay)
        item.history.append(record)
        if self.on_exit is not None:
            try:
                self.on_exit(record)
            except Exception:
                log.exception("on_exit callback failed")
        if counted:
            log.warning(
                "%s exited (code %s) after %.1f s; restarting in %g s",
                item.name,
                code,
                uptime,
                record.delay_s,
            )
        else:
            log.info("%s exited (code %s) while held; not restarting", item.name, code)
        return record


async def _awaited(awaitable: Awaitable[None]) -> None:
    """A coroutine of any awaitable (an injected sleep may return a plain future)."""
    await awaitable
