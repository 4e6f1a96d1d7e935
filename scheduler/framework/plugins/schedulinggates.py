"""SchedulingGates: a pod with spec.schedulingGates waits until they are all removed
(upstream plugins/schedulinggates)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proto import kse_pb2 as pb
from scheduler.framework.interface import ClusterEventWithHint, FrameworkHandle
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
)

NAME = "SchedulingGates"


class SchedulingGates:
    def name(self) -> str:
        return NAME

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        gates = [g.name for g in pod_info.pod.spec.scheduling_gates]
        if not gates:
            return None
        # Go's %v of a []string: [a b]
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [f"waiting for scheduling gates: [{' '.join(gates)}]"]
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                self.is_schedulable_after_gates_eliminated,
            )
        ]

    def is_schedulable_after_gates_eliminated(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        _, modified = as_objects(pb.Pod, old, new)
        assert modified is not None
        # Only the update of the gated pod itself can release it.
        return QueueingHint.QUEUE if modified.metadata.uid == pod.metadata.uid else QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> SchedulingGates:
    return SchedulingGates()
