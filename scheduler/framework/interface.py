"""The scheduling framework's extension points, one small protocol each.

Mirrors upstream `pkg/scheduler/framework/interface.go` (and `staging/.../kube-scheduler/framework`):
names, argument order and semantics are upstream's, in snake_case. A plugin is any object with a
`name()` method that implements one or more of the protocols below; the framework discovers which
with `isinstance` (the protocols are runtime-checkable, like Go's implicit interfaces).

Conventions:
  * A returned `Status | None`: `None` means success, as upstream's nil *Status.
  * The scheduling cycle (PreEnqueue .. Permit) is serial and CPU bound: plain functions.
    The binding cycle (PreBind, Bind, PostBind) talks to the API server: coroutines.
  * Plugins receive a `PodInfo` (the pod plus its cached derived data) rather than the bare pod,
    so per-pod work is done once even when a plugin is called for thousands of nodes.
  * Optional batch protocols (`BatchFilterPlugin`, `BatchScorePlugin`) let the framework evaluate
    a plugin for many nodes at once over the snapshot's numpy arrays. They must agree exactly with
    the scalar `filter` / `score` (the unit tests check it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.types import (
    ClusterEvent,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    Status,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from scheduler.framework.nodeinfo import NodeInfo, Snapshot

# Score range every Score plugin must return after NormalizeScore (upstream MaxNodeScore etc.).
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
# Upper bound of the weighted sum over all score plugins (upstream MaxTotalScore = MaxInt64).
MAX_TOTAL_SCORE = 2**63 - 1


@dataclass
class NodeScore:
    """A node's score from one plugin; NormalizeScore rewrites `score` in place."""

    name: str
    score: int


@dataclass(slots=True)
class PluginScore:
    """One plugin's weighted score of a node (upstream PluginScore)."""

    name: str
    score: int  # weighted


@dataclass(slots=True)
class NodePluginScores:
    """A node's weighted score from each Score plugin and their sum (upstream NodePluginScores)."""

    name: str
    scores: list[PluginScore] = field(default_factory=list)
    total_score: int = 0


@dataclass
class PreFilterResult:
    """Nodes a PreFilter plugin restricts the cycle to. `node_names is None` means all nodes."""

    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        """Intersection of two results, as upstream PreFilterResult.Merge."""
        if other is None or other.all_nodes():
            return PreFilterResult(None if self.node_names is None else set(self.node_names))
        if self.all_nodes():
            return PreFilterResult(set(other.node_names or ()))
        return PreFilterResult(self.node_names & (other.node_names or set()))  # type: ignore[operator]


@dataclass
class PostFilterResult:
    """What a PostFilter plugin (preemption) nominates: a result is upstream's ModeOverride
    (the pod's nominatedNodeName becomes `nominated_node_name`, "" clears it); returning None
    instead is ModeNoop (the nomination stays as it is)."""

    nominated_node_name: str = ""


# A queueing hint: given the unschedulable pod and the (old, new) objects of an event (old is None
# for Add, new is None for Delete), say whether the event may make the pod schedulable. Upstream
# returns (hint, error); here an exception means "Queue" (the framework must treat it so).
QueueingHintFn = Callable[[pb.Pod, Any, Any], QueueingHint]


@dataclass(frozen=True)
class ClusterEventWithHint:
    """An event a plugin registers interest in, with its optional hint (upstream
    fwk.ClusterEventWithHint). Without a hint every matching event requeues the pod."""

    event: ClusterEvent
    queueing_hint_fn: QueueingHintFn | None = field(default=None, compare=False)


