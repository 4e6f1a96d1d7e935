# ruff: noqa: E501 -- the case tables keep upstream's case names, one case per row
"""NodeResourcesFit's scoring strategies on upstream's own test tables
(plugins/noderesources/least_allocated_test.go, most_allocated_test.go,
requested_to_capacity_ratio_test.go: TestRequestedToCapacityRatioScoringStrategy,
TestBrokenLinearFunction, TestResourceBinPackingSingleExtended,
TestResourceBinPackingMultipleExtended). Every case also checks the batch (numpy) scorer."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from proto import kse_pb2 as pb
from scheduler.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins.helper.shape_score import FunctionShapePoint, build_broken_linear_function
from scheduler.framework.plugins.noderesources import fit
from scheduler.framework.plugins.noderesources.resource_allocation import (
    ResourceSpec,
    broken_linear_vector,
    strategy_scorer,
)
from scheduler.framework.types import Code

from .wrappers import FakeHandle, make_node, make_pod, resource_node, score_all

EXT = "abc.com/xyz"
DEFAULT = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
EXT_SET = [*DEFAULT, {"name": EXT, "weight": 1}]


def node(name: str, res: dict[str, str]) -> pb.Node:
    return make_node().name(name).capacity(res).obj()


def on(node_name: str, req: dict[str, str] | None = None) -> pb.Pod:
    w = make_pod().node(node_name)
    if req is not None:
        w.req(req)
    return w.obj()


CM_4_10 = {"cpu": "4000", "memory": "10000"}
CM_6_10 = {"cpu": "6000", "memory": "10000"}
CM_10_20 = {"cpu": "10000", "memory": "20000"}
TWO_CONTAINERS = (
    make_pod().req({"cpu": "1000", "memory": "2000"}).req({"cpu": "2000", "memory": "3000"}).obj()
)
TWO_CONTAINERS_ON_1 = (
    make_pod()
    .node("node1")
    .req({"cpu": "1000", "memory": "2000"})
    .req({"cpu": "2000", "memory": "3000"})
    .obj()
)
EXISTING_10_20 = [
    on("node1", {"cpu": "3000", "memory": "0"}),
    on("node1", {"cpu": "3000", "memory": "0"}),
    on("node2", {"cpu": "3000", "memory": "0"}),
    on("node2", {"cpu": "3000", "memory": "5000"}),
]
EXISTING_ONE_EACH = [
    on("node1", {"cpu": "3000", "memory": "0"}),
    on("node2", {"cpu": "3000", "memory": "5000"}),
]
EXT_NODES_4 = [node("node1", {"cpu": "6000", "memory": "10000"}), node("node2", {**CM_6_10, EXT: "4"})]
EXT_NODES_4_10 = [node("node1", {**CM_6_10, EXT: "4"}), node("node2", {**CM_6_10, EXT: "10"})]
EXT_POD = make_pod().node("node1").req({"cpu": "3000", "memory": "5000", EXT: "2"}).obj()
NODE_LACKS = make_pod().node("node1").req({"cpu": "3000", "memory": "4000"}).obj()
NODE_LACKS_RES = [{"name": EXT, "weight": 2}, {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]

# (name, pod, nodes, existing, resources (None: unset, Error status), wanted scores or error field)
Case = tuple[str, pb.Pod, list[pb.Node], list[pb.Pod], Any, Any]

LEAST: list[Case] = [
    ("nothing scheduled, nothing requested", make_pod().obj(), [node("node1", CM_4_10), node("node2", CM_4_10)],
     [], DEFAULT, [MAX_NODE_SCORE, MAX_NODE_SCORE]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_CONTAINERS,
     [node("node1", CM_4_10), node("node2", CM_6_10)], [], DEFAULT, [37, 50]),
    ("Resources not set, pods scheduled with error", TWO_CONTAINERS,
     [node("node1", CM_4_10), node("node2", CM_6_10)], [], None, [MIN_NODE_SCORE, MIN_NODE_SCORE]),
    ("no resources requested, pods scheduled", make_pod().obj(), [node("node1", CM_4_10), node("node2", CM_4_10)],
     [on("node1"), on("node1"), on("node2"), on("node2")], DEFAULT, [MAX_NODE_SCORE, MAX_NODE_SCORE]),
    ("no resources requested, pods scheduled with resources", make_pod().obj(),
     [node("node1", CM_10_20), node("node2", CM_10_20)], EXISTING_10_20, DEFAULT, [70, 57]),
    ("resources requested, pods scheduled with resources", TWO_CONTAINERS,
     [node("node1", CM_10_20), node("node2", CM_10_20)], EXISTING_ONE_EACH, DEFAULT, [57, 45]),
    ("resources requested, pods scheduled with resources, differently sized nodes", TWO_CONTAINERS,
     [node("node1", CM_10_20), node("node2", {"cpu": "10000", "memory": "50000"})], EXISTING_ONE_EACH,
     DEFAULT, [57, 60]),
    ("requested resources exceed node capacity", make_pod().req({"cpu": "3000", "memory": "0"}).obj(),
     [node("node1", CM_4_10), node("node2", CM_4_10)], EXISTING_ONE_EACH, DEFAULT, [50, 25]),
    ("zero node resources, pods scheduled with resources", make_pod().obj(),
     [make_node().name("node1").obj(), make_node().name("node2").obj()], EXISTING_ONE_EACH, DEFAULT,
     [MIN_NODE_SCORE, MIN_NODE_SCORE]),
    ("nothing scheduled, resources requested with different weight on CPU and memory, differently sized nodes",
     TWO_CONTAINERS_ON_1, [node("node1", CM_4_10), node("node2", CM_6_10)], [],
     [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}], [41, 50]),
    ("resource with negative weight", TWO_CONTAINERS_ON_1, [node("node1", CM_4_10)], [],
     [{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}], "scoringStrategy.resources[0].weight"),
    ("resource with zero weight", TWO_CONTAINERS_ON_1, [node("node1", CM_4_10)], [],
     [ResourceSpec("memory", 1), ResourceSpec("cpu", 0)], "scoringStrategy.resources[1].weight"),
    ("resource weight larger than MaxNodeScore", TWO_CONTAINERS_ON_1, [node("node1", CM_4_10)], [],
     [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 101}], "scoringStrategy.resources[1].weight"),
    ("bypass extended resource if the pod does not request", TWO_CONTAINERS_ON_1, EXT_NODES_4, [], EXT_SET,
     [50, 50]),
    ("honor extended resource if the pod requests", EXT_POD, EXT_NODES_4_10, [], EXT_SET, [50, 60]),
    ("if the node doesn't have a resource", NODE_LACKS, EXT_NODES_4, [], NODE_LACKS_RES, [55, 55]),
]  # fmt: skip

MOST: list[Case] = [
    ("nothing scheduled, nothing requested", make_pod().obj(), [node("node1", CM_4_10), node("node2", CM_4_10)],
     [], DEFAULT, [MIN_NODE_SCORE, MIN_NODE_SCORE]),
    ("nothing scheduled, resources requested, differently sized nodes", TWO_CONTAINERS,
     [node("node1", CM_4_10), node("node2", CM_6_10)], [], DEFAULT, [62, 50]),
    ("Resources not set, pods scheduled with error", TWO_CONTAINERS,
     [node("node1", CM_4_10), node("node2", CM_6_10)], [], None, [MIN_NODE_SCORE, MIN_NODE_SCORE]),
    ("no resources requested, pods scheduled with resources", make_pod().obj(),
     [node("node1", CM_10_20), node("node2", CM_10_20)], EXISTING_10_20, DEFAULT, [30, 42]),
    ("resources requested, pods scheduled with resources", TWO_CONTAINERS,
     [node("node1", CM_10_20), node("node2", CM_10_20)], EXISTING_ONE_EACH, DEFAULT, [42, 55]),
    ("resources requested equal node capacity",
     make_pod().req({"cpu": "2000", "memory": "4000"}).req({"cpu": "3000", "memory": "5000"}).obj(),
     [node("node1", {"cpu": "5000", "memory": "10000"}), node("node2", {"cpu": "10000", "memory": "9000"})], [],
     DEFAULT, [95, 75]),
    ("nothing scheduled, resources requested, differently sized nodes (weights)", TWO_CONTAINERS,
     [node("node1", CM_4_10), node("node2", CM_6_10)], [],
     [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}], [58, 50]),
    ("no resources requested, pods scheduled, nonzero request for resource", make_pod().container("container").obj(),
     [node("node1", {"cpu": "250m", "memory": "1000Mi"}), node("node2", {"cpu": "250m", "memory": "1000Mi"})],
     [make_pod().node("node1").container("container").obj(), make_pod().node("node1").container("container").obj()],
     DEFAULT, [80, 30]),
    ("resource with negative weight", TWO_CONTAINERS, [node("node2", CM_4_10)], [],
     [{"name": "memory", "weight": -1}, {"name": "cpu", "weight": 1}], "scoringStrategy.resources[0].weight"),
    ("resource with zero weight", TWO_CONTAINERS, [node("node2", CM_4_10)], [],
     [ResourceSpec("memory", 1), ResourceSpec("cpu", 0)], "scoringStrategy.resources[1].weight"),
    ("resource weight larger than MaxNodeScore", TWO_CONTAINERS, [node("node2", CM_4_10)], [],
     [{"name": "memory", "weight": 101}], "scoringStrategy.resources[0].weight"),
    ("bypass extended resource if the pod does not request", TWO_CONTAINERS, EXT_NODES_4, [], EXT_SET, [50, 50]),
    ("honor extended resource if the pod request", EXT_POD, EXT_NODES_4_10, [], EXT_SET, [50, 40]),
    ("if the node doesn't have a resource", NODE_LACKS, EXT_NODES_4, [], NODE_LACKS_RES, [45, 45]),
]  # fmt: skip


def _run(kind: str, case: Case, shape: list[dict[str, int]] | None = None) -> None:
    _, pod, nodes, existing, resources, want = case
    snapshot = Snapshot.from_objects(existing, nodes)
    handle = FakeHandle(snapshot)
    if isinstance(want, str):
        # upstream validates the args in NewFit and reports the field path
        with pytest.raises(ValueError, match="^" + re.escape(want) + ": Invalid value"):
            if resources and isinstance(resources[0], ResourceSpec):
                strategy_scorer(kind, resources)  # a zero weight: the defaulted YAML can't say it
            else:
                fit.new({"scoringStrategy": {"type": kind, "resources": resources}}, handle)
        return
    if resources is None:
        # Internal args with no resources at all (the YAML form defaults them to cpu+memory).
        pl = fit.Fit(handle, strategy_scorer(kind, ()))
        scores, statuses = score_all(pl, pod, snapshot)
        assert all(s is not None and s.code == Code.ERROR for s in statuses)
        assert scores == want
        return
    strategy: dict[str, Any] = {"type": kind, "resources": resources}
    if shape is not None:
        strategy["requestedToCapacityRatio"] = {"shape": shape}
    pl = fit.new({"scoringStrategy": strategy}, handle)
    scores, statuses = score_all(pl, pod, snapshot)
    assert statuses == [None] * len(nodes)
    assert scores == want


@pytest.mark.parametrize("case", LEAST, ids=[c[0] for c in LEAST])
def test_least_allocated(case: Case) -> None:
    _run("LeastAllocated", case)


@pytest.mark.parametrize("case", MOST, ids=[c[0] for c in MOST])
def test_most_allocated(case: Case) -> None:
    _run("MostAllocated", case)


SHAPE_DOWN = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
RTCR: list[Case] = [
    ("nothing scheduled, nothing requested (default - least requested nodes have priority)", make_pod().obj(),
     [node("node1", CM_4_10), node("node2", CM_4_10)], [on("node1"), on("node1")], DEFAULT,
     [MAX_NODE_SCORE, MAX_NODE_SCORE]),
    ("nothing scheduled, resources requested, differently sized nodes (default - least requested nodes have "
     "priority)", TWO_CONTAINERS, [node("node1", CM_4_10), node("node2", CM_6_10)], [on("node1"), on("node1")],
     DEFAULT, [38, 50]),
    ("no resources requested, pods scheduled with resources (default - least requested nodes have priority)",
     make_pod().obj(), [node("node1", CM_4_10), node("node2", CM_6_10)],
     [on("node1", {"cpu": "3000", "memory": "5000"}), on("node2", {"cpu": "3000", "memory": "5000"})], DEFAULT,
     [38, 50]),
]  # fmt: skip


@pytest.mark.parametrize("case", RTCR, ids=[c[0] for c in RTCR])
def test_requested_to_capacity_ratio(case: Case) -> None:
    _run("RequestedToCapacityRatio", case, SHAPE_DOWN)


MIB = 1024 * 1024
FOO, BAR = "intel.com/foo", "intel.com/bar"
SHAPE_UP_1 = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 1}]
SINGLE_NODES = [
    resource_node("node1", 4000, 10000 * MIB, {FOO: 8}),
    resource_node("node2", 4000, 10000 * MIB, {FOO: 4}),
]
SINGLE_EXTENDED: list[Case] = [
    ("nothing scheduled, nothing requested", make_pod().obj(), SINGLE_NODES, [], [{"name": FOO, "weight": 1}],
     [0, 0]),
    ("resources requested, pods scheduled with less resources", make_pod().req({FOO: "2"}).obj(), SINGLE_NODES,
     [make_pod().obj()], [{"name": FOO, "weight": 1}], [2, 5]),
    ("resources requested, pods scheduled with resources, on node with existing pod running",
     make_pod().req({FOO: "2"}).obj(), SINGLE_NODES, [make_pod().req({FOO: "2"}).node("node2").obj()],
     [{"name": FOO, "weight": 1}], [2, 10]),
    ("resources requested, pods scheduled with more resources", make_pod().req({FOO: "4"}).obj(), SINGLE_NODES,
     [make_pod().obj()], [{"name": FOO, "weight": 1}], [5, 10]),
]  # fmt: skip


@pytest.mark.parametrize("case", SINGLE_EXTENDED, ids=[c[0] for c in SINGLE_EXTENDED])
def test_resource_bin_packing_single_extended(case: Case) -> None:
    _run("RequestedToCapacityRatio", case, SHAPE_UP_1)


MULTI_NODES = [
    resource_node("node1", 4000, 10000 * MIB, {FOO: 8, BAR: 4}),
    resource_node("node2", 4000, 10000 * MIB, {FOO: 4, BAR: 8}),
]
MULTI_RES = [{"name": FOO, "weight": 3}, {"name": BAR, "weight": 5}]
MULTI_EXTENDED: list[Case] = [
    ("nothing scheduled, nothing requested", make_pod().obj(), MULTI_NODES, [], MULTI_RES, [0, 0]),
    ("resources requested, pods scheduled with less resources", make_pod().req({FOO: "2", BAR: "2"}).obj(),
     MULTI_NODES, [make_pod().obj()], MULTI_RES, [4, 3]),
    ("resources requested, pods scheduled with resources, on node with existing pod running",
     make_pod().req({FOO: "2", BAR: "2"}).obj(), MULTI_NODES,
     [make_pod().req({FOO: "4", BAR: "2"}).node("node2").obj()], MULTI_RES, [4, 7]),
    ("resources requested, pods scheduled with more resources", make_pod().req({FOO: "4", BAR: "2"}).obj(),
     MULTI_NODES, [make_pod().obj()], MULTI_RES, [5, 5]),
]  # fmt: skip


@pytest.mark.parametrize("case", MULTI_EXTENDED, ids=[c[0] for c in MULTI_EXTENDED])
def test_resource_bin_packing_multiple_extended(case: Case) -> None:
    _run("RequestedToCapacityRatio", case, SHAPE_UP_1)


BROKEN_LINEAR = [
    ([(10, 1), (90, 9)], [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9),
                          (99, 9), (100, 9), (110, 9)]),
    ([(0, 2), (40, 10), (100, 0)], [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    ([(0, 2), (40, 2), (100, 2)], [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
]  # fmt: skip


@pytest.mark.parametrize(("points", "assertions"), BROKEN_LINEAR)
def test_broken_linear_function(points: list[tuple[int, int]], assertions: list[tuple[int, int]]) -> None:
    shape = [FunctionShapePoint(u, s) for u, s in points]
    f = build_broken_linear_function(shape)
    vf = broken_linear_vector(shape)
    xs = np.array([p for p, _ in assertions], np.int64)
    assert [f(p) for p, _ in assertions] == [want for _, want in assertions]
    assert vf(xs).tolist() == [want for _, want in assertions]


def test_broken_linear_function_negative_slope_truncates_toward_zero() -> None:
    # Go's integer division truncates toward zero: 10 + (-10*5)/40 = 10 - 1 = 9 (floor would give 8).
    shape = [FunctionShapePoint(0, 10), FunctionShapePoint(40, 0)]
    assert build_broken_linear_function(shape)(5) == 9
    assert broken_linear_vector(shape)(np.array([5], np.int64)).tolist() == [9]


@pytest.mark.parametrize(
    ("strategy", "error"),
    [
        ({"type": "Foo"}, 'scoringStrategy.type: Unsupported value: "Foo"'),
        (
            {"type": "RequestedToCapacityRatio"},
            "scoringStrategy.requestedToCapacityRatio.shape: Required value",
        ),
        (
            {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 101}]},
            },
            r"shape\[0\].utilization: Invalid value: 101",
        ),
        (
            {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 10}, {"utilization": 10}]},
            },
            "must be sorted in increasing order",
        ),
        (
            {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"score": 11}]}},
            r"shape\[0\].score: Invalid value: 11",
        ),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, r'resources\[1\].name: Duplicate value: "cpu"'),
    ],
)
def test_invalid_strategy(strategy: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        fit.new({"scoringStrategy": strategy}, None)


def test_default_strategy_is_least_allocated_on_cpu_and_memory() -> None:
    pl = fit.new(None, None)
    assert pl.scorer.name == "LeastAllocated"
    assert pl.scorer.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
