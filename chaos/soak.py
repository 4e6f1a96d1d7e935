"""`kse chaos soak`: hours of the faults an HA control plane lives through, on one cluster, under
steady load with churn, checked as it goes and at the end.

The cluster: three etcd members, the API server, three scheduler replicas, two controller managers,
20 simulated nodes, a workload creating pods at 10 pods/s and deleting them again (churn), and two
Deployments guarded by PodDisruptionBudgets. Leases are short (4 s / 3 s / 1 s) so that a hundred
failovers fit in an hour.

The faults, per hour of soak (`SOAK_RATES_PER_HOUR`; a shorter soak gets its share, rounded up, and
at least one of each):

    leader-kill        100   SIGKILL the scheduler leader; a standby takes over, the supervisor
                             restarts the killed one
    zombie-leader       20   the leader's requests held back (delay-up partition) past its lease
                             while it keeps scheduling: its binds land after a successor holds the
                             Lease and must be fenced
    leaf-rotation       20   a seeded choice of: the leader's, a random replica's, the API server's,
                             etcd's, or every leaf pair reissued
    ca-rotation          3   add / switch / remove, etcd members restarted one at a time
    apiserver-restart   10   SIGTERM the API server, start it again after 1 s
    etcd-restart        10   a seeded random etcd member stopped and started again (quorum holds)
    partition           10   the leader black-holed past its lease, then healed

Each fault is one round (`chaos.scenario.Round`): wait for a stable leader (plus a seeded jitter of
up to one retry period, so faults land anywhere in a renew cycle), inject, wait for the recovery
the fault implies (a new leader; the hit replica back). Rounds are shuffled by the seed and spread
over the duration (round i starts no earlier than i x duration / rounds), so faults never overlap
and every one is judged on its own.

Continuously (`chaos.soak_guard`): a pod bound twice or a node over-committed stops the run at
once, keeping its data dir. Every 5 s, the RSS and open fds of every process are sampled
(`chaos.soak_resources`). At the end, the chaos checker runs every invariant over the whole history
(audit log, watch deliveries, etcd's own history, the final snapshot).
"""

from __future__ import annotations

import asyncio
import math
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.scenario import (
    CHECKS,
    NEW_LEADER,
    RECOVERED,
    STABLE_LEADER,
    DeploymentSpec,
    FaultSpec,
    Round,
    Scenario,
    Step,
    WaitSpec,
)
from chaos.soak_guard import SafetyGuard
from chaos.soak_resources import LeakPolicy, ProcessSeries, ResourceSampler, judge_leaks
from harness.shape import ClusterShape, ElectionPlan
from kse.tasks import TaskSet

__all__ = [
    "SOAK_CHECKS",
    "SOAK_RATES_PER_HOUR",
    "SoakOutcome",
    "run_soak",
    "soak_counts",
    "soak_kinds",
    "soak_rounds",
    "soak_scenario",
]

SOAK_RATES_PER_HOUR: dict[str, int] = {
    "leader-kill": 100,
    "zombie-leader": 20,
    "leaf-rotation": 20,
    "ca-rotation": 3,
    "apiserver-restart": 10,
    "etcd-restart": 10,
    "partition": 10,
}
SOAK_ELECTION = ElectionPlan(lease_duration=4.0, renew_deadline=3.0, retry_period=1.0)
SOAK_CLUSTER = ClusterShape(replicas=3, nodes=20, rate=10.0, etcd_members=3, election=SOAK_ELECTION)
SOAK_DEPLOYMENTS = (
    DeploymentSpec("web", 6, min_available=5),
    DeploymentSpec("api", 4, max_unavailable=1),
)
# Every check but the ones that judge drains (a soak drains no node).
DRAIN_ONLY_CHECKS = (
    "no_pdb_violation",
    "evictions_within_budget",
    "replacements_bound_once",
    "no_bind_to_cordoned",
)
SOAK_CHECKS: tuple[str, ...] = tuple(c for c in CHECKS if c not in DRAIN_ONLY_CHECKS)
LEAF_TARGETS = ("leader", "random-replica", "apiserver", "etcd", "all")
ROTATION_STEP_S = 3.0
# Events expire after 2 minutes, not kube-apiserver's hour: the scheduler writes one per pod (10/s),
# and with an hour's TTL they would pile up for the soak's first hour, which the resource verdict
# cannot tell from a leak. Two minutes is inside the first third of any soak the verdict judges.
SOAK_APISERVER_ARGS = ("--event-ttl=2m",)
SAMPLE_INTERVAL_S = 5.0


