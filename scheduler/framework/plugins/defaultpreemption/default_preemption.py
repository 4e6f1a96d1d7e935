"""DefaultPreemption: the PostFilter plugin that preempts lower-priority pods (upstream
``plugins/defaultpreemption/default_preemption.go``), on the Evaluator of
``scheduler.framework.preemption``.

* Victims on a node (``select_victims_on_node``): every pod of lower priority is removed (with
  the PreFilter extensions' RemovePod); if the preemptor still does not fit (Filter with the
  nominated pods), the node is no candidate. Otherwise the victims are reprieved one by one,
  most important first (higher priority, then earlier start), the ones whose eviction would
  violate a PodDisruptionBudget before the others: a reprieved pod is added back and stays if
  the preemptor still fits.
* Eligibility: ``preemptionPolicy: Never`` never preempts; a pod whose nominated node still has a
  victim terminating by preemption waits for it (unless that node is now
  UnschedulableAndUnresolvable for it).
* Candidates dry-run: ``max(numNodes * minCandidateNodesPercentage / 100,
  minCandidateNodesAbsolute)``, at most numNodes, from a random offset.
* PreEnqueue: a pod whose victims are still being deleted (async preemption) stays out of
  activeQ; the deletions of the victims requeue it through the plugins that rejected it.
* The status message gets the "preemption: " prefix, as upstream's PostFilter.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from kse.objects.labels import SelectorError
from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import ClusterEventWithHint, FrameworkHandle, PostFilterResult
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.plugins.defaultpreemption.victims import (
    NO_VICTIMS,
    FilterHandle,
    VictimSelector,
    victim_selector,
)
from scheduler.framework.plugins.helper.priority import pod_priority
from scheduler.framework.plugins.helper.selectors import selector_from_proto
from scheduler.framework.preemption.evaluator import (
    Candidate,
    Evaluator,
    PreemptionHandle,
    ScoreFunc,
    default_offset_rand,
)
from scheduler.framework.preemption.util import more_important_pod
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
)

NAME = "DefaultPreemption"
PREEMPT_NEVER = "Never"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100

# (victim PodInfo, preemptor) -> whether the victim may be preempted, beyond lower priority.
IsEligiblePod = Callable[[NodeInfo, PodInfo, pb.Pod], bool]


class DefaultPreemption:
    """The plugin (see the module doc)."""

    def __init__(
        self,
        handle: PreemptionHandle,
        min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
        min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
        rng: random.Random | None = None,
    ) -> None:
        self.handle = handle
        self.min_candidate_nodes_percentage = min_candidate_nodes_percentage
        self.min_candidate_nodes_absolute = min_candidate_nodes_absolute
        self.evaluator = Evaluator(NAME, handle, self)
        # Upstream getOffsetRand: replaceable so that tests are deterministic.
        self.offset_rand: Callable[[int], int] = default_offset_rand(rng or random.Random())
        self.is_eligible_pod: IsEligiblePod = _any_pod
        self.more_important_pod: Callable[[pb.Pod, pb.Pod], bool] = more_important_pod

    def name(self) -> str:
        return NAME

    # ------------------------------------------------------------------ PostFilter

    def post_filter(
        self, state: CycleState, pod_info: PodInfo, filtered_node_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        return _prefixed(*self.evaluator.preempt(state, pod_info, filtered_node_status))

    async def post_filter_async(
        self, state: CycleState, pod_info: PodInfo, filtered_node_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """`post_filter` that also asks the extenders' preemptVerb (the framework awaits this
        one when the scheduler has extenders)."""
        return _prefixed(*await self.evaluator.preempt_async(state, pod_info, filtered_node_status))

    # ------------------------------------------------------------------ PreEnqueue

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        if self.evaluator.is_pod_running_preemption(pod_info.uid_key):
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                ["waiting for the preemption for this pod to be finished"],
            )
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # The pods this plugin holds also have the plugins whose rejection the preemption
        # resolves among their rejectors; those decide when to requeue (upstream: QueueSkip).
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                lambda pod, old, new: QueueingHint.SKIP,
            )
        ]

    # ------------------------------------------------------------------ preemption.Interface

    def calculate_num_candidates(self, num_nodes: int) -> int:
        """Upstream calculateNumCandidates."""
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return self.offset_rand(num_nodes), self.calculate_num_candidates(num_nodes)

    def ordered_score_funcs(self, nodes_to_victims: Mapping[str, Candidate]) -> list[ScoreFunc] | None:
        return None

    def _by_importance(self, pods: list[PodInfo]) -> list[PodInfo]:
        """Most important first. The default order (priority, then start time) is a sort key;
        a replaced `more_important_pod` is used as a comparison."""
        if self.more_important_pod is more_important_pod:
            now = time.time()

            def key(pi: PodInfo) -> tuple[int, float]:
                start = pi.start_epoch
                return -pi.priority, now if start is None else start

            return sorted(pods, key=key)
        return _sorted(pods, self.more_important_pod)

    def is_preemption_allowed(self, node_info: NodeInfo, victim: PodInfo, preemptor: pb.Pod) -> bool:
        return pod_priority(victim.pod) < pod_priority(preemptor) and self.is_eligible_pod(
            node_info, victim, preemptor
        )

    def pod_eligible_to_preempt_others(
        self, pod: pb.Pod, nominated_node_status: Status | None
    ) -> tuple[bool, str]:
        """Upstream PodEligibleToPreemptOthers."""
        if pod.spec.preemption_policy == PREEMPT_NEVER:
            return False, "not eligible due to preemptionPolicy=Never."
        nominated = pod.status.nominated_node_name
        if nominated:
            if (
                nominated_node_status is not None
                and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            ):
                return True, ""
            try:
                node_info = self.handle.snapshot_shared_lister().node_infos().get(nominated)
            except KeyError:
                node_info = None
            if node_info is not None:
                for pi in node_info.pods:
                    if self.is_preemption_allowed(node_info, pi, pod) and pod_terminating_by_preemption(
                        pi.pod
                    ):
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def victim_selector(
        self, state: CycleState, pod_info: PodInfo, node_to_status: Mapping[str, Status] | None = None
    ) -> VictimSelector | None:
        """`select_victims_on_node` without copies of the node and the state, for the cycles
        where it is exact (`victims`); None otherwise, or when IsEligiblePod is replaced."""
        if self.is_eligible_pod is not _any_pod:
            return None
        handle = cast(FilterHandle, self.handle)
        return victim_selector(
            handle, state, pod_info, self._by_importance, filter_pods_with_pdb_violation, node_to_status
        )

    def select_victims_on_node(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_info: NodeInfo,
        pdbs: Sequence[pb.PodDisruptionBudget],
    ) -> tuple[list[pb.Pod], int, Status | None]:
        """Upstream SelectVictimsOnNode; `state` and `node_info` are copies it may change."""
        fh = self.handle
        preemptor = pod_info.pod

        def remove(pi: PodInfo) -> Status | None:
            node_info.remove_pod(pi)
            return fh.run_pre_filter_extension_remove_pod(state, pod_info, pi, node_info)

        def add(pi: PodInfo) -> Status | None:
            node_info.add_pod(pi)
            return fh.run_pre_filter_extension_add_pod(state, pod_info, pi, node_info)

        if self.is_eligible_pod is _any_pod:  # the default: lower priority is all it takes
            priority = pod_priority(preemptor)
            potential = [pi for pi in node_info.pods if pod_priority(pi.pod) < priority]
        else:
            potential = [pi for pi in node_info.pods if self.is_preemption_allowed(node_info, pi, preemptor)]
        for pi in potential:
            s = remove(pi)
            if s is not None and not s.is_success():
                return [], 0, _as_error(s)
        if not potential:
            return (
                [],
                0,
                Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_VICTIMS]),
            )
        # Even without every lower-priority pod the preemptor does not fit: no candidate.
        s = fh.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
        if s is not None and not s.is_success():
            return [], 0, s
        potential = self._by_importance(potential)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        def reprieve(pi: PodInfo) -> tuple[bool, Status | None]:
            s = add(pi)
            if s is not None and not s.is_success():
                return False, _as_error(s)
            status = fh.run_filter_plugins_with_nominated_pods(state, pod_info, node_info)
            fits = status is None or status.is_success()
            if not fits:
                s = remove(pi)
                if s is not None and not s.is_success():
                    return False, _as_error(s)
                victims.append(pi)
            return fits, None

        num_violating = 0
        for pi in violating:
            fits, err = reprieve(pi)
            if err is not None:
                return [], 0, err
            if not fits:
                num_violating += 1
        for pi in non_violating:
            _, err = reprieve(pi)
            if err is not None:
                return [], 0, err
        if violating and non_violating:
            victims = self._by_importance(victims)
        return [pi.pod for pi in victims], num_violating, None


def _any_pod(node_info: NodeInfo, victim: PodInfo, preemptor: pb.Pod) -> bool:
    """The default IsEligiblePod: no filtering beyond the lower priority."""
    return True


def _sorted(pods: list[PodInfo], more: Callable[[pb.Pod, pb.Pod], bool]) -> list[PodInfo]:
    """Stable sort, most important first (upstream sort.Slice with MoreImportantPod)."""

    def cmp(a: PodInfo, b: PodInfo) -> int:
        if more(a.pod, b.pod):
            return -1
        if more(b.pod, a.pod):
            return 1
        return 0

    return sorted(pods, key=functools.cmp_to_key(cmp))


def _as_error(s: Status) -> Status:
    return s if s.code == Code.ERROR else Status(Code.ERROR, [s.message()], s.plugin, s.err)


def pod_terminating_by_preemption(pod: pb.Pod) -> bool:
    """Upstream podTerminatingByPreemption: being deleted, with DisruptionTarget=True for
    PreemptionByScheduler."""
    if not pod.metadata.deletion_timestamp:
        return False
    for c in pod.status.conditions:
        if c.type == DISRUPTION_TARGET:
            return c.status == "True" and c.reason == REASON_PREEMPTION_BY_SCHEDULER
    return False


def filter_pods_with_pdb_violation(
    pod_infos: Sequence[PodInfo], pdbs: Sequence[pb.PodDisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """Upstream filterPodsWithPDBViolation: (violating, non-violating), order kept. Each matching
    budget's disruptionsAllowed is spent pod by pod; a pod already in a budget's disruptedPods
    does not spend it again. An invalid or empty selector matches nothing."""
    if not pdbs:
        return [], list(pod_infos)
    allowed = [pdb.status.disruptions_allowed for pdb in pdbs]
    selectors: list[Any] = []
    for pdb in pdbs:
        try:
            sel = selector_from_proto(pdb.spec.selector if pdb.spec.HasField("selector") else None)
        except (SelectorError, ValueError):
            sel = None
        if sel is not None and (sel.empty or sel.matches_nothing):
            sel = None
        selectors.append(sel)
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pi in pod_infos:
        pod = pi.pod
        violated = False
        if pod.metadata.labels:
            labels = pi.labels
            for i, pdb in enumerate(pdbs):
                sel = selectors[i]
                if pdb.metadata.namespace != pod.metadata.namespace or sel is None or not sel.matches(labels):
                    continue
                if pod.metadata.name in pdb.status.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pi)
    return violating, non_violating


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> DefaultPreemption:
    """Builds the plugin from DefaultPreemptionArgs (ValueError naming the field)."""
    args = args or {}
    values: dict[str, int] = {}
    for key, default in (
        ("minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE),
        ("minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE),
    ):
        v = args.get(key, default)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{key}: Invalid value: {v!r}: must be an integer")
        values[key] = v
    pct, absolute = values["minCandidateNodesPercentage"], values["minCandidateNodesAbsolute"]
    if not 0 <= pct <= 100:
        raise ValueError(f"minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]")
    if absolute < 0:
        raise ValueError(f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        raise ValueError(
            "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
            "minCandidateNodesAbsolute"
        )
    # The Framework is the handle; it has the preemption methods (checked when they are used, so
    # that the registry can probe the plugin's extension points with a bare handle).
    return DefaultPreemption(cast(PreemptionHandle, handle), pct, absolute)


def _prefixed(
    result: PostFilterResult | None, status: Status | None
) -> tuple[PostFilterResult | None, Status | None]:
    """The evaluator's answer with the FailedScheduling message's "preemption: " part."""
    if status is not None and status.message():
        return result, Status(status.code, [f"preemption: {status.message()}"], err=status.err)
    return result, status
