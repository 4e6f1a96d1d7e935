"""The drain planner: what `kse drain NODE...` would do, predicted without changing anything.

For every pod on the nodes to drain, in the order the drain would take them:

* **action**: `evict` (or `delete` under --disable-eviction), `skip` (mirror pods, DaemonSet pods
  under --ignore-daemonsets, pods deleted longer ago than --skip-wait-for-delete-timeout) or
  `blocked` (kubectl's filters refuse the node: a DaemonSet pod without --ignore-daemonsets, emptyDir
  data without --delete-emptydir-data, no controller without --force; or an earlier node stops the
  drain). The filters are kubectl's own (`kse.drain.filters`), with kubectl's texts as `reason`.
* **pdb**: the PodDisruptionBudget that guards an eviction, and `disruptionsAllowed`: its
  status.disruptionsAllowed minus the evictions earlier in this drain. At 0 the eviction is refused
  (HTTP 429) and retried; `blockedBy` then says until when: "until N replacement(s) are ready" (the
  budget comes back as the replacements of earlier evictions become healthy) or "indefinitely"
  (no replacement that could become ready: none is created, or none can be scheduled). Pods the
  eviction API lets through regardless (finished or Pending pods, being deleted; an unready pod
  while the budget is met, upstream's IfHealthyBudget) consume no budget.
* **replacement**: for a pod a controller recreates (ReplicaSet from its template; other controllers
  from the pod itself), where the scheduler would put the new pod: the real framework of the
  configured profile (scheduler.whatif's cycle, every node filtered and scored) on the current
  snapshot with the drained nodes cordoned and the evicted pods gone. The replacements go through
  the queue in its order (PrioritySort: higher priority first, then older first; pods already
  Pending in the cluster are older than any replacement and go first), each placement assumed before
  the next. One that fits nowhere gets the FailedScheduling message the scheduler would post
  ("0/5 nodes are available: ..."); `node` is then null.

Evictions happen in rounds: first every pod the budgets allow, then, as replacements become ready,
the pods they unblock; the replacements of a later round queue after those of an earlier one.

Preemption is the profile's PostFilter as what-if runs it (a dry run): a replacement that fits
nowhere but would preempt gets the nominated node, and `preempts` names the victims (their own
replacements are not followed); one that cannot preempt gets the FailedScheduling message with
PostFilter's part ("... preemption: 0/5 nodes are available: ..."), as the scheduler posts it.

Not modelled: the victims' replacements, the random tie-break among equally scored nodes (the plan
names the tied nodes; it picks with a fixed seed), terminating pods still counted by inter-pod
affinity while they shut down, and --timeout.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kse.client.clientset import Clientset
from kse.drain import filters
from kse.drain.drainer import DrainOptions
from kse.objects.labels import SelectorError, label_selector_as_selector, parse_selector
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb
from scheduler.whatif import WhatIfError, what_if

EVICT = "evict"
DELETE = "delete"
SKIP = "skip"
BLOCKED = "blocked"

INDEFINITELY = "indefinitely"
MULTIPLE_PDBS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


class DrainPlanError(Exception):
    """Bad input (a node that does not exist, an invalid selector); the text names it."""


# ---------------------------------------------------------------- the cluster as read


@dataclass
class ClusterState:
    """What the planner reads: from the API (`read_cluster`) or a manifest file (`from_objects`)."""

    nodes: list[pb.Node] = field(default_factory=list)
    pods: list[pb.Pod] = field(default_factory=list)
    pdbs: list[pb.PodDisruptionBudget] = field(default_factory=list)
    priority_classes: list[pb.PriorityClass] = field(default_factory=list)
    replica_sets: list[pb.ReplicaSet] = field(default_factory=list)
    daemon_sets: list[pb.DaemonSet] = field(default_factory=list)


async def read_cluster(cs: Clientset) -> ClusterState:
    """The current objects the plan depends on, each kind listed once."""
    return ClusterState(
        nodes=(await cs.nodes.list_all()).items,
        pods=(await cs.pods.list_all()).items,
        pdbs=(await cs.pod_disruption_budgets.list_all()).items,
        priority_classes=(await cs.priority_classes.list_all()).items,
        replica_sets=(await cs.replica_sets.list_all()).items,
        daemon_sets=(await cs.daemon_sets.list_all()).items,
    )


def from_objects(objects: Iterable[pb.Object]) -> ClusterState:
    """A ClusterState from manifests (Nodes, Pods, PDBs, PriorityClasses, ReplicaSets, DaemonSets)."""
    state = ClusterState()
    lists: dict[str, list[Any]] = {
        "node": state.nodes,
        "pod": state.pods,
        "pod_disruption_budget": state.pdbs,
        "priority_class": state.priority_classes,
        "replica_set": state.replica_sets,
        "daemon_set": state.daemon_sets,
    }
    for obj in objects:
        kind = obj.WhichOneof("kind")
        if kind in lists:
            msg = getattr(obj, kind)
            if kind != "node" and kind != "priority_class" and not msg.metadata.namespace:
                msg.metadata.namespace = "default"
            if kind == "node" and not msg.status.allocatable and msg.status.capacity:
                msg.status.allocatable.update(msg.status.capacity)
            lists[kind].append(msg)
    return state


# ---------------------------------------------------------------- the plan


@dataclass
class Replacement:
    node: str | None
    message: str = ""  # the FailedScheduling message when node is None
    tied_with: list[str] = field(default_factory=list)  # other nodes with the same best score
    preempts: list[str] = field(default_factory=list)  # the victims when it gets `node` by preemption

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "message": self.message}
        if self.tied_with:
            out["tiedWith"] = list(self.tied_with)
        if self.preempts:
            out["preempts"] = list(self.preempts)
        return out


@dataclass
class PodPlan:
    pod: str  # namespace/name
    node: str
    action: str
    reason: str = ""  # kubectl's warning or error text
    controller: str | None = None  # Kind/name of the controller
    pdb: str | None = None  # namespace/name
    disruptions_allowed: int | None = None  # the budget when this pod's turn comes
    blocked_by: str | None = None  # "until N replacement(s) are ready" | "indefinitely"
    round: int | None = None  # the eviction round (0: at once)
    replacement: Replacement | None = None
    priority: int = 0
    uid: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "uid": self.uid,
            "node": self.node,
            "action": self.action,
            "reason": self.reason,
            "controller": self.controller,
            "pdb": self.pdb,
            "disruptionsAllowed": self.disruptions_allowed,
            "blockedBy": self.blocked_by,
            "replacement": self.replacement.to_json() if self.replacement is not None else None,
        }

    @property
    def evicted(self) -> bool:
        """Whether the drain removes this pod (sooner or later)."""
        return self.action in (EVICT, DELETE) and self.blocked_by != INDEFINITELY


@dataclass
class DrainPlan:
    nodes: list[str]
    pods: list[PodPlan]
    created_at: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    # Per controller ("namespace/Kind/name") of an evicted pod: the uids of its pods at plan time,
    # so that `kse drain --report` can tell the replacements from the pods that were already there.
    known_uids: dict[str, list[str]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        actions = [p.action for p in self.pods]
        reps = [p.replacement for p in self.pods if p.replacement is not None and p.evicted]
        indefinite = sum(1 for p in self.pods if p.blocked_by == INDEFINITELY)
        return {
            "pods": len(self.pods),
            "evict": actions.count(EVICT),
            "delete": actions.count(DELETE),
            "skip": actions.count(SKIP),
            "blocked": actions.count(BLOCKED),
            "waitingForBudget": sum(1 for p in self.pods if p.blocked_by not in (None, INDEFINITELY)),
            "blockedIndefinitely": indefinite,
            "replacementsScheduled": sum(1 for r in reps if r.node is not None),
            "replacementsPending": sum(1 for r in reps if r.node is None),
            "completes": BLOCKED not in actions and indefinite == 0,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "DrainPlan",
            "createdAt": self.created_at,
            "nodes": list(self.nodes),
            "options": dict(self.options),
            "pods": [p.to_json() for p in self.pods],
            "summary": self.summary(),
            "knownUids": {k: list(v) for k, v in self.known_uids.items()},
        }


# ---------------------------------------------------------------- helpers


def _key(obj: Any) -> str:
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def _ready(pod: pb.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def _ignores_pdb(pod: pb.Pod) -> bool:
    """Upstream's canIgnorePDB (pkg/registry/core/pod/storage/eviction.go): finished or Pending pods,
    and pods already being deleted, are evicted without consulting a budget."""
    return pod.status.phase in ("Succeeded", "Failed", "Pending", "") or bool(pod.metadata.deletion_timestamp)


def _priority_of(pod: pb.Pod, classes: dict[str, int], default: int) -> int:
    """The priority the API server's Priority admission gives the pod (its spec.priority if set)."""
    if pod.spec.HasField("priority"):
        return pod.spec.priority
    if pod.spec.priority_class_name:
        return classes.get(pod.spec.priority_class_name, 0)
    return default


