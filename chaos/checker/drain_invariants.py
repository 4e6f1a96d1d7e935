"""The drain invariants: what a rolling node upgrade must never do, judged from the run's history.

    no_pdb_violation         no budget's available pods fell below desiredHealthy through an eviction
    evictions_within_budget  every accepted eviction of an available pod left its budget satisfied
    replacements_bound_once  every evicted pod's controller replaced it, each replacement bound once
    no_bind_to_cordoned      no pod (but DaemonSet pods, which tolerate it) bound to a cordoned node
    deployments_restored     every Deployment back at its replica count, all of them ready

They read the pods' timeline (`chaos.podtimeline`, one state per delivered change), the final
snapshot's PodDisruptionBudgets and Deployments, the audit log (evictions, binds) and the cordon
and uncordon records the nemesis writes (fault "cordon" / "uncordon", `detail["revision"]` the
revision of the node update). Budgets limit voluntary disruption only (upstream's semantics): a pod
that stops being available for any other reason (its node lost) is counted as involuntary, never as
a violation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from chaos.checker.invariants import InvariantResult
from chaos.podtimeline import PodStateRecord
from kse.audit import AuditRecord
from kse.objects.intstr import IntOrStringError, int_or_string, parse_percent
from kse.objects.labels import Selector, SelectorError, label_selector_as_selector
from proto import kse_pb2 as pb

CORDON, UNCORDON = "cordon", "uncordon"


@dataclass
class Budget:
    """One PodDisruptionBudget as the checks use it."""

    key: str
    namespace: str
    selector: Selector
    desired_healthy: int

    def matches(self, state: PodStateRecord) -> bool:
        return state.key.partition("/")[0] == self.namespace and self.selector.matches(state.labels)


def desired_healthy(pdb: pb.PodDisruptionBudget, expected: int) -> int:
    """desiredHealthy as upstream's disruption controller computes it (both percentages round up)."""
    spec = pdb.spec
    try:
        if spec.HasField("max_unavailable"):
            v = int_or_string(spec.max_unavailable)
            if isinstance(v, str):
                return max(0, expected - math.ceil(parse_percent(v) * expected / 100))
            return max(0, expected - (v or 0))
        v = int_or_string(spec.min_available)
        if isinstance(v, str):
            return math.ceil(parse_percent(v) * expected / 100)
        return v or 0
    except IntOrStringError:
        return 0


def budgets(pdbs: Iterable[pb.PodDisruptionBudget], states: list[PodStateRecord]) -> list[Budget]:
    """The budgets, each with desiredHealthy from its final status when the controller computed it,
    else from the number of pods it selected at the end of the run."""
    last = _last_states(states)
    out = []
    for pdb in pdbs:
        try:
            sel = label_selector_as_selector(pdb.spec.selector if pdb.spec.HasField("selector") else None)
        except SelectorError:
            continue
        ns = pdb.metadata.namespace
        b = Budget(f"{ns}/{pdb.metadata.name}", ns, sel, 0)
        expected = pdb.status.expected_pods or sum(1 for s in last.values() if not s.deleted and b.matches(s))
        b.desired_healthy = pdb.status.desired_healthy or desired_healthy(pdb, expected)
        out.append(b)
    return out


def _last_states(states: list[PodStateRecord]) -> dict[str, PodStateRecord]:
    last: dict[str, PodStateRecord] = {}
    for s in sorted(states, key=lambda s: (s.resource_version, s.ts)):
        last[s.uid] = s
    return last


def _evictions(audit: Iterable[AuditRecord]) -> list[AuditRecord]:
    out = [r for r in audit if r.verb == "evict" and r.code == "OK" and r.revision is not None]
    out.sort(key=lambda r: r.revision or 0)
    return out


def _eviction_revisions(audit: Iterable[AuditRecord], states: list[PodStateRecord]) -> dict[str, int]:
    """uid -> the revision of its accepted eviction (by name: the uid that pod had then)."""
    by_key: dict[str, list[PodStateRecord]] = defaultdict(list)
    for s in states:
        by_key[s.key].append(s)
    out: dict[str, int] = {}
    for r in _evictions(audit):
        rev = r.revision or 0
        if r.uid:
            out.setdefault(r.uid, rev)
            continue
        alive = [s for s in by_key.get(f"{r.namespace}/{r.name}", []) if s.resource_version <= rev]
        if alive:
            out.setdefault(max(alive, key=lambda s: s.resource_version).uid, rev)
    return out


def _evicted_uids(audit: Iterable[AuditRecord], states: list[PodStateRecord]) -> set[str]:
    by_key: dict[str, set[str]] = defaultdict(set)
    for s in states:
        by_key[s.key].add(s.uid)
    out: set[str] = set()
    for r in _evictions(audit):
        if r.uid:
            out.add(r.uid)
        else:  # an eviction names the pod; its uid is the one alive at the eviction's revision
            out |= {u for u in by_key.get(f"{r.namespace}/{r.name}", set())}
    return out


