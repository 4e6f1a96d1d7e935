"""NodePorts: the pod's host ports must be free on the node (upstream plugins/nodeports)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.interface import (
    ClusterEventWithHint,
    FrameworkHandle,
    PreFilterExtensions,
    PreFilterResult,
)
from scheduler.framework.nodeinfo import HostPortInfo, NodeInfo, pod_host_ports_of
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.plugins.helper.status import state_read_status
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
)

NAME = "NodePorts"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


@dataclass(frozen=True)
class _PreFilterState:
    ports: tuple[tuple[str, str, int], ...]

    def clone(self) -> _PreFilterState:
        return self  # not affected by adding or removing other pods


def fits_ports(want: Sequence[tuple[str, str, int]], used: HostPortInfo) -> bool:
    return not any(used.check_conflict(ip, protocol, port) for ip, protocol, port in want)


class NodePorts:
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Deleting a pod that held a port the pod wants frees it.
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                self.is_schedulable_after_assigned_pod_deleted,
            ),
            # A new node has no ports in use. (Upstream registers no hint here either.)
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
        ]

    def is_schedulable_after_assigned_pod_deleted(
        self, pod: pb.Pod, old: object, new: object
    ) -> QueueingHint:
        deleted, _ = as_objects(pb.Pod, old, new)
        assert deleted is not None
        if not deleted.spec.node_name and not deleted.status.nominated_node_name:
            return QueueingHint.SKIP
        freed = pod_host_ports_of(deleted)
        if not freed:
            return QueueingHint.SKIP
        used = HostPortInfo()
        for ip, protocol, port in freed:
            used.add(ip, protocol, port)
        # Queue only when the deleted pod's ports overlap the pod's.
        return QueueingHint.SKIP if fits_ports(pod_host_ports_of(pod), used) else QueueingHint.QUEUE

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        ports = pod_info.host_ports
        if not ports:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(ports))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_FILTER_STATE_KEY, e)
        assert isinstance(s, _PreFilterState)
        if not fits_ports(s.ports, node_info.used_ports):
            return Status(Code.UNSCHEDULABLE, [ERR_REASON])
        return None


def fits(pod_info: PodInfo, node_info: NodeInfo) -> bool:
    """Whether the pod's host ports are free on the node (upstream nodeports.Fits)."""
    return fits_ports(pod_info.host_ports, node_info.used_ports)


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> NodePorts:
    return NodePorts()