def _replacements_phrase(n: int) -> str:
    return f"until {n} replacement{'s' if n != 1 else ''} {'are' if n != 1 else 'is'} ready"


class _Budget:
    """One PDB as the eviction subresource sees it during the drain."""

    def __init__(self, pdb: pb.PodDisruptionBudget) -> None:
        self.pdb = pdb
        self.key = _key(pdb)
        self.allowed = pdb.status.disruptions_allowed
        st = pdb.status
        self.met = st.current_healthy >= st.desired_healthy and st.desired_healthy > 0
        if st.observed_generation < pdb.metadata.generation:
            self.allowed = 0  # the API server refuses (429) until the controller has seen the spec
        self.always_allow = pdb.spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
        self.blocked: list[PodPlan] = []  # waiting for replacements, in order
        self.ready_supply = 0  # replacements of evicted pods that will become ready, not yet spent
        self.consumed_ready = 0  # ready replacements already spent on unblocking pods

    def matches(self, pod: pb.Pod) -> bool:
        if pod.metadata.namespace != self.pdb.metadata.namespace:
            return False
        selector = self.pdb.spec.selector if self.pdb.spec.HasField("selector") else None
        try:
            return label_selector_as_selector(selector).matches(pod.metadata.labels)
        except SelectorError:
            return False


