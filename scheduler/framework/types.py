"""Plain data shared by the framework, the plugins and the queue.

Shapes follow upstream `pkg/scheduler/framework/types.go` and `interface.go` (Status codes,
ClusterEvent, QueuedPodInfo) so a Kubernetes engineer recognises them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from kse.objects import meta
from kse.objects.meta import object_key
from proto import kse_pb2 as pb

if TYPE_CHECKING:
    from scheduler.framework.nodeinfo import PodResource

# Upstream NoNodeAvailableMsg: the head of every FitError message.
NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
# Upstream framework.ExtenderName: stands for the extenders in Diagnosis.UnschedulablePlugins
# (they have no EnqueueExtensions, so any cluster event may help a pod they rejected).
EXTENDER_NAME = "Extender"


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
    """The result of running a plugin. `None` as a status means success, as upstream's nil.

    An Error status may carry the error that caused it (`err`, upstream Status.err): a plugin
    that fails on an exception returns `as_status(exc)`, and the framework keeps that error when
    it rewords the status ("running Bind plugin ...: <message>"), as Go's `%w` keeps the error
    `errors.As` finds. That is how the scheduler learns the *type* of a failed bind (a conflict,
    a fenced write) without a side table. `err` takes no part in equality.
    """

    code: Code = Code.SUCCESS
    reasons: list[str] = field(default_factory=list)
    plugin: str = ""  # the plugin that failed, filled in by the framework
    err: BaseException | None = field(default=None, compare=False, repr=False)

    @classmethod
    def unschedulable(cls, *reasons: str, resolvable: bool = True) -> Status:
        code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return cls(code, list(reasons))

    @classmethod
    def error(cls, message: str) -> Status:
        return cls(Code.ERROR, [message])

    def as_error(self) -> BaseException | None:
        """The error of a failed status (upstream Status.AsError, framework/interface.go): the
        carried error when there is one, else an Exception with the status's message; None for
        Success, Wait and Skip, which are not failures."""
        if self.code in (Code.SUCCESS, Code.WAIT, Code.SKIP):
            return None
        if self.err is not None:
            return self.err
        return Exception(self.message())

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


def as_status(err: BaseException) -> Status:
    """An Error status carrying `err`, its message the error's text (upstream framework.AsStatus)."""
    return Status(Code.ERROR, [str(err)], err=err)


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
        # On the ints: IntFlag's own `&` builds a new flag member, and this runs for every
        # registered hint on every pod add and update (a measurable share of the e2e path).
        return resource_ok and bool(int(self.action) & int(incoming.action))


class QueueingHint(enum.Enum):
    """A plugin's verdict on whether an event may make a rejected pod schedulable."""

    QUEUE = "Queue"
    SKIP = "QueueSkip"


HostPorts = tuple[tuple[str, str, int], ...]
_UNSET: Any = object()  # a lazy PodInfo attribute not computed yet (None is a value: start_epoch)


@dataclass(slots=True)
class PodInfo:
    """A pod plus what the scheduler derives from it once (requests, parsed affinity, ...).

    The derived data below is computed lazily, at most once per PodInfo: the scheduler evaluates
    one pod against thousands of nodes, and a NodeInfo adds and removes the same pod many times.
    A PodInfo is therefore immutable once any of it was read: when the pod object changes, build
    a new PodInfo (as upstream's PodInfo.Update does for anything but the identical pod).
    Plugins keep their own per-pod parsed data (tolerations, node affinity, ...) in `derived`,
    keyed by plugin name.

    Slots, not functools.cached_property: the cache holds a PodInfo per pod, and cached values
    filled in varying orders turned each instance's __dict__ into a full table of ~400 bytes.
    """

    pod: pb.Pod
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _uid_key: str = field(default=_UNSET, init=False, repr=False, compare=False)
    _labels: dict[str, str] = field(default=_UNSET, init=False, repr=False, compare=False)
    _requests: dict[str, int] = field(default=_UNSET, init=False, repr=False, compare=False)
    _non_zero_requests: dict[str, int] = field(default=_UNSET, init=False, repr=False, compare=False)
    _resource: PodResource = field(default=_UNSET, init=False, repr=False, compare=False)
    _host_ports: HostPorts = field(default=_UNSET, init=False, repr=False, compare=False)
    _priority: int = field(default=_UNSET, init=False, repr=False, compare=False)
    _start_epoch: float | None = field(default=_UNSET, init=False, repr=False, compare=False)
    _has_affinity: bool = field(default=_UNSET, init=False, repr=False, compare=False)
    _has_required_anti_affinity: bool = field(default=_UNSET, init=False, repr=False, compare=False)

    def carry_derived_from(self, other: PodInfo) -> None:
        """Take over what `other` (a PodInfo of the same pod spec and labels) has computed."""
        for slot in _LAZY_SLOTS:
            setattr(self, slot, getattr(other, slot))
        self.derived = other.derived

    @property
    def key(self) -> str:
        """The queue's key for the pod, "namespace/name" (client-go MetaNamespaceKeyFunc)."""
        md = self.pod.metadata
        return object_key(md.namespace, md.name)

    @property
    def uid_key(self) -> str:
        """The key NodeInfo uses for the pod: its UID (upstream GetPodKey), else namespace/name."""
        got = self._uid_key
        if got is _UNSET:
            got = self._uid_key = meta.uid_key(self.pod)
        return got

    @property
    def labels(self) -> dict[str, str]:
        got = self._labels
        if got is _UNSET:
            got = self._labels = dict(self.pod.metadata.labels)
        return got

    @property
    def requests(self) -> dict[str, int]:
        """The pod's effective requests (cpu in millicores, everything else in units)."""
        got = self._requests
        if got is _UNSET:
            from scheduler.framework.nodeinfo import pod_requests_of

            got = self._requests = pod_requests_of(self.pod)
        return got

    @property
    def non_zero_requests(self) -> dict[str, int]:
        """Requests with upstream's non-zero defaults (100m cpu, 200Mi memory) for containers
        that set none, as the scoring plugins use them."""
        got = self._non_zero_requests
        if got is _UNSET:
            from scheduler.framework.nodeinfo import non_zero_pod_requests_of

            got = self._non_zero_requests = non_zero_pod_requests_of(self.pod, self.requests)
        return got

    @property
    def resource(self) -> PodResource:
        """What adding this pod to a node adds to NodeInfo.requested / non_zero_requested."""
        got = self._resource
        if got is _UNSET:
            from scheduler.framework.nodeinfo import pod_resource_of

            got = self._resource = pod_resource_of(self)
        return got

    @property
    def host_ports(self) -> HostPorts:
        """(hostIP, protocol, hostPort) of every host port the pod uses, sanitized."""
        got = self._host_ports
        if got is _UNSET:
            from scheduler.framework.nodeinfo import pod_host_ports_of

            got = self._host_ports = pod_host_ports_of(self.pod)
        return got

    @property
    def priority(self) -> int:
        """spec.priority, or 0 when unset (helper.priority.pod_priority, corev1helpers
        PodPriority): read for every pod of every node a preemption dry run visits."""
        got = self._priority
        if got is _UNSET:
            spec = self.pod.spec
            got = self._priority = spec.priority if spec.HasField("priority") else 0
        return got

    @property
    def start_epoch(self) -> float | None:
        """status.startTime in epoch seconds, None when unset or unparseable (the victim
        ordering then counts the pod as starting now: preemption.util.pod_start_time)."""
        got = self._start_epoch
        if got is _UNSET:
            from kse.objects.timeutil import epoch_or_none

            got = self._start_epoch = epoch_or_none(self.pod.status.start_time)
        return got

    @property
    def has_affinity(self) -> bool:
        got = self._has_affinity
        if got is _UNSET:
            spec = self.pod.spec
            a = spec.affinity
            got = self._has_affinity = spec.HasField("affinity") and (
                a.HasField("pod_affinity") or a.HasField("pod_anti_affinity")
            )
        return got

    @property
    def has_required_anti_affinity(self) -> bool:
        got = self._has_required_anti_affinity
        if got is _UNSET:
            spec = self.pod.spec
            a = spec.affinity
            got = self._has_required_anti_affinity = (
                spec.HasField("affinity")
                and a.HasField("pod_anti_affinity")
                and len(a.pod_anti_affinity.required_during_scheduling_ignored_during_execution) > 0
            )
        return got


