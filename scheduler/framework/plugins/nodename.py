"""NodeName: a pod that names its node only fits that node (upstream plugins/nodename)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    ClusterEventWithHint,
    FrameworkHandle,
    PreFilterExtensions,
    PreFilterResult,
)
from scheduler.framework.nodeinfo import NodeInfo, Snapshot
from scheduler.framework.types import ActionType, ClusterEvent, Code, EventResource, PodInfo, Status

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    # Filter reads the node and the pod, never the pods on the node (preemption's dry run
    # evaluates it once per node: scheduler.framework.plugins.defaultpreemption.victims).
    FILTER_READS_NODE_PODS = False

    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only a new node can carry the requested name (no hint: upstream has none).
        return [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD))]

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        node_name = pod_info.pod.spec.node_name
        if node_name:
            return PreFilterResult({node_name}), None
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        if not fits(pod_info, node_info):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON])
        return None

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        wanted = pod_info.pod.spec.node_name
        if not wanted:
            return np.ones(len(indices), bool)
        try:
            index = snapshot.index_of(wanted)
        except KeyError:
            return np.zeros(len(indices), bool)
        mask: npt.NDArray[np.bool_] = indices == index
        return mask


def fits(pod_info: PodInfo, node_info: NodeInfo) -> bool:
    wanted = pod_info.pod.spec.node_name
    return not wanted or wanted == node_info.name


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> NodeName:
    return NodeName()
