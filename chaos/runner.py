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
3. wait for a first leader, then t=0: every fault of the schedule is injected at its time by the
   nemesis (`chaos.nemesis`, through a `chaos.local_backend.LocalBackend`; one task each, so a pause
   may overlap the next fault);
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
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.cluster_setup import churn_delete_after, fencing_args, final_state
from chaos.scenario import FaultSpec, Scenario
from harness.progress import Reporter

if TYPE_CHECKING:
    from chaos.backend import FaultBackend
    from chaos.checker import CheckResult
    from chaos.history import History
    from chaos.nemesis import Nemesis
    from proto import kse_pb2 as pb

__all__ = ["BACKENDS", "RunError", "RunOutcome", "run_scenario"]

WATCH_FILE = "watch-chaos.jsonl"
RPC_ERRORS_FILE = "rpc-errors-chaos.jsonl"  # the runner's own client (its informer, the snapshot)
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


def _plan_kwargs(s: Scenario, seed: int, run_dir: Path) -> dict[str, Any]:
    from chaos.local_backend import clock_skew_path
    from harness.up import BackoffPolicy, ElectionPlan

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
        "election": ElectionPlan(
            strategy=c.election,
            lease_duration=c.lease_duration,
            renew_deadline=c.renew_deadline,
            retry_period=c.retry_period,
            on_lost_lease=c.on_lost_lease,
        ),
        # Restarts within a second or two: scenarios exercise failover, not crash-loop backoff.
        "restart_policy": BackoffPolicy(initial=0.5, cap=2.0, reset_after=max(5.0, 2 * c.lease_duration)),
        "grace": 10.0,
        "apiserver_args": fencing_args(True),
        "nodesim_args": ("--seed", str(seed)),
        "workload_args": ("--delete-after", f"{churn_delete_after(c.nodes, c.rate):g}s"),
        "rpc_error_logs": True,
        "partition_proxies": s.partitions,
        "replica_args": replica_args,
    }


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
    from chaos.local_backend import LocalBackend, write_clock_skew
    from harness.bench.common import work_dir
    from harness.up import Cluster, ClusterPlan, UpError
    from kse.client.errors import ApiError

    seed = scenario.seed if seed is None else seed
    schedule = scenario.schedule(seed)
    c = scenario.cluster
    with work_dir(f"kse-chaos-{scenario.name}-", keep) as tmp:
        data_dir = tmp / "kse"
        plan = ClusterPlan(data_dir=data_dir, **_plan_kwargs(scenario, seed, data_dir / "run"))
        if scenario.clock_skew:
            await _need_clock_skew_flag()
            for name in plan.scheduler_names():
                from chaos.local_backend import clock_skew_path

                write_clock_skew(clock_skew_path(plan.run_dir, name), 0.0, 1.0)
        cluster = Cluster(plan, progress=lambda m: say(f"cluster: {m}"))
        chaos_dir = data_dir / "chaos" / f"{scenario.name}-{_stamp()}"
        say(
            f"scenario {scenario.name}: {scenario.duration:g}s, {len(schedule)} faults, seed {seed}; "
            f"{c.replicas} replicas, {c.etcd_members} etcd, {c.nodes} nodes, {c.rate:g} pods/s, lease "
            f"{c.lease_duration:g}/{c.renew_deadline:g}/{c.retry_period:g}s; data under {tmp}"
        )
        drive: _Drive | None = None
        try:
            async with cluster:
                if not cluster.leader_election:
                    raise RunError("`kse scheduler` offers no leader election: no scenario can run")
                if not cluster.audit_logs:
                    raise RunError("`kse apiserver` has no --audit-log: the checker needs the audit log")
                backend = LocalBackend(cluster)
                workload = cluster.workload

                async def stop_workload() -> None:
                    if workload is not None:
                        await workload.terminate(plan.grace)

                drive = _Drive(scenario, schedule, seed, backend, say)
                await drive.run(
                    plan.connection_file,
                    chaos_dir,
                    lease=(plan.election.lease_namespace, plan.election.lease_name),
                    lease_duration=c.lease_duration,
                    stop_workload=stop_workload,
                    young_s=0.0,
                )
        except ApiError as e:
            raise RunError(f"the final snapshot failed: {e}") from e
        except UpError as e:
            raise RunError(str(e)) from e
        assert drive is not None
        history = _load_history(cluster.audit_logs, chaos_dir, plan.run_dir, since=None)
        result = _check(scenario, history, lease_duration=c.lease_duration, young_after=None)
        outcome = RunOutcome(
            scenario, seed, result, history, schedule, drive.errors, chaos_dir if keep else None
        )
        say(f"scenario {scenario.name}: {'PASS' if outcome.passed else 'FAIL'}")
        return outcome


async def _need_clock_skew_flag() -> None:
    from harness.up.topology import probe_features

    features = await probe_features()
    if CLOCK_SKEW_FLAG not in features.scheduler_flags:
        raise RunError(
            f"`kse scheduler` has no {CLOCK_SKEW_FLAG} flag: a clock-skew scenario cannot skew its clocks"
        )