# The slots of PodInfo's lazily computed attributes (its fields not set by __init__).
_LAZY_SLOTS = tuple(f.name for f in fields(PodInfo) if not f.init)


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
    gated: bool = False  # held by PreEnqueue (e.g. scheduling gates); True iff gating_plugin is set
    # The PreEnqueue plugin that holds the pod, and the events it registered: only those can
    # release it (upstream GatingPlugin / GatingPluginEvents).
    gating_plugin: str = ""
    gating_plugin_events: list[ClusterEvent] = field(default_factory=list)
    # When backoff ends (cached; cleared whenever attempts or timestamp change), upstream
    # BackoffExpiration. None = not computed yet.
    backoff_expiration: float | None = None
    # Attempts that ended rejected by plugins / ended in an error (upstream UnschedulableCount,
    # ConsecutiveErrorsCount; the latter resets when a rejection follows an error).
    unschedulable_count: int = 0
    consecutive_errors_count: int = 0

    @property
    def pod(self) -> pb.Pod:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key


# ------------------------------------------------------------------------------------ FitError


@dataclass
class Diagnosis:
    """Why nodes were rejected (upstream framework.Diagnosis). `node_to_status` holds the nodes
    rejected explicitly; every other node of the cycle that did not pass has
    `absent_nodes_status` (set when PreFilter rejected everything or narrowed the nodes)."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    absent_nodes_status: Status = field(default_factory=lambda: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def add_plugin_status(self, status: Status) -> None:
        """Record the plugin of a rejection (upstream Diagnosis.AddPluginStatus)."""
        if not status.plugin:
            return
        if status.is_rejected():
            self.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            self.pending_plugins.add(status.plugin)

    def status_of(self, node_name: str) -> Status:
        return self.node_to_status.get(node_name, self.absent_nodes_status)


class FitError(Exception):
    """No node fits the pod (upstream framework.FitError). `str()` is upstream's message:
    "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s)." with the
    reasons counted over all nodes and sorted as strings, then the PostFilter message."""

    def __init__(self, pod: pb.Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        d = self.diagnosis
        msg = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        if d.pre_filter_msg:
            # PreFilter rejected the pod: every node has that status, its reason is said once.
            msg += f" {d.pre_filter_msg}."
        else:
            reasons: dict[str, int] = {}
            for status in d.node_to_status.values():
                for reason in status.reasons:
                    reasons[reason] = reasons.get(reason, 0) + 1
            absent = self.num_all_nodes - len(d.node_to_status)
            if absent > 0:
                for reason in d.absent_nodes_status.reasons:
                    reasons[reason] = reasons.get(reason, 0) + absent
            histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
            if histogram:
                msg += f" {', '.join(histogram)}."
        if d.post_filter_msg:
            # Upstream's SeparatorFormat " %v." again: a preemption message that is itself a
            # FitError ends in ".." ("... preemption: 0/5 nodes are available: ...").
            msg += f" {d.post_filter_msg}."
        return msg
