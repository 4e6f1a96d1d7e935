"""NodeInfo, Resource, HostPortInfo and Snapshot (upstream pkg/scheduler/framework/types.go and
backend/cache/snapshot.go; cases after upstream's types_test.go: TestNewNodeInfo,
TestNodeInfoRemovePod, TestHostPortInfo_AddRemove, TestHostPortInfo_Check)."""

from __future__ import annotations

import numpy as np
import pytest

from proto import kse_pb2 as pb
from scheduler.framework.nodeinfo import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    HostPortInfo,
    ImageStateSummary,
    NodeInfo,
    Resource,
    Snapshot,
    is_scalar_resource_name,
)
from scheduler.framework.types import PodInfo

from .wrappers import make_node, make_pod

MI = 1024 * 1024


# ----------------------------------------------------------------------------- Resource


def test_resource_from_quantities() -> None:
    r = Resource.from_quantities(
        {
            "cpu": "1.5",
            "memory": "1Gi",
            "pods": "110",
            "ephemeral-storage": "10G",
            "hugepages-2Mi": "4Mi",
            "example.com/gpu": "2",
            "kubernetes.io/batch-cpu": "3",
            "attachable-volumes-csi-x": "25",
        }
    )
    assert (r.milli_cpu, r.memory, r.allowed_pod_number, r.ephemeral_storage) == (
        1500,
        1024 * MI,
        110,
        10**10,
    )
    assert r.scalar_resources == {
        "hugepages-2Mi": 4 * MI,
        "example.com/gpu": 2,
        "kubernetes.io/batch-cpu": 3,
        "attachable-volumes-csi-x": 25,
    }


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("cpu", False),
        ("memory", False),
        ("pods", False),
        ("example.com/foo", True),
        ("hugepages-1Gi", True),
        ("kubernetes.io/something", True),
        ("subdomain.kubernetes.io/something", True),
        ("attachable-volumes-aws-ebs", True),
        ("requests.example.com/foo", False),
        ("nodomain", False),
    ],
)
def test_scalar_resource_names(name: str, scalar: bool) -> None:
    assert is_scalar_resource_name(name) is scalar


def test_resource_clone_and_zero_request() -> None:
    r = Resource(1, 2, 3, 4, {"example.com/a": 1})
    c = r.clone()
    c.scalar_resources["example.com/a"] = 5
    c.milli_cpu = 9
    assert r == Resource(1, 2, 3, 4, {"example.com/a": 1})
    assert Resource().is_zero_request()
    assert not Resource(scalar_resources={"example.com/a": 0}).is_zero_request()


# ----------------------------------------------------------------------------- NodeInfo


def _pod(name: str, cpu: str, mem: str, *ports: int, uid: str = "") -> pb.Pod:
    w = make_pod().name(name).namespace("node_info_cache_test").uid(uid or name).node("test-node")
    w.req({"cpu": cpu, "memory": mem})
    pod = w.obj()
    c = pod.spec.containers[0]
    for port in ports:
        c.ports.add(host_ip="127.0.0.1", host_port=port, protocol="TCP")
    return pod


def test_new_node_info() -> None:
    # upstream TestNewNodeInfo: two pods, 100m/500 and 200m/1Ki, host ports 80 and 8080
    ni = NodeInfo(_pod("test-1", "100m", "500", 80), _pod("test-2", "200m", "1Ki", 8080))
    assert ni.requested == Resource(300, 1524)
    assert ni.non_zero_requested == Resource(300, 1524)
    assert dict(ni.used_ports) == {"127.0.0.1": {("TCP", 80), ("TCP", 8080)}}
    assert [p.pod.metadata.name for p in ni.pods] == ["test-1", "test-2"]
    assert ni.pods_with_affinity == [] and ni.pods_with_required_anti_affinity == []


def test_non_zero_defaults_for_containers_without_requests() -> None:
    best_effort = make_pod().name("be").uid("be").container("c").obj()
    ni = NodeInfo(best_effort)
    assert ni.requested == Resource()
    assert (ni.non_zero_requested.milli_cpu, ni.non_zero_requested.memory) == (
        DEFAULT_MILLI_CPU_REQUEST,
        DEFAULT_MEMORY_REQUEST,
    )
    # cpu set, memory missing: only memory gets the default; two containers both count
    partial = make_pod().name("p").uid("p").req({"cpu": "300m"}).req({"cpu": "100m"}).obj()
    pi = PodInfo(partial)
    assert pi.requests == {"cpu": 400}
    assert pi.non_zero_requests == {"cpu": 400, "memory": 2 * DEFAULT_MEMORY_REQUEST}
    assert (pi.resource.non0_cpu, pi.resource.non0_mem) == (400, 2 * DEFAULT_MEMORY_REQUEST)


