"""Plain data shared by the framework, the plugins and the queue.

Shapes follow upstream `pkg/scheduler/framework/types.go` and `interface.go` (Status codes,
ClusterEvent, QueuedPodInfo) so a Kubernetes engineer recognises them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from proto import kse_pb2 as pb


class Code(enum.IntEnum):
    """Status codes, as upstream's framework.Code."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    # Unschedulable, and preemption on this node would not help either.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass
class Status:
    """The result of running a plugin. `None` as a status means success, as upstream's nil."""

    code: Code = Code.SUCCESS
    reasons: list[str] = field(default_factory=list)
    plugin: str = ""  # the plugin that failed, filled in by the framework

    @classmethod
    def unschedulable(cls, *reasons: str, resolvable: bool = True) -> Status:
        code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return cls(code, list(reasons))

    @classmethod
    def error(cls, message: str) -> Status:
        return cls(Code.ERROR, [message])

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


class EventResource(enum.Enum):
    """What changed in the cluster, as upstream's framework.EventResource."""

    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    WILDCARD = "*"


class ActionType(enum.IntFlag):
    """How it changed, as upstream's framework.ActionType (a bit set)."""

    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_POD_TOLERATIONS = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 2048
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATIONS
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
    )
    ALL = ADD | DELETE | UPDATE


@dataclass(frozen=True)
class ClusterEvent:
    """A kind of change in the cluster that may make pending pods schedulable."""

    resource: EventResource
    action: ActionType
    label: str = ""

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether a registered interest (self) covers an incoming event, as upstream's Match."""
        resource_ok = (
            self.resource == EventResource.WILDCARD
            or self.resource == incoming.resource
            or (
                self.resource == EventResource.POD
                and incoming.resource in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)
            )
        )
        return resource_ok and bool(self.action & incoming.action)


class QueueingHint(enum.Enum):
    """A plugin's verdict on whether an event may make a rejected pod schedulable."""

    QUEUE = "Queue"
    SKIP = "QueueSkip"


@dataclass
class PodInfo:
    """A pod plus what the scheduler derives from it once (requests, parsed affinity, ...)."""

    pod: pb.Pod

    @property
    def key(self) -> str:
        return f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"


@dataclass
class QueuedPodInfo:
    """A pod in the scheduling queue, with the bookkeeping upstream's QueuedPodInfo keeps."""

    pod_info: PodInfo
    timestamp: float  # when it was last added to the queue (for the QueueSort tie-break: age)
    initial_attempt_timestamp: float | None = None  # first time it was popped (for the SLI)
    attempts: int = 0
    # Plugins that rejected it in its last attempt: only events they registered can move it back.
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False  # held by PreEnqueue (e.g. scheduling gates)

    @property
    def pod(self) -> pb.Pod:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key
