"""NodeUnschedulable: cordoned nodes (spec.unschedulable) take only pods that tolerate the
node.kubernetes.io/unschedulable:NoSchedule taint (upstream plugins/nodeunschedulable)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import ClusterEventWithHint, FrameworkHandle
from scheduler.framework.nodeinfo import NodeInfo, Snapshot, Taint
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.plugins.helper.taints import (
    TAINT_EFFECT_NO_SCHEDULE,
    TAINT_NODE_UNSCHEDULABLE,
    Toleration,
    pod_tolerations,
    tolerations_tolerate_taint,
)
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
)

NAME = "NodeUnschedulable"
ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", TAINT_EFFECT_NO_SCHEDULE)


class NodeUnschedulable:
    # Filter reads the node and the pod, never the pods on the node (preemption's dry run
    # evaluates it once per node: scheduler.framework.plugins.defaultpreemption.victims).
    FILTER_READS_NODE_PODS = False

    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                self.is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Node, old, new)
        assert modified is not None
        # A node that became schedulable, or a new schedulable node.
        if (original is not None and original.spec.unschedulable and not modified.spec.unschedulable) or (
            original is None and not modified.spec.unschedulable
        ):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pod_toleration_change(
        self, pod: pb.Pod, old: object, new: object
    ) -> QueueingHint:
        _, modified = as_objects(pb.Pod, old, new)
        assert modified is not None
        if modified.metadata.uid == pod.metadata.uid:
            # Tolerations can only be added, so a rejected pod did not tolerate the taint before.
            tolerations = [Toleration.from_proto(t) for t in modified.spec.tolerations]
            if tolerations_tolerate_taint(tolerations, _UNSCHEDULABLE_TAINT):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.node is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_UNKNOWN_CONDITION])
        if not node_info.unschedulable:
            return None
        # A pod that tolerates the unschedulable taint also tolerates spec.unschedulable.
        if tolerations_tolerate_taint(pod_tolerations(pod_info), _UNSCHEDULABLE_TAINT):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_UNSCHEDULABLE])

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        """`filter` for many nodes (every snapshot node has its Node object)."""
        if tolerations_tolerate_taint(pod_tolerations(pod_info), _UNSCHEDULABLE_TAINT):
            return np.ones(len(indices), bool)
        mask: npt.NDArray[np.bool_] = ~snapshot.arrays().unschedulable[indices]
        return mask


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> NodeUnschedulable:
    return NodeUnschedulable()