def _check(
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


def _load_history(audit: list[Path], chaos_dir: Path, rpc_dir: Path, *, since: float | None) -> History:
    """The run's history: the audit log(s), the run dir's faults, watch deliveries and snapshot, and
    the clients' rpc-errors files (those in the cluster's run dir and the runner's own; attached,
    only errors from `since` on: the files live as long as the cluster)."""
    from chaos.history import FAULTS_FILE, RPC_ERRORS_GLOB, SNAPSHOT_FILE, WATCH_GLOB, History

    history = History.from_files(
        audit=[p for p in audit if p.exists()],
        watch=sorted(chaos_dir.glob(WATCH_GLOB)),
        faults=[chaos_dir / FAULTS_FILE] if (chaos_dir / FAULTS_FILE).exists() else [],
        rpc_errors=sorted({*rpc_dir.glob(RPC_ERRORS_GLOB), *chaos_dir.glob(RPC_ERRORS_GLOB)}),
        snapshot=chaos_dir / SNAPSHOT_FILE,
    )
    if since is not None:
        history.rpc_errors = [e for e in history.rpc_errors if e.ts >= since]
    return history


class _Drive:
    """The part of a run that is the same fresh and attached: the recorded informer, the nemesis on
    its schedule, the final snapshot."""

    def __init__(
        self,
        scenario: Scenario,
        schedule: list[FaultSpec],
        seed: int,
        backend: FaultBackend,
        say: Callable[[str], None],
    ) -> None:
        self.scenario = scenario
        self.schedule = schedule
        self.seed = seed
        self.backend = backend
        self.say = say
        self.errors: list[str] = []
        self.created: dict[str, pb.Pod] = {}
        self.started_at = time.time()
        self.snapshot_at = 0.0

    async def run(
        self,
        connection_file: Path,
        chaos_dir: Path,
        *,
        lease: tuple[str, str],
        lease_duration: float,
        stop_workload: Callable[[], Awaitable[object]] | None,
        young_s: float,
    ) -> None:
        from chaos.history import FAULTS_FILE, SNAPSHOT_FILE, JsonlWriter, WatchRecorder, write_snapshot
        from chaos.nemesis import Nemesis, NemesisError
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
        try:
            factory = InformerFactory(clientset, history=recorder)
            pods = factory.informer_for(clientset.pods)
            pods.add_event_handler(self._added, None, None)
            nemesis = Nemesis(
                self.backend,
                clientset,
                faults,
                seed=self.seed,
                default_stop=self.scenario.default_stop,
                leader_within=60.0 + lease_duration,
                lease=lease,
                retry_period=self.scenario.cluster.retry_period,
                say=self.say,
            )
            async with factory.running():
                await factory.wait_for_sync()
                try:
                    first = await nemesis.wait_for_leader(60.0 + lease_duration)
                except NemesisError as e:
                    raise RunError(f"no first leader: {e}") from e
                self.say(f"leader {first} ({await self.backend.identity(first)}); t=0")
                await _run_schedule(nemesis, self.schedule, self.scenario.duration, self.errors, NemesisError)
                with contextlib.suppress(NemesisError):
                    await nemesis.wait_for_leader(30.0 + lease_duration)
                final_pods, nodes, self.snapshot_at = await final_state(
                    clientset, stop_workload=stop_workload, settle_s=SETTLE_S, young_s=young_s, say=self.say
                )
            write_snapshot(chaos_dir / SNAPSHOT_FILE, final_pods, nodes, created=self.created.values())
        finally:
            faults.close()
            recorder.close()
            with contextlib.suppress(Exception):
                await source.close()
            errors_log.close()

    def _added(self, pod: pb.Pod) -> None:
        """Every pod the informer delivers as created (with its spec), for the time-resolved
        over-commit check of pods deleted before the end."""
        self.created.setdefault(pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}", pod)


async def _run_schedule(
    nemesis: Nemesis, schedule: list[FaultSpec], duration: float, errors: list[str], expected: type[Exception]
) -> None:
    """Each fault at its time (one task each); returns at `duration` once every fault is through."""
    t0 = time.monotonic()

    async def one(spec: FaultSpec) -> None:
        await asyncio.sleep(max(0.0, t0 + (spec.at or 0.0) - time.monotonic()))
        try:
            await nemesis.inject(spec)
        except expected as e:
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
    """cluster.json if the data dir has one (`kse up`), else the compose layout's defaults."""
    from chaos.local_backend import CLUSTER_FILE

    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads((data_dir / "run" / CLUSTER_FILE).read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            info = loaded
    raw_lease = info.get("lease")
    lease: dict[str, Any] = raw_lease if isinstance(raw_lease, dict) else {}
    return {
        "connection_file": Path(info.get("connection_file") or data_dir / "config.json"),
        "audit_log": Path(info.get("audit_log") or data_dir / "audit" / "audit.jsonl"),
        "run_dir": Path(info.get("run_dir") or data_dir / "run"),
        "lease": (str(lease.get("namespace") or "kube-system"), str(lease.get("name") or "kube-scheduler")),
        "lease_duration": float(lease["duration_s"])
        if isinstance(lease.get("duration_s"), int | float)
        else None,
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
    drive = _Drive(scenario, schedule, seed, backend, say)
    try:
        await drive.run(
            layout["connection_file"],
            chaos_dir,
            lease=layout["lease"],
            lease_duration=lease_duration or scenario.cluster.lease_duration,
            stop_workload=None,  # the cluster's own workload: not ours to stop
            young_s=YOUNG_S,
        )
    except ApiError as e:
        raise RunError(f"the final snapshot failed: {e}") from e
    finally:
        with contextlib.suppress(Exception):
            await backend.aclose()
    history = _load_history([layout["audit_log"]], chaos_dir, layout["run_dir"], since=drive.started_at)
    result = _check(scenario, history, lease_duration=lease_duration, young_after=drive.snapshot_at - YOUNG_S)
    outcome = RunOutcome(scenario, seed, result, history, schedule, drive.errors, chaos_dir)
    say(f"scenario {scenario.name}: {'PASS' if outcome.passed else 'FAIL'}")
    return outcome
