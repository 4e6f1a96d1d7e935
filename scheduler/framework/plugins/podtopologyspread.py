"""PodTopologySpread: spreads matching pods across topology domains (upstream
plugins/podtopologyspread: common.go, filtering.go, scoring.go, plugin.go).

* DoNotSchedule constraints filter: on the node's domain,
  'matching pods' + 'the pod itself if it matches' - 'global minimum' must not exceed maxSkew;
  the global minimum is 0 while fewer than minDomains domains are eligible.
* ScheduleAnyway constraints score: fewer matching pods in the node's domain score higher, each
  constraint weighted by log(number of domains + 2).
* nodeAffinityPolicy (Honor by default) / nodeTaintsPolicy (Ignore by default) decide which
  nodes count as eligible domains; matchLabelKeys adds the pod's own label values to the selector.

Args:
    defaultingType: System | List   (System when no defaultConstraints are given)
    defaultConstraints: [TopologySpreadConstraint]   (only with List; no labelSelector allowed)

Default constraints (System: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway) apply
to pods without constraints of their own, with a selector upstream derives from the Services,
ReplicationControllers, ReplicaSets and StatefulSets that select or own the pod. kse models none
of those objects, so the default selector is empty and, exactly as upstream does for a pod no
such object selects, the default constraints are then skipped. `default_selector` (constructor)
is the hook to plug a real selector source in later.

Cost: upstream's PreFilter and PreScore count the matching pods of every node in each cycle. When
every node counts as a domain (no required node affinity, no nodeTaintsPolicy: Honor) the counts
are kept across cycles instead (`Aggregate`: only nodes whose generation changed are recounted),
and Filter, Score and NormalizeScore have batch forms over the snapshot's `LabelIndex`. Results
are those of the scan; tests compare both on random clusters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from google.protobuf import json_format

from kse.objects.labels import Selector
from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEventWithHint,
    FrameworkHandle,
    NodeScore,
    PreFilterResult,
)
from scheduler.framework.nodeinfo import NodeInfo, NodeInfoView, Snapshot
from scheduler.framework.plugins.feature import DEFAULT_FEATURES, Features
from scheduler.framework.plugins.helper.gomath import go_round, go_round_array
from scheduler.framework.plugins.helper.node_affinity import RequiredNodeAffinity, required_node_affinity
from scheduler.framework.plugins.helper.node_index import Aggregates, LabelIndex, current_label_index
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.plugins.helper.selectors import merge_label_set_with_selector, selector_from_proto
from scheduler.framework.plugins.helper.status import state_read_status
from scheduler.framework.plugins.helper.taints import (
    Toleration,
    do_not_schedule_taints_filter,
    find_matching_untolerated_taint,
    pod_tolerations,
)
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
    as_status,
)

NAME = "PodTopologySpread"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
# PodInfo.derived keys of the parsed constraints, one string object each: a key built per pod
# would be stored per pod (~80 bytes each, for every pod the scheduler's cache holds).
_CONSTRAINTS_KEYS = {action: f"{NAME}/{action}" for action in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)}
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

SYSTEM_DEFAULT_CONSTRAINTS = (
    pb.TopologySpreadConstraint(topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=3),
    pb.TopologySpreadConstraint(
        topology_key=LABEL_TOPOLOGY_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=5
    ),
)

_MAX_INT32 = 2**31 - 1
# the batch Filter's verdicts on a node
_PASSES, _LACKS_KEY, _OVER_SKEW = 0, 1, 2
_INVALID_SCORE = -1


@dataclass(frozen=True)
class TopologySpreadConstraint:
    """A pod's constraint with its selector parsed (upstream topologySpreadConstraint)."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    def match_node_inclusion_policies(
        self, tolerations: Sequence[Toleration], node_info: NodeInfo, required: RequiredNodeAffinity
    ) -> bool:
        """Whether the node counts as a domain under the constraint's inclusion policies."""
        if self.node_affinity_policy == HONOR and not required.matches(node_info.name, node_info.labels):
            return False
        return not (
            self.node_taints_policy == HONOR
            and find_matching_untolerated_taint(node_info.taints, tolerations, do_not_schedule_taints_filter)
            is not None
        )


