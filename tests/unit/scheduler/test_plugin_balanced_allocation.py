"""NodeResourcesBalancedAllocation on upstream's TestNodeResourcesBalancedAllocation
(plugins/noderesources/balanced_allocation_test.go), without the DRA extended-resource cases
(kse has no DRA). Every scored case also checks the batch (numpy) scorer."""

from __future__ import annotations

from typing import Any

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.interface import MAX_NODE_SCORE
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins.noderesources import balanced_allocation as ba
from scheduler.framework.types import Code, PodInfo

from .wrappers import make_pod, new_state, resource_node, score_all

GPU = "nvidia.com/gpu"
DEFAULT = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
WITH_GPU = [*DEFAULT, {"name": GPU, "weight": 1}]


def cpu_and_memory(node: str) -> pb.Pod:
    return (
        make_pod()
        .node(node)
        .req({"cpu": "1000m", "memory": "2000"})
        .req({"cpu": "2000m", "memory": "3000"})
        .obj()
    )


def cpu_only(node: str) -> pb.Pod:
    return (
        make_pod().node(node).req({"cpu": "1000m", "memory": "0"}).req({"cpu": "2000m", "memory": "0"}).obj()
    )


def cpu_memory_gpu(node: str) -> pb.Pod:
    return (
        make_pod()
        .node(node)
        .req({"cpu": "1000m", "memory": "2000"})
        .req({"cpu": "2000m", "memory": "3000", GPU: "3"})
        .obj()
    )


# The upstream specs carry nodeName (node1 for cpuOnly/cpuAndMemoryAndGPU, node2 for
# cpuAndMemory); as the incoming pod that does not matter.
CASES: list[tuple[str, pb.Pod, list[pb.Node], list[pb.Pod], Any, bool, list[int]]] = [
    ("resources requested, nothing scheduled, differently sized nodes", cpu_and_memory("node2"),
     [resource_node("node1", 4000, 10000), resource_node("node2", 6000, 10000)], [], DEFAULT, True,
     [87, MAX_NODE_SCORE]),
    ("resources requested, pods scheduled with resources", cpu_and_memory("node2"),
     [resource_node("node1", 10000, 20000), resource_node("node2", 10000, 20000)],
     [cpu_only("node1"), cpu_and_memory("node2")], DEFAULT, True, [82, 95]),
    ("resources requested, pods scheduled with resources, differently sized nodes", cpu_and_memory("node2"),
     [resource_node("node1", 10000, 20000), resource_node("node2", 10000, 50000)],
     [cpu_only("node1"), cpu_and_memory("node2")], DEFAULT, True, [82, 80]),
    ("requested resources at node capacity", cpu_only("node1"),
     [resource_node("node1", 6000, 10000), resource_node("node2", 6000, 10000)],
     [cpu_only("node1"), cpu_and_memory("node2")], DEFAULT, True, [50, 75]),
    ("include scalar resource on a node for balanced resource allocation",
     make_pod().req({"memory": "0", GPU: "1"}).obj(),
     [resource_node("node1", 3500, 40000, {GPU: 8}), resource_node("node2", 3500, 40000, {GPU: 8})],
     [cpu_and_memory("node2"), cpu_memory_gpu("node1")], WITH_GPU, True, [70, 65]),
    ("node without the scalar resource should skip the scalar resource", cpu_and_memory("node2"),
     [resource_node("node1", 3500, 40000, {GPU: 8}), resource_node("node2", 3500, 40000)], [], WITH_GPU, True,
     [63, 63]),
    ("resources requested, pods scheduled with resources if PreScore not called", cpu_and_memory("node2"),
     [resource_node("node1", 10000, 20000), resource_node("node2", 10000, 20000)],
     [cpu_only("node1"), cpu_and_memory("node2")], DEFAULT, False, [82, 95]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "resources", "run_pre_score", "want"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_balanced_allocation(
    pod: pb.Pod,
    nodes: list[pb.Node],
    existing: list[pb.Pod],
    resources: Any,
    run_pre_score: bool,
    want: list[int],
) -> None:
    snapshot = Snapshot.from_objects(existing, nodes)
    pl = ba.new({"resources": resources}, None)
    scores, statuses = score_all(pl, pod, snapshot, run_pre_score)
    assert statuses == [None] * len(nodes)
    assert scores == want


def test_best_effort_pod_is_skipped_in_pre_score() -> None:
    # upstream "nothing scheduled, nothing requested, skip in PreScore"
    nodes = [resource_node("node1", 4000, 10000), resource_node("node2", 4000, 10000)]
    snapshot = Snapshot.from_objects([], nodes)
    pl = ba.new({"resources": DEFAULT}, None)
    status = pl.pre_score(new_state(), PodInfo(make_pod().obj()), snapshot.list())
    assert status is not None and status.code == Code.SKIP


def test_defaults_and_invalid_args() -> None:
    assert ba.new(None, None).scorer.resources == ba.new({"resources": DEFAULT}, None).scorer.resources
    with pytest.raises(ValueError, match=r"resources\[0\].weight: Invalid value: 101"):
        ba.new({"resources": [{"name": "cpu", "weight": 101}]}, None)


def test_more_than_two_resources_uses_population_std() -> None:
    # fractions 0.5, 0.25, 0.75: mean 0.5, std = sqrt((0 + 1/16 + 1/16) / 3) = 0.2041 -> 79
    node = resource_node("n", 4000, 4000, {GPU: 4})
    snapshot = Snapshot.from_objects([], [node])
    pod = make_pod().req({"cpu": "2000m", "memory": "1000", GPU: "3"}).obj()
    scores, _ = score_all(ba.new({"resources": WITH_GPU}, None), pod, snapshot)
    assert scores == [79]
