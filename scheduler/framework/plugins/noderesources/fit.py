"""NodeResourcesFit: the node must have room for the pod's requests; scores nodes by one of the
three resource strategies (upstream plugins/noderesources/fit.go).

Args (pluginConfig, camelCase as in KubeSchedulerConfiguration):
    ignoredResources: [names]          extended resources not checked by Filter
    ignoredResourceGroups: [prefixes]  extended resource groups ("example.com") not checked
    scoringStrategy:
        type: LeastAllocated | MostAllocated | RequestedToCapacityRatio   (default LeastAllocated)
        resources: [{name, weight}]     (default cpu:1, memory:1)
        requestedToCapacityRatio: {shape: [{utilization, score}]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.interface import (
    ClusterEventWithHint,
    FrameworkHandle,
    PreFilterExtensions,
    PreFilterResult,
    ScoreExtensions,
)
from scheduler.framework.nodeinfo import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NodeInfo,
    Resource,
    Snapshot,
    is_extended_resource_name,
)
from scheduler.framework.plugins.feature import DEFAULT_FEATURES, Features
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.plugins.helper.status import state_read_status
from scheduler.framework.plugins.noderesources.resource_allocation import (
    ResourceAllocationScorer,
    make_strategy_scorer,
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

NAME = "NodeResourcesFit"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME
ERR_REASON_TOO_MANY_PODS = "Too many pods"
ERR_REASON_RESTARTABLE_INIT = (
    "Pod has a restartable init container and the SidecarContainers feature is disabled"
)


_UNSET = Status()  # a memo sentinel


def insufficient_reason(resource: str) -> str:
    return f"Insufficient {resource}"


@dataclass(frozen=True)
class InsufficientResource:
    """A resource the node lacks for the pod (upstream InsufficientResource). Unresolvable: the
    pod asks for more than the node's whole allocatable, so preemption cannot help."""

    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool = False


@dataclass(frozen=True)
class _PreFilterState:
    request: Resource

    def clone(self) -> _PreFilterState:
        return self


@dataclass(frozen=True)
class _PreScoreState:
    pod_requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


def _ignored(name: str, ignored: frozenset[str], ignored_groups: frozenset[str]) -> bool:
    if not is_extended_resource_name(name):
        return False
    return name in ignored or (bool(ignored_groups) and name.split("/", 1)[0] in ignored_groups)


def fits_request(
    request: Resource,
    node_info: NodeInfo,
    ignored: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
) -> list[InsufficientResource]:
    """Upstream fitsRequest: every resource the node lacks for `request`, in upstream's order
    (pods, cpu, memory, ephemeral-storage, then the scalar resources)."""
    return insufficient_resources(
        request, node_info.allocatable, node_info.requested, len(node_info.pods), ignored, ignored_groups
    )


def insufficient_resources(
    request: Resource,
    alloc: Resource,
    used: Resource,
    n_pods: int,
    ignored: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
) -> list[InsufficientResource]:
    """`fits_request` on a node's amounts rather than its NodeInfo: what preemption's dry run
    asks of a node with some of its pods taken away, without a copy of the node."""
    out: list[InsufficientResource] = []
    if n_pods + 1 > alloc.allowed_pod_number:
        out.append(
            InsufficientResource("pods", ERR_REASON_TOO_MANY_PODS, 1, n_pods, alloc.allowed_pod_number)
        )
    if request.is_zero_request():
        return out
    for name, req, have, in_use in (
        (CPU, request.milli_cpu, alloc.milli_cpu, used.milli_cpu),
        (MEMORY, request.memory, alloc.memory, used.memory),
        (EPHEMERAL_STORAGE, request.ephemeral_storage, alloc.ephemeral_storage, used.ephemeral_storage),
    ):
        if req > 0 and req > have - in_use:
            out.append(InsufficientResource(name, insufficient_reason(name), req, in_use, have, req > have))
    for name, req in request.scalar_resources.items():
        if req == 0 or _ignored(name, ignored, ignored_groups):
            continue
        have = alloc.scalar_resources.get(name, 0)
        in_use = used.scalar_resources.get(name, 0)
        if req > have - in_use:
            out.append(InsufficientResource(name, insufficient_reason(name), req, in_use, have, req > have))
    return out


