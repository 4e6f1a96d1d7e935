"""Failover timings, from the lease history (the audit log's lease writes) and the nemesis' faults.

For every fault of a kind in `LEADER_FAULTS` that hit the replica holding the scheduler lease at the
fault's time (the replica is named by the fault's detail["identity"], else `identities[target]`,
else the target itself):

    fault_to_acquire_ms    fault ts -> the acquiring write of the next term (the first accepted lease
                           write with a non-empty holder and another (holder, transitions))
    expiry_to_acquire_ms   the moment the old lease became takeable -> that acquiring write; takeable
                           is the old term's last accepted write (its last renewal) + leaseDuration,
                           or the old holder's release write (holder "") if it released it
    gap_ms                 the old term's last accepted bind (before the acquiring write: a later
                           one would be a stale write, no_stale_writes' business) -> the new term's
                           first accepted bind (binds attributed to terms by their fence; if no bind
                           carries a fence, by time: the last bind before the acquiring write and
                           the first after it)

Outcomes: "failover" (timed), "survived" (the old holder renewed more than `survive_grace_s` after
the fault, so the fault did not end its term, e.g. a short pause; a fault whose effect reaches the
target only later, such as an expired certificate its client picks up at its next file poll, records
that bound as detail "effect_within_s", which then replaces `survive_grace_s` if larger),
"no_takeover" (the term ended and no one acquired the lease before the history ends, or it never
ended).

Clocks: audit timestamps are the API server's wall clock (taken when the request completed) and
fault timestamps the nemesis' wall clock. Both processes run on the same machine (local processes,
or containers sharing the host kernel's clock), so the differences are meaningful to about a
millisecond; on separate machines they would carry the clock offset. expiry_to_acquire_ms compares
two API-server timestamps only. It may be slightly negative: a standby starts its leaseDuration wait
when it observes the renewal, which is at or after the write completed, but the server's completion
stamp can trail the etcd commit the standby observed by a little.

Percentiles are nearest-rank: the p-th percentile of n sorted values is the value at 1-based rank
ceil(p/100 * n) (so p50 of [1, 2, 3, 4] is 2, and p100 is the max); every reported value is one of
the observations, never an interpolation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from chaos.history import LEADER_FAULTS, PHASE_END, SCHEDULER_LEASE, FaultRecord, History, LeaseTerm
from kse.audit import AuditRecord

__all__ = [
    "DEFAULT_LEASE_DURATION_S",
    "METRICS",
    "FailoverAnalysis",
    "FailoverEvent",
    "analyze_failover",
    "percentile",
    "summarize",
]

DEFAULT_LEASE_DURATION_S = 15.0  # kube-scheduler's leaseDuration default
METRICS = ("fault_to_acquire_ms", "expiry_to_acquire_ms", "gap_ms")
FAILOVER = "failover"
SURVIVED = "survived"
NO_TAKEOVER = "no_takeover"


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (see the module doc); `values` must not be empty."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} outside [0, 100]")
    xs = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(xs)))
    return xs[min(rank, len(xs)) - 1]


def summarize(values: Iterable[float | None]) -> dict[str, float] | None:
    """{"p50", "p95", "p99", "max"} of the non-None values, None if there are none."""
    xs = [v for v in values if v is not None]
    if not xs:
        return None
    return {
        "p50": percentile(xs, 50),
        "p95": percentile(xs, 95),
        "p99": percentile(xs, 99),
        "max": max(xs),
    }


@dataclass(frozen=True)
class FailoverEvent:
    """One fault on the leader and what followed."""

    fault_ts: float
    fault: str
    target: str
    outcome: str  # failover | survived | no_takeover
    old_holder: str
    old_transitions: int
    new_holder: str | None = None
    new_transitions: int | None = None
    acquire_ts: float | None = None
    takeable_ts: float | None = None
    takeable_by: str | None = None  # "expiry" | "release"
    last_old_bind_ts: float | None = None
    first_new_bind_ts: float | None = None
    bind_attribution: str | None = None  # "fence" | "time"
    fault_to_acquire_ms: float | None = None
    expiry_to_acquire_ms: float | None = None
    gap_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FailoverAnalysis:
    lease: str
    events: list[FailoverEvent] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # faults not on the leader, and why
    summary: dict[str, dict[str, float] | None] = field(default_factory=dict)
    terms: int = 0

    @property
    def failovers(self) -> list[FailoverEvent]:
        return [e for e in self.events if e.outcome == FAILOVER]

    def to_dict(self) -> dict[str, Any]:
        return {
            "lease": self.lease,
            "terms": self.terms,
            "count": len(self.failovers),
            "summary": self.summary,
            "events": [e.to_dict() for e in self.events],
            "skipped": self.skipped,
        }


def _ms(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round((b - a) * 1000.0, 3)


def analyze_failover(
    history: History,
    *,
    lease: str = SCHEDULER_LEASE,
    lease_duration_s: float | None = None,
    leader_faults: Iterable[str] = LEADER_FAULTS,
    identities: Mapping[str, str] | None = None,
    survive_grace_s: float = 0.25,
) -> FailoverAnalysis:
    """The failover events of the run (see the module doc).

    `lease_duration_s` is used when the audit log does not carry the lease's leaseDurationSeconds
    (extra "lease_duration_seconds" on lease writes); without either, kube-scheduler's 15 s.
    """
    kinds = set(leader_faults)
    ids = dict(identities or {})
    lh = history.lease_history()
    terms = lh.terms(lease)
    result = FailoverAnalysis(lease=lease, terms=len(terms))
    binds = sorted(
        (r for r in history.audit if r.verb == "bind" and r.code == "OK"),
        key=lambda r: (r.ts, r.revision or 0),
    )
    fenced = any(b.fence is not None for b in binds)

    for f in history.faults:
        if f.fault not in kinds or f.detail.get("phase") == PHASE_END:
            continue
        identity = str(f.detail.get("identity") or ids.get(f.target) or f.target)
        i = _term_at(terms, f.ts)
        if i is None:
            result.skipped.append(_skip(f, identity, "no one held the lease"))
            continue
        old = terms[i]
        if old.holder != identity:
            result.skipped.append(_skip(f, identity, f"not the leader (the leader was {old.holder})"))
            continue
        result.events.append(
            _event(
                f,
                old,
                terms[i + 1] if i + 1 < len(terms) else None,
                _survived(old, f, survive_grace_s),
                binds,
                fenced,
                lease_duration_s,
            )
        )

    result.summary = {m: summarize(getattr(e, m) for e in result.failovers) for m in METRICS}
    return result


def _survived(term: LeaseTerm, f: FaultRecord, grace_s: float) -> bool:
    """Whether the term's holder still wrote the lease after the fault (+ grace, or the fault's own
    "effect_within_s"): it survived."""
    effect = f.detail.get("effect_within_s")
    if isinstance(effect, int | float) and effect > grace_s:
        grace_s = float(effect)
    return term.last_renew_ts > f.ts + grace_s


def _term_at(terms: Sequence[LeaseTerm], ts: float) -> int | None:
    """The index of the term in force at `ts`: acquired at or before it and not ended before it."""
    for i in range(len(terms) - 1, -1, -1):
        t = terms[i]
        if t.acquire_ts <= ts:
            if t.end_ts is not None and t.end_ts <= ts:
                return None
            return i
    return None


def _skip(f: FaultRecord, identity: str, why: str) -> dict[str, Any]:
    return {"fault_ts": f.ts, "fault": f.fault, "target": f.target, "identity": identity, "reason": why}


def _in_term(b: AuditRecord, t: LeaseTerm) -> bool:
    return b.fence is not None and b.fence.holder == t.holder and b.fence.transitions == t.transitions


def _event(
    f: FaultRecord,
    old: LeaseTerm,
    new: LeaseTerm | None,
    survived: bool,
    binds: Sequence[AuditRecord],
    fenced: bool,
    lease_duration_s: float | None,
) -> FailoverEvent:
    base: dict[str, Any] = {
        "fault_ts": f.ts,
        "fault": f.fault,
        "target": f.target,
        "old_holder": old.holder,
        "old_transitions": old.transitions,
    }
    if survived:
        return FailoverEvent(outcome=SURVIVED, **base)
    if new is None:
        return FailoverEvent(outcome=NO_TAKEOVER, **base)
    if old.released and old.end_ts is not None:
        takeable, by = old.end_ts, "release"
    else:
        duration = old.duration_s or lease_duration_s or DEFAULT_LEASE_DURATION_S
        takeable, by = old.last_renew_ts + duration, "expiry"
    acquire = new.acquire_ts
    if fenced:
        old_b = [b.ts for b in binds if _in_term(b, old) and b.ts <= acquire]
        new_b = [b.ts for b in binds if _in_term(b, new)]
        last_old, first_new, attribution = (
            (old_b[-1] if old_b else None),
            (new_b[0] if new_b else None),
            "fence",
        )
    else:
        before = [b.ts for b in binds if b.ts <= acquire]
        after = [b.ts for b in binds if b.ts > acquire]
        last_old, first_new, attribution = (
            (before[-1] if before else None),
            (after[0] if after else None),
            "time",
        )
    return FailoverEvent(
        outcome=FAILOVER,
        **base,
        new_holder=new.holder,
        new_transitions=new.transitions,
        acquire_ts=acquire,
        takeable_ts=takeable,
        takeable_by=by,
        last_old_bind_ts=last_old,
        first_new_bind_ts=first_new,
        bind_attribution=attribution if (last_old is not None or first_new is not None) else None,
        fault_to_acquire_ms=_ms(f.ts, acquire),
        expiry_to_acquire_ms=_ms(takeable, acquire),
        gap_ms=_ms(last_old, first_new),
    )
