"""The checker: judges a run's history (`chaos.history.History`) after the fact.

    history = History.load(run_dir)
    result = check(history, allow_pending=False)
    write_report(result, history, run_dir)       # report.json, report.md, timeline.png
    assert result.passed, to_markdown(result)

`check` runs every invariant (`chaos.checker.invariants`, keyed by name in `result.invariants`) and
the failover analysis (`chaos.checker.failover`). Everything here is a pure function of the history:
nothing talks to the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.checker.drain_invariants import (
    deployments_restored,
    evictions_within_budget,
    no_bind_to_cordoned,
    no_pdb_violation,
    replacements_bound_once,
)
from chaos.checker.etcd_invariants import audit_matches_etcd
from chaos.checker.failover import FailoverAnalysis, FailoverEvent, analyze_failover, percentile, summarize
from chaos.checker.invariants import (
    INVARIANTS,
    InvariantResult,
    no_overcommit,
    no_pod_vanished,
    no_rotation_rpc_errors,
    no_stale_writes,
    pods_bound_once,
    watch_integrity,
)
from chaos.checker.report import plot_timeline, to_json, to_markdown, write_report
from chaos.history import SCHEDULER_LEASE, SCHEDULER_USERS, History

__all__ = [
    "INVARIANTS",
    "CheckResult",
    "FailoverAnalysis",
    "FailoverEvent",
    "InvariantResult",
    "analyze_failover",
    "check",
    "check_run",
    "no_overcommit",
    "no_pod_vanished",
    "no_rotation_rpc_errors",
    "no_stale_writes",
    "percentile",
    "plot_timeline",
    "pods_bound_once",
    "summarize",
    "to_json",
    "to_markdown",
    "watch_integrity",
    "write_report",
]


def drain_invariants(history: History) -> dict[str, InvariantResult]:
    """The drain invariants (chaos.checker.drain_invariants) over a history; each skips without data."""
    return {
        "no_pdb_violation": no_pdb_violation(history.pod_states, history.pdbs, history.audit),
        "evictions_within_budget": evictions_within_budget(history.pod_states, history.pdbs, history.audit),
        "replacements_bound_once": replacements_bound_once(history.pod_states, history.audit),
        "no_bind_to_cordoned": no_bind_to_cordoned(history.pod_states, history.audit, history.cordons()),
        "deployments_restored": deployments_restored(history.deployments),
    }


@dataclass
class CheckResult:
    """Every invariant's result by name, and the failover analysis."""

    invariants: dict[str, InvariantResult]
    failover: FailoverAnalysis | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.invariants.values())

    def failed(self) -> list[str]:
        return [name for name, r in self.invariants.items() if not r.passed]

    def to_dict(self, max_violations: int | None = 100) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "invariants": {name: r.to_dict(max_violations) for name, r in self.invariants.items()},
            "failover": self.failover.to_dict() if self.failover is not None else None,
            "meta": dict(self.meta),
        }


def check(
    history: History,
    *,
    allow_pending: bool = False,
    lease: str = SCHEDULER_LEASE,
    lease_duration_s: float | None = None,
    scheduler_users: Iterable[str] = SCHEDULER_USERS,
    require_fence: bool | None = None,
    rotation_grace_s: float = 2.0,
    identities: Mapping[str, str] | None = None,
    young_after: float | None = None,
) -> CheckResult:
    """Run every invariant and the failover analysis over `history` (`young_after`: see
    `pods_bound_once`)."""
    invariants = {
        "pods_bound_once": pods_bound_once(history, allow_pending=allow_pending, young_after=young_after),
        "no_pod_vanished": no_pod_vanished(history),
        "no_overcommit": no_overcommit(history),
        "no_stale_writes": no_stale_writes(
            history, scheduler_users=scheduler_users, lease=lease, require_fence=require_fence
        ),
        "watch_integrity": watch_integrity(history),
        "no_rotation_rpc_errors": no_rotation_rpc_errors(history, grace_s=rotation_grace_s),
        **drain_invariants(history),
        "audit_matches_etcd": audit_matches_etcd(history),
    }
    failover = analyze_failover(
        history, lease=lease, lease_duration_s=lease_duration_s, identities=identities
    )
    span = history.time_range()
    meta: dict[str, Any] = {
        "audit_records": len(history.audit),
        "watch_records": len(history.watch),
        "faults": len(history.faults),
        "rpc_errors": len(history.rpc_errors),
        "start_ts": span[0] if span else None,
        "origin_ts": history.origin() if span else None,  # t=0 of every table and plot
        "end_ts": span[1] if span else None,
    }
    return CheckResult(invariants, failover, meta)


def check_run(run_dir: Path | str, **kwargs: Any) -> tuple[CheckResult, History]:
    """Load the history in `run_dir` and check it (keyword arguments as `check`)."""
    history = History.load(run_dir)
    return check(history, **kwargs), history
