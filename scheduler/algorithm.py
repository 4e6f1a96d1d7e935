"""The scheduling algorithm of one cycle: find the nodes that fit, score them, pick one
(upstream `pkg/scheduler/schedule_one.go`: schedulePod, findNodesThatFitPod,
findNodesThatPassFilters, numFeasibleNodesToFind, prioritizeNodes, selectHost). The `FitError`
and `Diagnosis` it raises are framework types (`scheduler.framework.types`, as upstream's
`pkg/scheduler/framework/types.go`).

As upstream:

* Filtering stops once `num_feasible_nodes_to_find` nodes passed: all nodes below 100, else the
  percentageOfNodesToScore of the profile (or the scheduler's), adaptive when 0:
  `50 - nodes/125` percent, at least 5 %, and never fewer than 100 nodes.
* The scan starts where the previous cycle's stopped (`AlgorithmState.next_start_node_index`),
  so every node gets its turn across pods.
* A pod with `status.nominatedNodeName` tries that node first.
* One feasible node: chosen without scoring (no PreScore/Score run). No Score plugins: every
  node scores 1.
* Among the nodes with the highest total score one is picked uniformly at random: the
  distribution of upstream's reservoir sampling, drawn with one number from a seedable RNG.

With extenders (`schedule_pod_with_extenders`, async: their calls are HTTP), as upstream: the
extenders' Filter runs on what passed the Filter plugins (the nominated node too), a rejection by
them adds "Extender" to the unschedulable plugins, Filter stops at one node only when neither a
Score plugin, an extender prioritizer nor an extender filter could use more, and their Prioritize
scores are added to the plugins' totals.

Upstream runs Filter and Score on 16 goroutines; kse scans sequentially (same results as upstream
with parallelism 1). This module calls one framework entry per extension point
(`run_filter_plugins_over`, `run_score_plugins_over`); whether those evaluate many nodes per
plugin call (the batch engine) or one node after the other (`Framework(batch=False)`) is the
framework's business, and both give identical results (tests check it).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from proto import kse_pb2 as pb
from scheduler.extender.http import ExtenderError
from scheduler.extender.types import MAX_EXTENDER_PRIORITY
from scheduler.framework.batch import ScoreMatrix
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import MAX_NODE_SCORE, NodePluginScores, PreFilterResult
from scheduler.framework.nodeinfo import NodeInfo, NodeInfoView, Snapshot
from scheduler.framework.runtime import Framework
from scheduler.framework.types import EXTENDER_NAME, Code, Diagnosis, FitError, PodInfo, Status

if TYPE_CHECKING:
    from scheduler.extender.http import HTTPExtender

log = logging.getLogger(__name__)

IntP = npt.NDArray[np.intp]

# Upstream constants (schedule_one.go).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


# ------------------------------------------------------------------------------------ types


class NoNodesAvailableError(Exception):
    """The snapshot has no nodes (upstream ErrNoNodesAvailable)."""

    def __init__(self) -> None:
        super().__init__("no nodes available to schedule pods")


class SchedulingError(Exception):
    """A plugin failed with an Error status during the algorithm; `status` is that status."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


@dataclass(frozen=True)
class ScheduleResult:
    """The outcome of `schedule_pod` (upstream ScheduleResult)."""

    suggested_host: str
    evaluated_nodes: int  # nodes filtered (passed or not)
    feasible_nodes: int  # nodes that passed


@dataclass
class AlgorithmState:
    """What the algorithm keeps across cycles, owned by the Scheduler: where the next node scan
    starts, the scheduler-wide percentageOfNodesToScore (a profile's own value wins), and the RNG
    of the tie-break (seed it for reproducible runs)."""

    percentage_of_nodes_to_score: int = 0
    next_start_node_index: int = 0
    rng: random.Random = field(default_factory=random.Random)


@dataclass
class FeasibleNodes:
    """The nodes that passed Filter, as indices of `snapshot.node_info_list` in scan order."""

    snapshot: Snapshot
    indices: IntP

    def __len__(self) -> int:
        return len(self.indices)

    def node_infos(self) -> list[NodeInfo]:
        infos = self.snapshot.node_info_list
        return [infos[i] for i in self.indices.tolist()]

    def names(self) -> list[str]:
        infos = self.snapshot.node_info_list
        return [infos[i].name for i in self.indices.tolist()]


# ------------------------------------------------------------------------------------ algorithm


