"""Failover analysis on synthetic histories with known answers."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.checker import analyze_failover, percentile, summarize
from chaos.history import KILL, STOP, TERMINATE, FaultRecord, History, LeaseHistory
from kse.audit import AuditFence, AuditRecord

LEASE = "kube-system/kube-scheduler"


class Log:
    def __init__(self) -> None:
        self.rev = 10
        self.audit: list[AuditRecord] = []

    def write(self, **kw: Any) -> AuditRecord:
        self.rev += 1
        rec = AuditRecord(code="OK", revision=self.rev, user="system:kube-scheduler", **kw)
        self.audit.append(rec)
        return rec

    def lease(self, ts: float, holder: str, transitions: int, **extra: object) -> None:
        self.write(
            ts=ts,
            verb="update",
            resource="leases",
            namespace="kube-system",
            name="kube-scheduler",
            lease_holder=holder,
            lease_transitions=transitions,
            extra=dict(extra),
        )

    def bind(self, ts: float, pod: str, holder: str | None, transitions: int = 0) -> None:
        fence = AuditFence(LEASE, holder, transitions) if holder is not None else None
        self.write(
            ts=ts,
            verb="bind",
            resource="pods",
            namespace="default",
            name=pod,
            uid=pod,
            node="n1",
            fence=fence,
        )

    def term(self, holder: str, transitions: int, start: float, last: float, every: float = 0.5) -> None:
        """An acquisition at `start`, renewals every `every`, the last one at `last`."""
        t = start
        while t < last - 1e-9:
            self.lease(round(t, 3), holder, transitions)
            t += every
        self.lease(last, holder, transitions)


def killed_leader() -> Log:
    """a leads from t=0, renewing every 0.5 s up to 9.5 (leaseDuration 2); killed at 10.000; b
    acquires at 11.52. a's last bind at 9.8, b's first at 11.60."""
    log = Log()
    log.term("a", 1, 0.0, 9.5)
    log.bind(5.0, "p1", "a", 1)
    log.bind(9.8, "p2", "a", 1)
    log.lease(11.52, "b", 2)
    log.bind(11.60, "p3", "b", 2)
    log.bind(11.70, "p4", "b", 2)
    return log


def test_known_answers_for_a_killed_leader() -> None:
    log = killed_leader()
    h = History(audit=log.audit, faults=[FaultRecord(10.0, KILL, "scheduler-1", {"identity": "a"})])
    fo = analyze_failover(h, lease_duration_s=2.0)
    [e] = fo.events
    assert e.outcome == "failover"
    assert (e.old_holder, e.old_transitions, e.new_holder, e.new_transitions) == ("a", 1, "b", 2)
    assert e.takeable_by == "expiry" and e.takeable_ts == pytest.approx(11.5)
    assert e.expiry_to_acquire_ms == pytest.approx(20.0)
    assert e.fault_to_acquire_ms == pytest.approx(1520.0)
    assert (e.last_old_bind_ts, e.first_new_bind_ts, e.bind_attribution) == (9.8, 11.60, "fence")
    assert e.gap_ms == pytest.approx(1800.0)
    assert fo.summary["fault_to_acquire_ms"] == {"p50": 1520.0, "p95": 1520.0, "p99": 1520.0, "max": 1520.0}
    assert fo.terms == 2 and fo.to_dict()["count"] == 1


def test_lease_duration_from_the_audit_log_wins() -> None:
    log = Log()
    log.term("a", 1, 0.0, 9.5)
    log.lease(9.5, "a", 1, lease_duration_seconds=3)  # the API server records leaseDurationSeconds
    log.lease(12.6, "b", 2)
    h = History(audit=log.audit, faults=[FaultRecord(10.0, KILL, "a")])
    [e] = analyze_failover(h, lease_duration_s=2.0).events
    assert e.takeable_ts == pytest.approx(12.5) and e.expiry_to_acquire_ms == pytest.approx(100.0)


def test_release_makes_the_lease_takeable_at_once() -> None:
    log = Log()
    log.term("a", 1, 0.0, 9.5)
    log.lease(10.01, "", 1)  # a releases on SIGTERM
    log.lease(10.05, "b", 2)
    h = History(audit=log.audit, faults=[FaultRecord(10.0, TERMINATE, "scheduler-1")])
    [e] = analyze_failover(h, identities={"scheduler-1": "a"}).events
    assert e.takeable_by == "release" and e.takeable_ts == 10.01
    assert e.expiry_to_acquire_ms == pytest.approx(40.0) and e.fault_to_acquire_ms == pytest.approx(50.0)
    assert e.gap_ms is None and e.bind_attribution is None  # no binds


def test_fault_on_a_standby_is_skipped() -> None:
    log = killed_leader()
    h = History(audit=log.audit, faults=[FaultRecord(10.0, KILL, "scheduler-2", {"identity": "c"})])
    fo = analyze_failover(h, lease_duration_s=2.0)
    assert fo.events == [] and fo.summary["fault_to_acquire_ms"] is None
    assert fo.skipped[0]["reason"] == "not the leader (the leader was a)"


def test_short_pause_is_survived() -> None:
    log = Log()
    log.term("a", 1, 0.0, 12.0)  # renewals go on after the pause
    log.lease(30.0, "b", 2)  # a much later, unrelated takeover
    h = History(audit=log.audit, faults=[FaultRecord(10.0, STOP, "a", {"duration_s": 0.4})])
    [e] = analyze_failover(h).events
    assert e.outcome == "survived" and e.fault_to_acquire_ms is None
    assert analyze_failover(h).summary == {
        "fault_to_acquire_ms": None,
        "expiry_to_acquire_ms": None,
        "gap_ms": None,
    }


def test_no_takeover() -> None:
    log = Log()
    log.term("a", 1, 0.0, 9.5)
    h = History(audit=log.audit, faults=[FaultRecord(10.0, KILL, "a")])
    [e] = analyze_failover(h).events
    assert e.outcome == "no_takeover" and e.new_holder is None


def test_unfenced_binds_are_attributed_by_time() -> None:
    log = Log()
    log.term("a", 1, 0.0, 9.5)
    log.bind(9.0, "p1", None)
    log.lease(11.52, "b", 2)
    log.bind(12.0, "p2", None)
    h = History(audit=log.audit, faults=[FaultRecord(10.0, KILL, "a")])
    [e] = analyze_failover(h, lease_duration_s=2.0).events
    assert e.bind_attribution == "time" and e.gap_ms == pytest.approx(3000.0)


def test_several_failovers_are_summarized() -> None:
    log = Log()
    faults = []
    holders = ["a", "b", "c", "d", "e"]
    t = 0.0
    for i, (holder, delay) in enumerate(zip(holders, [0.0, 0.1, 0.3, 0.2, 0.4], strict=True)):
        log.term(holder, i + 1, t + delay, t + 5.0)
        faults.append(FaultRecord(t + 5.2, KILL, holder))
        t += 10.0
    h = History(audit=log.audit, faults=faults)
    fo = analyze_failover(h, lease_duration_s=1.0)
    # every kill at +5.2 after the term start, the last renewal at +5.0, acquisitions at the next
    # term's start + delay: fault_to_acquire = 4.8 s + delay
    assert [e.outcome for e in fo.events] == ["failover"] * 4 + ["no_takeover"]
    assert [e.fault_to_acquire_ms for e in fo.failovers] == pytest.approx([4900.0, 5100.0, 5000.0, 5200.0])
    assert fo.summary["fault_to_acquire_ms"] == pytest.approx(
        {"p50": 5000.0, "p95": 5200.0, "p99": 5200.0, "max": 5200.0}
    )
    assert [e.expiry_to_acquire_ms for e in fo.failovers] == pytest.approx([4100.0, 4300.0, 4200.0, 4400.0])


def test_percentile_is_nearest_rank() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2
    assert percentile([15, 20, 35, 40, 50], 30) == 20
    assert percentile([15, 20, 35, 40, 50], 40) == 20
    assert percentile([15, 20, 35, 40, 50], 50) == 35
    assert percentile([15, 20, 35, 40, 50], 100) == 50
    assert percentile([15, 20, 35, 40, 50], 0) == 15
    assert percentile([3.0], 99) == 3.0
    xs = list(range(1, 101))
    assert (percentile(xs, 95), percentile(xs, 99)) == (95, 99)
    with pytest.raises(ValueError):
        percentile([], 50)
    assert summarize([None, None]) is None
    assert summarize([5.0, None, 1.0]) == {"p50": 1.0, "p95": 5.0, "p99": 5.0, "max": 5.0}


def test_lease_history_terms_and_lookups() -> None:
    log = Log()
    log.term("a", 1, 0.0, 1.0)  # revs 11..13
    log.lease(1.2, "", 1)  # rev 14: released
    log.lease(2.0, "b", 2)  # rev 15
    lh = LeaseHistory.from_audit(log.audit)
    terms = lh.terms(LEASE)
    assert [
        (t.holder, t.transitions, t.acquire_revision, t.last_renew_revision, t.end_revision, t.released)
        for t in terms
    ] == [("a", 1, 11, 13, 14, True), ("b", 2, 15, 15, None, False)]
    state = lh.at_revision(LEASE, 14)
    assert state is not None and state.holder == "a"  # the state in force for a write at 14 is rev 13's
    state = lh.at_revision(LEASE, 15)
    assert state is not None and state.holder == ""
    assert lh.at_revision(LEASE, 11) is None
    state = lh.at_time(LEASE, 1.5)
    assert state is not None and state.revision == 14
