# ruff: noqa: E501 -- the case tables keep upstream's case names, one case per row
"""PodTopologySpread on upstream's own tables (plugins/podtopologyspread/filtering_test.go:
TestPreFilterState (counts), TestSingleConstraint, TestMultipleConstraints, TestPreFilterDisabled;
scoring_test.go: TestPodTopologySpreadScore). Cases needing Services/ReplicaSets go through
the `default_selector` hook, as kse models neither."""

from __future__ import annotations

from typing import Any

import pytest

from kse.objects.labels import selector_from_set
from proto import kse_pb2 as pb
from scheduler.framework.interface import NodeScore
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins import podtopologyspread as pts
from scheduler.framework.plugins.feature import Features
from scheduler.framework.plugins.helper.taints import TAINT_NODE_UNSCHEDULABLE
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
)

from .wrappers import FakeHandle, label_selector, make_node, make_pod, new_state, node_info

HOST = pts.LABEL_HOSTNAME
DNS, SA = pts.DO_NOT_SCHEDULE, pts.SCHEDULE_ANYWAY
FOO = label_selector(exists=["foo"])
BAR = label_selector(exists=["bar"])
TAINTS = [(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")]
OK, NO, NEVER = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def node(name: str, **labels: str) -> pb.Node:
    w = make_node().name(name)
    for k, v in labels.items():
        w.label(k, v)
    return w.obj()


def tainted(n: pb.Node) -> pb.Node:
    """The node with the unschedulable NoSchedule taint (upstream's `taints`)."""
    n.spec.taints.add(key=TAINTS[0][0], value=TAINTS[0][1], effect=TAINTS[0][2])
    return n


def zn(name: str, zone: str, **extra: str) -> pb.Node:
    """A node labelled zone=<zone>, node=<name>."""
    return node(name, zone=zone, node=name, **extra)


def hn(name: str, **extra: str) -> pb.Node:
    """A node labelled kubernetes.io/hostname=<name>."""
    n = node(name, **extra)
    n.metadata.labels[HOST] = name
    return n


def ep(name: str, node_name: str, *keys: str, ns: str = "", terminating: bool = False) -> pb.Pod:
    """An existing pod with labels key="" for each key."""
    w = make_pod().name(name).node(node_name)
    if ns:
        w.namespace(ns)
    for k in keys:
        w.label(k, "")
    if terminating:
        w.terminating()
    return w.obj()


def in_pod(*keys: str) -> Any:
    w = make_pod().name("p")
    for k in keys:
        w.label(k, "")
    return w


def spread(w: Any, max_skew: int, key: str, when: str, sel: pb.LabelSelector | None, **kw: Any) -> Any:
    return w.spread_constraint(max_skew, key, when, sel, **kw)


def four_nodes() -> list[pb.Node]:
    return [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]


P_21_03 = [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"),
           ep("p-y1", "node-y", "foo"), ep("p-y2", "node-y", "foo"), ep("p-y3", "node-y", "foo")]  # fmt: skip
P_11_01 = [ep("p-b1", "node-a", "foo"), ep("p-b2", "node-b", "foo"), ep("p-y1", "node-y", "foo")]
FOO_NODES = [node("node-a", node="node-a", foo=""), node("node-b", node="node-b", foo=""),
             node("node-x", node="node-x", foo=""), node("node-y", node="node-y")]  # fmt: skip
FOO_NODES_TAINTED_Y = [*FOO_NODES[:3], tainted(node("node-y", node="node-y"))]

FilterCase = tuple[str, pb.Pod, list[pb.Node], list[pb.Pod], dict[str, Code], bool]

SINGLE: list[FilterCase] = [
    ("no existing pods", spread(in_pod("foo"), 1, "zone", DNS, FOO).obj(), four_nodes(), [],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}, False),
    ("no existing pods, incoming pod doesn't match itself", spread(in_pod("foo"), 1, "zone", DNS, BAR).obj(),
     four_nodes(), [], {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}, False),
    ("existing pods in a different namespace do not count", spread(in_pod("foo"), 1, "zone", DNS, FOO).obj(),
     four_nodes(), [ep("p-a1", "node-a", "foo", ns="ns1"), ep("p-b1", "node-a", "foo", ns="ns2"),
                    ep("p-x1", "node-x", "foo"), ep("p-y1", "node-y", "foo")],
     {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO}, False),
    ("existing pods do not match null selector", spread(in_pod("foo"), 1, "zone", DNS, None).obj(), four_nodes(),
     [ep("p-x1", "node-x", "foo"), ep("p-y1", "node-y", "foo")],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}, False),
    ("pods spread across zones as 3/3, all nodes fit", spread(in_pod("foo"), 1, "zone", DNS, FOO).obj(), four_nodes(),
     P_21_03, {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}, False),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
     spread(in_pod("foo"), 1, "zone", DNS, FOO).obj(),
     [zn("node-a", "zone1"), node("node-b", zon="zone1", node="node-b"), zn("node-x", "zone2"), zn("node-y", "zone2")],
     [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-x1", "node-x", "foo"), ep("p-y1", "node-y", "foo")],
     {"node-a": OK, "node-b": NEVER, "node-x": NO, "node-y": NO}, False),
    ("pod cannot be scheduled as all nodes don't have label 'rack'", spread(in_pod("foo"), 1, "rack", DNS, FOO).obj(),
     [zn("node-a", "zone1"), zn("node-x", "zone2")], [], {"node-a": NEVER, "node-x": NEVER}, False),
    ("pods spread across nodes as 2/1/0/3, only node-x fits", spread(in_pod("foo"), 1, "node", DNS, FOO).obj(),
     four_nodes(), P_21_03, {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, False),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
     spread(in_pod("foo"), 2, "node", DNS, FOO).obj(), four_nodes(), P_21_03,
     {"node-a": NO, "node-b": OK, "node-x": OK, "node-y": NO}, False),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
     spread(in_pod("bar"), 1, "node", DNS, FOO).obj(), four_nodes(), P_21_03,
     {"node-a": NO, "node-b": OK, "node-x": OK, "node-y": NO}, False),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     spread(in_pod("foo").node_affinity_in("node", ["node-a", "node-y"]), 1, "node", DNS, FOO).obj(), four_nodes(),
     P_21_03, {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": NO}, False),
    ("terminating Pods should be excluded", spread(in_pod("foo"), 1, "node", DNS, FOO).obj(),
     [node("node-a", node="node-a"), node("node-b", node="node-b")],
     [ep("p-a", "node-a", "foo", terminating=True), ep("p-b", "node-b", "foo")], {"node-a": OK, "node-b": NO}, False),
    ("incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
     spread(in_pod("foo").node_affinity_not_in("node", ["node-b"]), 1, "zone", DNS, FOO).obj(), four_nodes(),
     [ep("p-b1", "node-b", "foo"), ep("p-b2", "node-b", "foo"), ep("p-y1", "node-y", "foo")],
     {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO}, False),
    ("pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
     spread(in_pod("foo"), 2, "node", DNS, FOO, min_domains=4).obj(),
     [node("node-a", node="node-a"), node("node-b", node="node-b"), node("node-c", node="node-c")],
     [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-b2", "node-b", "foo"),
      ep("p-c1", "node-c", "foo")], {"node-a": NO, "node-b": NO, "node-c": OK}, False),
    ("pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
     spread(in_pod("foo"), 2, "node", DNS, FOO, min_domains=2).obj(),
     [node("node-a", node="node-a"), node("node-b", node="node-b"), node("node-c", node="node-c")],
     [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-b2", "node-b", "foo"),
      ep("p-c1", "node-c", "foo")], {"node-a": OK, "node-b": OK, "node-c": OK}, False),
    ("pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
     spread(in_pod("foo"), 2, "zone", DNS, FOO, min_domains=3).obj(), four_nodes(), P_11_01,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK}, False),
    ("pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
     spread(in_pod("foo"), 2, "zone", DNS, FOO, min_domains=1).obj(), four_nodes(), P_11_01,
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}, False),
    ("NodeAffinityPolicy honored with labelSelectors",
     spread(in_pod("foo").node_selector({"foo": ""}), 1, "node", DNS, FOO).obj(), FOO_NODES, P_11_01,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK}, True),
    ("NodeAffinityPolicy ignored with labelSelectors",
     spread(in_pod("foo").node_selector({"foo": ""}), 1, "node", DNS, FOO, node_affinity_policy="Ignore").obj(),
     FOO_NODES, P_11_01, {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, True),
    ("NodeAffinityPolicy honored with nodeAffinity",
     spread(in_pod("foo").node_affinity_in("foo", [""]), 1, "node", DNS, FOO).obj(), FOO_NODES, P_11_01,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK}, True),
    ("NodeAffinityPolicy ignored with nodeAffinity",
     spread(in_pod("foo").node_affinity_in("foo", [""]), 1, "node", DNS, FOO, node_affinity_policy="Ignore").obj(),
     FOO_NODES, P_11_01, {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, True),
    ("NodeTaintsPolicy honored", spread(in_pod("foo"), 1, "node", DNS, FOO, node_taints_policy="Honor").obj(),
     FOO_NODES_TAINTED_Y, P_11_01, {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": OK}, True),
    ("NodeTaintsPolicy ignored", spread(in_pod("foo"), 1, "node", DNS, FOO).obj(), FOO_NODES_TAINTED_Y, P_11_01,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, True),
]  # fmt: skip

ZONE_NODE_FOO = [zn("node-a", "zone1", foo=""), zn("node-b", "zone1", foo=""), zn("node-x", "zone2", foo=""),
                 zn("node-y", "zone2")]  # fmt: skip
P_AB_Y = [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-y1", "node-y", "foo")]

MULTIPLE: list[FilterCase] = [
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
     spread(spread(in_pod("foo"), 1, "zone", DNS, FOO), 1, "node", DNS, FOO).obj(), four_nodes(), P_21_03,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, False),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
     spread(spread(in_pod("foo"), 1, "zone", DNS, FOO), 1, "node", DNS, FOO).obj(), four_nodes(),
     [*P_21_03, ep("p-y4", "node-y", "foo")], {"node-a": NO, "node-b": NO, "node-x": NO, "node-y": NO}, False),
    ("Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
     spread(spread(in_pod("foo", "bar"), 1, "zone", DNS, FOO), 1, "node", DNS, BAR).obj(), four_nodes(),
     [ep("p-a1", "node-a", "foo"), ep("p-y1", "node-y", "bar")],
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, False),
    ("Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
     spread(spread(in_pod("foo", "bar"), 1, "zone", DNS, FOO), 1, "node", DNS, BAR).obj(), four_nodes(),
     [ep("p-a1", "node-a", "foo"), ep("p-x1", "node-x", "bar"), ep("p-y1", "node-y", "bar")],
     {"node-a": NO, "node-b": NO, "node-x": NO, "node-y": NO}, False),
    ("Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
     spread(spread(in_pod("foo", "bar"), 1, "zone", DNS, FOO), 1, "node", DNS, BAR).obj(), four_nodes(),
     [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo", "bar"), ep("p-y1", "node-y", "foo"),
      ep("p-y2", "node-y", "foo", "bar"), ep("p-y3", "node-y", "foo")],
     {"node-a": NO, "node-b": OK, "node-x": NO, "node-y": NO}, False),
    ("Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
     spread(spread(in_pod("bar"), 1, "zone", DNS, FOO), 1, "node", DNS, BAR).obj(), four_nodes(),
     [ep("p-a1", "node-a", "foo"), ep("p-x1", "node-x", "bar"), ep("p-y1", "node-y", "bar")],
     {"node-a": OK, "node-b": OK, "node-x": NO, "node-y": NO}, False),
    ("two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
     spread(spread(in_pod("foo"), 1, "zone", DNS, FOO), 1, "node", DNS, FOO).obj(),
     [zn("node-a", "zone1"), zn("node-b", "zone1"), node("node-x", zone="zone2"), zn("node-y", "zone2")],
     [ep("p-a1", "node-a", "foo"), ep("p-y3", "node-y", "foo")],
     {"node-a": NO, "node-b": OK, "node-x": NEVER, "node-y": NO}, False),
    ("two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
     spread(spread(in_pod("foo").node_selector({"foo": ""}), 1, "zone", DNS, FOO), 1, "node", DNS, FOO,
            node_affinity_policy="Ignore").obj(), ZONE_NODE_FOO, P_AB_Y,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, True),
    ("two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
     spread(spread(in_pod("foo"), 1, "zone", DNS, FOO, node_taints_policy="Honor"), 1, "node", DNS, FOO).obj(),
     [*ZONE_NODE_FOO[:3], tainted(zn("node-y", "zone2"))], P_AB_Y,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, True),
    ("two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
     spread(spread(in_pod("foo").node_selector({"foo": ""}), 1, "zone", DNS, FOO), 1, "node", DNS, FOO).obj(),
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1"), zn("node-x", "zone2", foo=""),
      tainted(zn("node-y", "zone2", foo=""))], P_AB_Y,
     {"node-a": NO, "node-b": OK, "node-x": OK, "node-y": NO}, True),
    ("two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
     spread(spread(in_pod("foo").node_selector({"foo": ""}), 1, "zone", DNS, FOO, node_taints_policy="Honor"), 1,
            "node", DNS, FOO, node_affinity_policy="Ignore").obj(),
     [zn("node-a", "zone1", foo=""), zn("node-b", "zone1"), zn("node-x", "zone2", foo=""),
      tainted(zn("node-y", "zone2", foo=""))], P_AB_Y,
     {"node-a": NO, "node-b": NO, "node-x": OK, "node-y": NO}, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "nodes", "existing", "want", "inclusion"),
    [c[1:] for c in SINGLE + MULTIPLE],
    ids=[c[0] for c in SINGLE + MULTIPLE],
)
def test_filter(
    pod: pb.Pod, nodes: list[pb.Node], existing: list[pb.Pod], want: dict[str, Code], inclusion: bool
) -> None:
    snapshot = Snapshot.from_objects(existing, nodes)
    features = Features(enable_node_inclusion_policy_in_pod_topology_spread=inclusion)
    pl = pts.new({"defaultingType": "List"}, FakeHandle(snapshot), features)
    state = new_state()
    pod_info = PodInfo(pod)
    result, status = pl.pre_filter(state, pod_info, snapshot.list())
    assert result is None and status is None
    got = {}
    for ni in snapshot.list():
        s = pl.filter(state, pod_info, ni)
        got[ni.name] = Code.SUCCESS if s is None else s.code
        if s is not None:
            reason = (
                pts.ERR_REASON_NODE_LABEL_NOT_MATCH
                if s.code == NEVER
                else pts.ERR_REASON_CONSTRAINTS_NOT_MATCH
            )
            assert s.reasons == [reason]
    assert got == want


