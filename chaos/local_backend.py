"""The local-process fault backend: faults on the processes of a `kse up` topology on this host.

Two ways in:

- `LocalBackend(cluster)`: over a `harness.up.Cluster` this process started (what `kse chaos run` does
  on a fresh cluster). Everything is possible: a replica killed with `restart=False` stays down (its
  supervisor holds it) until `start()`; a killed API server or etcd member is started again by this
  backend (at once with `restart=True`, on `start()` otherwise); partitions go through the
  cluster's `PartitionProxy`s.
- `AttachedLocalBackend.from_data_dir(DATA_DIR)`: over a `kse up` running in another process, found
  through `DATA_DIR/run/cluster.json` (which that `kse up` rewrites whenever a process starts or
  exits). Faults are signals to the recorded pids; what dies is brought back by the *running*
  `kse up`'s supervisor, never by this backend, which cannot start processes it did not start. So,
  attached: `kill` / `terminate` with `restart=True` mean "the supervisor restarts it" (the backend
  waits for cluster.json to show the new pid, and fails if none comes); `restart=False` and starting
  a stopped API server or etcd member are refused with a `BackendError` saying so; partitions are
  refused too (the proxies live inside the `kse up` process).

Clock skew, both ways: `set_clock_skew` writes `{"offset_s", "rate"}` to the file the replica's
`kse scheduler --clock-skew-file` re-reads (`clock_skew_path(run_dir, replica)` for clusters this
process starts; attached, the path on the replica's command line).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.backend import BackendError
from harness.clusterfile import (
    CLUSTER_FILE_NAME,
    ClusterFile,
    ClusterFileError,
    ProcessEntry,
    cluster_file_path,
)
from harness.procs.proctable import cmdline, pid_alive
from kse.fileio import write_atomic

if TYPE_CHECKING:
    from harness.procs.launcher import ManagedProcess
    from harness.proxy import PartitionProxy
    from harness.up import Cluster, Replica

__all__ = [
    "CLUSTER_FILE",
    "AttachedLocalBackend",
    "LocalBackend",
    "clock_skew_path",
    "kubelet_control_path",
    "natural_key",
    "write_clock_skew",
    "write_kubelet_control",
]

CLUSTER_FILE = CLUSTER_FILE_NAME  # in <data_dir>/run/, written by `kse up` (harness.clusterfile)
CLOCK_SKEW_FLAG = "--clock-skew-file"


KUBELET_CONTROL_FLAG = "--control-file"


def kubelet_control_path(run_dir: Path) -> Path:
    """nodesim's `--control-file` in a chaos run that stops and starts kubelets."""
    return run_dir / "nodesim-control.json"


def write_kubelet_control(path: Path, stopped: Collection[str], versions: Mapping[str, str]) -> None:
    """nodesim's control file (`nodesim.simulator.KubeletControl`), written atomically."""
    doc = {"stopped": sorted(stopped), "kubeletVersions": dict(sorted(versions.items()))}
    write_atomic(path, json.dumps(doc))


def clock_skew_path(run_dir: Path, replica: str) -> Path:
    """Where a local replica's `--clock-skew-file` lives: `<run_dir>/clock-skew-<replica>.json`."""
    return Path(run_dir) / f"clock-skew-{replica}.json"


def write_clock_skew(path: Path, offset_s: float, rate: float) -> None:
    """Atomically (a rename) write the skew file `kse scheduler --clock-skew-file` re-reads."""
    if rate <= 0:
        raise BackendError(f"clock rate must be > 0, got {rate!r}")
    write_atomic(path, json.dumps({"offset_s": float(offset_s), "rate": float(rate)}) + "\n")


def natural_key(name: str) -> tuple[str, int]:
    """Sort "scheduler-10" after "scheduler-2"."""
    m = re.fullmatch(r"(.*?)(\d+)", name)
    return (m.group(1), int(m.group(2))) if m else (name, -1)


# ---------------------------------------------------------------------------------------------- owned