def num_feasible_nodes_to_find(
    profile_percentage: int | None, global_percentage: int, num_all_nodes: int
) -> int:
    """How many feasible nodes to find before scoring (upstream numFeasibleNodesToFind)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    percentage = profile_percentage if profile_percentage is not None else global_percentage
    if percentage == 0:
        percentage = 50 - num_all_nodes // 125
        if percentage < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            percentage = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num_nodes = num_all_nodes * percentage // 100
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return MIN_FEASIBLE_NODES_TO_FIND
    return num_nodes


def schedule_pod(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    snapshot: Snapshot,
    alg: AlgorithmState | None = None,
) -> ScheduleResult:
    """Pick a node for the pod (upstream schedulePod). Raises NoNodesAvailableError, FitError
    (no node fits: run PostFilter and report it unschedulable) or SchedulingError (a plugin
    failed)."""
    alg = alg if alg is not None else AlgorithmState()
    if fwk.snapshot_shared_lister() is not snapshot:
        fwk.set_snapshot(snapshot)
    num_nodes = snapshot.num_nodes()
    if num_nodes == 0:
        raise NoNodesAvailableError()
    feasible, diagnosis = find_nodes_that_fit(fwk, state, pod_info, snapshot, alg)
    if len(feasible) == 0:
        raise FitError(pod_info.pod, num_nodes, diagnosis)
    if len(feasible) == 1:
        # Only one node fits: no need to score (upstream skips PreScore and Score too).
        return ScheduleResult(
            snapshot.node_info_list[int(feasible.indices[0])].name, 1 + len(diagnosis.node_to_status), 1
        )
    host = _prioritize_and_select(fwk, state, pod_info, feasible, alg.rng)
    return ScheduleResult(host, len(feasible) + len(diagnosis.node_to_status), len(feasible))


def find_nodes_that_fit(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    snapshot: Snapshot,
    alg: AlgorithmState,
) -> tuple[FeasibleNodes, Diagnosis]:
    """PreFilter, then Filter over the nodes (upstream findNodesThatFitPod). Advances
    `alg.next_start_node_index` by the number of nodes processed. Raises SchedulingError."""
    pre = _run_pre_filter(fwk, state, pod_info, snapshot)
    if pre.rejected:
        return FeasibleNodes(snapshot, np.zeros(0, np.intp)), pre.diagnosis
    if pod_info.pod.status.nominated_node_name:
        # Likely the only node that fits after a preemption: try it first.
        feasible = _evaluate_nominated_node(fwk, state, pod_info, snapshot, pre.diagnosis)
        if len(feasible):
            return feasible, pre.diagnosis
    feasible = _filter_nodes(fwk, state, pod_info, snapshot, pre, alg, want_one=not fwk.has_score_plugins())
    return feasible, pre.diagnosis


@dataclass
class _PreFilterOutcome:
    diagnosis: Diagnosis
    rejected: bool  # every node is out: PreFilter rejected the pod
    pre_res: PreFilterResult | None = None
    plugins_with_nodes: Collection[str] = ()


def _run_pre_filter(
    fwk: Framework, state: CycleState, pod_info: PodInfo, snapshot: Snapshot
) -> _PreFilterOutcome:
    diagnosis = Diagnosis()
    pre_res, s, plugins_with_nodes = fwk.run_pre_filter_plugins(state, pod_info)
    diagnosis.unschedulable_plugins = set(plugins_with_nodes)
    if s is not None and s.code != Code.SUCCESS:
        if not s.is_rejected():
            raise SchedulingError(s)
        # Every node gets the same status, so that preemption can handle them.
        diagnosis.absent_nodes_status = s
        diagnosis.pre_filter_msg = s.message()
        diagnosis.add_plugin_status(s)
        return _PreFilterOutcome(diagnosis, True)
    return _PreFilterOutcome(diagnosis, False, pre_res, plugins_with_nodes)


def _filter_nodes(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    snapshot: Snapshot,
    pre: _PreFilterOutcome,
    alg: AlgorithmState,
    *,
    want_one: bool,
) -> FeasibleNodes:
    """The nodes PreFilter left (all, or its PreFilterResult's), through the Filter plugins; stops
    at one feasible node when `want_one` (nothing to rank them by). Raises SchedulingError."""
    all_nodes = snapshot.node_info_list
    pre_res, diagnosis = pre.pre_res, pre.diagnosis
    if pre_res is None or pre_res.all_nodes():
        order = np.arange(len(all_nodes), dtype=np.intp)
    else:
        # PreFilterResult may name nodes that do not exist; only those in the snapshot count.
        index = snapshot.index_of
        existing = []
        for name in pre_res.node_names or ():
            try:
                i = index(name)
            except KeyError:
                continue
            if all_nodes[i].node is not None:
                existing.append(i)
        order = np.array(sorted(existing), dtype=np.intp)
        diagnosis.absent_nodes_status = Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            [f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(pre.plugins_with_nodes))}]"],
        )
    feasible, error = _find_nodes_that_pass_filters(
        fwk, state, pod_info, snapshot, diagnosis, order, alg, want_one=want_one
    )
    # Always advance the start index, even on error, so that every node gets its turn.
    processed = len(feasible) + len(diagnosis.node_to_status)
    if all_nodes:
        alg.next_start_node_index = (alg.next_start_node_index + processed) % len(all_nodes)
    if error is not None:
        raise SchedulingError(error)
    return feasible


def _evaluate_nominated_node(
    fwk: Framework, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
) -> FeasibleNodes:
    name = pod_info.pod.status.nominated_node_name
    try:
        i = snapshot.index_of(name)
    except KeyError:
        return FeasibleNodes(snapshot, np.zeros(0, np.intp))
    node_info = snapshot.node_info_list[i]
    status = fwk.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
    if status is None or status.code == Code.SUCCESS:
        return FeasibleNodes(snapshot, np.array([i], dtype=np.intp))
    if status.code == Code.ERROR:
        return FeasibleNodes(snapshot, np.zeros(0, np.intp))  # upstream logs it and goes on
    diagnosis.node_to_status[name] = status
    diagnosis.add_plugin_status(status)
    return FeasibleNodes(snapshot, np.zeros(0, np.intp))


def _find_nodes_that_pass_filters(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    snapshot: Snapshot,
    diagnosis: Diagnosis,
    order: IntP,
    alg: AlgorithmState,
    *,
    want_one: bool,
) -> tuple[FeasibleNodes, Status | None]:
    """Upstream findNodesThatPassFilters: filter `order` (snapshot indices) starting at
    `alg.next_start_node_index`, until enough nodes are feasible."""
    num_all = len(order)
    num_to_find = num_feasible_nodes_to_find(
        fwk.percentage_of_nodes_to_score, alg.percentage_of_nodes_to_score, num_all
    )
    if want_one:
        num_to_find = 1  # nothing to rank them by: the first that fits will do
    if num_all == 0:
        return FeasibleNodes(snapshot, order), None
    start = alg.next_start_node_index % num_all
    rotated = np.concatenate((order[start:], order[:start])) if start else order
    if not fwk.has_filter_plugins():
        return FeasibleNodes(snapshot, rotated[:num_to_find]), None

    outcome = fwk.run_filter_plugins_over(state, pod_info, snapshot, rotated, num_to_find)
    infos = snapshot.node_info_list
    node_to_status = diagnosis.node_to_status
    recorded: set[int] = set()  # nodes rejected for the same reasons share a Status object
    for i, status in outcome.rejected:
        node_to_status[infos[i].name] = status
        if id(status) not in recorded:
            recorded.add(id(status))
            diagnosis.add_plugin_status(status)
    return FeasibleNodes(snapshot, outcome.feasible), outcome.error


def prioritize_nodes(
    fwk: Framework, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo] | FeasibleNodes
) -> list[NodePluginScores]:
    """PreScore and Score the nodes (upstream prioritizeNodes); without Score plugins every node
    scores 1. Raises SchedulingError."""
    if isinstance(nodes, FeasibleNodes):
        snapshot, indices = nodes.snapshot, nodes.indices
    else:
        snapshot = _snapshot_of(fwk)
        indices = np.array([snapshot.index_of(ni.name) for ni in nodes], dtype=np.intp)
    names = [snapshot.node_info_list[i].name for i in indices.tolist()]
    if not fwk.has_score_plugins():
        return [NodePluginScores(name, [], 1) for name in names]
    matrix = score_feasible(fwk, state, pod_info, FeasibleNodes(snapshot, indices))
    return matrix.node_plugin_scores(names)


def score_feasible(
    fwk: Framework, state: CycleState, pod_info: PodInfo, feasible: FeasibleNodes
) -> ScoreMatrix:
    """PreScore and Score over the feasible nodes, as a ScoreMatrix (the fast path of
    prioritize_nodes; also what `kse what-if` shows). Raises SchedulingError."""
    snapshot, indices = feasible.snapshot, feasible.indices
    view = NodeInfoView(snapshot.node_info_list, indices.tolist())
    s = fwk.run_pre_score_plugins(state, pod_info, view)
    if s is not None and s.code != Code.SUCCESS:
        raise SchedulingError(s)
    matrix, s = fwk.run_score_plugins_over(state, pod_info, snapshot, indices)
    if matrix is None:
        assert s is not None
        raise SchedulingError(s)
    return matrix


def _prioritize_and_select(
    fwk: Framework, state: CycleState, pod_info: PodInfo, feasible: FeasibleNodes, rng: random.Random
) -> str:
    infos = feasible.snapshot.node_info_list
    if not fwk.has_score_plugins():
        return infos[int(feasible.indices[_pick_max(np.ones(len(feasible), np.int64), rng)])].name
    matrix = score_feasible(fwk, state, pod_info, feasible)
    return infos[int(feasible.indices[_pick_max(matrix.totals, rng)])].name


def _pick_max(totals: npt.NDArray[np.int64], rng: random.Random) -> int:
    """Position of a highest total, uniformly at random among the ties."""
    best = np.flatnonzero(totals == totals.max())
    if len(best) == 1:
        return int(best[0])
    return int(best[rng.randrange(len(best))])


def select_host(node_scores: Sequence[NodePluginScores], rng: random.Random | None = None) -> str:
    """The node with the highest total score; ties broken uniformly at random (upstream
    selectHost's reservoir sampling gives each of k tied nodes probability 1/k; this draws one
    number). Raises ValueError on an empty list, as upstream errors on "empty priorityList"."""
    if not node_scores:
        raise ValueError("empty priorityList")
    totals = np.fromiter((ns.total_score for ns in node_scores), np.int64, len(node_scores))
    return node_scores[_pick_max(totals, rng if rng is not None else random.Random())].name


def _snapshot_of(fwk: Framework) -> Snapshot:
    lister = fwk.snapshot_shared_lister()
    if not isinstance(lister, Snapshot):
        raise TypeError("prioritize_nodes needs the framework's snapshot to be a Snapshot")
    return lister


def diagnosis_statuses(diagnosis: Diagnosis, node_names: Sequence[str]) -> Mapping[str, Status]:
    """The status of each of `node_names` that did not pass (explicit or absent)."""
    return {name: diagnosis.status_of(name) for name in node_names}


# ------------------------------------------------------------------------------------ extenders
#
# Upstream calls extenders inside schedulePod (schedule_one.go): findNodesThatPassExtenders after
# the Filter plugins (also for the nominated node), and the extenders' Prioritize beside the Score
# plugins in prioritizeNodes. Their calls are HTTP, so this path is async; without extenders the
# scheduler keeps the synchronous `schedule_pod` above.

# upstream fwk.MaxNodeScore / extenderv1.MaxExtenderPriority
EXTENDER_SCORE_SCALE = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY


class ExtenderCallError(SchedulingError):
    """A non-ignorable extender failed; the message is its error, as upstream reports it."""

    def __init__(self, message: str) -> None:
        super().__init__(Status(Code.ERROR, [message]))


async def schedule_pod_with_extenders(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    snapshot: Snapshot,
    alg: AlgorithmState,
    extenders: Sequence[HTTPExtender],
    *,
    on_prioritizing: Callable[[int], None] | None = None,
) -> ScheduleResult:
    """`schedule_pod` with extenders (upstream schedulePod with sched.Extenders).
    `on_prioritizing(+1/-1)` is told when an extender's Prioritize call starts and ends (the
    ``scheduler_goroutines{operation="prioritizing_extender"}`` gauge)."""
    if not extenders:
        return schedule_pod(fwk, state, pod_info, snapshot, alg)
    if fwk.snapshot_shared_lister() is not snapshot:
        fwk.set_snapshot(snapshot)
    num_nodes = snapshot.num_nodes()
    if num_nodes == 0:
        raise NoNodesAvailableError()
    feasible, diagnosis = await _find_nodes_that_fit_with_extenders(
        fwk, state, pod_info, snapshot, alg, extenders
    )
    if len(feasible) == 0:
        raise FitError(pod_info.pod, num_nodes, diagnosis)
    evaluated = len(feasible) + len(diagnosis.node_to_status)
    if len(feasible) == 1:
        return ScheduleResult(snapshot.node_info_list[int(feasible.indices[0])].name, evaluated, 1)
    totals = await _prioritize_with_extenders(fwk, state, pod_info, feasible, extenders, on_prioritizing)
    host = feasible.snapshot.node_info_list[int(feasible.indices[_pick_max(totals, alg.rng)])].name
    return ScheduleResult(host, evaluated, len(feasible))


async def _find_nodes_that_fit_with_extenders(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    snapshot: Snapshot,
    alg: AlgorithmState,
    extenders: Sequence[HTTPExtender],
) -> tuple[FeasibleNodes, Diagnosis]:
    """Upstream findNodesThatFitPod with extenders: as `find_nodes_that_fit`, each set of nodes
    that passed the Filter plugins then goes through the extenders' Filter."""
    pre = _run_pre_filter(fwk, state, pod_info, snapshot)
    diagnosis = pre.diagnosis
    if pre.rejected:
        return FeasibleNodes(snapshot, np.zeros(0, np.intp)), diagnosis
    if pod_info.pod.status.nominated_node_name:
        feasible = _evaluate_nominated_node(fwk, state, pod_info, snapshot, diagnosis)
        feasible = await find_nodes_that_pass_extenders(extenders, pod_info.pod, feasible, diagnosis)
        if len(feasible):
            return feasible, diagnosis
    has_filters = any(e.is_filter() for e in extenders)
    has_scoring = fwk.has_score_plugins() or any(e.is_prioritizer() for e in extenders)
    feasible = _filter_nodes(
        fwk, state, pod_info, snapshot, pre, alg, want_one=not (has_filters or has_scoring)
    )
    after = await find_nodes_that_pass_extenders(extenders, pod_info.pod, feasible, diagnosis)
    if len(after) != len(feasible):
        # Extenders have no queueing hints: any cluster event may help a pod they rejected.
        diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
    return after, diagnosis