def node_labels_match_spread_constraints(
    labels: Mapping[str, str], constraints: Sequence[TopologySpreadConstraint]
) -> bool:
    """Whether the node has every topology key of the constraints."""
    return all(c.topology_key in labels for c in constraints)


def count_pods_match_selector(pods: Sequence[PodInfo], selector: Selector, namespace: str) -> int:
    """Pods of the namespace that match, terminating pods excluded (upstream #87621). An empty
    selector counts nothing."""
    if selector.empty:
        return 0
    count = 0
    for p in pods:
        meta = p.pod.metadata
        if meta.deletion_timestamp or meta.namespace != namespace:
            continue
        if selector.matches(p.labels):
            count += 1
    return count


def pod_labels_match_spread_constraints(
    constraints: Sequence[TopologySpreadConstraint], labels: Mapping[str, str]
) -> bool:
    return any(c.selector.matches(labels) for c in constraints)


# ----------------------------------------------------------------------------- filter state


class CriticalPaths:
    """The two domains with the fewest matching pods (upstream criticalPaths): paths[0] always
    holds the minimum; paths[1] is >= it (not necessarily the second minimum). Enough for
    preemption, which only removes pods of one node per copy of the state."""

    __slots__ = ("paths",)

    def __init__(self) -> None:
        self.paths: list[list[Any]] = [["", _MAX_INT32], ["", _MAX_INT32]]

    def min_match_num(self) -> int:
        return int(self.paths[0][1])

    def update(self, tp_val: str, num: int) -> None:
        p = self.paths
        i = 0 if tp_val == p[0][0] else 1 if tp_val == p[1][0] else -1
        if i >= 0:
            p[i][1] = num
            if p[0][1] > p[1][1]:
                p[0], p[1] = p[1], p[0]
        elif num < p[0][1]:
            p[1] = p[0]
            p[0] = [tp_val, num]
        elif num < p[1][1]:
            p[1] = [tp_val, num]

    def clone(self) -> CriticalPaths:
        c = CriticalPaths()
        c.paths = [list(self.paths[0]), list(self.paths[1])]
        return c


@dataclass
class _PreFilterState:
    constraints: tuple[TopologySpreadConstraint, ...] = ()
    critical_paths: list[CriticalPaths] = field(default_factory=list)
    # per constraint: topology value -> number of matching pods
    tp_value_to_match_num: list[dict[str, int]] = field(default_factory=list)
    # the batch Filter's verdict per node of a snapshot's node_info_list (the snapshot's id, the
    # verdicts: 0 passes, 1 lacks a topology key, 2 is over a skew); dropped whenever the counts
    # change (a clone, AddPod/RemovePod)
    verdicts: tuple[int, npt.NDArray[np.int8]] | None = None

    def min_match_num(self, i: int, min_domains: int) -> int:
        if len(self.tp_value_to_match_num[i]) < min_domains:
            # fewer eligible domains than minDomains: the global minimum is 0
            return 0
        return self.critical_paths[i].min_match_num()

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.constraints,
            [p.clone() for p in self.critical_paths],
            [dict(m) for m in self.tp_value_to_match_num],
        )


@dataclass
class _PreScoreState:
    constraints: tuple[TopologySpreadConstraint, ...] = ()
    ignored_nodes: set[str] = field(default_factory=set)  # nodes missing a topology key
    # per constraint (not for hostname ones): topology value -> matching pods
    topology_value_to_pod_counts: list[dict[str, int]] = field(default_factory=list)
    topology_normalizing_weight: list[float] = field(default_factory=list)

    def clone(self) -> _PreScoreState:
        return self


def topology_normalizing_weight(size: int) -> float:
    """log(domains + 2): small topologies are not watered down by big ones."""
    return math.log(float(size + 2))


def score_for_count(cnt: int, max_skew: int, tp_weight: float) -> float:
    return float(cnt) * tp_weight + float(max_skew - 1)


# ----------------------------------------------------------------------------- the plugin


def _empty_selector(pod: pb.Pod) -> Selector:
    return Selector.everything()