# ---------------------------------------------------------------- planning


class _Planner:
    def __init__(
        self,
        state: ClusterState,
        nodes: Sequence[str],
        options: DrainOptions,
        config: str | Path | None,
        seed: int | None,
    ) -> None:
        self.state = state
        self.drain_nodes = list(nodes)
        self.options = options
        self.config = config
        self.seed = seed
        self.classes = {pc.metadata.name: pc.value for pc in state.priority_classes}
        defaults = [pc.value for pc in state.priority_classes if pc.global_default]
        self.default_priority = defaults[0] if defaults else 0
        self.budgets = [_Budget(p) for p in state.pdbs]
        self.replica_sets = {_key(rs): rs for rs in state.replica_sets}
        self.daemon_sets = {_key(ds) for ds in state.daemon_sets}
        self.pod_by_key = {_key(p): p for p in state.pods}
        self.now = now_rfc3339()

    # -- the drain's view of each node

    def _node_pods(self, node: str, selector: Any) -> list[pb.Pod]:
        on = [p for p in self.state.pods if p.spec.node_name == node and selector.matches(p.metadata.labels)]
        return sorted(on, key=_key)  # the API lists in key order, as the drain sees them

    def _controller(self, pod: pb.Pod) -> str | None:
        ref = filters.controller_of(pod)
        return f"{ref.kind}/{ref.name}" if ref is not None else None

    def plan_actions(self) -> list[PodPlan]:
        known = {n.metadata.name for n in self.state.nodes}
        missing = [n for n in self.drain_nodes if n not in known]
        if missing:
            raise DrainPlanError(f'nodes "{missing[0]}" not found')
        try:
            selector = parse_selector(self.options.pod_selector)
        except SelectorError:
            raise DrainPlanError("--pod-selector=<pod_selector> must be a valid label selector") from None
        lookup = filters.lookup_in(self.daemon_sets)
        flags = self.options.filter_flags()
        plans: list[PodPlan] = []
        stopped_at: str | None = None
        for node in self.drain_nodes:
            listing = filters.pods_for_deletion(self._node_pods(node, selector), flags, lookup)
            errors = listing.errors()
            node_error = filters.aggregate(errors) if errors else ""
            for item in listing.items:
                pod = item.pod
                p = PodPlan(
                    _key(pod),
                    node,
                    SKIP,
                    controller=self._controller(pod),
                    priority=_priority_of(pod, self.classes, self.default_priority),
                    uid=pod.metadata.uid,
                )
                st = item.status
                if stopped_at is not None:
                    p.action, p.reason = BLOCKED, f"the drain stops at node {stopped_at}"
                elif st.reason == filters.Reason.ERROR:
                    p.action, p.reason = BLOCKED, st.message
                elif node_error:
                    p.action, p.reason = BLOCKED, f"node {node} is not drained: {node_error}"
                elif not st.delete:
                    p.action, p.reason = SKIP, st.message
                else:
                    p.action = DELETE if self.options.disable_eviction else EVICT
                    p.reason = st.message
                plans.append(p)
            if node_error and stopped_at is None:
                stopped_at = node
        return plans

    # -- budgets

    def apply_budgets(self, plans: list[PodPlan]) -> list[PodPlan]:
        """Mark what the budgets refuse at first; return the pods evicted in round 0."""
        round0 = []
        for p in plans:
            if p.action != EVICT:
                if p.action == DELETE:
                    p.round = 0
                    round0.append(p)
                continue
            pod = self.pod_by_key[p.pod]
            matching = [b for b in self.budgets if b.matches(pod)]
            if len(matching) > 1:
                p.action, p.reason = BLOCKED, MULTIPLE_PDBS
                p.pdb = ", ".join(b.key for b in matching)
                continue
            if matching:
                b = matching[0]
                p.pdb = b.key
                p.disruptions_allowed = b.allowed
                free = _ignores_pdb(pod) or (not _ready(pod) and (b.met or b.always_allow))
                if not free:
                    if b.allowed <= 0 or b.blocked:
                        b.blocked.append(p)
                        continue
                    b.allowed -= 1
            p.round = 0
            round0.append(p)
        return round0

    # -- replacements

    def _replacement_pod(self, p: PodPlan, seq: int) -> pb.Pod | None:
        pod = self.pod_by_key[p.pod]
        ref = filters.controller_of(pod)
        if ref is None or ref.kind == "DaemonSet":
            return None
        new = pb.Pod()
        if ref.kind == "ReplicaSet":
            rs = self.replica_sets.get(f"{pod.metadata.namespace}/{ref.name}")
            if rs is not None:
                new.metadata.labels.update(rs.spec.template.metadata.labels)
                new.spec.CopyFrom(rs.spec.template.spec)
        if not new.spec.containers:
            new.metadata.labels.update(pod.metadata.labels)
            new.spec.CopyFrom(pod.spec)
        new.spec.node_name = ""
        new.metadata.namespace = pod.metadata.namespace
        new.metadata.name = f"{pod.metadata.name}-replacement"
        new.metadata.uid = f"drain-plan/{seq}"
        new.metadata.creation_timestamp = self.now
        new.metadata.owner_references.extend(pod.metadata.owner_references)
        new.spec.priority = _priority_of(new, self.classes, self.default_priority)
        new.status.phase = "Pending"
        return new

    def schedule(
        self, batch: list[PodPlan], bound: list[pb.Pod], nodes: list[pb.Node], first: list[pb.Pod]
    ) -> None:
        """Place `first` (pods already Pending) and then the replacements of `batch`, in queue order,
        each assumed (appended to `bound`) before the next."""
        queue: list[tuple[int, int, pb.Pod, PodPlan | None]] = []
        for i, pod in enumerate(first):
            queue.append((-_priority_of(pod, self.classes, self.default_priority), i - len(first), pod, None))
        for i, p in enumerate(batch):
            rep = self._replacement_pod(p, len(bound) + i)
            if rep is None:
                continue
            queue.append((-rep.spec.priority, i, rep, p))
        queue.sort(key=lambda q: (q[0], q[1]))
        for _, _, pod, plan in queue:
            try:
                result = what_if(nodes, bound, pod, config=self.config, seed=self.seed, pdbs=self.state.pdbs)
            except WhatIfError as e:
                raise DrainPlanError(str(e)) from None
            pf = result.post_filter
            selected = result.selected
            if selected is None and (pf is None or pf.nominated_node is None):
                if plan is not None:
                    # The scheduler's FailedScheduling message: the FitError, then PostFilter's own in
                    # upstream's SeparatorFormat " %v." (hence its ".." ending; FitError's __str__).
                    message = result.message + (f" {pf.message}." if pf is not None and pf.message else "")
                    plan.replacement = Replacement(None, message)
                continue
            if selected is None and pf is not None and pf.nominated_node is not None:
                # Preemption: the victims go (their own replacements are not followed), the pod
                # takes the nominated node.
                victims = set(pf.victims)
                bound[:] = [b for b in bound if _key(b) not in victims]
                placed = copy.deepcopy(pod)
                placed.spec.node_name = pf.nominated_node
                bound.append(placed)
                if plan is not None:
                    plan.replacement = Replacement(pf.nominated_node, "", preempts=sorted(victims))
                continue
            if selected is None:
                continue
            placed = copy.deepcopy(pod)
            placed.spec.node_name = selected
            bound.append(placed)
            if plan is not None:
                best = max(o.total for o in result.nodes.values() if o.passed)
                ties = [
                    n
                    for n, o in result.nodes.items()
                    if o.passed and o.total == best and n != result.selected
                ]
                plan.replacement = Replacement(result.selected, "", ties)

    def run(self) -> DrainPlan:
        plans = self.plan_actions()
        batch = self.apply_budgets(plans)
        drained = set(self.drain_nodes)
        nodes = []
        for n in self.state.nodes:
            c = copy.deepcopy(n)
            if c.metadata.name in drained:
                c.spec.unschedulable = True
            nodes.append(c)
        gone = {p.pod for p in batch}
        bound = [p for p in self.state.pods if p.spec.node_name and _key(p) not in gone]
        pending = [p for p in self.state.pods if not p.spec.node_name and not p.metadata.deletion_timestamp]
        pending.sort(key=lambda p: (p.metadata.creation_timestamp, _key(p)))
        rnd = 0
        while batch:
            self.schedule(batch, bound, nodes, pending if rnd == 0 else [])
            for p in batch:
                if p.replacement is not None and p.replacement.node is not None and p.pdb:
                    for b in self.budgets:
                        if b.key == p.pdb:
                            b.ready_supply += 1
            rnd += 1
            batch = []
            for b in self.budgets:
                released = 0
                while b.blocked and b.ready_supply > 0:
                    p = b.blocked.pop(0)
                    b.ready_supply -= 1
                    released += 1
                    p.blocked_by = _replacements_phrase(b.consumed_ready + released)
                    p.round = rnd
                    batch.append(p)
                b.consumed_ready += released
            gone |= {p.pod for p in batch}
            bound = [p for p in bound if _key(p) not in gone]
        for b in self.budgets:
            for p in b.blocked:
                p.blocked_by = INDEFINITELY
        return DrainPlan(self.drain_nodes, plans, self.now, _options_json(self.options), self._known(plans))

    def _known(self, plans: list[PodPlan]) -> dict[str, list[str]]:
        wanted = {controller_key(p) for p in plans if p.replacement is not None}
        out: dict[str, list[str]] = {k: [] for k in sorted(wanted)}
        for pod in self.state.pods:
            ref = filters.controller_of(pod)
            if ref is None:
                continue
            k = f"{pod.metadata.namespace}/{ref.kind}/{ref.name}"
            if k in out:
                out[k].append(pod.metadata.uid)
        return out