PRE_FILTER_COUNTS: list[tuple[pb.Pod, list[pb.Pod], list[dict[str, int]], list[int]]] = [
        # "normal case with one spreadConstraint": zone1=3, zone2=2
        (spread(in_pod("foo"), 1, "zone", DNS, FOO).obj(),
         [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"),
          ep("p-y1", "node-y", "foo"), ep("p-y2", "node-y", "foo")],
         [{"zone1": 3, "zone2": 2}], [2]),
        # "normal case with null label selector": nothing matches
        (spread(in_pod("foo"), 1, "zone", DNS, None).obj(), [ep("p-a1", "node-a", "foo")], [{"zone1": 0, "zone2": 0}], [0]),
        # "normal case with two spreadConstraints"
        (spread(spread(in_pod("foo"), 1, "zone", DNS, FOO), 1, "node", DNS, FOO).obj(),
         [*P_21_03, ep("p-y4", "node-y", "foo")],
         [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}], [3, 0]),
        # "soft spreadConstraints should be bypassed"
        (spread(spread(spread(in_pod("foo"), 1, "zone", SA, FOO), 1, "zone", DNS, FOO), 1, "node", SA, FOO).obj(),
         P_21_03, [{"zone1": 3, "zone2": 3}], [3]),
    ]  # fmt: skip


