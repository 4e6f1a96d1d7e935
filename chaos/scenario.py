"""Chaos scenarios: a YAML file says which cluster to start, which faults to inject when, and which
invariants to check afterwards.

    name: kill-leader
    description: SIGKILL the scheduler leader twice; a standby must take over, nothing unsafe.
    duration: 60                 # seconds of workload after the first leader is elected
    cluster:
      replicas: 3
      nodes: 20
      rate: 20                   # pods per second
      etcd_members: 1
      lease_duration: 15         # --leader-elect-lease-duration
      renew_deadline: 10
      retry_period: 2
      election: watch            # watch | poll
      on_lost_lease: exit        # exit | standby
    faults:                      # at fixed times (seconds from the start)...
      - {at: 15, fault: kill, target: leader}
      - {at: 35, fault: stop, target: leader, duration: 25}
    random:                      # ...and/or drawn from a seeded generator
      seed: 7                    # `kse chaos run --seed N` overrides it
      every: 10                  # one fault every 10 s, from t=every until the end
      faults: [{fault: kill, target: random-replica}]
    rounds:                      # ...and/or in order, each step once the one before is through
      repeat: 2
      steps:
        - {wait: stable-leader, jitter: 2}   # then a seeded delay in [0, 2) s
        - {fault: kill, target: leader}
        - {wait: new-leader}                 # another holder, and its first binds
        - {wait: recovered}                  # the killed replica restarted and ready
        - {wait: steady-throughput, rate: 16} # the leader binds >= 16 pods/s (over `window`: 2 s)
    checks: [pods_bound_once, no_pod_vanished, no_overcommit, no_stale_writes, watch_integrity]

The timed faults run for `duration`; the rounds run beside them, and the run ends once both are
through. Waits (`chaos.waits`; `within` s, default 60 + lease_duration, else the run fails):
`stable-leader` (every replica ready, a live holder binding pods, renewing on its cycle; `jitter`:
then a seeded delay in [0, jitter) s with the same holder), `new-leader` (after a fault on the
leader: another holder and its first binds), `recovered` (the replica the last fault hit is back and
ready; `expect: restarted | standby`). `kse bench failover` is such a generator (`failover_rounds`).

Faults (`chaos.nemesis`):

    kill        SIGKILL (a replica is restarted by its supervisor; an API server or etcd member is
                started again after `duration` s, default 0)
    term        SIGTERM (a leader releases its lease first); restarted as `kill`
    stop        SIGSTOP for `duration` s, then SIGCONT; `until: new-leader` keeps it stopped past
                `duration` until another replica holds the Lease (partition takes it too)
    restart     SIGTERM and start again (a replica at once, ready awaited; the API server or an etcd
                member after `duration` s)
    partition   a replica's link to the API server black-holed for `duration` s (`harness.proxy`);
                `mode: delay` + `delay: S` holds every byte back S s instead, `mode: loss` +
                `loss: P` loses a fraction P of the segments (each retransmitted after a timeout)
    rotate-leaf new key and certificate from the same CA for the target's identity (`certs.rotation`):
                a replica (by name, `leader`, `random-replica`), `apiserver` (its serving pair and its
                etcd client pair), `etcd` (etcd's serving pair) or `all`; `duration` s (default 3) is
                the window watched for RPC errors afterwards
    rotate-ca   a full CA rotation in Kubernetes' order: add (trust old + new), switch (every leaf
                reissued from the new CA), remove (trust only the new CA), `duration` s (default 3)
                between phases; etcd members, which read their trusted CA only at start, are
                restarted one at a time after add and after remove. Target `all` (the default).
    expire-cert a replica's client certificate reissued so that it expires in `duration` s (default 0:
                already expired); it cannot renew its lease, a replica with a valid certificate takes
                over once the lease expires. `heal_after` s (optional): a valid pair is issued again
    clock-skew  a replica's clock set `offset` s off (default 0) and running at `rate` (default 1;
                > 0), through its `--clock-skew-file`; removed again after `duration` s if given
    node-upgrade a rolling node upgrade (`chaos.node_upgrade`), target `nodes` (the default):
                `nodes` (how many, the first N by name; or a list of names), `batch` (default 1) at
                a time: cordon, drain as kubectl drain --force (evictions, retried while a budget
                says no; `grace` s as --grace-period, `timeout` s as --timeout), the batch's
                kubelets stopped for `duration` s (default 1) and started with a new
                kubeletVersion, the nodes Ready again, uncordon, then `pause` s (default 0)

Targets: `leader` (the replica holding the scheduler Lease when the fault fires), `standby` (a
seeded random replica that does not hold it), a replica by name (`scheduler-2`), `random-replica`
(seeded), `controller-manager-leader` (the `kse controller-manager` replica holding
kube-system/kube-controller-manager; kill, term, stop, partition), `apiserver`, `etcd` (a seeded
random member),
`etcd-leader`, a member by name (`etcd-1`), and `all` (rotate-leaf, rotate-ca). rotate-*, expire-cert
and clock-skew do not scale with the lease in `--short`: rotation steps are bound by the time
processes take to reload files (about a second), not by the lease.

`cluster:` also takes `controller_managers` (`kse controller-manager` replicas, default 2) and
`deployments`, a workload created (and every pod available) before t=0 and left running:

    deployments:
      - {name: web, replicas: 4, pdb: {minAvailable: 3}}     # or maxUnavailable; N or "N%"
      - {name: api, replicas: 3}                             # no budget

`load_scenario(path)` / `parse_scenario(data)` raise `ScenarioError` naming the offending field
(`faults[1].target: ...`). `Scenario.short()` is the scaled-down form CI runs (`--short`).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from harness.shape import ClusterShape, ElectionPlan, ShapeError

__all__ = [
    "CHECKS",
    "FAULTS",
    "SCENARIOS_DIR",
    "TARGETS",
    "WAITS",
    "ClusterSpec",
    "DeploymentSpec",
    "FaultSpec",
    "RandomFaults",
    "Round",
    "Scenario",
    "ScenarioError",
    "Step",
    "WaitSpec",
    "find_scenario",
    "load_scenario",
    "parse_scenario",
]

SCENARIOS_DIR = Path(__file__).resolve().parents[1] / "scenarios"

PARTITION_MODES: tuple[str, ...] = ("blackhole", "delay", "delay-up", "loss")
# What a window fault (stop, partition) may wait for before it ends, beyond its duration.
UNTIL: tuple[str, ...] = ("new-leader",)
FAULTS: tuple[str, ...] = (
    "kill",
    "term",
    "stop",
    "restart",
    "partition",
    "rotate-leaf",
    "rotate-ca",
    "expire-cert",
    "clock-skew",
    "node-upgrade",
)
NODE_UPGRADE = "node-upgrade"
NODES_TARGET = "nodes"  # node-upgrade's only target (and its default)
NODE_UPGRADE_KEYS: tuple[str, ...] = ("nodes", "batch", "pause", "grace", "timeout")
# Fixed target names; besides these: scheduler-N, etcd-N.
TARGETS: tuple[str, ...] = ("leader", "standby", "random-replica", "apiserver", "etcd", "etcd-leader", "all")
TARGETS += ("controller-manager-leader",)
REPLICA_TARGETS: tuple[str, ...] = ("leader", "standby", "random-replica")  # and scheduler-N
# The controller-manager replica holding kube-system/kube-controller-manager when the fault fires.
CONTROLLER_MANAGER_LEADER = "controller-manager-leader"
CONTROLLER_MANAGER_FAULTS: tuple[str, ...] = ("kill", "term", "stop", "partition")
ROTATION_STEP_S = 3.0  # rotate-leaf's watched window, rotate-ca's pause between phases (default)
_REPLICA = re.compile(r"^scheduler-\d+$")
_ETCD_MEMBER = re.compile(r"^etcd-\d+$")
CHECKS: tuple[str, ...] = (
    "pods_bound_once",
    "no_pod_vanished",
    "no_overcommit",
    "no_stale_writes",
    "watch_integrity",
    "no_rotation_rpc_errors",
    # the drain invariants (chaos.checker.drain_invariants)
    "no_pdb_violation",
    "evictions_within_budget",
    "replacements_bound_once",
    "no_bind_to_cordoned",
    "deployments_restored",
    # the audit log against etcd's own history (chaos.checker.etcd_invariants)
    "audit_matches_etcd",
)
DEFAULT_CHECKS: tuple[str, ...] = (*CHECKS[:5], "audit_matches_etcd")

# --short: what CI runs.
SHORT_LEASE = (2.0, 1.5, 0.5)  # lease duration, renew deadline, retry period
SHORT_NODES = 5
SHORT_RATE = 5.0
SHORT_DURATION = (10.0, 20.0)  # the scaled duration is clamped into this range


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the file and the field."""