def controller_key(p: PodPlan) -> str:
    """ "namespace/Kind/name" of the pod's controller ("" without one)."""
    return f"{p.pod.split('/', 1)[0]}/{p.controller}" if p.controller else ""


def _options_json(o: DrainOptions) -> dict[str, Any]:
    return {
        "force": o.force,
        "ignoreDaemonsets": o.ignore_daemonsets,
        "deleteEmptydirData": o.delete_emptydir_data,
        "disableEviction": o.disable_eviction,
        "podSelector": o.pod_selector,
        "skipWaitForDeleteTimeout": o.skip_wait_for_delete_timeout,
    }


def plan_drain(
    state: ClusterState,
    nodes: Sequence[str],
    options: DrainOptions | None = None,
    *,
    config: str | Path | None = None,
    seed: int | None = 0,
) -> DrainPlan:
    """The plan for draining `nodes` of `state` (module doc). Raises DrainPlanError."""
    if not nodes:
        raise DrainPlanError("no node to drain: name at least one")
    return _Planner(state, nodes, options or DrainOptions(), config, seed).run()


# ---------------------------------------------------------------- output


def _pod_verdict(p: PodPlan) -> str:
    if p.action == BLOCKED:
        return f"blocked: {p.reason}"
    if p.blocked_by is not None:
        return (
            f"{p.action} (waits {p.blocked_by})" if p.blocked_by != INDEFINITELY else "blocked indefinitely"
        )
    return p.action + (f" ({p.reason})" if p.reason else "")


