"""The local topology of `kse up`: a plan (plain data) and `Cluster`, the processes it runs.

    plan = ClusterPlan(data_dir=Path("/tmp/kse"), replicas=3, nodes=100, rate=20)
    async with Cluster(plan) as cluster:          # every process started and ready, in order
        leader = await cluster.wait_for_leader()   # the Replica holding the Lease
        await leader.kill()                        # SIGKILL; the supervisor restarts it (backoff)
        await cluster.replica("scheduler-2").stop()   # SIGSTOP (cont() thaws)
        await cluster.restart_apiserver()
        pods = await cluster.clientset.pods.list("default")
    # stopped in order: workload, schedulers, nodesim, API server, etcd; nothing left behind

What runs, all under one data dir D (default ~/.kse):

    D/pki/                 the PKI (`kse certs init` layout), reused unless `fresh`
    D/etcd/                etcd member data (etcd-0, ...) and their logs; ports in etcd-cluster.json
    D/logs/<name>.log      one log per process (etcd's are links into D/etcd)
    D/run/                 ready files, the lock, the pid table of the running `kse up`
    D/connections/<id>.json  a connection file per client identity (scheduler-1, nodesim, ...)
    D/config.json          the admin connection file the API server writes (`kse --config` it)
    D/audit/audit.jsonl    the API server's audit log (when the API server has --audit-log)

Processes, in dependency order: etcd (1 or 3 members, mTLS) -> API server (ready file; writes
D/config.json) -> scheduler replicas `scheduler-1..N`, each with its own client certificate
(CN system:kube-scheduler, stem scheduler-<i>), its own metrics port and its own election identity
`scheduler-<i>_<8 hex>` (new at every start, as kube-scheduler's `<hostname>_<uuid>`, so a restarted
replica comes back as a new candidate instead of resuming the dead one's term), and nodesim, started
together -> the workload. A replica that exits is restarted by the `Supervisor` (kubelet-like
backoff). Everything is in its own process group (`ManagedProcess`), and a final check after the
shutdown makes sure that no process of any start is left.

Leader election: `--leader-elect=true` and its flags are passed when `kse scheduler --help` offers
them (probed at start). Until then, TEMPORARY FALLBACK: a single replica with `--leader-elect=false`
runs, and the status says so (`Cluster.leader_election` is False).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from certs.layout import PKI, CertPaths, leaf_specs
from certs.pki import init_pki, issue_spec, load_ca, write_pair
from kse.client.channel import secure_channel
from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError
from kse.config import ConnectionFile
from kse.procs.apiserver import ApiServerProcess
from kse.procs.etcd import (
    CLUSTER_FILE,
    EtcdCluster,
    EtcdLaunchError,
    EtcdProcess,
    EtcdServerTLS,
    start_cluster,
)
from kse.procs.launcher import LaunchError, ManagedProcess, ready_file_json
from kse.procs.ports import free_ports
from kse.up.status import ProcessInfo, ReplicaInfo, StatusSnapshot, StatusTracker
from kse.up.supervisor import BackoffPolicy, RestartRecord, Supervised, Supervisor
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = Path("~/.kse")
STRATEGIES = ("watch", "poll")
ON_LOST_LEASE = ("exit", "standby")
_CERT_MIN_VALIDITY = timedelta(hours=1)
_PROBE_TIMEOUT = 60.0


class UpError(RuntimeError):
    """The cluster could not be started (the message says which process and shows its log tail)."""


# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class ElectionPlan:
    """Leader election of the scheduler replicas (kube-scheduler's --leader-elect-* flags)."""

    strategy: str = "watch"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lease_name: str = "kube-scheduler"
    lease_namespace: str = "kube-system"
    on_lost_lease: str = "exit"

    def problems(self) -> list[str]:
        out = []
        if self.strategy not in STRATEGIES:
            out.append(f"election strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.on_lost_lease not in ON_LOST_LEASE:
            out.append(f"on-lost-lease must be one of {', '.join(ON_LOST_LEASE)}, got {self.on_lost_lease!r}")
        if not self.lease_duration > self.renew_deadline:
            out.append(
                f"lease duration ({self.lease_duration:g}s) must be greater than the renew deadline "
                f"({self.renew_deadline:g}s)"
            )
        if not self.renew_deadline > 1.2 * self.retry_period:
            out.append(
                f"renew deadline ({self.renew_deadline:g}s) must be greater than 1.2 x the retry period "
                f"({self.retry_period:g}s)"
            )
        if self.retry_period <= 0:
            out.append("retry period must be > 0")
        return out


@dataclass
class ClusterPlan:
    """What `kse up` runs (plain data; `Cluster` turns it into processes)."""

    data_dir: Path = DEFAULT_DATA_DIR
    replicas: int = 3
    nodes: int = 100
    rate: float = 20.0  # workload pods per second
    workload: bool = True
    workload_total: int | None = None
    etcd_members: int = 1
    election: ElectionPlan = field(default_factory=ElectionPlan)
    fresh: bool = False
    etcd_tls: bool = True
    etcd_fast: bool = False  # test timings for etcd (10 ms heartbeat)
    prefix: str = "/registry"
    kube_api_qps: float | None = None
    kube_api_burst: int | None = None
    # Each start of a replica gets identity `<name>_<hex>` (as upstream's hostname_uuid); False: `<name>`.
    unique_identities: bool = True
    restart_policy: BackoffPolicy | None = field(default_factory=BackoffPolicy)  # None: no restarts
    log_level: str = "info"
    grace: float = 10.0  # SIGTERM -> SIGKILL
    ready_timeout: float = 60.0
    track_status: bool = True
    workload_run_id: str = ""  # default: random
    apiserver_args: tuple[str, ...] = ()
    scheduler_args: tuple[str, ...] = ()
    nodesim_args: tuple[str, ...] = ()
    workload_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).expanduser().absolute()

    def problems(self) -> list[str]:
        out = list(self.election.problems())
        if self.replicas < 1:
            out.append(f"replicas must be >= 1, got {self.replicas}")
        if self.nodes < 0:
            out.append(f"nodes must be >= 0, got {self.nodes}")
        if self.rate < 0:
            out.append(f"rate must be >= 0, got {self.rate:g}")
        if self.workload_total is not None and self.workload_total < 1:
            out.append(f"workload total must be >= 1, got {self.workload_total}")
        if self.etcd_members < 1:
            out.append(f"etcd members must be >= 1, got {self.etcd_members}")
        return out

    # ------------------------------------------------------------------ layout

    @property
    def pki_dir(self) -> Path:
        return self.data_dir / "pki"

    @property
    def etcd_dir(self) -> Path:
        return self.data_dir / "etcd"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    @property
    def connections_dir(self) -> Path:
        return self.data_dir / "connections"

    @property
    def connection_file(self) -> Path:
        """The admin connection file (the API server writes it; `kse --config` takes it)."""
        return self.data_dir / "config.json"

    @property
    def audit_log(self) -> Path:
        return self.data_dir / "audit" / "audit.jsonl"

    def connection_path(self, stem: str) -> Path:
        return self.connections_dir / f"{stem}.json"

    def ready_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.ready.json"

    def log_path(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    def scheduler_names(self, replicas: int | None = None) -> list[str]:
        return [f"scheduler-{i}" for i in range(1, (self.replicas if replicas is None else replicas) + 1)]

    @property
    def cli_hint(self) -> str:
        return f"kse --config {self.connection_file} get pods"

    # ------------------------------------------------------------------ command lines

    def apiserver_extra_args(self, features: Features) -> list[str]:
        args = ["--connection-file", str(self.connection_file), "--log-level", self.log_level]
        if features.audit_log:
            args += ["--audit-log", str(self.audit_log)]
        return args + list(self.apiserver_args)

    def scheduler_argv(
        self, name: str, identity: str, metrics_port: int, features: Features, *, leader_elect: bool
    ) -> list[str]:
        argv = [
            *_kse(),
            "scheduler",
            "--connection-file", str(self.connection_path(name)),
            "--identity", identity,
            "--metrics-bind-address", f"127.0.0.1:{metrics_port}",
            "--ready-file", str(self.ready_path(name)),
            "--log-level", self.log_level,
        ]  # fmt: skip
        if self.kube_api_qps is not None:
            argv += ["--kube-api-qps", f"{self.kube_api_qps:g}"]
        if self.kube_api_burst is not None:
            argv += ["--kube-api-burst", str(self.kube_api_burst)]
        if not leader_elect:
            argv.append("--leader-elect=false")
        else:
            e = self.election
            argv.append("--leader-elect=true")
            wanted = {
                "--leader-elect-lease-duration": _seconds(e.lease_duration),
                "--leader-elect-renew-deadline": _seconds(e.renew_deadline),
                "--leader-elect-retry-period": _seconds(e.retry_period),
                "--leader-elect-resource-name": e.lease_name,
                "--leader-elect-resource-namespace": e.lease_namespace,
                "--leader-elect-strategy": e.strategy,
                "--on-lost-lease": e.on_lost_lease,
            }
            for flag, value in wanted.items():
                if flag in features.scheduler_flags:
                    argv += [flag, value]
        return argv + list(self.scheduler_args)

    def nodesim_argv(self) -> list[str]:
        return [
            *_kse(),
            "nodesim",
            "--nodes", str(self.nodes),
            "--connection-file", str(self.connection_path("nodesim")),
            "--ready-file", str(self.ready_path("nodesim")),
            "--log-level", self.log_level,
            *self.nodesim_args,
        ]  # fmt: skip

    def workload_argv(self, run_id: str) -> list[str]:
        argv = [
            *_kse(),
            "workload",
            "--connection-file", str(self.connection_path("workload")),
            "--rate", f"{self.rate:g}",
            "--run-id", run_id,
            "--ready-file", str(self.ready_path("workload")),
            "--stop-grace", "5s",
            "--log-level", self.log_level,
        ]  # fmt: skip
        if self.workload_total is not None:
            argv += ["--total", str(self.workload_total)]
        return argv + list(self.workload_args)


def _kse() -> list[str]:
    return [sys.executable, "-m", "kse"]


def _seconds(value: float) -> str:
    return f"{value:g}s"


# ---------------------------------------------------------------------------------------------- features


@dataclass(frozen=True)
class Features:
    """What the component processes offer, read from their `--help` (so kse up follows their flags)."""

    scheduler_flags: frozenset[str] = frozenset()
    apiserver_flags: frozenset[str] = frozenset()
    scheduler_help: str = ""

    @property
    def leader_election(self) -> bool:
        """`--leader-elect=true` is accepted (the flags exist and the help no longer says otherwise)."""
        return (
            "--leader-elect-lease-duration" in self.scheduler_flags
            and "not implemented yet" not in " ".join(self.scheduler_help.split())
        )

    @property
    def audit_log(self) -> bool:
        return "--audit-log" in self.apiserver_flags


def _flags(help_text: str) -> frozenset[str]:
    found = set()
    for word in help_text.replace(",", " ").replace("[", " ").replace("]", " ").split():
        if word.startswith("--"):
            found.add(word.split("=", 1)[0])
    return frozenset(found)


def _help(component: str) -> str:
    try:
        out = subprocess.run(
            [*_kse(), component, "--help"],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UpError(f"cannot run `kse {component} --help`: {e}") from e
    if out.returncode != 0:
        raise UpError(f"`kse {component} --help` failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


async def probe_features() -> Features:
    """Ask `kse scheduler --help` and `kse apiserver --help` (in parallel) which flags they have."""
    sched, api = await asyncio.gather(
        asyncio.to_thread(_help, "scheduler"), asyncio.to_thread(_help, "apiserver")
    )
    return Features(scheduler_flags=_flags(sched), apiserver_flags=_flags(api), scheduler_help=sched)


# ---------------------------------------------------------------------------------------------- PKI


def ensure_pki(plan: ClusterPlan, replicas: int) -> tuple[PKI, list[str]]:
    """The PKI under D/pki: made if absent; reused otherwise, with any identity that is missing or
    expires within the hour (re)issued from the same CA. Returns it and what was done."""
    pki_dir = plan.pki_dir
    specs = leaf_specs(scheduler_replicas=replicas)
    if not (pki_dir / "ca.crt").is_file() or not (pki_dir / "ca.key").is_file():
        pki = init_pki(pki_dir, scheduler_replicas=replicas, overwrite=(pki_dir / "ca.crt").exists())
        return pki, [f"PKI written to {pki_dir}"]
    from cryptography import x509

    ca = load_ca(pki_dir)
    if ca.certificate.not_valid_after_utc < datetime.now(UTC) + _CERT_MIN_VALIDITY:
        raise UpError(f"the CA in {pki_dir} has expired (or expires within the hour); run with --fresh")
    done: list[str] = []
    for spec in specs:
        paths = CertPaths.in_dir(pki_dir, spec.stem)
        reason = ""
        if not paths.cert.is_file() or not paths.key.is_file():
            reason = "missing"
        else:
            cert = x509.load_pem_x509_certificate(paths.cert.read_bytes())
            if cert.not_valid_after_utc < datetime.now(UTC) + _CERT_MIN_VALIDITY:
                reason = "expiring"
        if reason:
            write_pair(paths, issue_spec(ca, spec))
            done.append(f"issued {spec.stem} ({reason})")
    return PKI.from_dir(pki_dir), done or [f"PKI reused from {pki_dir}"]


# ---------------------------------------------------------------------------------------------- processes


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
        self.identities: list[str] = []
        self.pids: list[int] = []
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
        self.identities.append(self.identity)
        self.argv = self._argv_for(self.identity)
        return list(self.argv)

    def start(self) -> ManagedProcess:
        super().start()
        if self.pid is not None:
            self.pids.append(self.pid)
        return self


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
        if self._supervisor is None:
            return None
        return self._supervisor.get(self.name)

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
            if _all_threads_stopped(pid):
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


def _all_threads_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] not in ("T", "t"):
                    return False
    except (OSError, IndexError):
        return True  # gone, or no /proc: nothing more to wait for
    return True


def pid_alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
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


def _start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, it
    names one process for good."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


# ---------------------------------------------------------------------------------------------- cluster


Progress = Callable[[str], None]


class Cluster:
    """The processes of a plan, started in order and stopped in order (see the module doc).

    The plan is not changed, so the same Cluster may be entered again after it stopped (a
    benchmark's trials); each entry is a new run on the same data dir.

    Handles (valid inside the block): `etcd` (EtcdCluster) and `etcd_members`, `apiserver`
    (ApiServerProcess), `replicas` / `replica(name)` (Replica), `nodesim` and `workload`
    (ManagedProcess or None), `supervisor`, `clientset` (admin), `status` (StatusTracker or None),
    `data_dir`, `connection_file`, `audit_logs`.
    """

    def __init__(self, plan: ClusterPlan, *, progress: Progress | None = None) -> None:
        problems = plan.problems()
        if problems:
            raise ValueError("invalid plan: " + "; ".join(problems))
        self.plan = plan
        self.progress: Progress = progress or (lambda msg: log.info("%s", msg))
        self._reset()

    def _reset(self) -> None:
        """Fresh per-run state: a Cluster can be entered again after it stopped (same plan; the
        data dir keeps its PKI and etcd data unless the plan says `fresh`)."""
        plan = self.plan
        self.features = Features()
        self.pki: PKI | None = None
        self.etcd: EtcdCluster | None = None
        self.apiserver: ApiServerProcess | None = None
        self.replicas: list[Replica] = []
        self.nodesim: ManagedProcess | None = None
        self.workload: ManagedProcess | None = None
        self.supervisor: Supervisor | None = None
        self.clientset: Clientset | None = None
        self.status: StatusTracker | None = None
        self.run_id = plan.workload_run_id or f"up-{secrets.token_hex(4)}"
        self.ready_timings: dict[str, float] = {}  # seconds from start() to each process ready
        self.started_at: float | None = None  # time.time() when start() began
        self.ready_at: float | None = None
        self.leftovers: list[str] = []  # processes the final check had to kill
        # The status once the workload, schedulers and nodesim have stopped (before the API server).
        self.final_snapshot: StatusSnapshot | None = None
        self.notes: list[str] = []
        self._lock_file: IO[str] | None = None
        self._channel: Any = None
        self._pids: dict[int, str] = {}
        self._stacks: dict[str, contextlib.AsyncExitStack] = {}
        self._stopping = False
        self._stopped = False

    # ------------------------------------------------------------------ properties

    @property
    def data_dir(self) -> Path:
        return self.plan.data_dir

    @property
    def connection_file(self) -> Path:
        return self.plan.connection_file

    @property
    def leader_election(self) -> bool:
        return self.features.leader_election

    @property
    def etcd_members(self) -> list[EtcdProcess]:
        return list(self.etcd.members) if self.etcd is not None else []

    @property
    def audit_logs(self) -> list[Path]:
        """The API server's audit log file(s); empty while the API server has no --audit-log flag."""
        return [self.plan.audit_log] if self.features.audit_log else []

    def replica(self, name: str) -> Replica:
        for r in self.replicas:
            if r.name == name:
                return r
        raise KeyError(f"no replica {name!r}; have: {', '.join(r.name for r in self.replicas)}")

    def replica_by_identity(self, identity: str) -> Replica | None:
        for r in self.replicas:
            if identity and identity in r.identities:
                return r
        return None

    def processes(self) -> list[tuple[str, ManagedProcess]]:
        """Every process handle, in start order."""
        out: list[tuple[str, ManagedProcess]] = [(m.name, m.managed) for m in self.etcd_members]
        if self.apiserver is not None:
            out.append((self.apiserver.name, self.apiserver))
        out += [(r.name, r.process) for r in self.replicas]
        if self.nodesim is not None:
            out.append(("nodesim", self.nodesim))
        if self.workload is not None:
            out.append(("workload", self.workload))
        return out

    @property
    def pids(self) -> dict[int, str]:
        """Every pid this cluster started (all starts, restarts included) -> process name."""
        self._note_pids()
        return dict(self._pids)

    def _note_pids(self) -> None:
        for name, proc in self.processes():
            if proc.pid is not None:
                self._pids.setdefault(proc.pid, name)
        for r in self.replicas:
            for pid in r.process.pids:
                self._pids.setdefault(pid, r.name)

    # ------------------------------------------------------------------ lease and leader

    async def lease(self) -> pb.Lease | None:
        """The scheduler Lease, read from the API server now (None if there is none yet)."""
        assert self.clientset is not None, "cluster not started"
        e = self.plan.election
        try:
            return await self.clientset.leases.get(e.lease_namespace, e.lease_name)
        except NotFoundError:
            return None

    async def leader(self) -> Replica | None:
        """The replica whose current identity holds the Lease (read now), if it is running."""
        lease = await self.lease()
        if lease is None or not lease.spec.holder_identity:
            return None
        for r in self.replicas:
            if r.running and r.identity == lease.spec.holder_identity:
                return r
        return None

    async def wait_for_leader(
        self, within: float = 60.0, *, other_than: Replica | str | None = None
    ) -> Replica:
        """Poll the Lease until a running replica holds it; TimeoutError after `within` seconds.

        `other_than`: not this replica (a Replica), or not this identity (a str: e.g. the identity
        of a leader just killed, whose replica may come back under a new identity and win)."""
        deadline = time.monotonic() + within
        last_error = ""
        while True:
            try:
                r = await self.leader()
            except ApiError as e:
                r, last_error = None, str(e)
            if r is not None and not (
                r is other_than or (isinstance(other_than, str) and r.identity == other_than)
            ):
                return r
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no leader within {within:g}s" + (f" ({last_error})" if last_error else "")
                )
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ faults beyond replicas

    async def restart_apiserver(self, *, kill: bool = False, grace: float | None = None) -> None:
        """Stop the API server (SIGTERM, or SIGKILL with `kill`) and start it again on the same address."""
        api = self.apiserver
        assert api is not None, "cluster not started"
        if kill:
            api.kill()
        else:
            await api.terminate(grace)
        api.start()
        await api.wait_ready(self.plan.ready_timeout)
        self._note_pids()

    def kill_all(self) -> None:
        """SIGKILL every process at once (a second Ctrl-C); the ordered shutdown then finds them gone."""
        if self.supervisor is not None:
            for s in self.supervisor.items():
                s.held = True
        for _, proc in reversed(self.processes()):
            with contextlib.suppress(Exception):
                proc.kill()

    # ------------------------------------------------------------------ status

    def snapshot(self) -> StatusSnapshot | None:
        """The live status (None without a status tracker)."""
        if self.status is None:
            return None
        self._note_pids()  # also catches restarts made directly on a handle (etcd, API server)
        now = time.monotonic()
        procs = [
            ProcessInfo(name, p.pid, p.running, p.returncode, p.paused and p.running)
            for name, p in self.processes()
            if not isinstance(p, SchedulerProcess)
        ]
        return self.status.snapshot(
            [r.info(now) for r in self.replicas],
            procs,
            hint=self.plan.cli_hint,
            leader_election=self.leader_election,
            notes=self.notes,
        )

    # ------------------------------------------------------------------ lifetime

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start everything in dependency order; on any failure stop what started and raise UpError."""
        if self.started_at is not None:
            if not self._stopped:
                raise RuntimeError("this Cluster is running already")
            self._reset()
        self.started_at = time.time()
        t0 = time.monotonic()
        try:
            await self._start(t0)
        except BaseException as e:
            await self.stop()
            if isinstance(e, LaunchError | OSError | ValueError) and not isinstance(e, UpError):
                raise UpError(str(e)) from e
            raise
        self.ready_at = time.time()

    async def _start(self, t0: float) -> None:
        plan = self.plan
        say = self.progress

        def mark(name: str) -> float:
            self.ready_timings[name] = round(time.monotonic() - t0, 3)
            return self.ready_timings[name]

        plan.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        self._reap_previous_run()
        if plan.fresh:
            self._wipe()
        for d in (plan.logs_dir, plan.run_dir, plan.connections_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._check_etcd_layout()

        probe = asyncio.create_task(probe_features(), name="probe-features")
        try:
            pki, done = await asyncio.to_thread(ensure_pki, plan, max(3, plan.replicas))
            self.pki = pki
            say("; ".join(done))

            # etcd
            say(f"starting etcd ({plan.etcd_members} member{'s' if plan.etcd_members > 1 else ''})")
            tls = EtcdServerTLS.from_pki_dir(pki.dir) if plan.etcd_tls else None
            try:
                self.etcd = await start_cluster(
                    plan.etcd_members,
                    plan.etcd_dir,
                    tls=tls,
                    fast=plan.etcd_fast,
                    progress_notify_interval=5.0,
                    deadline=plan.ready_timeout,
                )
            except EtcdLaunchError as e:
                raise UpError(f"etcd did not come up: {e}") from e
            for m in self.etcd.members:
                _link_log(m.log_path, plan.log_path(m.name))
            self._write_pid_table()
            say(f"etcd ready at {', '.join(self.etcd.endpoints)} ({mark('etcd'):.1f}s)")

            self.features = await probe
        finally:
            if not probe.done():
                probe.cancel()
                with contextlib.suppress(BaseException):
                    await probe
        if not self.features.leader_election:
            msg = (
                "TEMPORARY FALLBACK: `kse scheduler` does not offer leader election yet; running ONE "
                "replica with --leader-elect=false"
            )
            self.notes.append(msg)
            say(msg)
        if plan.workload and not self.features.audit_log:
            log.debug("the API server has no --audit-log flag yet; no audit log")

        # API server
        api = ApiServerProcess(
            etcd_endpoints=self.etcd.endpoints,
            prefix=plan.prefix,
            pki_dir=pki.dir,
            data_dir=plan.data_dir,
            extra_args=plan.apiserver_extra_args(self.features),
            ready_timeout=plan.ready_timeout,
            grace=plan.grace,
        )
        self.apiserver = api
        if self.features.audit_log:
            plan.audit_log.parent.mkdir(parents=True, exist_ok=True)
        say("starting the API server")
        api.start()
        self._write_pid_table()
        await self._wait_ready(api)
        say(
            f"API server ready at {api.address} ({mark('apiserver'):.1f}s); "
            f"connection file {plan.connection_file}"
        )
        self._check_etcd_running()
        self._write_connections(api.address, pki)
        self._channel = secure_channel(ConnectionFile.load(plan.connection_path("admin")))
        self.clientset = Clientset(self._channel, qps=0, burst=1000, user_agent="kse-up")
        if plan.track_status:
            self.status = StatusTracker(
                self.clientset,
                lease_namespace=plan.election.lease_namespace,
                lease_name=plan.election.lease_name,
                run_id=self.run_id,
            )

        # Schedulers and nodesim, started together.
        replicas = plan.replicas if self.features.leader_election else 1
        if self.restart_policy_enabled:
            self.supervisor = Supervisor(plan.restart_policy, on_restart=self._restarted)
        ports = free_ports(replicas)
        for name, port in zip(plan.scheduler_names(replicas), ports, strict=True):
            proc = SchedulerProcess(
                name,
                self._scheduler_argv_for(name, port),
                unique_identity=plan.unique_identities,
                data_dir=plan.data_dir,
                ready_file=plan.ready_path(name),
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
                metrics_port=port,
            )
            self.replicas.append(Replica(proc, self.supervisor))
        say(
            f"starting {replicas} scheduler replica{'s' if replicas > 1 else ''} "
            f"and nodesim ({plan.nodes} nodes)"
        )
        for r in self.replicas:
            r.process.start()
        if plan.nodes > 0:
            self.nodesim = ManagedProcess(
                "nodesim",
                plan.nodesim_argv(),
                data_dir=plan.data_dir,
                ready_file=plan.ready_path("nodesim"),
                ready_check=ready_file_json,
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
            )
            self.nodesim.start()
        self._write_pid_table()
        for r in self.replicas:
            await self._wait_ready(r.process)
            say(f"{r.name} ready (pid {r.pid}, identity {r.identity}, metrics {r.metrics_address}) "
                f"({mark(r.name):.1f}s)")  # fmt: skip
            if self.supervisor is not None:
                self.supervisor.add(r.process)
        if self.supervisor is not None:
            await self._enter("supervisor", self.supervisor.running())
        if self.status is not None:
            await self._enter("status", self.status.running())
        if self.nodesim is not None:
            await self._wait_ready(self.nodesim)
            say(f"nodesim ready: {plan.nodes} nodes registered ({mark('nodesim'):.1f}s)")

        # Workload last.
        if plan.workload:
            self.workload = ManagedProcess(
                "workload",
                plan.workload_argv(self.run_id),
                data_dir=plan.data_dir,
                ready_file=plan.ready_path("workload"),
                ready_check=ready_file_json,
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
            )
            self.workload.start()
            self._write_pid_table()
            await self._wait_ready(self.workload)
            total = f", {plan.workload_total} in all" if plan.workload_total else ""
            say(f"workload ready: {plan.rate:g} pods/s{total}, run {self.run_id} ({mark('workload'):.1f}s)")
        mark("ready")

    @property
    def restart_policy_enabled(self) -> bool:
        return self.plan.restart_policy is not None

    def _scheduler_argv_for(self, name: str, port: int) -> Callable[[str], list[str]]:
        def argv_for(identity: str) -> list[str]:
            return self.plan.scheduler_argv(
                name, identity, port, self.features, leader_elect=self.features.leader_election
            )

        return argv_for

    def _restarted(self, record: RestartRecord) -> None:
        self.progress(
            f"{record.name} exited (code {record.exit_code}) after {record.uptime_s:.1f}s; "
            f"restarted after {record.delay_s:g}s backoff (pid {record.pid})"
        )
        self._note_pids()
        self._write_pid_table()

    async def _enter(self, key: str, cm: contextlib.AbstractAsyncContextManager[Any]) -> None:
        stack = self._stacks.setdefault(key, contextlib.AsyncExitStack())
        await stack.enter_async_context(cm)

    async def _wait_ready(self, proc: ManagedProcess) -> None:
        try:
            await proc.wait_ready(self.plan.ready_timeout)
        except LaunchError as e:
            raise UpError(f"{proc.name} did not come up: {e}") from e

    def _write_connections(self, address: str, pki: PKI) -> None:
        stems = ["admin", "nodesim", "workload", *self.plan.scheduler_names(max(3, self.plan.replicas))]
        for stem in stems:
            p = pki[stem]
            ConnectionFile.for_identity(address, p.cert, p.key, p.ca_bundle).save(
                self.plan.connection_path(stem)
            )

    # ------------------------------------------------------------------ data dir housekeeping

    def _take_lock(self) -> None:
        path = self.plan.run_dir / "up.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        f = path.open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise UpError(f"another `kse up` (pid {holder}) is using {self.plan.data_dir}") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._lock_file = f

    def _release_lock(self) -> None:
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    @property
    def _pid_table(self) -> Path:
        return self.plan.run_dir / "pids.json"

    def _write_pid_table(self) -> None:
        """Record what runs (pid and argv per process), so a later run can clean up after a `kse up`
        that was itself SIGKILLed and could not stop its children."""
        entries = []
        for name, proc in self.processes():
            if proc.pid is not None and proc.running:
                entries.append({"name": name, "pid": proc.pid, "start": _start_time(proc.pid)})
        tmp = self._pid_table.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps({"owner": os.getpid(), "processes": entries}, indent=1) + "\n")
            os.replace(tmp, self._pid_table)

    def _reap_previous_run(self) -> None:
        """Kill the process groups a previous, SIGKILLed `kse up` on this data dir left running.
        Only the very process recorded is touched: same pid *and* start time (pids are reused),
        with this data dir on its command line."""
        try:
            table = json.loads(self._pid_table.read_text())
        except (OSError, ValueError):
            return
        for entry in table.get("processes", []):
            pid, start = entry.get("pid"), entry.get("start")
            if not isinstance(pid, int) or start is None or not pid_alive(pid):
                continue
            if _start_time(pid) != start or str(self.plan.data_dir) not in " ".join(_cmdline(pid) or []):
                continue
            self.progress(f"killing {entry.get('name')} (pid {pid}), left running by an earlier kse up")
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
        self._pid_table.unlink(missing_ok=True)

    def _wipe(self) -> None:
        plan = self.plan
        for path in (plan.pki_dir, plan.etcd_dir, plan.logs_dir, plan.connections_dir, plan.audit_log.parent):
            shutil.rmtree(path, ignore_errors=True)
        plan.connection_file.unlink(missing_ok=True)
        for ready in plan.run_dir.glob("*.ready.json"):
            ready.unlink(missing_ok=True)
        self.progress(f"--fresh: removed the PKI, etcd data and logs under {plan.data_dir}")

    def _check_etcd_running(self) -> None:
        # A member that could not bind its port may still have looked healthy for a moment: the
        # health check reached whatever else listens there (a stray etcd on the recorded port).
        for m in self.etcd_members:
            if not m.running:
                tail = "\n".join(f"  | {line}" for line in m.log_tail(15).splitlines())
                raise UpError(f"etcd {m.name} exited with code {m.returncode}; {m.log_path}:\n{tail}")

    def _check_etcd_layout(self) -> None:
        try:
            layout = json.loads((self.plan.etcd_dir / CLUSTER_FILE).read_text())
        except (OSError, ValueError):
            return
        members = layout.get("members") if isinstance(layout, dict) else None
        if isinstance(members, list) and len(members) != self.plan.etcd_members:
            raise UpError(
                f"{self.plan.etcd_dir} holds a {len(members)}-member etcd cluster, not "
                f"{self.plan.etcd_members}; use --etcd-members {len(members)} or --fresh"
            )

    # ------------------------------------------------------------------ shutdown

    async def stop(self) -> None:
        """Ordered shutdown: workload, schedulers, nodesim, API server, etcd; then make sure no
        process of any start is left (SIGKILL to any group found, noted in `leftovers`). Idempotent."""
        if self._stopped or self._stopping:
            return
        self._stopping = True
        grace = self.plan.grace
        try:
            self._note_pids()
            if self.supervisor is not None:
                for s in self.supervisor.items():
                    self.supervisor.hold(s.name)  # nothing is restarted from here on
            if self.workload is not None:
                await self.workload.terminate(grace)
            await self._close("supervisor")
            await asyncio.gather(*(r.process.terminate(grace) for r in self.replicas))
            if self.nodesim is not None:
                await self.nodesim.terminate(grace)
            if self.status is not None and self.apiserver is not None and self.apiserver.running:
                await self._settle_status()
                self.final_snapshot = self.snapshot()
            await self._close("status")
            if self._channel is not None:
                with contextlib.suppress(Exception):
                    await self._channel.close(grace=None)
                self._channel = None
            if self.apiserver is not None:
                await self.apiserver.terminate(grace)
            if self.etcd is not None:
                await self.etcd.stop(grace=grace)
        except BaseException:
            self.kill_all()
            raise
        finally:
            self._final_check()
            if self._lock_file is not None:  # only the run that owns the data dir tidies it
                self._pid_table.unlink(missing_ok=True)
                for ready in self.plan.run_dir.glob("*.ready.json"):
                    ready.unlink(missing_ok=True)
            self._release_lock()
            self._stopped = True

    async def _close(self, key: str) -> None:
        stack = self._stacks.pop(key, None)
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def _settle_status(self, within: float = 2.0) -> None:
        """Let the informers catch up with the last writes (pods created just before the workload
        stopped) so the final snapshot counts them."""
        assert self.clientset is not None and self.status is not None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(within):
                pods = await self.clientset.pods.list("", limit=1)
                await self.status.pods.wait_for_revision(pods.resource_version)

    def _final_check(self) -> None:
        self._note_pids()
        for _, proc in self.processes():
            if proc.running:
                with contextlib.suppress(Exception):
                    proc.kill()
        for pid, name in sorted(self._pids.items()):
            if pid_alive(pid):
                self.leftovers.append(f"{name} (pid {pid})")
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if self.leftovers:
            log.error("processes left after shutdown, killed: %s", ", ".join(self.leftovers))


def _link_log(target: Path, link: Path) -> None:
    """Make D/logs/<name>.log point at a log that lives elsewhere (etcd's, beside its data)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if link.is_symlink() or link.exists():
            if link.is_symlink() and Path(os.readlink(link)) == Path(os.path.relpath(target, link.parent)):
                return
            link.unlink()
        link.symlink_to(os.path.relpath(target, link.parent))


__all__ = [
    "DEFAULT_DATA_DIR",
    "Cluster",
    "ClusterPlan",
    "ElectionPlan",
    "Features",
    "Replica",
    "SchedulerProcess",
    "UpError",
    "ensure_pki",
    "pid_alive",
    "probe_features",
]