class PodTopologySpread:
    def __init__(
        self,
        handle: FrameworkHandle | None,
        default_constraints: Sequence[pb.TopologySpreadConstraint] = (),
        system_defaulted: bool = False,
        features: Features = DEFAULT_FEATURES,
        default_selector: Callable[[pb.Pod], Selector] = _empty_selector,
    ) -> None:
        self._handle = handle
        self.default_constraints = tuple(default_constraints)
        self.system_defaulted = system_defaulted
        self.features = features
        self.default_selector = default_selector
        self._default_by_action: dict[str, list[TopologySpreadConstraint]] = {}
        self._aggregates = Aggregates()
        self._index: LabelIndex | None = None

    def name(self) -> str:
        return NAME

    # -- constraints

    def _filter_constraints(
        self, constraints: Sequence[pb.TopologySpreadConstraint], pod_labels: Mapping[str, str], action: str
    ) -> list[TopologySpreadConstraint]:
        """Upstream filterTopologySpreadConstraints (raises ValueError on a bad selector)."""
        out = []
        for c in constraints:
            if c.when_unsatisfiable != action:
                continue
            selector = selector_from_proto(c.label_selector if c.HasField("label_selector") else None)
            if self.features.enable_match_label_keys_in_pod_topology_spread and c.match_label_keys:
                match = {k: pod_labels[k] for k in c.match_label_keys if k in pod_labels}
                if match:
                    selector = merge_label_set_with_selector(match, selector)
            affinity_policy, taints_policy = HONOR, IGNORE
            if self.features.enable_node_inclusion_policy_in_pod_topology_spread:
                affinity_policy = c.node_affinity_policy or HONOR
                taints_policy = c.node_taints_policy or IGNORE
            out.append(
                TopologySpreadConstraint(
                    c.max_skew,
                    c.topology_key,
                    selector,
                    c.min_domains if c.HasField("min_domains") else 1,
                    affinity_policy,
                    taints_policy,
                )
            )
        return out

    def _build_default_constraints(self, pod_info: PodInfo, action: str) -> list[TopologySpreadConstraint]:
        if any(c.match_label_keys for c in self.default_constraints):
            constraints = self._filter_constraints(self.default_constraints, pod_info.labels, action)
        else:
            # The same for every pod: parsed once per action, not once per pod.
            cached = self._default_by_action.get(action)
            if cached is None:
                cached = self._default_by_action[action] = self._filter_constraints(
                    self.default_constraints, {}, action
                )
            constraints = cached
        if not constraints:
            return []
        selector = self.default_selector(pod_info.pod)
        if selector.empty:
            return []  # nothing selects the pod: no default spreading (as upstream)
        return [
            TopologySpreadConstraint(
                c.max_skew,
                c.topology_key,
                selector,
                c.min_domains,
                c.node_affinity_policy,
                c.node_taints_policy,
            )
            for c in constraints
        ]

    def get_constraints(
        self, pod_info: PodInfo, action: str = DO_NOT_SCHEDULE
    ) -> tuple[TopologySpreadConstraint, ...]:
        """The pod's constraints for `action`, or the default ones when it has none; cached per
        PodInfo. Raises ValueError on an invalid selector."""
        key = _CONSTRAINTS_KEYS[action]
        got = pod_info.derived.get(key)
        if got is None:
            spec_constraints = pod_info.pod.spec.topology_spread_constraints
            if spec_constraints:
                got = tuple(self._filter_constraints(spec_constraints, pod_info.labels, action))
            else:
                got = tuple(self._build_default_constraints(pod_info, action))
            pod_info.derived[key] = got
        return got  # type: ignore[no-any-return]

    # -- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_action = ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
        if self.features.enable_scheduling_queue_hint:
            # a new toleration of the pod matters for nodeTaintsPolicy: Honor
            pod_action |= ActionType.UPDATE_POD_TOLERATIONS
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, pod_action), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD
                    | ActionType.DELETE
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_TAINT,
                ),
                self.is_schedulable_after_node_change,
            ),
        ]

    @staticmethod
    def _involved(incoming: pb.Pod, pod: pb.Pod) -> bool:
        return incoming.metadata.uid == pod.metadata.uid or (
            bool(incoming.spec.node_name) and incoming.metadata.namespace == pod.metadata.namespace
        )

    def is_schedulable_after_pod_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Pod, old, new)
        if (modified is not None and not self._involved(modified, pod)) or (
            original is not None and not self._involved(original, pod)
        ):
            return QueueingHint.SKIP  # unscheduled, or another namespace
        constraints = self.get_constraints(PodInfo(pod))
        if modified is not None and original is not None:
            if (
                pod.metadata.uid == modified.metadata.uid
                and list(modified.spec.tolerations) != list(original.spec.tolerations)
                and any(c.node_taints_policy == HONOR for c in constraints)
            ):
                return QueueingHint.QUEUE
            if dict(modified.metadata.labels) == dict(original.metadata.labels):
                return QueueingHint.SKIP
            for c in constraints:
                if c.selector.matches(original.metadata.labels) != c.selector.matches(
                    modified.metadata.labels
                ):
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return (
                QueueingHint.QUEUE
                if pod_labels_match_spread_constraints(constraints, modified.metadata.labels)
                else QueueingHint.SKIP
            )
        assert original is not None
        return (
            QueueingHint.QUEUE
            if pod_labels_match_spread_constraints(constraints, original.metadata.labels)
            else QueueingHint.SKIP
        )

    def is_schedulable_after_node_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Node, old, new)
        constraints = self.get_constraints(PodInfo(pod))
        original_matching = original is not None and node_labels_match_spread_constraints(
            original.metadata.labels, constraints
        )
        modified_matching = modified is not None and node_labels_match_spread_constraints(
            modified.metadata.labels, constraints
        )
        if original is not None and modified is not None:
            if original_matching != modified_matching:
                return QueueingHint.QUEUE
            if modified_matching and (
                any(
                    original.metadata.labels.get(c.topology_key)
                    != modified.metadata.labels.get(c.topology_key)
                    for c in constraints
                )
                or list(original.spec.taints) != list(modified.spec.taints)
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if modified_matching else QueueingHint.SKIP
        return QueueingHint.QUEUE if original_matching else QueueingHint.SKIP

    # -- filter

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            constraints = self.get_constraints(pod_info, DO_NOT_SCHEDULE)
        except ValueError as e:
            return None, as_status(ValueError(f"get constraints from pod: {e}"))
        if not constraints:
            return None, Status(Code.SKIP)
        s = _PreFilterState(constraints, [CriticalPaths() for _ in constraints], [{} for _ in constraints])
        required = required_node_affinity(pod_info)
        tolerations = pod_tolerations(pod_info)
        inclusion = self.features.enable_node_inclusion_policy_in_pod_topology_spread
        namespace = pod_info.pod.metadata.namespace
        sums = self._kept_counts("filter", constraints, namespace, nodes, required, True)
        if sums is not None:
            for (i, value), n in sums.items():
                s.tp_value_to_match_num[i][value] = n
        else:
            for ni in nodes:
                if ni.node is None:
                    continue
                labels = ni.labels
                # spreading only counts nodes the pod could land on
                if not inclusion and not required.matches(ni.name, labels):
                    continue
                if not node_labels_match_spread_constraints(labels, constraints):
                    continue
                for i, c in enumerate(constraints):
                    if inclusion and not c.match_node_inclusion_policies(tolerations, ni, required):
                        continue
                    value = labels[c.topology_key]
                    counts = s.tp_value_to_match_num[i]
                    counts[value] = counts.get(value, 0) + count_pods_match_selector(
                        ni.pods, c.selector, namespace
                    )
        for i in range(len(constraints)):
            paths = s.critical_paths[i]
            for value, num in s.tp_value_to_match_num[i].items():
                paths.update(value, num)
        state.write(PRE_FILTER_STATE_KEY, s)
        return None, None

    def pre_filter_extensions(self) -> PodTopologySpread:
        return self

    def _snapshot(self) -> Snapshot | None:
        if self._handle is None:
            return None
        lister = self._handle.snapshot_shared_lister().node_infos()
        return lister if isinstance(lister, Snapshot) else None

    def _every_node_counts(
        self, constraints: Sequence[TopologySpreadConstraint], required: RequiredNodeAffinity
    ) -> bool:
        """Whether the inclusion policies let every node with the topology keys count as a
        domain, whatever the node: then a node's counts depend on the node alone."""
        if not required.matches_every_node:
            return False
        return not (
            self.features.enable_node_inclusion_policy_in_pod_topology_spread
            and any(c.node_taints_policy == HONOR for c in constraints)
        )

    def _kept_counts(
        self,
        phase: str,
        constraints: tuple[TopologySpreadConstraint, ...],
        namespace: str,
        nodes: Sequence[NodeInfo],
        required: RequiredNodeAffinity,
        require_all: bool,
    ) -> Mapping[tuple[int, str], int] | None:
        """(constraint index, topology value) -> matching pods over the snapshot's nodes, as the
        scan sums them (a domain whose nodes hold no matching pod is listed with 0), kept across
        cycles; None when the scan must run (`nodes` are not the snapshot's, or some node may not
        count). Hostname constraints are left out of PreScore's sums (its Score counts per node)."""
        snapshot = self._snapshot()
        if snapshot is None or nodes is not snapshot.list():
            return None
        if not self._every_node_counts(constraints, required):
            return None
        agg = self._aggregates.get((phase, constraints, namespace, require_all))
        keys = [c.topology_key for c in constraints]
        counted = [
            (i, c.topology_key, c.selector)
            for i, c in enumerate(constraints)
            if phase == "filter" or c.topology_key != LABEL_HOSTNAME
        ]

        def contribution(ni: NodeInfo) -> tuple[tuple[Hashable, int], ...]:
            labels = ni.labels
            if require_all and not all(k in labels for k in keys):
                return ()
            pods = ni.pods
            return tuple(
                ((i, labels.get(k, "")), count_pods_match_selector(pods, selector, namespace) if pods else 0)
                for i, k, selector in counted
            )

        agg.update(snapshot.list(), contribution, snapshot.arrays().generation)
        return cast(Mapping[tuple[int, str], int], agg.sums)

    def _label_index(self, snapshot: Snapshot) -> LabelIndex:
        self._index = current_label_index(self._index, snapshot)
        return self._index

    def add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._update_with_pod(state, pod_to_add, pod_to_schedule, node_info, 1)

    def remove_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._update_with_pod(state, pod_to_remove, pod_to_schedule, node_info, -1)

    def _update_with_pod(
        self, state: CycleState, updated: PodInfo, preemptor: PodInfo, node_info: NodeInfo, delta: int
    ) -> Status | None:
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_FILTER_STATE_KEY, e)
        assert isinstance(s, _PreFilterState)
        if updated.pod.metadata.namespace != preemptor.pod.metadata.namespace or node_info.node is None:
            return None
        if not node_labels_match_spread_constraints(node_info.labels, s.constraints):
            return None
        required = required_node_affinity(preemptor)
        inclusion = self.features.enable_node_inclusion_policy_in_pod_topology_spread
        if not inclusion and not required.matches(node_info.name, node_info.labels):
            return None
        tolerations = pod_tolerations(preemptor)
        s.verdicts = None
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(updated.labels):
                continue
            if inclusion and not c.match_node_inclusion_policies(tolerations, node_info, required):
                continue
            value = node_info.labels[c.topology_key]
            counts = s.tp_value_to_match_num[i]
            counts[value] = counts.get(value, 0) + delta
            s.critical_paths[i].update(value, counts[value])
        return None

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_FILTER_STATE_KEY, e)
        assert isinstance(s, _PreFilterState)
        if not s.constraints:
            return None  # an empty state tolerates every pod
        pod_labels = pod_info.labels
        for i, c in enumerate(s.constraints):
            tp_val = node_info.labels.get(c.topology_key)
            if tp_val is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_NODE_LABEL_NOT_MATCH])
            # 'existing matching num' + 'if self-match (1 or 0)' - 'global minimum' <= 'maxSkew'
            min_match_num = s.min_match_num(i, c.min_domains)
            self_match_num = 1 if c.selector.matches(pod_labels) else 0
            match_num = s.tp_value_to_match_num[i].get(tp_val, 0)
            if match_num + self_match_num - min_match_num > c.max_skew:
                return Status(Code.UNSCHEDULABLE, [ERR_REASON_CONSTRAINTS_NOT_MATCH])
        return None

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
        except StateNotFoundError:
            return np.zeros(len(indices), dtype=bool)  # the scalar filter reports the error
        assert isinstance(s, _PreFilterState)
        if not s.constraints:
            return np.ones(len(indices), dtype=bool)
        return self._verdicts(s, pod_info, snapshot)[indices] == _PASSES

    def filter_statuses(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> list[Status | None]:
        """`filter`'s Status per node, two shared Status objects in all."""
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
        except StateNotFoundError as e:
            return [state_read_status(PRE_FILTER_STATE_KEY, e)] * len(indices)
        assert isinstance(s, _PreFilterState)
        table: list[Status | None] = [
            None,
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_NODE_LABEL_NOT_MATCH]),
            Status(Code.UNSCHEDULABLE, [ERR_REASON_CONSTRAINTS_NOT_MATCH]),
        ]
        return [table[v] for v in self._verdicts(s, pod_info, snapshot)[indices].tolist()]

    def _verdicts(self, s: _PreFilterState, pod_info: PodInfo, snapshot: Snapshot) -> npt.NDArray[np.int8]:
        """`filter` over every node of the snapshot, once per cycle state: per node, the first
        constraint that fails decides (`_PASSES`, `_LACKS_KEY` or `_OVER_SKEW`)."""
        if s.verdicts is not None and s.verdicts[0] == id(snapshot):
            return s.verdicts[1]
        index = self._label_index(snapshot)
        verdict = np.full(index.n, _PASSES, dtype=np.int8)
        pod_labels = pod_info.labels
        for i, c in enumerate(s.constraints):
            codes, values = index.codes(c.topology_key)
            self_match = 1 if c.selector.matches(pod_labels) else 0
            limit = c.max_skew + s.min_match_num(i, c.min_domains) - self_match
            counts = s.tp_value_to_match_num[i]
            # per domain: over the skew limit? The last row is for code -1 (no such label).
            over = np.array([counts.get(v, 0) > limit for v in values] + [False])
            undecided = verdict == _PASSES
            verdict[undecided & (codes < 0)] = _LACKS_KEY
            verdict[undecided & over[codes]] = _OVER_SKEW
        s.verdicts = (id(snapshot), verdict)
        return verdict

    # -- score

    def _init_pre_score_state(
        self, s: _PreScoreState, pod_info: PodInfo, filtered: Sequence[NodeInfo], require_all_topologies: bool
    ) -> None:
        s.constraints = self.get_constraints(pod_info, SCHEDULE_ANYWAY)
        if not s.constraints:
            return
        s.topology_value_to_pod_counts = [{} for _ in s.constraints]
        snapshot = self._snapshot()
        rows = (
            filtered.indices_into(snapshot.node_info_list)
            if snapshot is not None and isinstance(filtered, NodeInfoView)
            else None
        )
        if snapshot is not None and rows is not None:
            self._init_domains_over(s, snapshot, np.asarray(rows, dtype=np.intp), require_all_topologies)
            return
        topo_size = [0] * len(s.constraints)
        for ni in filtered:
            if require_all_topologies and not node_labels_match_spread_constraints(ni.labels, s.constraints):
                s.ignored_nodes.add(ni.name)  # not scored later
                continue
            for i, c in enumerate(s.constraints):
                if c.topology_key == LABEL_HOSTNAME:
                    continue  # per-node counts are done in Score
                value = ni.labels.get(c.topology_key, "")
                counts = s.topology_value_to_pod_counts[i]
                if value not in counts:
                    counts[value] = 0
                    topo_size[i] += 1
        s.topology_normalizing_weight = [
            topology_normalizing_weight(
                len(filtered) - len(s.ignored_nodes) if c.topology_key == LABEL_HOSTNAME else topo_size[i]
            )
            for i, c in enumerate(s.constraints)
        ]

    def _init_domains_over(
        self, s: _PreScoreState, snapshot: Snapshot, rows: npt.NDArray[np.intp], require_all: bool
    ) -> None:
        """`_init_pre_score_state`'s loop over the filtered nodes, on the label index's codes:
        the same ignored nodes, domains and weights."""
        index = self._label_index(snapshot)
        codes_of = [index.codes(c.topology_key) for c in s.constraints]
        scored = len(rows)
        if require_all:
            has_all = np.ones(len(rows), dtype=bool)
            for codes, _ in codes_of:
                has_all &= codes[rows] >= 0
            if not has_all.all():
                infos = snapshot.node_info_list
                s.ignored_nodes = {infos[j].name for j in rows[~has_all].tolist()}  # not scored later
                rows = rows[has_all]
            scored = len(rows)
        weights = []
        for i, c in enumerate(s.constraints):
            if c.topology_key == LABEL_HOSTNAME:
                weights.append(topology_normalizing_weight(scored))
                continue  # per-node counts are done in Score
            codes, values = codes_of[i]
            counts = s.topology_value_to_pod_counts[i]
            for code in np.unique(codes[rows]).tolist():
                counts[values[code] if code >= 0 else ""] = 0  # a missing key is the value ""
            weights.append(topology_normalizing_weight(len(counts)))
        s.topology_normalizing_weight = weights

    def _all_nodes(self) -> Sequence[NodeInfo]:
        assert self._handle is not None, "PodTopologySpread scoring needs a FrameworkHandle"
        return self._handle.snapshot_shared_lister().node_infos().list()

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        all_nodes = self._all_nodes()
        if not nodes or not all_nodes:
            return Status(Code.SKIP)  # no nodes to score
        s = _PreScoreState()
        # Only non-system-default spreading requires all topology keys, so that nodes without a
        # zone label still get hostname spreading.
        require_all = bool(pod_info.pod.spec.topology_spread_constraints) or not self.system_defaulted
        try:
            self._init_pre_score_state(s, pod_info, nodes, require_all)
        except ValueError as e:
            return as_status(ValueError(f"calculating preScoreState: {e}"))
        if not s.constraints:
            return Status(Code.SKIP)
        required = required_node_affinity(pod_info)
        tolerations = pod_tolerations(pod_info)
        inclusion = self.features.enable_node_inclusion_policy_in_pod_topology_spread
        namespace = pod_info.pod.metadata.namespace
        sums = self._kept_counts("score", s.constraints, namespace, all_nodes, required, require_all)
        if sums is not None:
            for i, counts in enumerate(s.topology_value_to_pod_counts):
                for value in counts:
                    counts[value] = sums.get((i, value), 0)
            state.write(PRE_SCORE_STATE_KEY, s)
            return None
        for ni in all_nodes:
            if ni.node is None:
                continue
            labels = ni.labels
            if not inclusion and not required.matches(ni.name, labels):
                continue
            if require_all and not node_labels_match_spread_constraints(labels, s.constraints):
                continue
            for i, c in enumerate(s.constraints):
                if inclusion and not c.match_node_inclusion_policies(tolerations, ni, required):
                    continue
                counts = s.topology_value_to_pod_counts[i]
                value = labels.get(c.topology_key, "")
                if value not in counts:
                    continue  # no candidate node in this domain (or a hostname constraint)
                counts[value] += count_pods_match_selector(ni.pods, c.selector, namespace)
        state.write(PRE_SCORE_STATE_KEY, s)
        return None

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError as e:
            return 0, state_read_status(PRE_SCORE_STATE_KEY, e, "failed to read")
        assert isinstance(s, _PreScoreState)
        if node_info.name in s.ignored_nodes:
            return 0, None
        score = 0.0
        labels = node_info.labels
        namespace = pod_info.pod.metadata.namespace
        for i, c in enumerate(s.constraints):
            tp_val = labels.get(c.topology_key)
            if tp_val is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                cnt = count_pods_match_selector(node_info.pods, c.selector, namespace)
            else:
                cnt = s.topology_value_to_pod_counts[i].get(tp_val, 0)
            score += score_for_count(cnt, c.max_skew, s.topology_normalizing_weight[i])
        return go_round(score), None

    def normalize_score(self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]) -> Status | None:
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_SCORE_STATE_KEY, e, "failed to read")
        assert isinstance(s, _PreScoreState)
        min_score, max_score = 2**63 - 1, 0
        for ns in scores:
            if ns.name in s.ignored_nodes:
                ns.score = _INVALID_SCORE
                continue
            min_score = min(min_score, ns.score)
            max_score = max(max_score, ns.score)
        for ns in scores:
            if ns.score == _INVALID_SCORE:
                ns.score = 0
            elif max_score == 0:
                ns.score = MAX_NODE_SCORE
            else:
                ns.score = MAX_NODE_SCORE * (max_score + min_score - ns.score) // max_score
        return None

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        """`score` per node, summed over the constraints in the same order (the same floats)."""
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError as e:
            raise RuntimeError(str(e)) from e  # the engine falls back to the scalar Score
        assert isinstance(s, _PreScoreState)
        index = self._label_index(snapshot)
        infos = snapshot.node_info_list
        rows = indices.tolist()
        namespace = pod_info.pod.metadata.namespace
        total = np.zeros(len(indices), dtype=np.float64)
        for i, c in enumerate(s.constraints):
            codes, values = index.codes(c.topology_key)
            weight, base = s.topology_normalizing_weight[i], float(c.max_skew - 1)
            if c.topology_key == LABEL_HOSTNAME:
                has = codes[indices] >= 0
                cnt = np.fromiter(
                    (count_pods_match_selector(infos[j].pods, c.selector, namespace) for j in rows),
                    dtype=np.float64,
                    count=len(rows),
                )
                total += np.where(has, cnt * weight + base, 0.0)
                continue
            # per domain, and 0.0 (nothing added) for a node without the key: code -1, the last row
            counts = s.topology_value_to_pod_counts[i]
            table = np.array([float(counts.get(v, 0)) * weight + base for v in values] + [0.0])
            total += table[codes[indices]]
        scores = go_round_array(total)
        if s.ignored_nodes:
            ignored = s.ignored_nodes
            scores[np.fromiter((infos[j].name in ignored for j in rows), dtype=bool, count=len(rows))] = 0
        return scores

    def normalize_scores(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_infos: Sequence[NodeInfo],
        scores: npt.NDArray[np.int64],
    ) -> Status | None:
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_SCORE_STATE_KEY, e, "failed to read")
        assert isinstance(s, _PreScoreState)
        if not len(scores):
            return None
        if s.ignored_nodes:
            ignored = s.ignored_nodes
            counted = ~np.fromiter((ni.name in ignored for ni in node_infos), dtype=bool, count=len(scores))
        else:
            counted = np.ones(len(scores), dtype=bool)
        if not counted.any():
            scores[:] = 0
            return None
        kept = scores[counted]
        min_score, max_score = int(kept.min()), max(int(kept.max()), 0)
        if max_score == 0:
            scores[counted] = MAX_NODE_SCORE
        else:
            scores[counted] = MAX_NODE_SCORE * (max_score + min_score - kept) // max_score
        scores[~counted] = 0
        return None

    def score_extensions(self) -> PodTopologySpread:
        return self


