# ruff: noqa: E501 -- the case tables keep upstream's case names, one case per row
"""NodeAffinity on upstream's own tables (plugins/nodeaffinity/node_affinity_test.go:
TestNodeAffinity, TestNodeAffinityPriority, Test_isSchedulableAfterNodeChange)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.interface import MAX_NODE_SCORE, NodeScore, PreFilterResult
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins import nodeaffinity as na
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

Req = tuple[str, str, Sequence[str]]  # key, operator, values
NAME_FIELD = "metadata.name"


def term(exprs: Sequence[Req] = (), fields: Sequence[Req] = ()) -> pb.NodeSelectorTerm:
    t = pb.NodeSelectorTerm()
    for key, op, values in exprs:
        t.match_expressions.add(key=key, operator=op, values=values)
    for key, op, values in fields:
        t.match_fields.add(key=key, operator=op, values=values)
    return t


def affinity_pod(
    *terms: pb.NodeSelectorTerm, node_selector: dict[str, str] | None = None, nil_required: bool = False
) -> pb.Pod:
    pod = pb.Pod()
    if node_selector:
        pod.spec.node_selector.update(node_selector)
    if nil_required:
        pod.spec.affinity.node_affinity.SetInParent()
        return pod
    if terms:
        required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        required.node_selector_terms.extend(terms)
    return pod


def added_required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


POD_REASON = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [na.ERR_REASON_POD])
ENFORCED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [na.ERR_REASON_ENFORCED])
CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [na.ERR_REASON_CONFLICT])
SKIP = Status(Code.SKIP)
FOO_BAR = {"foo": "bar"}
GPU = {"GPU": "NVIDIA-GRID-K1"}
NODE1 = (NAME_FIELD, "In", ["node1"])
NODE2 = (NAME_FIELD, "In", ["node2"])
ZONE_IN_BAR = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["bar"]}]}

# name, pod, node labels, node name, want filter, want prefilter status, want prefilter result, args, run prefilter
FilterCase = tuple[
    str,
    pb.Pod,
    dict[str, str],
    str,
    Status | None,
    Status | None,
    PreFilterResult | None,
    dict[str, Any],
    bool,
]
FILTER: list[FilterCase] = [
    ("missing labels", affinity_pod(node_selector=FOO_BAR), {}, "", POD_REASON, None, None, {}, True),
    ("same labels", affinity_pod(node_selector=FOO_BAR), FOO_BAR, "", None, None, None, {}, True),
    ("node labels are superset", affinity_pod(node_selector=FOO_BAR), {"foo": "bar", "baz": "blah"}, "", None, None,
     None, {}, True),
    ("node labels are subset", affinity_pod(node_selector={"foo": "bar", "baz": "blah"}), FOO_BAR, "", POD_REASON,
     None, None, {}, True),
    ("Pod with matchExpressions using In operator that matches the existing node",
     affinity_pod(term([("foo", "In", ["bar", "value2"])])), FOO_BAR, "", None, None, None, {}, True),
    ("Pod with matchExpressions using Gt operator that matches the existing node",
     affinity_pod(term([("kernel-version", "Gt", ["0204"])])), {"kernel-version": "0206"}, "", None, None, None, {},
     True),
    ("Pod with matchExpressions using NotIn operator that matches the existing node",
     affinity_pod(term([("mem-type", "NotIn", ["DDR", "DDR2"])])), {"mem-type": "DDR3"}, "", None, None, None, {},
     True),
    ("Pod with matchExpressions using Exists operator that matches the existing node",
     affinity_pod(term([("GPU", "Exists", [])])), GPU, "", None, None, None, {}, True),
    ("Pod with affinity that don't match node's labels won't schedule onto the node",
     affinity_pod(term([("foo", "In", ["value1", "value2"])])), FOO_BAR, "", POD_REASON, None, None, {}, True),
    ("Pod with empty MatchExpressions is not a valid value will match no objects and won't schedule onto the node",
     affinity_pod(term()), FOO_BAR, "", POD_REASON, None, None, {}, True),
    ("Pod with no Affinity will schedule onto a node", pb.Pod(), FOO_BAR, "", None, SKIP, None, {}, True),
    ("Pod with Affinity but nil NodeSelector will schedule onto a node", affinity_pod(nil_required=True), FOO_BAR, "",
     None, SKIP, None, {}, True),
    ("Pod with multiple matchExpressions ANDed that matches the existing node",
     affinity_pod(term([("GPU", "Exists", []), ("GPU", "NotIn", ["AMD", "INTER"])])), GPU, "", None, None, None, {},
     True),
    ("Pod with multiple matchExpressions ANDed that doesn't match the existing node",
     affinity_pod(term([("GPU", "Exists", []), ("GPU", "In", ["AMD", "INTER"])])), GPU, "", POD_REASON, None, None, {},
     True),
    ("Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels and will schedule onto the node",
     affinity_pod(term([("foo", "In", ["bar", "value2"])]), term([("diffkey", "In", ["wrong", "value2"])])), FOO_BAR,
     "", None, None, None, {}, True),
    ("Pod with an Affinity and a PodSpec.NodeSelector(the old thing that we are deprecating) both are satisfied, will "
     "schedule onto the node", affinity_pod(term([("foo", "Exists", [])]), node_selector=FOO_BAR), FOO_BAR, "", None,
     None, None, {}, True),
    ("Pod with an Affinity matches node's labels but the PodSpec.NodeSelector(the old thing that we are deprecating) "
     "is not satisfied, won't schedule onto the node",
     affinity_pod(term([("foo", "Exists", [])]), node_selector=FOO_BAR), {"foo": "barrrrrr"}, "", POD_REASON, None,
     None, {}, True),
    ("Pod with an invalid value in Affinity term won't be scheduled onto the node",
     affinity_pod(term([("foo", "NotIn", ["invalid value: ___@#$%^"])])), FOO_BAR, "", POD_REASON, None, None, {},
     True),
    ("Pod with matchFields using In operator that matches the existing node", affinity_pod(term(fields=[NODE1])), {},
     "node1", None, None, PreFilterResult({"node1"}), {}, True),
    ("Pod with matchFields using In operator that does not match the existing node",
     affinity_pod(term(fields=[NODE1])), {}, "node2", POD_REASON, None, PreFilterResult({"node1"}), {}, True),
    ("Pod with two terms: matchFields does not match, but matchExpressions matches",
     affinity_pod(term(fields=[NODE1]), term([("foo", "In", ["bar"])])), FOO_BAR, "node2", None, None, None, {}, True),
    ("Pod with one term: matchFields does not match, but matchExpressions matches",
     affinity_pod(term([("foo", "In", ["bar"])], [NODE1])), FOO_BAR, "node2", POD_REASON, None,
     PreFilterResult({"node1"}), {}, True),
    ("Pod with one term: both matchFields and matchExpressions match",
     affinity_pod(term([("foo", "In", ["bar"])], [NODE1])), FOO_BAR, "node1", None, None, PreFilterResult({"node1"}),
     {}, True),
    ("Pod with two terms: both matchFields and matchExpressions do not match",
     affinity_pod(term(fields=[NODE1]), term([("foo", "In", ["not-match-to-bar"])])), FOO_BAR, "node2", POD_REASON,
     None, None, {}, True),
    ("Pod with two terms of node.Name affinity", affinity_pod(term(fields=[NODE1]), term(fields=[NODE2])), {},
     "node2", None, None, PreFilterResult({"node1", "node2"}), {}, True),
    ("Pod with two conflicting mach field requirements", affinity_pod(term(fields=[NODE1, NODE2])), FOO_BAR, "node2",
     POD_REASON, CONFLICT, None, {}, True),
    ("Matches added affinity and Pod's node affinity", affinity_pod(term([("zone", "In", ["foo"])])), {"zone": "foo"},
     "node2", None, None, None,
     added_required({"matchFields": [{"key": NAME_FIELD, "operator": "In", "values": ["node2"]}]}), True),
    ("Matches added affinity but not Pod's node affinity", affinity_pod(term([("zone", "In", ["bar"])])),
     {"zone": "foo"}, "node2", POD_REASON, None, None,
     added_required({"matchFields": [{"key": NAME_FIELD, "operator": "In", "values": ["node2"]}]}), True),
    ("Doesn't match added affinity", pb.Pod(), {"zone": "foo"}, "node2", ENFORCED, None, None,
     added_required(ZONE_IN_BAR), True),
    ("Matches node selector correctly even if PreFilter is not called", affinity_pod(node_selector=FOO_BAR),
     {"foo": "bar", "baz": "blah"}, "", None, None, None, {}, False),
    ("Matches node affinity correctly even if PreFilter is not called",
     affinity_pod(term([("GPU", "Exists", []), ("GPU", "NotIn", ["AMD", "INTER"])])), GPU, "", None, None, None, {},
     False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "labels", "node_name", "want", "want_pre_status", "want_pre_result", "args", "run_pre_filter"),
    [c[1:] for c in FILTER],
    ids=[c[0] for c in FILTER],
)
def test_node_affinity(
    pod: pb.Pod,
    labels: dict[str, str],
    node_name: str,
    want: Status | None,
    want_pre_status: Status | None,
    want_pre_result: PreFilterResult | None,
    args: dict[str, Any],
    run_pre_filter: bool,
) -> None:
    node = make_node().name(node_name).obj()
    node.metadata.labels.update(labels)
    ni = node_info(node)
    pl = na.new(args, None)
    state = new_state()
    pod_info = PodInfo(pod)
    if run_pre_filter:
        result, status = pl.pre_filter(state, pod_info, [ni])
        assert status == want_pre_status
        assert result == want_pre_result
    assert pl.filter(state, pod_info, ni) == want


def preferred_pod(*prefs: tuple[int, Sequence[Req]]) -> pb.Pod:
    pod = pb.Pod()
    for weight, exprs in prefs:
        p = pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution.add(
            weight=weight
        )
        p.preference.CopyFrom(term(exprs))
    return pod


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
FOO_IN_BAR: list[Req] = [("foo", "In", ["bar"])]
AFFINITY1: tuple[int, list[Req]] = (2, FOO_IN_BAR)
AFFINITY2: list[tuple[int, list[Req]]] = [
    (2, FOO_IN_BAR),
    (4, [("key", "In", ["value"])]),
    (5, [("foo", "In", ["bar"]), ("key", "In", ["value"]), ("az", "In", ["az1"])]),
]
ADDED_AFFINITY1 = {
    "addedAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 2,
                "preference": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]},
            }
        ]
    }
}
ADDED_KEY_VALUE = {
    "addedAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 3,
                "preference": {"matchExpressions": [{"key": "key", "operator": "In", "values": ["value"]}]},
            }
        ]
    }
}

PRIORITY: list[tuple[str, pb.Pod, list[tuple[str, dict[str, str]]], list[int], dict[str, Any], bool]] = [
    ("all nodes are same priority as NodeAffinity is nil", pb.Pod(),
     [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)], [0, 0, 0], {}, True),
    ("no node matches preferred scheduling requirements in NodeAffinity of pod so all nodes' priority is zero",
     preferred_pod(AFFINITY1), [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)], [0, 0, 0], {}, True),
    ("only node1 matches the preferred scheduling requirements of pod", preferred_pod(AFFINITY1),
     [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)], [MAX_NODE_SCORE, 0, 0], {}, True),
    ("all nodes matches the preferred scheduling requirements of pod but with different priorities",
     preferred_pod(*AFFINITY2), [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)], [18, MAX_NODE_SCORE, 36],
     {}, True),
    ("added affinity", pb.Pod(), [("node1", LABEL1), ("node2", LABEL2)], [MAX_NODE_SCORE, 0], ADDED_AFFINITY1, True),
    ("added affinity and pod has default affinity", preferred_pod(AFFINITY1),
     [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL5)], [40, 60, MAX_NODE_SCORE], ADDED_KEY_VALUE, True),
    ("calculate the priorities correctly even if PreScore is not called", preferred_pod(*AFFINITY2),
     [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)], [18, MAX_NODE_SCORE, 36], {}, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "nodes", "want", "args", "run_pre_score"), [c[1:] for c in PRIORITY], ids=[c[0] for c in PRIORITY]
)
def test_node_affinity_priority(
    pod: pb.Pod,
    nodes: list[tuple[str, dict[str, str]]],
    want: list[int],
    args: dict[str, Any],
    run_pre_score: bool,
) -> None:
    node_objs = []
    for name, labels in nodes:
        n = make_node().name(name).obj()
        n.metadata.labels.update(labels)
        node_objs.append(n)
    snapshot = Snapshot.from_objects([], node_objs)
    pl = na.new(args, None)
    state = new_state()
    pod_info = PodInfo(pod)
    if run_pre_score:
        status = pl.pre_score(state, pod_info, snapshot.list())
        # upstream's Score of a pod without preferences is 0 everywhere; our PreScore says Skip
        assert status is None or (status.code == Code.SKIP and not args and not pod.spec.HasField("affinity"))
    scores = []
    for ni in snapshot.list():
        score, status = pl.score(state, pod_info, ni)
        assert status is None
        scores.append(NodeScore(ni.name, score))
    assert pl.score_extensions().normalize_score(state, pod_info, scores) is None
    assert [s.score for s in scores] == want


POD_FOO_BAR = make_pod().node_affinity_in("foo", ["bar"]).obj()
ADDED_FOO_BAR = added_required({"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]})


def _node(**labels: str) -> pb.Node:
    n = make_node().obj()
    n.metadata.labels.update(labels)
    return n


HINTS: list[tuple[str, dict[str, Any], object, object, QueueingHint | None]] = [
    ("backoff-wrong-new-object", {}, None, "not-a-node", None),
    ("backoff-wrong-old-object", {}, "not-a-node", _node(), None),
    ("skip-queue-on-add", {}, None, _node(), QueueingHint.SKIP),
    ("queue-on-add", {}, None, _node(foo="bar"), QueueingHint.QUEUE),
    ("skip-unrelated-changes", {}, _node(), make_node().capacity({}).obj(), QueueingHint.SKIP),
    ("skip-unrelated-changes-on-labels", {}, _node(), _node(k="v"), QueueingHint.SKIP),
    ("skip-labels-changes-on-suitable-node", {}, _node(foo="bar"), _node(foo="bar", k="v"), QueueingHint.SKIP),
    ("skip-labels-changes-on-node-from-suitable-to-unsuitable", {}, _node(foo="bar"), _node(k="v"), QueueingHint.SKIP),
    ("queue-on-labels-change-makes-pod-schedulable", {}, _node(), _node(foo="bar"), QueueingHint.QUEUE),
    ("skip-queue-on-add-scheduler-enforced-node-affinity", ADDED_FOO_BAR, None, _node(), QueueingHint.SKIP),
    ("queue-on-add-scheduler-enforced-node-affinity", ADDED_FOO_BAR, None, _node(foo="bar"), QueueingHint.QUEUE),
]  # fmt: skip


@pytest.mark.parametrize(("args", "old", "new", "want"), [c[1:] for c in HINTS], ids=[c[0] for c in HINTS])
def test_is_schedulable_after_node_change(
    args: dict[str, Any], old: object, new: object, want: QueueingHint
) -> None:
    pl = na.new(args, None)
    if want is None:
        with pytest.raises(TypeError):
            pl.is_schedulable_after_node_change(POD_FOO_BAR, old, new)
        return
    # upstream's QueueAfterBackoff is our QUEUE
    assert pl.is_schedulable_after_node_change(POD_FOO_BAR, old, new) == want


def test_events_to_register() -> None:
    assert [e.event for e in na.new(None, None).events_to_register()] == [
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
    ]
    no_hints = na.new(None, None, Features(enable_scheduling_queue_hint=False))
    assert [e.event for e in no_hints.events_to_register()] == [
        ClusterEvent(
            EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
        )
    ]


def test_invalid_added_affinity_is_rejected() -> None:
    with pytest.raises(ValueError):
        na.new(
            added_required({"matchExpressions": [{"key": "foo", "operator": "Bogus", "values": ["x"]}]}), None
        )
    with pytest.raises(ValueError):
        na.new(
            {"addedAffinity": {"noSuchField": 1, "requiredDuringSchedulingIgnoredDuringExecution": 5}}, None
        )


def test_invalid_preferred_term_is_a_pre_score_error() -> None:
    # upstream getPodPreferredNodeAffinity returns the parse error as the PreScore status
    pod = preferred_pod((1, [("foo", "Bogus", ["x"])]))
    status = na.new(None, None).pre_score(new_state(), PodInfo(pod), [])
    assert status is not None and status.code == Code.ERROR