def soak_kinds(kinds: tuple[str, ...] | None) -> tuple[str, ...]:
    """The fault kinds a soak injects, in `SOAK_RATES_PER_HOUR`'s order (None: all of them).

    A subset answers one question at a time: without `apiserver-restart`, `etcd-restart` and
    `ca-rotation` (which restarts etcd members), the API server and etcd live the whole soak, so
    their memory is judged over all of it."""
    if kinds is None:
        return tuple(SOAK_RATES_PER_HOUR)
    unknown = sorted(set(kinds) - set(SOAK_RATES_PER_HOUR))
    if unknown:
        raise ValueError(
            f"unknown soak fault kind(s) {', '.join(unknown)}; known: {', '.join(SOAK_RATES_PER_HOUR)}"
        )
    if not kinds:
        raise ValueError("a soak needs at least one fault kind")
    return tuple(k for k in SOAK_RATES_PER_HOUR if k in kinds)


def soak_counts(duration_s: float, kinds: tuple[str, ...] | None = None) -> dict[str, int]:
    """How many faults of each kind a soak of `duration_s` injects: its share of the hourly rate,
    rounded up, at least one."""
    if duration_s <= 0:
        raise ValueError(f"a soak needs a positive duration, got {duration_s:g}s")
    return {k: max(1, math.ceil(SOAK_RATES_PER_HOUR[k] * duration_s / 3600.0)) for k in soak_kinds(kinds)}


def _fault_steps(kind: str, election: ElectionPlan, rng: random.Random) -> list[Step]:
    past_lease = election.lease_duration + 2 * election.retry_period + 1.0
    if kind == "leader-kill":
        return [FaultSpec("kill", "leader"), WaitSpec(NEW_LEADER), WaitSpec(RECOVERED)]
    if kind == "zombie-leader":
        zombie = FaultSpec(
            "partition", "leader", duration=past_lease, mode="delay-up", delay=past_lease, until=NEW_LEADER
        )
        return [zombie, WaitSpec(NEW_LEADER), WaitSpec(RECOVERED)]
    if kind == "partition":
        return [
            FaultSpec("partition", "leader", duration=past_lease, until=NEW_LEADER),
            WaitSpec(NEW_LEADER),
            WaitSpec(RECOVERED),
        ]
    if kind == "leaf-rotation":
        return [FaultSpec("rotate-leaf", rng.choice(LEAF_TARGETS), duration=ROTATION_STEP_S)]
    if kind == "ca-rotation":
        return [FaultSpec("rotate-ca", "all", duration=ROTATION_STEP_S)]
    if kind == "apiserver-restart":
        return [FaultSpec("restart", "apiserver", duration=1.0)]
    if kind == "etcd-restart":
        return [FaultSpec("restart", "etcd", duration=1.0)]
    raise ValueError(f"unknown soak fault kind {kind!r}")


def soak_rounds(
    duration_s: float,
    seed: int,
    election: ElectionPlan = SOAK_ELECTION,
    kinds: tuple[str, ...] | None = None,
) -> tuple[Round, ...]:
    """The soak's rounds: every kind's count, shuffled by `seed`, round i paced to start no earlier
    than i x duration / rounds. Labels are "<kind> <n>/<of kind>" (the fault counts read them)."""
    rng = random.Random(seed)
    counts = soak_counts(duration_s, kinds)
    bag = [(kind, i + 1) for kind, n in counts.items() for i in range(n)]
    rng.shuffle(bag)
    slot = duration_s / len(bag)
    rounds = []
    for i, (kind, n) in enumerate(bag):
        steps: list[Step] = [WaitSpec(STABLE_LEADER, jitter=election.retry_period)]
        steps += _fault_steps(kind, election, rng)
        rounds.append(Round(f"{kind} {n}/{counts[kind]}", tuple(steps), not_before=round(i * slot, 3)))
    return tuple(rounds)