def fits(pod_info: PodInfo, node_info: NodeInfo) -> list[InsufficientResource]:
    """Upstream Fits: what the node lacks for the pod, ignoring nothing."""
    return fits_request(pod_info.resource.resource, node_info)


def _node_info_of(node: pb.Node) -> NodeInfo:
    ni = NodeInfo()
    ni.set_node(node)
    return ni


def is_fit(pod_info: PodInfo, node: pb.Node | None) -> bool:
    """Whether the pod fits an empty node like `node` (upstream isFit)."""
    return node is not None and not fits(pod_info, _node_info_of(node))


def have_any_requested_resources_increased(pod_info: PodInfo, original: pb.Node, modified: pb.Node) -> bool:
    """Upstream haveAnyRequestedResourcesIncreased: the allowed pod number grew, or the
    allocatable of a resource the pod requests grew."""
    request = pod_info.resource.resource
    before, after = _node_info_of(original).allocatable, _node_info_of(modified).allocatable
    if after.allowed_pod_number > before.allowed_pod_number:
        return True
    if request.is_zero_request():
        return False
    if (
        (request.milli_cpu > 0 and after.milli_cpu > before.milli_cpu)
        or (request.memory > 0 and after.memory > before.memory)
        or (request.ephemeral_storage > 0 and after.ephemeral_storage > before.ephemeral_storage)
    ):
        return True
    return any(
        q != 0 and after.scalar_resources.get(name, 0) > before.scalar_resources.get(name, 0)
        for name, q in request.scalar_resources.items()
    )