class LocalBackend:
    """Faults on the processes of a `harness.up.Cluster` started by this process (see the module doc)."""

    name = "local"

    def __init__(self, cluster: Cluster, *, proxies: Mapping[str, PartitionProxy] | None = None) -> None:
        self.cluster = cluster
        self.pki_dir: Path = cluster.plan.pki_dir
        self.run_dir: Path = cluster.plan.run_dir
        self._proxies: dict[str, PartitionProxy] = dict(proxies or {})
        self._ready_pids: set[int] = set()

    # -- lookup

    @property
    def proxies(self) -> dict[str, PartitionProxy]:
        """The partition proxies: the cluster's own (`ClusterPlan.partition_proxies`), else given."""
        own = getattr(self.cluster, "proxies", None) or {}
        return {**self._proxies, **own}

    def _replica(self, target: str) -> Replica | None:
        for r in [*self.cluster.replicas, *getattr(self.cluster, "controller_managers", [])]:
            if r.name == target:
                return r
        return None

    def _process(self, target: str) -> ManagedProcess:
        for name, proc in self.cluster.processes():
            if name == target:
                return proc
        known = ", ".join(name for name, _ in self.cluster.processes())
        raise BackendError(f"no process {target!r} in this cluster (have: {known})")

    def _etcd(self, target: str) -> Any:
        if self.cluster.etcd is None:
            return None
        try:
            return self.cluster.etcd.member(target)
        except KeyError:
            return None

    async def replicas(self) -> list[str]:
        return sorted((r.name for r in self.cluster.replicas), key=natural_key)

    async def controller_managers(self) -> list[str]:
        """The controller-manager replicas (not part of the protocol: the nemesis asks if it can)."""
        return sorted((r.name for r in getattr(self.cluster, "controller_managers", [])), key=natural_key)

    async def identity(self, replica: str) -> str:
        r = self._replica(replica)
        if r is None:
            raise BackendError(f"no replica {replica!r}; have: {', '.join(await self.replicas())}")
        return r.identity

    async def etcd_members(self) -> list[str]:
        return [m.name for m in self.cluster.etcd_members]

    async def etcd_leader(self) -> str:
        """The etcd member that is leader now (not part of the protocol: the nemesis asks if it can)."""
        if self.cluster.etcd is None:
            raise BackendError("the cluster has no etcd")
        try:
            return str((await self.cluster.etcd.leader()).name)
        except Exception as e:
            raise BackendError(f"no etcd leader: {e}") from e

    async def pid(self, target: str) -> int | None:
        r = self._replica(target)
        if r is not None:
            return r.pid
        m = self._etcd(target)
        if m is not None:
            return int(m.pid) if m.pid is not None else None
        return self._process(target).pid

    async def ready(self, replica: str) -> bool:
        """Running, not paused, and its /readyz answered 200 once (informers synced; asked once per
        process). Not part of the protocol: the waits (`chaos.waits`) ask a backend that offers it."""
        from chaos.probes import ready

        r = self._replica(replica)
        pid = r.pid if r is not None else None
        if r is None or pid is None or not r.running or r.paused:
            return False
        if pid in self._ready_pids:
            return True
        if await ready(r.metrics_address):
            self._ready_pids.add(pid)
            return True
        return False

    async def leading(self, replica: str) -> bool | None:
        """Whether the replica itself says it leads (its leader_election_master_status); None if it
        does not answer. Not part of the protocol, as `ready`."""
        from chaos.probes import master_status

        r = self._replica(replica)
        if r is None or not r.running:
            return None
        status = await master_status(r.metrics_address)
        return None if status is None else status > 0

    # -- faults

    async def kill(self, target: str, *, restart: bool = True) -> None:
        await self._stop(target, kill=True, restart=restart)

    async def terminate(self, target: str, *, restart: bool = True) -> None:
        await self._stop(target, kill=False, restart=restart)

    async def _stop(self, target: str, *, kill: bool, restart: bool) -> None:
        c = self.cluster
        r = self._replica(target)
        if r is not None:
            # restart=True: the supervisor brings it back (its backoff); False: held until start().
            await (r.kill(restart=restart) if kill else r.terminate(restart=restart))
            return
        m = self._etcd(target)
        if m is not None:
            if restart:
                await m.restart(signal.SIGKILL if kill else signal.SIGTERM)
            else:
                await (m.kill() if kill else m.stop())
            return
        if c.apiserver is not None and target == c.apiserver.name:
            if restart:
                await c.restart_apiserver(kill=kill)
            elif kill:
                c.apiserver.kill()
            else:
                await c.apiserver.terminate()
            return
        proc = self._process(target)
        if kill:
            proc.kill()
        else:
            await proc.terminate()
        if restart:
            proc.start()
            await proc.wait_ready(c.plan.ready_timeout)

    async def pause(self, target: str) -> None:
        r = self._replica(target)
        if r is not None:
            await r.stop()
            return
        m = self._etcd(target)
        if m is not None:
            await m.pause()
            return
        self._process(target).pause()

    async def resume(self, target: str) -> None:
        r = self._replica(target)
        if r is not None:
            await r.cont()
            return
        m = self._etcd(target)
        if m is not None:
            await m.resume()
            return
        self._process(target).resume()

    async def start(self, target: str) -> None:
        c = self.cluster
        r = self._replica(target)
        if r is not None:
            await r.start(wait_ready=True)  # no backoff: at once, and ready awaited
            return
        m = self._etcd(target)
        if m is not None:
            await m.restart()  # not running: started on its data dir and ports, health awaited
            return
        proc = self._process(target)
        if not proc.running:
            proc.start()
        await proc.wait_ready(c.plan.ready_timeout)

    async def partition(
        self, replica: str, mode: str = "blackhole", *, delay: float = 0.0, loss: float = 0.0
    ) -> None:
        self._proxy(replica).partition(mode, delay=delay, loss=loss)

    async def heal(self, replica: str) -> None:
        self._proxy(replica).heal()

    def _proxy(self, replica: str) -> PartitionProxy:
        proxy = self.proxies.get(replica)
        if proxy is None:
            raise BackendError(f"{replica} is not behind a partition proxy")
        return proxy

    async def set_clock_skew(self, replica: str, offset_s: float, rate: float) -> None:
        if self._replica(replica) is None:
            raise BackendError(f"no replica {replica!r}; have: {', '.join(await self.replicas())}")
        write_clock_skew(clock_skew_path(self.run_dir, replica), offset_s, rate)

    async def set_kubelets(self, stopped: Collection[str], versions: Mapping[str, str]) -> None:
        """Stop the kubelets of `stopped` and start the others (with `versions` as their
        kubeletVersion): nodesim's control file rewritten, then SIGHUP (it re-reads it)."""
        proc = self._process("nodesim")
        path = kubelet_control_path(self.cluster.plan.run_dir)
        await asyncio.to_thread(write_kubelet_control, path, stopped, versions)
        proc.send_signal(signal.SIGHUP)

    async def aclose(self) -> None:
        """Nothing to release: the cluster belongs to whoever started it."""