def _parse_constraint(raw: Mapping[str, Any], path: str) -> pb.TopologySpreadConstraint:
    try:
        return json_format.ParseDict(raw, pb.TopologySpreadConstraint(), ignore_unknown_fields=True)
    except json_format.ParseError as e:
        raise ValueError(f"{path}: {e}") from e


def new(
    args: Mapping[str, Any] | None, handle: FrameworkHandle | None, features: Features = DEFAULT_FEATURES
) -> PodTopologySpread:
    """Builds the plugin from PodTopologySpreadArgs with upstream's validation (ValueError)."""
    args = args or {}
    raw_constraints = list(args.get("defaultConstraints") or ())
    defaulting = args.get("defaultingType") or (LIST_DEFAULTING if raw_constraints else SYSTEM_DEFAULTING)
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise ValueError(
            f'defaultingType: Unsupported value: "{defaulting}": supported values: "System", "List"'
        )
    if defaulting == SYSTEM_DEFAULTING and raw_constraints:
        raise ValueError('defaultingType: Invalid value: "System": when .defaultConstraints are not empty')
    constraints = []
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(raw_constraints):
        path = f"defaultConstraints[{i}]"
        c = _parse_constraint(raw, path)
        if c.max_skew <= 0:
            raise ValueError(f"{path}.maxSkew: Invalid value: {c.max_skew}: not in valid range")
        if not c.topology_key:
            raise ValueError(f"{path}.topologyKey: Required value: can not be empty")
        if c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError(
                f'{path}.whenUnsatisfiable: Unsupported value: "{c.when_unsatisfiable}": '
                f'supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"'
            )
        if c.HasField("label_selector"):
            raise ValueError(
                f"{path}.labelSelector: Forbidden: "
                "constraint must not define a selector, as they deduced for each pod"
            )
        if (c.topology_key, c.when_unsatisfiable) in seen:
            raise ValueError(f"{path}: Duplicate value: {{{c.topology_key}, {c.when_unsatisfiable}}}")
        seen.add((c.topology_key, c.when_unsatisfiable))
        constraints.append(c)
    if defaulting == SYSTEM_DEFAULTING:
        return PodTopologySpread(handle, SYSTEM_DEFAULT_CONSTRAINTS, True, features)
    return PodTopologySpread(handle, constraints, False, features)