class Fit:
    def __init__(
        self,
        handle: FrameworkHandle | None,
        scorer: ResourceAllocationScorer,
        ignored_resources: Sequence[str] = (),
        ignored_resource_groups: Sequence[str] = (),
        features: Features = DEFAULT_FEATURES,
    ) -> None:
        self._handle = handle
        self.scorer = scorer
        self.ignored_resources = frozenset(ignored_resources)
        self.ignored_resource_groups = frozenset(ignored_resource_groups)
        self.features = features

    def name(self) -> str:
        return NAME

    # -- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_action = ActionType.DELETE
        if self.features.enable_in_place_pod_vertical_scaling:
            pod_action |= ActionType.UPDATE_POD_SCALE_DOWN
        node_action = ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE
        if not self.features.enable_scheduling_queue_hint:
            # without hints, a Node/Add can be missed by preCheck (upstream issue 109437)
            node_action |= ActionType.UPDATE_NODE_TAINT | ActionType.UPDATE_NODE_LABEL
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, pod_action), self.is_schedulable_after_pod_event
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, node_action), self.is_schedulable_after_node_change
            ),
        ]

    def is_schedulable_after_pod_event(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Pod, old, new)
        if modified is None:
            assert original is not None
            if not original.spec.node_name and not original.status.nominated_node_name:
                return QueueingHint.SKIP  # an unscheduled pod freed nothing
            return QueueingHint.QUEUE
        if not self.features.enable_in_place_pod_vertical_scaling:
            return QueueingHint.SKIP
        assert original is not None
        return QueueingHint.QUEUE if self._scaled_down_for(pod, original, modified) else QueueingHint.SKIP

    @staticmethod
    def _scaled_down_for(target: pb.Pod, original: pb.Pod, modified: pb.Pod) -> bool:
        """Upstream isSchedulableAfterPodScaleDown: the target itself, or a scheduled pod whose
        request of a resource the target wants went down."""
        if modified.metadata.uid == target.metadata.uid:
            return True
        if not modified.spec.node_name:
            return False
        before = PodInfo(original).resource.resource
        after = PodInfo(modified).resource.resource
        for name, amount in PodInfo(target).requests.items():
            if amount == 0:
                continue
            if name == CPU:
                if before.milli_cpu > after.milli_cpu:
                    return True
            elif name == MEMORY:
                if before.memory > after.memory:
                    return True
            elif name == EPHEMERAL_STORAGE:
                if before.ephemeral_storage > after.ephemeral_storage:
                    return True
            elif before.scalar_resources.get(name, 0) > after.scalar_resources.get(name, 0):
                return True
        return False

    def is_schedulable_after_node_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Node, old, new)
        pod_info = PodInfo(pod)
        if not is_fit(pod_info, modified):
            return QueueingHint.SKIP  # the node cannot take the pod anyway
        if original is None:
            return QueueingHint.QUEUE
        assert modified is not None
        if not have_any_requested_resources_increased(pod_info, original, modified):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    # -- filter

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not self.features.enable_sidecar_containers and any(
            c.restart_policy == "Always" for c in pod_info.pod.spec.init_containers
        ):
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_RESTARTABLE_INIT])
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(pod_info.resource.resource))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def request_of(self, state: CycleState) -> Resource:
        """The pod's request as PreFilter computed it (raises StateNotFoundError without it)."""
        return self._request(state)

    def _request(self, state: CycleState) -> Resource:
        s = state.read(PRE_FILTER_STATE_KEY)
        assert isinstance(s, _PreFilterState)
        return s.request

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        try:
            request = self._request(state)
        except StateNotFoundError as e:
            return state_read_status(PRE_FILTER_STATE_KEY, e, "error reading")
        return self.status_of_amounts(
            request, node_info.allocatable, node_info.requested, len(node_info.pods)
        )

    def amounts_fit(
        self, request: Resource, alloc: Resource, used: Resource, n_pods: int, extra: Resource
    ) -> bool:
        """Whether `status_of_amounts` would be None with `extra` requested on top of `used` (a
        victim reprieved: the reprieve loop of preemption's dry run asks this once per victim,
        and keeps the victim's amounts only if it fits)."""
        if n_pods + 1 > alloc.allowed_pod_number:
            return False
        if request.is_zero_request():
            return True
        req = request.milli_cpu
        if req > 0 and req > alloc.milli_cpu - used.milli_cpu - extra.milli_cpu:
            return False
        req = request.memory
        if req > 0 and req > alloc.memory - used.memory - extra.memory:
            return False
        req = request.ephemeral_storage
        if req > 0 and req > alloc.ephemeral_storage - used.ephemeral_storage - extra.ephemeral_storage:
            return False
        if request.scalar_resources:
            total = used.clone()
            total.add_scaled(extra, 1)
            return not insufficient_resources(
                request, alloc, total, n_pods, self.ignored_resources, self.ignored_resource_groups
            )
        return True

    def status_of_amounts(
        self, request: Resource, alloc: Resource, used: Resource, n_pods: int
    ) -> Status | None:
        """`filter`'s status for a node with allocatable `alloc`, `used` requested and `n_pods`
        pods (preemption's dry run passes a node's amounts with victims taken away)."""
        insufficient = insufficient_resources(
            request, alloc, used, n_pods, self.ignored_resources, self.ignored_resource_groups
        )
        if not insufficient:
            return None
        code = Code.UNSCHEDULABLE
        if any(r.unresolvable for r in insufficient):
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return Status(code, [r.reason for r in insufficient])

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        """`filter` for many nodes at once over the snapshot's arrays."""
        request = self._request(state)
        a = snapshot.arrays()
        ok: npt.NDArray[np.bool_] = a.pod_count[indices] + 1 <= a.allowed_pod_number[indices]
        if request.is_zero_request():
            return ok
        for req, alloc, used in (
            (request.milli_cpu, a.alloc_milli_cpu, a.req_milli_cpu),
            (request.memory, a.alloc_memory, a.req_memory),
            (request.ephemeral_storage, a.alloc_ephemeral_storage, a.req_ephemeral_storage),
        ):
            if req > 0:
                ok &= req <= alloc[indices] - used[indices]
        for name, req in request.scalar_resources.items():
            if req == 0 or _ignored(name, self.ignored_resources, self.ignored_resource_groups):
                continue
            _, alloc, used = a.scalar(name)
            ok &= req <= alloc[indices] - used[indices]
        return ok

    def filter_statuses(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> list[Status | None]:
        """`filter`'s status for each node at `indices`, from the snapshot's arrays (what the
        batch engine asks for the nodes `filter_nodes` rejected: an unschedulable pod's
        diagnosis needs one per node). Nodes with the same reasons share one Status."""
        request = self._request(state)
        a = snapshot.arrays()
        # (reason, lacking mask, unresolvable mask) in fits_request's order.
        checks: list[tuple[str, npt.NDArray[np.bool_], npt.NDArray[np.bool_] | None]] = [
            (ERR_REASON_TOO_MANY_PODS, a.pod_count[indices] + 1 > a.allowed_pod_number[indices], None)
        ]
        if not request.is_zero_request():
            for name, req, alloc, used in (
                (CPU, request.milli_cpu, a.alloc_milli_cpu, a.req_milli_cpu),
                (MEMORY, request.memory, a.alloc_memory, a.req_memory),
                (EPHEMERAL_STORAGE, request.ephemeral_storage, a.alloc_ephemeral_storage,
                 a.req_ephemeral_storage),
            ):  # fmt: skip
                if req > 0:
                    have = alloc[indices]
                    checks.append((insufficient_reason(name), req > have - used[indices], req > have))
            for name, req in request.scalar_resources.items():
                if req == 0 or _ignored(name, self.ignored_resources, self.ignored_resource_groups):
                    continue
                _, alloc, used = a.scalar(name)
                have = alloc[indices]
                checks.append((insufficient_reason(name), req > have - used[indices], req > have))
        key = np.zeros(len(indices), np.int64)
        for k, (_, lacking, unresolvable) in enumerate(checks):
            key |= lacking.astype(np.int64) << (k + 1)
            if unresolvable is not None:
                key |= lacking & unresolvable  # bit 0: some shortage is unresolvable
        memo: dict[int, Status | None] = {0: None}
        out: list[Status | None] = []
        for kv in key.tolist():
            st = memo.get(kv, _UNSET)
            if st is _UNSET:
                reasons = [reason for k, (reason, _, _) in enumerate(checks) if kv >> (k + 1) & 1]
                code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if kv & 1 else Code.UNSCHEDULABLE
                st = memo[kv] = Status(code, reasons, NAME) if reasons else None
            out.append(st)  # type: ignore[arg-type]
        return out

    # -- score

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(tuple(self.scorer.pod_requests(pod_info))))
        return None

    def _pod_requests(self, state: CycleState, pod_info: PodInfo) -> Sequence[int]:
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError:
            return self.scorer.pod_requests(pod_info)  # PreScore disabled: compute here
        assert isinstance(s, _PreScoreState)
        return s.pod_requests

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        return self.scorer.score(node_info, self._pod_requests(state, pod_info))

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        return self.scorer.score_nodes(snapshot.arrays(), indices, self._pod_requests(state, pod_info))

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(
    args: Mapping[str, Any] | None, handle: FrameworkHandle | None, features: Features = DEFAULT_FEATURES
) -> Fit:
    """Builds the plugin from NodeResourcesFitArgs (raises ValueError on invalid args)."""
    args = args or {}
    ignored = list(args.get("ignoredResources") or ())
    groups = list(args.get("ignoredResourceGroups") or ())
    for i, group in enumerate(groups):
        if "/" in group:
            raise ValueError(
                f'ignoredResourceGroups[{i}]: Invalid value: "{group}": '
                "resource group name can't contain '/'"
            )
    return Fit(handle, make_strategy_scorer(args.get("scoringStrategy")), ignored, groups, features)
