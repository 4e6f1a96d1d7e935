"""audit_matches_etcd on hand-made histories: passes when the audit log and etcd agree, fails on a
lost acknowledged write and on a write etcd has that the log never mentions (unless the API
server was being killed then)."""

from __future__ import annotations

from chaos.checker.etcd_invariants import audit_matches_etcd
from chaos.etcd_history import EtcdWrite, parse_key
from chaos.history import FaultRecord, History
from kse.audit import AuditRecord


def audit(name: str, rev: int, verb: str = "create") -> AuditRecord:
    return AuditRecord(ts=float(rev), user="u", verb=verb, resource="pods", namespace="default", name=name,
                       code="OK", revision=rev)  # fmt: skip


def put(name: str, rev: int) -> EtcdWrite:
    return EtcdWrite(rev, "PUT", "pods", "default", name)


def test_agreement_passes() -> None:
    h = History(audit=[audit("a", 5), audit("b", 6)], etcd_writes=[put("a", 5), put("b", 6)])
    result = audit_matches_etcd(h)
    assert result.passed and result.counts["lost"] == 0 and result.counts["unaudited"] == 0


def test_an_acknowledged_write_missing_from_etcd_fails() -> None:
    h = History(audit=[audit("a", 5), audit("b", 6), audit("c", 7)], etcd_writes=[put("a", 5), put("c", 7)])
    result = audit_matches_etcd(h)
    assert not result.passed and result.violations[0] == {
        "kind": "lost", "verb": "create", "object": "pods/default/b", "revision": 6
    }  # fmt: skip


def test_a_write_the_log_never_mentions_fails_unless_the_apiserver_was_killed() -> None:
    writes = [put("a", 5), put("in-doubt", 6)]
    h = History(audit=[audit("a", 5)], etcd_writes=writes)
    result = audit_matches_etcd(h)
    assert not result.passed and result.violations[0]["object"] == "pods/default/in-doubt"
    killed = History(
        audit=[audit("a", 5)], etcd_writes=writes, faults=[FaultRecord(5.5, "kill", "apiserver")]
    )
    result = audit_matches_etcd(killed)
    assert result.passed and result.counts["unaudited"] == 1


def test_a_delete_etcd_made_when_a_lease_expired_is_counted_not_failed() -> None:
    """An Event past --event-ttl is deleted by etcd itself: no request, so no audit line. Only a
    DELETE of a key that had a lease is excused: the same DELETE without one still fails."""
    event = [
        EtcdWrite(5, "PUT", "events", "default", "e", lease=7),
        EtcdWrite(9, "DELETE", "events", "default", "e", lease=7),
    ]
    h = History(audit=[AuditRecord(ts=5.0, user="u", verb="create", resource="events", namespace="default",
                                   name="e", code="OK", revision=5)], etcd_writes=event)  # fmt: skip
    result = audit_matches_etcd(h)
    assert result.passed and (result.counts["expired"], result.counts["unaudited"]) == (1, 0)
    assert "1 expired by their lease" in result.detail
    unleased = History(
        audit=h.audit, etcd_writes=[event[0], EtcdWrite(9, "DELETE", "events", "default", "e")]
    )
    result = audit_matches_etcd(unleased)
    assert not result.passed and result.counts["unaudited"] == 1


def test_a_multi_key_transaction_is_audited_by_one_of_its_keys() -> None:
    # An eviction: the PDB's status and the pod's deletion in one revision, audited as the pod's.
    writes = [put("a", 5), EtcdWrite(6, "PUT", "poddisruptionbudgets", "default", "web"), put("a", 6)]
    h = History(audit=[audit("a", 5), audit("a", 6, verb="evict")], etcd_writes=writes)
    assert audit_matches_etcd(h).passed


def test_without_etcd_history_it_skips() -> None:
    assert audit_matches_etcd(History(audit=[audit("a", 5)])).detail.startswith("SKIPPED")


def test_keys_of_the_prefix() -> None:
    assert parse_key(b"/registry", b"/registry/pods/default/web-1") == ("pods", "default", "web-1")
    assert parse_key(b"/registry", b"/registry/nodes/n1") == ("nodes", "", "n1")
    assert parse_key(b"/registry", b"/registry/.progress-marker") == ("", "", "")


def test_a_group_committed_batch_needs_a_record_for_every_write() -> None:
    """Binds group-committed into one txn share a revision: each still needs its own record, so an
    unaudited write cannot hide behind an audited one of its batch."""
    writes = [put("a", 5), put("b", 5), put("c", 5)]
    h = History(audit=[audit("a", 5, verb="bind"), audit("c", 5, verb="bind")], etcd_writes=writes)
    result = audit_matches_etcd(h)
    assert not result.passed and result.counts["unaudited"] == 1
    assert result.violations[0]["object"] == "pods/default/b"
    h.audit.append(audit("b", 5, verb="bind"))
    assert audit_matches_etcd(h).passed
