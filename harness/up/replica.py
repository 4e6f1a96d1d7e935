"""A scheduler replica of `kse up`: its process, and the handle chaos and the benches drive.

Each replica `scheduler-<i>` has its own client certificate (CN system:kube-scheduler, stem
scheduler-<i>), its own metrics port and its own election identity `scheduler-<i>_<8 hex>`, new at
every start (as kube-scheduler's `<hostname>_<uuid>`), so a restarted replica comes back as a new
candidate instead of resuming the dead one's term. A replica that exits is restarted by the
`Supervisor` (kubelet-like backoff) unless a fault holds it down.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from harness.procs.launcher import ManagedProcess, ready_file_json
from harness.procs.proctable import all_threads_stopped
from harness.up.status import ReplicaInfo
from harness.up.supervisor import RestartRecord, Supervised, Supervisor

__all__ = ["ControllerManagerProcess", "Replica", "SchedulerProcess"]


class SchedulerProcess(ManagedProcess):
    """A `kse scheduler` replica whose election identity is new at every start (see the module doc)."""

    def __init__(
        self,
        name: str,
        argv_for: Callable[[str], list[str]],
        *,
        unique_identity: bool,
        data_dir: Path,
        ready_file: Path,
        ready_timeout: float,
        grace: float,
        metrics_port: int,
    ) -> None:
        self._argv_for = argv_for
        self.unique_identity = unique_identity
        self.metrics_port = metrics_port
        self.identity = ""
        super().__init__(
            name,
            argv_for(name),
            data_dir=data_dir,
            ready_file=ready_file,
            ready_check=ready_file_json,
            ready_timeout=ready_timeout,
            grace=grace,
        )

    def new_identity(self) -> str:
        return f"{self.name}_{secrets.token_hex(4)}" if self.unique_identity else self.name

    def command_line(self) -> list[str]:
        self.identity = self.new_identity()
        self.argv = self._argv_for(self.identity)
        return list(self.argv)

    def life_label(self) -> str:
        return self.identity  # set by command_line(), just before the start

    @property
    def identities(self) -> list[str]:
        """The election identity of every start, oldest first."""
        return [life.label for life in self.lives]

    @property
    def pids(self) -> list[int]:
        """The pid of every start, oldest first."""
        return [life.pid for life in self.lives]


class ControllerManagerProcess(SchedulerProcess):
    """A `kse controller-manager` replica: elected like a scheduler replica (a new identity at
    every start, supervised, a `Replica` handle), on its own Lease."""


class Replica:
    """The handle of one scheduler replica: its process, its supervision, and the faults chaos needs."""

    def __init__(self, process: SchedulerProcess, supervisor: Supervisor | None) -> None:
        self.process = process
        self._supervisor = supervisor

    def __repr__(self) -> str:
        return f"<Replica {self.name} identity={self.identity} pid={self.pid} state={self.state}>"

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def identity(self) -> str:
        """The election identity of the current (or latest) start."""
        return self.process.identity

    @property
    def identities(self) -> tuple[str, ...]:
        return tuple(self.process.identities)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.running

    @property
    def paused(self) -> bool:
        return self.process.paused and self.process.running

    @property
    def metrics_address(self) -> str:
        return f"127.0.0.1:{self.process.metrics_port}"

    @property
    def supervised(self) -> Supervised | None:
        """Its supervisor entry; None when unsupervised, or not yet added (a start that failed
        before the supervisor took the replica on still has to be stopped cleanly)."""
        if self._supervisor is None:
            return None
        try:
            return self._supervisor.get(self.name)
        except KeyError:
            return None

    @property
    def restarts(self) -> int:
        s = self.supervised
        return s.restarts if s is not None else 0

    @property
    def restart_history(self) -> list[RestartRecord]:
        s = self.supervised
        return list(s.history) if s is not None else []

    @property
    def state(self) -> str:
        s = self.supervised
        if s is not None:
            if self.running:
                return "running"
            return s.state if s.state != "running" else "exited"
        return "running" if self.running else "exited"

    def info(self, now: float | None = None) -> ReplicaInfo:
        s = self.supervised
        remaining = None
        if s is not None:
            remaining = s.backoff_remaining(time.monotonic() if now is None else now)
        return ReplicaInfo(
            name=self.name,
            identity=self.identity,
            identities=self.identities,
            pid=self.pid,
            running=self.running,
            paused=self.paused,
            restarts=self.restarts,
            state=self.state,
            backoff_remaining_s=remaining,
            metrics=self.metrics_address,
        )

    def _hold(self, restart: bool) -> None:
        if self._supervisor is not None and not restart:
            self._supervisor.hold(self.name)

    async def kill(self, *, restart: bool = True) -> int | None:
        """SIGKILL the replica's process group (a crash). `restart=False`: keep it down until `start()`."""
        self._hold(restart)
        return self.process.kill()  # SIGKILL, then a few ms until the group is gone

    async def terminate(self, *, restart: bool = True, grace: float | None = None) -> int | None:
        """SIGTERM (the leader releases its lease), SIGKILL after `grace`. `restart=False`: keep it down."""
        self._hold(restart)
        return await self.process.terminate(grace)

    async def stop(self) -> None:
        """SIGSTOP: the process freezes with its connections open (a long GC pause, a hung VM).
        Returns once every thread of it is stopped."""
        self.process.pause()
        pid = self.pid
        deadline = time.monotonic() + 5.0
        while pid is not None and time.monotonic() < deadline:
            if all_threads_stopped(pid) is not False:  # None: gone, or no /proc: nothing to wait for
                break
            await asyncio.sleep(0.002)

    async def cont(self) -> None:
        """SIGCONT after `stop()`."""
        self.process.resume()

    async def start(self, *, wait_ready: bool = True) -> None:
        """Back under supervision; started at once if it is down (no backoff)."""
        if self._supervisor is not None:
            self._supervisor.release(self.name)
        if not self.process.running:
            self.process.start()
        if wait_ready:
            await self.process.wait_ready()
