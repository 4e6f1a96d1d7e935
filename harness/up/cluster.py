"""`Cluster`: the processes of a `ClusterPlan`, started in order, handed out, and stopped in order.

    plan = ClusterPlan(data_dir=Path("/tmp/kse"), replicas=3, nodes=100, rate=20)
    async with Cluster(plan) as cluster:          # every process started and ready, in order
        leader = await cluster.wait_for_leader()   # the Replica holding the Lease
        await leader.kill()                        # SIGKILL; the supervisor restarts it (backoff)
        await cluster.replica("scheduler-2").stop()   # SIGSTOP (cont() thaws)
        await cluster.restart_apiserver()
        pods = await cluster.clientset.pods.list("default")
    # stopped in order: workload, schedulers, nodesim, API server, etcd; nothing left behind

Processes, in dependency order: etcd (1 or 3 members, mTLS) -> API server (ready file; writes
D/config.json; with `plan.http` it also serves the Kubernetes HTTP API and `Cluster` writes the
admin kubeconfig D/kubeconfig) -> scheduler replicas `scheduler-1..N` (harness.up.replica),
controller-manager replicas `controller-manager-1..M` and nodesim, started together -> the
workload. Every replica runs with `--leader-elect=true` and the plan's election (the
controller-managers on their own Lease, kube-system/kube-controller-manager).
Everything is in its own process group (`ManagedProcess`), and a final check after the shutdown
makes sure that no process of any start is left. The data dir layout is in harness.up.plan;
D/run/cluster.json, rewritten whenever a process starts or exits, in harness.clusterfile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from certs.layout import PKI
from certs.rotation import CertRenewer
from harness.clusterfile import ClusterFile, LeaseInfo, ProcessEntry
from harness.procs.apiserver import ApiServerProcess
from harness.procs.etcd import (
    CLUSTER_FILE,
    EtcdCluster,
    EtcdLaunchError,
    EtcdProcess,
    EtcdServerTLS,
    start_cluster,
)
from harness.procs.launcher import LaunchError, ManagedProcess, ready_file_json
from harness.procs.ports import free_ports
from harness.procs.proctable import pid_alive
from harness.proxy import PartitionProxy
from harness.up.argv import (
    apiserver_extra_args,
    controller_manager_argv,
    nodesim_argv,
    scheduler_argv,
    workload_argv,
)
from harness.up.housekeeping import DataDirLock, PidTable
from harness.up.pki import CertRenewers, ensure_pki
from harness.up.plan import CONTROLLER_MANAGER_LEASE, CONTROLLER_MANAGER_STEM, ClusterPlan, UpError
from harness.up.replica import ControllerManagerProcess, Replica, SchedulerProcess
from harness.up.status import ProcessInfo, StatusSnapshot, StatusTracker
from harness.up.supervisor import RestartRecord, Supervisor
from kse.client.channel import channel_source_from_connection
from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError
from kse.config import ConnectionFile
from kse.kubeconfig import server_url_of, write_identity_kubeconfig
from kse.tasks import TaskSet
from proto import kse_pb2 as pb

__all__ = ["Cluster", "Progress"]

log = logging.getLogger(__name__)

_RUN_FILE_POLL = 0.2  # how often the cluster.json watcher looks for exits nobody reported


Progress = Callable[[str], None]


class Cluster:
    """The processes of a plan, started in order and stopped in order (see the module doc).

    The plan is not changed, so the same Cluster may be entered again after it stopped (a
    benchmark's trials); each entry is a new run on the same data dir.

    Handles (valid inside the block): `etcd` (EtcdCluster) and `etcd_members`, `apiserver`
    (ApiServerProcess), `replicas` / `replica(name)` (Replica), `nodesim` and `workload`
    (ManagedProcess or None), `supervisor`, `clientset` (admin), `status` (StatusTracker or None),
    `data_dir`, `connection_file`, `audit_logs`, `http_address` and `kubeconfig` (with `plan.http`).
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
        self.pki: PKI | None = None
        self.etcd: EtcdCluster | None = None
        self.apiserver: ApiServerProcess | None = None
        self.replicas: list[Replica] = []
        self.controller_managers: list[Replica] = []  # kse controller-manager replicas
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
        # With plan.cert_ttl: one renewer per leaf stem, for as long as the cluster runs.
        self.certs = CertRenewers(plan.cert_ttl)
        # With plan.partition_proxies: replica name -> the proxy between it and the API server.
        self.proxies: dict[str, PartitionProxy] = {}
        self._lock = DataDirLock(plan.run_dir, plan.data_dir)
        self._pid_table = PidTable(plan.run_dir, plan.data_dir)
        # With plan.http: the port the API server serves the Kubernetes HTTP API on (picked once
        # per run when the plan says 0, so a restarted API server serves the same address).
        self.http_port: int | None = None
        self._channel: Any = None
        self._run_file_seen: object = None  # what cluster.json last said about the processes
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
    def pki_dir(self) -> Path:
        return self.plan.pki_dir

    @property
    def http_address(self) -> str | None:
        """HOST:PORT of the Kubernetes HTTP API (from the API server's ready file); None when not
        served or not ready."""
        api = self.apiserver
        if api is None or not api.ready_info:
            return None
        value = api.ready_info.get("http_address")
        return value if isinstance(value, str) and value else None

    @property
    def kubeconfig(self) -> Path | None:
        """The admin kubeconfig D/kubeconfig, once written (with `plan.http`)."""
        return self.plan.kubeconfig if self.http_address is not None and self.plan.http else None

    @property
    def cluster_file(self) -> Path:
        """D/run/cluster.json (exists while the cluster runs; schema in the module doc)."""
        return self.plan.cluster_file

    @property
    def leader_election(self) -> bool:
        """Always True: every replica runs with --leader-elect=true (kept for `kse up --json`'s
        `leader_election` and the status view)."""
        return True

    @property
    def renewers(self) -> dict[str, CertRenewer]:
        """Leaf stem -> its renewer (with `cert_ttl`; empty otherwise)."""
        return self.certs.renewers

    @property
    def etcd_members(self) -> list[EtcdProcess]:
        return list(self.etcd.members) if self.etcd is not None else []

    @property
    def audit_logs(self) -> list[Path]:
        """The API server's audit log file(s)."""
        return [self.plan.audit_log]

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
        out += [(r.name, r.process) for r in self.controller_managers]
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
        for r in [*self.replicas, *self.controller_managers]:
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

    async def controller_manager_leader(self) -> Replica | None:
        """The controller-manager replica holding kube-system/kube-controller-manager (read now)."""
        assert self.clientset is not None, "cluster not started"
        ns, name = CONTROLLER_MANAGER_LEASE
        try:
            lease = await self.clientset.leases.get(ns, name)
        except NotFoundError:
            return None
        for r in self.controller_managers:
            if r.running and lease.spec.holder_identity and r.identity == lease.spec.holder_identity:
                return r
        return None

    async def _leaders_now(self) -> list[Replica]:
        """The scheduler and controller-manager replicas holding their Leases, read now; none if
        the API server does not answer within a second (then every replica stops at once)."""
        if self.clientset is None or self.apiserver is None or not self.apiserver.running:
            return []
        try:
            async with asyncio.timeout(1.0):
                found = [await self.leader(), await self.controller_manager_leader()]
        except Exception as e:  # a stop must go on whatever the API server says
            log.info("stopping every replica at once: could not read the leaders (%r)", e)
            return []
        return [r for r in found if r is not None]

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
        self._write_run_files()
        await api.wait_ready(self.plan.ready_timeout)
        self._note_pids()
        self._write_cluster_file()

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
            if not isinstance(p, SchedulerProcess) or isinstance(p, ControllerManagerProcess)
        ]
        return self.status.snapshot(
            [r.info(now) for r in self.replicas],
            procs,
            hint=self.plan.cli_hint + (f"   or: {self.plan.kubectl_hint}" if self.kubeconfig else ""),
            leader_election=self.leader_election,
            notes=self.notes,
            certs=self.cert_status_line(),
        )

    # ------------------------------------------------------------------ certificates

    def cert_renewals(self) -> dict[str, dict[str, Any]]:
        """Per leaf stem: renewals done so far and the next planned one (ISO time), with cert_ttl."""
        return self.certs.renewals()

    def cert_status_line(self) -> str:
        """One status line: renewals so far and the next one ("" without short-lived certs)."""
        return self.certs.status_line()

    # ------------------------------------------------------------------ D/run/cluster.json

    def cluster_file_info(self) -> ClusterFile:
        """What D/run/cluster.json holds now (schema in harness.clusterfile)."""
        plan = self.plan
        procs: dict[str, ProcessEntry] = {}
        for name, proc in self.processes():
            role = _role_of(name, proc, self)
            running = proc.running
            proxy = self.proxies.get(name)
            logs_rpc_errors = plan.rpc_error_logs and role in RPC_ERROR_LOG_ROLES
            procs[name] = ProcessEntry(
                role=role,
                pid=proc.pid if running else None,
                running=running,
                paused=bool(proc.paused and running),
                identity=(proc.identity or None) if isinstance(proc, SchedulerProcess) else None,
                proxy=proxy.address if proxy is not None else None,
                rpc_error_log=str(plan.rpc_error_log_path(name)) if logs_rpc_errors else None,
                log=str(proc.log_path),
            )
        api = self.apiserver
        e = plan.election
        return ClusterFile(
            owner_pid=os.getpid(),
            updated_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            data_dir=plan.data_dir,
            pki_dir=plan.pki_dir,
            run_dir=plan.run_dir,
            logs_dir=plan.logs_dir,
            connection_file=plan.connection_file,
            connections_dir=plan.connections_dir,
            audit_log=plan.audit_log,
            apiserver=api.ready_info.get("address") if api is not None and api.ready_info else None,
            apiserver_http=self.http_address,
            kubeconfig=self.kubeconfig,
            etcd_endpoints=tuple(self.etcd.endpoints) if self.etcd is not None else (),
            etcd_tls=plan.etcd_tls,
            cert_ttl_s=plan.cert_ttl,
            lease=LeaseInfo(namespace=e.lease_namespace, name=e.lease_name, duration_s=e.lease_duration),
            processes=procs,
        )

    def _process_signature(self) -> object:
        return tuple(
            (name, p.pid, p.running, p.paused, getattr(p, "identity", ""), p.ready_info is not None)
            for name, p in self.processes()
        )

    def _write_cluster_file(self) -> None:
        """Rewrite D/run/cluster.json atomically (temp file + rename: readers see old or new)."""
        if not self._lock.held or self._stopped:
            return  # only the run that owns the data dir writes it
        self._run_file_seen = self._process_signature()
        path = self.plan.cluster_file
        try:
            self.cluster_file_info().write(path)
        except OSError as e:
            log.warning("cannot write %s: %s", path, e)

    def _write_run_files(self) -> None:
        self._write_pid_table()
        self._write_cluster_file()

    @contextlib.asynccontextmanager
    async def _run_file_watcher(self) -> AsyncIterator[None]:
        """Rewrite cluster.json on any start or exit nobody reported (a handle restarted directly,
        an etcd member killed by chaos, the workload finishing): polls the process table."""

        async def watch() -> None:
            while True:
                await asyncio.sleep(_RUN_FILE_POLL)
                if self._process_signature() != self._run_file_seen:
                    self._note_pids()
                    self._write_run_files()

        async with TaskSet("cluster-file", logger=log) as tasks:
            tasks.spawn(watch(), name="cluster-file-watcher")
            yield

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
        self._lock.take()
        self._pid_table.reap(self.progress)
        if plan.fresh:
            self._wipe()
        for d in (plan.logs_dir, plan.run_dir, plan.connections_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._check_etcd_layout()

        pki, done = await asyncio.to_thread(ensure_pki, plan, max(3, plan.replicas))
        self.pki = pki
        say("; ".join(done))
        await self.certs.start(pki, max(3, plan.replicas), self.progress)

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
        self._write_run_files()
        await self._enter("runfile", self._run_file_watcher())
        say(f"etcd ready at {', '.join(self.etcd.endpoints)} ({mark('etcd'):.1f}s)")

        # API server
        if plan.http:
            self.http_port = plan.http_port or free_ports(1)[0]
        api = ApiServerProcess(
            etcd_endpoints=self.etcd.endpoints,
            prefix=plan.prefix,
            pki_dir=pki.dir,
            data_dir=plan.data_dir,
            extra_args=apiserver_extra_args(plan, self.http_port),
            ready_timeout=plan.ready_timeout,
            grace=plan.grace,
        )
        self.apiserver = api
        plan.audit_log.parent.mkdir(parents=True, exist_ok=True)
        say("starting the API server")
        api.start()
        self._write_run_files()
        await self._wait_ready(api)
        say(
            f"API server ready at {api.address} ({mark('apiserver'):.1f}s); "
            f"connection file {plan.connection_file}"
        )
        self._check_etcd_running()
        if plan.http:
            self._write_kubeconfig(pki)
        replicas = plan.replicas
        if plan.partition_proxies:
            for name in [*plan.scheduler_names(replicas), *plan.controller_manager_names()]:
                self.proxies[name] = proxy = PartitionProxy(api.address)
                await self._enter("proxies", proxy)
            say(
                "partition proxies: "
                + ", ".join(f"{name} via {p.address}" for name, p in self.proxies.items())
            )
        self._write_connections(api.address, pki)
        # A reloading source: kse up's own informers outlive leaf renewals and CA rotations too.
        self._channel = channel_source_from_connection(plan.connection_path("admin"))
        self.clientset = Clientset(self._channel, qps=0, burst=1000, user_agent="kse-up")
        if plan.track_status:
            self.status = StatusTracker(
                self.clientset,
                lease_namespace=plan.election.lease_namespace,
                lease_name=plan.election.lease_name,
                run_id=self.run_id,
            )

        # Schedulers and nodesim, started together.
        if self.restart_policy_enabled:
            self.supervisor = Supervisor(
                plan.restart_policy, on_restart=self._restarted, on_exit=self._exited
            )
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
        cm_names = plan.controller_manager_names()
        for name, port in zip(cm_names, free_ports(len(cm_names)), strict=True):
            cm = ControllerManagerProcess(
                name,
                self._controller_manager_argv_for(name, port),
                unique_identity=plan.unique_identities,
                data_dir=plan.data_dir,
                ready_file=plan.ready_path(name),
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
                metrics_port=port,
            )
            self.controller_managers.append(Replica(cm, self.supervisor))
        say(
            f"starting {replicas} scheduler replica{'s' if replicas > 1 else ''} "
            f"and nodesim ({plan.nodes} nodes)"
        )
        for r in [*self.replicas, *self.controller_managers]:
            r.process.start()
        if plan.nodes > 0:
            self.nodesim = ManagedProcess(
                "nodesim",
                nodesim_argv(plan),
                data_dir=plan.data_dir,
                ready_file=plan.ready_path("nodesim"),
                ready_check=ready_file_json,
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
            )
            self.nodesim.start()
        self._write_run_files()
        for r in [*self.replicas, *self.controller_managers]:
            await self._wait_ready(r.process)
            say(f"{r.name} ready (pid {r.pid}, identity {r.identity}, metrics {r.metrics_address}) "
                f"({mark(r.name):.1f}s)")  # fmt: skip
            self._write_cluster_file()
            if self.supervisor is not None:
                self.supervisor.add(r.process)
        if self.supervisor is not None:
            if plan.supervise_control_plane:
                for m in self.etcd_members:
                    self.supervisor.add(m.managed)
                self.supervisor.add(api)
            await self._enter("supervisor", self.supervisor.running())
        if plan.etcd_defrag_interval > 0:
            await self._enter("defrag", self._defragmenting(plan.etcd_defrag_interval))
        if self.status is not None:
            await self._enter("status", self.status.running())
        if self.nodesim is not None:
            await self._wait_ready(self.nodesim)
            say(f"nodesim ready: {plan.nodes} nodes registered ({mark('nodesim'):.1f}s)")

        # Workload last.
        if plan.workload:
            self.workload = ManagedProcess(
                "workload",
                workload_argv(plan, self.run_id),
                data_dir=plan.data_dir,
                ready_file=plan.ready_path("workload"),
                ready_check=ready_file_json,
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
            )
            self.workload.start()
            self._write_run_files()
            await self._wait_ready(self.workload)
            total = f", {plan.workload_total} in all" if plan.workload_total else ""
            say(f"workload ready: {plan.rate:g} pods/s{total}, run {self.run_id} ({mark('workload'):.1f}s)")
        mark("ready")

    def _defragmenting(self, interval_s: float) -> contextlib.AbstractAsyncContextManager[Any]:
        from certs.layout import APISERVER_ETCD_CLIENT, ca_bundle_path, cert_path, key_path
        from harness.up.etcd_defrag import run_defrag
        from kse.etcdclient import EtcdTLS
        from kse.tasks import background

        assert self.etcd is not None and self.pki is not None
        pki = self.pki.dir
        tls = (
            EtcdTLS(
                ca_bundle_path(pki),
                cert_path(pki, APISERVER_ETCD_CLIENT),
                key_path(pki, APISERVER_ETCD_CLIENT),
            )
            if self.plan.etcd_tls
            else None
        )
        return background(
            run_defrag(self.etcd.endpoints, tls, self.progress, interval_s=interval_s), name="etcd-defrag"
        )

    def supervised(self, name: str) -> bool:
        """Whether the supervisor brings `name` back when it exits."""
        return self.supervisor is not None and self.supervisor.has(name)

    @property
    def restart_policy_enabled(self) -> bool:
        return self.plan.restart_policy is not None

    def _controller_manager_argv_for(self, name: str, port: int) -> Callable[[str], list[str]]:
        def argv_for(identity: str) -> list[str]:
            return controller_manager_argv(self.plan, name, identity, port)

        return argv_for

    def _scheduler_argv_for(self, name: str, port: int) -> Callable[[str], list[str]]:
        def argv_for(identity: str) -> list[str]:
            return scheduler_argv(self.plan, name, identity, port)

        return argv_for

    def _restarted(self, record: RestartRecord) -> None:
        self.progress(
            f"{record.name} exited (code {record.exit_code}) after {record.uptime_s:.1f}s; "
            f"restarted after {record.delay_s:g}s backoff (pid {record.pid})"
        )
        self._note_pids()
        self._write_run_files()

    def _exited(self, record: RestartRecord) -> None:
        self._write_cluster_file()

    async def _enter(self, key: str, cm: contextlib.AbstractAsyncContextManager[Any]) -> None:
        stack = self._stacks.setdefault(key, contextlib.AsyncExitStack())
        await stack.enter_async_context(cm)

    async def _wait_ready(self, proc: ManagedProcess) -> None:
        try:
            await proc.wait_ready(self.plan.ready_timeout)
        except LaunchError as e:
            raise UpError(f"{proc.name} did not come up: {e}") from e

    def _write_connections(self, address: str, pki: PKI) -> None:
        """A connection file per client identity; a replica behind a partition proxy gets the
        proxy's address (TLS passes through it: the replica still verifies the API server's cert)."""
        stems = ["admin", "nodesim", "workload", *self.plan.scheduler_names(max(3, self.plan.replicas))]
        # Every controller-manager replica presents the one controller-manager identity.
        files = [(stem, stem) for stem in stems]
        files += [(name, CONTROLLER_MANAGER_STEM) for name in self.plan.controller_manager_names()]
        for name, stem in files:
            p = pki[stem]
            proxy = self.proxies.get(name)
            server = proxy.address if proxy is not None else address
            ConnectionFile.for_identity(server, p.cert, p.key, p.ca_bundle).save(
                self.plan.connection_path(name)
            )

    def _write_kubeconfig(self, pki: PKI) -> None:
        """D/kubeconfig for the admin identity on the HTTP API, naming the cert files by path (a
        rotated or renewed pair is what the next kubectl reads)."""
        address = self.http_address
        if address is None:
            raise UpError(
                f"the API server was started with --http-listen but its ready file "
                f"{self.plan.ready_path('apiserver')} names no http_address"
            )
        path = write_identity_kubeconfig(self.plan.kubeconfig, server_url_of(address), pki.admin)
        self._write_cluster_file()
        self.progress(
            f"Kubernetes HTTP API at {server_url_of(address)}; kubectl: export KUBECONFIG={path}"
        )

    # ------------------------------------------------------------------ data dir housekeeping

    def _write_pid_table(self) -> None:
        """Record what runs, so a later run can clean up after a `kse up` that was SIGKILLed."""
        self._pid_table.write(
            (name, proc.pid) for name, proc in self.processes() if proc.pid is not None and proc.running
        )

    def _wipe(self) -> None:
        plan = self.plan
        for path in (plan.pki_dir, plan.etcd_dir, plan.logs_dir, plan.connections_dir, plan.audit_log.parent):
            shutil.rmtree(path, ignore_errors=True)
        plan.connection_file.unlink(missing_ok=True)
        plan.kubeconfig.unlink(missing_ok=True)
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
            await self._close("defrag")
            if self.workload is not None:
                await self.workload.terminate(grace)
            await self._close("supervisor")
            # Standbys first, then the leaders: a leader releases its Lease as it stops, and a
            # standby still running would take it on its way out (an acquisition, and a "failover"
            # in the summary, that the shutdown itself caused).
            leaders = await self._leaders_now()
            standbys = [r for r in [*self.replicas, *self.controller_managers] if r not in leaders]
            await asyncio.gather(*(r.process.terminate(grace) for r in standbys))
            await asyncio.gather(*(r.process.terminate(grace) for r in leaders))
            if self.nodesim is not None:
                await self.nodesim.terminate(grace)
            await self._close("proxies")  # after the replicas: none of them outlives its link
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
            await self._close("runfile")
            await self._close("proxies")
            await self.certs.aclose()  # last: every certificate stayed valid while anything ran
            self._final_check()
            if self._lock.held:  # only the run that owns the data dir tidies it
                self._pid_table.remove()
                self.plan.cluster_file.unlink(missing_ok=True)
                for ready in self.plan.run_dir.glob("*.ready.json"):
                    ready.unlink(missing_ok=True)
            self._lock.release()
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


# The roles that take --rpc-error-log (the clients of the API server).
RPC_ERROR_LOG_ROLES = ("scheduler", "controller-manager", "nodesim", "workload")


def _role_of(name: str, proc: ManagedProcess, cluster: Cluster) -> str:
    if isinstance(proc, ControllerManagerProcess):
        return "controller-manager"
    if isinstance(proc, SchedulerProcess):
        return "scheduler"
    if proc is cluster.apiserver:
        return "apiserver"
    if any(proc is m.managed for m in cluster.etcd_members):
        return "etcd"
    return name  # nodesim, workload


def _link_log(target: Path, link: Path) -> None:
    """Make D/logs/<name>.log point at a log that lives elsewhere (etcd's, beside its data)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if link.is_symlink() or link.exists():
            if link.is_symlink() and Path(os.readlink(link)) == Path(os.path.relpath(target, link.parent)):
                return
            link.unlink()
        link.symlink_to(os.path.relpath(target, link.parent))