async def find_nodes_that_pass_extenders(
    extenders: Sequence[HTTPExtender], pod: pb.Pod, feasible: FeasibleNodes, diagnosis: Diagnosis
) -> FeasibleNodes:
    """Upstream findNodesThatPassExtenders: the interested extenders one after the other, each
    given what the previous left. The nodes an extender rejects get its message as their status
    (Unschedulable, or UnschedulableAndUnresolvable for failedAndUnresolvableNodes, which wins).
    An extender that fails is skipped when ignorable; otherwise ExtenderCallError."""
    snapshot = feasible.snapshot
    infos = snapshot.node_info_list
    for extender in extenders:
        if len(feasible) == 0:
            break
        if not extender.is_interested(pod):
            continue
        nodes = [n for n in (infos[i].node for i in feasible.indices.tolist()) if n is not None]
        try:
            passed, failed, unresolvable = await extender.filter(pod, nodes)
        except ExtenderError as e:
            if extender.is_ignorable():
                log.info(
                    "Skipping extender %s as it returned error and has ignorable flag set: %s",
                    extender.name(),
                    e,
                )
                continue
            raise ExtenderCallError(str(e)) from None
        for name, msg in unresolvable.items():
            diagnosis.node_to_status[name] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [msg])
        for name, msg in failed.items():
            if name in unresolvable:
                continue  # failedAndUnresolvableNodes takes precedence
            diagnosis.node_to_status[name] = Status(Code.UNSCHEDULABLE, [msg])
        keep = set(passed)
        feasible = FeasibleNodes(
            snapshot, np.array([i for i in feasible.indices.tolist() if infos[i].name in keep], dtype=np.intp)
        )
    return feasible


