"""NodeResourcesBalancedAllocation: favours nodes whose resource usage fractions, with the pod
on them, are closest to each other (upstream plugins/noderesources/balanced_allocation.go).

score = (1 - std(fractions)) * 100, fraction = requested / allocatable per configured resource
(capped at 1), using the actual requests of the node and of the pod. Best-effort pods (no
request for any configured resource) are skipped in PreScore, as upstream (issue 129138).

Args: resources: [{name, weight}] (default cpu:1, memory:1; weights do not affect the score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.interface import FrameworkHandle, ScoreExtensions
from scheduler.framework.nodeinfo import NodeInfo, Snapshot
from scheduler.framework.plugins.noderesources.resource_allocation import (
    ResourceAllocationScorer,
    ResourceSpec,
    balanced_resource_scorer,
    balanced_resource_vector,
    parse_resources,
    validate_resources,
)
from scheduler.framework.types import Code, PodInfo, Status

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_STATE_KEY = "PreScore" + NAME


@dataclass(frozen=True)
class _PreScoreState:
    pod_requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


class BalancedAllocation:
    def __init__(self, resources: Sequence[ResourceSpec]) -> None:
        validate_resources(resources, "resources")
        self.scorer = ResourceAllocationScorer(
            NAME, resources, balanced_resource_scorer, balanced_resource_vector, use_requested=True
        )

    def name(self) -> str:
        return NAME

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        requests = self.scorer.pod_requests(pod_info)
        if not any(requests):
            # Best-effort pods would all pile onto the same node otherwise.
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(tuple(requests)))
        return None

    def _pod_requests(self, state: CycleState, pod_info: PodInfo) -> Sequence[int] | None:
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError:
            requests = self.scorer.pod_requests(pod_info)  # PreScore disabled: compute here
            return requests if any(requests) else None
        assert isinstance(s, _PreScoreState)
        return s.pod_requests

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        requests = self._pod_requests(state, pod_info)
        if requests is None:
            return 0, None
        return self.scorer.score(node_info, requests)

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        requests = self._pod_requests(state, pod_info)
        if requests is None:
            return np.zeros(len(indices), np.int64)
        return self.scorer.score_nodes(snapshot.arrays(), indices, requests)

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle | None) -> BalancedAllocation:
    """Builds the plugin from NodeResourcesBalancedAllocationArgs (raises ValueError)."""
    return BalancedAllocation(parse_resources((args or {}).get("resources"), "resources"))