# A scenario's `cluster:` section is the shared cluster shape (validated there, once); its YAML keys
# are flat: `election` is the strategy, the lease values are the election's.
ClusterSpec = ClusterShape
CLUSTER_KEYS: tuple[str, ...] = (
    "replicas",
    "nodes",
    "rate",
    "etcd_members",
    "lease_duration",
    "renew_deadline",
    "retry_period",
    "election",
    "on_lost_lease",
)
_SHAPE_KEY = {"strategy": "election"}  # a shape field -> its key in `cluster:` (the rest are equal)


@dataclass(frozen=True)
class FaultSpec:
    """One fault: `fault` on `target` at `at` s (None inside `random:`), lasting `duration` s (`stop`:
    the pause; an API server or etcd member killed / terminated: the time it stays down; rotate-*:
    the step; expire-cert: the certificate's remaining life; clock-skew: how long it lasts).
    `offset` / `rate`: clock-skew's; `heal_after`: expire-cert's."""

    fault: str
    target: str
    at: float | None = None
    duration: float | None = None
    offset: float | None = None
    rate: float | None = None
    heal_after: float | None = None
    # partition's: "blackhole" (default), "delay" (every byte `delay` s late), "delay-up" (only the
    # bytes towards the API server: the zombie leader) or "loss" (a fraction
    # `loss` of the segments lost and retransmitted, see harness.proxy)
    mode: str | None = None
    delay: float | None = None
    loss: float | None = None
    # stop / partition: "new-leader" keeps the fault on past `duration` until another replica holds
    # the Lease (a paused leader woken before anyone took over would just renew: no failover)
    until: str | None = None
    # node-upgrade's: how many nodes (the first N by name) or which, per batch, the pause after
    # each batch, the drain's --grace-period and --timeout (None: the pods' own, no limit)
    nodes: int | tuple[str, ...] | None = None
    batch: int | None = None
    pause: float | None = None
    grace: int | None = None
    timeout: float | None = None
    # False: cordon and drain only (`kse bench drain`; not a scenario field): no kubelet restart,
    # no uncordon, no pause
    upgrade_kubelets: bool = True

    def describe(self, *, planned_time: bool = True) -> str:
        """One line for people; `planned_time=False` leaves out the planned `t=` (console lines
        carry the real time of the run)."""
        when = f"t={self.at:g}s " if self.at is not None and planned_time else ""
        lasting = f" for {self.duration:g}s" if self.duration is not None else ""
        extra = ""
        if self.offset is not None:
            extra += f" offset {self.offset:+g}s"
        if self.rate is not None:
            extra += f" rate {self.rate:g}"
        if self.heal_after is not None:
            extra += f" healed after {self.heal_after:g}s"
        if self.mode is not None:
            extra += f" {self.mode}"
        if self.delay is not None:
            extra += f" {self.delay * 1000:g}ms"
        if self.loss is not None:
            extra += f" {self.loss:.0%} loss"
        if self.until is not None:
            extra += f" (and until a {self.until})"
        if self.fault == NODE_UPGRADE:
            which = f"{self.nodes}" if isinstance(self.nodes, int) else ",".join(self.nodes or ())
            extra += f" {which} in batches of {self.batch or 1}, pause {self.pause or 0:g}s"
        return f"{when}{self.fault} {self.target}{lasting}{extra}"