@pytest.mark.parametrize(("pod", "existing", "want_counts", "want_min"), PRE_FILTER_COUNTS)
def test_pre_filter_state_counts(
    pod: pb.Pod, existing: list[pb.Pod], want_counts: list[dict[str, int]], want_min: list[int]
) -> None:
    snapshot = Snapshot.from_objects(existing, four_nodes())
    pl = pts.new({"defaultingType": "List"}, FakeHandle(snapshot))
    state = new_state()
    assert pl.pre_filter(state, PodInfo(pod), snapshot.list()) == (None, None)
    s = state.read(pts.PRE_FILTER_STATE_KEY)
    assert isinstance(s, pts._PreFilterState)
    assert s.tp_value_to_match_num == want_counts
    assert [p.min_match_num() for p in s.critical_paths] == want_min


def test_pre_filter_skips_pods_without_hard_constraints() -> None:
    snapshot = Snapshot.from_objects([], four_nodes())
    pl = pts.new({"defaultingType": "List"}, FakeHandle(snapshot))
    soft_only = spread(in_pod("foo"), 1, "zone", SA, FOO).obj()
    for pod in (in_pod("foo").obj(), soft_only):
        assert pl.pre_filter(new_state(), PodInfo(pod), snapshot.list()) == (None, Status(Code.SKIP))