def soak_scenario(duration_s: float, seed: int, kinds: tuple[str, ...] | None = None) -> Scenario:
    """The soak as a scenario the chaos runner drives: no timed faults, the paced rounds."""
    counts = soak_counts(duration_s, kinds)
    return Scenario(
        name="soak",
        duration=duration_s,
        cluster=SOAK_CLUSTER,
        checks=SOAK_CHECKS,
        description=f"soak for {duration_s:g}s: " + ", ".join(f"{n} {k}" for k, n in counts.items()),
        rounds=soak_rounds(duration_s, seed, kinds=kinds),
        controller_managers=2,
        deployments=SOAK_DEPLOYMENTS,
    )


@dataclass
class SoakOutcome:
    """A soak's result: the chaos run's outcome (checked over the history so far when a violation
    stopped the run), what the guard saw, the resource verdict, the faults injected."""

    seed: int
    duration_s: float
    run: Any  # chaos.runner.RunOutcome
    violation: str | None
    resources: dict[str, Any]
    fault_counts: dict[str, int]
    planned_counts: dict[str, int]
    data_dir: Path | None = None
    errors: list[str] = field(default_factory=list)
    series: list[ProcessSeries] = field(default_factory=list)  # every sample, for `--report`

    @property
    def passed(self) -> bool:
        return self.violation is None and self.run.passed and self.resources["passed"]

    def to_json(self) -> dict[str, Any]:
        """`kse chaos soak --json`: the `kse chaos run` object plus "fault_counts" (injected, by
        kind), "planned_counts", "continuous" (the guard's verdict), "resources" and "data_dir"."""
        out: dict[str, Any] = self.run.to_json()
        out["invariants"]["continuous_safety"] = {
            "passed": self.violation is None,
            "detail": self.violation
            or "no pod bound twice, no node over-committed at any point of the watch",
        }
        out["invariants"]["no_resource_leak"] = {
            "passed": self.resources["passed"],
            "detail": self.resources["detail"],
        }
        out["passed"] = self.passed
        out["duration_s"] = self.duration_s
        out["fault_counts"] = dict(self.fault_counts)
        out["planned_counts"] = dict(self.planned_counts)
        out["resources"] = self.resources
        out["errors"] = list(self.errors)
        out["data_dir"] = str(self.data_dir) if self.data_dir is not None else None
        return out


async def _snapshot_now(cluster: Any, drive: Any, chaos_dir: Path, say: Callable[[str], None]) -> None:
    """The final snapshot of a run a violation stops, taken while the cluster still runs (no
    settling: the workload goes on), so the end-of-run checker judges the history so far as it
    judges a finished run's."""
    from chaos.cluster_setup import final_state
    from chaos.history import SNAPSHOT_FILE, write_snapshot
    from kse.client.errors import ApiError

    if cluster.clientset is None:
        return
    try:
        pods, nodes, _, revision = await final_state(cluster.clientset, stop_workload=None, settle_s=0.0)
    except ApiError as e:
        say(f"no snapshot at the stop: {e}")
        return
    write_snapshot(
        chaos_dir / SNAPSHOT_FILE, pods, nodes, created=drive.created.values(), pods_revision=revision
    )


def _injected_counts(drive: Any, kinds: tuple[str, ...]) -> dict[str, int]:
    """Faults that went in, by soak kind: rounds whose fault step was reached and not refused."""
    out: Counter[str] = Counter()
    for result in drive.round_results:
        if result.faults:
            out[result.label.split(" ", 1)[0]] += 1
    return {k: out.get(k, 0) for k in kinds}