# Waits (`chaos.waits`): steps of a sequential generator that hold the run until the cluster is in
# a state, failing the run when it does not get there `within` s.
STABLE_LEADER = "stable-leader"  # every replica ready, a live holder, binds under its term, renewing
NEW_LEADER = "new-leader"  # after a fault on the leader: another holder, and its first binds
RECOVERED = "recovered"  # the replica the last fault hit is back (restarted, or a standby) and ready
RESTARTED = "restarted"  # recovered: running again under a new identity (a new process)
STANDBY = "standby"  # recovered: the same process, no longer leading
# the Lease holder binds at `rate` pods/s or more, counted over the last `window` s of the audit log
STEADY_THROUGHPUT = "steady-throughput"
WAITS: tuple[str, ...] = (STABLE_LEADER, NEW_LEADER, RECOVERED, STEADY_THROUGHPUT)


@dataclass(frozen=True)
class WaitSpec:
    """One wait: hold the run until `wait` holds, at most `within` s. `jitter` (stable-leader only):
    then a seeded random delay in [0, jitter) s, after which the same leader must still hold the
    Lease (else the wait starts over), so that the next fault lands anywhere in a renew cycle."""

    wait: str
    within: float = 60.0
    jitter: float = 0.0
    expect: str | None = None  # recovered only: "restarted" or "standby" (None: either)
    rate: float = 0.0  # steady-throughput only: binds per second to reach
    window: float = 2.0  # steady-throughput only: the span they are counted over

    def describe(self) -> str:
        return f"wait for {self.wait.replace('-', ' ')}"


Step = FaultSpec | WaitSpec


@dataclass(frozen=True)
class DeploymentSpec:
    """One Deployment of the scenario's workload (namespace default), with an optional budget:
    `min_available` / `max_unavailable` an int or a percentage string, at most one of them."""

    name: str
    replicas: int
    min_available: int | str | None = None
    max_unavailable: int | str | None = None

    @property
    def has_pdb(self) -> bool:
        return self.min_available is not None or self.max_unavailable is not None


@dataclass(frozen=True)
class Round:
    """A sequential generator's unit (a failover trial): steps run one after the other, each once
    the previous one is through. `label` names it in progress lines and errors ("trial 2/3")."""

    label: str
    steps: tuple[Step, ...]
    # Not started before this many seconds after t=0 (a soak spreads its rounds over its duration).
    not_before: float = 0.0


@dataclass(frozen=True)
class RandomFaults:
    seed: int
    every: float
    faults: tuple[FaultSpec, ...]

    def expand(self, duration: float, seed: int | None = None) -> list[FaultSpec]:
        """One fault every `every` s from t=`every` while before `duration`, each drawn from
        `faults` by a generator seeded with `seed` (default: the scenario's)."""
        rng = random.Random(self.seed if seed is None else seed)
        out = []
        n = 1
        while n * self.every < duration:
            pick = rng.choice(self.faults)
            out.append(replace(pick, at=round(n * self.every, 3)))
            n += 1
        return out