async def _prioritize_with_extenders(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    feasible: FeasibleNodes,
    extenders: Sequence[HTTPExtender],
    on_prioritizing: Callable[[int], None] | None,
) -> npt.NDArray[np.int64]:
    """Upstream prioritizeNodes with extenders: the plugins' weighted totals (PreScore and Score
    run even without Score plugins, as upstream does once there are extenders), plus each
    interested extender's score x weight x (MaxNodeScore / MaxExtenderPriority). Extenders are
    called concurrently; one that fails gives no score (upstream ignores Prioritize errors)."""
    totals = score_feasible(fwk, state, pod_info, feasible).totals.astype(np.int64, copy=True)
    infos = feasible.snapshot.node_info_list
    positions = {infos[i].name: k for k, i in enumerate(feasible.indices.tolist())}
    nodes = [n for n in (infos[i].node for i in feasible.indices.tolist()) if n is not None]
    pod = pod_info.pod

    async def one(extender: HTTPExtender) -> tuple[list[tuple[str, int]], int] | None:
        if on_prioritizing is not None:
            on_prioritizing(1)
        try:
            return await extender.prioritize(pod, nodes)
        except ExtenderError as e:
            log.debug(
                "Failed to run extender's priority function. No score given by this extender. "
                "extender=%s pod=%s/%s: %s",
                extender.name(),
                pod.metadata.namespace,
                pod.metadata.name,
                e,
            )
            return None
        finally:
            if on_prioritizing is not None:
                on_prioritizing(-1)

    interested = [e for e in extenders if e.is_interested(pod)]
    for answer in await asyncio.gather(*(one(e) for e in interested)):
        if answer is None:
            continue
        scores, weight = answer
        for host, score in scores:
            k = positions.get(host)
            if k is not None:  # upstream keeps scores only for nodes it sent
                totals[k] += score * weight * EXTENDER_SCORE_SCALE
    return totals
