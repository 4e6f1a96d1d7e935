"""The shape of a scheduler cluster, validated once: how many replicas, nodes, pods per second and
etcd members, and the leader election the replicas run.

`kse up`'s `ClusterPlan`, a chaos scenario's `cluster:` section (`chaos.scenario.ClusterSpec`) and
the failover benchmark all describe the same thing; each builds these two classes, whose
`__post_init__` refuses a bad shape with a `ShapeError` listing every problem, each naming its
field (`renew_deadline`, `replicas`, ...). Callers translate the field into their own words: the
`kse up` flag, the scenario's `cluster.<key>`.

The election rules are upstream's (client-go `leaderelection.NewLeaderElector`: leaseDuration >
renewDeadline > JitterFactor x retryPeriod, all positive) plus one of the Lease's: a lease shorter
than a second cannot be written, leaseDurationSeconds is whole seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from kse.leaderelection.config import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_LEASE_NAME,
    DEFAULT_LEASE_NAMESPACE,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    JITTER_FACTOR,
    ON_LOST_LEASE,
    STRATEGIES,
    Strategy,
)

__all__ = [
    "ON_LOST_LEASE",
    "STRATEGIES",
    "ClusterShape",
    "ElectionFlags",
    "ElectionPlan",
    "ShapeError",
    "ShapeProblem",
    "election_from_flags",
]


@dataclass(frozen=True)
class ShapeProblem:
    """One bad value: `field` is the attribute's name (`renew_deadline`), `message` says why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class ShapeError(ValueError):
    """A cluster or election shape that cannot run; `problems` lists every bad field."""

    def __init__(self, problems: list[ShapeProblem]) -> None:
        super().__init__("; ".join(map(str, problems)))
        self.problems = problems


def _number(out: list[ShapeProblem], name: str, value: object, what: str = "number of seconds") -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        out.append(ShapeProblem(name, f"must be a finite {what}, got {value!r}"))
        return False
    return True


def _integer(out: list[ShapeProblem], name: str, value: object, minimum: int) -> bool:
    if isinstance(value, bool) or not isinstance(value, int):
        out.append(ShapeProblem(name, f"must be an integer, got {value!r}"))
        return False
    if value < minimum:
        out.append(ShapeProblem(name, f"must be >= {minimum}, got {value}"))
        return False
    return True


@dataclass(frozen=True)
class ElectionPlan:
    """Leader election of the scheduler replicas (kube-scheduler's --leader-elect-* flags and kse's
    --leader-elect-strategy / --on-lost-lease). Defaults are kube-scheduler's."""

    strategy: str = Strategy.WATCH.value
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    lease_name: str = DEFAULT_LEASE_NAME
    lease_namespace: str = DEFAULT_LEASE_NAMESPACE
    on_lost_lease: str = "exit"

    def __post_init__(self) -> None:
        problems = self._problems()
        if problems:
            raise ShapeError(problems)

    def _problems(self) -> list[ShapeProblem]:
        out: list[ShapeProblem] = []
        if self.strategy not in STRATEGIES:
            out.append(
                ShapeProblem("strategy", f"must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
            )
        if self.on_lost_lease not in ON_LOST_LEASE:
            out.append(
                ShapeProblem(
                    "on_lost_lease", f"must be one of {', '.join(ON_LOST_LEASE)}, got {self.on_lost_lease!r}"
                )
            )
        for name, value in (("lease_name", self.lease_name), ("lease_namespace", self.lease_namespace)):
            if not isinstance(value, str) or not value:
                out.append(ShapeProblem(name, f"must be a non-empty string, got {value!r}"))
        lease, renew, retry = self.lease_duration, self.renew_deadline, self.retry_period
        numbers = [_number(out, n, v) for n, v in (("lease_duration", lease), ("renew_deadline", renew),
                                                    ("retry_period", retry))]  # fmt: skip
        if not all(numbers):
            return out
        if lease < 1:
            out.append(
                ShapeProblem(
                    "lease_duration", f"must be >= 1s (the Lease stores whole seconds), got {lease:g}s"
                )
            )
        if retry <= 0:
            out.append(ShapeProblem("retry_period", f"must be > 0, got {retry:g}s"))
        if renew >= lease:
            out.append(
                ShapeProblem("renew_deadline", f"must be < lease_duration ({lease:g}s), got {renew:g}s")
            )
        elif retry > 0 and renew <= JITTER_FACTOR * retry:
            # client-go leaderelection.go NewLeaderElector: renewDeadline > JitterFactor * retryPeriod
            out.append(
                ShapeProblem(
                    "retry_period",
                    f"must be < renew_deadline / {JITTER_FACTOR:g} (client-go's JitterFactor) = "
                    f"{renew / JITTER_FACTOR:g}s, got {retry:g}s",
                )
            )
        return out


@dataclass(frozen=True)
class ClusterShape:
    """How many of each process a cluster runs, and its election. `nodes` and `rate` may be 0 (a
    control plane without a fleet or a workload); etcd needs an odd member count for a quorum that
    survives the loss of a member."""

    replicas: int = 3
    nodes: int = 20
    rate: float = 20.0  # workload pods per second
    etcd_members: int = 1
    election: ElectionPlan = field(default_factory=ElectionPlan)

    def __post_init__(self) -> None:
        out: list[ShapeProblem] = []
        _integer(out, "replicas", self.replicas, 1)
        _integer(out, "nodes", self.nodes, 0)
        if _number(out, "rate", self.rate, "number of pods per second") and self.rate < 0:
            out.append(ShapeProblem("rate", f"must be >= 0, got {self.rate:g}"))
        if _integer(out, "etcd_members", self.etcd_members, 1) and self.etcd_members % 2 == 0:
            out.append(ShapeProblem("etcd_members", f"must be odd (a quorum), got {self.etcd_members}"))
        if not isinstance(self.election, ElectionPlan):
            out.append(
                ShapeProblem("election", f"must be an ElectionPlan, got {type(self.election).__name__}")
            )
        if out:
            raise ShapeError(out)

    # The election's values, flat (a scenario's `cluster:` section and the bench's flags are flat).

    @property
    def lease_duration(self) -> float:
        return self.election.lease_duration

    @property
    def renew_deadline(self) -> float:
        return self.election.renew_deadline

    @property
    def retry_period(self) -> float:
        return self.election.retry_period

    @property
    def strategy(self) -> str:
        return self.election.strategy

    @property
    def on_lost_lease(self) -> str:
        return self.election.on_lost_lease


class ElectionFlags(Protocol):
    """The values of the election flags (`kse.flags.election_args`, shared by `kse up` and `kse bench
    failover`): their argparse Namespace, or a config that keeps them flat under the same names."""

    @property
    def election(self) -> str: ...
    @property
    def lease_duration(self) -> float: ...
    @property
    def renew_deadline(self) -> float: ...
    @property
    def retry_period(self) -> float: ...
    @property
    def on_lost_lease(self) -> str: ...


def election_from_flags(values: ElectionFlags) -> ElectionPlan:
    """The ElectionPlan the election flags give (`--election` is the plan's `strategy`); raises
    ShapeError, naming the plan's fields (`kse.flags.election_args.in_flag_words` says the flags)."""
    return ElectionPlan(
        strategy=values.election,
        lease_duration=values.lease_duration,
        renew_deadline=values.renew_deadline,
        retry_period=values.retry_period,
        on_lost_lease=values.on_lost_lease,
    )
