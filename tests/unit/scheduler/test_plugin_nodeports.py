# ruff: noqa: E501 -- the case tables keep upstream's case names, one case per row
"""NodePorts on upstream's own tables (plugins/nodeports/node_ports_test.go: TestNodePorts,
TestPreFilterDisabled, Test_isSchedulableAfterAssignedPodDeleted, TestFits)."""

from __future__ import annotations

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.plugins import nodeports as np_
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
)

from .wrappers import make_node, make_pod, new_state, node_info


def new_pod(host: str, *port_infos: str) -> pb.Pod:
    """upstream newPod: "PROTOCOL/hostIP/hostPort" strings, all in one container."""
    ports = []
    for info in port_infos:
        protocol, ip, port = info.split("/")
        ports.append((protocol, ip, int(port)))
    return make_pod().node(host).container_ports(ports).obj()


def new_node_info(*port_infos: str) -> NodeInfo:
    return NodeInfo(new_pod("p1", *port_infos))


REJECT = Status(Code.UNSCHEDULABLE, [np_.ERR_REASON])
SKIP = Status(Code.SKIP)

CASES: list[tuple[str, pb.Pod, NodeInfo, Status | None, Status | None]] = [
    ("skip filter", pb.Pod(), NodeInfo(), SKIP, None),
    ("other port", new_pod("m1", "UDP/127.0.0.1/8080"), NodeInfo(new_pod("m1", "UDP/127.0.0.1/9090")), None, None),
    ("same udp port", new_pod("m1", "UDP/127.0.0.1/8080"), NodeInfo(new_pod("m1", "UDP/127.0.0.1/8080")), None,
     REJECT),
    ("same tcp port", new_pod("m1", "TCP/127.0.0.1/8080"), NodeInfo(new_pod("m1", "TCP/127.0.0.1/8080")), None,
     REJECT),
    ("different host ip", new_pod("m1", "TCP/127.0.0.1/8080"), NodeInfo(new_pod("m1", "TCP/127.0.0.2/8080")), None,
     None),
    ("different protocol", new_pod("m1", "UDP/127.0.0.1/8080"), NodeInfo(new_pod("m1", "TCP/127.0.0.1/8080")), None,
     None),
    ("second udp port conflict", new_pod("m1", "UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
     NodeInfo(new_pod("m1", "UDP/127.0.0.1/8080")), None, REJECT),
    ("first tcp port conflict", new_pod("m1", "TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
     NodeInfo(new_pod("m1", "TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081")), None, REJECT),
    ("first tcp port conflict due to 0.0.0.0 hostIP", new_pod("m1", "TCP/0.0.0.0/8001"),
     NodeInfo(new_pod("m1", "TCP/127.0.0.1/8001")), None, REJECT),
    ("TCP hostPort conflict due to 0.0.0.0 hostIP", new_pod("m1", "TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
     NodeInfo(new_pod("m1", "TCP/127.0.0.1/8001")), None, REJECT),
    ("second tcp port conflict to 0.0.0.0 hostIP", new_pod("m1", "TCP/127.0.0.1/8001"),
     NodeInfo(new_pod("m1", "TCP/0.0.0.0/8001")), None, REJECT),
    ("second different protocol", new_pod("m1", "UDP/127.0.0.1/8001"), NodeInfo(new_pod("m1", "TCP/0.0.0.0/8001")),
     None, None),
    ("UDP hostPort conflict due to 0.0.0.0 hostIP", new_pod("m1", "UDP/127.0.0.1/8001"),
     NodeInfo(new_pod("m1", "TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001")), None, REJECT),
    ("non-sidecar initContainer using hostPort", make_pod().init_container_port(False, 8001).obj(),
     NodeInfo(new_pod("m1", "TCP/0.0.0.0/8001")), SKIP, None),
    ("TCP hostPort conflict from sidecar initContainer", make_pod().init_container_port(True, 8001).obj(),
     NodeInfo(new_pod("m1", "TCP/0.0.0.0/8001")), None, REJECT),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "ni", "want_pre", "want_filter"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_node_ports(pod: pb.Pod, ni: NodeInfo, want_pre: Status | None, want_filter: Status | None) -> None:
    pl = np_.new(None, None)  # type: ignore[arg-type]
    state = new_state()
    pod_info = PodInfo(pod)
    result, status = pl.pre_filter(state, pod_info, [])
    assert result is None
    assert status == want_pre
    if status is not None:
        return
    assert pl.filter(state, pod_info, ni) == want_filter


def test_pre_filter_disabled() -> None:
    pl = np_.new(None, None)  # type: ignore[arg-type]
    got = pl.filter(new_state(), PodInfo(pb.Pod()), node_info(make_node().obj()))
    assert got == Status(Code.ERROR, ['reading "PreFilterNodePorts" from cycleState: not found'])


POD_8080 = make_pod().host_port(8080).obj()
HINTS: list[tuple[str, object, QueueingHint | None]] = [
    ("backoff-wrong-old-object", "not-a-pod", None),
    ("skip-queue-on-unscheduled", make_pod().obj(), QueueingHint.SKIP),
    ("skip-queue-on-non-hostport", make_pod().node("fake-node").obj(), QueueingHint.SKIP),
    (
        "skip-queue-on-unrelated-hostport",
        make_pod().node("fake-node").host_port(8081).obj(),
        QueueingHint.SKIP,
    ),
    ("queue-on-released-hostport", make_pod().node("fake-node").host_port(8080).obj(), QueueingHint.QUEUE),
]


@pytest.mark.parametrize(("old", "want"), [c[1:] for c in HINTS], ids=[c[0] for c in HINTS])
def test_is_schedulable_after_assigned_pod_deleted(old: object, want: QueueingHint | None) -> None:
    pl = np_.new(None, None)  # type: ignore[arg-type]
    if want is None:
        with pytest.raises(TypeError):
            pl.is_schedulable_after_assigned_pod_deleted(POD_8080, old, None)
        return
    assert pl.is_schedulable_after_assigned_pod_deleted(POD_8080, old, None) == want


FITS: list[tuple[str, pb.Pod, NodeInfo, bool]] = [
    ("non-conflicting ports", new_pod("p", "TCP/127.0.0.1/80"), new_node_info("TCP/127.0.0.1/9090"), True),
    ("multiple non-conflicting ports",
     new_pod("p", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
     new_node_info("TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"), True),
    ("same ports on different protocols", new_pod("m1", "TCP/127.0.0.1/80"), new_node_info("UDP/127.0.0.1/80"), True),
    ("conflicting ports", new_pod("m1", "TCP/127.0.0.1/80"), new_node_info("TCP/127.0.0.1/80"), False),
    ("multiple ports, some conflicting",
     new_pod("p", "TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
     new_node_info("TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"), False),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "existing", "want"), [c[1:] for c in FITS], ids=[c[0] for c in FITS])
def test_fits(pod: pb.Pod, existing: NodeInfo, want: bool) -> None:
    assert np_.fits(PodInfo(pod), existing) is want


def test_events_to_register() -> None:
    events = [e.event for e in np_.new(None, None).events_to_register()]  # type: ignore[arg-type]
    assert events == [
        ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
        ClusterEvent(EventResource.NODE, ActionType.ADD),
    ]