def test_non_zero_defaults_with_limits_only() -> None:
    # A limit without a request is the request (API defaulting): no non-zero default then.
    pod = make_pod().name("l").uid("l").obj()
    c = pod.spec.containers.add(name="c")
    c.resources.limits.update({"cpu": "2", "memory": "1Gi"})
    pi = PodInfo(pod)
    assert pi.requests == {"cpu": 2000, "memory": 1024 * MI}
    assert (pi.resource.non0_cpu, pi.resource.non0_mem) == (2000, 1024 * MI)


def test_pod_derived_data_is_computed_once() -> None:
    pi = PodInfo(_pod("a", "100m", "1", 80))
    assert pi.requests is pi.requests
    assert pi.resource is pi.resource
    assert pi.host_ports is pi.host_ports
    assert pi.host_ports == (("127.0.0.1", "TCP", 80),)


def test_remove_pod() -> None:
    # upstream TestNodeInfoRemovePod in spirit: removal by UID restores the aggregates
    node = make_node().name("test-node").capacity({"cpu": "1", "memory": "1Gi"}).obj()
    p1, p2 = _pod("test-1", "100m", "500", 80), _pod("test-2", "200m", "1Ki", 8080)
    ni = NodeInfo(p1, p2)
    ni.set_node(node)
    gen = ni.generation
    removed = ni.remove_pod(p1)
    assert removed.pod is p1
    assert ni.generation > gen
    assert ni.requested == Resource(200, 1024)
    assert ni.non_zero_requested == Resource(200, 1024)
    assert dict(ni.used_ports) == {"127.0.0.1": {("TCP", 8080)}}
    assert [p.pod.metadata.name for p in ni.pods] == ["test-2"]
    with pytest.raises(KeyError, match="no corresponding pod test-1 in pods of node test-node"):
        ni.remove_pod(p1)
    # a pod is found by UID even when the object is a different (updated) copy
    updated = pb.Pod()
    updated.CopyFrom(p2)
    updated.metadata.labels["new"] = "label"
    ni.remove_pod(updated)
    assert ni.pods == [] and ni.requested == Resource() and dict(ni.used_ports) == {}


def test_pods_without_uid_are_keyed_by_namespace_and_name() -> None:
    a = make_pod().name("a").namespace("ns").req({"cpu": "1"}).obj()
    ni = NodeInfo(a)
    assert ni.has_pod(make_pod().name("a").namespace("ns").obj())
    ni.remove_pod(make_pod().name("a").namespace("ns").obj())
    assert ni.requested.milli_cpu == 0


def test_pods_with_affinity_lists() -> None:
    plain = make_pod().name("plain").uid("1").obj()
    affinity = make_pod().name("aff").uid("2").obj()
    affinity.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution.add(
        topology_key="zone"
    )
    anti = make_pod().name("anti").uid("3").obj()
    anti.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution.add(
        topology_key="zone"
    )
    ni = NodeInfo(plain, affinity, anti)
    assert [p.pod.metadata.name for p in ni.pods_with_affinity] == ["aff", "anti"]
    assert [p.pod.metadata.name for p in ni.pods_with_required_anti_affinity] == ["anti"]
    ni.remove_pod(anti)
    assert [p.pod.metadata.name for p in ni.pods_with_affinity] == ["aff"]
    assert ni.pods_with_required_anti_affinity == []


def test_set_node_caches_what_plugins_read() -> None:
    node = (
        make_node()
        .name("n1")
        .label("zone", "z1")
        .capacity({"cpu": "4", "memory": "8Gi", "example.com/gpu": "2"})
        .taints([("k", "v", "NoSchedule")])
        .unschedulable()
        .obj()
    )
    ni = NodeInfo()
    ni.set_node(node)
    assert ni.name == "n1" and ni.labels == {"zone": "z1"} and ni.unschedulable
    assert [(t.key, t.value, t.effect) for t in ni.taints] == [("k", "v", "NoSchedule")]
    assert ni.allocatable == Resource(4000, 8 * 1024 * MI, 0, 32, {"example.com/gpu": 2})


def test_clone_is_independent() -> None:
    ni = NodeInfo(_pod("a", "100m", "1", 80))
    ni.set_node(make_node().name("n").obj())
    c = ni.clone()
    c.add_pod(_pod("b", "200m", "2", 81))
    assert len(ni.pods) == 1 and ni.requested == Resource(100, 1)
    assert dict(ni.used_ports) == {"127.0.0.1": {("TCP", 80)}}
    assert len(c.pods) == 2 and c.requested == Resource(300, 3)
    c.remove_pod(ni.pods[0].pod)
    assert len(ni.pods) == 1 and ni.has_pod(ni.pods[0])


