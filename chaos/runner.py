"""Runs a scenario (`chaos.scenario`) on a fresh local cluster and judges its history.

One run, under a temp dir:

1. start a `kse.up.Cluster` from the scenario's `cluster:` section (etcd members, the API server with
   fencing on and an audit log, the scheduler replicas electing a leader, nodesim, the workload);
2. run an unfiltered pods informer whose deliveries a `WatchRecorder` writes to `watch-chaos.jsonl`
   (the `watch_integrity` invariant judges them against the audit log);
3. wait for a first leader, then t=0: every fault of the schedule is injected at its time by the
   nemesis (`chaos.nemesis`, one task each, so a pause may overlap the next fault);
4. at t=`duration` (and once every fault has finished): stop the workload, let the leader bind what
   is pending, snapshot pods and nodes (`final.json`), stop the cluster;
5. load the `History` from the run directory (audit log, faults, watch deliveries, snapshot) and
   run the checker; the scenario's `checks` decide `passed`.

The history is the single truth: nothing the harness saw while the run went on is used by the checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.scenario import FaultSpec, Scenario

if TYPE_CHECKING:
    from chaos.checker import CheckResult
    from chaos.history import History
    from chaos.nemesis import Nemesis
    from chaos.proxy import PartitionProxy
    from kse.up import Cluster
    from proto import kse_pb2 as pb

__all__ = ["RunError", "RunOutcome", "run_scenario"]

SCHEDULER_USER = "system:kube-scheduler"
WATCH_FILE = "watch-chaos.jsonl"
SETTLE_S = 10.0  # after the workload stops: how long the leader gets to bind what is pending


class RunError(RuntimeError):
    """The run could not be carried out (the cluster did not come up, no leader)."""


def progress(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


@dataclass
class RunOutcome:
    scenario: Scenario
    seed: int
    result: CheckResult
    history: History
    schedule: list[FaultSpec]
    errors: list[str] = field(default_factory=list)  # faults that could not be injected
    run_dir: Path | None = None  # kept only with keep=True

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


def _plan_kwargs(s: Scenario, seed: int) -> dict[str, Any]:
    from kse.up import BackoffPolicy, ElectionPlan

    c = s.cluster
    # Churn: each pod deleted this long after it runs, ~half the fleet's capacity in use (40 pods a node).
    delete_after = max(1.0, min(30.0, 0.5 * 40 * c.nodes / c.rate))
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
        "apiserver_args": ("--fencing", "on", "--require-fence-for", SCHEDULER_USER),
        "nodesim_args": ("--seed", str(seed)),
        "workload_args": ("--delete-after", f"{delete_after:g}s"),
    }


async def run_scenario(
    scenario: Scenario,
    *,
    seed: int | None = None,
    keep: bool = False,
    say: Callable[[str], None] = progress,
) -> RunOutcome:
    """Run `scenario` once; `seed` (default: the scenario's `random.seed`, else 0) seeds the random
    faults, random targets and nodesim."""
    from chaos.checker import check
    from chaos.history import FAULTS_FILE, SNAPSHOT_FILE, History, JsonlWriter, WatchRecorder, write_snapshot
    from chaos.nemesis import Nemesis, NemesisError
    from kse.bench.common import work_dir
    from kse.client.errors import ApiError
    from kse.client.informer import InformerFactory
    from kse.up import Cluster, ClusterPlan, UpError

    seed = scenario.seed if seed is None else seed
    schedule = scenario.schedule(seed)
    errors: list[str] = []
    created: dict[str, pb.Pod] = {}
    with work_dir(f"kse-chaos-{scenario.name}-", keep) as tmp:
        plan = ClusterPlan(data_dir=tmp / "kse", **_plan_kwargs(scenario, seed))
        cluster = Cluster(plan, progress=lambda m: say(f"cluster: {m}"))
        c = scenario.cluster
        say(
            f"scenario {scenario.name}: {scenario.duration:g}s, {len(schedule)} faults, seed {seed}; "
            f"{c.replicas} replicas, {c.etcd_members} etcd, {c.nodes} nodes, {c.rate:g} pods/s, lease "
            f"{c.lease_duration:g}/{c.renew_deadline:g}/{c.retry_period:g}s; data under {tmp}"
        )
        pods: list[pb.Pod] | None = None
        nodes: list[pb.Node] | None = None
        try:
            # Outside the cluster's block: partition proxies outlive the replicas that use them.
            async with contextlib.AsyncExitStack() as proxy_stack, cluster:
                if not cluster.leader_election:
                    raise RunError("`kse scheduler` offers no leader election: no scenario can run")
                if not cluster.audit_logs:
                    raise RunError("`kse apiserver` has no --audit-log: the checker needs the audit log")
                run_dir = cluster.audit_logs[0].parent
                _collect_created(cluster, created)
                assert cluster.clientset is not None
                faults = JsonlWriter(run_dir / FAULTS_FILE)
                recorder = WatchRecorder(run_dir / WATCH_FILE, "chaos-runner")
                factory = InformerFactory(cluster.clientset, history=recorder)
                factory.informer_for(cluster.clientset.pods)
                proxies = await _behind_proxies(cluster, proxy_stack, say) if scenario.partitions else {}
                nemesis = Nemesis(
                    cluster,
                    faults,
                    proxies=proxies,
                    seed=seed,
                    default_stop=scenario.default_stop,
                    leader_within=60.0 + c.lease_duration,
                    say=say,
                )
                try:
                    async with factory.running():
                        await factory.wait_for_sync()
                        try:
                            first = await cluster.wait_for_leader(60.0 + c.lease_duration)
                        except TimeoutError as e:
                            raise RunError(f"no first leader: {e}") from e
                        say(f"leader {first.name} ({first.identity}); t=0")
                        await _run_schedule(nemesis, schedule, scenario.duration, errors, NemesisError)
                        with contextlib.suppress(TimeoutError):
                            await cluster.wait_for_leader(30.0 + c.lease_duration)
                        pods, nodes = await _final_state(cluster, say)
                finally:
                    faults.close()
                    recorder.close()
        except ApiError as e:
            raise RunError(f"the final snapshot failed: {e}") from e
        except UpError as e:
            raise RunError(str(e)) from e
        if pods is not None and nodes is not None:
            write_snapshot(run_dir / SNAPSHOT_FILE, pods, nodes, created=created.values())
        history = History.load(run_dir)
        result = check(
            history,
            allow_pending=scenario.allow_pending,
            lease_duration_s=c.lease_duration,
            require_fence=True,
        )
        kept: Path | None = None
        if keep:
            kept = run_dir
        outcome = RunOutcome(scenario, seed, result, history, schedule, errors, kept)
        say(f"scenario {scenario.name}: {'PASS' if outcome.passed else 'FAIL'}")
        return outcome


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

    async with asyncio.TaskGroup() as tg:
        for spec in schedule:
            tg.create_task(one(spec), name=f"fault-{spec.describe()}")
        await asyncio.sleep(duration)


async def _behind_proxies(
    cluster: Cluster, stack: contextlib.AsyncExitStack, say: Callable[[str], None]
) -> dict[str, PartitionProxy]:
    """Put a `PartitionProxy` between each replica and the API server: its connection file points
    at the proxy, and it is restarted (SIGTERM: a leader hands over; one at a time, ready awaited) so
    it connects through it. Before t=0, and recorded as no fault."""
    from dataclasses import replace

    from chaos.proxy import PartitionProxy
    from kse.config import ConnectionFile

    assert cluster.apiserver is not None
    out: dict[str, PartitionProxy] = {}
    for r in cluster.replicas:
        proxy = await stack.enter_async_context(PartitionProxy(cluster.apiserver.address))
        path = cluster.plan.connection_path(r.name)
        replace(ConnectionFile.load(path), server=proxy.address).save(path)
        await r.terminate(restart=False)
        await r.start(wait_ready=True)
        out[r.name] = proxy
        say(f"{r.name} now reaches the API server through a partition proxy at {proxy.address}")
    return out


def _collect_created(cluster: Cluster, created: dict[str, pb.Pod]) -> None:
    """Every pod the status informer delivers as created (with its spec), for the time-resolved
    over-commit check of pods deleted before the end."""
    if cluster.status is None:
        return

    def added(pod: pb.Pod) -> None:
        created.setdefault(pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}", pod)

    cluster.status.pods.add_event_handler(added, None, None)


async def _final_state(cluster: Cluster, say: Callable[[str], None]) -> tuple[list[pb.Pod], list[pb.Node]]:
    """Stop the workload, give the leader `SETTLE_S` to bind what is pending, list pods and nodes."""
    assert cluster.clientset is not None
    if cluster.workload is not None:
        await cluster.workload.terminate(cluster.plan.grace)
    deadline = time.monotonic() + SETTLE_S
    while True:
        pods = (await cluster.clientset.pods.list_all("")).items
        pending = [p for p in pods if not p.spec.node_name and not p.metadata.deletion_timestamp]
        if not pending or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.2)
    if pending:
        say(f"{len(pending)} pods still pending after {SETTLE_S:g}s")
    nodes = (await cluster.clientset.nodes.list_all("")).items
    return pods, nodes
