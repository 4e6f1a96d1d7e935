"""Preemption's dry run on a node without copying it, for the cycles where that gives the same
answer as upstream's SelectVictimsOnNode (default_preemption.go).

Upstream copies the node and the cycle state for every node it dry-runs, removes the
lower-priority pods with the PreFilter extensions' RemovePod, and re-runs every Filter plugin
(with the nominated pods) once for the removal and once per reprieved victim. At 5000 nodes
that is about 500 nodes and 2500 Filter runs per preemption, which in Python is ~100 ms: the
whole budget of PreemptionAsync (scheduler_perf, floor 570 pods/s with a preemptor every 200 ms).

When no PreFilter extension runs this cycle and the only Filter plugin that reads the node's
pods is one whose verdict is a function of the node's amounts (NodeResourcesFit: allocatable,
requested, pod count), the dry run needs no copies: the amounts are kept in one Resource per
node, the plugins that read only the node (``FILTER_READS_NODE_PODS = False``) are run once per
node, and the reprieve loop asks the amounts plugin alone. The statuses are the ones upstream's
path gives: the first failing plugin in profile order wins. ``victim_selector`` returns None for
any other cycle (a pod with host ports, affinity, spread constraints, extension plugins, an
out-of-tree Filter), and the plugin then takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.nodeinfo import NodeInfo, Resource
from scheduler.framework.plugin_status import exception_status, filter_failure
from scheduler.framework.types import Code, PodInfo, Status

NO_VICTIMS = "No preemption victims found for incoming pod"

# (node, PDBs) -> (victims, number violating a PDB, status): SelectVictimsOnNode on one node.
VictimSelector = Callable[
    [NodeInfo, Sequence[pb.PodDisruptionBudget]], tuple[list[pb.Pod], int, Status | None]
]


@runtime_checkable
class AmountsFilter(Protocol):
    """A Filter plugin whose verdict depends on the node's pods only through its amounts."""

    def request_of(self, state: CycleState) -> Resource: ...

    def status_of_amounts(
        self, request: Resource, alloc: Resource, used: Resource, n_pods: int
    ) -> Status | None: ...

    def amounts_fit(
        self, request: Resource, alloc: Resource, used: Resource, n_pods: int, extra: Resource
    ) -> bool: ...


class FilterHandle(Protocol):
    def filter_plugins_to_run(self, state: CycleState) -> Sequence[tuple[str, object]]: ...

    def pre_filter_extensions_to_run(self, state: CycleState) -> Sequence[str]: ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...


def victim_selector(
    handle: FilterHandle,
    state: CycleState,
    pod_info: PodInfo,
    by_importance: Callable[[list[PodInfo]], list[PodInfo]],
    split_by_pdb: Callable[
        [Sequence[PodInfo], Sequence[pb.PodDisruptionBudget]], tuple[list[PodInfo], list[PodInfo]]
    ],
    node_to_status: Mapping[str, Status] | None = None,
) -> VictimSelector | None:
    """The copy-free SelectVictimsOnNode for this cycle, or None when it would not be exact.
    Victims are the pods of lower priority (the default IsEligiblePod). `node_to_status` is
    this cycle's Filter statuses: a node the amounts plugin rejected passed every plugin before
    it (Filter stops at the first rejection), so those are not run again."""
    if handle.pre_filter_extensions_to_run(state):
        return None
    filters = handle.filter_plugins_to_run(state)
    amounts: tuple[int, str, AmountsFilter] | None = None
    node_only: list[tuple[int, str, object]] = []
    for pos, (name, plugin) in enumerate(filters):
        if not getattr(plugin, "FILTER_READS_NODE_PODS", True):
            node_only.append((pos, name, plugin))
        elif amounts is None and isinstance(plugin, AmountsFilter):
            amounts = (pos, name, plugin)
        else:
            return None
    if amounts is None:
        return None
    amounts_pos, amounts_name, amounts_plugin = amounts
    try:
        request = amounts_plugin.request_of(state)
    except StateNotFoundError:
        return None
    priority = pod_info.priority
    fits = amounts_plugin.amounts_fit
    me = pod_info.uid_key

    after_amounts = [entry for entry in node_only if entry[0] > amounts_pos]

    def node_only_failure(node_info: NodeInfo) -> tuple[int, Status] | None:
        checks = node_only
        if node_to_status is not None:
            got = node_to_status.get(node_info.name)
            if got is not None and got.plugin == amounts_name:
                checks = after_amounts
        for pos, name, plugin in checks:
            try:
                s = plugin.filter(state, pod_info, node_info)  # type: ignore[attr-defined]
            except Exception as e:
                s = exception_status(e)
            if s is not None and not s.is_success():
                return pos, filter_failure(name, s)
        return None

    def select(
        node_info: NodeInfo, pdbs: Sequence[pb.PodDisruptionBudget]
    ) -> tuple[list[pb.Pod], int, Status | None]:
        potential = [pi for pi in node_info.pods if pi.priority < priority]
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_VICTIMS])
        used = node_info.requested.clone()
        for pi in potential:
            used.add_scaled(pi.resource.resource, -1)
        n_pods = len(node_info.pods) - len(potential)
        # Upstream RunFilterPluginsWithNominatedPods: the pods nominated here with this pod's
        # priority or higher count as running. With an amounts plugin only, the pass without
        # them cannot fail where the pass with them succeeded, so one pass decides.
        if node_info.node is not None:
            for pi in handle.nominated_pods_for_node(node_info.name):
                if pi.priority >= priority and pi.uid_key != me:
                    used.add_scaled(pi.resource.resource, 1)
                    n_pods += 1
        alloc = node_info.allocatable
        status = amounts_plugin.status_of_amounts(request, alloc, used, n_pods)
        other = node_only_failure(node_info)
        if other is not None and (status is None or other[0] < amounts_pos):
            return [], 0, other[1]
        if status is not None:
            return [], 0, filter_failure(amounts_name, status)
        violating, non_violating = split_by_pdb(by_importance(potential), pdbs)
        victims: list[PodInfo] = []
        num_violating = 0
        for group, counts in ((violating, True), (non_violating, False)):
            for pi in group:
                r = pi.resource.resource
                if fits(request, alloc, used, n_pods + 1, r):
                    used.add_scaled(r, 1)
                    n_pods += 1
                    continue
                victims.append(pi)
                num_violating += counts
        if violating and non_violating:
            victims = by_importance(victims)
        return [pi.pod for pi in victims], num_violating, None

    return select
