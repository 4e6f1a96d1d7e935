"""The invariants: one pure function of the `History` each, returning an `InvariantResult`.

    pods_bound_once         every pod bound exactly once, or reported unschedulable, or deleted
    no_pod_vanished         every pod ever created is in the final snapshot or has an accepted delete
    no_overcommit           no node's allocatable exceeded (final state, and bind by bind)
    no_stale_writes         no write accepted under a fence that did not match the lease
    watch_integrity         watch deliveries ordered, unique and complete, per observer
    no_rotation_rpc_errors  no client RPC failed during a certificate rotation

Each result's `name` is the JSON key scenarios report; `violations` are JSON-ready dicts with a
`kind`; `counts` are the numbers behind `detail`. A check that cannot run for want of data passes,
and says "SKIPPED" in its detail.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.history import (
    APPLICATION_CODES,
    EXPIRE_CERTS,
    KILL,
    LIST,
    PHASE_END,
    RESTART,
    ROTATION_FAULTS,
    SCHEDULER_LEASE,
    SCHEDULER_USERS,
    STOP,
    TERMINATE,
    History,
    RpcErrorRecord,
    WatchDeliveryRecord,
    fault_windows,
)
from kse.audit import AuditRecord
from kse.objects.meta import key_of, object_key
from kse.objects.podresources import pod_requests, resource_list_units
from kse.objects.quantity import QuantityError
from proto import kse_pb2 as pb

__all__ = [
    "INVARIANTS",
    "TERMINAL_PHASES",
    "InvariantResult",
    "no_overcommit",
    "no_pod_vanished",
    "no_rotation_rpc_errors",
    "no_stale_writes",
    "pods_bound_once",
    "watch_integrity",
]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DELETING_VERBS = frozenset({"delete", "evict"})


@dataclass
class InvariantResult:
    name: str
    passed: bool
    detail: str
    violations: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self, max_violations: int | None = None) -> dict[str, Any]:
        shown = self.violations if max_violations is None else self.violations[:max_violations]
        out: dict[str, Any] = {
            "passed": self.passed,
            "detail": self.detail,
            "counts": dict(self.counts),
            "violations": shown,
        }
        if len(shown) < len(self.violations):
            out["violations_omitted"] = len(self.violations) - len(shown)
        return out


def _key(r: AuditRecord) -> str:
    return object_key(r.namespace, r.name)


def _examples(items: Iterable[str], n: int = 5) -> str:
    items = list(items)
    more = f" (+{len(items) - n} more)" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def _is_unschedulable(pod: pb.Pod) -> bool:
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        for c in pod.status.conditions
    )


def _rev(r: AuditRecord) -> float:
    return r.revision if r.revision is not None else float("inf")


# ---------------------------------------------------------------- pod identity


class _PodIndex:
    """Resolves audit records of pods to pod uids: the record's own uid, else the uid the pod with
    that name had at the record's revision (from accepted creates), else the final pod's uid."""

    def __init__(self, history: History) -> None:
        self._creates: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for r in history.accepted("pods"):
            if r.verb == "create" and r.uid:
                self._creates[_key(r)].append((r.revision or 0, r.uid))
        self.final: dict[str, pb.Pod] = {p.metadata.uid or key_of(p): p for p in history.pods or []}
        self._final_by_key = {key_of(p): p for p in history.pods or []}
        self.keys: dict[str, str] = {}  # uid -> namespace/name
        for key, creates in self._creates.items():
            for _, uid in creates:
                self.keys[uid] = key
        for uid, p in self.final.items():
            self.keys.setdefault(uid, key_of(p))

    def uid_of(self, r: AuditRecord) -> str:
        if r.uid:
            self.keys.setdefault(r.uid, _key(r))
            return r.uid
        key = _key(r)
        creates = self._creates.get(key)
        if creates:
            i = bisect.bisect_right(creates, (r.revision if r.revision is not None else 2**62, "\uffff"))
            if i > 0:
                return creates[i - 1][1]
        p = self._final_by_key.get(key)
        if p is not None and p.metadata.uid:
            return p.metadata.uid
        self.keys.setdefault(f"name:{key}", key)
        return f"name:{key}"  # no uid known: the name stands for it


# ---------------------------------------------------------------- 1. pods_bound_once


def _created(pod: pb.Pod) -> float:
    from chaos.cluster_setup import created_ts

    ts = created_ts(pod)
    return ts if ts is not None else float("-inf")


def pods_bound_once(
    history: History, *, allow_pending: bool = False, young_after: float | None = None
) -> InvariantResult:
    """Every created pod is bound exactly once (accepted `bind` records per pod uid; a second
    accepted bind, even to the same node, is a `double_bind`), or was reported unschedulable (final
    PodScheduled=False, reason Unschedulable), or was deleted (an accepted delete / evict), or is
    absent from the final snapshot without one (counted `absent`: `no_pod_vanished` holds every
    pod to being present or deleted, so it is not judged twice here). A pod still pending at the
    end is a violation unless `allow_pending`, or unless it was created at or after `young_after`
    (epoch s; its accepted create's timestamp, else its creationTimestamp): a run attached to a
    cluster whose workload keeps going snapshots while pods still arrive, and those are counted as
    `young`.
    Pods created with spec.nodeName set ("preassigned") and gated pods are not the scheduler's to
    bind. A bound pod whose final spec.nodeName is not its bind target is a `bind_mismatch`.
    """
    name = "pods_bound_once"
    idx = _PodIndex(history)
    binds: dict[str, list[AuditRecord]] = defaultdict(list)
    deleted: set[str] = set()
    uids: set[str] = set(idx.final)
    uids.update(p.metadata.uid for p in history.created if p.metadata.uid)
    for p in history.created:
        if p.metadata.uid:
            idx.keys.setdefault(p.metadata.uid, key_of(p))
    created_at: dict[str, float] = {}
    for r in sorted((r for r in history.audit if r.resource == "pods" and r.code == "OK"), key=_rev):
        if r.verb == "create":
            uid = idx.uid_of(r)
            uids.add(uid)
            created_at.setdefault(uid, r.ts)
        elif r.verb == "bind":
            uid = idx.uid_of(r)
            uids.add(uid)
            binds[uid].append(r)
        elif r.verb in DELETING_VERBS:
            deleted.add(idx.uid_of(r))
    have_snapshot = history.pods is not None

    outcome: dict[str, str] = {}
    violations: list[dict[str, Any]] = []
    for uid in sorted(uids, key=lambda u: idx.keys.get(u, u)):
        key = idx.keys.get(uid, uid)
        final = idx.final.get(uid)
        bs = binds.get(uid, [])
        if len(bs) > 1:
            outcome[uid] = "double_bind"
            violations.append(
                {
                    "kind": "double_bind",
                    "pod": key,
                    "uid": uid,
                    "binds": [
                        {
                            "revision": b.revision,
                            "ts": b.ts,
                            "node": b.node,
                            "by": b.fence.holder if b.fence else b.user,
                        }
                        for b in bs
                    ],
                }
            )
        elif len(bs) == 1:
            outcome[uid] = "bound"
            if final is not None and final.spec.node_name and final.spec.node_name != bs[0].node:
                outcome[uid] = "bind_mismatch"
                violations.append(
                    {
                        "kind": "bind_mismatch",
                        "pod": key,
                        "uid": uid,
                        "bind_node": bs[0].node,
                        "final_node": final.spec.node_name,
                    }
                )
        elif uid in deleted:
            outcome[uid] = "deleted"
        elif have_snapshot and final is None:
            outcome[uid] = "absent"  # gone with no accepted delete: `no_pod_vanished` judges it
        elif final is None:
            outcome[uid] = "unknown"
        elif final.spec.node_name:
            outcome[uid] = "preassigned"
        elif len(final.spec.scheduling_gates) > 0:
            outcome[uid] = "gated"
        elif _is_unschedulable(final):
            outcome[uid] = "unschedulable"
        elif young_after is not None and created_at.get(uid, _created(final)) >= young_after:
            outcome[uid] = "young"
        else:
            outcome[uid] = "pending"
            if not allow_pending:
                violations.append(
                    {"kind": "pending", "pod": key, "uid": uid, "phase": final.status.phase or "Pending"}
                )

    counts: dict[str, int] = defaultdict(int)
    for o in outcome.values():
        counts[o] += 1
    counts = {"pods": len(outcome)} | dict(sorted(counts.items()))
    parts = [f"{len(outcome)} pods"] + [f"{k} {v}" for k, v in counts.items() if k != "pods"]
    detail = ", ".join(parts)
    if counts.get("unknown"):
        detail += " (no final snapshot: unbound pods' outcome unknown)"
    doubles = [v["pod"] for v in violations if v["kind"] == "double_bind"]
    if doubles:
        detail += f"; double binds: {_examples(doubles)}"
    mism = [v["pod"] for v in violations if v["kind"] == "bind_mismatch"]
    if mism:
        detail += f"; final node differs from bind target: {_examples(mism)}"
    pend = [v["pod"] for v in violations if v["kind"] == "pending"]
    if pend:
        detail += f"; pending at the end without an Unschedulable condition: {_examples(pend)}"
    return InvariantResult(name, not violations, detail, violations, counts)


# ---------------------------------------------------------------- 1b. no_pod_vanished


def _revision_of(pod: pb.Pod) -> int:
    try:
        return int(pod.metadata.resource_version or 0)
    except ValueError:
        return 0


def no_pod_vanished(history: History) -> InvariantResult:
    """Every pod the history shows created is either in the final snapshot or has an accepted
    delete / evict record (by uid) in the audit log; a pod that is neither is `vanished`.

    "Created" is an accepted create in the audit log, or a pod in `history.created` (what the run's
    own informer delivered, which also covers pods created before the audit log began, attached).
    A vanished pod is what etcd losing data would look like (or a write path that deletes without an
    audit record): without this check a pod missing at the end would pass as "deleted". A delete
    that was refused or CANCELLED (its outcome unknown to the API server) is not a recorded delete;
    the violation lists such attempts, to tell a lost record from a lost pod.
    Needs the final snapshot and an audit log (SKIPPED without either: nothing to hold deletes to).
    Pods created after the revision the snapshot was listed at (`history.snapshot_revision`: a run
    attached to a cluster whose workload goes on) cannot be in it and are not judged.
    """
    name = "no_pod_vanished"
    if history.pods is None:
        return InvariantResult(name, True, "SKIPPED: no final snapshot of pods", [], {})
    if not history.audit:
        return InvariantResult(name, True, "SKIPPED: no audit log (deletes cannot be seen)", [], {})
    idx = _PodIndex(history)
    created: set[str] = set()
    later: set[str] = set()  # created after the snapshot's list: not judged
    cut = history.snapshot_revision
    for p in history.created:
        uid = p.metadata.uid or f"name:{key_of(p)}"
        idx.keys.setdefault(uid, key_of(p))
        # An informer's pod carries the revision it was delivered at: for a pod added by its
        # watch, the creating one.
        if cut is not None and _revision_of(p) > cut:
            later.add(uid)
        else:
            created.add(uid)
    deleted: set[str] = set()
    attempts: dict[str, list[str]] = defaultdict(list)  # key -> codes of deletes not accepted
    for r in sorted((r for r in history.audit if r.resource == "pods"), key=_rev):
        if r.code == "OK" and r.revision is not None:
            if r.verb == "create":
                (later if cut is not None and r.revision > cut else created).add(idx.uid_of(r))
            elif r.verb in DELETING_VERBS:
                deleted.add(idx.uid_of(r))
        elif r.verb in DELETING_VERBS:
            attempts[_key(r)].append(f"{r.verb} {r.code}")
    present = set(idx.final)
    later -= created
    vanished = sorted(created - present - deleted, key=lambda u: (idx.keys.get(u, u), u))
    violations = [
        {"kind": "vanished", "pod": idx.keys.get(u, u), "uid": u}
        | ({"delete_attempts": attempts[k]} if (k := idx.keys.get(u, u)) in attempts else {})
        for u in vanished
    ]
    counts = {
        "created": len(created),
        "present": len(created & present),
        "deleted": len((created - present) & deleted),
        "vanished": len(vanished),
    }
    detail = (
        f"{counts['created']} pods created: {counts['present']} present at the end, "
        f"{counts['deleted']} deleted (accepted delete / evict), {counts['vanished']} vanished"
    )
    if later:
        detail += f" ({len(later)} created after the snapshot's list at revision {cut}, not judged)"
    if violations:
        detail += "; absent from the final snapshot with no accepted delete: " + _examples(
            str(v["pod"]) for v in violations
        )
    return InvariantResult(name, not violations, detail, violations, counts)


# ---------------------------------------------------------------- 2. no_overcommit


def _requests(pod: pb.Pod) -> dict[str, int] | None:
    try:
        return {k: v for k, v in pod_requests(pod).items() if v > 0}
    except QuantityError:
        return None


def _allocatable(node: pb.Node) -> dict[str, int] | None:
    try:
        return resource_list_units(node.status.allocatable)
    except QuantityError:
        return None


def _over(used: dict[str, int], count: int, alloc: dict[str, int]) -> list[tuple[str, int, int]]:
    """(resource, requested, allocatable) for every resource over its allocatable. A resource the
    node does not list counts as 0 allocatable, and so does a missing "pods" (as the scheduler's
    NodeResourcesFit does)."""
    out = [(r, v, alloc.get(r, 0)) for r, v in sorted(used.items()) if v > alloc.get(r, 0)]
    if count > alloc.get("pods", 0):
        out.append(("pods", count, alloc.get("pods", 0)))
    return out


def no_overcommit(history: History) -> InvariantResult:
    """No node over-committed.

    Final state: per node, the sum of `pod_requests` over the non-terminated pods bound to it is
    within allocatable for every requested resource, and the pod count within allocatable "pods".

    Time-resolved (when pod specs are known: the final pods and `history.created`): the audit log's
    accepted pod writes replayed in revision order (bind places a pod, delete / evict frees it, an
    update_status whose record carries extra {"phase": Succeeded|Failed} frees it), checking the
    bind target after every bind against the final allocatable. Pods whose final phase is terminal
    but whose termination the log does not show are left out (their lifetime is unknown); so are
    pods of unknown spec and nodes absent from the snapshot. Each episode of a node being over a
    resource is reported once, at the bind that caused it.
    """
    name = "no_overcommit"
    if history.pods is None or history.nodes is None:
        return InvariantResult(name, True, "SKIPPED: no final snapshot of pods and nodes", [], {})
    violations: list[dict[str, Any]] = []
    counts: dict[str, int] = defaultdict(int)

    allocs: dict[str, dict[str, int]] = {}
    for n in history.nodes:
        a = _allocatable(n)
        if a is None:
            counts["unparseable_nodes"] += 1
        else:
            allocs[n.metadata.name] = a

    # -- final state
    per_node: dict[str, list[pb.Pod]] = defaultdict(list)
    for p in history.pods:
        if p.spec.node_name and p.status.phase not in TERMINAL_PHASES:
            per_node[p.spec.node_name].append(p)
    for node, pods in sorted(per_node.items()):
        alloc = allocs.get(node)
        if alloc is None:
            counts["pods_on_unknown_nodes"] += len(pods)
            continue
        used: dict[str, int] = defaultdict(int)
        for p in pods:
            req = _requests(p)
            if req is None:
                counts["unparseable_pods"] += 1
                continue
            for r, v in req.items():
                used[r] += v
        for res, req_total, have in _over(used, len(pods), alloc):
            violations.append(
                {
                    "kind": "overcommit",
                    "node": node,
                    "resource": res,
                    "requested": req_total,
                    "allocatable": have,
                    "pods": sorted(key_of(p) for p in pods),
                }
            )
    counts["nodes_checked"] = len(allocs)
    counts["pods_checked"] = sum(len(v) for k, v in per_node.items() if k in allocs)

    # -- time-resolved, over the binds
    violations += _overcommit_over_time(history, allocs, counts)

    final_v = [v for v in violations if v["kind"] == "overcommit"]
    timed_v = [v for v in violations if v["kind"] == "overcommit_at"]
    detail = (
        f"{counts['nodes_checked']} nodes, {counts['pods_checked']} running pods at the end; "
        f"{counts.get('binds_replayed', 0)} binds replayed"
    )
    if final_v:
        detail += "; over-committed at the end: " + _examples(
            f"{v['node']} {v['resource']} {v['requested']}>{v['allocatable']}" for v in final_v
        )
    if timed_v:
        detail += "; over-committed after a bind: " + _examples(
            f"{v['node']} {v['resource']} {v['requested']}>{v['allocatable']} at rev {v['revision']}"
            for v in timed_v
        )
    return InvariantResult(name, not violations, detail, violations, dict(sorted(counts.items())))


def _overcommit_over_time(
    history: History, allocs: dict[str, dict[str, int]], counts: dict[str, int]
) -> list[dict[str, Any]]:
    idx = _PodIndex(history)
    specs: dict[str, pb.Pod] = {}
    for p in history.created:
        if p.metadata.uid:
            specs[p.metadata.uid] = p
    for uid, p in idx.final.items():
        specs[uid] = p  # the final object has the spec too, and wins
    records = history.accepted("pods")
    terminated_in_log = {
        idx.uid_of(r)
        for r in records
        if r.verb == "update_status" and r.extra.get("phase") in TERMINAL_PHASES
    }
    excluded = {
        uid
        for uid, p in idx.final.items()
        if p.status.phase in TERMINAL_PHASES and uid not in terminated_in_log
    }
    counts["unknown_lifetime_pods"] = len(excluded)
    bound = {idx.uid_of(r) for r in records if r.verb == "bind"}
    reqs: dict[str, dict[str, int]] = {}
    placed: dict[str, str] = {}  # uid -> node
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    npods: dict[str, int] = defaultdict(int)
    over: set[tuple[str, str]] = set()
    out: list[dict[str, Any]] = []

    def req_of(uid: str) -> dict[str, int] | None:
        if uid not in reqs:
            spec = specs.get(uid)
            r = _requests(spec) if spec is not None else None
            if r is None:
                return None
            reqs[uid] = r
        return reqs[uid]

    def remove(uid: str) -> None:
        node = placed.pop(uid, None)
        if node is None:
            return
        for res, v in reqs.get(uid, {}).items():
            used[node][res] -= v
        npods[node] -= 1

    def place(uid: str, node: str, r: AuditRecord) -> None:
        remove(uid)
        req = req_of(uid)
        if req is None:
            counts["binds_unknown_spec"] += 1
            return
        placed[uid] = node
        for res, v in req.items():
            used[node][res] += v
        npods[node] += 1
        alloc = allocs.get(node)
        if alloc is None:
            return
        now_over = {res: (v, have) for res, v, have in _over(dict(used[node]), npods[node], alloc)}
        for res in [res for (n, res) in over if n == node and res not in now_over]:
            over.discard((node, res))
        for res, (v, have) in now_over.items():
            if (node, res) not in over:
                over.add((node, res))
                out.append(
                    {
                        "kind": "overcommit_at",
                        "node": node,
                        "resource": res,
                        "requested": v,
                        "allocatable": have,
                        "revision": r.revision,
                        "ts": r.ts,
                        "pod": idx.keys.get(uid, uid),
                    }
                )

    for r in records:
        uid = idx.uid_of(r)
        if uid in excluded:
            continue
        if r.verb == "create":
            # Created with spec.nodeName set (never bound through the API): placed from the start.
            spec = specs.get(uid)
            if spec is not None and spec.spec.node_name and uid not in bound and uid not in placed:
                place(uid, spec.spec.node_name, r)
        elif r.verb == "bind":
            counts["binds_replayed"] += 1
            if r.node not in allocs:
                counts["binds_to_unknown_nodes"] += 1
            place(uid, r.node, r)
        elif r.verb in DELETING_VERBS:
            remove(uid)
        elif r.verb == "update_status" and r.extra.get("phase") in TERMINAL_PHASES:
            remove(uid)
        # re-check nodes whose usage went down: an episode ends when the node is back within bounds
        for node, res in list(over):
            alloc = allocs.get(node, {})
            if not any(x[0] == res for x in _over(dict(used[node]), npods[node], alloc)):
                over.discard((node, res))
    return out


# ---------------------------------------------------------------- 3. no_stale_writes


def no_stale_writes(
    history: History,
    *,
    scheduler_users: Iterable[str] = SCHEDULER_USERS,
    lease: str = SCHEDULER_LEASE,
    require_fence: bool | None = None,
) -> InvariantResult:
    """No write accepted from a replica that did not hold the lease at that revision.

    The lease history is rebuilt from the audit log's accepted lease writes (holder and transitions
    per revision). Every accepted write by a scheduler identity (user in `scheduler_users`, or any
    write carrying a fence), leases excluded, is checked against the state of the lease its fence
    names just before the write's revision: fence holder and transitions must be that state's.
    A mismatch is a `stale_write` (counted `stale_writes_accepted`); writes refused with
    FAILED_PRECONDITION under a fence are `stale_writes_rejected`: the fencing at work.

    An accepted scheduler write without a fence is an `unfenced_write`, a violation when
    `require_fence` (default: when `lease` has any writes in the log, i.e. leader election ran).
    """
    name = "no_stale_writes"
    users = set(scheduler_users)
    lh = history.lease_history()
    if require_fence is None:
        require_fence = bool(lh.states(lease))
    violations: list[dict[str, Any]] = []
    counts = {
        "checked": 0,
        "stale_writes_accepted": 0,
        "stale_writes_rejected": 0,
        "unfenced_writes": 0,
        "unchecked": 0,
    }
    for r in sorted(history.audit, key=_rev):
        if r.resource == "leases" or (r.fence is None and r.user not in users):
            continue
        if r.code != "OK":
            if r.code == "FAILED_PRECONDITION" and r.fence is not None:
                counts["stale_writes_rejected"] += 1
            continue
        where = {
            "verb": r.verb,
            "resource": r.resource,
            "object": _key(r),
            "revision": r.revision,
            "ts": r.ts,
            "user": r.user,
        }
        if r.fence is None:
            counts["unfenced_writes"] += 1
            if require_fence:
                violations.append({"kind": "unfenced_write", **where})
            continue
        if r.revision is None:
            counts["unchecked"] += 1
            continue
        counts["checked"] += 1
        st = lh.at_revision(r.fence.lease, r.revision)
        holder = st.holder if st else None
        transitions = st.transitions if st else None
        if holder != r.fence.holder or transitions != r.fence.transitions:
            counts["stale_writes_accepted"] += 1
            violations.append(
                {
                    "kind": "stale_write",
                    **where,
                    "fence": {
                        "lease": r.fence.lease,
                        "holder": r.fence.holder,
                        "transitions": r.fence.transitions,
                    },
                    "lease_holder": holder,
                    "lease_transitions": transitions,
                    "lease_revision": st.revision if st else None,
                }
            )
    detail = (
        f"{counts['checked']} fenced writes checked: {counts['stale_writes_accepted']} stale accepted, "
        f"{counts['stale_writes_rejected']} stale rejected (FAILED_PRECONDITION); "
        f"{counts['unfenced_writes']} unfenced" + (" (fence required)" if require_fence else "")
    )
    stale = [v for v in violations if v["kind"] == "stale_write"]
    if stale:
        detail += "; stale: " + _examples(
            f"{v['verb']} {v['object']} at rev {v['revision']} by {v['fence']['holder']}"
            f"#{v['fence']['transitions']} while the lease was "
            f"{v['lease_holder'] or '(none)'}#{v['lease_transitions']}"
            for v in stale
        )
    return InvariantResult(name, not violations, detail, violations, counts)


# ---------------------------------------------------------------- 4. watch_integrity


def watch_integrity(history: History) -> InvariantResult:
    """Watch deliveries are ordered, unique and reliable, per observer session and resource.

    * ordered: watch events' revisions never go back (equal revisions are one revision's events);
      a LIST below what was already delivered is a `list_regression` (counted as reordered);
    * unique: no (key, revision) delivered twice;
    * reliable: every accepted write of the resource (matching the observer's namespace) with a
      revision in (initial list, last delivered] was delivered as an event at that revision, except
      writes in (P, L] for a relist at L when P had been delivered (the list replaced the state).
      A filtered observer (selector set) is only held to writes to objects in its view (it had
      delivered them and not their deletion) at the write's revision: a write to an object in view
      always yields an event for it, MODIFIED or DELETED.

    Deliveries that match no accepted write are counted as `unexplained` (not a violation: a server
    killed between the etcd commit and its audit line leaves such writes).
    """
    name = "watch_integrity"
    groups: dict[tuple[str, str, str], list[WatchDeliveryRecord]] = defaultdict(list)
    for w in history.watch:
        groups[(w.observer, w.session, w.resource)].append(w)
    if not groups:
        return InvariantResult(name, True, "SKIPPED: no watch deliveries recorded", [], {})
    writes_by_res: dict[str, list[AuditRecord]] = {}
    written_by_res: dict[str, set[tuple[str, int | None]]] = {}
    violations: list[dict[str, Any]] = []
    counts = {
        "observers": len({g[0] for g in groups}),
        "sessions": len({g[:2] for g in groups}),
        "events": 0,
        "lost": 0,
        "duplicated": 0,
        "reordered": 0,
        "unexplained": 0,
        "filtered_streams": 0,
    }
    all_revs = [r.revision for r in history.accepted() if r.revision is not None]
    audit_span = (min(all_revs), max(all_revs)) if all_revs else None
    for (observer, session, resource), recs in sorted(groups.items()):
        if resource not in writes_by_res:
            writes_by_res[resource] = history.accepted(resource)
            written_by_res[resource] = {(_key(r), r.revision) for r in writes_by_res[resource]}
        v = _check_stream(
            observer, resource, recs, writes_by_res[resource], written_by_res[resource], audit_span, counts
        )
        for x in v:
            x["session"] = session
        violations += v
    detail = (
        f"{counts['observers']} observers ({counts['sessions']} sessions), {counts['events']} events: "
        f"{counts['lost']} lost, {counts['duplicated']} duplicated, {counts['reordered']} reordered"
    )
    if counts["filtered_streams"]:
        detail += f"; {counts['filtered_streams']} filtered streams judged on their view only"
    if counts["unexplained"]:
        detail += f"; {counts['unexplained']} deliveries match no audited write"
    if violations:
        detail += "; " + _examples(
            f"{v['kind']} {v['resource']} {v['key']}@{v['revision']} at {v['observer']}" for v in violations
        )
    return InvariantResult(name, not violations, detail, violations, counts)


def _check_stream(
    observer: str,
    resource: str,
    recs: list[WatchDeliveryRecord],
    writes: list[AuditRecord],
    written: set[tuple[str, int | None]],
    audit_span: tuple[int, int] | None,
    counts: dict[str, int],
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    namespace = next((r.namespace for r in recs if r.namespace), "")
    filtered = any(r.selector for r in recs)
    counts["filtered_streams"] += filtered

    def viol(kind: str, key: str, rv: int, **extra: Any) -> None:
        out.append(
            {"kind": kind, "observer": observer, "resource": resource, "key": key, "revision": rv} | extra
        )

    # -- ordered and unique; the effective revision of every record (list changes apply at the list's)
    seen: set[tuple[str, int]] = set()
    delivered: set[tuple[str, int]] = set()
    high: int | None = None
    first: int | None = None
    current_list = 0
    exempt: list[tuple[int, int]] = []
    effective: list[tuple[int, WatchDeliveryRecord]] = []
    for w in recs:
        rv = w.resource_version
        if w.type == LIST:
            if first is None:
                first = rv
            elif high is not None and rv < high:
                counts["reordered"] += 1
                viol("list_regression", "", rv, previous=high)
            elif high is not None and rv > high:
                exempt.append((high, rv))
            high = rv if high is None else max(high, rv)
            current_list = rv
            continue
        if w.source == "list":
            effective.append((current_list, w))
            if w.type != "DELETED":
                seen.add((w.key, rv))
                delivered.add((w.key, rv))
            continue
        counts["events"] += 1
        effective.append((rv, w))
        if (w.key, rv) in seen:
            counts["duplicated"] += 1
            viol("duplicated", w.key, rv, type=w.type)
        elif high is not None and rv < high:
            counts["reordered"] += 1
            viol("reordered", w.key, rv, type=w.type, after=high)
        seen.add((w.key, rv))
        delivered.add((w.key, rv))
        if first is None:
            first = rv - 1  # no initial list recorded: the window starts at the first event
        high = rv if high is None else max(high, rv)
    if first is None or high is None:
        return out

    # -- unexplained deliveries
    if audit_span is not None:
        counts["unexplained"] += sum(
            1
            for w in recs
            if w.source == "watch"
            and w.type != LIST
            and (w.key, w.resource_version) not in written
            and audit_span[0] <= w.resource_version <= audit_span[1]
        )

    # -- reliable
    effective.sort(key=lambda e: e[0])
    view: set[str] = set()
    ei = 0
    ex_starts = [a for a, _ in exempt]
    for r in writes:
        rev = r.revision or 0
        if rev <= first:
            continue
        if rev > high:
            break
        key = _key(r)
        if namespace and r.namespace != namespace:
            continue
        while ei < len(effective) and effective[ei][0] < rev:
            w = effective[ei][1]
            if w.type == "DELETED":
                view.discard(w.key)
            else:
                view.add(w.key)
            ei += 1
        if (key, rev) in delivered:
            continue
        i = bisect.bisect_left(ex_starts, rev) - 1
        if i >= 0 and exempt[i][0] < rev <= exempt[i][1]:
            continue
        if filtered and key not in view:
            continue
        counts["lost"] += 1
        viol("lost", key, rev, verb=r.verb)
    return out


# ---------------------------------------------------------------- 5. no_rotation_rpc_errors


def _budget_refusal(e: RpcErrorRecord) -> bool:
    """An eviction refused by a PodDisruptionBudget (429, RESOURCE_EXHAUSTED on Evict): the
    server's answer to the request, which a drain retries, not a failed RPC."""
    return e.code == "RESOURCE_EXHAUSTED" and e.method.endswith("/Evict")


def no_rotation_rpc_errors(
    history: History,
    *,
    grace_s: float = 2.0,
    rotation_faults: Iterable[str] = ROTATION_FAULTS,
    ignore_codes: Iterable[str] = APPLICATION_CODES,
) -> InvariantResult:
    """No client RPC failed because of a certificate rotation: every RPC error recorded within a
    rotation fault's window (plus `grace_s` after its end) is a violation, except

    * errors whose code is in `ignore_codes` (by default the server's answers to the request
      itself, conflicts and the like, which prove the TLS session worked);
    * errors an `expire_certs` fault causes on purpose: its records carry detail "client", the
      client name of the replica whose certificate was made to expire (the stem of its
      `rpc-errors-<name>.jsonl`); that client's errors from the fault's start to its end (the
      valid pair issued again) plus `grace_s` are counted as `expected_expiry_errors`, not charged
      to an overlapping rotation. Every other client's errors still are;
    * errors during an API server outage that a fault made (kill / terminate / restart / stop of the
      target "apiserver", from the fault to the record that it is back: a record with detail
      "after", or the stop's end) plus `grace_s`: counted as `apiserver_outage_errors`; the
      outage, not the rotation, failed them. etcd members restarted by a CA rotation are part of
      the rotation, and their errors are charged to it.

    A rotation's window is what the nemesis records (chaos.nemesis): from just before the first
    file is written until every process has had time to reload (rotate-leaf's watched window, the
    last CA phase plus its step).
    """
    name = "no_rotation_rpc_errors"
    windows = fault_windows(history.faults, rotation_faults)
    expired: list[tuple[str, float, float]] = []
    clients = {
        (f.target, f.ts): str(f.detail.get("client") or f.target)
        for f in history.faults
        if f.fault == EXPIRE_CERTS and f.detail.get("phase") != PHASE_END
    }
    for w in fault_windows(history.faults, (EXPIRE_CERTS,)):
        expired.append((clients.get((w.target, w.start), w.target), w.start, w.end + grace_s))
    outages = _apiserver_outages(history, grace_s)
    ignore = set(ignore_codes)
    counts = {
        "rotations": len(windows),
        "errors_in_windows": 0,
        "ignored_application_errors": 0,
        "expected_expiry_errors": 0,
        "apiserver_outage_errors": 0,
        "errors_total": len(history.rpc_errors),
    }
    if not windows:
        return InvariantResult(name, True, "SKIPPED: no rotation faults in the history", [], counts)
    violations: list[dict[str, Any]] = []
    for e in sorted(history.rpc_errors, key=lambda e: e.ts):
        win = next((w for w in windows if w.start <= e.ts <= w.end + grace_s), None)
        if win is None:
            continue
        if e.code in ignore or _budget_refusal(e):
            counts["ignored_application_errors"] += 1
            continue
        if any(c == e.client and start <= e.ts <= end for c, start, end in expired):
            counts["expected_expiry_errors"] += 1
            continue
        if any(start <= e.ts <= end for start, end in outages):
            counts["apiserver_outage_errors"] += 1
            continue
        counts["errors_in_windows"] += 1
        violations.append(
            {
                "kind": "rotation_rpc_error",
                "ts": e.ts,
                "client": e.client,
                "method": e.method,
                "code": e.code,
                "detail": e.detail,
                "fault": win.fault,
                "target": win.target,
                "since_fault_s": round(e.ts - win.start, 3),
            }
        )
    detail = (
        f"{len(windows)} rotations, {counts['errors_in_windows']} RPC errors within them "
        f"(+{grace_s:g}s grace)"
    )
    if counts["expected_expiry_errors"]:
        detail += f"; {counts['expected_expiry_errors']} from clients whose certificate was let expire"
    if counts["apiserver_outage_errors"]:
        detail += f"; {counts['apiserver_outage_errors']} during API server outages"
    if violations:
        detail += ": " + _examples(
            f"{v['client']} {v['method']} {v['code']} {v['since_fault_s']}s after {v['fault']} {v['target']}"
            for v in violations
        )
    return InvariantResult(name, not violations, detail, violations, counts)


_OUTAGE_FAULTS = frozenset({KILL, TERMINATE, RESTART, STOP})


def _apiserver_outages(history: History, grace_s: float) -> list[tuple[float, float]]:
    """(start, end + grace) of every API server outage a fault made: from the kill / terminate /
    restart / stop record to the next "apiserver" record saying it is back (detail "after", or a
    phase end); an outage with no such record lasts to the end of the history."""
    recs = sorted((f for f in history.faults if f.target == "apiserver"), key=lambda f: f.ts)
    last = max((f.ts for f in history.faults), default=0.0)
    out: list[tuple[float, float]] = []
    start: float | None = None
    for f in recs:
        back = "after" in f.detail or f.detail.get("phase") == PHASE_END
        if back:
            if start is not None:
                out.append((start, f.ts + grace_s))
                start = None
        elif f.fault in _OUTAGE_FAULTS and start is None:
            start = f.ts
    if start is not None:
        out.append((start, last + grace_s))
    return out


INVARIANTS = {
    "pods_bound_once": pods_bound_once,
    "no_pod_vanished": no_pod_vanished,
    "no_overcommit": no_overcommit,
    "no_stale_writes": no_stale_writes,
    "watch_integrity": watch_integrity,
    "no_rotation_rpc_errors": no_rotation_rpc_errors,
}
