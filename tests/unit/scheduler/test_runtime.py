"""The framework runtime (scheduler/framework/runtime.py), against upstream's framework.go rules
(and the cases of framework_test.go): extension-point order, Skip, PreFilter results,
normalize-then-weight, score range errors, Permit wait/allow/reject/timeout, Unreserve order,
Bind until the first non-Skip, events for the queue. No sleeps: Permit timers are driven by a
fake timer factory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from kse.durations import format_duration as go_duration
from proto import kse_pb2 as pb
from scheduler.apis.config.types import ExpandedPlugins, PluginRef
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import ClusterEventWithHint, NodeScore, PreFilterResult
from scheduler.framework.nodeinfo import NodeInfo, NodeInfoView, Snapshot
from scheduler.framework.runtime import ALL_EVENTS, Framework
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueuedPodInfo,
    Status,
)
from scheduler.framework.waiting_pods import WaitingPod
from tests.unit.scheduler.wrappers import make_node, make_pod

# ------------------------------------------------------------------------------------ fakes

Log = list[str]


class FakeTimers:
    """A TimerFactory over a fake clock: `advance` fires what is due."""

    class Handle:
        def __init__(self, due: float, cb: Callable[[], None]) -> None:
            self.due, self.cb, self.cancelled = due, cb, False

        def cancel(self) -> None:
            self.cancelled = True

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[FakeTimers.Handle] = []

    def __call__(self, delay: float, cb: Callable[[], None]) -> FakeTimers.Handle:
        h = FakeTimers.Handle(self.now + delay, cb)
        self.timers.append(h)
        return h

    def advance(self, dt: float) -> None:
        self.now += dt
        for h in list(self.timers):
            if not h.cancelled and h.due <= self.now:
                h.cancelled = True
                h.cb()


class QueueSort:
    def name(self) -> str:
        return "QueueSort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class PreFilter:
    def __init__(
        self, name: str, log: Log, result: PreFilterResult | None = None, status: Status | None = None
    ) -> None:
        self._name, self.log, self.result, self.status = name, log, result, status

    def name(self) -> str:
        return self._name

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        self.log.append(f"PreFilter:{self._name}")
        return self.result, self.status

    def pre_filter_extensions(self) -> None:
        return None


class Filter:
    """Rejects the nodes named in `reject` (node name -> status)."""

    def __init__(self, name: str, log: Log, reject: dict[str, Status] | None = None) -> None:
        self._name, self.log, self.reject = name, log, reject or {}

    def name(self) -> str:
        return self._name

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        self.log.append(f"Filter:{self._name}:{node_info.name}")
        return self.reject.get(node_info.name)


class BatchFilter(Filter):
    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        self.log.append(f"FilterBatch:{self._name}:{len(indices)}")
        infos = snapshot.node_info_list
        return np.array([infos[i].name not in self.reject for i in indices.tolist()], dtype=bool)


class PreFilterAndFilter(PreFilter, Filter):
    def __init__(
        self, name: str, log: Log, status: Status | None = None, reject: dict[str, Status] | None = None
    ):
        PreFilter.__init__(self, name, log, None, status)
        self.reject = reject or {}


class PreScore:
    def __init__(self, name: str, log: Log, status: Status | None = None) -> None:
        self._name, self.log, self.status = name, log, status

    def name(self) -> str:
        return self._name

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        self.log.append(f"PreScore:{self._name}")
        return self.status


class Score:
    """Raw score per node name; with `normalize`, NormalizeScore applies it to the list."""

    def __init__(
        self,
        name: str,
        log: Log,
        raw: dict[str, int],
        normalize: Callable[[list[NodeScore]], Status | None] | None = None,
        status: Status | None = None,
    ) -> None:
        self._name, self.log, self.raw, self.normalize, self.status = name, log, raw, normalize, status

    def name(self) -> str:
        return self._name

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        self.log.append(f"Score:{self._name}:{node_info.name}")
        return self.raw.get(node_info.name, 0), self.status

    def score_extensions(self) -> Score | None:
        return self if self.normalize is not None else None

    def normalize_score(self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]) -> Status | None:
        self.log.append(f"Normalize:{self._name}")
        assert self.normalize is not None
        return self.normalize(scores)


class BatchScore(Score):
    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        self.log.append(f"ScoreBatch:{self._name}")
        infos = snapshot.node_info_list
        return np.array([self.raw.get(infos[i].name, 0) for i in indices.tolist()], dtype=np.int64)

    def normalize_scores(
        self, state: CycleState, pod_info: PodInfo, node_infos: Sequence[NodeInfo], scores: np.ndarray
    ) -> Status | None:
        self.log.append(f"NormalizeBatch:{self._name}")
        lst = [NodeScore(ni.name, int(v)) for ni, v in zip(node_infos, scores.tolist(), strict=True)]
        s = self.normalize_score(None, None, lst)  # type: ignore[arg-type]
        scores[:] = [x.score for x in lst]
        return s


class PreScoreAndScore(PreScore, Score):
    def __init__(self, name: str, log: Log, status: Status | None, raw: dict[str, int]) -> None:
        PreScore.__init__(self, name, log, status)
        self.raw, self.normalize = raw, None


class Reserve:
    def __init__(self, name: str, log: Log, status: Status | None = None) -> None:
        self._name, self.log, self.status = name, log, status

    def name(self) -> str:
        return self._name

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        self.log.append(f"Reserve:{self._name}")
        return self.status

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        self.log.append(f"Unreserve:{self._name}")


class Permit:
    def __init__(self, name: str, log: Log, status: Status | None = None, timeout: float = 0.0) -> None:
        self._name, self.log, self.status, self.timeout = name, log, status, timeout

    def name(self) -> str:
        return self._name

    def permit(self, state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[Status | None, float]:
        self.log.append(f"Permit:{self._name}")
        return self.status, self.timeout


class Binding:
    """PreBind, Bind and PostBind in one plugin."""

    def __init__(self, name: str, log: Log, bind_status: Status | None = None) -> None:
        self._name, self.log, self.bind_status = name, log, bind_status

    def name(self) -> str:
        return self._name

    async def pre_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        self.log.append(f"PreBind:{self._name}")
        return None

    async def bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        self.log.append(f"Bind:{self._name}")
        return self.bind_status

    async def post_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        self.log.append(f"PostBind:{self._name}")


def new_framework(points: dict[str, list[Any]], **kwargs: Any) -> Framework:
    """A Framework over the given plugin objects per extension point; entries may be
    (plugin, weight) at score. A QueueSort and a Bind plugin are added when missing."""
    expanded = ExpandedPlugins()
    registry: dict[str, Any] = {}
    points = dict(points)
    points.setdefault("queueSort", [QueueSort()])
    points.setdefault("bind", [Binding("DefaultBind", [])])
    for point, entries in points.items():
        for entry in entries:
            plugin, weight = entry if isinstance(entry, tuple) else (entry, 0)
            registry[plugin.name()] = lambda _args, _handle, p=plugin: p
            expanded.point(point).append(PluginRef(plugin.name(), weight))
    return Framework("test-profile", expanded, registry=registry, **kwargs)


def snapshot_of(*names: str) -> Snapshot:
    nodes = [make_node().name(n).capacity({"cpu": "4", "memory": "8Gi", "pods": "110"}).obj() for n in names]
    return Snapshot.from_objects([], nodes)


def pod_info(name: str = "p", uid: str = "uid-p") -> PodInfo:
    return PodInfo(make_pod().name(name).namespace("default").uid(uid).obj())


UNSCHED = Code.UNSCHEDULABLE
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# ------------------------------------------------------------------------------------ building


def test_plugin_that_does_not_implement_its_point_is_refused() -> None:
    log: Log = []
    with pytest.raises(ValueError, match='plugin "F" does not extend ScorePlugin plugin'):
        new_framework({"score": [Filter("F", log)]})


def test_queue_sort_and_bind_are_required() -> None:
    expanded = ExpandedPlugins(bind=[PluginRef("B")])
    with pytest.raises(ValueError, match="only one queue sort plugin required"):
        Framework("p", expanded, registry={"B": lambda a, h: Binding("B", [])})


def test_factory_error_names_the_plugin() -> None:
    def broken(args: Any, handle: Any) -> Any:
        raise ValueError("bad args")

    expanded = ExpandedPlugins(queue_sort=[PluginRef("Q")], bind=[PluginRef("B")], filter=[PluginRef("X")])
    registry = {"Q": lambda a, h: QueueSort(), "B": lambda a, h: Binding("B", []), "X": broken}
    with pytest.raises(ValueError, match='initializing plugin "X": bad args'):
        Framework("p", expanded, registry=registry)


def test_unset_weight_reads_as_one_and_weights_are_kept() -> None:
    log: Log = []
    fwk = new_framework({"score": [(Score("A", log, {}), 0), (Score("B", log, {}), 5)]})
    assert fwk.score_weights == {"A": 1, "B": 5}
    assert fwk.list_plugins()["score"] == ["A", "B"]


# ------------------------------------------------------------------------------------ PreFilter


def test_pre_filter_runs_in_order_and_skip_disables_filter() -> None:
    log: Log = []
    fwk = new_framework(
        {
            "preFilter": [
                a := PreFilterAndFilter("A", log),
                b := PreFilterAndFilter("B", log, Status(Code.SKIP), {"n1": Status.unschedulable("no")}),
            ],
            "filter": [a, b],
        },
        snapshot=snapshot_of("n1"),
    )
    state = CycleState()
    res, s, _ = fwk.run_pre_filter_plugins(state, pod_info())
    assert (res, s) == (None, None)
    assert state.skip_filter_plugins == {"B"}
    assert (
        fwk.run_filter_plugins(state, pod_info(), fwk.snapshot_shared_lister().node_infos().get("n1")) is None
    )
    assert log == ["PreFilter:A", "PreFilter:B", "Filter:A:n1"]


def test_pre_filter_unresolvable_stops_unschedulable_continues() -> None:
    log: Log = []
    fwk = new_framework(
        {
            "preFilter": [
                PreFilter("A", log, status=Status.unschedulable("try later")),
                PreFilter("B", log),
                PreFilter("C", log, status=Status(UNRESOLVABLE, ["never"])),
                PreFilter("D", log),
            ]
        }
    )
    _, s, _ = fwk.run_pre_filter_plugins(CycleState(), pod_info())
    assert s is not None and s.code == UNRESOLVABLE and s.plugin == "C" and s.reasons == ["never"]
    assert log == ["PreFilter:A", "PreFilter:B", "PreFilter:C"]

    log.clear()
    fwk = new_framework(
        {"preFilter": [PreFilter("A", log, status=Status.unschedulable("try later")), PreFilter("B", log)]}
    )
    _, s, _ = fwk.run_pre_filter_plugins(CycleState(), pod_info())
    assert s is not None and s.code == UNSCHED and s.plugin == "A"
    assert log == ["PreFilter:A", "PreFilter:B"]  # the rest still ran (kubernetes#119770)


def test_pre_filter_error_is_wrapped() -> None:
    fwk = new_framework({"preFilter": [PreFilter("A", [], status=Status.error("boom"))]})
    _, s, _ = fwk.run_pre_filter_plugins(CycleState(), pod_info())
    assert s is not None and s.code == Code.ERROR
    assert s.message() == 'running PreFilter plugin "A": boom'


def test_pre_filter_results_are_intersected() -> None:
    log: Log = []
    fwk = new_framework(
        {
            "preFilter": [
                PreFilter("A", log, PreFilterResult({"n1", "n2"})),
                PreFilter("B", log, PreFilterResult(None)),
                PreFilter("C", log, PreFilterResult({"n2", "n3"})),
            ]
        }
    )
    res, s, plugins = fwk.run_pre_filter_plugins(CycleState(), pod_info())
    assert s is None and res is not None and res.node_names == {"n2"}
    assert plugins == {"A", "C"}


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ([{"n1"}, {"n2"}], "node(s) didn't satisfy plugin(s) [A B] simultaneously"),
        ([set()], "node(s) didn't satisfy plugin A"),
    ],
)
def test_pre_filter_empty_intersection_rejects_all(results: list[set[str]], message: str) -> None:
    plugins = [PreFilter(n, [], PreFilterResult(r)) for n, r in zip("AB", results, strict=False)]
    fwk = new_framework({"preFilter": plugins})
    _, s, _ = fwk.run_pre_filter_plugins(CycleState(), pod_info())
    assert s is not None and s.code == UNRESOLVABLE and s.reasons == [message] and s.plugin == ""


# ------------------------------------------------------------------------------------ Filter


def test_filter_first_failure_wins_and_names_the_plugin() -> None:
    log: Log = []
    fwk = new_framework(
        {
            "filter": [
                Filter("A", log),
                Filter("B", log, {"n1": Status.unschedulable("b says no")}),
                Filter("C", log, {"n1": Status.unschedulable("c says no")}),
            ]
        },
        snapshot=snapshot_of("n1"),
    )
    ni = fwk.snapshot_shared_lister().node_infos().get("n1")
    s = fwk.run_filter_plugins(CycleState(), pod_info(), ni)
    assert s is not None and s.plugin == "B" and s.reasons == ["b says no"] and s.code == UNSCHED
    assert log == ["Filter:A:n1", "Filter:B:n1"]


def test_filter_non_rejection_is_an_error() -> None:
    fwk = new_framework(
        {"filter": [Filter("A", [], {"n1": Status(Code.SKIP, ["?"])})]}, snapshot=snapshot_of("n1")
    )
    s = fwk.run_filter_plugins(CycleState(), pod_info(), fwk.snapshot_shared_lister().node_infos().get("n1"))
    assert s is not None and s.code == Code.ERROR and s.plugin == "A"
    assert s.message() == 'running "A" filter plugin: ?'


def test_filter_exception_is_an_error() -> None:
    class Raises(Filter):
        def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
            raise RuntimeError("kaput")

    fwk = new_framework({"filter": [Raises("A", [])]}, snapshot=snapshot_of("n1"))
    s = fwk.run_filter_plugins(CycleState(), pod_info(), fwk.snapshot_shared_lister().node_infos().get("n1"))
    assert s is not None and s.code == Code.ERROR and s.message() == 'running "A" filter plugin: kaput'


def test_filter_batch_matches_scalar_order_and_stops_at_enough() -> None:
    log: Log = []
    names = [f"n{i}" for i in range(10)]
    snap = snapshot_of(*names)
    rejections = {"n1": Status.unschedulable("a"), "n4": Status(UNRESOLVABLE, ["a2"])}
    fwk = new_framework(
        {"filter": [BatchFilter("A", log, rejections), Filter("B", log, {"n2": Status.unschedulable("b")})]},
        snapshot=snap,
    )
    order = np.array([3, 4, 5, 6, 7, 8, 9, 0, 1, 2], dtype=np.intp)
    out = fwk.filter_batch(CycleState(), pod_info(), snap, order, 5)
    assert out.error is None
    assert [snap.node_info_list[i].name for i in out.feasible] == ["n3", "n5", "n6", "n7", "n8"]
    assert [(snap.node_info_list[i].name, s.plugin, s.reasons) for i, s in out.rejected] == [
        ("n4", "A", ["a2"])
    ]
    assert out.processed == 6
    # the batch plugin ran once; its scalar filter only for the node it rejected
    assert log[:2] == ["FilterBatch:A:8", "Filter:A:n4"] and "Filter:A:n3" not in log


# ------------------------------------------------------------------------------------ Score


def scale_to_100(scores: list[NodeScore]) -> Status | None:
    top = max(s.score for s in scores)
    for s in scores:
        s.score = s.score * 100 // top
    return None


@pytest.mark.parametrize("batch_plugins", [False, True])
def test_score_normalize_then_weight(batch_plugins: bool) -> None:
    log: Log = []
    cls = BatchScore if batch_plugins else Score
    a = cls("A", log, {"n1": 10, "n2": 20}, normalize=scale_to_100)
    b = cls("B", log, {"n1": 7, "n2": 3})
    snap = snapshot_of("n1", "n2")
    fwk = new_framework({"score": [(a, 2), (b, 3)]}, snapshot=snap)
    state = CycleState()
    scores, s = fwk.run_score_plugins(state, pod_info(), snap.list())
    assert s is None
    assert [(n.name, [(p.name, p.score) for p in n.scores], n.total_score) for n in scores] == [
        ("n1", [("A", 100), ("B", 21)], 121),
        ("n2", [("A", 200), ("B", 9)], 209),
    ]
    matrix, s = fwk.score_matrix(state, pod_info(), snap, np.arange(2, dtype=np.intp))
    assert s is None and matrix is not None
    assert matrix.plugins == ["A", "B"] and matrix.weights == [2, 3]
    assert matrix.scores.tolist() == [[50, 100], [7, 3]]  # normalized, before weight
    assert matrix.totals.tolist() == [121, 209]
    assert [n.total_score for n in matrix.node_plugin_scores(["n1", "n2"])] == [121, 209]
    if batch_plugins:
        assert "ScoreBatch:A" in log and "NormalizeBatch:A" in log


def test_score_skipped_by_pre_score_does_not_run() -> None:
    log: Log = []
    fwk = new_framework(
        {
            "preScore": [
                a := PreScoreAndScore("A", log, Status(Code.SKIP), {"n1": 5}),
                b := PreScoreAndScore("B", log, None, {"n1": 6}),
            ],
            "score": [a, b],
        },
        snapshot=snapshot_of("n1"),
    )
    state = CycleState()
    assert (
        fwk.run_pre_score_plugins(state, pod_info(), fwk.snapshot_shared_lister().node_infos().list()) is None
    )
    assert state.skip_score_plugins == {"A"}
    scores, s = fwk.run_score_plugins(state, pod_info(), fwk.snapshot_shared_lister().node_infos().list())
    assert s is None and [(p.name, p.score) for p in scores[0].scores] == [("B", 6)]
    assert "Score:A:n1" not in log


def test_pre_score_error_is_wrapped() -> None:
    fwk = new_framework({"preScore": [PreScore("A", [], Status.error("no"))]})
    s = fwk.run_pre_score_plugins(CycleState(), pod_info(), [])
    assert s is not None and s.code == Code.ERROR and s.message() == 'running PreScore plugin "A": no'


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize(
    ("raw", "normalize", "bad"),
    [
        ({"n1": 101}, None, 101),
        ({"n1": -1}, None, -1),
        ({"n1": 5}, lambda scores: [setattr(s, "score", 300) for s in scores] and None, 300),
    ],
)
def test_score_out_of_range_is_an_error(raw: dict[str, int], normalize: Any, bad: int, batch: bool) -> None:
    snap = snapshot_of("n1")
    fwk = new_framework({"score": [Score("A", [], raw, normalize=normalize)]}, snapshot=snap, batch=batch)
    expected = (
        f'applying score defaultWeights on Score plugins: plugin "A" returns an invalid score {bad}, '
        "it should in the range of [0, 100] after normalizing"
    )
    scores, s = fwk.run_score_plugins(CycleState(), pod_info(), snap.list())
    assert scores == [] and s is not None and s.code == Code.ERROR and s.message() == expected
    matrix, s = fwk.score_matrix(CycleState(), pod_info(), snap, np.arange(1, dtype=np.intp))
    assert matrix is None and s is not None and s.message() == expected


def test_score_and_normalize_errors_are_wrapped() -> None:
    snap = snapshot_of("n1")
    fwk = new_framework({"score": [Score("A", [], {}, status=Status.error("bad node"))]}, snapshot=snap)
    _, s = fwk.run_score_plugins(CycleState(), pod_info(), snap.list())
    assert s is not None and s.message() == 'running Score plugins: plugin "A" failed with: bad node'
    fwk = new_framework(
        {"score": [Score("A", [], {}, normalize=lambda scores: Status.error("cannot"))]}, snapshot=snap
    )
    _, s = fwk.run_score_plugins(CycleState(), pod_info(), snap.list())
    assert (
        s is not None and s.message() == 'running Normalize on Score plugins: plugin "A" failed with: cannot'
    )
    _, s = fwk.score_matrix(CycleState(), pod_info(), snap, np.arange(1, dtype=np.intp))
    assert (
        s is not None and s.message() == 'running Normalize on Score plugins: plugin "A" failed with: cannot'
    )


def test_node_info_view() -> None:
    snap = snapshot_of("a", "b", "c")
    view = NodeInfoView(snap.node_info_list, [2, 0])
    assert len(view) == 2 and view[0].name == "c" and [n.name for n in view] == ["c", "a"]
    assert [n.name for n in view[1:]] == ["a"]


# ------------------------------------------------------------------------------------ Reserve


def test_reserve_stops_at_failure_and_unreserve_runs_in_reverse() -> None:
    log: Log = []
    fwk = new_framework(
        {"reserve": [Reserve("A", log), Reserve("B", log, Status.unschedulable("full")), Reserve("C", log)]}
    )
    s = fwk.run_reserve_plugins_reserve(CycleState(), pod_info(), "n1")
    assert s is not None and s.code == UNSCHED and s.plugin == "B"
    fwk.run_reserve_plugins_unreserve(CycleState(), pod_info(), "n1")
    assert log == ["Reserve:A", "Reserve:B", "Unreserve:C", "Unreserve:B", "Unreserve:A"]


def test_reserve_error_is_wrapped() -> None:
    fwk = new_framework({"reserve": [Reserve("A", [], Status.error("x"))]})
    s = fwk.run_reserve_plugins_reserve(CycleState(), pod_info(), "n1")
    assert s is not None and s.code == Code.ERROR and s.message() == 'running Reserve plugin "A": x'


# ------------------------------------------------------------------------------------ Permit


def test_permit_rejection_names_the_plugin_and_stops() -> None:
    log: Log = []
    fwk = new_framework({"permit": [Permit("A", log, Status.unschedulable("nope")), Permit("B", log)]})
    s = fwk.run_permit_plugins(CycleState(), pod_info(), "n1")
    assert s is not None and s.code == UNSCHED and s.plugin == "A"
    assert log == ["Permit:A"]


def test_permit_error_is_wrapped() -> None:
    fwk = new_framework({"permit": [Permit("A", [], Status.error("bad"))]})
    s = fwk.run_permit_plugins(CycleState(), pod_info(), "n1")
    assert s is not None and s.code == Code.ERROR and s.plugin == "A"
    assert s.message() == 'running Permit plugin "A": bad'


async def test_wait_on_permit_of_a_pod_that_is_not_waiting() -> None:
    fwk = new_framework({})
    assert not fwk.will_wait_on_permit(pod_info().pod)
    assert await fwk.wait_on_permit(pod_info()) is None


async def test_permit_wait_then_allowed_by_every_plugin() -> None:
    timers = FakeTimers()
    log: Log = []
    fwk = new_framework(
        {"permit": [Permit("A", log, Status(Code.WAIT), 10), Permit("B", log, Status(Code.WAIT), 20)]},
        timers=timers,
    )
    pi = pod_info("w1", "uid-w1")
    s = fwk.run_permit_plugins(CycleState(), pi, "n1")
    assert s is not None and s.code == Code.WAIT
    assert s.message() == 'one or more plugins asked to wait and no plugin rejected pod "w1"'
    assert fwk.will_wait_on_permit(pi.pod)
    wp = fwk.get_waiting_pod("uid-w1")
    assert wp is not None and sorted(wp.get_pending_plugins()) == ["A", "B"]
    waiter = asyncio.create_task(fwk.wait_on_permit(pi))
    await asyncio.sleep(0)
    wp.allow("A")
    await asyncio.sleep(0)
    assert not waiter.done()  # B still pending
    wp.allow("B")
    assert await waiter is None
    assert not fwk.will_wait_on_permit(pi.pod)  # removed from the map
    assert all(t.cancelled for t in timers.timers)


async def test_permit_wait_then_rejected() -> None:
    fwk = new_framework({"permit": [Permit("A", [], Status(Code.WAIT), 10)]}, timers=FakeTimers())
    pi = pod_info("w2", "uid-w2")
    fwk.run_permit_plugins(CycleState(), pi, "n1")
    waiter = asyncio.create_task(fwk.wait_on_permit(pi))
    await asyncio.sleep(0)
    wp = fwk.get_waiting_pod("uid-w2")
    assert wp is not None
    wp.reject("Gang", "the gang is incomplete")
    wp.allow("A")  # too late: the first verdict wins
    s = await waiter
    assert (
        s is not None and s.code == UNSCHED and s.plugin == "Gang" and s.reasons == ["the gang is incomplete"]
    )


async def test_permit_timeout_rejects_with_upstream_message_and_is_capped() -> None:
    timers = FakeTimers()
    fwk = new_framework(
        {"permit": [Permit("Slow", [], Status(Code.WAIT), 3600)]}, timers=timers, max_permit_timeout=90
    )
    pi = pod_info("w3", "uid-w3")
    fwk.run_permit_plugins(CycleState(), pi, "n1")
    assert [t.due for t in timers.timers] == [90]  # capped
    waiter = asyncio.create_task(fwk.wait_on_permit(pi))
    timers.advance(89)
    await asyncio.sleep(0)
    assert not waiter.done()
    timers.advance(1)
    s = await waiter
    assert s is not None and s.code == UNSCHED and s.plugin == "Slow"
    assert s.reasons == ["rejected due to timeout after waiting 1m30s at plugin Slow"]


async def test_reject_waiting_pod_and_verdict_before_wait() -> None:
    fwk = new_framework({"permit": [Permit("A", [], Status(Code.WAIT), 5)]}, timers=FakeTimers())
    pi = pod_info("w4", "uid-w4")
    fwk.run_permit_plugins(CycleState(), pi, "n1")
    assert fwk.reject_waiting_pod("uid-w4")  # e.g. the pod was deleted
    assert not fwk.reject_waiting_pod("unknown")
    s = await fwk.wait_on_permit(pi)  # the verdict was buffered
    assert s is not None and s.code == UNSCHED and s.reasons == ["removed"]


async def test_waiting_pod_allowed_from_another_thread() -> None:
    wp = WaitingPod(pod_info("t", "uid-t").pod, {"A": 5}, FakeTimers())
    loop = asyncio.get_running_loop()
    waiter = asyncio.create_task(wp.wait())
    await asyncio.sleep(0)
    await loop.run_in_executor(None, wp.allow, "A")
    assert await asyncio.wait_for(waiter, 5) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (10, "10s"), (1.5, "1.5s"), (90, "1m30s"), (900, "15m0s"), (3600, "1h0m0s"), (0.5, "500ms")],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


# ------------------------------------------------------------------------------------ binding


async def test_binding_cycle_order_and_bind_until_first_non_skip() -> None:
    log: Log = []
    skip = Binding("Skipper", log, Status(Code.SKIP))
    binder = Binding("Binder", log)
    never = Binding("Never", log)
    fwk = new_framework(
        {"preBind": [Binding("PB", log)], "bind": [skip, binder, never], "postBind": [Binding("Post", log)]}
    )
    state = CycleState()
    assert await fwk.run_pre_bind_plugins(state, pod_info(), "n1") is None
    assert await fwk.run_bind_plugins(state, pod_info(), "n1") is None
    await fwk.run_post_bind_plugins(state, pod_info(), "n1")
    assert log == ["PreBind:PB", "Bind:Skipper", "Bind:Binder", "PostBind:Post"]


async def test_bind_all_skip_and_errors() -> None:
    fwk = new_framework({"bind": [Binding("S", [], Status(Code.SKIP))]})
    s = await fwk.run_bind_plugins(CycleState(), pod_info(), "n1")
    assert s is not None and s.code == Code.SKIP
    fwk = new_framework({"bind": [Binding("E", [], Status.error("conflict"))]})
    s = await fwk.run_bind_plugins(CycleState(), pod_info(), "n1")
    assert s is not None and s.code == Code.ERROR and s.message() == 'running Bind plugin "E": conflict'


async def test_pre_bind_skip_set_is_honoured() -> None:
    log: Log = []
    fwk = new_framework({"preBind": [Binding("A", log), Binding("B", log)]})
    state = CycleState()
    state.skip_pre_bind_plugins = {"A"}
    assert await fwk.run_pre_bind_plugins(state, pod_info(), "n1") is None
    assert log == ["PreBind:B"]


async def test_handle_bind_uses_the_binder() -> None:
    bound: list[tuple[str, str]] = []

    async def binder(pod: pb.Pod, node: str) -> None:
        bound.append((pod.metadata.name, node))

    fwk = new_framework({}, binder=binder)
    await fwk.bind(pod_info("x").pod, "n9")
    assert bound == [("x", "n9")]
    with pytest.raises(RuntimeError):
        await new_framework({}).bind(pod_info().pod, "n1")


# ------------------------------------------------------------------------------------ queue


class Gate:
    def name(self) -> str:
        return "Gate"

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        return Status(UNRESOLVABLE, ["gated"]) if pod_info.pod.spec.scheduling_gates else None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE))]


def test_events_to_register_and_queue_helpers() -> None:
    log: Log = []
    fwk = new_framework(
        {
            "preEnqueue": [Gate()],
            "filter": [Filter("NoEvents", log)],
            "score": [Score("ScoreOnly", log, {})],
        }
    )
    events = fwk.events_to_register()
    assert set(events) == {"Gate", "NoEvents"}  # a score-only plugin rejects nothing
    assert [e.event for e in events["NoEvents"]] == list(ALL_EVENTS)
    hints = fwk.queueing_hints()
    assert hints["Gate"] == [(ClusterEvent(EventResource.POD, ActionType.UPDATE), None)]
    assert list(fwk.pre_enqueue_functions()) == ["Gate"]
    gated = make_pod().name("g").scheduling_gates(["x"]).obj()
    s = fwk.run_pre_enqueue_plugins(PodInfo(gated))
    assert s is not None and s.plugin == "Gate" and s.reasons == ["gated"]
    a = QueuedPodInfo(pod_info("a"), timestamp=1.0)
    b = QueuedPodInfo(pod_info("b"), timestamp=2.0)
    assert fwk.queue_sort_less(a, b) and not fwk.queue_sort_func()(b, a)


def test_profile_properties() -> None:
    fwk = new_framework({"filter": [Filter("F", [])]}, percentage_of_nodes_to_score=30)
    assert fwk.profile_name == "test-profile"
    assert fwk.percentage_of_nodes_to_score == 30
    assert fwk.has_filter_plugins() and not fwk.has_score_plugins() and not fwk.has_post_filter_plugins()
