"""The soak's continuous safety checks: what the end-of-run checker proves from the history, checked
as the run goes on from the chaos runner's own watch, so an hour-long soak stops at the first
violation (its data dir kept) instead of reporting it an hour later.

Two properties hold at every point of a correct run, and are visible in one watch stream:

- a pod is bound once: its `spec.nodeName`, once set, never changes to another node (the binding
  subresource refuses a second bind; a pod that moves was bound twice, or recreated under the same
  uid, which the API server never does);
- no node is over-committed: the requests of the non-terminated pods bound to a node fit its
  allocatable, and so does their count ("pods"), as NodeResourcesFit counts them.

The watch delivers pod events in revision order, so the state this guard sees is a state the
cluster was in (a pod that finished or was deleted leaves before a bind that reuses its room).
Everything else (stale writes, lost events, audit against etcd) needs the whole history and is
checked at the end.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from chaos.checker.invariants import TERMINAL_PHASES
from kse.objects.meta import key_of
from kse.objects.podresources import pod_requests, resource_list_units
from kse.objects.quantity import QuantityError
from proto import kse_pb2 as pb

__all__ = ["SafetyGuard", "Violation"]


@dataclass(frozen=True)
class Violation:
    """The first broken property: which check, and what the watch showed."""

    check: str  # "pods_bound_once" | "no_overcommit"
    detail: str


class SafetyGuard:
    """Fed the chaos runner's pod and node informer events; `violation` is the first broken
    property (None while all hold). Handlers never raise: a guard that crashed the informer would
    end the run for the wrong reason."""

    def __init__(self) -> None:
        self.violation: Violation | None = None
        self._bound: dict[str, tuple[str, str]] = {}  # pod uid -> (node, pod key)
        self._alloc: dict[str, dict[str, int]] = {}
        self._placed: dict[str, dict[str, pb.Pod]] = defaultdict(dict)  # node -> uid -> pod
        self.binds_seen = 0

    # ------------------------------------------------------------------ nodes

    def node_added(self, node: pb.Node) -> None:
        try:
            self._alloc[node.metadata.name] = resource_list_units(node.status.allocatable)
        except QuantityError:
            self._alloc.pop(node.metadata.name, None)  # unparseable: not judged (the checker counts it)

    def node_updated(self, _old: pb.Node, new: pb.Node) -> None:
        self.node_added(new)

    # ------------------------------------------------------------------ pods

    def pod_added(self, pod: pb.Pod) -> None:
        self._observe(pod)

    def pod_updated(self, _old: pb.Pod, new: pb.Pod) -> None:
        self._observe(new)

    def pod_deleted(self, pod: pb.Pod) -> None:
        uid = pod.metadata.uid
        placed = self._bound.pop(uid, None)
        if placed is not None:
            self._placed[placed[0]].pop(uid, None)

    def _observe(self, pod: pb.Pod) -> None:
        node = pod.spec.node_name
        if not node:
            return
        uid = pod.metadata.uid
        before = self._bound.get(uid)
        if before is None:
            self._bound[uid] = (node, key_of(pod))
            self.binds_seen += 1
        elif before[0] != node:
            self._fail(
                "pods_bound_once",
                f"pod {key_of(pod)} (uid {uid}) moved from node {before[0]} to {node} "
                f"at resourceVersion {pod.metadata.resource_version}",
            )
            return
        if pod.status.phase in TERMINAL_PHASES:
            self._placed[node].pop(uid, None)
            return
        if uid not in self._placed[node]:
            self._placed[node][uid] = pod
            self._check_node(node, pod)

    def _check_node(self, node: str, newest: pb.Pod) -> None:
        alloc = self._alloc.get(node)
        if alloc is None:
            return  # a node the watch has not shown (yet): the end-of-run check judges it
        used: dict[str, int] = defaultdict(int)
        pods = self._placed[node]
        for p in pods.values():
            try:
                for r, v in pod_requests(p).items():
                    used[r] += v
            except QuantityError:
                continue
        over = [f"{r} {v}>{alloc.get(r, 0)}" for r, v in sorted(used.items()) if v > alloc.get(r, 0)]
        if len(pods) > alloc.get("pods", 0):
            over.append(f"pods {len(pods)}>{alloc.get('pods', 0)}")
        if over:
            self._fail(
                "no_overcommit",
                f"node {node} over-committed after {key_of(newest)} was bound "
                f"(resourceVersion {newest.metadata.resource_version}): {', '.join(over)}",
            )

    def _fail(self, check: str, detail: str) -> None:
        if self.violation is None:
            self.violation = Violation(check, detail)
