"""NodeAffinity: spec.nodeSelector and required node affinity filter nodes; preferred node
affinity terms score them (upstream plugins/nodeaffinity).

Args: addedAffinity: a NodeAffinity (JSON/YAML shape) that the scheduler enforces for every pod
of the profile in addition to the pod's own: its required terms filter (reason "node(s) didn't
match scheduler-enforced node affinity"), its preferred terms add to the score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from google.protobuf import json_format

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEventWithHint,
    FrameworkHandle,
    NodeScore,
    PreFilterExtensions,
    PreFilterResult,
)
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.plugins.feature import DEFAULT_FEATURES, Features
from scheduler.framework.plugins.helper.node_affinity import (
    OBJECT_NAME_FIELD,
    NodeSelector,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    required_node_affinity,
)
from scheduler.framework.plugins.helper.normalize_score import (
    default_normalize_score,
    default_normalize_scores,
)
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.plugins.helper.selectors import IN
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

NAME = "NodeAffinity"
_PREFERRED_KEY = NAME + "/preferred"  # one string, not one per pod (PodInfo.derived's key)
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


@dataclass(frozen=True)
class _PreFilterState:
    required: RequiredNodeAffinity

    def clone(self) -> _PreFilterState:
        return self


@dataclass(frozen=True)
class _PreScoreState:
    preferred: PreferredSchedulingTerms | None

    def clone(self) -> _PreScoreState:
        return self


def _pod_preferred(pod_info: PodInfo) -> PreferredSchedulingTerms | None:
    """The pod's preferred terms, parsed once per PodInfo; raises SelectorError (ValueError) on an
    invalid term, as upstream's getPodPreferredNodeAffinity returns an error."""
    got = pod_info.derived.get(_PREFERRED_KEY, False)
    if got is False:
        spec = pod_info.pod.spec
        got = None
        if spec.HasField("affinity") and spec.affinity.HasField("node_affinity"):
            terms = spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
            if terms:
                got = PreferredSchedulingTerms(terms)
        pod_info.derived[_PREFERRED_KEY] = got
    return got  # type: ignore[no-any-return]


def _required_terms(pod: pb.Pod) -> Sequence[pb.NodeSelectorTerm] | None:
    spec = pod.spec
    if not (spec.HasField("affinity") and spec.affinity.HasField("node_affinity")):
        return None
    na = spec.affinity.node_affinity
    if not na.HasField("required_during_scheduling_ignored_during_execution"):
        return None
    return na.required_during_scheduling_ignored_during_execution.node_selector_terms


class NodeAffinity:
    # Filter reads the node and the pod, never the pods on the node (preemption's dry run
    # evaluates it once per node: scheduler.framework.plugins.defaultpreemption.victims).
    FILTER_READS_NODE_PODS = False

    def __init__(
        self, added_affinity: pb.NodeAffinity | None = None, features: Features = DEFAULT_FEATURES
    ) -> None:
        self.features = features
        self.added_node_selector: NodeSelector | None = None
        self.added_pref_sched_terms: PreferredSchedulingTerms | None = None
        if added_affinity is not None:
            if added_affinity.HasField("required_during_scheduling_ignored_during_execution"):
                self.added_node_selector = NodeSelector(
                    added_affinity.required_during_scheduling_ignored_during_execution,
                    "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                )
                if self.added_node_selector.errors:
                    raise ValueError("; ".join(self.added_node_selector.errors))
            if added_affinity.preferred_during_scheduling_ignored_during_execution:
                # raises SelectorError (a ValueError) on an invalid term
                self.added_pref_sched_terms = PreferredSchedulingTerms(
                    added_affinity.preferred_during_scheduling_ignored_during_execution,
                    "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution",
                )

    def name(self) -> str:
        return NAME

    # -- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        action = ActionType.ADD | ActionType.UPDATE_NODE_LABEL
        if not self.features.enable_scheduling_queue_hint:
            action |= ActionType.UPDATE_NODE_TAINT
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, action), self.is_schedulable_after_node_change
            )
        ]

    def is_schedulable_after_node_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Node, old, new)
        assert modified is not None
        name, labels = modified.metadata.name, modified.metadata.labels
        if self.added_node_selector is not None and not self.added_node_selector.matches(name, labels):
            return QueueingHint.SKIP
        required = RequiredNodeAffinity(pod)
        if not required.matches_node(modified):
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.QUEUE
        # an update helps only when the node did not match before
        return QueueingHint.SKIP if required.matches_node(original) else QueueingHint.QUEUE

    # -- filter

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        terms = _required_terms(pod_info.pod)
        if terms is None and self.added_node_selector is None and not pod_info.pod.spec.node_selector:
            return None, Status(Code.SKIP)  # nothing to filter for this pod
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(required_node_affinity(pod_info)))
        if not terms:
            return None, None
        # Affinity to specific node names (matchFields metadata.name In ...) narrows the nodes.
        node_names: set[str] | None = None
        for term in terms:
            term_names: set[str] | None = None
            for r in term.match_fields:
                if r.key == OBJECT_NAME_FIELD and r.operator == IN:
                    values = set(r.values)  # requirements of a term are ANDed
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None, None  # this term allows any node, and terms are ORed
            node_names = term_names if node_names is None else node_names | term_names
        if node_names is not None and not node_names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_CONFLICT])
        if node_names:
            return PreFilterResult(node_names), None
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        if self.added_node_selector is not None and not self.added_node_selector.matches(
            node_info.name, node_info.labels
        ):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_ENFORCED])
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
            assert isinstance(s, _PreFilterState)
            required = s.required
        except StateNotFoundError:
            required = required_node_affinity(pod_info)  # PreFilter disabled
        if not required.matches(node_info.name, node_info.labels):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_POD])
        return None

    # -- score

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        try:
            preferred = _pod_preferred(pod_info)
        except ValueError as e:
            return as_status(e)
        if preferred is None and self.added_pref_sched_terms is None:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(preferred))
        return None

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        count = 0
        if self.added_pref_sched_terms is not None:
            count += self.added_pref_sched_terms.score(node_info.name, node_info.labels)
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
            assert isinstance(s, _PreScoreState)
            preferred = s.preferred
        except StateNotFoundError:
            try:
                preferred = _pod_preferred(pod_info)  # PreScore disabled
            except ValueError as e:
                return 0, as_status(e)
        if preferred is not None:
            count += preferred.score(node_info.name, node_info.labels)
        return count, None

    def normalize_score(self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]) -> Status | None:
        return default_normalize_score(MAX_NODE_SCORE, False, scores)

    def normalize_scores(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_infos: Sequence[NodeInfo],
        scores: npt.NDArray[np.int64],
    ) -> Status | None:
        return default_normalize_scores(MAX_NODE_SCORE, False, scores)

    def score_extensions(self) -> NodeAffinity:
        return self


def new(
    args: Mapping[str, Any] | None, handle: FrameworkHandle | None, features: Features = DEFAULT_FEATURES
) -> NodeAffinity:
    """Builds the plugin from NodeAffinityArgs (raises ValueError on an invalid addedAffinity)."""
    raw = (args or {}).get("addedAffinity")
    added = None
    if raw is not None:
        try:
            added = json_format.ParseDict(raw, pb.NodeAffinity(), ignore_unknown_fields=True)
        except json_format.ParseError as e:
            raise ValueError(f"addedAffinity: {e}") from e
    return NodeAffinity(added, features)