def no_pdb_violation(
    states: list[PodStateRecord], pdbs: Iterable[pb.PodDisruptionBudget], audit: Iterable[AuditRecord]
) -> InvariantResult:
    """Replay the timeline per budget: once a budget had desiredHealthy available pods, an eviction
    must never take it below that."""
    name = "no_pdb_violation"
    bs = budgets(pdbs, states)
    if not bs or not states:
        return InvariantResult(name, True, "SKIPPED: no disruption budgets or no pod timeline")
    evicted = _evicted_uids(audit, states)
    current: dict[str, PodStateRecord] = {}
    armed: dict[str, bool] = {b.key: False for b in bs}
    healthy: dict[str, int] = {b.key: 0 for b in bs}
    lowest: dict[str, int | None] = {b.key: None for b in bs}
    violations: list[dict[str, object]] = []
    involuntary = 0
    for s in sorted(states, key=lambda s: (s.resource_version, s.ts)):
        before = current.get(s.uid)
        current[s.uid] = s
        for b in bs:
            was = before is not None and before.available and b.matches(before)
            now = s.available and b.matches(s)
            if was == now:
                continue
            healthy[b.key] += 1 if now else -1
            if healthy[b.key] >= b.desired_healthy:
                armed[b.key] = True
            if now or not armed[b.key] or healthy[b.key] >= b.desired_healthy:
                continue
            if s.uid not in evicted:
                involuntary += 1
                continue
            low = lowest[b.key]
            lowest[b.key] = healthy[b.key] if low is None else min(low, healthy[b.key])
            violations.append(
                {
                    "kind": "budget-violated",
                    "pdb": b.key,
                    "pod": s.key,
                    "revision": s.resource_version,
                    "available": healthy[b.key],
                    "desired_healthy": b.desired_healthy,
                }
            )
    detail = (
        f"{len(bs)} budgets, {len(evicted)} evicted pods: "
        + (
            f"{len(violations)} evictions took a budget below desiredHealthy"
            if violations
            else "none violated"
        )
        + (f" ({involuntary} involuntary drops below budget, not counted)" if involuntary else "")
    )
    return InvariantResult(
        name,
        not violations,
        detail,
        violations,
        {
            "budgets": len(bs),
            "evicted": len(evicted),
            "violations": len(violations),
            "involuntary": involuntary,
        },
    )


def evictions_within_budget(
    states: list[PodStateRecord], pdbs: Iterable[pb.PodDisruptionBudget], audit: Iterable[AuditRecord]
) -> InvariantResult:
    """Each accepted eviction of an available pod, at its revision: the budget's other available
    pods were at least desiredHealthy (the API server's check, made again from outside)."""
    name = "evictions_within_budget"
    bs = budgets(pdbs, states)
    evictions = _evictions(audit)
    if not evictions:
        return InvariantResult(name, True, "SKIPPED: no accepted evictions")
    ordered = sorted(states, key=lambda s: (s.resource_version, s.ts))
    violations: list[dict[str, object]] = []
    checked = 0
    i = 0
    current: dict[str, PodStateRecord] = {}
    for ev in evictions:
        rev = ev.revision or 0
        while i < len(ordered) and ordered[i].resource_version < rev:
            current[ordered[i].uid] = ordered[i]
            i += 1
        key = f"{ev.namespace}/{ev.name}"
        pod = next((s for s in current.values() if s.key == key and (not ev.uid or s.uid == ev.uid)), None)
        if pod is None or not pod.available:
            continue  # an unavailable pod may always be evicted
        for b in bs:
            if not b.matches(pod):
                continue
            checked += 1
            others = sum(1 for s in current.values() if s.uid != pod.uid and s.available and b.matches(s))
            if others < b.desired_healthy:
                violations.append(
                    {
                        "kind": "eviction-beyond-budget",
                        "pdb": b.key,
                        "pod": key,
                        "revision": rev,
                        "available_after": others,
                        "desired_healthy": b.desired_healthy,
                    }
                )
    detail = f"{len(evictions)} accepted evictions, {checked} against a budget: " + (
        f"{len(violations)} beyond it" if violations else "all within it"
    )
    return InvariantResult(
        name, not violations, detail, violations, {"evictions": len(evictions), "checked": checked}
    )