@dataclass(frozen=True)
class Scenario:
    name: str
    duration: float
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    faults: tuple[FaultSpec, ...] = ()
    random: RandomFaults | None = None
    checks: tuple[str, ...] = DEFAULT_CHECKS
    description: str = ""
    allow_pending: bool = False
    source: str = ""
    rounds: tuple[Round, ...] = ()  # sequential, beside the timed faults (`rounds:`)
    # `cluster.controller_managers` (None: the cluster's default) and `cluster.deployments`
    controller_managers: int | None = None
    deployments: tuple[DeploymentSpec, ...] = ()

    @property
    def seed(self) -> int:
        return self.random.seed if self.random is not None else 0

    def schedule(self, seed: int | None = None) -> list[FaultSpec]:
        """Every fault of the run with its time, in time order (random ones drawn with `seed`)."""
        out = list(self.faults)
        if self.random is not None:
            out += self.random.expand(self.duration, seed)
        return sorted(out, key=lambda f: f.at or 0.0)

    def all_faults(self) -> list[FaultSpec]:
        """Every fault the scenario may inject: timed, random candidates and the rounds' steps."""
        rounds = [step for r in self.rounds for step in r.steps if isinstance(step, FaultSpec)]
        return [*self.faults, *(self.random.faults if self.random else ()), *rounds]

    @property
    def partitions(self) -> bool:
        """Whether the run needs a proxy in front of each replica."""
        return any(f.fault == "partition" for f in self.all_faults())

    @property
    def clock_skew(self) -> bool:
        """Whether the run needs a clock-skew file per replica (`kse scheduler --clock-skew-file`)."""
        return any(f.fault == "clock-skew" for f in self.all_faults())

    @property
    def node_upgrades(self) -> bool:
        """Whether the run stops and starts kubelets (nodesim gets a `--control-file`)."""
        return any(f.fault == NODE_UPGRADE for f in self.all_faults())

    @property
    def default_stop(self) -> float:
        """A `stop` / `partition` without a duration: past the lease (leaseDuration + retryPeriod + 1 s)."""
        return self.cluster.lease_duration + self.cluster.retry_period + 1.0

    def short(self) -> Scenario:
        """Scaled down for CI: a 2 s lease (1.5 s renew deadline, 0.5 s retry), at most 5 nodes and
        5 pods/s, and the run shortened by the lease's ratio (clamped to 10-20 s). Fault times and
        `every` scale with the run; fault durations with the lease, so a pause that outlasts the
        lease still does, and so does expire-cert's `heal_after` and a delay-up partition's `delay`
        (a zombie's writes must still land after the lease). Not scaled: rotate-leaf and
        rotate-ca steps (bound by the ~1 s it takes processes to reload files, not by the lease),
        expire-cert's remaining life, and clock-skew's offset and rate; a clock-skew `duration`
        scales with the run."""
        c = self.cluster
        lease_f = SHORT_LEASE[0] / c.lease_duration
        lo, hi = SHORT_DURATION
        duration = (
            min(max(self.duration * lease_f, lo), hi, self.duration) if self.duration > lo else self.duration
        )
        time_f = duration / self.duration

        def scale(f: FaultSpec) -> FaultSpec:
            d = f.duration
            if d is None and f.fault in ("stop", "partition"):
                d = self.default_stop
            if d is None or f.fault in ("rotate-leaf", "rotate-ca", "expire-cert", NODE_UPGRADE):
                pass  # node-upgrade's: a kubelet's downtime, bound by a restart, not by the lease
            elif f.fault == "clock-skew":
                d = round(max(d * time_f, 1.0), 3)
            else:
                d = round(max(d * lease_f, 0.1), 3)
            heal = f.heal_after
            if heal is not None:
                heal = round(max(heal * lease_f, SHORT_LEASE[0] + 1.0), 3)
            delay = f.delay
            if delay is not None and f.mode == "delay-up":
                delay = round(max(delay * lease_f, 0.1), 3)  # a zombie's delay outlasts the lease
            nodes = f.nodes
            if isinstance(nodes, int):
                nodes = min(nodes, SHORT_NODES)
            return replace(
                f,
                at=None if f.at is None else round(f.at * time_f, 3),
                duration=d,
                heal_after=heal,
                delay=delay,
                nodes=nodes,
                pause=None if f.pause is None else round(f.pause * time_f, 3),
            )

        rnd = None
        if self.random is not None:
            r = self.random
            rnd = replace(r, every=max(round(r.every * time_f, 3), 1.0), faults=tuple(map(scale, r.faults)))

        def scale_step(step: Step) -> Step:
            if isinstance(step, FaultSpec):
                return scale(step)
            return replace(step, jitter=round(step.jitter * lease_f, 3))  # a fraction of a renew cycle

        rounds = tuple(replace(r, steps=tuple(map(scale_step, r.steps))) for r in self.rounds)
        return replace(
            self,
            duration=round(duration, 3),
            cluster=replace(
                c,
                nodes=min(c.nodes, SHORT_NODES),
                rate=min(c.rate, SHORT_RATE),
                election=replace(
                    c.election,
                    lease_duration=SHORT_LEASE[0],
                    renew_deadline=SHORT_LEASE[1],
                    retry_period=SHORT_LEASE[2],
                ),
            ),
            faults=tuple(map(scale, self.faults)),
            random=rnd,
            rounds=rounds,
        )


