"""The unschedulable pods (upstream UnschedulablePods), with the pods an assigned pod may help
kept apart.

Every pod bound (or updated while bound) asks which unschedulable pods it could make schedulable
(upstream getUnschedulablePodsWithCrossTopologyTerm): those PodTopologySpread rejected and those
with a required pod-affinity term. Upstream walks every unschedulable pod for that, per event; a
cluster with 10000 gated pods (scheduler_perf's SchedulingWhileGated) then pays 10000 checks per
bind. Here the pods that could answer yes are found when they are added, so the walk covers them
alone and gives the same answer (`rejected_by_cross_topology_term` still decides each).

Likewise every cluster event offers the unschedulable pods to be moved, and a gated pod may move
only on an event its gating plugin registered: gated pods are grouped by gating plugin and events,
so an event that no group registered passes them over in one check per group instead of one per
pod (the queue still checks each pod it is offered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from proto import kse_pb2 as pb
from scheduler.framework.types import ClusterEvent, QueuedPodInfo

from .pod_events import POD_TOPOLOGY_SPREAD


def may_be_helped_by_an_assigned_pod(pinfo: QueuedPodInfo) -> bool:
    """The pods `rejected_by_cross_topology_term` can say yes to: rejected by PodTopologySpread,
    or with required pod affinity (a pod's affinity is immutable; its rejecting plugins are set
    before it is added)."""
    if POD_TOPOLOGY_SPREAD in pinfo.unschedulable_plugins:
        return True
    spec = pinfo.pod.spec
    return (
        spec.HasField("affinity")
        and spec.affinity.HasField("pod_affinity")
        and bool(spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution)
    )


Gate = tuple[str, tuple[ClusterEvent, ...]]


def _gate_of(pinfo: QueuedPodInfo) -> Gate | None:
    """The group of a gated pod: its gating plugin and the events that plugin registered."""
    return (pinfo.gating_plugin, tuple(pinfo.gating_plugin_events)) if pinfo.gated else None


class UnschedulablePods:
    """key -> QueuedPodInfo, as a dict, plus `cross_topology_candidates()` and `offered_for()`.
    A pod changed in place (its PodInfo replaced, its gate re-evaluated) is set again, so it is
    filed where it now belongs."""

    __slots__ = ("_cross", "_gate", "_gated", "_pods", "_ungated")

    def __init__(self) -> None:
        self._pods: dict[str, QueuedPodInfo] = {}
        self._cross: dict[str, QueuedPodInfo] = {}
        self._ungated: dict[str, QueuedPodInfo] = {}
        self._gated: dict[Gate, dict[str, QueuedPodInfo]] = {}
        self._gate: dict[str, Gate] = {}

    def __setitem__(self, key: str, pinfo: QueuedPodInfo) -> None:
        """Add or replace; also after the pod was changed in place."""
        self._unfile(key)
        self._pods[key] = pinfo
        if may_be_helped_by_an_assigned_pod(pinfo):
            self._cross[key] = pinfo
        gate = _gate_of(pinfo)
        if gate is None:
            self._ungated[key] = pinfo
        else:
            self._gate[key] = gate
            self._gated.setdefault(gate, {})[key] = pinfo

    def _unfile(self, key: str) -> None:
        self._cross.pop(key, None)
        self._ungated.pop(key, None)
        gate = self._gate.pop(key, None)
        if gate is not None:
            group = self._gated[gate]
            del group[key]
            if not group:
                del self._gated[gate]

    def pop(self, key: str, default: QueuedPodInfo | None = None) -> QueuedPodInfo | None:
        self._unfile(key)
        return self._pods.pop(key, default)

    def offered_for(
        self, event: ClusterEvent, pre_check: Callable[[pb.Pod], bool] | None
    ) -> list[QueuedPodInfo]:
        """The pods a cluster event may move: every ungated pod, and the gated pods of the groups
        whose plugin registered an event matching it (each passing `pre_check`, if given)."""
        pods = list(self._ungated.values())
        for (_, events), group in self._gated.items():
            if any(e.matches(event) for e in events):
                pods.extend(group.values())
        if pre_check is not None:
            pods = [p for p in pods if pre_check(p.pod)]
        return pods

    def get(self, key: str) -> QueuedPodInfo | None:
        return self._pods.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pods)

    def values(self) -> Iterable[QueuedPodInfo]:
        return self._pods.values()

    def cross_topology_candidates(self) -> Iterable[QueuedPodInfo]:
        """The pods that may be helped by an assigned pod (module doc), in insertion order."""
        return self._cross.values()
