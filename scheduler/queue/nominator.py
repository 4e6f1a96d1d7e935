"""The nominator: pods nominated to run on a node by preemption (upstream
``pkg/scheduler/backend/queue/nominator.go``).

A pod that preempted others carries ``status.nominatedNodeName`` until it is bound. While it
waits for its victims to go, the framework counts it on that node when it filters *other* pods of
lower or equal priority (``Framework.run_filter_plugins_with_nominated_pods``), so the room the
preemption made is not taken by someone else.

As upstream:

* ``add_nominated_pod(pod_info, nominating)``: ``nominating`` None is ModeNoop (use the pod's
  own ``status.nominatedNodeName``, nothing if empty); a ``NominatingInfo`` is ModeOverride (its
  node, which may be "" to clear). A pod the pod lookup says is gone or bound is not nominated.
* ``update_nominated_pod(old, new)``: an update that neither adds, changes nor removes the
  nomination keeps the node reserved in memory (the informer may deliver the pod without the
  field right after the scheduler nominated it and before the status write lands).
* ``delete_nominated_pod_if_exists(pod)``.
* ``nominated_pods_for_node(node)``: the pod infos, in nomination order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kse.objects.meta import uid_key
from proto import kse_pb2 as pb
from scheduler.framework.types import PodInfo

PodLookup = Callable[[str, str], pb.Pod | None]


@dataclass(frozen=True)
class NominatingInfo:
    """ModeOverride with this node ("" clears the nomination); None stands for ModeNoop."""

    nominated_node_name: str = ""


class Nominator:
    """Nominated pods per node (see the module doc). Synchronous, one event loop."""

    def __init__(self, pod_lookup: PodLookup | None = None) -> None:
        self.pod_lookup = pod_lookup
        self._by_node: dict[str, list[PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._node_of)

    def add_nominated_pod(self, pod_info: PodInfo, nominating: NominatingInfo | None = None) -> None:
        pod = pod_info.pod
        # Never more than one instance of the pod.
        self.delete_nominated_pod_if_exists(pod)
        if nominating is not None:
            node = nominating.nominated_node_name
        else:
            node = pod.status.nominated_node_name
        if not node:
            return
        if self.pod_lookup is not None:
            current = self.pod_lookup(pod.metadata.namespace, pod.metadata.name)
            if current is None or current.spec.node_name or current.metadata.uid != pod.metadata.uid:
                return  # removed, or already scheduled: nothing to reserve
        key = uid_key(pod)
        self._node_of[key] = node
        pods = self._by_node.setdefault(node, [])
        if not any(p.uid_key == key for p in pods):
            pods.append(pod_info)

    def update_nominated_pod(self, old: pb.Pod, new: PodInfo) -> None:
        nominating: NominatingInfo | None = None
        if not old.status.nominated_node_name and not new.pod.status.nominated_node_name:
            node = self._node_of.get(uid_key(old))
            if node is not None:
                nominating = NominatingInfo(node)  # keep the in-memory reservation
        self.delete_nominated_pod_if_exists(old)
        self.add_nominated_pod(new, nominating)

    def delete_nominated_pod_if_exists(self, pod: pb.Pod) -> None:
        key = uid_key(pod)
        node = self._node_of.pop(key, None)
        if node is None:
            return
        pods = [p for p in self._by_node.get(node, ()) if p.uid_key != key]
        if pods:
            self._by_node[node] = pods
        else:
            self._by_node.pop(node, None)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self._by_node.get(node_name, ()))

    def nominated_node_of(self, pod: pb.Pod) -> str | None:
        return self._node_of.get(uid_key(pod))

    def has_nominated_pods(self) -> bool:
        return bool(self._node_of)

    def nodes(self) -> list[str]:
        """Nodes with at least one nominated pod."""
        return list(self._by_node)