def format_table(plan: DrainPlan) -> str:
    """A row per pod: NODE, POD, ACTION, PDB (with the budget at its turn), REPLACEMENT (its node, or
    "Pending: <FailedScheduling message>", or "-"); then the summary line."""
    from kse.printers import render_table

    rows = []
    for p in plan.pods:
        pdb = "-" if p.pdb is None else f"{p.pdb} (allowed {p.disruptions_allowed})"
        if p.replacement is None or not p.evicted:
            rep = "-"
        elif p.replacement.node is None:
            rep = f"Pending: {p.replacement.message}"
        else:
            rep = p.replacement.node + (
                f" (tied with {', '.join(p.replacement.tied_with)})" if p.replacement.tied_with else ""
            )
        rows.append([p.node, p.pod, _pod_verdict(p), pdb, rep])
    out = f"drain plan for {', '.join(plan.nodes)}\n"
    out += render_table(["NODE", "POD", "ACTION", "PDB", "REPLACEMENT"], rows) if rows else "no pods\n"
    s = plan.summary()
    out += (
        f"summary: {s['evict']} evict, {s['delete']} delete, {s['skip']} skip, {s['blocked']} blocked, "
        f"{s['waitingForBudget']} wait for a budget, {s['blockedIndefinitely']} blocked indefinitely; "
        f"replacements: {s['replacementsScheduled']} scheduled, {s['replacementsPending']} pending; "
        f"the drain {'completes' if s['completes'] else 'does not complete'}\n"
    )
    return out
