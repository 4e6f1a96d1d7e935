# ruff: noqa: E501 -- the case tables keep upstream's case names, one case per row
"""NodeResourcesFit, on upstream's own test tables (plugins/noderesources/fit_test.go:
TestEnoughRequests, TestNotEnoughRequests, TestStorageRequests, TestRestartableInitContainers,
TestPreFilterDisabled, TestFitScore, TestEventsToRegister, Test_isSchedulableAfterPodChange,
Test_isSchedulableAfterNodeChange, TestIsFit, TestHaveAnyRequestedResourcesIncreased).
DRA extended-resource cases are left out (kse has no DRA)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.nodeinfo import NodeInfo, Snapshot
from scheduler.framework.plugins.feature import Features
from scheduler.framework.plugins.noderesources import fit
from scheduler.framework.plugins.noderesources.fit import InsufficientResource as IR
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
)

from .wrappers import FakeHandle, make_node, make_pod, new_state

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"


@dataclass
class R:
    """upstream framework.Resource, as the test tables spell it"""

    cpu: int = 0
    mem: int = 0
    storage: int = 0
    scalar: dict[str, int] = field(default_factory=dict)


def _requests(r: R) -> dict[str, str]:
    rl = {"cpu": f"{r.cpu}m", "memory": str(r.mem), "pods": "0", "ephemeral-storage": str(r.storage)}
    rl.update({k: str(v) for k, v in r.scalar.items()})
    return rl


def resource_pod(*usage: R) -> pb.Pod:
    """upstream newResourcePod: one container per usage."""
    w = make_pod()
    for r in usage:
        w.req(_requests(r))
    return w.obj()


def init_pod(pod: pb.Pod, *usage: R) -> pb.Pod:
    """upstream newResourceInitPod."""
    for r in usage:
        c = pod.spec.init_containers.add()
        c.resources.requests.update(_requests(r))
    return pod


def overhead_pod(pod: pb.Pod, overhead: dict[str, str]) -> pb.Pod:
    pod.spec.overhead.update(overhead)
    return pod


def pod_level(pod: pb.Pod, requests: dict[str, str]) -> pb.Pod:
    pod.spec.resources.requests.update(requests)
    return pod


def resources(cpu: int, mem: int, pods: int, ext_a: int, storage: int, huge_a: int) -> dict[str, str]:
    """upstream makeAllocatableResources."""
    return {
        "cpu": f"{cpu}m",
        "memory": str(mem),
        "pods": str(pods),
        EXT_A: str(ext_a),
        "ephemeral-storage": str(storage),
        HUGE_A: str(huge_a),
    }


def node_with(allocatable: dict[str, str], *existing: pb.Pod) -> NodeInfo:
    node = make_node().allocatable_only(allocatable).obj()
    ni = NodeInfo(*existing)
    ni.set_node(node)
    return ni


def unsched(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, list(reasons))


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, list(reasons))


def reason(name: str) -> str:
    return f"Insufficient {name}"


# (name, pod, existing pod on the node, args, want status, want insufficient resources)
ENOUGH_REQUESTS = [
    ("no resources requested always fits", pb.Pod(), resource_pod(R(10, 20)), {}, None, []),
    (
        "too many resources fails",
        resource_pod(R(1, 1)),
        resource_pod(R(10, 20)),
        {},
        unsched(reason("cpu"), reason("memory")),
        [IR("cpu", reason("cpu"), 1, 10, 10), IR("memory", reason("memory"), 1, 20, 20)],
    ),
    (
        "too many resources fails due to init container cpu",
        init_pod(resource_pod(R(1, 1)), R(3, 1)),
        resource_pod(R(8, 19)),
        {},
        unsched(reason("cpu")),
        [IR("cpu", reason("cpu"), 3, 8, 10)],
    ),
    (
        "too many resources fails due to highest init container cpu",
        init_pod(resource_pod(R(1, 1)), R(3, 1), R(2, 1)),
        resource_pod(R(8, 19)),
        {},
        unsched(reason("cpu")),
        [IR("cpu", reason("cpu"), 3, 8, 10)],
    ),
    (
        "too many resources fails due to init container memory",
        init_pod(resource_pod(R(1, 1)), R(1, 3)),
        resource_pod(R(9, 19)),
        {},
        unsched(reason("memory")),
        [IR("memory", reason("memory"), 3, 19, 20)],
    ),
    (
        "too many resources fails due to highest init container memory",
        init_pod(resource_pod(R(1, 1)), R(1, 3), R(1, 2)),
        resource_pod(R(9, 19)),
        {},
        unsched(reason("memory")),
        [IR("memory", reason("memory"), 3, 19, 20)],
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        init_pod(resource_pod(R(1, 1)), R(1, 1)),
        resource_pod(R(9, 19)),
        {},
        None,
        [],
    ),
    (
        "multiple init containers fit because it's the max, not sum, of containers and init containers",
        init_pod(resource_pod(R(1, 1)), R(1, 1), R(1, 1)),
        resource_pod(R(9, 19)),
        {},
        None,
        [],
    ),
    ("both resources fit", resource_pod(R(1, 1)), resource_pod(R(5, 5)), {}, None, []),
    (
        "one resource memory fits",
        resource_pod(R(2, 1)),
        resource_pod(R(9, 5)),
        {},
        unsched(reason("cpu")),
        [IR("cpu", reason("cpu"), 2, 9, 10)],
    ),
    (
        "one resource cpu fits",
        resource_pod(R(1, 2)),
        resource_pod(R(5, 19)),
        {},
        unsched(reason("memory")),
        [IR("memory", reason("memory"), 2, 19, 20)],
    ),
    ("equal edge case", resource_pod(R(5, 1)), resource_pod(R(5, 19)), {}, None, []),
    (
        "equal edge case for init container",
        init_pod(resource_pod(R(4, 1)), R(5, 1)),
        resource_pod(R(5, 19)),
        {},
        None,
        [],
    ),
    ("extended resource fits", resource_pod(R(scalar={EXT_A: 1})), resource_pod(R()), {}, None, []),
    (
        "extended resource fits for init container",
        init_pod(resource_pod(R()), R(scalar={EXT_A: 1})),
        resource_pod(R()),
        {},
        None,
        [],
    ),
    (
        "extended resource capacity enforced",
        resource_pod(R(1, 1, scalar={EXT_A: 10})),
        resource_pod(R(0, 0, scalar={EXT_A: 0})),
        {},
        unresolvable(reason(EXT_A)),
        [IR(EXT_A, reason(EXT_A), 10, 0, 5, True)],
    ),
    (
        "extended resource capacity enforced for init container",
        init_pod(resource_pod(R()), R(1, 1, scalar={EXT_A: 10})),
        resource_pod(R(0, 0, scalar={EXT_A: 0})),
        {},
        unresolvable(reason(EXT_A)),
        [IR(EXT_A, reason(EXT_A), 10, 0, 5, True)],
    ),
    (
        "extended resource allocatable enforced",
        resource_pod(R(1, 1, scalar={EXT_A: 1})),
        resource_pod(R(0, 0, scalar={EXT_A: 5})),
        {},
        unsched(reason(EXT_A)),
        [IR(EXT_A, reason(EXT_A), 1, 5, 5)],
    ),
    (
        "extended resource allocatable enforced for init container",
        init_pod(resource_pod(R()), R(1, 1, scalar={EXT_A: 1})),
        resource_pod(R(0, 0, scalar={EXT_A: 5})),
        {},
        unsched(reason(EXT_A)),
        [IR(EXT_A, reason(EXT_A), 1, 5, 5)],
    ),
    (
        "extended resource allocatable enforced for multiple containers",
        resource_pod(R(1, 1, scalar={EXT_A: 3}), R(1, 1, scalar={EXT_A: 3})),
        resource_pod(R(0, 0, scalar={EXT_A: 2})),
        {},
        unresolvable(reason(EXT_A)),
        [IR(EXT_A, reason(EXT_A), 6, 2, 5, True)],
    ),
    (
        "extended resource allocatable admits multiple init containers",
        init_pod(resource_pod(R()), R(1, 1, scalar={EXT_A: 3}), R(1, 1, scalar={EXT_A: 3})),
        resource_pod(R(0, 0, scalar={EXT_A: 2})),
        {},
        None,
        [],
    ),
    (
        "extended resource allocatable enforced for multiple init containers",
        init_pod(resource_pod(R()), R(1, 1, scalar={EXT_A: 6}), R(1, 1, scalar={EXT_A: 3})),
        resource_pod(R(0, 0, scalar={EXT_A: 2})),
        {},
        unresolvable(reason(EXT_A)),
        [IR(EXT_A, reason(EXT_A), 6, 2, 5, True)],
    ),
    (
        "extended resource allocatable enforced for unknown resource",
        resource_pod(R(1, 1, scalar={EXT_B: 1})),
        resource_pod(R(0, 0)),
        {},
        unresolvable(reason(EXT_B)),
        [IR(EXT_B, reason(EXT_B), 1, 0, 0, True)],
    ),
    (
        "extended resource allocatable enforced for unknown resource for init container",
        init_pod(resource_pod(R()), R(1, 1, scalar={EXT_B: 1})),
        resource_pod(R(0, 0)),
        {},
        unresolvable(reason(EXT_B)),
        [IR(EXT_B, reason(EXT_B), 1, 0, 0, True)],
    ),
    (
        "kubernetes.io resource capacity enforced",
        resource_pod(R(1, 1, scalar={K8S_IO_A: 10})),
        resource_pod(R(0, 0)),
        {},
        unresolvable(reason(K8S_IO_A)),
        [IR(K8S_IO_A, reason(K8S_IO_A), 10, 0, 0, True)],
    ),
    (
        "kubernetes.io resource capacity enforced for init container",
        init_pod(resource_pod(R()), R(1, 1, scalar={K8S_IO_B: 10})),
        resource_pod(R(0, 0)),
        {},
        unresolvable(reason(K8S_IO_B)),
        [IR(K8S_IO_B, reason(K8S_IO_B), 10, 0, 0, True)],
    ),
    (
        "hugepages resource capacity enforced",
        resource_pod(R(1, 1, scalar={HUGE_A: 10})),
        resource_pod(R(0, 0, scalar={HUGE_A: 0})),
        {},
        unresolvable(reason(HUGE_A)),
        [IR(HUGE_A, reason(HUGE_A), 10, 0, 5, True)],
    ),
    (
        "hugepages resource capacity enforced for init container",
        init_pod(resource_pod(R()), R(1, 1, scalar={HUGE_A: 10})),
        resource_pod(R(0, 0, scalar={HUGE_A: 0})),
        {},
        unresolvable(reason(HUGE_A)),
        [IR(HUGE_A, reason(HUGE_A), 10, 0, 5, True)],
    ),
    (
        "hugepages resource allocatable enforced for multiple containers",
        resource_pod(R(1, 1, scalar={HUGE_A: 3}), R(1, 1, scalar={HUGE_A: 3})),
        resource_pod(R(0, 0, scalar={HUGE_A: 2})),
        {},
        unresolvable(reason(HUGE_A)),
        [IR(HUGE_A, reason(HUGE_A), 6, 2, 5, True)],
    ),
    (
        "skip checking ignored extended resource",
        resource_pod(R(1, 1, scalar={EXT_B: 1})),
        resource_pod(R(0, 0)),
        {"ignoredResources": ["example.com/bbb"]},
        None,
        [],
    ),
    (
        "resources + pod overhead fits",
        overhead_pod(resource_pod(R(1, 1)), {"cpu": "3m", "memory": "13"}),
        resource_pod(R(5, 5)),
        {},
        None,
        [],
    ),
    (
        "requests + overhead does not fit for memory",
        overhead_pod(resource_pod(R(1, 1)), {"cpu": "1m", "memory": "15"}),
        resource_pod(R(5, 5)),
        {},
        unsched(reason("memory")),
        [IR("memory", reason("memory"), 16, 5, 20)],
    ),
    (
        "skip checking ignored extended resource via resource groups",
        resource_pod(R(1, 1, scalar={EXT_B: 1, K8S_IO_A: 1})),
        resource_pod(R(0, 0)),
        {"ignoredResourceGroups": ["example.com"]},
        unresolvable(reason(K8S_IO_A)),
        [IR(K8S_IO_A, reason(K8S_IO_A), 1, 0, 0, True)],
    ),
    (
        "skip checking extended resource request with quantity zero via resource groups",
        resource_pod(R(1, 1, scalar={EXT_A: 0})),
        resource_pod(R(0, 0, scalar={EXT_A: 6})),
        {},
        None,
        [],
    ),
    (
        "skip checking resource request with quantity zero",
        resource_pod(R(scalar={EXT_A: 1})),
        resource_pod(R(20, 30, scalar={EXT_A: 1})),
        {},
        None,
        [],
    ),
    (
        "both pod-level and container-level resources fit",
        pod_level(resource_pod(R(1, 1)), {"cpu": "1m", "memory": "2"}),
        resource_pod(R(5, 5)),
        {},
        None,
        [],
    ),
    (
        "pod-level cpu resource not fit",
        pod_level(resource_pod(R(1, 1)), {"cpu": "7m", "memory": "2"}),
        resource_pod(R(5, 5)),
        {},
        unsched(reason("cpu")),
        [IR("cpu", reason("cpu"), 7, 5, 10)],
    ),
    (
        "pod-level memory resource not fit",
        pod_level(resource_pod(R(1, 1)), {"cpu": "3m", "memory": "2"}),
        resource_pod(R(5, 19)),
        {},
        unsched(reason("memory")),
        [IR("memory", reason("memory"), 2, 19, 20)],
    ),
    (
        "pod-level hugepages resource fit",
        pod_level(resource_pod(), {"cpu": "3m", "memory": "2", HUGE_A: "5"}),
        None,
        {},
        None,
        [],
    ),
    (
        "both pod-level and container-level hugepages resource fit",
        pod_level(resource_pod(R(1, 1, scalar={HUGE_A: 3})), {"cpu": "3m", "memory": "2", HUGE_A: "5"}),
        None,
        {},
        None,
        [],
    ),
    (
        "pod-level hugepages resource not fit",
        pod_level(resource_pod(), {"cpu": "3m", "memory": "2", HUGE_A: "10"}),
        None,
        {},
        unresolvable(reason(HUGE_A)),
        [IR(HUGE_A, reason(HUGE_A), 10, 0, 5, True)],
    ),
    (
        "one pod-level cpu resource fits and all init and non-init containers resources fit",
        init_pod(pod_level(resource_pod(R(1, 1)), {"cpu": "3m", "memory": "2"}), R(1, 1)),
        resource_pod(R(5, 19)),
        {},
        unsched(reason("memory")),
        [IR("memory", reason("memory"), 2, 19, 20)],
    ),
]


@pytest.mark.parametrize(
    ("pod", "existing", "args", "want_status", "want_insufficient"),
    [case[1:] for case in ENOUGH_REQUESTS],
    ids=[case[0] for case in ENOUGH_REQUESTS],
)
def test_enough_requests(
    pod: pb.Pod, existing: pb.Pod | None, args: dict, want_status: Status | None, want_insufficient: list[IR]
) -> None:
    ni = node_with(resources(10, 20, 32, 5, 20, 5), *([existing] if existing is not None else []))
    pl = fit.new(args, None)
    state = new_state()
    pod_info = PodInfo(pod)
    _, status = pl.pre_filter(state, pod_info, [ni])
    assert status is None
    assert pl.filter(state, pod_info, ni) == want_status
    got = fit.fits_request(pod_info.resource.resource, ni, pl.ignored_resources, pl.ignored_resource_groups)
    assert got == want_insufficient


def test_pre_filter_disabled() -> None:
    ni = node_with({})
    got = fit.new(None, None).filter(new_state(), PodInfo(pb.Pod()), ni)
    assert got == Status(Code.ERROR, ['error reading "PreFilterNodeResourcesFit" from cycleState: not found'])


NOT_ENOUGH = [
    ("even without specified resources, predicate fails when there's no space for additional pod",
     pb.Pod(), resource_pod(R(10, 20))),
    ("even if both resources fit, predicate fails when there's no space for additional pod",
     resource_pod(R(1, 1)), resource_pod(R(5, 5))),
    ("even for equal edge case, predicate fails when there's no space for additional pod",
     resource_pod(R(5, 1)), resource_pod(R(5, 19))),
    ("even for equal edge case, predicate fails when there's no space for additional pod due to init container",
     init_pod(resource_pod(R(5, 1)), R(5, 1)), resource_pod(R(5, 19))),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "existing"), [c[1:] for c in NOT_ENOUGH], ids=[c[0] for c in NOT_ENOUGH])
def test_not_enough_requests(pod: pb.Pod, existing: pb.Pod) -> None:
    ni = node_with(resources(10, 20, 1, 0, 0, 0), existing)
    pl = fit.new(None, None)
    state = new_state()
    pl.pre_filter(state, PodInfo(pod), [ni])
    assert pl.filter(state, PodInfo(pod), ni) == unsched("Too many pods")


STORAGE = [
    ("empty storage requested, and pod fits", resource_pod(R(1, 1)), resource_pod(R(2, 10)), None),
    ("storage ephemeral local storage request exceeds allocatable", resource_pod(R(storage=25)),
     resource_pod(R(2, 2)), unresolvable(reason("ephemeral-storage"))),
    ("ephemeral local storage is sufficient", init_pod(resource_pod(R(storage=5))),
     resource_pod(R(2, 2, storage=10)), None),
    ("pod fits", resource_pod(R(storage=10)), resource_pod(R(2, 2)), None),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "existing", "want"), [c[1:] for c in STORAGE], ids=[c[0] for c in STORAGE])
def test_storage_requests(pod: pb.Pod, existing: pb.Pod, want: Status | None) -> None:
    ni = node_with(resources(10, 20, 32, 5, 20, 5), existing)
    pl = fit.new(None, None)
    state = new_state()
    pl.pre_filter(state, PodInfo(pod), [ni])
    assert pl.filter(state, PodInfo(pod), ni) == want


def _sidecar_pod(request: str | None, sidecar_request: str | None) -> pb.Pod:
    w = make_pod()
    w.container("regular")
    if request:
        w.obj().spec.containers[0].resources.requests["cpu"] = request
    c = w.obj().spec.init_containers.add(name="restartable-init", restart_policy="Always")
    if sidecar_request:
        c.resources.requests["cpu"] = sidecar_request
    return w.obj()


RESTARTABLE = [
    ("allow pod without restartable init containers if sidecar containers is disabled",
     make_pod().container("regular").obj(), False, None, None),
    ("not allow pod with restartable init containers if sidecar containers is disabled",
     _sidecar_pod(None, None), False, unresolvable(fit.ERR_REASON_RESTARTABLE_INIT), None),
    ("allow pod without restartable init containers if sidecar containers is enabled",
     make_pod().container("regular").obj(), True, None, None),
    ("allow pod with restartable init containers if sidecar containers is enabled",
     _sidecar_pod(None, None), True, None, None),
    ("allow pod if the total requested resources do not exceed the node's allocatable resources",
     _sidecar_pod("1m", "1m"), True, None, None),
    ("not allow pod if the total requested resources do exceed the node's allocatable resources",
     _sidecar_pod("1m", "2m"), True, None, unresolvable(reason("cpu"))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "sidecars", "want_pre_filter", "want_filter"),
    [c[1:] for c in RESTARTABLE],
    ids=[c[0] for c in RESTARTABLE],
)
def test_restartable_init_containers(
    pod: pb.Pod, sidecars: bool, want_pre_filter: Status | None, want_filter: Status | None
) -> None:
    ni = node_with(resources(2, 0, 1, 0, 0, 0))
    pl = fit.new(None, None, Features(enable_sidecar_containers=sidecars))
    state = new_state()
    _, status = pl.pre_filter(state, PodInfo(pod), [ni])
    assert status == want_pre_filter
    if status is None:
        assert pl.filter(state, PodInfo(pod), ni) == want_filter


# ----------------------------------------------------------------------------- TestFitScore

_NODES = [
    make_node().name("node1").capacity({"cpu": "4000", "memory": "10000"}).obj(),
    make_node().name("node2").capacity({"cpu": "6000", "memory": "10000"}).obj(),
]
_EXISTING = [
    make_pod().node("node1").req({"cpu": "2000", "memory": "4000"}).obj(),
    make_pod().node("node2").req({"cpu": "1000", "memory": "2000"}).obj(),
]
_BIG = make_pod().req({"cpu": "3000", "memory": "5000"}).obj()
_SMALL = make_pod().req({"cpu": "1000", "memory": "2000"}).obj()
_RTCR_DOWN = {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}
_RTCR_UP = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
_SAME_NODES = [
    make_node().name("node1").capacity({"cpu": "4000", "memory": "10000"}).obj(),
    make_node().name("node2").capacity({"cpu": "4000", "memory": "10000"}).obj(),
]
_SIDECAR_EXISTING = [
    make_pod()
    .node("node1")
    .req({"cpu": "1000", "memory": "2000"})
    .sidecar_req({"cpu": "1000", "memory": "2000"})
    .obj(),
    make_pod().node("node2").req({"cpu": "1000", "memory": "2000"}).obj(),
]

FIT_SCORE = [
    ("test case for ScoringStrategy RequestedToCapacityRatio case1", _BIG, _NODES, _EXISTING,
     {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": _RTCR_DOWN}, True, [10, 32]),
    ("test case for ScoringStrategy RequestedToCapacityRatio case2", _BIG, _NODES, _EXISTING,
     {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": _RTCR_UP}, True, [95, 68]),
    ("test case for ScoringStrategy MostAllocated", _SMALL, _NODES, _EXISTING,
     {"type": "MostAllocated"}, True, [67, 36]),
    ("test case for ScoringStrategy LeastAllocated", _SMALL, _NODES, _EXISTING,
     {"type": "LeastAllocated"}, True, [32, 63]),
    ("test case for ScoringStrategy RequestedToCapacityRatio case1 if PreScore is not called", _BIG, _NODES,
     _EXISTING, {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": _RTCR_DOWN}, False, [10, 32]),
    ("test case for ScoringStrategy MostAllocated if PreScore is not called", _SMALL, _NODES, _EXISTING,
     {"type": "MostAllocated"}, False, [67, 36]),
    ("test case for ScoringStrategy LeastAllocated if PreScore is not called", _SMALL, _NODES, _EXISTING,
     {"type": "LeastAllocated"}, False, [32, 63]),
    ("test case for ScoringStrategy MostAllocated with sidecar container", _SMALL, _SAME_NODES,
     _SIDECAR_EXISTING, {"type": "MostAllocated"}, True, [67, 45]),
    ("test case for ScoringStrategy LeastAllocated with sidecar container", _SMALL, _SAME_NODES,
     _SIDECAR_EXISTING, {"type": "LeastAllocated"}, True, [32, 55]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "strategy", "run_pre_score", "want"),
    [c[1:] for c in FIT_SCORE],
    ids=[c[0] for c in FIT_SCORE],
)
def test_fit_score(
    pod: pb.Pod,
    nodes: list[pb.Node],
    existing: list[pb.Pod],
    strategy: dict,
    run_pre_score: bool,
    want: list[int],
) -> None:
    snapshot = Snapshot.from_objects(existing, nodes)
    pl = fit.new({"scoringStrategy": strategy}, FakeHandle(snapshot))
    state = new_state()
    pod_info = PodInfo(pod)
    got = []
    for node in nodes:
        if run_pre_score:
            assert pl.pre_score(state, pod_info, snapshot.list()) is None
        score, status = pl.score(state, pod_info, snapshot.get(node.metadata.name))
        assert status is None
        got.append(score)
    assert got == want


# ----------------------------------------------------------------------------- events and hints


def _event_set(events: list) -> list[ClusterEvent]:
    return [e.event for e in events]


@pytest.mark.parametrize(
    ("features", "want"),
    [
        (
            Features(enable_in_place_pod_vertical_scaling=True, enable_scheduling_queue_hint=False),
            [
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCALE_DOWN | ActionType.DELETE),
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD
                    | ActionType.UPDATE_NODE_ALLOCATABLE
                    | ActionType.UPDATE_NODE_TAINT
                    | ActionType.UPDATE_NODE_LABEL,
                ),
            ],
        ),
        (
            Features(enable_scheduling_queue_hint=True),
            [
                ClusterEvent(EventResource.POD, ActionType.DELETE),
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
            ],
        ),
        (
            Features(enable_scheduling_queue_hint=False),
            [
                ClusterEvent(EventResource.POD, ActionType.DELETE),
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD
                    | ActionType.UPDATE_NODE_ALLOCATABLE
                    | ActionType.UPDATE_NODE_TAINT
                    | ActionType.UPDATE_NODE_LABEL,
                ),
            ],
        ),
    ],
    ids=[
        "Register events with InPlacePodVerticalScaling feature enabled",
        "Register events with SchedulingQueueHint feature enabled",
        "Register events with InPlacePodVerticalScaling feature disabled",
    ],
)
def test_events_to_register(features: Features, want: list[ClusterEvent]) -> None:
    assert _event_set(fit.new(None, None, features).events_to_register()) == want


P = make_pod
POD_HINTS = {
    "backoff-wrong-old-object": (pb.Pod(), "not-a-pod", None, True, None),
    "backoff-wrong-new-object": (pb.Pod(), None, "not-a-pod", True, None),
    "queue-on-other-pod-deleted": (
        P().name("pod1").req({"cpu": "1"}).obj(),
        P().name("pod2").req({"cpu": "1"}).node("fake").obj(),
        None,
        True,
        QueueingHint.QUEUE,
    ),
    "skip-queue-on-unscheduled-pod-deleted": (pb.Pod(), pb.Pod(), None, True, QueueingHint.SKIP),
    "skip-queue-on-disable-inplace-pod-vertical-scaling": (
        P().name("pod1").req({"cpu": "1"}).obj(),
        P().name("pod2").req({"cpu": "2"}).node("fake").obj(),
        P().name("pod2").req({"cpu": "1"}).node("fake").obj(),
        False,
        QueueingHint.SKIP,
    ),
    "skip-queue-on-other-unscheduled-pod": (
        P().name("pod1").uid("uid0").req({"cpu": "1"}).obj(),
        P().name("pod2").uid("uid1").req({"cpu": "2"}).obj(),
        P().name("pod2").uid("uid1").req({"cpu": "1"}).obj(),
        True,
        QueueingHint.SKIP,
    ),
    "skip-queue-on-other-pod-unrelated-resource-scaled-down": (
        P().name("pod1").uid("pod1").req({"cpu": "1"}).obj(),
        P().name("pod2").uid("pod2").req({"memory": "2"}).node("fake").obj(),
        P().name("pod2").uid("pod2").req({"memory": "1"}).node("fake").obj(),
        True,
        QueueingHint.SKIP,
    ),
    "skip-queue-on-other-pod-unrelated-pod-level-resource-scaled-down": (
        P().name("pod1").uid("pod1").pod_level_requests({"cpu": "1"}).obj(),
        P().name("pod2").uid("pod2").pod_level_requests({"memory": "2"}).node("fake").obj(),
        P().name("pod2").uid("pod2").pod_level_requests({"memory": "1"}).node("fake").obj(),
        True,
        QueueingHint.SKIP,
    ),
    "queue-on-other-pod-some-resource-scale-down": (
        P().name("pod1").uid("pod1").req({"cpu": "1"}).obj(),
        P().name("pod2").uid("pod2").req({"cpu": "2"}).node("fake").obj(),
        P().name("pod2").uid("pod2").req({"cpu": "1"}).node("fake").obj(),
        True,
        QueueingHint.QUEUE,
    ),
    "queue-on-other-pod-some-pod-level-resource-scale-down": (
        P().name("pod1").uid("pod1").pod_level_requests({"cpu": "1"}).obj(),
        P().name("pod2").uid("pod2").pod_level_requests({"cpu": "2"}).node("fake").obj(),
        P().name("pod2").uid("pod2").pod_level_requests({"cpu": "1"}).node("fake").obj(),
        True,
        QueueingHint.QUEUE,
    ),
    "queue-on-target-pod-some-resource-scale-down": (
        P().name("pod1").uid("pod1").req({"cpu": "1"}).obj(),
        P().name("pod1").uid("pod1").req({"cpu": "2"}).obj(),
        P().name("pod1").uid("pod1").req({"cpu": "1"}).obj(),
        True,
        QueueingHint.QUEUE,
    ),
    "queue-on-target-pod-some-pod-level-resource-scale-down": (
        P().name("pod1").uid("pod1").pod_level_requests({"cpu": "1"}).obj(),
        P().name("pod1").uid("pod1").pod_level_requests({"cpu": "2"}).obj(),
        P().name("pod1").uid("pod1").pod_level_requests({"cpu": "1"}).obj(),
        True,
        QueueingHint.QUEUE,
    ),
}


@pytest.mark.parametrize(("pod", "old", "new", "in_place", "want"), POD_HINTS.values(), ids=POD_HINTS.keys())
def test_is_schedulable_after_pod_change(
    pod: pb.Pod, old: object, new: object, in_place: bool, want: QueueingHint | None
) -> None:
    pl = fit.new(None, None, Features(enable_in_place_pod_vertical_scaling=in_place))
    if want is None:
        with pytest.raises(TypeError):
            pl.is_schedulable_after_pod_event(pod, old, new)
        return
    assert pl.is_schedulable_after_pod_event(pod, old, new) == want


def N(capacity: dict[str, str]) -> pb.Node:
    return make_node().capacity(capacity).obj()


_MEM2_A1 = resource_pod(R(mem=2, scalar={EXT_A: 1}))
NODE_HINTS = {
    "backoff-wrong-new-object": (pb.Pod(), None, "not-a-node", None),
    "backoff-wrong-old-object": (pb.Pod(), "not-a-node", pb.Node(), None),
    "skip-queue-on-node-add-without-sufficient-resources": (
        resource_pod(R(mem=2)),
        None,
        N({"memory": "1"}),
        QueueingHint.SKIP,
    ),
    "skip-queue-on-node-add-without-required-resource-type": (
        resource_pod(R(scalar={EXT_A: 1})),
        None,
        N({EXT_B: "1"}),
        QueueingHint.SKIP,
    ),
    "queue-on-node-add-with-sufficient-resources": (
        _MEM2_A1,
        None,
        N({"memory": "4", EXT_A: "2"}),
        QueueingHint.QUEUE,
    ),
    "skip-queue-on-node-unrelated-changes": (
        _MEM2_A1,
        N({"memory": "2", EXT_A: "2"}),
        N({"memory": "2", EXT_A: "1", EXT_B: "2"}),
        QueueingHint.SKIP,
    ),
    "queue-on-pod-requested-resources-increase": (
        _MEM2_A1,
        N({"memory": "2", EXT_A: "1"}),
        N({"memory": "2", EXT_A: "2"}),
        QueueingHint.QUEUE,
    ),
    "skip-queue-on-node-changes-from-suitable-to-unsuitable": (
        _MEM2_A1,
        N({"memory": "4", EXT_A: "2"}),
        N({"memory": "1", EXT_A: "2"}),
        QueueingHint.SKIP,
    ),
    "queue-on-node-changes-from-unsuitable-to-suitable": (
        _MEM2_A1,
        N({"memory": "1", EXT_A: "2"}),
        N({"memory": "4", EXT_A: "2"}),
        QueueingHint.QUEUE,
    ),
}


@pytest.mark.parametrize(("pod", "old", "new", "want"), NODE_HINTS.values(), ids=NODE_HINTS.keys())
def test_is_schedulable_after_node_change(
    pod: pb.Pod, old: object, new: object, want: QueueingHint | None
) -> None:
    pl = fit.new(None, None)
    if want is None:
        with pytest.raises(TypeError):
            pl.is_schedulable_after_node_change(pod, old, new)
        return
    assert pl.is_schedulable_after_node_change(pod, old, new) == want


IS_FIT = {
    "nil node": (pb.Pod(), None, False),
    "insufficient resource": (P().req({"cpu": "2"}).obj(), N({"cpu": "1"}), False),
    "sufficient resource": (P().req({"cpu": "1"}).obj(), N({"cpu": "2"}), True),
    "insufficient pod-level resource": (P().pod_level_requests({"cpu": "2"}).obj(), N({"cpu": "1"}), False),
    "sufficient pod-level resource": (P().pod_level_requests({"cpu": "2"}).obj(), N({"cpu": "2"}), True),
    "sufficient pod-level resource hugepages": (
        P().pod_level_requests({HUGE_A: "2Mi"}).obj(),
        N({HUGE_A: "2Mi"}),
        True,
    ),
    "insufficient pod-level resource hugepages": (
        P().pod_level_requests({HUGE_A: "4Mi"}).obj(),
        N({HUGE_A: "2Mi"}),
        False,
    ),
}


@pytest.mark.parametrize(("pod", "node", "want"), IS_FIT.values(), ids=IS_FIT.keys())
def test_is_fit(pod: pb.Pod, node: pb.Node | None, want: bool) -> None:
    assert fit.is_fit(PodInfo(pod), node) is want


_ALL4 = resource_pod(R(2, 2, 2, {EXT_A: 2}))
INCREASED = {
    "no-requested-resources": (
        resource_pod(R()),
        N({"pods": "1", "cpu": "1", "memory": "1", "ephemeral-storage": "1", EXT_A: "1"}),
        N({"pods": "1", "cpu": "2", "memory": "2", "ephemeral-storage": "2", EXT_A: "2"}),
        False,
    ),
    "no-requested-resources-pods-increased": (
        resource_pod(R()),
        N({"pods": "1", "cpu": "1", "memory": "1", "ephemeral-storage": "1", EXT_A: "1"}),
        N({"pods": "2", "cpu": "1", "memory": "1", "ephemeral-storage": "1", EXT_A: "1"}),
        True,
    ),
    "scalar-resources-not-in-node": (
        _ALL4,
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "3"}),
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "1"}),
        False,
    ),
    "requested-resources-decreased": (
        _ALL4,
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"}),
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "1", EXT_A: "1"}),
        False,
    ),
    "requested-resources-increased": (
        _ALL4,
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"}),
        N({"cpu": "3", "memory": "4", "ephemeral-storage": "3", EXT_A: "4"}),
        True,
    ),
    "non-requested-resources-decreased": (
        resource_pod(R(2, 2)),
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"}),
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "1", EXT_A: "1"}),
        False,
    ),
    "non-requested-resources-increased": (
        resource_pod(R(2, 2)),
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"}),
        N({"cpu": "1", "memory": "2", "ephemeral-storage": "5", EXT_A: "6"}),
        False,
    ),
}


@pytest.mark.parametrize(("pod", "original", "modified", "want"), INCREASED.values(), ids=INCREASED.keys())
def test_have_any_requested_resources_increased(
    pod: pb.Pod, original: pb.Node, modified: pb.Node, want: bool
) -> None:
    assert fit.have_any_requested_resources_increased(PodInfo(pod), original, modified) is want


@pytest.mark.parametrize(
    "args",
    [
        {"ignoredResourceGroups": ["example.com/aaa"]},
        {"scoringStrategy": {"type": "Bogus"}},
        {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
        {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
        {"scoringStrategy": {"resources": [{"name": "cpu", "weight": -1}]}},
    ],
)
def test_invalid_args(args: dict) -> None:
    with pytest.raises(ValueError):
        fit.new(args, None)
