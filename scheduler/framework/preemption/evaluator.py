"""The preemption Evaluator (upstream ``pkg/scheduler/framework/preemption/preemption.go``).

``Evaluator.preempt`` is what a preemption PostFilter plugin runs when no node fits a pod:

0. the newest copy of the pod, from the executor's pod lookup (the informer);
1. the pod must be eligible (``PreemptionInterface.pod_eligible_to_preempt_others``);
2. candidates: the nodes whose Filter status is Unschedulable (UnschedulableAndUnresolvable means
   removing pods cannot help), dry-run from a random offset (``get_offset_and_num_candidates``):
   on a copy of the node and of the cycle state, ``select_victims_on_node`` finds the fewest
   victims. The scan stops once it has at least one candidate that violates no
   PodDisruptionBudget and ``num_candidates`` candidates in all; candidates that violate no PDB
   come first;
3. the extenders with a preemptVerb narrow the candidates (``preempt_async``, which a scheduler
   with extenders runs: their calls are HTTP);
4. the best candidate (``pick_one_node_for_preemption``);
5. its preparation, asynchronously as upstream's SchedulerAsyncPreemption (on by default since
   v1.33): the lower-priority pods nominated to that node lose their nomination, every victim
   gets the DisruptionTarget condition and is deleted (all but the last at once, then the last),
   through the ``PreemptionExecutor``. Meanwhile ``is_pod_running_preemption`` is True for the
   preemptor, so the plugin's PreEnqueue keeps it out of activeQ until the work is done (or the
   last victim is already being deleted).

No candidate: a PostFilterResult that clears the pod's nominatedNodeName, and an Unschedulable
status whose message is a FitError over the dry run's statuses ("0/5 nodes are available: ...",
nodes not dry-run: "Preemption is not helpful for scheduling").

Without an executor (``kse what-if``, unit tests) the Evaluator computes and nominates, and
deletes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kse.objects.meta import uid_key
from proto import kse_pb2 as pb
from scheduler.extender.http import ExtenderError, HTTPExtender
from scheduler.extender.preemption import process_preemption
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import PostFilterResult, SharedLister
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.plugins.helper.priority import pod_priority
from scheduler.framework.types import Code, Diagnosis, FitError, PodInfo, Status

from .util import earliest_pod_start_time

log = logging.getLogger(__name__)

MAX_INT32 = 2**31 - 1
MIN_INT64 = -(2**63)
NOT_HELPFUL = "Preemption is not helpful for scheduling"
# The status of a node the PostFilter statuses do not name (upstream NewDefaultNodeToStatus).
ABSENT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


@dataclass
class Candidate:
    """A node where the preemptor would fit once `victims` are gone (upstream Candidate with
    extenderv1.Victims): victims in decreasing importance, and how many of them violate a PDB."""

    name: str
    victims: list[pb.Pod] = field(default_factory=list)
    num_pdb_violations: int = 0


@dataclass
class PreemptionOutcome:
    """What the last `preempt` found: every candidate of the dry run and the chosen node
    ("" when none): what `kse what-if` reports."""

    candidates: list[Candidate] = field(default_factory=list)
    chosen: Candidate | None = None


ScoreFunc = Callable[[str], int]


@dataclass
class _Found:
    """What steps 0-2 of Preempt hand to the rest: the newest preemptor and its candidates."""

    pod: pb.Pod
    executor: PreemptionExecutor | None
    candidates: list[Candidate]


@runtime_checkable
class PreemptionInterface(Protocol):
    """What a preemption plugin plugs into the Evaluator (upstream preemption.Interface)."""

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]: ...

    def pod_eligible_to_preempt_others(
        self, pod: pb.Pod, nominated_node_status: Status | None
    ) -> tuple[bool, str]: ...

    def select_victims_on_node(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_info: NodeInfo,
        pdbs: Sequence[pb.PodDisruptionBudget],
    ) -> tuple[list[pb.Pod], int, Status | None]: ...

    def ordered_score_funcs(self, nodes_to_victims: Mapping[str, Candidate]) -> list[ScoreFunc] | None: ...

    def victim_selector(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status] | None = None
    ) -> (
        Callable[[NodeInfo, Sequence[pb.PodDisruptionBudget]], tuple[list[pb.Pod], int, Status | None]] | None
    ):
        """`select_victims_on_node` for this cycle that needs no copy of the node or the state
        (it changes neither), or None: the dry run then copies both for every node."""
        ...


@runtime_checkable
class PreemptionExecutor(Protocol):
    """The API side of preemption, given by the scheduler (upstream: the handle's ClientSet,
    informers, event recorder, and the queue's Activate)."""

    def pod_disruption_budgets(self) -> Sequence[pb.PodDisruptionBudget]: ...

    def get_pod(self, namespace: str, name: str) -> pb.Pod | None: ...

    async def preempt_pod(self, node_name: str, preemptor: pb.Pod, victim: pb.Pod, plugin: str) -> None:
        """Reject the victim if it waits at Permit; else set its DisruptionTarget condition and
        delete it (a victim already gone is fine). Then the Preempted event. Raises on failure."""
        ...

    async def clear_nominated_node_name(self, pods: Sequence[pb.Pod]) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run `coro` as a task of the current term."""
        ...

    def activate(self, pods: Sequence[pb.Pod]) -> None: ...


@runtime_checkable
class PreemptionHandle(Protocol):
    """What the Evaluator and the plugin use of the framework (upstream fwk.Handle)."""

    def snapshot_shared_lister(self) -> SharedLister: ...

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None: ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def preemption_executor(self) -> PreemptionExecutor | None: ...

    def extenders(self) -> Sequence[HTTPExtender]: ...


class Evaluator:
    """Upstream preemption.Evaluator (see the module doc)."""

    def __init__(self, plugin_name: str, handle: PreemptionHandle, interface: PreemptionInterface) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.interface = interface
        # Preemptors whose victims are being deleted, and the last victim each waits for.
        self._preempting: set[str] = set()
        self._last_victim: dict[str, tuple[str, str]] = {}
        self.last_outcome: PreemptionOutcome | None = None
        # PDBs used without an executor (kse what-if sets them from the cluster file).
        self.pdbs: Sequence[pb.PodDisruptionBudget] = ()

    # ------------------------------------------------------------------ async state

    def is_pod_running_preemption(self, pod_uid: str) -> bool:
        """Upstream IsPodRunningPreemption: the preemption of this pod has not finished, unless
        only its last victim is left and that one is already gone or being deleted."""
        if pod_uid not in self._preempting:
            return False
        last = self._last_victim.get(pod_uid)
        if last is None:
            return True
        executor = self.handle.preemption_executor()
        victim = executor.get_pod(*last) if executor is not None else None
        if victim is None or victim.metadata.deletion_timestamp:
            return False
        return True

    # ------------------------------------------------------------------ Preempt

    def preempt(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Upstream Evaluator.Preempt: (result, status) as documented there: (None, Error) a
        transient error; (None, Unschedulable) not eligible, nomination unchanged;
        (PostFilterResult(""), Unschedulable) preemption cannot help, nomination cleared;
        (PostFilterResult(node), None) nominated to `node`, victims being deleted.

        Without extenders: a scheduler with a preempting extender runs `preempt_async`."""
        found = self._find(state, pod_info, node_to_status)
        if isinstance(found, tuple):
            return found
        return self._choose(found)

    async def preempt_async(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """`preempt` with step 3: the extenders' preemptVerb narrows the candidates (upstream
        callExtenders) before the best one is chosen. An extender's failure that is not
        ignorable is an Error status, as upstream's AsStatus(err)."""
        found = self._find(state, pod_info, node_to_status)
        if isinstance(found, tuple):
            return found
        try:
            found.candidates = await self.call_extenders(found.pod, found.candidates)
        except ExtenderError as e:
            return None, Status(Code.ERROR, [str(e)], err=e)
        return self._choose(found)

    async def call_extenders(self, pod: pb.Pod, candidates: Sequence[Candidate]) -> list[Candidate]:
        """Upstream callExtenders: the candidates once every preempting extender interested in
        the pod had its say, in the dry run's order (upstream rebuilds them from a map, in no
        order; SelectCandidate decides either way). Raises ExtenderError."""
        extenders = self.handle.extenders()
        if not extenders or not candidates:
            return list(candidates)
        lister = self.handle.snapshot_shared_lister().node_infos()

        def pods_on_node(name: str) -> list[pb.Pod] | None:
            try:
                return [pi.pod for pi in lister.get(name).pods]
            except KeyError:
                return None

        victims = {c.name: (list(c.victims), c.num_pdb_violations) for c in candidates}
        narrowed = await process_preemption(extenders, pod, victims, pods_on_node)
        order = {c.name: i for i, c in enumerate(candidates)}
        names = sorted(narrowed, key=lambda name: order.get(name, len(order)))
        return [Candidate(name, list(narrowed[name][0]), narrowed[name][1]) for name in names]

    def _find(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status]
    ) -> _Found | tuple[PostFilterResult | None, Status | None]:
        """Steps 0-2 of Preempt: the candidates, or the answer when there are none."""
        self.last_outcome = PreemptionOutcome()
        executor = self.handle.preemption_executor()
        pod = pod_info.pod
        if executor is not None:
            latest = executor.get_pod(pod.metadata.namespace, pod.metadata.name)
            if latest is None:
                return None, Status(
                    Code.ERROR, [f'pod "{pod.metadata.namespace}/{pod.metadata.name}" not found']
                )
            pod = latest

        nominated = pod.status.nominated_node_name
        nominated_status = (node_to_status.get(nominated) or ABSENT) if nominated else None
        ok, msg = self.interface.pod_eligible_to_preempt_others(pod, nominated_status)
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, [msg])

        all_nodes = list(self.handle.snapshot_shared_lister().node_infos().list())
        if not all_nodes:
            return None, Status(Code.ERROR, ["no nodes available"])
        candidates, statuses, errors = self.find_candidates(state, pod_info, all_nodes, node_to_status)
        if errors and not candidates:
            return None, Status(Code.ERROR, ["; ".join(s.message() for s in errors)])
        self.last_outcome.candidates = candidates
        if not candidates:
            diagnosis = Diagnosis(
                node_to_status=statuses,
                absent_nodes_status=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NOT_HELPFUL]),
            )
            return PostFilterResult(""), Status(
                Code.UNSCHEDULABLE, [str(FitError(pod, len(all_nodes), diagnosis))]
            )
        return _Found(pod, executor, candidates)

    def _choose(self, found: _Found) -> tuple[PostFilterResult | None, Status | None]:
        """Steps 4-5 of Preempt: the best candidate, nominated, its victims' deletion started."""
        best = self.select_candidate(found.candidates)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, ["no candidate node for preemption"])
        assert self.last_outcome is not None
        self.last_outcome.chosen = best
        if found.executor is not None:
            self.prepare_candidate_async(found.executor, best, found.pod)
        return PostFilterResult(best.name), None

    def find_candidates(
        self,
        state: CycleState,
        pod_info: PodInfo,
        all_nodes: Sequence[NodeInfo],
        node_to_status: Mapping[str, Status],
    ) -> tuple[list[Candidate], dict[str, Status], list[Status]]:
        """Upstream findCandidates: the nodes whose rejection was Unschedulable, dry-run."""
        potential = [ni for ni in all_nodes if _code(node_to_status.get(ni.name)) == Code.UNSCHEDULABLE]
        if not potential:
            return [], {}, []
        executor = self.handle.preemption_executor()
        pdbs = list(executor.pod_disruption_budgets()) if executor is not None else list(self.pdbs)
        offset, num = self.interface.get_offset_and_num_candidates(len(potential))
        return self.dry_run_preemption(
            state, pod_info, potential, pdbs, offset, num, node_to_status=node_to_status
        )

    def dry_run_preemption(
        self,
        state: CycleState,
        pod_info: PodInfo,
        potential_nodes: Sequence[NodeInfo],
        pdbs: Sequence[pb.PodDisruptionBudget],
        offset: int,
        num_candidates: int,
        *,
        node_to_status: Mapping[str, Status] | None = None,
    ) -> tuple[list[Candidate], dict[str, Status], list[Status]]:
        """Upstream DryRunPreemption, sequentially: nodes from `offset` (wrapping) until there is
        a candidate violating no PDB and `num_candidates` candidates in all. Returns (candidates
        violating no PDB then the others, the statuses of the nodes that are no candidate, the
        Error statuses met). `node_to_status`: this cycle's Filter statuses, if known (the
        copy-free dry run uses them to skip plugins a node already passed)."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        errors: list[Status] = []
        n = len(potential_nodes)
        without_copies = self.interface.victim_selector(state, pod_info, node_to_status)
        for i in range(n):
            node_info = potential_nodes[(offset + i) % n]
            if without_copies is not None:
                victims, num_violations, status = without_copies(node_info, pdbs)
            else:
                victims, num_violations, status = self.interface.select_victims_on_node(
                    state.clone(), pod_info, node_info.clone(), pdbs
                )
            name = node_info.name
            if (status is None or status.code == Code.SUCCESS) and victims:
                c = Candidate(name, victims, num_violations)
                bucket = non_violating if num_violations == 0 else violating
                if len(bucket) < num_candidates:
                    bucket.append(c)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if status is None or status.code == Code.SUCCESS:
                status = Status(Code.ERROR, [f'expected at least one victim pod on node "{name}"'])
            if status.code == Code.ERROR:
                errors.append(status)
            statuses[name] = status
        return non_violating + violating, statuses, errors

    def select_candidate(self, candidates: Sequence[Candidate]) -> Candidate | None:
        """Upstream SelectCandidate."""
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        by_node = {c.name: c for c in candidates}
        funcs = self.interface.ordered_score_funcs(by_node)
        name = pick_one_node_for_preemption(by_node, funcs)
        return by_node.get(name, candidates[0])

    # ------------------------------------------------------------------ prepare

    def prepare_candidate_async(self, executor: PreemptionExecutor, c: Candidate, pod: pb.Pod) -> None:
        """Upstream prepareCandidateAsync: the API calls run as a task; the preemptor is held
        out of activeQ meanwhile (`is_pod_running_preemption`)."""
        victims = [v for v in c.victims if not v.metadata.deletion_timestamp]
        if not victims:
            return
        uid = uid_key(pod)
        nominated = self.lower_priority_nominated_pods(pod, c.name)
        self._preempting.add(uid)
        executor.spawn(self._prepare(executor, c.name, pod, victims, nominated), f"preempt-{uid}")

    async def _prepare(
        self,
        executor: PreemptionExecutor,
        node_name: str,
        pod: pb.Pod,
        victims: list[pb.Pod],
        nominated: list[pb.Pod],
    ) -> None:
        uid = uid_key(pod)
        ok = True
        try:
            if nominated:
                try:
                    await executor.clear_nominated_node_name(nominated)
                except Exception as e:
                    ok = False  # not critical: go on with the victims
                    log.warning("clearing nominatedNodeName of lower-priority pods on %s: %s", node_name, e)
            preempt_last = True
            if len(victims) > 1:
                results = await asyncio.gather(
                    *(self._preempt(executor, node_name, pod, v) for v in victims[:-1]),
                    return_exceptions=True,
                )
                failures = [r for r in results if isinstance(r, BaseException)]
                if failures:
                    ok = preempt_last = False
                    log.warning(
                        "preemption by %s on %s failed: %s", pod.metadata.name, node_name, failures[0]
                    )
            if preempt_last:
                last = victims[-1]
                self._last_victim[uid] = (last.metadata.namespace, last.metadata.name)
                try:
                    await self._preempt(executor, node_name, pod, last)
                except Exception as e:
                    ok = False
                    log.warning("preemption by %s on %s failed: %s", pod.metadata.name, node_name, e)
        finally:
            self._preempting.discard(uid)
            self._last_victim.pop(uid, None)
        if not ok:
            # The preemptor may be stuck in unschedulablePods otherwise (upstream Activate).
            executor.activate([pod])

    def _preempt(
        self, executor: PreemptionExecutor, node: str, pod: pb.Pod, victim: pb.Pod
    ) -> Awaitable[None]:
        return executor.preempt_pod(node, pod, victim, self.plugin_name)

    def lower_priority_nominated_pods(self, pod: pb.Pod, node_name: str) -> list[pb.Pod]:
        """Upstream getLowerPriorityNominatedPods."""
        priority = pod_priority(pod)
        return [
            pi.pod for pi in self.handle.nominated_pods_for_node(node_name) if pod_priority(pi.pod) < priority
        ]


def last_outcomes(plugins: Mapping[str, Any], names: Sequence[str]) -> list[tuple[str, PreemptionOutcome]]:
    """(plugin name, what its last `preempt` found) for the named plugins that run an Evaluator:
    what the scheduler's metrics and `kse what-if` report."""
    out: list[tuple[str, PreemptionOutcome]] = []
    for name in names:
        evaluator = getattr(plugins.get(name), "evaluator", None)
        if isinstance(evaluator, Evaluator) and evaluator.last_outcome is not None:
            out.append((name, evaluator.last_outcome))
    return out


