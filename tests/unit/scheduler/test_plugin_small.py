"""NodeName, NodeUnschedulable, PrioritySort, DefaultBinder, SchedulingGates, the registry and
helper.DefaultNormalizeScore, on upstream's own tables where upstream has them
(nodename/node_name_test.go, nodeunschedulable/node_unschedulable_test.go,
queuesort/priority_sort_test.go, defaultbinder/default_binder_test.go,
schedulinggates/scheduling_gates_test.go, helper/normalize_score_test.go)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from proto import kse_pb2 as pb
from scheduler.framework import interface as fw
from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.interface import MAX_NODE_SCORE, NodeScore, PreFilterResult
from scheduler.framework.plugins import (
    defaultbinder,
    nodename,
    nodeunschedulable,
    queuesort,
    schedulinggates,
)
from scheduler.framework.plugins.helper.normalize_score import (
    default_normalize_score,
    default_normalize_scores,
)
from scheduler.framework.plugins.helper.taints import TAINT_NODE_UNSCHEDULABLE
from scheduler.framework.plugins.registry import REGISTRY
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    Status,
)

from .wrappers import FakeHandle, make_node, make_pod, new_state, node_info

# ----------------------------------------------------------------------------- NodeName

NODE_NAME_REJECT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [nodename.ERR_REASON])


@pytest.mark.parametrize(
    ("pod_node", "want"),
    [("", None), ("foo", None), ("bar", NODE_NAME_REJECT)],
    ids=["no host specified", "host matches", "host doesn't match"],
)
def test_node_name_filter(pod_node: str, want: Status | None) -> None:
    pl = nodename.new(None, None)  # type: ignore[arg-type]
    pod = make_pod().node(pod_node).obj()
    assert pl.filter(new_state(), PodInfo(pod), node_info(make_node().name("foo").obj())) == want


def test_node_name_pre_filter() -> None:
    pl = nodename.new(None, None)  # type: ignore[arg-type]
    assert pl.pre_filter(new_state(), PodInfo(make_pod().obj()), []) == (None, None)
    assert pl.pre_filter(new_state(), PodInfo(make_pod().node("foo").obj()), []) == (
        PreFilterResult({"foo"}),
        None,
    )
    assert [e.event for e in pl.events_to_register()] == [ClusterEvent(EventResource.NODE, ActionType.ADD)]


# ----------------------------------------------------------------------------- NodeUnschedulable

UNSCHEDULABLE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [nodeunschedulable.ERR_REASON_UNSCHEDULABLE])


@pytest.mark.parametrize(
    ("pod", "unschedulable", "want"),
    [
        (pb.Pod(), True, UNSCHEDULABLE),
        (pb.Pod(), False, None),
        (make_pod().toleration(TAINT_NODE_UNSCHEDULABLE, "", "", "NoSchedule").obj(), True, None),
    ],
    ids=[
        "Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)",
        "Schedule pod to normal node",
        "Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)",
    ],
)
def test_node_unschedulable(pod: pb.Pod, unschedulable: bool, want: Status | None) -> None:
    pl = nodeunschedulable.new(None, None)  # type: ignore[arg-type]
    ni = node_info(make_node().unschedulable(unschedulable).obj())
    assert pl.filter(new_state(), PodInfo(pod), ni) == want


def test_node_unschedulable_without_node() -> None:
    pl = nodeunschedulable.new(None, None)  # type: ignore[arg-type]
    got = pl.filter(new_state(), PodInfo(pb.Pod()), node_info(None))
    assert got == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had unknown conditions"])


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, make_node().unschedulable(True).obj(), QueueingHint.SKIP),
        (None, make_node().obj(), QueueingHint.QUEUE),
        (make_node().unschedulable(True).obj(), make_node().obj(), QueueingHint.QUEUE),
        (make_node().obj(), make_node().unschedulable(True).obj(), QueueingHint.SKIP),
        (make_node().obj(), make_node().label("a", "b").obj(), QueueingHint.SKIP),
        (None, "not-a-node", None),
        ("not-a-node", make_node().obj(), None),
    ],
    ids=[
        "skip-queue-on-unschedulable-node-added",
        "queue-on-schedulable-node-added",
        "queue-on-unschedulable-field-change",
        "skip-on-becoming-unschedulable",
        "skip-unrelated-change",
        "backoff-wrong-new-object",
        "backoff-wrong-old-object",
    ],
)
def test_node_unschedulable_node_hint(old: object, new: object, want: QueueingHint | None) -> None:
    pl = nodeunschedulable.new(None, None)  # type: ignore[arg-type]
    pod = make_pod().name("p").uid("u").obj()
    if want is None:
        with pytest.raises(TypeError):
            pl.is_schedulable_after_node_change(pod, old, new)
        return
    assert pl.is_schedulable_after_node_change(pod, old, new) == want


def test_node_unschedulable_toleration_hint() -> None:
    pl = nodeunschedulable.new(None, None)  # type: ignore[arg-type]
    pod = make_pod().name("p").uid("u").obj()
    tolerating = (
        make_pod().name("p").uid("u").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule").obj()
    )
    unrelated = make_pod().name("p").uid("u").toleration("other", "Exists", "", "NoSchedule").obj()
    other_pod = make_pod().name("q").uid("v").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "").obj()
    assert pl.is_schedulable_after_pod_toleration_change(pod, pod, tolerating) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_pod_toleration_change(pod, pod, unrelated) == QueueingHint.SKIP
    assert pl.is_schedulable_after_pod_toleration_change(pod, pod, other_pod) == QueueingHint.SKIP
    assert [e.event for e in pl.events_to_register()] == [
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
    ]


# ----------------------------------------------------------------------------- PrioritySort

LOW, HIGH = 10, 20
T1, T2 = 1000.0, 1001.0


def _queued(priority: int, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo(make_pod().priority(priority).obj()), timestamp)


@pytest.mark.parametrize(
    ("p1", "p2", "want"),
    [
        (_queued(LOW, T1), _queued(HIGH, T2), False),
        (_queued(HIGH, T1), _queued(LOW, T2), True),
        (_queued(HIGH, T1), _queued(HIGH, T2), True),
        (_queued(HIGH, T2), _queued(HIGH, T1), False),
    ],
    ids=[
        "p1.priority less than p2.priority",
        "p1.priority greater than p2.priority",
        "equal priority. p1 is added to schedulingQ earlier than p2",
        "equal priority. p2 is added to schedulingQ earlier than p1",
    ],
)
def test_priority_sort_less(p1: QueuedPodInfo, p2: QueuedPodInfo, want: bool) -> None:
    assert queuesort.new(None, None).less(p1, p2) is want  # type: ignore[arg-type]


def test_priority_sort_unset_priority_is_zero() -> None:
    pl = queuesort.new(None, None)  # type: ignore[arg-type]
    unset = QueuedPodInfo(PodInfo(make_pod().obj()), T1)
    negative = _queued(-1, T1 - 1)
    assert pl.less(unset, negative)
    assert not pl.less(negative, unset)


# ----------------------------------------------------------------------------- DefaultBinder


async def test_default_binder_success() -> None:
    handle = FakeHandle()
    pl = defaultbinder.new(None, handle)
    pod = make_pod().name("foo").namespace("ns").uid("foo").obj()
    assert await pl.bind(new_state(), PodInfo(pod), "foohost.kubernetes.mydomain.com") is None
    assert handle.bound == [("foo", "foohost.kubernetes.mydomain.com")]


async def test_default_binder_error() -> None:
    handle = FakeHandle(bind_error=RuntimeError("failed"))
    pl = defaultbinder.new(None, handle)
    status = await pl.bind(new_state(), PodInfo(make_pod().name("foo").obj()), "n")
    assert status == Status(Code.ERROR, ["failed"])


# ----------------------------------------------------------------------------- SchedulingGates


def test_scheduling_gates_pre_enqueue() -> None:
    pl = schedulinggates.new(None, None)  # type: ignore[arg-type]
    assert pl.pre_enqueue(PodInfo(make_pod().obj())) is None
    gated = PodInfo(make_pod().scheduling_gates(["foo", "bar"]).obj())
    assert pl.pre_enqueue(gated) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["waiting for scheduling gates: [foo bar]"]
    )


def test_scheduling_gates_hint() -> None:
    pl = schedulinggates.new(None, None)  # type: ignore[arg-type]
    pod = make_pod().name("p").uid("uid").scheduling_gates(["foo"]).obj()
    ungated = make_pod().name("p").uid("uid").obj()
    other = make_pod().name("q").uid("other").obj()
    with pytest.raises(TypeError):
        pl.is_schedulable_after_gates_eliminated(pod, "not-a-pod", ungated)
    with pytest.raises(TypeError):
        pl.is_schedulable_after_gates_eliminated(pod, pod, "not-a-pod")
    assert pl.is_schedulable_after_gates_eliminated(pod, other, other) == QueueingHint.SKIP
    assert pl.is_schedulable_after_gates_eliminated(pod, pod, ungated) == QueueingHint.QUEUE
    assert [e.event for e in pl.events_to_register()] == [
        ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    ]


# ----------------------------------------------------------------------------- DefaultNormalizeScore


@pytest.mark.parametrize(
    ("reverse", "scores", "want"),
    [
        (False, [1, 2, 3, 4], [25, 50, 75, 100]),
        (True, [1, 2, 3, 4], [75, 50, 25, 0]),
        (False, [1000, 10, 20, 30], [100, 1, 2, 3]),
        (True, [1000, 10, 20, 30], [0, 99, 98, 97]),
        (False, [1, 1, 1, 1], [100, 100, 100, 100]),
        (False, [1000, 1, 1, 1], [100, 0, 0, 0]),
        (True, [0, 1, 1, 1], [100, 0, 0, 0]),
        # all zero: unchanged, or all max when reversed
        (False, [0, 0], [0, 0]),
        (True, [0, 0], [100, 100]),
    ],
)
def test_default_normalize_score(reverse: bool, scores: list[int], want: list[int]) -> None:
    node_scores = [NodeScore(f"n{i}", s) for i, s in enumerate(scores)]
    assert default_normalize_score(MAX_NODE_SCORE, reverse, node_scores) is None
    assert [s.score for s in node_scores] == want


# ----------------------------------------------------------------------------- registry


def test_registry_builds_every_default_plugin() -> None:
    assert set(REGISTRY) == {
        "PrioritySort",
        "SchedulingGates",
        "NodeUnschedulable",
        "NodeName",
        "NodePorts",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "TaintToleration",
        "NodeAffinity",
        "ImageLocality",
        "PodTopologySpread",
        "InterPodAffinity",
        "UnsupportedFeatures",
        "DefaultPreemption",
        "DefaultBinder",
        "ImagePrePull",  # a sample, not in the default profile
    }
    handle = FakeHandle()
    for name, factory in REGISTRY.items():
        plugin = factory(None, handle)
        assert plugin.name() == name


@pytest.mark.parametrize(
    ("name", "protocols"),
    [
        ("PrioritySort", [fw.QueueSortPlugin]),
        ("SchedulingGates", [fw.PreEnqueuePlugin, fw.EnqueueExtensions]),
        ("NodeUnschedulable", [fw.FilterPlugin, fw.EnqueueExtensions]),
        ("NodeName", [fw.PreFilterPlugin, fw.FilterPlugin, fw.EnqueueExtensions]),
        ("NodePorts", [fw.PreFilterPlugin, fw.FilterPlugin, fw.EnqueueExtensions]),
        (
            "NodeResourcesFit",
            [fw.PreFilterPlugin, fw.FilterPlugin, fw.PreScorePlugin, fw.ScorePlugin, fw.EnqueueExtensions],
        ),
        ("NodeResourcesBalancedAllocation", [fw.PreScorePlugin, fw.ScorePlugin]),
        ("TaintToleration", [fw.FilterPlugin, fw.PreScorePlugin, fw.ScorePlugin, fw.EnqueueExtensions]),
        (
            "NodeAffinity",
            [fw.PreFilterPlugin, fw.FilterPlugin, fw.PreScorePlugin, fw.ScorePlugin, fw.EnqueueExtensions],
        ),
        ("ImageLocality", [fw.ScorePlugin]),
        (
            "PodTopologySpread",
            [fw.PreFilterPlugin, fw.FilterPlugin, fw.PreScorePlugin, fw.ScorePlugin, fw.EnqueueExtensions],
        ),
        ("DefaultBinder", [fw.BindPlugin]),
    ],
)
def test_plugins_implement_their_extension_points(name: str, protocols: list[type]) -> None:
    plugin = REGISTRY[name](None, FakeHandle())
    for proto in protocols:
        assert isinstance(plugin, proto), f"{name} is not a {proto.__name__}"


def test_batch_protocols() -> None:
    assert isinstance(REGISTRY["NodeResourcesFit"](None, FakeHandle()), fw.BatchFilterPlugin)
    assert isinstance(REGISTRY["NodeResourcesFit"](None, FakeHandle()), fw.BatchScorePlugin)
    assert isinstance(REGISTRY["NodeResourcesBalancedAllocation"](None, FakeHandle()), fw.BatchScorePlugin)
    for name in ("TaintToleration", "NodeUnschedulable", "NodeName"):
        assert isinstance(REGISTRY[name](None, FakeHandle()), fw.BatchFilterPlugin), name
    for name in ("TaintToleration", "ImageLocality", "PodTopologySpread"):
        assert isinstance(REGISTRY[name](None, FakeHandle()), fw.BatchScorePlugin), name
    assert isinstance(REGISTRY["PodTopologySpread"](None, FakeHandle()), fw.BatchFilterPlugin)
    for name in ("NodeAffinity", "NodePorts"):
        assert not isinstance(REGISTRY[name](None, FakeHandle()), fw.BatchFilterPlugin), name


# ----------------------------------------------------------------------------- CycleState


@dataclass
class _Counter:
    n: int

    def clone(self) -> _Counter:
        return _Counter(self.n)


def test_cycle_state() -> None:
    state = CycleState()
    with pytest.raises(StateNotFoundError) as e:
        state.read("missing")
    assert str(e.value) == "not found"
    state.write("k", _Counter(1))
    state.skip_filter_plugins.add("NodePorts")
    assert "k" in state
    copy = state.clone()
    got = copy.read("k")
    assert isinstance(got, _Counter)
    got.n = 5
    original = state.read("k")
    assert isinstance(original, _Counter) and original.n == 1  # values are cloned
    assert copy.skip_filter_plugins == {"NodePorts"}
    state.delete("k")
    assert "k" not in state and "k" in copy


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_default_normalize_scores_is_default_normalize_score_over_an_array(reverse: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    raw = rng.integers(0, [1, 5, 1000][seed % 3] + 1, n).astype(np.int64)
    node_scores = [NodeScore(f"n{i}", int(s)) for i, s in enumerate(raw)]
    default_normalize_score(MAX_NODE_SCORE, reverse, node_scores)
    arr = raw.copy()
    assert default_normalize_scores(MAX_NODE_SCORE, reverse, arr) is None
    assert arr.tolist() == [s.score for s in node_scores]