@runtime_checkable
class Plugin(Protocol):
    def name(self) -> str: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    """Runs before a pod enters the active queue; a non-success status keeps it gated."""

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    """Orders the active queue: `less(a, b)` is true when a must be scheduled before b."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    """Events that may make a pod this plugin rejected schedulable (upstream EventsToRegister)."""

    def events_to_register(self) -> list[ClusterEventWithHint]: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Incremental updates of a plugin's PreFilter state when the framework (preemption, nominated
    pods) evaluates a node with a pod added or removed."""

    def add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def remove_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Runs once per cycle before Filter. `nodes` are all nodes of the snapshot. A Skip status
    means the plugin's Filter is not run for this pod; a PreFilterResult narrows the nodes."""

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]: ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Whether the pod may run on the node. Unschedulable: preemption may help;
    UnschedulableAndUnresolvable: it cannot."""

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None: ...


@runtime_checkable
class BatchFilterPlugin(FilterPlugin, Protocol):
    """Optional: Filter for many nodes at once. `indices` index `snapshot.node_info_list`; the
    result is a boolean mask over `indices` (True = passes), equal to calling `filter` per node.
    The framework gets the Status of a rejected node, when it needs one, from `filter`."""

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]: ...


@runtime_checkable
class BatchFilterStatusPlugin(BatchFilterPlugin, Protocol):
    """Optional on a BatchFilterPlugin: the Status `filter` gives each node at `indices` (the
    batch engine asks it for the nodes `filter_nodes` rejected, instead of calling `filter` per
    node). Statuses may be shared between nodes; they must equal `filter`'s."""

    def filter_statuses(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> list[Status | None]: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Runs when no node passed Filter (preemption). `filtered_node_status` maps node name to
    the status that rejected it."""

    def post_filter(
        self, state: CycleState, pod_info: PodInfo, filtered_node_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    """Runs once per cycle before Score with the feasible nodes. Skip: Score is not run."""

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScoreExtensions(Protocol):
    def normalize_score(
        self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]
    ) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Ranks feasible nodes. After NormalizeScore (if any) scores must lie in
    [MIN_NODE_SCORE, MAX_NODE_SCORE]; the framework multiplies them by the plugin's weight."""

    def score(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[int, Status | None]: ...

    def score_extensions(self) -> ScoreExtensions | None: ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    """Optional: Score for many nodes at once (raw scores, before NormalizeScore), equal to
    calling `score` per node. `indices` index `snapshot.node_info_list`."""

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]: ...


@runtime_checkable
class BatchScoreExtensions(Protocol):
    """Optional on a Score plugin's ScoreExtensions: NormalizeScore over an array of the raw
    scores of the nodes (in place), equal to `normalize_score` on the same scores as NodeScores.
    `node_infos` are the scored nodes, in the order of `scores`."""

    def normalize_scores(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_infos: Sequence[NodeInfo],
        scores: npt.NDArray[np.int64],
    ) -> Status | None: ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Reserve runs when the pod is assumed on the node; Unreserve undoes it on any later failure
    and must be idempotent."""

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Last gate of the scheduling cycle: success, rejection, or Wait with a timeout (seconds)."""

    def permit(self, state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[Status | None, float]: ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Binds the pod. A Skip status passes the pod to the next Bind plugin."""

    async def bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    """Informational, after a successful bind."""

    async def post_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None: ...


# ---------------------------------------------------------------------------------------- handle


@runtime_checkable
class PodNominator(Protocol):
    """The queue's nominated pods, as the framework reads them (upstream fwk.PodNominator)."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def has_nominated_pods(self) -> bool: ...

    def nodes(self) -> list[str]: ...


@runtime_checkable
class NodeInfoLister(Protocol):
    """Read access to the snapshot's NodeInfos (upstream fwk.NodeInfoLister)."""

    def list(self) -> Sequence[NodeInfo]: ...

    def have_pods_with_affinity_list(self) -> Sequence[NodeInfo]: ...

    def have_pods_with_required_anti_affinity_list(self) -> Sequence[NodeInfo]: ...

    def get(self, node_name: str) -> NodeInfo:
        """The NodeInfo of a node; raises KeyError when the snapshot has no such node."""
        ...


@runtime_checkable
class SharedLister(Protocol):
    """Upstream fwk.SharedLister (only the node part: kse has no storage objects)."""

    def node_infos(self) -> NodeInfoLister: ...


@runtime_checkable
class FrameworkHandle(Protocol):
    """What plugins may use from the framework (upstream fwk.Handle, the parts kse needs).

    `snapshot_shared_lister()` returns the snapshot of the current cycle (it changes between
    cycles, so plugins call it each time rather than keeping the result).
    `bind` posts pods/binding for the pod; it raises on failure (the caller turns the exception
    into an Error status, as upstream's AsStatus(err)).
    """

    def snapshot_shared_lister(self) -> SharedLister: ...

    async def bind(self, pod: pb.Pod, node_name: str) -> None: ...


# A plugin factory, as upstream's PluginFactory: `args` is the already-parsed pluginConfig args
# mapping of KubeSchedulerConfiguration (camelCase keys) or None for defaults.
PluginFactory = Callable[[Mapping[str, Any] | None, FrameworkHandle], Plugin]