def _code(status: Status | None) -> Code:
    """A node missing from the statuses was rejected for every pod (upstream NodeToStatus's
    default absent status, UnschedulableAndUnresolvable)."""
    return (status or ABSENT).code


def pick_one_node_for_preemption(
    nodes_to_victims: Mapping[str, Candidate], score_funcs: Sequence[ScoreFunc] | None = None
) -> str:
    """Upstream pickOneNodeForPreemption: each score function keeps the nodes with its highest
    score; the first that leaves one node decides. Default order: fewest PDB violations, lowest
    highest-victim priority, smallest sum of victim priorities (each shifted by 2^31 so that
    negative priorities add up sensibly), fewest victims, latest start among the
    highest-priority victims; then the first node (in candidate order)."""
    if not nodes_to_victims:
        return ""
    candidates = list(nodes_to_victims)
    if not score_funcs:
        now = time.time()  # victims not started yet count as starting now, all at the same now

        def fewest_pdb_violations(node: str) -> int:
            return -nodes_to_victims[node].num_pdb_violations

        def lowest_highest_priority(node: str) -> int:
            return -pod_priority(nodes_to_victims[node].victims[0])

        def smallest_priority_sum(node: str) -> int:
            return -sum(pod_priority(p) + MAX_INT32 + 1 for p in nodes_to_victims[node].victims)

        def fewest_victims(node: str) -> int:
            return -len(nodes_to_victims[node].victims)

        def latest_start_time(node: str) -> int:
            t = earliest_pod_start_time(nodes_to_victims[node].victims, now)
            if t is None:
                return MIN_INT64
            return int(t * 1e9)

        score_funcs = [
            fewest_pdb_violations,
            lowest_highest_priority,
            smallest_priority_sum,
            fewest_victims,
            latest_start_time,
        ]
    for f in score_funcs:
        best: list[str] = []
        max_score = MIN_INT64 - 1
        for node in candidates:
            score = f(node)
            if score > max_score:
                max_score = score
                best = []
            if score == max_score:
                best.append(node)
        if len(best) == 1:
            return best[0]
        candidates = best
    return candidates[0]


def default_offset_rand(rng: random.Random) -> Callable[[int], int]:
    """Upstream getOffsetRand (rand.Int31n): a uniform offset in [0, n)."""
    return lambda n: rng.randrange(n) if n > 0 else 0