def replacements_bound_once(states: list[PodStateRecord], audit: Iterable[AuditRecord]) -> InvariantResult:
    """Per controller (ReplicaSet), as many pods created after its first eviction as it lost to
    evictions, each bound exactly once."""
    name = "replacements_bound_once"
    audit = list(audit)
    evicted = _evicted_uids(audit, states)
    if not evicted:
        return InvariantResult(name, True, "SKIPPED: no evicted pods")
    first_seen: dict[str, PodStateRecord] = {}
    for s in sorted(states, key=lambda s: (s.resource_version, s.ts)):
        first_seen.setdefault(s.uid, s)
    binds: dict[str, int] = defaultdict(int)
    for r in audit:
        if r.verb == "bind" and r.code == "OK":
            binds[r.uid or f"{r.namespace}/{r.name}"] += 1
    lost: dict[str, list[PodStateRecord]] = defaultdict(list)
    for uid in evicted:
        first = first_seen.get(uid)
        if first is not None and first.owner.startswith("ReplicaSet/"):
            lost[first.owner].append(first)
    violations: list[dict[str, object]] = []
    replaced = 0
    evicted_at = _eviction_revisions(audit, states)
    for owner, pods in sorted(lost.items()):
        # Replacements are the pods the controller created after its first eviction, including
        # those evicted in turn by a later batch of a rolling drain (each of them replaced one pod
        # and needs its own replacement); the pods it had before are older than that eviction.
        since = min(evicted_at.get(p.uid, p.resource_version) for p in pods)
        news = [s for s in first_seen.values() if s.owner == owner and s.resource_version > since]
        bound = [s for s in news if binds.get(s.uid, binds.get(s.key, 0)) >= 1]
        twice = [s.key for s in news if binds.get(s.uid, binds.get(s.key, 0)) > 1]
        replaced += min(len(bound), len(pods))
        if len(bound) < len(pods):
            violations.append(
                {"kind": "not-replaced", "owner": owner, "evicted": len(pods), "bound": len(bound)}
            )
        for key in twice:
            violations.append({"kind": "replacement-bound-twice", "owner": owner, "pod": key})
    detail = f"{len(evicted)} evicted pods of {len(lost)} controllers: " + (
        f"{len(violations)} problems" if violations else f"{replaced} replaced, each bound once"
    )
    return InvariantResult(
        name, not violations, detail, violations, {"evicted": len(evicted), "replaced": replaced}
    )


def no_bind_to_cordoned(
    states: list[PodStateRecord], audit: Iterable[AuditRecord], cordons: Iterable[tuple[str, str, int]]
) -> InvariantResult:
    """`cordons`: (node, "cordon"|"uncordon", revision). No accepted bind to a node between its
    cordon's and its uncordon's revisions, but of DaemonSet pods (they tolerate unschedulable)."""
    name = "no_bind_to_cordoned"
    windows: dict[str, list[tuple[int, int]]] = defaultdict(list)
    open_at: dict[str, int] = {}
    for node, what, rev in sorted(cordons, key=lambda c: c[2]):
        if what == CORDON:
            open_at.setdefault(node, rev)
        elif node in open_at:
            windows[node].append((open_at.pop(node), rev))
    for node, rev in open_at.items():
        windows[node].append((rev, 1 << 62))
    if not windows:
        return InvariantResult(name, True, "SKIPPED: no cordons recorded")
    owner = {s.uid: s.owner for s in states}
    owner_by_key = {s.key: s.owner for s in states}
    violations: list[dict[str, object]] = []
    binds = 0
    for r in audit:
        if r.verb != "bind" or r.code != "OK" or r.revision is None:
            continue
        binds += 1
        who = owner.get(r.uid, "") if r.uid else owner_by_key.get(f"{r.namespace}/{r.name}", "")
        if who.startswith("DaemonSet/"):
            continue
        for lo, hi in windows.get(r.node, ()):
            if lo < r.revision < hi:
                violations.append(
                    {
                        "kind": "bound-to-cordoned",
                        "pod": f"{r.namespace}/{r.name}",
                        "node": r.node,
                        "revision": r.revision,
                    }
                )
    detail = f"{sum(len(w) for w in windows.values())} cordon windows, {binds} binds: " + (
        f"{len(violations)} into a cordoned node" if violations else "none into a cordoned node"
    )
    return InvariantResult(
        name, not violations, detail, violations, {"windows": len(windows), "binds": binds}
    )


def deployments_restored(deployments: Iterable[pb.Deployment]) -> InvariantResult:
    """At the end every Deployment has exactly spec.replicas pods, all updated and available."""
    name = "deployments_restored"
    ds = list(deployments)
    if not ds:
        return InvariantResult(name, True, "SKIPPED: no deployments in the final snapshot")
    violations: list[dict[str, object]] = []
    for d in ds:
        want = d.spec.replicas if d.spec.HasField("replicas") else 1
        st = d.status
        if (st.replicas, st.available_replicas, st.ready_replicas, st.updated_replicas) != (want,) * 4:
            violations.append(
                {
                    "kind": "not-restored",
                    "deployment": f"{d.metadata.namespace}/{d.metadata.name}",
                    "replicas": want,
                    "status": {
                        "replicas": st.replicas,
                        "ready": st.ready_replicas,
                        "available": st.available_replicas,
                        "updated": st.updated_replicas,
                    },
                }
            )
    detail = f"{len(ds)} deployments: " + (
        f"{len(violations)} not at their replica count" if violations else "all restored"
    )
    return InvariantResult(name, not violations, detail, violations, {"deployments": len(ds)})
