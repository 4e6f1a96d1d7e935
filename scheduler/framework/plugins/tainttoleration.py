"""TaintToleration: a node's NoSchedule/NoExecute taints must be tolerated; nodes with fewer
untolerated PreferNoSchedule taints score higher (upstream plugins/tainttoleration).

The Filter reason is upstream's current generic "node(s) had untolerated taint(s)": since
kubernetes PR 134740 (v1.35, cherry-picked to 1.34) the pod status no longer names the taint's
key and value, which may be sensitive. When the only reason is a Gt/Lt toleration whose taint
(or toleration) value is not a canonical decimal int64, the reason is the parse error instead,
as in current upstream (component-helpers FindMatchingUntoleratedTaint returning the error).
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
    MAX_NODE_SCORE,
    ClusterEventWithHint,
    FrameworkHandle,
    NodeScore,
)
from scheduler.framework.nodeinfo import NodeInfo, Snapshot
from scheduler.framework.plugins.feature import DEFAULT_FEATURES, Features
from scheduler.framework.plugins.helper.normalize_score import (
    default_normalize_score,
    default_normalize_scores,
)
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.plugins.helper.status import state_read_status
from scheduler.framework.plugins.helper.taints import (
    TAINT_EFFECT_PREFER_NO_SCHEDULE,
    Toleration,
    do_not_schedule_taints_filter,
    find_matching_untolerated_taint,
    find_matching_untolerated_taint_checked,
    pod_tolerations,
    taints_of,
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

NAME = "TaintToleration"
PRE_SCORE_STATE_KEY = "PreScore" + NAME
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
# Kept for reference: upstream's (unused) constant of the same name.
ERR_REASON_NOT_MATCH = "node(s) had taints that the pod didn't tolerate"


@dataclass(frozen=True)
class _PreScoreState:
    tolerations_prefer_no_schedule: tuple[Toleration, ...]

    def clone(self) -> _PreScoreState:
        return self


def _prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    # an empty effect tolerates every effect, PreferNoSchedule included
    return tuple(t for t in tolerations if t.effect in ("", TAINT_EFFECT_PREFER_NO_SCHEDULE))


class TaintToleration:
    # Filter reads the node and the pod, never the pods on the node (preemption's dry run
    # evaluates it once per node: scheduler.framework.plugins.defaultpreemption.victims).
    FILTER_READS_NODE_PODS = False

    def __init__(self, features: Features = DEFAULT_FEATURES) -> None:
        self.features = features

    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEventWithHint]:
        if self.features.enable_scheduling_queue_hint:
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
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD | ActionType.UPDATE_NODE_TAINT | ActionType.UPDATE_NODE_LABEL,
                ),
                self.is_schedulable_after_node_change,
            )
        ]

    def is_schedulable_after_node_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Node, old, new)
        assert modified is not None
        tolerations = [Toleration.from_proto(t) for t in pod.spec.tolerations]
        enable = self.features.enable_taint_toleration_comparison_operators
        was_untolerated = True
        if original is not None:
            was_untolerated = (
                find_matching_untolerated_taint(
                    taints_of(original), tolerations, do_not_schedule_taints_filter, enable
                )
                is not None
            )
        is_untolerated = (
            find_matching_untolerated_taint(
                taints_of(modified), tolerations, do_not_schedule_taints_filter, enable
            )
            is not None
        )
        return QueueingHint.QUEUE if was_untolerated and not is_untolerated else QueueingHint.SKIP

    def is_schedulable_after_pod_toleration_change(
        self, pod: pb.Pod, old: object, new: object
    ) -> QueueingHint:
        _, modified = as_objects(pb.Pod, old, new)
        assert modified is not None
        # Tolerations can only be added: a new toleration of the rejected pod itself may help.
        return QueueingHint.QUEUE if modified.metadata.uid == pod.metadata.uid else QueueingHint.SKIP

    # -- filter

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        taints = node_info.taints
        if not taints:
            return None
        taint, err = find_matching_untolerated_taint_checked(
            taints,
            pod_tolerations(pod_info),
            do_not_schedule_taints_filter,
            self.features.enable_taint_toleration_comparison_operators,
        )
        if taint is None:
            return None
        if err is not None:
            # Only Gt/Lt comparisons that failed to parse kept the pod off: say why.
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [err])
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_UNTOLERATED])

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        """`filter` for many nodes: nodes without NoSchedule/NoExecute taints pass outright."""
        tainted = snapshot.arrays().hard_taints[indices]
        mask: npt.NDArray[np.bool_] = ~tainted
        infos = snapshot.node_info_list
        for k in np.flatnonzero(tainted):
            mask[k] = self.filter(state, pod_info, infos[indices[k]]) is None
        return mask

    # -- score

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(
            PRE_SCORE_STATE_KEY, _PreScoreState(_prefer_no_schedule_tolerations(pod_tolerations(pod_info)))
        )
        return None

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError as e:
            return 0, state_read_status(PRE_SCORE_STATE_KEY, e, "failed to read")
        assert isinstance(s, _PreScoreState)
        count = 0
        enable = self.features.enable_taint_toleration_comparison_operators
        for taint in node_info.taints:
            # a Gt/Lt value that does not parse tolerates nothing (no error here, as upstream)
            if taint.effect == TAINT_EFFECT_PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(
                s.tolerations_prefer_no_schedule, taint, enable
            ):
                count += 1
        return count, None

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        """`score` for many nodes: nodes without PreferNoSchedule taints score 0. Needs PreScore
        (raises StateNotFoundError otherwise, where `score` returns an Error status)."""
        state.read(PRE_SCORE_STATE_KEY)
        out = np.zeros(len(indices), np.int64)
        infos = snapshot.node_info_list
        for k in np.flatnonzero(snapshot.arrays().soft_taints[indices]):
            out[k] = self.score(state, pod_info, infos[indices[k]])[0]
        return out

    def normalize_score(self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]) -> Status | None:
        return default_normalize_score(MAX_NODE_SCORE, True, scores)

    def normalize_scores(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_infos: Sequence[NodeInfo],
        scores: npt.NDArray[np.int64],
    ) -> Status | None:
        return default_normalize_scores(MAX_NODE_SCORE, True, scores)

    def score_extensions(self) -> TaintToleration:
        return self


def new(
    args: Mapping[str, Any] | None, handle: FrameworkHandle | None, features: Features = DEFAULT_FEATURES
) -> TaintToleration:
    return TaintToleration(features)