def test_removal_keeps_the_order_wherever_the_pod_is() -> None:
    # the last pods are looked at first, the rest found by identity: both keep the order
    pods = [make_pod().name(f"p{i}").uid(f"u{i}").obj() for i in range(100)]
    ni = NodeInfo(*pods)
    for gone in ("p99", "p3", "p50", "p98", "p0"):
        ni.remove_pod(next(p.pod for p in ni.pods if p.pod.metadata.name == gone))
    left = [p.pod.metadata.name for p in ni.pods]
    assert left == [f"p{i}" for i in range(100) if i not in (99, 3, 50, 98, 0)]
    # a clone's index is built when first needed; a clone of a clone too
    c = ni.clone().clone()
    assert c.has_pod(pods[10]) and not c.has_pod(pods[3])
    c.remove_pod(pods[10])
    assert not c.has_pod(pods[10]) and ni.has_pod(pods[10]) and len(c.pods) == len(ni.pods) - 1


# ----------------------------------------------------------------------------- HostPortInfo


def test_host_port_info_add_remove() -> None:
    # upstream TestHostPortInfo_AddRemove: empty ip/protocol default to 0.0.0.0/TCP; port 0 is
    # ignored; removing the last port of an ip drops the ip
    h = HostPortInfo()
    for ip, protocol, port in [
        ("127.0.0.1", "TCP", 80),
        ("127.0.0.1", "UDP", 80),
        ("127.0.0.1", "TCP", 8080),
        ("127.0.0.1", "UDP", 8080),
        ("", "", 0),
        ("", "TCP", 80),
        ("0.0.0.0", "", 8080),
    ]:
        h.add(ip, protocol, port)
    assert dict(h) == {
        "127.0.0.1": {("TCP", 80), ("UDP", 80), ("TCP", 8080), ("UDP", 8080)},
        "0.0.0.0": {("TCP", 80), ("TCP", 8080)},
    }
    for ip, protocol, port in [
        ("127.0.0.1", "TCP", 80),
        ("127.0.0.1", "UDP", 80),
        ("", "", 8080),
        ("", "", 80),
    ]:
        h.remove(ip, protocol, port)
    assert dict(h) == {"127.0.0.1": {("TCP", 8080), ("UDP", 8080)}}


@pytest.mark.parametrize(
    ("added", "check", "conflict"),
    [
        ([("127.0.0.1", "TCP", 80)], ("127.0.0.1", "TCP", 80), True),
        ([("127.0.0.1", "TCP", 80)], ("127.0.0.1", "TCP", 81), False),
        ([("127.0.0.1", "TCP", 80)], ("127.0.0.1", "UDP", 80), False),
        ([("127.0.0.1", "TCP", 80)], ("127.0.0.2", "TCP", 80), False),
        ([("127.0.0.1", "TCP", 80)], ("0.0.0.0", "TCP", 80), True),
        ([("0.0.0.0", "TCP", 80)], ("127.0.0.1", "TCP", 80), True),
        ([("0.0.0.0", "TCP", 80)], ("", "", 80), True),
        ([("", "", 80)], ("127.0.0.1", "TCP", 80), True),
        ([("127.0.0.1", "TCP", 80), ("127.0.0.2", "UDP", 80)], ("0.0.0.0", "UDP", 80), True),
        ([("127.0.0.1", "TCP", 80)], ("127.0.0.1", "TCP", 0), False),
    ],
)
def test_host_port_info_check(
    added: list[tuple[str, str, int]], check: tuple[str, str, int], conflict: bool
) -> None:
    h = HostPortInfo()
    for ip, protocol, port in added:
        h.add(ip, protocol, port)
    assert h.check_conflict(*check) is conflict


# ----------------------------------------------------------------------------- Snapshot


def _cluster() -> tuple[list[pb.Pod], list[pb.Node]]:
    nodes = [
        make_node()
        .name("n0")
        .capacity({"cpu": "4", "memory": "8Gi"})
        .images([(["img:latest", "img:v1"], 100)])
        .obj(),
        make_node().name("n1").capacity({"cpu": "2", "memory": "4Gi", "example.com/gpu": "1"}).obj(),
        make_node().name("n2").capacity({"cpu": "8", "memory": "16Gi"}).images([(["img:latest"], 100)]).obj(),
    ]
    aff = make_pod().name("aff").uid("aff").node("n2").req({"cpu": "1"}).obj()
    aff.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution.add(
        topology_key="z"
    )
    pods = [
        make_pod().name("a").uid("a").node("n0").req({"cpu": "500m", "memory": "1Gi"}).obj(),
        make_pod().name("b").uid("b").node("n1").req({"example.com/gpu": "1"}).obj(),
        aff,
        make_pod().name("orphan").uid("o").node("gone").req({"cpu": "1"}).obj(),
    ]
    return pods, nodes