def test_pre_filter_disabled() -> None:
    pl = pts.new({"defaultingType": "List"}, FakeHandle())
    got = pl.filter(new_state(), PodInfo(pb.Pod()), node_info(make_node().obj()))
    assert got == Status(Code.ERROR, ['reading "PreFilterPodTopologySpread" from cycleState: not found'])


def test_add_and_remove_pod_update_the_counts() -> None:
    # upstream TestPreFilterStateAddPod / RemovePod in spirit: preemption adds and removes pods
    # on one node of a cloned state; the critical paths follow.
    nodes = four_nodes()
    existing = [ep("p-a1", "node-a", "foo"), ep("p-y1", "node-y", "foo")]
    snapshot = Snapshot.from_objects(existing, nodes)
    pl = pts.new({"defaultingType": "List"}, FakeHandle(snapshot))
    pod = PodInfo(spread(in_pod("foo"), 1, "node", DNS, FOO).obj())
    state = new_state()
    pl.pre_filter(state, pod, snapshot.list())
    s0 = state.read(pts.PRE_FILTER_STATE_KEY)
    assert isinstance(s0, pts._PreFilterState)
    assert s0.tp_value_to_match_num == [{"node-a": 1, "node-b": 0, "node-x": 0, "node-y": 1}]
    cloned = state.clone()
    ext = pl.pre_filter_extensions()
    node_b = snapshot.get("node-b")
    assert ext.add_pod(cloned, pod, PodInfo(ep("new", "node-b", "foo")), node_b) is None
    assert ext.add_pod(cloned, pod, PodInfo(ep("other", "node-b", "bar")), node_b) is None  # not matching
    assert ext.add_pod(cloned, pod, PodInfo(ep("ns", "node-b", "foo", ns="x")), node_b) is None  # other ns
    s1 = cloned.read(pts.PRE_FILTER_STATE_KEY)
    assert isinstance(s1, pts._PreFilterState)
    assert s1.tp_value_to_match_num == [{"node-a": 1, "node-b": 1, "node-x": 0, "node-y": 1}]
    assert s1.critical_paths[0].min_match_num() == 0
    assert ext.remove_pod(cloned, pod, PodInfo(existing[0]), snapshot.get("node-a")) is None
    assert s1.tp_value_to_match_num == [{"node-a": 0, "node-b": 1, "node-x": 0, "node-y": 1}]
    # the original state is untouched
    assert s0.tp_value_to_match_num == [{"node-a": 1, "node-b": 0, "node-x": 0, "node-y": 1}]
    # node-b now has one more: with maxSkew 1 it no longer fits
    assert pl.filter(cloned, pod, node_b) == Status(
        Code.UNSCHEDULABLE, [pts.ERR_REASON_CONSTRAINTS_NOT_MATCH]
    )
    assert pl.filter(state, pod, node_b) is None


