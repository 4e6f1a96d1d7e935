"""Resource-allocation scoring shared by NodeResourcesFit's strategies (LeastAllocated,
MostAllocated, RequestedToCapacityRatio) and NodeResourcesBalancedAllocation.

Upstream: plugins/noderesources/resource_allocation.go, least_allocated.go, most_allocated.go,
requested_to_capacity_ratio.go, balanced_allocation.go.

Each scorer exists twice: a scalar function over one node's (requested, allocatable) lists, and a
numpy version over many nodes at once. Both do the same integer (and, for BalancedAllocation, the
same IEEE float) operations in the same order, so their results are identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.interface import MAX_NODE_SCORE
from scheduler.framework.nodeinfo import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NodeInfo,
    ResourceArrays,
    is_scalar_resource_name,
)
from scheduler.framework.plugins.helper.gomath import round_ratio
from scheduler.framework.plugins.helper.shape_score import FunctionShapePoint, build_broken_linear_function
from scheduler.framework.types import Code, PodInfo, Status

I64 = npt.NDArray[np.int64]

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

# RequestedToCapacityRatio shape scores are 0..10 (upstream config.MaxCustomPriorityScore) and
# utilizations 0..100 (maxUtilization).
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


# ----------------------------------------------------------------------------- args


def parse_resources(raw: Any, path: str) -> tuple[ResourceSpec, ...]:
    """`resources` of NodeResourcesFitArgs.scoringStrategy / BalancedAllocationArgs, with the v1
    defaults (cpu and memory, weight 1; a missing weight is 1) and upstream's validation
    (weight in [1, 100], no duplicate names). Raises ValueError naming the field."""
    if not raw:
        return DEFAULT_RESOURCES
    specs = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        name = str(item.get("name", ""))
        weight = int(item.get("weight", 0) or 1)
        if not name:
            raise ValueError(f"{path}[{i}].name: Required value")
        if name in seen:
            raise ValueError(f'{path}[{i}].name: Duplicate value: "{name}"')
        seen.add(name)
        specs.append(ResourceSpec(name, weight))
    validate_resources(specs, path)
    return tuple(specs)


def validate_resources(specs: Sequence[ResourceSpec], path: str) -> None:
    for i, spec in enumerate(specs):
        if spec.weight <= 0 or spec.weight > 100:
            raise ValueError(
                f"{path}[{i}].weight: Invalid value: {spec.weight}: "
                f"resource weight of {spec.name} not in valid range [1, 100]"
            )


def parse_shape(raw: Any, path: str) -> tuple[FunctionShapePoint, ...]:
    """requestedToCapacityRatio.shape, validated as upstream: at least one point, utilization in
    [0, 100] strictly increasing, score in [0, 10]."""
    if not raw:
        raise ValueError(f"{path}: Required value: at least one point must be specified")
    points: list[FunctionShapePoint] = []
    for i, item in enumerate(raw):
        u, s = int(item.get("utilization", 0)), int(item.get("score", 0))
        if not 0 <= u <= MAX_UTILIZATION:
            raise ValueError(f"{path}[{i}].utilization: Invalid value: {u}: not in valid range [0, 100]")
        if points and u <= points[-1].utilization:
            raise ValueError(
                f"{path}[{i}].utilization: Invalid value: {u}: "
                "utilization values must be sorted in increasing order"
            )
        if not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(f"{path}[{i}].score: Invalid value: {s}: not in valid range [0, 10]")
        points.append(FunctionShapePoint(u, s))
    return tuple(points)


# ----------------------------------------------------------------------------- scalar scorers

ScalarScorer = Callable[[Sequence[int], Sequence[int]], int]


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    # requested may exceed capacity because pods with no requests count their non-zero defaults
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def _weighted_scorer(
    resources: Sequence[ResourceSpec], per_resource: Callable[[int, int], int]
) -> ScalarScorer:
    weights = tuple(r.weight for r in resources)

    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, w in zip(requested, allocatable, weights, strict=True):
            if alloc == 0:
                continue
            node_score += per_resource(req, alloc) * w
            weight_sum += w
        return node_score // weight_sum if weight_sum else 0

    return scorer


def least_resource_scorer(resources: Sequence[ResourceSpec]) -> ScalarScorer:
    """(capacity - requested) * 100 / capacity per resource, weighted mean (upstream)."""
    return _weighted_scorer(resources, least_requested_score)


def most_resource_scorer(resources: Sequence[ResourceSpec]) -> ScalarScorer:
    """requested * 100 / capacity per resource, weighted mean (upstream)."""
    return _weighted_scorer(resources, most_requested_score)


def scaled_shape(shape: Sequence[FunctionShapePoint]) -> tuple[FunctionShapePoint, ...]:
    """Shape scores scaled from 0..10 to 0..MAX_NODE_SCORE, as upstream does before use."""
    factor = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    return tuple(FunctionShapePoint(p.utilization, p.score * factor) for p in shape)


def requested_to_capacity_ratio_scorer(
    resources: Sequence[ResourceSpec], shape: Sequence[FunctionShapePoint]
) -> ScalarScorer:
    """The shape function of utilization per resource; resources scoring 0 do not count; the
    weighted mean is rounded (upstream buildRequestedToCapacityRatioScorerFunction)."""
    raw = build_broken_linear_function(scaled_shape(shape))
    weights = tuple(r.weight for r in resources)

    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, w in zip(requested, allocatable, weights, strict=True):
            if alloc == 0:
                continue
            util = MAX_UTILIZATION if req > alloc else req * MAX_UTILIZATION // alloc
            s = raw(util)
            if s > 0:
                node_score += s * w
                weight_sum += w
        return round_ratio(node_score, weight_sum) if weight_sum else 0

    return scorer


def balanced_resource_scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """(1 - std of the requested fractions) * 100, fractions capped at 1; for two resources the
    std is |f0 - f1| / 2 (upstream balancedResourceScorer, float64 throughout)."""
    fractions = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        f = min(float(req) / float(alloc), 1.0)
        total += f
        fractions.append(f)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        s = 0.0
        for f in fractions:
            s = s + (f - mean) * (f - mean)
        std = math.sqrt(s / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


# ----------------------------------------------------------------------------- vector scorers

Columns = Sequence[tuple[I64, I64]]  # per resource: (allocatable, requested) over the nodes
VectorScorer = Callable[[Columns, int], I64]


def _safe(den: I64) -> I64:
    return np.where(den == 0, 1, den)


def _weighted_vector(
    resources: Sequence[ResourceSpec], per_resource: Callable[[I64, I64], I64]
) -> VectorScorer:
    weights = tuple(r.weight for r in resources)

    def scorer(cols: Columns, n: int) -> I64:
        node_score = np.zeros(n, np.int64)
        weight_sum = np.zeros(n, np.int64)
        for (alloc, req), w in zip(cols, weights, strict=True):
            valid = alloc != 0
            s = per_resource(req, alloc)
            node_score += np.where(valid, s * w, 0)
            weight_sum += np.where(valid, w, 0)
        return np.where(weight_sum == 0, 0, node_score // _safe(weight_sum))

    return scorer


def _least_vec(req: I64, alloc: I64) -> I64:
    return np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // _safe(alloc))


def _most_vec(req: I64, alloc: I64) -> I64:
    return np.minimum(req, alloc) * MAX_NODE_SCORE // _safe(alloc)


def least_resource_vector(resources: Sequence[ResourceSpec]) -> VectorScorer:
    return _weighted_vector(resources, _least_vec)


def most_resource_vector(resources: Sequence[ResourceSpec]) -> VectorScorer:
    return _weighted_vector(resources, _most_vec)


def broken_linear_vector(shape: Sequence[FunctionShapePoint]) -> Callable[[I64], I64]:
    """build_broken_linear_function over an array."""
    points = tuple(shape)

    def f(p: I64) -> I64:
        out = np.full(p.shape, points[-1].score, np.int64)
        done = np.zeros(p.shape, bool)
        for i, point in enumerate(points):
            hit = (p <= point.utilization) & ~done
            if i == 0:
                val = np.full(p.shape, point.score, np.int64)
            else:
                prev = points[i - 1]
                num = (point.score - prev.score) * (p - prev.utilization)
                den = point.utilization - prev.utilization
                val = prev.score + np.sign(num) * (np.abs(num) // den)
            out = np.where(hit, val, out)
            done |= hit
        return out

    return f


def requested_to_capacity_ratio_vector(
    resources: Sequence[ResourceSpec], shape: Sequence[FunctionShapePoint]
) -> VectorScorer:
    raw = broken_linear_vector(scaled_shape(shape))
    weights = tuple(r.weight for r in resources)

    def scorer(cols: Columns, n: int) -> I64:
        node_score = np.zeros(n, np.int64)
        weight_sum = np.zeros(n, np.int64)
        for (alloc, req), w in zip(cols, weights, strict=True):
            valid = alloc != 0
            util = np.where(req > alloc, MAX_UTILIZATION, req * MAX_UTILIZATION // _safe(alloc))
            s = raw(util)
            counted = valid & (s > 0)
            node_score += np.where(counted, s * w, 0)
            weight_sum += np.where(counted, w, 0)
        return np.where(weight_sum == 0, 0, (2 * node_score + weight_sum) // (2 * _safe(weight_sum)))

    return scorer


def balanced_resource_vector(cols: Columns, n: int) -> I64:
    """balanced_resource_scorer over arrays, with the same float operations in the same order."""
    if len(cols) == 2 and cols[0][0].all() and cols[1][0].all():
        # The common case (cpu and memory, allocatable everywhere): two fractions, std = |a-b|/2.
        (alloc1, req1), (alloc2, req2) = cols
        f1 = np.minimum(req1.astype(np.float64) / alloc1.astype(np.float64), 1.0)
        f2 = np.minimum(req2.astype(np.float64) / alloc2.astype(np.float64), 1.0)
        return ((1 - np.abs((f1 - f2) / 2)) * float(MAX_NODE_SCORE)).astype(np.int64)
    count = np.zeros(n, np.int64)
    total = np.zeros(n, np.float64)
    first = np.zeros(n, np.float64)
    second = np.zeros(n, np.float64)
    fractions = []
    for alloc, req in cols:
        valid = alloc != 0
        f = np.minimum(req.astype(np.float64) / np.where(valid, alloc, 1).astype(np.float64), 1.0)
        f = np.where(valid, f, 0.0)
        total = np.where(valid, total + f, total)
        first = np.where(valid & (count == 0), f, first)
        second = np.where(valid & (count == 1), f, second)
        count = count + valid
        fractions.append((valid, f))
    std = np.zeros(n, np.float64)
    two = count == 2
    std = np.where(two, np.abs((first - second) / 2), std)
    many = count > 2
    if many.any():
        mean = total / np.where(many, count, 1)
        s = np.zeros(n, np.float64)
        for valid, f in fractions:
            d = f - mean
            s = np.where(valid, s + d * d, s)
        std = np.where(many, np.sqrt(s / np.where(many, count, 1)), std)
    return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


# ----------------------------------------------------------------------------- the scorer


class ResourceAllocationScorer:
    """Scores a node by its (requested, allocatable) per configured resource
    (upstream resourceAllocationScorer). With use_requested=False (NodeResourcesFit), cpu and
    memory use the non-zero requests of the node and of the pod; BalancedAllocation uses the
    actual requests."""

    def __init__(
        self,
        name: str,
        resources: Sequence[ResourceSpec],
        scorer: ScalarScorer,
        vector: VectorScorer,
        use_requested: bool,
    ) -> None:
        self.name = name
        self.resources = tuple(resources)
        self.scorer = scorer
        self.vector = vector
        self.use_requested = use_requested

    def pod_requests(self, pod_info: PodInfo) -> list[int]:
        """The pod's request for every configured resource (upstream
        calculatePodResourceRequestList)."""
        requests = pod_info.requests if self.use_requested else pod_info.non_zero_requests
        return [requests.get(r.name, 0) for r in self.resources]

    def _allocatable_requested(self, node_info: NodeInfo, resource: str, pod_request: int) -> tuple[int, int]:
        """Upstream calculateResourceAllocatableRequest: (allocatable, node requested + pod)."""
        if pod_request == 0 and is_scalar_resource_name(resource):
            # an extended resource the pod does not request takes no part in the score
            return 0, 0
        requested = node_info.requested if self.use_requested else node_info.non_zero_requested
        alloc = node_info.allocatable
        if resource == CPU:
            return alloc.milli_cpu, requested.milli_cpu + pod_request
        if resource == MEMORY:
            return alloc.memory, requested.memory + pod_request
        if resource == EPHEMERAL_STORAGE:
            return alloc.ephemeral_storage, node_info.requested.ephemeral_storage + pod_request
        if resource in alloc.scalar_resources:
            return alloc.scalar_resources[resource], node_info.requested.scalar_resources.get(
                resource, 0
            ) + pod_request
        return 0, 0

    def score(self, node_info: NodeInfo, pod_requests: Sequence[int]) -> tuple[int, Status | None]:
        if not self.resources:
            return 0, Status(Code.ERROR, ["resources not found"])
        requested = [0] * len(self.resources)
        allocatable = [0] * len(self.resources)
        for i, spec in enumerate(self.resources):
            alloc, req = self._allocatable_requested(node_info, spec.name, pod_requests[i])
            if alloc == 0:
                continue
            allocatable[i] = alloc
            requested[i] = req
        return self.scorer(requested, allocatable), None

    def columns(
        self, arrays: ResourceArrays, indices: npt.NDArray[np.intp], pod_requests: Sequence[int]
    ) -> Columns:
        """(allocatable, requested) arrays per configured resource, as `_allocatable_requested`
        computes them per node."""
        n = len(indices)
        zeros = np.zeros(n, np.int64)
        cols: list[tuple[I64, I64]] = []
        for spec, pod_req in zip(self.resources, pod_requests, strict=True):
            name = spec.name
            if pod_req == 0 and is_scalar_resource_name(name):
                cols.append((zeros, zeros))
            elif name == CPU:
                req_arr = arrays.req_milli_cpu if self.use_requested else arrays.nz_milli_cpu
                cols.append((arrays.alloc_milli_cpu[indices], req_arr[indices] + pod_req))
            elif name == MEMORY:
                req_arr = arrays.req_memory if self.use_requested else arrays.nz_memory
                cols.append((arrays.alloc_memory[indices], req_arr[indices] + pod_req))
            elif name == EPHEMERAL_STORAGE:
                cols.append(
                    (arrays.alloc_ephemeral_storage[indices], arrays.req_ephemeral_storage[indices] + pod_req)
                )
            elif is_scalar_resource_name(name):
                present, alloc, req = arrays.scalar(name)
                p = present[indices]
                cols.append((np.where(p, alloc[indices], 0), np.where(p, req[indices] + pod_req, 0)))
            else:
                cols.append((zeros, zeros))
        return cols

    def score_nodes(
        self, arrays: ResourceArrays, indices: npt.NDArray[np.intp], pod_requests: Sequence[int]
    ) -> I64:
        if not self.resources:
            return np.zeros(len(indices), np.int64)
        return self.vector(self.columns(arrays, indices, pod_requests), len(indices))


def make_strategy_scorer(strategy: Mapping[str, Any] | None) -> ResourceAllocationScorer:
    """The NodeResourcesFit scorer for a scoringStrategy args mapping (None: LeastAllocated on
    cpu and memory). Raises ValueError for an unknown type or invalid resources/shape."""
    strategy = strategy or {}
    kind = strategy.get("type") or LEAST_ALLOCATED
    resources = parse_resources(strategy.get("resources"), "scoringStrategy.resources")
    return strategy_scorer(kind, resources, _shape_of(kind, strategy))


def _shape_of(kind: str, strategy: Mapping[str, Any]) -> tuple[FunctionShapePoint, ...]:
    if kind != REQUESTED_TO_CAPACITY_RATIO:
        return ()
    param = strategy.get("requestedToCapacityRatio") or {}
    return parse_shape(param.get("shape"), "scoringStrategy.requestedToCapacityRatio.shape")


def strategy_scorer(
    kind: str, resources: Sequence[ResourceSpec], shape: Sequence[FunctionShapePoint] = ()
) -> ResourceAllocationScorer:
    validate_resources(resources, "scoringStrategy.resources")
    if kind == LEAST_ALLOCATED:
        return ResourceAllocationScorer(
            kind, resources, least_resource_scorer(resources), least_resource_vector(resources), False
        )
    if kind == MOST_ALLOCATED:
        return ResourceAllocationScorer(
            kind, resources, most_resource_scorer(resources), most_resource_vector(resources), False
        )
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        if not shape:
            raise ValueError("scoringStrategy.requestedToCapacityRatio.shape: Required value")
        return ResourceAllocationScorer(
            kind,
            resources,
            requested_to_capacity_ratio_scorer(resources, shape),
            requested_to_capacity_ratio_vector(resources, shape),
            False,
        )
    raise ValueError(
        f'scoringStrategy.type: Unsupported value: "{kind}": supported values: '
        f'"{LEAST_ALLOCATED}", "{MOST_ALLOCATED}", "{REQUESTED_TO_CAPACITY_RATIO}"'
    )