# ---------------------------------------------------------------------------------------------- loading


def find_scenario(name_or_path: str) -> Path:
    """A path as given, or a scenario by name from `scenarios/` (`kill-leader`)."""
    p = Path(name_or_path)
    if p.exists():
        return p
    for cand in (SCENARIOS_DIR / name_or_path, SCENARIOS_DIR / f"{name_or_path}.yaml"):
        if cand.exists():
            return cand
    known = ", ".join(sorted(q.stem for q in SCENARIOS_DIR.glob("*.yaml")))
    raise ScenarioError(f"no scenario {name_or_path!r} (not a file; known: {known})")


def load_scenario(path: Path | str) -> Scenario:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ScenarioError(f"{p}: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise ScenarioError(f"{p}: not valid YAML: {e}") from e
    return parse_scenario(data, source=str(p))


class _Fields:
    """Reads one mapping, naming the field in every error and refusing unknown keys."""

    def __init__(self, data: object, where: str, source: str) -> None:
        self.where = where
        self.source = source
        if not isinstance(data, Mapping):
            self.fail("", f"must be a mapping, got {_kind(data)}")
        self.data: Mapping[str, Any] = data  # type: ignore[assignment]

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where and key else (self.where or key)

    def fail(self, key: str, message: str) -> None:
        prefix = f"{self.source}: " if self.source else ""
        raise ScenarioError(f"{prefix}{self.path(key) or 'scenario'}: {message}")

    def unknown(self, known: tuple[str, ...]) -> None:
        for k in self.data:
            if k not in known:
                self.fail(str(k), f"unknown field (known: {', '.join(known)})")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def number(
        self, key: str, default: float | None = None, *, minimum: float | None = 0.0, strict: bool = True
    ) -> float:
        """A finite number; > `minimum` (>= with `strict=False`; None: any, the caller judges it)."""
        v = self.data.get(key)
        if v is None:
            if default is None:
                self.fail(key, "required")
            return float(default)  # type: ignore[arg-type]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            self.fail(key, f"must be a number of seconds, got {v!r}")
        if minimum is not None and ((strict and v <= minimum) or (not strict and v < minimum)):
            self.fail(key, f"must be {'>' if strict else '>='} {minimum:g}, got {v!r}")
        return float(v)

    def integer(self, key: str, default: int, *, minimum: int | None = None) -> int:
        """An integer, >= `minimum` (None: any, the caller judges it)."""
        v = self.data.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(key, f"must be an integer, got {v!r}")
        if minimum is not None and v < minimum:
            self.fail(key, f"must be >= {minimum}, got {v}")
        return int(v)

    def string(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        v = self.data.get(key)
        if v is None:
            if default is None:
                self.fail(key, "required")
            return default  # type: ignore[return-value]
        if not isinstance(v, str) or not v:
            self.fail(key, f"must be a non-empty string, got {v!r}")
        if choices and v not in choices:
            self.fail(key, f"must be one of {', '.join(choices)}, got {v!r}")
        return str(v)

    def list(self, key: str) -> list[Any]:
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            self.fail(key, f"must be a list, got {_kind(v)}")
        return list(v)


def _kind(v: object) -> str:
    return "nothing" if v is None else type(v).__name__


SCENARIO_FIELDS = (
    "name", "description", "duration", "cluster", "faults", "random", "rounds", "checks", "allow_pending",
)  # fmt: skip


def parse_scenario(data: object, *, source: str = "") -> Scenario:
    top = _Fields(data, "", source)
    top.unknown(SCENARIO_FIELDS)
    name = top.string("name")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        top.fail("name", f"must be letters, digits, '.', '_' or '-', got {name!r}")
    duration = top.number("duration")
    description = top.string("description", "")
    allow_pending = top.data.get("allow_pending", False)
    if not isinstance(allow_pending, bool):
        top.fail("allow_pending", f"must be true or false, got {allow_pending!r}")

    cluster_data = top.data.get("cluster")
    cluster = _parse_cluster(cluster_data, source)
    controller_managers, deployments = _parse_workload(cluster_data, source)
    faults = tuple(
        _parse_fault(f, f"faults[{i}]", source, cluster, duration=duration)
        for i, f in enumerate(top.list("faults"))
    )
    rnd = _parse_random(top.data["random"], source, cluster) if top.has("random") else None
    rounds = _parse_rounds(top.data["rounds"], source, cluster) if top.has("rounds") else ()
    if not faults and rnd is None and not rounds:
        top.fail("faults", "a scenario needs faults (a `faults` list, a `random` or a `rounds` section)")

    checks = top.list("checks") if "checks" in top.data else list(DEFAULT_CHECKS)
    if not checks:
        top.fail("checks", "must name at least one invariant")
    for i, c in enumerate(checks):
        if c not in CHECKS:
            top.fail(f"checks[{i}]", f"unknown invariant {c!r} (known: {', '.join(CHECKS)})")
    if len(set(checks)) != len(checks):
        top.fail("checks", "names an invariant twice")
    return Scenario(
        name=name,
        duration=duration,
        cluster=cluster,
        faults=faults,
        random=rnd,
        checks=tuple(checks),
        description=description,
        allow_pending=allow_pending,
        source=source,
        rounds=rounds,
        controller_managers=controller_managers,
        deployments=deployments,
    )


def _parse_cluster(data: object, source: str) -> ClusterSpec:
    """Types are read here (each error naming `cluster.<key>`); the values are judged by the shape."""
    if data is None:
        return ClusterSpec()
    f = _Fields(data, "cluster", source)
    f.unknown((*CLUSTER_KEYS, *WORKLOAD_KEYS))
    d = ClusterSpec()
    try:
        return ClusterSpec(
            replicas=f.integer("replicas", d.replicas),
            nodes=f.integer("nodes", d.nodes, minimum=1),  # a chaos run needs somewhere to bind
            rate=f.number("rate", d.rate),  # > 0: the invariants are judged on the workload's pods
            etcd_members=f.integer("etcd_members", d.etcd_members),
            election=ElectionPlan(
                strategy=f.string("election", d.strategy),
                lease_duration=f.number("lease_duration", d.lease_duration, minimum=None),
                renew_deadline=f.number("renew_deadline", d.renew_deadline, minimum=None),
                retry_period=f.number("retry_period", d.retry_period, minimum=None),
                on_lost_lease=f.string("on_lost_lease", d.on_lost_lease),
            ),
        )
    except ShapeError as e:
        first = e.problems[0]
        f.fail(_SHAPE_KEY.get(first.field, first.field), first.message)
        raise  # not reached: fail() raises


WORKLOAD_KEYS: tuple[str, ...] = ("controller_managers", "deployments")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_PERCENT = re.compile(r"^[0-9]+%$")


def _parse_workload(data: object, source: str) -> tuple[int | None, tuple[DeploymentSpec, ...]]:
    """`cluster.controller_managers` and `cluster.deployments` (the mapping itself was judged by
    `_parse_cluster`)."""
    if data is None:
        return None, ()
    f = _Fields(data, "cluster", source)
    cms = f.integer("controller_managers", 0, minimum=0) if f.has("controller_managers") else None
    out: list[DeploymentSpec] = []
    for i, item in enumerate(f.list("deployments")):
        d = _Fields(item, f"cluster.deployments[{i}]", source)
        d.unknown(("name", "replicas", "pdb"))
        name = d.string("name")
        if not _DNS_LABEL.match(name):
            d.fail("name", f"must be a DNS-1123 label (lower-case letters, digits, '-'), got {name!r}")
        if any(o.name == name for o in out):
            d.fail("name", f"a second deployment named {name!r}")
        replicas = d.integer("replicas", 1, minimum=1)
        min_available = max_unavailable = None
        if d.has("pdb"):
            b = _Fields(d.data["pdb"], f"cluster.deployments[{i}].pdb", source)
            b.unknown(("minAvailable", "maxUnavailable"))
            if b.has("minAvailable") == b.has("maxUnavailable"):
                b.fail("", "needs exactly one of minAvailable and maxUnavailable")
            key = "minAvailable" if b.has("minAvailable") else "maxUnavailable"
            v = b.data[key]
            if isinstance(v, bool) or not (
                (isinstance(v, int) and v >= 0) or (isinstance(v, str) and _PERCENT.match(v))
            ):
                b.fail(key, f"must be an integer >= 0 or a percentage like '50%', got {v!r}")
            if key == "minAvailable":
                min_available = v
            else:
                max_unavailable = v
        out.append(DeploymentSpec(name, replicas, min_available, max_unavailable))
    if out and cms == 0:
        f.fail("controller_managers", "deployments need a controller-manager (>= 1), got 0")
    return cms, tuple(out)


def _parse_node_upgrade(f: _Fields, cluster: ClusterSpec) -> dict[str, Any]:
    """node-upgrade's own fields (`NODE_UPGRADE_KEYS`), as FaultSpec keyword arguments."""
    nodes: int | tuple[str, ...]
    raw = f.data.get("nodes")
    if raw is None:
        f.fail("nodes", "required: how many nodes to upgrade, or a list of node names")
    if isinstance(raw, list):
        if not raw or not all(isinstance(n, str) and n for n in raw):
            f.fail("nodes", f"a list of node names must list non-empty strings, got {raw!r}")
        if len(set(raw)) != len(raw):
            f.fail("nodes", "names a node twice")
        nodes = tuple(raw)
    else:
        nodes = f.integer("nodes", 0, minimum=1)
        if nodes > cluster.nodes:
            f.fail("nodes", f"the cluster has {cluster.nodes} nodes (cluster.nodes), got {nodes}")
    return {
        "nodes": nodes,
        "batch": f.integer("batch", 1, minimum=1),
        "pause": f.number("pause", 0.0, strict=False),
        "grace": f.integer("grace", 0, minimum=0) if f.has("grace") else None,
        "timeout": f.number("timeout", None) if f.has("timeout") else None,
    }


def _parse_fault(
    data: object, where: str, source: str, cluster: ClusterSpec, *, duration: float | None
) -> FaultSpec:
    f = _Fields(data, where, source)
    timed = duration is not None
    fields: tuple[str, ...] = ("fault", "target", "duration", "offset", "rate", "heal_after", "mode")
    fields += ("delay", "loss", "until", *NODE_UPGRADE_KEYS)
    f.unknown(("at", *fields) if timed else fields)
    fault = f.string("fault", None, FAULTS)
    default_target = {"rotate-ca": "all", NODE_UPGRADE: NODES_TARGET}.get(fault)
    target = f.string("target", default_target)
    upgrade: dict[str, Any] = {}
    if fault == NODE_UPGRADE:
        if target != NODES_TARGET:
            f.fail("target", f"a node-upgrade's target is `{NODES_TARGET}` (which: `nodes`), got {target!r}")
        upgrade = _parse_node_upgrade(f, cluster)
    else:
        for key in NODE_UPGRADE_KEYS:
            if f.has(key):
                f.fail(key, f"only node-upgrade faults take `{key}`")
    if target == NODES_TARGET and fault != NODE_UPGRADE:
        f.fail("target", f"`{NODES_TARGET}` is the target of node-upgrade only, not of {fault}")
    if fault == NODE_UPGRADE:
        pass
    elif target not in TARGETS and not _REPLICA.match(target) and not _ETCD_MEMBER.match(target):
        f.fail("target", f"must be one of {', '.join(TARGETS)}, scheduler-N or etcd-N, got {target!r}")
    m = _REPLICA.match(target)
    if m and int(target.split("-")[1]) not in range(1, cluster.replicas + 1):
        f.fail("target", f"no replica {target!r} (cluster.replicas is {cluster.replicas}: scheduler-1..)")
    if _ETCD_MEMBER.match(target) and int(target.split("-")[1]) >= cluster.etcd_members:
        f.fail(
            "target", f"no etcd member {target!r} (cluster.etcd_members is {cluster.etcd_members}: etcd-0..)"
        )
    replica = bool(m) or target in REPLICA_TARGETS
    if target == CONTROLLER_MANAGER_LEADER and fault not in CONTROLLER_MANAGER_FAULTS:
        f.fail(
            "target",
            f"the controller-manager leader takes {', '.join(CONTROLLER_MANAGER_FAULTS)}, not {fault}",
        )
    if fault == "partition" and not replica and target != CONTROLLER_MANAGER_LEADER:
        f.fail("target", "a partition cuts a scheduler replica off the API server: target a replica")
    if fault in ("expire-cert", "clock-skew") and not replica:
        f.fail(
            "target", f"{fault} applies to a scheduler replica (leader, standby, random-replica, scheduler-N)"
        )
    if fault == "rotate-leaf" and (target == "etcd-leader" or _ETCD_MEMBER.match(target)):
        f.fail("target", "etcd members share one serving pair: rotate-leaf target `etcd` rotates it")
    if fault == "rotate-ca" and target != "all":
        f.fail("target", f"a CA rotation reissues every leaf: target must be `all`, got {target!r}")
    if target == "all" and fault not in ("rotate-leaf", "rotate-ca"):
        f.fail("target", f"`all` is a target of rotate-leaf and rotate-ca only, not of {fault}")
    at = None
    if timed:
        assert duration is not None
        at = f.number("at", None, strict=False)
        if at >= duration:
            f.fail("at", f"must be before the end of the run (duration {duration:g}), got {at:g}")
    d = f.number("duration", None, strict=False) if f.has("duration") else None
    if d is not None and fault == "restart" and (replica or target == "all"):
        f.fail("duration", "a replica's restart has no duration (it starts again at once)")
    if d is not None and fault in ("kill", "term") and (replica or target == CONTROLLER_MANAGER_LEADER):
        f.fail("duration", "a killed or terminated replica is restarted by its supervisor; no duration")
    if d is not None and d <= 0 and fault in ("rotate-leaf", "rotate-ca", "clock-skew"):
        f.fail("duration", f"must be > 0, got {d:g}")
    offset = rate = heal_after = None
    for key, only in (("offset", "clock-skew"), ("rate", "clock-skew"), ("heal_after", "expire-cert")):
        if f.has(key) and fault != only:
            f.fail(key, f"only {only} faults take `{key}`")
    if fault == "clock-skew":
        if f.has("offset"):
            v = f.data["offset"]
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                f.fail("offset", f"must be a number of seconds (negative: behind), got {v!r}")
            offset = float(v)
        rate = f.number("rate", None) if f.has("rate") else None
        if offset is None and rate is None:
            f.fail("offset", "a clock-skew needs an `offset` (seconds) or a `rate` (e.g. 1.5), or both")
    if fault == "expire-cert" and f.has("heal_after"):
        heal_after = f.number("heal_after", None)
    mode, delay, loss = _parse_partition_mode(f, fault)
    until = None
    if f.has("until"):
        if fault not in ("stop", "partition"):
            f.fail("until", "only stop and partition faults take `until` (the others do not last)")
        until = f.string("until", None, UNTIL)
    return FaultSpec(
        fault=fault,
        target=target,
        at=at,
        duration=d,
        offset=offset,
        rate=rate,
        heal_after=heal_after,
        mode=mode,
        delay=delay,
        loss=loss,
        until=until,
        **upgrade,
    )


def _parse_partition_mode(f: _Fields, fault: str) -> tuple[str | None, float | None, float | None]:
    """A partition's `mode` and its `delay` (seconds) / `loss` (a fraction in (0, 1])."""
    for key in ("mode", "delay", "loss"):
        if f.has(key) and fault != "partition":
            f.fail(key, f"only partition faults take `{key}`")
    if fault != "partition":
        return None, None, None
    mode = f.string("mode", "blackhole", PARTITION_MODES)
    delay = f.number("delay", None) if f.has("delay") else None
    loss = None
    if f.has("loss"):
        loss = f.number("loss", None)
        if loss > 1:
            f.fail("loss", f"a fraction of the segments, in (0, 1], got {loss:g}")
    if mode == "blackhole" and (delay is not None or loss is not None):
        f.fail(
            "mode",
            "a blackhole partition forwards nothing: `delay` and `loss` need mode delay, delay-up or loss",
        )
    if mode in ("delay", "delay-up") and delay is None:
        f.fail("delay", "a delay partition needs `delay` (seconds each byte is held back, e.g. 0.2)")
    if mode in ("delay", "delay-up") and loss is not None:
        f.fail("loss", "`loss` goes with mode loss")
    if mode == "loss" and loss is None:
        f.fail("loss", "a loss partition needs `loss` (the fraction of segments lost, e.g. 0.3)")
    if mode == "loss" and delay is not None:
        f.fail("delay", "`delay` goes with mode delay")
    return mode, delay, loss


def _parse_random(data: object, source: str, cluster: ClusterSpec) -> RandomFaults:
    f = _Fields(data, "random", source)
    f.unknown(("seed", "every", "faults"))
    seed = f.integer("seed", 0, minimum=0)
    every = f.number("every")
    items = f.list("faults")
    if not items:
        f.fail("faults", "must list at least one fault to draw from")
    faults = tuple(
        _parse_fault(x, f"random.faults[{i}]", source, cluster, duration=None) for i, x in enumerate(items)
    )
    return RandomFaults(seed=seed, every=every, faults=faults)


def _parse_rounds(data: object, source: str, cluster: ClusterSpec) -> tuple[Round, ...]:
    """`rounds: {repeat: N, steps: [...]}`: the steps N times in a row, each step once the one
    before it is through; a step is a fault (as in `random.faults`: no `at`) or a wait."""
    f = _Fields(data, "rounds", source)
    f.unknown(("repeat", "steps"))
    repeat = f.integer("repeat", 1, minimum=1)
    items = f.list("steps")
    if not items:
        f.fail("steps", "must list at least one step (a fault or a wait)")
    steps: list[Step] = []
    for i, item in enumerate(items):
        where = f"rounds.steps[{i}]"
        if isinstance(item, Mapping) and "wait" in item:
            steps.append(_parse_wait(item, where, source, cluster))
        else:
            steps.append(_parse_fault(item, where, source, cluster, duration=None))
    return tuple(Round(f"round {n}/{repeat}", tuple(steps)) for n in range(1, repeat + 1))


def _parse_wait(data: object, where: str, source: str, cluster: ClusterSpec) -> WaitSpec:
    f = _Fields(data, where, source)
    f.unknown(("wait", "within", "jitter", "expect", "rate", "window"))
    wait = f.string("wait", None, WAITS)
    if f.has("jitter") and wait != STABLE_LEADER:
        f.fail("jitter", f"only a {STABLE_LEADER} wait takes `jitter` (a delay before the next fault)")
    if f.has("expect") and wait != RECOVERED:
        f.fail("expect", f"only a {RECOVERED} wait takes `expect`")
    for key in ("rate", "window"):
        if f.has(key) and wait != STEADY_THROUGHPUT:
            f.fail(key, f"only a {STEADY_THROUGHPUT} wait takes `{key}`")
    if wait == STEADY_THROUGHPUT and not f.has("rate"):
        f.fail("rate", f"a {STEADY_THROUGHPUT} wait needs `rate` (binds per second to reach)")
    return WaitSpec(
        wait=wait,
        within=f.number("within", 60.0 + cluster.lease_duration),
        jitter=f.number("jitter", 0.0, strict=False),
        expect=f.string("expect", None, (RESTARTED, STANDBY)) if f.has("expect") else None,
        rate=f.number("rate", 0.0) if f.has("rate") else 0.0,
        window=f.number("window", 2.0) if f.has("window") else 2.0,
    )
