"""`audit_matches_etcd`: the API server's audit log against etcd's own history (chaos.etcd_history).

    lost        an accepted write (audit code OK, revision R) with no etcd event for its key at R
    unaudited   an etcd event with no audit record for its key at its revision, unless it is the
                companion write of an audited multi-key transaction at that revision (an
                eviction's PodDisruptionBudget status, written with the pod). A group-committed
                batch (apiserver_mock.storage.groupcommit) puts many writes at one revision, and
                each has its own record: one record at a revision excuses no other key there
    expired     a DELETE etcd made itself when the key's lease ran out (an Event past
                `--event-ttl`): no request made it, so no audit record is expected; counted only

A lost write always fails the check (an acknowledged write that etcd does not have). An unaudited
one fails it unless the API server was being killed or restarted then (a crash between etcd's
commit and the audit line is the one legitimate way to get one); those are counted.
"""

from __future__ import annotations

from collections import defaultdict

from chaos.checker.invariants import InvariantResult
from chaos.etcd_history import EtcdWrite
from chaos.history import KILL, RESTART, STOP, TERMINATE, History
from kse.audit import AuditRecord

_CRASHES = frozenset({KILL, RESTART, STOP, TERMINATE})
EXAMPLES = 20


def _key(resource: str, namespace: str, name: str) -> tuple[str, str, str]:
    return (resource, namespace, name)


def _apiserver_crashed(history: History) -> bool:
    return any(f.target == "apiserver" and f.fault in _CRASHES for f in history.faults)


def audit_matches_etcd(history: History, etcd_writes: list[EtcdWrite] | None = None) -> InvariantResult:
    name = "audit_matches_etcd"
    writes = history.etcd_writes if etcd_writes is None else etcd_writes
    if not writes:
        return InvariantResult(name, True, "SKIPPED: no etcd history was read (attached run, or none kept)")
    # The window etcd's history covers (it is read at the end of the run; the cluster writes on
    # until it stops, and those later writes are not judged).
    first, last = min(w.revision for w in writes), max(w.revision for w in writes)
    by_rev: dict[int, set[tuple[str, str, str]]] = defaultdict(set)
    for w in writes:
        if w.resource:
            by_rev[w.revision].add(_key(w.resource, w.namespace, w.name))
    audited: dict[int, set[tuple[str, str, str]]] = defaultdict(set)
    evictions: set[int] = set()  # revisions of audited evictions (their budget's write rides along)
    accepted: list[AuditRecord] = [
        r for r in history.audit if r.code == "OK" and r.revision is not None and first <= r.revision <= last
    ]
    for r in accepted:
        audited[r.revision or 0].add(_key(r.resource, r.namespace, r.name))
        if r.verb == "evict":
            evictions.add(r.revision or 0)
    violations: list[dict[str, object]] = []
    lost = 0
    for r in accepted:
        rev = r.revision or 0
        if _key(r.resource, r.namespace, r.name) not in by_rev.get(rev, set()):
            lost += 1
            if len(violations) < EXAMPLES:
                violations.append(
                    {
                        "kind": "lost",
                        "verb": r.verb,
                        "object": f"{r.resource}/{r.namespace}/{r.name}",
                        "revision": rev,
                    }
                )
    unseen = [
        w
        for w in writes
        if w.resource
        and _key(w.resource, w.namespace, w.name) not in audited.get(w.revision, set())
        and not (w.resource == "poddisruptionbudgets" and w.revision in evictions)
    ]
    expired = [w for w in unseen if w.type == "DELETE" and w.lease]
    unaudited = [w for w in unseen if not (w.type == "DELETE" and w.lease)]
    crashed = _apiserver_crashed(history)
    if not crashed:
        for w in unaudited[:EXAMPLES]:
            violations.append(
                {
                    "kind": "unaudited",
                    "type": w.type,
                    "object": f"{w.resource}/{w.namespace}/{w.name}",
                    "revision": w.revision,
                }
            )
    failed = lost > 0 or (bool(unaudited) and not crashed)
    detail = (
        f"{len(writes)} etcd events, {len(accepted)} accepted writes audited: {lost} lost, "
        f"{len(unaudited)} unaudited"
        + (f", {len(expired)} expired by their lease (Events past --event-ttl)" if expired else "")
        + (" (the API server was killed or restarted: allowed)" if crashed and unaudited else "")
    )
    return InvariantResult(
        name,
        not failed,
        detail,
        violations,
        {
            "etcd_events": len(writes),
            "accepted": len(accepted),
            "lost": lost,
            "unaudited": len(unaudited),
            "expired": len(expired),
        },
    )
