# ruff: noqa: E501 -- the case tables keep upstream's case names, one case per row
"""TaintToleration on upstream's own tables (plugins/tainttoleration/taint_toleration_test.go:
TestTaintTolerationScore, TestTaintTolerationFilter, TestTaintTolerationFilterWithFeatureGate,
TestIsSchedulableAfterNodeChange, Test_isSchedulableAfterTargetPodTolerationChange)."""

from __future__ import annotations

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.interface import MAX_NODE_SCORE, NodeScore
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins import tainttoleration as tt
from scheduler.framework.plugins.feature import Features
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

Tol = tuple[str, str, str, str]  # key, operator, value, effect
Taint = tuple[str, str, str]  # key, value, effect

SLA = "node.kubernetes.io/sla"
PRIO = "node.example.com/priority-level"
PNS, NS = "PreferNoSchedule", "NoSchedule"


def pod_with(tolerations: list[Tol], name: str = "pod1", uid: str = "") -> pb.Pod:
    w = make_pod().name(name)
    if uid:
        w.uid(uid)
    for key, op, value, effect in tolerations:
        w.toleration(key, op, value, effect)
    return w.obj()


def node_with(name: str, taints: list[Taint]) -> pb.Node:
    return make_node().name(name).taints(taints).obj()


SCORE_CASES: list[tuple[str, list[Tol], list[pb.Node], list[int], bool]] = [
    ("node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
     [("foo", "Equal", "bar", PNS)],
     [node_with("nodeA", [("foo", "bar", PNS)]), node_with("nodeB", [("foo", "blah", PNS)])],
     [MAX_NODE_SCORE, 0], True),
    ("the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many "
     "tolerable taints a node has",
     [("cpu-type", "Equal", "arm64", PNS), ("disk-type", "Equal", "ssd", PNS)],
     [node_with("nodeA", []), node_with("nodeB", [("cpu-type", "arm64", PNS)]),
      node_with("nodeC", [("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)])],
     [MAX_NODE_SCORE, MAX_NODE_SCORE, MAX_NODE_SCORE], True),
    ("the more intolerable taints a node has, the lower score it gets.",
     [("foo", "Equal", "bar", PNS)],
     [node_with("nodeA", []), node_with("nodeB", [("cpu-type", "arm64", PNS)]),
      node_with("nodeC", [("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)])],
     [MAX_NODE_SCORE, 50, 0], True),
    ("only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority "
     "function",
     [("cpu-type", "Equal", "arm64", NS), ("disk-type", "Equal", "ssd", NS)],
     [node_with("nodeA", []), node_with("nodeB", [("cpu-type", "arm64", NS)]),
      node_with("nodeC", [("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)])],
     [MAX_NODE_SCORE, MAX_NODE_SCORE, 0], True),
    ("Default behaviour No taints and tolerations, lands on node with no taints", [],
     [node_with("nodeA", []), node_with("nodeB", [("cpu-type", "arm64", PNS)])], [MAX_NODE_SCORE, 0], True),
    ("Numeric Gt operator: pod with Gt toleration prefers nodes with matching SLA taint",
     [(SLA, "Gt", "950", PNS)], [node_with("nodeA", [(SLA, "800", PNS)]), node_with("nodeB", [(SLA, "999", PNS)])],
     [0, MAX_NODE_SCORE], True),
    ("Numeric Lt operator: pod with Lt toleration prefers nodes with matching SLA taint",
     [(SLA, "Lt", "800", PNS)], [node_with("nodeA", [(SLA, "950", PNS)]), node_with("nodeB", [(SLA, "700", PNS)])],
     [0, MAX_NODE_SCORE], True),
    ("Score ignores parse errors from numeric PreferNoSchedule taint value",
     [(SLA, "Gt", "950", PNS)], [node_with("nodeA", []), node_with("nodeB", [(SLA, "high", PNS)])],
     [MAX_NODE_SCORE, 0], True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tolerations", "nodes", "want", "comparison_ops"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_score(tolerations: list[Tol], nodes: list[pb.Node], want: list[int], comparison_ops: bool) -> None:
    pl = tt.new(None, None, Features(enable_taint_toleration_comparison_operators=comparison_ops))
    pod_info = PodInfo(pod_with(tolerations))
    snapshot = Snapshot.from_objects([], nodes)
    state = new_state()
    assert pl.pre_score(state, pod_info, snapshot.list()) is None
    scores = []
    for ni in snapshot.list():
        score, status = pl.score(state, pod_info, ni)
        assert status is None
        scores.append(NodeScore(ni.name, score))
    assert pl.score_extensions().normalize_score(state, pod_info, scores) is None
    assert [s.score for s in scores] == want


UNTOLERATED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had untolerated taint(s)"])

FILTER_CASES: list[tuple[str, list[Tol], list[Taint], Status | None, bool]] = [
    ("A pod having no tolerations can't be scheduled onto a node with nonempty taints", [],
     [("dedicated", "user1", NS)], UNTOLERATED, False),
    ("A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
     [("dedicated", "", "user1", NS)], [("dedicated", "user1", NS)], None, False),
    ("A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
     [("dedicated", "Equal", "user2", NS)], [("dedicated", "user1", NS)], UNTOLERATED, False),
    ("A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints on the "
     "node", [("foo", "Exists", "", NS)], [("foo", "bar", NS)], None, False),
    ("A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, pod can be scheduled "
     "onto the node", [("dedicated", "Equal", "user2", NS), ("foo", "Exists", "", NS)],
     [("dedicated", "user2", NS), ("foo", "bar", NS)], None, False),
    ("A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't match, "
     "can't be scheduled onto the node", [("foo", "Equal", "bar", PNS)], [("foo", "bar", NS)], UNTOLERATED, False),
    ("The pod has a toleration that keys and values match the taint on the node, the effect of toleration is empty, "
     "and the effect of taint is NoSchedule. Pod can be scheduled onto the node", [("foo", "Equal", "bar", "")],
     [("foo", "bar", NS)], None, False),
    ("The pod has a toleration that key and value don't match the taint on the node, but the effect of taint on node "
     "is PreferNoSchedule. Pod can be scheduled onto the node", [("dedicated", "Equal", "user2", NS)],
     [("dedicated", "user1", PNS)], None, False),
    ("The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the "
     "node", [], [("dedicated", "user1", PNS)], None, False),
    ("Pod with Gt toleration cannot be scheduled on node when taint value is lower than threshold",
     [(PRIO, "Gt", "950", NS)], [(PRIO, "800", NS)], UNTOLERATED, True),
    ("Pod with Gt toleration can be scheduled on node when taint value is higher than threshold",
     [(SLA, "Gt", "750", NS)], [(SLA, "950", NS)], None, True),
    ("Pod with Lt toleration cannot be scheduled on node when taint value is higher than threshold",
     [(PRIO, "Lt", "800", NS)], [(PRIO, "950", NS)], UNTOLERATED, True),
    ("Pod with Lt toleration can be scheduled on node when taint value is lower than threshold",
     [(SLA, "Lt", "950", NS)], [(SLA, "800", NS)], None, True),
    ("Pod with Gt toleration cannot be scheduled on node with non-numeric taint value",
     [(SLA, "Gt", "950", NS)], [(SLA, "high", NS)],
     Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            ['failed to parse taint value "high" as int64: must be a valid decimal integer in canonical form']),
     True),
    # TestTaintTolerationFilterWithFeatureGate
    ("Pod with Gt toleration can be scheduled when feature gate is enabled and taint value is higher",
     [(SLA, "Gt", "750", NS)], [(SLA, "950", NS)], None, True),
    ("Pod with Gt toleration cannot be scheduled when feature gate is disabled",
     [(SLA, "Gt", "750", NS)], [(SLA, "950", NS)], UNTOLERATED, False),
    ("Pod with Lt toleration can be scheduled when feature gate is enabled and taint value is lower",
     [(SLA, "Lt", "950", NS)], [(SLA, "800", NS)], None, True),
    ("Pod with Lt toleration cannot be scheduled when feature gate is disabled",
     [(SLA, "Lt", "950", NS)], [(SLA, "800", NS)], UNTOLERATED, False),
    ("Pod with mixed tolerations (Equal and Gt) when feature gate is disabled - only Equal is honored",
     [("dedicated", "Equal", "user1", NS), (SLA, "Gt", "750", NS)], [("dedicated", "user1", NS)], None, False),
    ("Pod with mixed tolerations, Gt toleration needed but filtered out when feature gate is disabled",
     [("dedicated", "Equal", "user1", NS), (SLA, "Gt", "750", NS)],
     [("dedicated", "user1", NS), (SLA, "950", NS)], UNTOLERATED, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tolerations", "taints", "want", "comparison_ops"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filter(
    tolerations: list[Tol], taints: list[Taint], want: Status | None, comparison_ops: bool
) -> None:
    pl = tt.new(None, None, Features(enable_taint_toleration_comparison_operators=comparison_ops))
    ni = node_info(node_with("nodeA", taints))
    assert pl.filter(new_state(), PodInfo(pod_with(tolerations)), ni) == want


def test_filter_prefers_a_clean_untolerated_taint_over_a_parse_error() -> None:
    # The result must not depend on taint order (component-helpers FindMatchingUntoleratedTaint).
    pl = tt.new(None, None)
    pod = PodInfo(pod_with([(SLA, "Gt", "950", NS)]))
    for taints in ([(SLA, "high", NS), ("other", "x", NS)], [("other", "x", NS), (SLA, "high", NS)]):
        assert pl.filter(new_state(), pod, node_info(node_with("n", taints))) == UNTOLERATED


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "0950",
            'failed to parse toleration value "0950" as int64: must be a valid decimal integer in canonical form',
        ),
        (
            "9223372036854775808",
            'failed to parse toleration value "9223372036854775808" as int64: strconv.ParseInt: parsing '
            '"9223372036854775808": value out of range',
        ),
    ],
)
def test_filter_reports_toleration_parse_errors(value: str, message: str) -> None:
    pl = tt.new(None, None)
    got = pl.filter(
        new_state(), PodInfo(pod_with([(SLA, "Lt", value, NS)])), node_info(node_with("n", [(SLA, "1", NS)]))
    )
    assert got == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [message])


NODE_HINT_CASES: list[tuple[str, list[Tol] | None, object, object, QueueingHint | None]] = [
    ("backoff-wrong-new-object", None, None, "not-a-node", None),
    ("backoff-wrong-old-object", None, "not-a-node", node_with("nodeA", [("dedicated", "user1", NS)]), None),
    ("skip-queue-on-untoleratedtaint-node-added", [("dedicated", "Equal", "user2", NS)], None,
     node_with("nodeA", [("dedicated", "user1", NS)]), QueueingHint.SKIP),
    ("queue-on-toleratedtaint-node-added", [("dedicated", "Equal", "user2", NS)], None,
     node_with("nodeA", [("dedicated", "user2", NS)]), QueueingHint.QUEUE),
    ("skip-unrelated-change", [("dedicated", "Equal", "user2", NS)], node_with("nodeA", [("dedicated", "user1", NS)]),
     node_with("nodeA", [("dedicated", "user1", NS), ("dedicated", "user3", NS)]), QueueingHint.SKIP),
    ("queue-on-taint-change", [("dedicated", "Equal", "user2", NS)], node_with("nodeA", [("dedicated", "user1", NS)]),
     node_with("nodeA", [("dedicated", "user2", NS)]), QueueingHint.QUEUE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tolerations", "old", "new", "want"),
    [c[1:] for c in NODE_HINT_CASES],
    ids=[c[0] for c in NODE_HINT_CASES],
)
def test_is_schedulable_after_node_change(
    tolerations: list[Tol] | None, old: object, new: object, want: QueueingHint | None
) -> None:
    pl = tt.new(None, None)
    pod = pod_with(tolerations or [])
    if want is None:
        # upstream returns (Queue, err); our hints raise and the queue treats that as Queue
        with pytest.raises(TypeError):
            pl.is_schedulable_after_node_change(pod, old, new)
        return
    assert pl.is_schedulable_after_node_change(pod, old, new) == want


def test_is_schedulable_after_target_pod_toleration_change() -> None:
    # upstream "queue-on-toleration-added"
    pl = tt.new(None, None)
    pod = make_pod().name("pod-1").namespace("ns-1").obj()
    old = make_pod().name("pod-1").namespace("ns-1").obj()
    new = make_pod().name("pod-1").namespace("ns-1").toleration("foo", "", "", NS).obj()
    assert pl.is_schedulable_after_pod_toleration_change(pod, old, new) == QueueingHint.QUEUE
    other = make_pod().name("pod-2").uid("u2").namespace("ns-1").toleration("foo", "", "", NS).obj()
    assert pl.is_schedulable_after_pod_toleration_change(pod, old, other) == QueueingHint.SKIP


def test_events_to_register() -> None:
    with_hints = [e.event for e in tt.new(None, None).events_to_register()]
    assert with_hints == [
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
    ]
    without = [
        e.event for e in tt.new(None, None, Features(enable_scheduling_queue_hint=False)).events_to_register()
    ]
    assert without == [
        ClusterEvent(
            EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT | ActionType.UPDATE_NODE_LABEL
        )
    ]


def test_score_without_pre_score_is_an_error() -> None:
    pl = tt.new(None, None)
    score, status = pl.score(new_state(), PodInfo(pod_with([])), node_info(node_with("n", [])))
    assert score == 0 and status is not None and status.code == Code.ERROR