# ---------------------------------------------------------------------------------------------- attached


class AttachedLocalBackend:
    """Faults on a `kse up` running in another process, by pid (see the module doc).

    `restart_within` bounds how long a fault waits for the running `kse up` to bring back what it
    killed (its supervisor's backoff), `grace` how long a SIGTERM gets before a SIGKILL.
    """

    name = "local"

    def __init__(self, cluster_file: Path, *, restart_within: float = 30.0, grace: float = 10.0) -> None:
        self.cluster_file = Path(cluster_file)
        self.restart_within = restart_within
        self.grace = grace
        info = self._read()
        self.pki_dir = info.pki_dir
        self.run_dir = info.run_dir

    @classmethod
    def from_data_dir(cls, data_dir: Path | str, **kwargs: Any) -> AttachedLocalBackend:
        path = cluster_file_path(data_dir)
        if not path.is_file():
            raise BackendError(
                f"{path} does not exist: is a `kse up --data-dir {data_dir}` running (one that writes "
                "run/cluster.json)?"
            )
        return cls(path, **kwargs)

    def _read(self) -> ClusterFile:
        try:
            return ClusterFile.read(self.cluster_file)
        except ClusterFileError as e:
            raise BackendError(str(e)) from e

    def info(self) -> ClusterFile:
        """cluster.json as it is now (`kse up` rewrites it whenever a process starts or exits)."""
        return self._read()

    def _procs(self) -> dict[str, ProcessEntry]:
        return self._read().processes

    def _entry(self, target: str) -> ProcessEntry:
        procs = self._procs()
        if target not in procs:
            raise BackendError(f"no process {target!r} in {self.cluster_file} (have: {', '.join(procs)})")
        return procs[target]

    def _pid_of(self, target: str) -> int | None:
        pid = self._entry(target).live_pid
        return pid if pid is not None and pid_alive(pid) else None

    def _signal(self, target: str, sig: int) -> int:
        pid = self._pid_of(target)
        if pid is None:
            raise BackendError(f"{target} is not running (no live pid in {self.cluster_file})")
        try:
            if os.getpgid(pid) == pid:  # `kse up` starts each process as its own group leader
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError as e:
            raise BackendError(f"{target} (pid {pid}) is gone") from e
        return pid

    def _role(self, target: str) -> str:
        return self._entry(target).role

    async def replicas(self) -> list[str]:
        return sorted(self._read().by_role("scheduler"), key=natural_key)

    async def controller_managers(self) -> list[str]:
        return sorted(self._read().by_role("controller-manager"), key=natural_key)

    async def identity(self, replica: str) -> str:
        return self._entry(replica).identity or ""

    async def etcd_members(self) -> list[str]:
        return sorted(self._read().by_role("etcd"), key=natural_key)

    async def pid(self, target: str) -> int | None:
        return self._pid_of(target)

    def _refuse_keep_down(self, target: str, what: str) -> None:
        raise BackendError(
            f"{what} {target} and keep it down: not possible attached to a running `kse up` (its "
            "supervisor restarts what dies, and this backend cannot start processes it did not start); "
            "run the scenario on a fresh cluster (without --attach) for that"
        )

    async def kill(self, target: str, *, restart: bool = True) -> None:
        if not restart:
            self._refuse_keep_down(target, "kill")
        pid = self._signal(target, signal.SIGKILL)
        await self._after_stop(target, pid)

    async def terminate(self, target: str, *, restart: bool = True) -> None:
        if not restart:
            self._refuse_keep_down(target, "terminate")
        pid = self._signal(target, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while True:  # polled: the pid is not our child, nothing to wait on
            if not pid_alive(pid) or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.02)
        if pid_alive(pid):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        await self._after_stop(target, pid)

    async def _after_stop(self, target: str, old_pid: int) -> None:
        """Replicas: their supervisor restarts them in the background, as it does locally. The API
        server, etcd and the rest: wait for the running `kse up` to start it again (a new live pid)."""
        if self._role(target) in ("scheduler", "controller-manager"):
            return
        await self._wait_restarted(target, old_pid)

    async def _wait_restarted(self, target: str, old_pid: int | None) -> None:
        deadline = time.monotonic() + self.restart_within
        while time.monotonic() < deadline:
            with contextlib.suppress(BackendError):
                pid = self._pid_of(target)
                if pid is not None and pid != old_pid:
                    return
            await asyncio.sleep(0.1)
        raise BackendError(
            f"the running `kse up` did not restart {target} within {self.restart_within:g}s; attached, "
            "this backend cannot start processes it did not start (kill/term on the API server or an "
            "etcd member mean 'the supervisor restarts it')"
        )

    async def pause(self, target: str) -> None:
        self._signal(target, signal.SIGSTOP)

    async def resume(self, target: str) -> None:
        self._signal(target, signal.SIGCONT)

    async def start(self, target: str) -> None:
        """Attached, nothing was kept down: wait until `target` runs (its supervisor restarting it)."""
        if self._pid_of(target) is None:
            await self._wait_restarted(target, None)

    async def partition(
        self, replica: str, mode: str = "blackhole", *, delay: float = 0.0, loss: float = 0.0
    ) -> None:
        raise BackendError(
            f"partition {replica}: attached, the partition proxies live inside the `kse up` process and "
            "cannot be driven from here; run the scenario on a fresh cluster (without --attach)"
        )

    async def heal(self, replica: str) -> None:
        await self.partition(replica)

    async def set_clock_skew(self, replica: str, offset_s: float, rate: float) -> None:
        pid = self._pid_of(replica)
        argv = (cmdline(pid) or []) if pid is not None else []
        path: Path | None = None
        for i, a in enumerate(argv):
            if a == CLOCK_SKEW_FLAG and i + 1 < len(argv):
                path = Path(argv[i + 1])
            elif a.startswith(CLOCK_SKEW_FLAG + "="):
                path = Path(a.split("=", 1)[1])
        if path is None:
            raise BackendError(
                f"{replica} was not started with {CLOCK_SKEW_FLAG} (start `kse up` with a clock-skew file "
                "per replica, or run the scenario on a fresh cluster): its clock cannot be skewed"
            )
        write_clock_skew(path, offset_s, rate)

    async def aclose(self) -> None:
        """Nothing to release: the cluster belongs to the running `kse up`."""