async def run_soak(
    duration_s: float,
    seed: int,
    *,
    keep: bool = False,
    say: Callable[[str], None],
    leak_policy: LeakPolicy | None = None,
    scheduler_args: tuple[str, ...] = (),
    apiserver_args: tuple[str, ...] = (),
    nodesim_args: tuple[str, ...] = (),
    kinds: tuple[str, ...] | None = None,
) -> SoakOutcome:
    """Run one soak on a fresh local cluster (a temp dir, kept with `keep` or when the soak fails).

    `scheduler_args` / `apiserver_args` / `nodesim_args` go to every scheduler replica / the API
    server / the simulated nodes after the soak's own: a soak can be run with a property broken on
    purpose (schedulers that do not elect a leader, fencing off), which the guard must catch.
    `kinds` limits the faults to those kinds (None: all; see `soak_kinds`)."""
    from chaos.runner import (
        Drive,
        RunOutcome,
        check_scenario,
        drive_cluster,
        load_history,
        scenario_plan_kwargs,
    )
    from harness.up import Cluster, ClusterPlan

    kinds = soak_kinds(kinds)
    scenario = soak_scenario(duration_s, seed, kinds)
    tmp = Path(tempfile.mkdtemp(prefix="kse-chaos-soak-"))
    data_dir = tmp / "kse"
    kwargs = scenario_plan_kwargs(scenario, seed, data_dir / "run")
    kwargs["scheduler_args"] = (*kwargs.get("scheduler_args", ()), *scheduler_args)
    kwargs["apiserver_args"] = (*kwargs.get("apiserver_args", ()), *SOAK_APISERVER_ARGS, *apiserver_args)
    kwargs["nodesim_args"] = (*kwargs.get("nodesim_args", ()), *nodesim_args)
    plan = ClusterPlan(data_dir=data_dir, **kwargs)
    drive = Drive.for_scenario(scenario, [], seed, say)
    cluster = Cluster(plan, progress=lambda m: drive.say(f"cluster: {m}"))  # t= from t=0 on
    chaos_dir = data_dir / "chaos" / "soak"
    guard = SafetyGuard()
    drive.guard = guard
    sampler = ResourceSampler(lambda: cluster.pids, SAMPLE_INTERVAL_S)
    counts = soak_counts(duration_s, kinds)
    say(
        f"soak: {duration_s:g}s, seed {seed}, {len(scenario.rounds)} faults ("
        + ", ".join(f"{n} {k}" for k, n in counts.items())
        + f"); data under {tmp}"
    )
    lease = plan.election.lease_duration
    background = TaskSet("soak")
    background.spawn(sampler.run(), name="soak-resources")
    driving = background.spawn(
        drive_cluster(cluster, drive, chaos_dir, lease_duration=lease), name="soak-drive"
    )
    try:
        while not driving.done():
            if guard.violation is not None:
                say(f"VIOLATION ({guard.violation.check}): {guard.violation.detail}; stopping the soak")
                await _snapshot_now(cluster, drive, chaos_dir, say)
                driving.cancel()
                break
            await asyncio.wait({driving}, timeout=0.5)
        try:
            history = await driving
        except asyncio.CancelledError:
            if guard.violation is None:
                raise
            history = await asyncio.to_thread(
                load_history, cluster.audit_logs, chaos_dir, plan.run_dir, since=None
            )
    finally:
        await background.aclose()  # the sampler, and the drive if a violation or Ctrl-C left it
    result = await asyncio.to_thread(
        check_scenario, scenario, history, lease_duration=lease, young_after=None
    )
    outcome_run = RunOutcome(scenario, seed, result, history, [], drive.errors, chaos_dir)
    resources = judge_leaks(list(sampler.series.values()), leak_policy or LeakPolicy())
    outcome = SoakOutcome(
        seed,
        duration_s,
        outcome_run,
        None if guard.violation is None else f"{guard.violation.check}: {guard.violation.detail}",
        resources,
        _injected_counts(drive, kinds),
        counts,
        data_dir=tmp,
        errors=list(drive.errors),
        series=list(sampler.series.values()),
    )
    if outcome.passed and not keep:
        shutil.rmtree(tmp, ignore_errors=True)
        outcome.data_dir = None
    else:
        say(f"kept {tmp}")
    say(f"soak: {'PASS' if outcome.passed else 'FAIL'}")
    return outcome
