"""Runs a scenario (`chaos.scenario`) and judges its history: on a fresh local cluster, or attached to
a running one.

A fresh run, under a temp dir:

1. start a `harness.up.Cluster` from the scenario's `cluster:` section (etcd members, the API server with
   fencing on and an audit log, the scheduler replicas electing a leader, nodesim, the workload),
   every client logging its failed RPCs (`ClusterPlan.rpc_error_logs`), each replica behind a
   partition proxy when the scenario partitions (`ClusterPlan.partition_proxies`), each replica
   reading a clock-skew file when the scenario skews clocks (`ClusterPlan.replica_args`);
2. run an unfiltered pods informer whose deliveries a `WatchRecorder` writes to `watch-chaos.jsonl`
   (the `watch_integrity` invariant judges them against the audit log);
3. wait for a first leader, create the scenario's `cluster.deployments` and their budgets and wait
   until every replica is available (`chaos.upgrade_workload`), then t=0: every fault of the
   schedule is injected at its time by the nemesis (`chaos.nemesis`, through a
   `chaos.local_backend.LocalBackend`; one task each, so a pause may overlap the next fault);
   beside them the scenario's rounds run in order, each step (a fault, or a wait of `chaos.waits`:
   a stable leader, a new leader and its binds, a faulted replica back) once the one before it is
   through;
4. at t=`duration` (and once every fault has finished): stop the workload, let the leader bind what
   is pending, snapshot pods and nodes (`final.json`), stop the cluster;
5. load the `History` (the audit log, the run's faults / watch deliveries / snapshot, the clients'
   rpc-errors files) and run the checker; the scenario's `checks` decide `passed`.

Attached (`kse chaos run SCENARIO --attach DATA_DIR [--backend local|docker]`): no cluster is
started and the scenario's `cluster:` section does not apply; faults go through the chosen backend
(`chaos.local_backend.AttachedLocalBackend` by pid from DATA_DIR/run/cluster.json, or
`chaos.docker_backend.DockerBackend`); the admin connection is DATA_DIR/config.json (or the one
cluster.json names); the run's faults, watch deliveries and snapshot go to
DATA_DIR/chaos/<scenario>-<time>/; the audit log is the one cluster.json names, else
DATA_DIR/audit/audit.jsonl; the clients' rpc-errors files are read from DATA_DIR/run (only errors
from the run's start on). The workload is the cluster's own and keeps running: the final state is a
snapshot after the duration and the settle, and pods younger than `YOUNG_S` then may be pending.

The history is the single truth: nothing the harness saw while the run went on is used by the checks.

`Drive` is that middle part (informer, nemesis, schedule and rounds, final snapshot) and
`drive_cluster` a fresh cluster around it: `kse bench failover` (`chaos.failover_bench`) uses both,
with rounds of its own and a `DriveObserver` that samples the machine meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from chaos.cluster_setup import churn_delete_after, fencing_args, final_state
from chaos.scenario import DeploymentSpec, FaultSpec, Round, Scenario, WaitSpec
from harness.progress import Reporter
from kse.objects.meta import uid_key

if TYPE_CHECKING:
    from chaos.backend import FaultBackend
    from chaos.checker import CheckResult
    from chaos.history import FaultRecord, History, ReplicaLife
    from chaos.nemesis import Nemesis
    from chaos.soak_guard import SafetyGuard
    from chaos.waits import Waits
    from harness.up import Cluster
    from kse.client.clientset import Clientset
    from proto import kse_pb2 as pb

__all__ = [
    "BACKENDS",
    "Drive",
    "DriveObserver",
    "RoundResult",
    "RunError",
    "RunOutcome",
    "drive_cluster",
    "load_history",
    "run_scenario",
]

WATCH_FILE = "watch-chaos.jsonl"
RPC_ERRORS_FILE = "rpc-errors-chaos.jsonl"  # the runner's own client (its informer, the snapshot)
TERMINATION_DELAY = "0.5s"  # nodesim's --termination-delay in runs that drain nodes
SETTLE_S = 10.0  # after the workload stops: how long the leader gets to bind what is pending
YOUNG_S = 3.0  # attached: pending pods younger than this at the snapshot are not violations
BACKENDS = ("local", "docker")
CLOCK_SKEW_FLAG = "--clock-skew-file"


class RunError(RuntimeError):
    """The run could not be carried out (the cluster did not come up, no leader, no backend)."""


_REPORTER = Reporter("chaos")


def progress(message: str) -> None:
    """A ``[chaos]`` line on stderr; on a terminal, above the live bar of the fault schedule."""
    _REPORTER(message)


@dataclass
class RunOutcome:
    scenario: Scenario
    seed: int
    result: CheckResult
    history: History
    schedule: list[FaultSpec]
    errors: list[str] = field(default_factory=list)  # faults that could not be injected
    run_dir: Path | None = None  # kept only with keep=True (always, attached)

    @property
    def passed(self) -> bool:
        return not self.errors and all(self.result.invariants[c].passed for c in self.scenario.checks)

    def to_json(self) -> dict[str, Any]:
        """The `kse chaos run --json` object."""
        fo = self.result.failover
        return {
            "scenario": self.scenario.name,
            "seed": self.seed,
            "passed": self.passed,
            "invariants": {
                c: {"passed": self.result.invariants[c].passed, "detail": self.result.invariants[c].detail}
                for c in self.scenario.checks
            },
            "faults": [asdict(f) for f in self.history.faults],
            "failovers": [
                {
                    "fault": f"{e.fault} {e.target}",
                    "fault_to_acquire_ms": e.fault_to_acquire_ms,
                    "gap_ms": e.gap_ms,
                }
                for e in (fo.failovers if fo is not None else [])
            ],
            "rpc_errors_by_code": dict(sorted(Counter(r.code for r in self.history.rpc_errors).items())),
        }


def scenario_plan_kwargs(s: Scenario, seed: int, run_dir: Path) -> dict[str, Any]:
    from chaos.local_backend import KUBELET_CONTROL_FLAG, clock_skew_path, kubelet_control_path
    from harness.up import BackoffPolicy

    c = s.cluster
    replica_args: dict[str, tuple[str, ...]] = {}
    if s.clock_skew:
        replica_args = {
            f"scheduler-{i}": (CLOCK_SKEW_FLAG, str(clock_skew_path(run_dir, f"scheduler-{i}")))
            for i in range(1, c.replicas + 1)
        }
    return {
        "replicas": c.replicas,
        "nodes": c.nodes,
        "rate": c.rate,
        "etcd_members": c.etcd_members,
        "election": c.election,
        # Restarts within a second or two: scenarios exercise failover, not crash-loop backoff.
        "restart_policy": BackoffPolicy(initial=0.5, cap=2.0, reset_after=max(5.0, 2 * c.lease_duration)),
        "grace": 10.0,
        "apiserver_args": fencing_args(True),
        "nodesim_args": ("--seed", str(seed))
        + (
            # a drained pod's containers stop within TERMINATION_DELAY of its deletion (not after
            # the churn pods' default 30 s grace), so a drain is not a wait for grace periods
            (
                KUBELET_CONTROL_FLAG,
                str(kubelet_control_path(run_dir)),
                "--termination-delay",
                TERMINATION_DELAY,
            )
            if s.node_upgrades
            else ()
        ),
        "workload_args": ("--delete-after", f"{churn_delete_after(c.nodes, c.rate):g}s"),
        "rpc_error_logs": True,
        "partition_proxies": s.partitions,
        "replica_args": replica_args,
    } | ({} if s.controller_managers is None else {"controller_managers": s.controller_managers})


def _stamp() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S")


async def run_scenario(
    scenario: Scenario,
    *,
    seed: int | None = None,
    keep: bool = False,
    say: Callable[[str], None] = progress,
    attach: Path | None = None,
    backend: str = "local",
) -> RunOutcome:
    """Run `scenario` once; `seed` (default: the scenario's `random.seed`, else 0) seeds the random
    faults, random targets and nodesim. `attach`: a running cluster's data dir (see the module doc)."""
    if backend not in BACKENDS:
        raise RunError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if attach is not None:
        return await _run_attached(scenario, Path(attach), backend, seed=seed, say=say)
    if backend != "local":
        raise RunError(f"--backend {backend} needs --attach: fresh clusters are local processes")
    return await _run_fresh(scenario, seed=seed, keep=keep, say=say)


async def _run_fresh(
    scenario: Scenario, *, seed: int | None, keep: bool, say: Callable[[str], None]
) -> RunOutcome:
    from chaos.local_backend import write_clock_skew
    from harness.bench.common import work_dir
    from harness.up import Cluster, ClusterPlan

    seed = scenario.seed if seed is None else seed
    schedule = scenario.schedule(seed)
    c = scenario.cluster
    with work_dir(f"kse-chaos-{scenario.name}-", keep) as tmp:
        data_dir = tmp / "kse"
        plan = ClusterPlan(data_dir=data_dir, **scenario_plan_kwargs(scenario, seed, data_dir / "run"))
        if scenario.node_upgrades:
            from chaos.local_backend import kubelet_control_path, write_kubelet_control

            write_kubelet_control(kubelet_control_path(plan.run_dir), (), {})
        if scenario.clock_skew:
            for name in plan.scheduler_names():
                from chaos.local_backend import clock_skew_path

                write_clock_skew(clock_skew_path(plan.run_dir, name), 0.0, 1.0)
        drive = Drive.for_scenario(scenario, schedule, seed, say)
        cluster = Cluster(plan, progress=lambda m: drive.say(f"cluster: {m}"))  # t= from t=0 on
        chaos_dir = data_dir / "chaos" / f"{scenario.name}-{_stamp()}"
        say(
            f"scenario {scenario.name}: {scenario.duration:g}s, {len(schedule)} faults"
            + (f", {len(scenario.rounds)} rounds" if scenario.rounds else "")
            + f", seed {seed}; {c.replicas} replicas, {c.etcd_members} etcd, {c.nodes} nodes, "
            f"{c.rate:g} pods/s, lease {c.lease_duration:g}/{c.renew_deadline:g}/{c.retry_period:g}s; "
            f"data under {tmp}"
        )
        history = await drive_cluster(cluster, drive, chaos_dir, lease_duration=c.lease_duration)
        result = check_scenario(scenario, history, lease_duration=c.lease_duration, young_after=None)
        outcome = RunOutcome(
            scenario, seed, result, history, schedule, drive.errors, chaos_dir if keep else None
        )
        say(f"scenario {scenario.name}: {'PASS' if outcome.passed else 'FAIL'}")
        return outcome


async def drive_cluster(cluster: Cluster, drive: Drive, chaos_dir: Path, *, lease_duration: float) -> History:
    """Start `cluster` (not started yet), drive it with `drive` through a `LocalBackend` (the
    workload stopped before the final snapshot), stop it, and load the run's history. RunError when
    the cluster cannot serve a run (no leader election, no audit log), does not come up, or the final
    snapshot fails; `drive.errors` holds the faults and rounds that could not be carried out."""
    from chaos.history import write_replica_lives
    from chaos.local_backend import LocalBackend
    from harness.up import UpError
    from kse.client.errors import ApiError

    plan = cluster.plan
    try:
        async with cluster:
            workload = cluster.workload

            async def stop_workload() -> None:
                if workload is not None:
                    await workload.terminate(plan.grace)

            await drive.run(
                LocalBackend(cluster),
                plan.connection_file,
                chaos_dir,
                lease=(plan.election.lease_namespace, plan.election.lease_name),
                lease_duration=lease_duration,
                stop_workload=stop_workload,
                young_s=0.0,
                audit_logs=cluster.audit_logs,
            )
            write_replica_lives(chaos_dir, replica_lives(cluster))  # before the stop: who still runs
            await _keep_etcd_history(cluster, chaos_dir, drive.say)
    except ApiError as e:
        raise RunError(f"the final snapshot failed: {e}") from e
    except UpError as e:
        raise RunError(str(e)) from e
    return load_history(cluster.audit_logs, chaos_dir, plan.run_dir, since=None)


def replica_lives(cluster: Cluster) -> list[ReplicaLife]:
    """Every start of the cluster's scheduler and controller-manager replicas so far."""
    from chaos.history import ReplicaLife

    return [
        ReplicaLife(r.name, component, life.label, life.started_at, life.ended_at, life.exit_code)
        for component, replicas in (
            ("scheduler", cluster.replicas),
            ("controller-manager", cluster.controller_managers),
        )
        for r in replicas
        for life in r.process.lives
    ]


async def _keep_etcd_history(cluster: Cluster, chaos_dir: Path, say: Callable[[str], None]) -> None:
    """Read etcd's own history of the run into chaos_dir (chaos.etcd_history); a failure is said,
    and the audit_matches_etcd check then skips."""
    from certs.layout import APISERVER_ETCD_CLIENT, ca_bundle_path, cert_path, key_path
    from chaos.etcd_history import ETCD_HISTORY_FILE, read_etcd_history, write_etcd_history
    from kse.etcdclient import EtcdError, EtcdTLS

    plan = cluster.plan
    if cluster.etcd is None or cluster.pki is None:
        return
    pki = cluster.pki.dir
    tls = (
        EtcdTLS(
            ca_bundle_path(pki), cert_path(pki, APISERVER_ETCD_CLIENT), key_path(pki, APISERVER_ETCD_CLIENT)
        )
        if plan.etcd_tls
        else None
    )
    try:
        writes = await read_etcd_history(list(cluster.etcd.endpoints), tls, plan.prefix)
    except (EtcdError, TimeoutError, OSError) as e:
        say(f"etcd history not read ({e}); audit_matches_etcd will skip")
        return
    await asyncio.to_thread(write_etcd_history, chaos_dir / ETCD_HISTORY_FILE, writes)
    say(f"etcd history: {len(writes)} events")


def check_scenario(
    scenario: Scenario, history: History, *, lease_duration: float | None, young_after: float | None
) -> CheckResult:
    from chaos.checker import check

    return check(
        history,
        allow_pending=scenario.allow_pending,
        lease_duration_s=lease_duration,
        require_fence=True,
        young_after=young_after,
    )


def load_history(audit: Sequence[Path], chaos_dir: Path, rpc_dir: Path, *, since: float | None) -> History:
    """The run's history: the audit log(s), the run dir's faults, watch deliveries and snapshot, and
    the clients' rpc-errors files (those in the cluster's run dir and the runner's own; attached,
    only errors from `since` on: the files live as long as the cluster)."""
    from chaos.etcd_history import ETCD_HISTORY_FILE
    from chaos.history import (
        FAULTS_FILE,
        ORIGIN_FILE,
        REPLICAS_FILE,
        RPC_ERRORS_GLOB,
        SNAPSHOT_FILE,
        WATCH_GLOB,
        History,
    )
    from chaos.podtimeline import TIMELINE_FILE

    history = History.from_files(
        origin=chaos_dir / ORIGIN_FILE,
        replicas=chaos_dir / REPLICAS_FILE,
        audit=[p for p in audit if p.exists()],
        watch=sorted(chaos_dir.glob(WATCH_GLOB)),
        faults=[chaos_dir / FAULTS_FILE] if (chaos_dir / FAULTS_FILE).exists() else [],
        rpc_errors=sorted({*rpc_dir.glob(RPC_ERRORS_GLOB), *chaos_dir.glob(RPC_ERRORS_GLOB)}),
        snapshot=chaos_dir / SNAPSHOT_FILE,
        timeline=[chaos_dir / TIMELINE_FILE],
        etcd_history=chaos_dir / ETCD_HISTORY_FILE,
    )
    if since is not None:
        history.rpc_errors = [e for e in history.rpc_errors if e.ts >= since]
    return history


class DriveObserver(Protocol):
    """Hooks into a run, for callers that measure while it goes on (the failover benchmark samples
    CPU and run-queue waits around every fault). None may inject faults."""

    async def started(self) -> None:
        """The first leader is elected; the schedule and the rounds start now."""

    async def before_fault(self, spec: FaultSpec) -> None:
        """A round's fault is about to be injected (its target still alive)."""

    async def round_done(self, result: RoundResult) -> None:
        """A round went through (or failed: `result.error`)."""

    async def finished(self) -> None:
        """Every fault and round is through; the final snapshot comes next."""


class _NoObserver:
    async def started(self) -> None:
        pass

    async def before_fault(self, spec: FaultSpec) -> None:
        pass

    async def round_done(self, result: RoundResult) -> None:
        pass

    async def finished(self) -> None:
        pass


@dataclass
class RoundResult:
    """What the driver did in one round: the fault records the nemesis wrote meanwhile, what each
    wait found (by wait name: the leader's replica, the new holder's identity, "restarted" or
    "standby"), the round's wall time, and the error that ended it, if one did."""

    label: str
    faults: list[FaultRecord] = field(default_factory=list)
    waits: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    error: str | None = None


class Drive:
    """The run driver, the same fresh and attached, for scenarios and the failover benchmark: an
    informer recording what it delivers (`watch-chaos.jsonl`), the nemesis (faults go to
    `faults.jsonl`), the generator's faults (the timed `schedule`, each at its time, for `duration`
    s; and the sequential `rounds`, each step once the previous one is through, beside it), then
    the final snapshot (`final.json`). `errors` lists what could not be carried out (a fault that
    could not be injected; a round that stopped, which also ends the rounds after it)."""

    def __init__(
        self,
        *,
        schedule: Sequence[FaultSpec] = (),
        duration: float = 0.0,
        rounds: Sequence[Round] = (),
        seed: int = 0,
        default_stop: float = 5.0,
        retry_period: float = 2.0,
        renew_deadline: float = 10.0,
        say: Callable[[str], None] = progress,
        settle_s: float = SETTLE_S,
        settle_until_ready: bool = False,
        observer: DriveObserver | None = None,
        deployments: Sequence[DeploymentSpec] = (),
        guard: SafetyGuard | None = None,
    ) -> None:
        self.schedule = list(schedule)
        self.duration = duration
        self.rounds = list(rounds)
        self.seed = seed
        self.default_stop = default_stop
        self.retry_period = retry_period
        self.renew_deadline = renew_deadline
        self._say = say
        self.settle_s = settle_s
        self.settle_until_ready = settle_until_ready  # see cluster_setup.final_state
        self.observer: DriveObserver = observer or _NoObserver()
        self.deployments = list(deployments)  # created (and available) before t=0
        # Fed the runner's pod and node events as they come (`kse chaos soak` checks as it goes).
        self.guard = guard
        self.t0: float | None = None  # time.monotonic() at t=0 (the first leader elected)
        self.nemesis: Nemesis | None = None  # the run's, once it started (its `upgrades`)
        self.errors: list[str] = []
        self.round_results: list[RoundResult] = []
        self.created: dict[str, pb.Pod] = {}
        self.started_at = time.time()
        self.snapshot_at = 0.0

    def say(self, message: str) -> None:
        """A console line; from t=0 on it starts with `t=<seconds>s`, the time origin the run's
        tables and plots share (chaos.history ORIGIN_FILE). Pass it, not the raw `say`, to
        everything that reports during the run (the cluster's progress too)."""
        if self.t0 is None:
            self._say(message)
        else:
            self._say(f"t={time.monotonic() - self.t0:.1f}s {message}")

    @classmethod
    def for_scenario(
        cls, scenario: Scenario, schedule: Sequence[FaultSpec], seed: int, say: Callable[[str], None]
    ) -> Drive:
        """The driver of a scenario run: its timed `schedule` (drawn with `seed`) and its rounds."""
        return cls(
            schedule=schedule,
            duration=scenario.duration,
            rounds=scenario.rounds,
            seed=seed,
            default_stop=scenario.default_stop,
            retry_period=scenario.cluster.retry_period,
            renew_deadline=scenario.cluster.renew_deadline,
            say=say,
            deployments=scenario.deployments,
        )

    async def run(
        self,
        backend: FaultBackend,
        connection_file: Path,
        chaos_dir: Path,
        *,
        lease: tuple[str, str],
        lease_duration: float,
        stop_workload: Callable[[], Awaitable[object]] | None,
        young_s: float,
        audit_logs: Sequence[Path] = (),
    ) -> None:
        from chaos.audit_tail import AuditTail
        from chaos.history import (
            FAULTS_FILE,
            SNAPSHOT_FILE,
            JsonlWriter,
            WatchRecorder,
            write_origin,
            write_snapshot,
        )
        from chaos.nemesis import Nemesis, NemesisError
        from chaos.podtimeline import TIMELINE_FILE, PodTimelineRecorder
        from chaos.waits import Waits
        from kse.client.channel import channel_source_from_connection
        from kse.client.clientset import Clientset
        from kse.client.informer import InformerFactory
        from kse.client.rpc_errors import RpcErrorLog

        await asyncio.to_thread(chaos_dir.mkdir, parents=True, exist_ok=True)
        self.started_at = time.time()
        # Our own admin client follows its files too (a CA rotation moves the API server to a
        # new CA), and logs its failed RPCs like every other client of the run.
        errors_log = RpcErrorLog(chaos_dir / RPC_ERRORS_FILE)
        source = channel_source_from_connection(connection_file, interceptors=errors_log.interceptors)
        clientset = Clientset(source, qps=0, burst=1000, user_agent="kse-chaos")
        faults = JsonlWriter(chaos_dir / FAULTS_FILE)
        recorder = WatchRecorder(chaos_dir / WATCH_FILE, "chaos-runner")
        timeline = PodTimelineRecorder(chaos_dir / TIMELINE_FILE)
        try:
            factory = InformerFactory(clientset, history=recorder)
            pods = factory.informer_for(clientset.pods)
            pods.add_event_handler(self._added, None, None)
            pods.add_event_handler(timeline.on_add, timeline.on_update, timeline.on_delete)
            if self.guard is not None:
                g = self.guard
                pods.add_event_handler(g.pod_added, g.pod_updated, g.pod_deleted)
                factory.informer_for(clientset.nodes).add_event_handler(g.node_added, g.node_updated, None)
            nemesis = Nemesis(
                backend,
                clientset,
                faults,
                seed=self.seed,
                default_stop=self.default_stop,
                leader_within=60.0 + lease_duration,
                lease=lease,
                retry_period=self.retry_period,
                renew_deadline=self.renew_deadline,
                say=self.say,
            )
            self.nemesis = nemesis
            waits = Waits(nemesis, AuditTail(audit_logs) if audit_logs else None)
            async with factory.running():
                await factory.wait_for_sync()
                try:
                    first = await nemesis.wait_for_leader(60.0 + lease_duration)
                except NemesisError as e:
                    raise RunError(f"no first leader: {e}") from e
                if self.deployments:
                    await self._start_workload(clientset)
                self.say(f"leader {first} ({await backend.identity(first)}); t=0")
                self.t0 = time.monotonic()
                write_origin(chaos_dir, time.time(), "the first leader elected")
                await self.observer.started()
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(_run_schedule(nemesis, self.schedule, self.duration, self.errors))
                    tg.create_task(self._run_rounds(nemesis, waits))
                await self.observer.finished()
                with contextlib.suppress(NemesisError):
                    await nemesis.wait_for_leader(30.0 + lease_duration)
                final_pods, nodes, self.snapshot_at, pods_revision = await final_state(
                    clientset,
                    stop_workload=stop_workload,
                    settle_s=self.settle_s,
                    young_s=young_s,
                    until_ready=self.settle_until_ready,
                    say=self.say,
                )
                pdbs = (await clientset.pod_disruption_budgets.list_all("")).items
                deployments = (await clientset.deployments.list_all("")).items
            write_snapshot(
                chaos_dir / SNAPSHOT_FILE,
                final_pods,
                nodes,
                created=self.created.values(),
                pods_revision=pods_revision,
                pdbs=pdbs,
                deployments=deployments,
            )
        finally:
            faults.close()
            recorder.close()
            timeline.close()
            with contextlib.suppress(Exception):
                await source.close()
            errors_log.close()

    async def _start_workload(self, clientset: Clientset) -> None:
        """The scenario's Deployments and budgets (`chaos.upgrade_workload`), every replica
        available before t=0; RunError when they do not get there."""
        from chaos.upgrade_workload import create_workload, wait_available

        await create_workload(clientset, self.deployments)
        try:
            await wait_available(clientset, self.deployments)
        except TimeoutError as e:
            raise RunError(str(e)) from e
        total = sum(d.replicas for d in self.deployments)
        self.say(f"workload: {len(self.deployments)} deployments, {total} pods available")

    async def _run_rounds(self, nemesis: Nemesis, waits: Waits) -> None:
        """Each round's steps in order, one round after the other; the first step that fails ends
        the rounds (what follows it assumed it went through)."""
        from chaos.backend import BackendError
        from chaos.nemesis import NemesisError
        from kse.client.errors import ApiError

        t0 = time.monotonic() if self.t0 is None else self.t0
        for rnd in self.rounds:
            await asyncio.sleep(max(0.0, t0 + rnd.not_before - time.monotonic()))
            result = RoundResult(rnd.label)
            self.round_results.append(result)
            began = time.monotonic()
            try:
                for step in rnd.steps:
                    if isinstance(step, WaitSpec):
                        result.waits[step.wait] = await waits.run(step)
                        continue
                    await self.observer.before_fault(step)
                    seen = len(nemesis.injected)
                    try:
                        await nemesis.inject(step)
                    finally:
                        result.faults += nemesis.injected[seen:]
            except (NemesisError, BackendError, ApiError, TimeoutError) as e:
                result.error = str(e) or type(e).__name__
                self.errors.append(f"{rnd.label}: {result.error}")
                self.say(f"ERROR: {self.errors[-1]}")
            result.wall_s = round(time.monotonic() - began, 3)
            await self.observer.round_done(result)
            if result.error is not None:
                return

    def _added(self, pod: pb.Pod) -> None:
        """Every pod the informer delivers as created (with its spec), for the time-resolved
        over-commit check of pods deleted before the end."""
        self.created.setdefault(uid_key(pod), pod)


async def _run_schedule(
    nemesis: Nemesis, schedule: list[FaultSpec], duration: float, errors: list[str]
) -> None:
    """Each fault at its time (one task each); returns at `duration` once every fault is through."""
    from chaos.nemesis import NemesisError

    t0 = time.monotonic()

    async def one(spec: FaultSpec) -> None:
        await asyncio.sleep(max(0.0, t0 + (spec.at or 0.0) - time.monotonic()))
        try:
            await nemesis.inject(spec)
        except NemesisError as e:
            errors.append(f"{spec.describe()}: {e}")
            nemesis.say(f"ERROR: {errors[-1]}")
        shown.fault()

    with _REPORTER.phase("faults and workload", total_s=duration, faults=len(schedule)) as shown:
        async with asyncio.TaskGroup() as tg:
            for spec in schedule:
                tg.create_task(one(spec), name=f"fault-{spec.describe()}")
            await asyncio.sleep(duration)


# ---------------------------------------------------------------------------------------------- attached


def _attached_backend(data_dir: Path, backend: str) -> FaultBackend:
    from chaos.backend import BackendError

    if backend == "local":
        from chaos.local_backend import AttachedLocalBackend

        try:
            return AttachedLocalBackend.from_data_dir(data_dir)
        except BackendError as e:
            raise RunError(str(e)) from e
    try:
        mod = importlib.import_module("chaos.docker_backend")
    except ModuleNotFoundError as e:
        if e.name not in ("chaos.docker_backend",):
            raise RunError(f"the docker backend needs {e.name!r}, which is not installed") from e
        raise RunError(
            "the docker backend (chaos/docker_backend.py) is not part of this installation; use "
            "--backend local"
        ) from e
    cls = mod.DockerBackend
    factory = getattr(cls, "from_data_dir", None)
    try:
        made = factory(data_dir) if factory is not None else cls(pki_dir=data_dir / "pki")
    except BackendError as e:
        raise RunError(str(e)) from e
    return made  # type: ignore[no-any-return]


def _attached_layout(data_dir: Path) -> dict[str, Any]:
    """cluster.json if the data dir has one (`kse up`, `kse datadir init`), else the compose
    layout's defaults; a cluster.json that cannot be read is refused, naming the field."""
    from harness.clusterfile import ClusterFile, ClusterFileError, cluster_file_path

    path = cluster_file_path(data_dir)
    if not path.is_file():
        return {
            "connection_file": data_dir / "config.json",
            "audit_log": data_dir / "audit" / "audit.jsonl",
            "run_dir": data_dir / "run",
            "lease": ("kube-system", "kube-scheduler"),
            "lease_duration": None,
        }
    try:
        info = ClusterFile.read(path)
    except ClusterFileError as e:
        raise RunError(str(e)) from e
    return {
        "connection_file": info.connection_file,
        "audit_log": info.audit_log or data_dir / "audit" / "audit.jsonl",
        "run_dir": info.run_dir,
        "lease": (info.lease.namespace, info.lease.name),
        "lease_duration": info.lease.duration_s,
    }


def _resolve_dir(data_dir: Path) -> Path:
    path = data_dir.expanduser().absolute()
    if not path.is_dir():
        raise RunError(f"--attach {path}: no such directory")
    return path


async def _run_attached(
    scenario: Scenario, data_dir: Path, backend_name: str, *, seed: int | None, say: Callable[[str], None]
) -> RunOutcome:
    from kse.client.errors import ApiError

    data_dir = _resolve_dir(data_dir)
    seed = scenario.seed if seed is None else seed
    schedule = scenario.schedule(seed)
    layout = _attached_layout(data_dir)
    if not layout["connection_file"].is_file():
        raise RunError(f"no admin connection file at {layout['connection_file']}: is the cluster up?")
    backend = _attached_backend(data_dir, backend_name)
    chaos_dir = data_dir / "chaos" / f"{scenario.name}-{_stamp()}"
    lease_duration = layout["lease_duration"]
    say(
        f"scenario {scenario.name}: {scenario.duration:g}s, {len(schedule)} faults, seed {seed}; attached to "
        f"{data_dir} ({backend.name} backend); history in {chaos_dir}"
    )
    drive = Drive.for_scenario(scenario, schedule, seed, say)
    try:
        await drive.run(
            backend,
            layout["connection_file"],
            chaos_dir,
            lease=layout["lease"],
            lease_duration=lease_duration or scenario.cluster.lease_duration,
            stop_workload=None,  # the cluster's own workload: not ours to stop
            young_s=YOUNG_S,
            audit_logs=[layout["audit_log"]],
        )
    except ApiError as e:
        raise RunError(f"the final snapshot failed: {e}") from e
    finally:
        with contextlib.suppress(Exception):
            await backend.aclose()
    history = load_history([layout["audit_log"]], chaos_dir, layout["run_dir"], since=drive.started_at)
    result = check_scenario(
        scenario, history, lease_duration=lease_duration, young_after=drive.snapshot_at - YOUNG_S
    )
    outcome = RunOutcome(scenario, seed, result, history, schedule, drive.errors, chaos_dir)
    say(f"scenario {scenario.name}: {'PASS' if outcome.passed else 'FAIL'}")
    return outcome