def test_critical_paths() -> None:
    # upstream criticalPaths.update: [0] always holds the minimum.
    paths = pts.CriticalPaths()
    for value, num in [("a", 3), ("b", 1), ("c", 2)]:
        paths.update(value, num)
    assert paths.min_match_num() == 1
    paths.update("b", 4)  # the minimum grows: the other path takes over
    assert paths.paths[0][1] <= paths.paths[1][1]
    assert paths.min_match_num() == 2


# ----------------------------------------------------------------------------- scoring

ScoreCase = tuple[str, pb.Pod, list[pb.Pod], list[pb.Node], list[pb.Node], list[int], bool, bool, Any]

P_2103 = [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"),
          ep("p-d1", "node-d", "foo"), ep("p-d2", "node-d", "foo"), ep("p-d3", "node-d", "foo")]  # fmt: skip
P_4321 = [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-a3", "node-a", "foo"),
          ep("p-a4", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-b2", "node-b", "foo"),
          ep("p-b3", "node-b", "foo"), ep("p-c1", "node-c", "foo"), ep("p-c2", "node-c", "foo"),
          ep("p-d1", "node-d", "foo")]  # fmt: skip
P_4213 = [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-a3", "node-a", "foo"),
          ep("p-a4", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-b2", "node-b", "foo"),
          ep("p-x1", "node-x", "foo"), ep("p-y1", "node-y", "foo"), ep("p-y2", "node-y", "foo"),
          ep("p-y3", "node-y", "foo")]  # fmt: skip
HN4 = [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")]
Z_HN = [
    hn("node-a", zone="zone1"),
    hn("node-b", zone="zone1"),
    hn("node-x", zone="zone2"),
    hn("node-y", zone="zone2"),
]
P_DIFF = [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo", "bar"), ep("p-y1", "node-y", "foo"),
          ep("p-y2", "node-y", "bar")]  # fmt: skip
P_ABC = [
    ep("p-a1", "node-a", "foo"),
    ep("p-a2", "node-a", "foo"),
    ep("p-b1", "node-b", "foo"),
    ep("p-c1", "node-c", "foo"),
]
ABC_FOO = [
    node("node-a", node="node-a", foo=""),
    node("node-b", node="node-b", foo=""),
    node("node-c", node="node-c"),
]
ABC = [
    node("node-a", node="node-a"),
    node("node-b", node="node-b"),
    node("node-c", node="node-c"),
]
ABC_TAINT_C = [
    node("node-a", node="node-a"),
    node("node-b", node="node-b"),
    tainted(node("node-c", node="node-c")),
]
Z_HN_ABCD = [
    hn("node-a", zone="zone1"),
    hn("node-b", zone="zone1"),
    hn("node-c", zone="zone2"),
    hn("node-d", zone="zone2"),
]
P_MLK = [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo", "bar"), ep("p-y1", "node-c", "foo"),
         ep("p-y2", "node-c", "bar")]  # fmt: skip
EMPTY = label_selector()


def _service_foo(pod: pb.Pod) -> Any:
    """Stands in for a Service selecting foo="" (upstream's objs: a v1.Service)."""
    return selector_from_set({"foo": ""})


SCORE: list[ScoreCase] = [
    ("one constraint on node, no existing pods", spread(in_pod("foo"), 1, HOST, SA, FOO).obj(), [],
     [hn("node-a"), hn("node-b")], [], [100, 100], False, False, None),
    ("one constraint on node, only one node is candidate", spread(in_pod("foo"), 1, HOST, SA, FOO).obj(),
     [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo")], [hn("node-a")],
     [hn("node-b")], [100], False, False, None),
    ("one constraint on node, all nodes have the same number of matching pods",
     spread(in_pod("foo"), 1, HOST, SA, FOO).obj(), [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo")],
     [hn("node-a"), hn("node-b")], [], [100, 100], False, False, None),
    ("one constraint on node, all 4 nodes are candidates", spread(in_pod("foo"), 1, HOST, SA, FOO).obj(), P_2103, HN4,
     [], [20, 60, 100, 0], False, False, None),
    ("one constraint on node, null selector", spread(in_pod("foo"), 1, HOST, SA, None).obj(), P_2103, HN4, [],
     [100, 100, 100, 100], False, False, None),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2", spread(in_pod("foo"), 2, HOST, SA, FOO).obj(),
     P_2103, HN4, [], [33, 66, 100, 16], False, False, None),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=3", spread(in_pod("foo"), 3, HOST, SA, FOO).obj(),
     P_4321, HN4, [], [44, 66, 77, 100], False, False, None),
    ("system defaulting, nodes don't have zone, pods match service", in_pod("foo").obj(), P_4321, HN4, [],
     [44, 66, 77, 100], False, False, _service_foo),
    ("one constraint on node, 3 out of 4 nodes are candidates", spread(in_pod("foo"), 1, HOST, SA, FOO).obj(), P_4213,
     [hn("node-a"), hn("node-b"), hn("node-x")], [hn("node-y")], [33, 83, 100], False, False, None),
    ("one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
     spread(in_pod("foo"), 1, HOST, SA, FOO).obj(), P_4213, [hn("node-a"), node("node-b", n="node-b"), hn("node-x")],
     [hn("node-y")], [16, 0, 100], False, False, None),
    ("one constraint on zone, 3 out of 4 nodes are candidates", spread(in_pod("foo"), 1, "zone", SA, FOO).obj(), P_4213,
     Z_HN[:3], Z_HN[3:], [75, 75, 100], False, False, None),
    ("two Constraints on zone and node, 2 out of 4 nodes are candidates",
     spread(spread(in_pod("foo"), 1, "zone", SA, FOO), 1, HOST, SA, FOO).obj(),
     [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-x1", "node-x", "foo"),
      ep("p-x2", "node-x", "foo"), ep("p-y1", "node-y", "foo"), ep("p-y2", "node-y", "foo"), ep("p-y3", "node-y", "foo"),
      ep("p-y4", "node-y", "foo")], [Z_HN[0], Z_HN[2]], [Z_HN[1], Z_HN[3]], [100, 63], False, False, None),
    ("two Constraints on zone and node, with different labelSelectors",
     spread(spread(in_pod("foo", "bar"), 1, "zone", SA, FOO), 1, HOST, SA, BAR).obj(), P_DIFF, Z_HN, [],
     [60, 20, 100, 60], False, False, None),
    ("two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
     spread(spread(in_pod("foo", "bar"), 1, "zone", SA, FOO), 1, HOST, SA, BAR).obj(),
     [ep("p-b1", "node-b", "bar"), ep("p-x1", "node-x", "foo"), ep("p-y1", "node-y", "foo", "bar")], Z_HN, [],
     [100, 60, 40, 0], False, False, None),
    ("two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
     spread(spread(in_pod("foo", "bar"), 1, "zone", SA, FOO), 1, HOST, SA, BAR).obj(), P_DIFF, Z_HN[:3], Z_HN[3:],
     [50, 25, 100], False, False, None),
    ("existing pods in a different namespace do not count", spread(in_pod("foo"), 1, HOST, SA, FOO).obj(),
     [ep("p-a1", "node-a", "foo", ns="ns1"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"),
      ep("p-b2", "node-b", "foo")], [hn("node-a"), hn("node-b")], [], [100, 33], False, False, None),
    ("terminating Pods should be excluded", spread(in_pod("foo"), 1, HOST, SA, FOO).obj(),
     [ep("p-a", "node-a", "foo", terminating=True), ep("p-b", "node-b", "foo")], [hn("node-a"), hn("node-b")], [],
     [100, 0], False, False, None),
    ("minDomains has no effect when ScheduleAnyway", spread(in_pod("foo"), 2, "node", SA, FOO, min_domains=10).obj(),
     [ep("p-a1", "node-a", "foo"), ep("p-a2", "node-a", "foo"), ep("p-b1", "node-b", "foo"), ep("p-b2", "node-b", "foo"),
      ep("p-c1", "node-c", "foo")], ABC, [], [75, 75, 100], False, False, None),
    ("NodeAffinityPolicy honoed with labelSelectors",
     spread(in_pod("foo").node_selector({"foo": ""}), 1, "node", SA, FOO).obj(), P_ABC, ABC_FOO, [], [0, 33, 100],
     True, False, None),
    ("NodeAffinityPolicy ignored with labelSelectors",
     spread(in_pod("foo").node_selector({"foo": ""}), 1, "node", SA, FOO, node_affinity_policy="Ignore").obj(), P_ABC,
     ABC_FOO, [], [66, 100, 100], True, False, None),
    ("NodeAffinityPolicy honoed with nodeAffinity",
     spread(in_pod("foo").node_affinity_in("foo", [""]), 1, "node", SA, FOO).obj(), P_ABC, ABC_FOO, [], [0, 33, 100],
     True, False, None),
    ("NodeAffinityPolicy ignored with nodeAffinity",
     spread(in_pod("foo").node_affinity_in("foo", [""]), 1, "node", SA, FOO, node_affinity_policy="Ignore").obj(),
     P_ABC, ABC_FOO, [], [66, 100, 100], True, False, None),
    ("NodeTaintsPolicy honored", spread(in_pod("foo"), 1, "node", SA, FOO, node_taints_policy="Honor").obj(), P_ABC,
     ABC_TAINT_C, [], [0, 33, 100], True, False, None),
    ("NodeTaintsPolicy ignored", spread(in_pod("foo"), 1, "node", SA, FOO).obj(), P_ABC, ABC_TAINT_C, [],
     [66, 100, 100], True, False, None),
    ("matchLabelKeys ignored when feature gate disabled",
     spread(spread(in_pod("foo", "bar", "baz"), 1, "zone", SA, FOO, match_label_keys=["baz"]), 1, HOST, SA, BAR,
            match_label_keys=["baz"]).obj(), P_MLK, Z_HN_ABCD, [], [60, 20, 60, 100], False, False, None),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
     spread(spread(in_pod("foo", "bar"), 1, "zone", SA, EMPTY, match_label_keys=["foo"]), 1, HOST, SA, EMPTY,
            match_label_keys=["bar"]).obj(), P_MLK, Z_HN_ABCD, [], [60, 20, 60, 100], False, True, None),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
     spread(spread(in_pod("foo", "bar", "baz"), 1, "zone", SA, FOO), 1, HOST, SA, BAR, match_label_keys=["baz"]).obj(),
     [ep("p-a1", "node-a", "foo"), ep("p-b1", "node-b", "foo", "bar", "baz"), ep("p-c1", "node-c", "foo"),
      ep("p-c2", "node-c", "bar"), ep("p-d3", "node-c", "bar", "baz")], Z_HN_ABCD, [], [60, 20, 60, 100], False, True,
     None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "existing", "nodes", "failed", "want", "inclusion", "match_label_keys", "default_selector"),
    [c[1:] for c in SCORE],
    ids=[c[0] for c in SCORE],
)
def test_score(
    pod: pb.Pod,
    existing: list[pb.Pod],
    nodes: list[pb.Node],
    failed: list[pb.Node],
    want: list[int],
    inclusion: bool,
    match_label_keys: bool,
    default_selector: Any,
) -> None:
    snapshot = Snapshot.from_objects(existing, [*nodes, *failed])
    features = Features(
        enable_node_inclusion_policy_in_pod_topology_spread=inclusion,
        enable_match_label_keys_in_pod_topology_spread=match_label_keys,
    )
    handle = FakeHandle(snapshot)
    if default_selector is None:
        pl = pts.new({"defaultingType": "System"}, handle, features)
    else:
        pl = pts.PodTopologySpread(handle, pts.SYSTEM_DEFAULT_CONSTRAINTS, True, features, default_selector)
    state = new_state()
    pod_info = PodInfo(pod)
    candidates = [snapshot.get(n.metadata.name) for n in nodes]
    assert pl.pre_score(state, pod_info, candidates) is None
    scores = []
    for ni in candidates:
        score, status = pl.score(state, pod_info, ni)
        assert status is None
        scores.append(NodeScore(ni.name, score))
    assert pl.score_extensions().normalize_score(state, pod_info, scores) is None
    assert [s.score for s in scores] == want


def test_pre_score_skips() -> None:
    snapshot = Snapshot.from_objects([], [hn("node-a")])
    pl = pts.new({"defaultingType": "System"}, FakeHandle(snapshot))
    hard_only = spread(in_pod("foo"), 1, HOST, DNS, FOO).obj()
    # no soft constraints; system defaults without a selector (nothing selects the pod)
    for pod in (hard_only, in_pod("foo").obj()):
        assert pl.pre_score(new_state(), PodInfo(pod), snapshot.list()) == Status(Code.SKIP)
    # no candidate nodes
    soft = spread(in_pod("foo"), 1, HOST, SA, FOO).obj()
    assert pl.pre_score(new_state(), PodInfo(soft), []) == Status(Code.SKIP)


def test_system_default_constraints_with_a_selector() -> None:
    pl = pts.PodTopologySpread(
        FakeHandle(), pts.SYSTEM_DEFAULT_CONSTRAINTS, True, default_selector=_service_foo
    )
    got = pl.get_constraints(PodInfo(in_pod("foo").obj()), SA)
    assert [(c.topology_key, c.max_skew) for c in got] == [(HOST, 3), (pts.LABEL_TOPOLOGY_ZONE, 5)]
    assert pl.get_constraints(PodInfo(in_pod("foo").obj()), DNS) == ()


# ----------------------------------------------------------------------------- args, events


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"defaultingType": "Foo"}, 'defaultingType: Unsupported value: "Foo"'),
        (
            {
                "defaultingType": "System",
                "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA}],
            },
            'defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
        ),
        (
            {"defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": SA}]},
            r"defaultConstraints\[0\].maxSkew",
        ),
        (
            {"defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": SA}]},
            r"defaultConstraints\[0\].topologyKey: Required value",
        ),
        (
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Never"}]},
            "whenUnsatisfiable: Unsupported value",
        ),
        (
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA, "labelSelector": {}}
                ]
            },
            r"defaultConstraints\[0\].labelSelector: Forbidden",
        ),
        (
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SA}] * 2},
            r"defaultConstraints\[1\]: Duplicate value",
        ),
    ],
)
def test_invalid_args(args: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        pts.new(args, None)


def test_args_defaults() -> None:
    system = pts.new(None, None)
    assert system.system_defaulted and system.default_constraints == pts.SYSTEM_DEFAULT_CONSTRAINTS
    listed = pts.new(
        {"defaultConstraints": [{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": SA}]}, None
    )
    assert not listed.system_defaulted
    assert [(c.max_skew, c.topology_key) for c in listed.default_constraints] == [(2, "zone")]


def test_events_to_register() -> None:
    events = [e.event for e in pts.new(None, None).events_to_register()]
    assert events == [
        ClusterEvent(
            EventResource.POD,
            ActionType.ADD
            | ActionType.UPDATE_POD_LABEL
            | ActionType.DELETE
            | ActionType.UPDATE_POD_TOLERATIONS,
        ),
        ClusterEvent(
            EventResource.NODE,
            ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
        ),
    ]


def _hint_pod() -> pb.Pod:
    return spread(make_pod().name("p").uid("p").label("foo", ""), 1, "zone", DNS, FOO).obj()


def _node_labels(**labels: str) -> pb.Node:
    return node("n", **labels)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, _node_labels(zone="zone1"), QueueingHint.QUEUE),
        (None, _node_labels(other="x"), QueueingHint.SKIP),
        (_node_labels(zone="zone1"), None, QueueingHint.QUEUE),
        (_node_labels(other="x"), None, QueueingHint.SKIP),
        (_node_labels(zone="zone1"), _node_labels(zone="zone2"), QueueingHint.QUEUE),
        (_node_labels(zone="zone1"), _node_labels(zone="zone1", other="y"), QueueingHint.SKIP),
        (_node_labels(other="x"), _node_labels(zone="zone1"), QueueingHint.QUEUE),
        (_node_labels(zone="zone1"), tainted(node("n", zone="zone1")), QueueingHint.QUEUE),
    ],
    ids=[
        "node-with-key-added",
        "node-without-key-added",
        "node-with-key-deleted",
        "node-without-key-deleted",
        "topology-value-changed",
        "unrelated-label-changed",
        "key-added",
        "taints-changed",
    ],
)
def test_node_hint(old: pb.Node | None, new: pb.Node | None, want: QueueingHint) -> None:
    assert pts.new(None, None).is_schedulable_after_node_change(_hint_pod(), old, new) == want


def _pod(name: str, node_name: str = "n", ns: str = "", **labels: str) -> pb.Pod:
    w = make_pod().name(name).uid(name)
    if node_name:
        w.node(node_name)
    if ns:
        w.namespace(ns)
    for k, v in labels.items():
        w.label(k, v)
    return w.obj()


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, _pod("q", foo=""), QueueingHint.QUEUE),
        (None, _pod("q", bar=""), QueueingHint.SKIP),
        (None, _pod("q", node_name="", foo=""), QueueingHint.SKIP),
        (None, _pod("q", ns="other", foo=""), QueueingHint.SKIP),
        (_pod("q", foo=""), None, QueueingHint.QUEUE),
        (_pod("q", bar=""), _pod("q", foo=""), QueueingHint.QUEUE),
        (_pod("q", foo="a"), _pod("q", foo="b"), QueueingHint.SKIP),
        (_pod("q", foo="", x="1"), _pod("q", foo="", x="2"), QueueingHint.SKIP),
    ],
    ids=[
        "add-matching",
        "add-unmatching",
        "add-unscheduled",
        "add-other-namespace",
        "delete-matching",
        "label-change-starts-matching",
        "label-change-keeps-matching",
        "unrelated-label-change",
    ],
)
def test_pod_hint(old: pb.Pod | None, new: pb.Pod | None, want: QueueingHint) -> None:
    assert pts.new(None, None).is_schedulable_after_pod_change(_hint_pod(), old, new) == want


def test_pod_hint_on_toleration_change_with_taints_policy_honor() -> None:
    pod = spread(
        make_pod().name("p").uid("p").label("foo", ""), 1, "zone", DNS, FOO, node_taints_policy="Honor"
    ).obj()
    updated = pb.Pod()
    updated.CopyFrom(pod)
    updated.spec.tolerations.add(key="k", operator="Exists")
    assert pts.new(None, None).is_schedulable_after_pod_change(pod, pod, updated) == QueueingHint.QUEUE