def test_snapshot_from_objects() -> None:
    pods, nodes = _cluster()
    snap = Snapshot.from_objects(pods, nodes)
    assert [ni.name for ni in snap.list()] == ["n0", "n1", "n2"]
    assert snap.num_nodes() == 3 and snap.index_of("n2") == 2
    assert snap.get("n0").requested == Resource(500, 1024 * MI)
    assert [ni.name for ni in snap.have_pods_with_affinity_list()] == ["n2"]
    assert [ni.name for ni in snap.have_pods_with_required_anti_affinity_list()] == ["n2"]
    assert snap.node_infos() is snap
    with pytest.raises(KeyError, match='nodeinfo not found for node name "gone"'):
        snap.get("gone")
    assert snap.image_existence_map == {"img:latest": {"n0", "n2"}, "img:v1": {"n0"}}
    assert snap.get("n0").image_states == {
        "img:latest": ImageStateSummary(100, 2),
        "img:v1": ImageStateSummary(100, 1),
    }
    assert snap.get("n1").image_states == {}


def test_snapshot_arrays_follow_the_node_infos() -> None:
    pods, nodes = _cluster()
    snap = Snapshot.from_objects(pods, nodes)
    a = snap.arrays()
    assert a.alloc_milli_cpu.tolist() == [4000, 2000, 8000]
    assert a.req_milli_cpu.tolist() == [500, 0, 1000]
    assert a.nz_milli_cpu.tolist() == [500, 100, 1000]
    assert a.nz_memory.tolist() == [1024 * MI, 200 * MI, 200 * MI]
    assert a.pod_count.tolist() == [1, 1, 1]
    assert a.allowed_pod_number.tolist() == [32, 32, 32]
    present, alloc, req = a.scalar("example.com/gpu")
    assert present.tolist() == [False, True, False]
    assert alloc.tolist() == [0, 1, 0] and req.tolist() == [0, 1, 0]
    # the cache changes a NodeInfo in place, then refreshes its row
    snap.get("n0").add_pod(
        make_pod().name("c").uid("c").node("n0").req({"cpu": "1", "example.com/gpu": "0"}).obj()
    )
    snap.refresh(0)
    assert a.req_milli_cpu.tolist() == [1500, 0, 1000]
    assert a.pod_count.tolist() == [2, 1, 1]
    # a new affinity pod puts its node on the affinity lists; removing it takes it off
    aff = make_pod().name("aff2").uid("aff2").node("n1").obj()
    aff.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution.add(topology_key="z")
    snap.get("n1").add_pod(aff)
    snap.refresh(1)
    assert [ni.name for ni in snap.have_pods_with_affinity_list()] == ["n2", "n1"]
    snap.get("n1").remove_pod(aff)
    snap.refresh(1)
    assert [ni.name for ni in snap.have_pods_with_affinity_list()] == ["n2"]
    # a replaced NodeInfo at the same index
    replacement = NodeInfo()
    replacement.set_node(make_node().name("n1").capacity({"cpu": "3"}).obj())
    snap.node_info_list[1] = replacement
    snap.rebuild()
    assert snap.arrays().alloc_milli_cpu.tolist() == [4000, 3000, 8000]
    assert snap.get("n1") is replacement


def test_arrays_match_scalar_fields_on_random_nodes() -> None:
    rng = np.random.default_rng(7)
    nodes, pods = [], []
    for i in range(50):
        res = {"cpu": f"{rng.integers(1, 64)}", "memory": f"{rng.integers(1, 256)}Gi"}
        if i % 3 == 0:
            res["example.com/gpu"] = str(rng.integers(0, 8))
        nodes.append(make_node().name(f"n{i}").capacity(res).obj())
        for j in range(int(rng.integers(0, 4))):
            req = {"cpu": f"{rng.integers(0, 2000)}m"} if j % 2 else {}
            w = make_pod().name(f"p{i}-{j}").uid(f"p{i}-{j}").node(f"n{i}")
            pods.append((w.req(req) if req else w.container("c")).obj())
    snap = Snapshot.from_objects(pods, nodes)
    a = snap.arrays()
    for i, ni in enumerate(snap.list()):
        assert a.alloc_milli_cpu[i] == ni.allocatable.milli_cpu
        assert a.alloc_memory[i] == ni.allocatable.memory
        assert a.req_milli_cpu[i] == ni.requested.milli_cpu
        assert a.nz_milli_cpu[i] == ni.non_zero_requested.milli_cpu
        assert a.nz_memory[i] == ni.non_zero_requested.memory
        assert a.pod_count[i] == len(ni.pods)
