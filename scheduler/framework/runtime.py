"""The framework runtime: one `Framework` per profile runs that profile's plugins at each extension
point (upstream `pkg/scheduler/framework/runtime/framework.go`, frameworkImpl).

Semantics are upstream's, point by point:

* **PreFilter** runs every plugin; Skip puts the plugin in `state.skip_filter_plugins` (its Filter
  and PreFilterExtensions do not run); UnschedulableAndUnresolvable stops at once, Unschedulable
  is remembered and the rest still run (kubernetes#119770), anything else is an Error. The
  PreFilterResults are intersected; an empty intersection rejects every node.
* **Filter**: plugins in order; the first non-success wins and names its plugin; a status that is
  not a rejection becomes an Error.
* **PreScore**: Skip puts the plugin in `state.skip_score_plugins` (its Score does not run).
* **Score**: every plugin scores every node, then each plugin's NormalizeScore runs, then every
  score is checked to be in [0, 100] and multiplied by the plugin's weight.
* **Reserve** in order, **Unreserve** in reverse order; **Permit**: rejection stops, Wait parks the
  pod in the waiting-pods map with the plugin's timeout (capped); **PreBind** (Skip from
  PreBindPreFlight honoured through `state.skip_pre_bind_plugins`), **Bind** until the first
  plugin that does not Skip, **PostBind** (informational).

The scheduling cycle is synchronous; the binding cycle (`wait_on_permit`, PreBind, Bind, PostBind)
is async. A plugin that raises is treated as returning an Error status with the exception's text.

Filter and Score over many nodes have one entry each, `run_filter_plugins_over` and
`run_score_plugins_over`: with `batch=True` (the default) they go through the numpy batch engine
(`batch.py`: many nodes per plugin call), with `batch=False` they take the literal node-by-node
path (`run_filter_plugins` per node, `run_score_plugins`). Both give identical results (tests
check it on random clusters), so the algorithm never branches on which one runs.

The Framework is also the FrameworkHandle its plugins receive, as upstream's frameworkImpl is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kse.objects.meta import uid_key
from proto import kse_pb2 as pb
from scheduler.framework.batch import BatchEngine, FilterOutcome, ScoreMatrix
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    MAX_TOTAL_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    NodePluginScores,
    NodeScore,
    PermitPlugin,
    Plugin,
    PluginFactory,
    PluginScore,
    PodNominator,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHintFn,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SharedLister,
)
from scheduler.framework.nodeinfo import NodeInfo, NodeInfoView, Snapshot
from scheduler.framework.plugin_status import (
    error_status,
    exception_status,
    failed,
    filter_failure,
    invalid_score,
    normalize_failure,
    score_failure,
    with_plugin,
)
from scheduler.framework.plugins.helper.priority import pod_priority
from scheduler.framework.types import (
    EXTENDER_NAME,
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueuedPodInfo,
    Status,
)
from scheduler.framework.waiting_pods import TimerFactory, WaitingPod, WaitingPodsMap, default_timers

if TYPE_CHECKING:
    from kse.client.informer import InformerFactory
    from scheduler.apis.config.types import ExpandedPlugins
    from scheduler.events import EventRecorder
    from scheduler.extender.http import HTTPExtender
    from scheduler.framework.preemption.evaluator import PreemptionExecutor

log = logging.getLogger(__name__)

I64 = npt.NDArray[np.int64]
IntP = npt.NDArray[np.intp]

# Upstream maxTimeout: the longest a Permit plugin may make a pod wait.
MAX_PERMIT_TIMEOUT = 15 * 60.0

# The extension points (JSON names, as in KubeSchedulerConfiguration) and what a plugin must
# implement to be enabled there.
POINT_PROTOCOLS: dict[str, type] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}
_PROTOCOL_NAMES = {
    "preEnqueue": "PreEnqueuePlugin",
    "queueSort": "QueueSortPlugin",
    "preFilter": "PreFilterPlugin",
    "filter": "FilterPlugin",
    "postFilter": "PostFilterPlugin",
    "preScore": "PreScorePlugin",
    "score": "ScorePlugin",
    "reserve": "ReservePlugin",
    "permit": "PermitPlugin",
    "preBind": "PreBindPlugin",
    "bind": "BindPlugin",
    "postBind": "PostBindPlugin",
}
# Plugins of these kinds reject pods, so the queue must know which events can undo that
# (upstream shouldHaveEnqueueExtensions).
_REJECTING_PROTOCOLS = (PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, ReservePlugin, PermitPlugin)

# What a plugin without EnqueueExtensions is assumed to care about: every event on every kind
# kse has (upstream UnrollWildCardResource, restricted to Pods and Nodes).
ALL_EVENTS = (
    ClusterEvent(EventResource.POD, ActionType.ALL),
    ClusterEvent(EventResource.NODE, ActionType.ALL),
)

Binder = Callable[[pb.Pod, str], Awaitable[None]]


# ------------------------------------------------------------------------------------ Framework


class Framework:
    """Runs one profile's plugins (upstream frameworkImpl). Build it with
    `scheduler.profile.new_framework` from a loaded configuration, or directly from the
    expanded plugin lists of a profile.

    Args:
        profile_name: the profile's schedulerName.
        plugins: the ordered plugins of each extension point, with the score weights.
        registry: plugin name -> factory (default: the in-tree registry).
        plugin_args: plugin name -> args mapping (camelCase) given to its factory.
        percentage_of_nodes_to_score: the profile's own value, None when unset.
        snapshot: what `snapshot_shared_lister()` returns to plugins; `set_snapshot` changes it.
        binder: how the `bind` of the handle (DefaultBinder) posts pods/binding.
        waiting_pods: the map of pods waiting at Permit, shared by all profiles of a scheduler.
        max_permit_timeout: the cap on a Permit plugin's wait (`--permit-wait-timeout`).
        timers: timer factory for the Permit timeouts (tests inject a fake clock).
        batch: use the plugins' batch methods on the hot path (False: scalar methods only).
        informer_factory: the scheduler's shared informers, for plugins that watch objects
            (upstream Handle.SharedInformerFactory); None outside a running scheduler.
        event_recorder: the scheduler's event recorder, for plugins that record events
            (upstream Handle.EventRecorder); None outside a running scheduler.
    """

    def __init__(
        self,
        profile_name: str,
        plugins: ExpandedPlugins,
        *,
        registry: Mapping[str, PluginFactory] | None = None,
        plugin_args: Mapping[str, Mapping[str, Any] | None] | None = None,
        percentage_of_nodes_to_score: int | None = None,
        snapshot: SharedLister | None = None,
        binder: Binder | None = None,
        waiting_pods: WaitingPodsMap | None = None,
        max_permit_timeout: float = MAX_PERMIT_TIMEOUT,
        timers: TimerFactory = default_timers,
        batch: bool = True,
        informer_factory: InformerFactory | None = None,
        event_recorder: EventRecorder | None = None,
    ) -> None:
        if registry is None:
            from scheduler.framework.plugins.registry import REGISTRY

            registry = REGISTRY
        self._profile_name = profile_name
        self._percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._snapshot: SharedLister = snapshot if snapshot is not None else Snapshot()
        self._binder = binder
        self.waiting_pods = waiting_pods if waiting_pods is not None else WaitingPodsMap()
        self._extenders: Sequence[HTTPExtender] = ()
        self._max_permit_timeout = max_permit_timeout
        self._timers = timers
        self._informer_factory = informer_factory
        self._event_recorder = event_recorder
        args = plugin_args or {}

        # Instantiate every plugin the profile uses, once (upstream pluginsNeeded + factories).
        self.plugins_map: dict[str, Plugin] = {}
        for name in plugins.all_plugins():
            factory = registry.get(name)
            if factory is None:
                raise ValueError(f'plugin "{name}" does not exist')
            try:
                self.plugins_map[name] = factory(args.get(name), self)
            except Exception as e:
                raise ValueError(f'initializing plugin "{name}": {e}') from e

        def point(name: str) -> list[tuple[str, Any]]:
            out: list[tuple[str, Any]] = []
            for ref in plugins.point(name):
                plugin = self.plugins_map[ref.name]
                if not isinstance(plugin, POINT_PROTOCOLS[name]):
                    raise ValueError(f'plugin "{ref.name}" does not extend {_PROTOCOL_NAMES[name]} plugin')
                if any(n == ref.name for n, _ in out):
                    raise ValueError(f'plugin "{ref.name}" already registered as "{_PROTOCOL_NAMES[name]}"')
                out.append((ref.name, plugin))
            return out

        self._pre_enqueue: list[tuple[str, PreEnqueuePlugin]] = point("preEnqueue")
        queue_sort: list[tuple[str, QueueSortPlugin]] = point("queueSort")
        self._pre_filter: list[tuple[str, PreFilterPlugin]] = point("preFilter")
        # The PreFilter plugins with extensions (AddPod / RemovePod), with them, in order.
        self._pre_filter_extensions: list[tuple[str, PreFilterExtensions]] = [
            (name, ext)
            for name, plugin in self._pre_filter
            if (ext := plugin.pre_filter_extensions()) is not None
        ]
        self._filter: list[tuple[str, FilterPlugin]] = point("filter")
        self._post_filter: list[tuple[str, PostFilterPlugin]] = point("postFilter")
        self._pre_score: list[tuple[str, PreScorePlugin]] = point("preScore")
        self._score: list[tuple[str, ScorePlugin]] = point("score")
        self._reserve: list[tuple[str, ReservePlugin]] = point("reserve")
        self._permit: list[tuple[str, PermitPlugin]] = point("permit")
        self._pre_bind: list[tuple[str, PreBindPlugin]] = point("preBind")
        self._bind: list[tuple[str, BindPlugin]] = point("bind")
        self._post_bind: list[tuple[str, PostBindPlugin]] = point("postBind")

        if len(queue_sort) != 1:
            raise ValueError(
                f'only one queue sort plugin required for profile with scheduler name "{profile_name}", '
                f"but got {len(queue_sort)}"
            )
        if not self._bind:
            raise ValueError(
                f'at least one bind plugin is needed for profile with scheduler name "{profile_name}"'
            )
        self._queue_sort = queue_sort[0][1]
        # Score weights (upstream getScoreWeights): unset or 0 reads as 1; the weighted maximum
        # must not overflow int64.
        self.score_weights: dict[str, int] = {}
        total = 0
        for ref in plugins.score:
            weight = ref.weight or 1
            if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
                raise ValueError("total score of Score plugins could overflow")
            total += weight * MAX_NODE_SCORE
            self.score_weights[ref.name] = weight
        self._batch = batch
        self._nominator: PodNominator | None = None
        self._preemption_executor: PreemptionExecutor | None = None
        self._engine = BatchEngine(self._filter, self._score, self.score_weights, use_batch_methods=batch)

    # ------------------------------------------------------------------ profile

    @property
    def profile_name(self) -> str:
        return self._profile_name

    @property
    def percentage_of_nodes_to_score(self) -> int | None:
        """The profile's percentageOfNodesToScore, None when the profile leaves it unset."""
        return self._percentage_of_nodes_to_score

    @property
    def batch(self) -> bool:
        """Whether Filter and Score go through the batch engine (`batch.py`)."""
        return self._batch

    def has_filter_plugins(self) -> bool:
        return bool(self._filter)

    def has_post_filter_plugins(self) -> bool:
        return bool(self._post_filter)

    def has_score_plugins(self) -> bool:
        return bool(self._score)

    def list_plugins(self) -> dict[str, list[str]]:
        """Extension point (JSON name) -> enabled plugin names in run order."""
        lists: dict[str, list[tuple[str, Any]]] = {
            "preEnqueue": self._pre_enqueue,
            "queueSort": [("", self._queue_sort)],
            "preFilter": self._pre_filter,
            "filter": self._filter,
            "postFilter": self._post_filter,
            "preScore": self._pre_score,
            "score": self._score,
            "reserve": self._reserve,
            "permit": self._permit,
            "preBind": self._pre_bind,
            "bind": self._bind,
            "postBind": self._post_bind,
        }
        out = {point: [name for name, _ in plugins] for point, plugins in lists.items()}
        out["queueSort"] = [self._queue_sort.name()]
        return {k: v for k, v in out.items() if v}

    # ------------------------------------------------------------------ handle

    def snapshot_shared_lister(self) -> SharedLister:
        return self._snapshot

    def set_snapshot(self, snapshot: SharedLister) -> None:
        self._snapshot = snapshot

    def extenders(self) -> Sequence[HTTPExtender]:
        """The scheduler's extenders in call order (upstream Handle.Extenders): what preemption
        hands its candidates to (`scheduler.extender.preemption.process_preemption`)."""
        return self._extenders

    def set_extenders(self, extenders: Sequence[HTTPExtender]) -> None:
        self._extenders = tuple(extenders)

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        """The handle's bind (used by DefaultBinder): posts pods/binding through the binder."""
        if self._binder is None:
            raise RuntimeError("no binder configured for this framework")
        await self._binder(pod, node_name)

    def shared_informer_factory(self) -> InformerFactory | None:
        """The scheduler's shared informers (None when the framework runs outside a scheduler)."""
        return self._informer_factory

    def event_recorder(self) -> EventRecorder | None:
        """The scheduler's event recorder (None when the framework runs outside a scheduler)."""
        return self._event_recorder

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting_pods.get(uid)

    def reject_waiting_pod(self, uid: str) -> bool:
        """Reject a pod waiting at Permit (e.g. it was deleted); True if it was waiting."""
        wp = self.waiting_pods.get(uid)
        if wp is None:
            return False
        wp.reject("", "removed")
        return True

    def iterate_over_waiting_pods(self, callback: Callable[[WaitingPod], None]) -> None:
        for wp in self.waiting_pods:
            callback(wp)

    # ------------------------------------------------------------------ queue

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Per plugin that can reject pods, the events that may make them schedulable again,
        with their queueing hints (upstream fillEnqueueExtensions). A rejecting plugin without
        EnqueueExtensions is registered for every event."""
        out: dict[str, list[ClusterEventWithHint]] = {}
        for name, plugin in self.plugins_map.items():
            if not isinstance(plugin, _REJECTING_PROTOCOLS):
                continue
            if isinstance(plugin, EnqueueExtensions):
                out[name] = list(plugin.events_to_register())
            else:
                out[name] = [ClusterEventWithHint(ev) for ev in ALL_EVENTS]
        if self._extenders:
            # Upstream's defaultEnqueueExtension for ExtenderName: every event may help.
            out[EXTENDER_NAME] = [ClusterEventWithHint(ev) for ev in ALL_EVENTS]
        return out

    def queueing_hints(self) -> dict[str, list[tuple[ClusterEvent, QueueingHintFn | None]]]:
        """`events_to_register` in the shape `PriorityQueue(queueing_hints=...)` takes."""
        return {
            name: [(e.event, e.queueing_hint_fn) for e in events]
            for name, events in self.events_to_register().items()
        }

    def pre_enqueue_functions(self) -> dict[str, Callable[[PodInfo], Status | None]]:
        """PreEnqueue plugin name -> its pre_enqueue, in order (for `PriorityQueue(pre_enqueue=...)`)."""
        return {name: plugin.pre_enqueue for name, plugin in self._pre_enqueue}

    def run_pre_enqueue_plugins(self, pod_info: PodInfo) -> Status | None:
        """The first PreEnqueue plugin that does not let the pod in, with its name."""
        for name, plugin in self._pre_enqueue:
            try:
                status = plugin.pre_enqueue(pod_info)
            except Exception as e:
                status = exception_status(e)
            if failed(status):
                assert status is not None
                return with_plugin(status, name)
        return None

    def queue_sort_less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self._queue_sort.less(a, b)

    def queue_sort_func(self) -> Callable[[QueuedPodInfo, QueuedPodInfo], bool]:
        return self._queue_sort.less

    # ------------------------------------------------------------------ PreFilter / Filter

    def _all_nodes(self) -> Sequence[NodeInfo]:
        return self._snapshot.node_infos().list()

    def run_pre_filter_plugins(
        self, state: CycleState, pod_info: PodInfo
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """(merged PreFilterResult, status, plugins whose result narrowed the nodes), as upstream
        RunPreFilterPlugins. Fills `state.skip_filter_plugins` with the plugins that Skip."""
        skip: set[str] = set()
        try:
            return self._run_pre_filter(state, pod_info, skip)
        finally:
            state.skip_filter_plugins = skip

    def _run_pre_filter(
        self, state: CycleState, pod_info: PodInfo, skip: set[str]
    ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        try:
            nodes = self._all_nodes()
        except Exception as e:
            return None, error_status(f"getting all nodes: {e}", err=e), set()
        result: PreFilterResult | None = None
        plugins_with_nodes: set[str] = set()
        return_status: Status | None = None
        for name, plugin in self._pre_filter:
            try:
                r, s = plugin.pre_filter(state, pod_info, nodes)
            except Exception as e:
                r, s = None, exception_status(e)
            if s is not None and s.code == Code.SKIP:
                skip.add(name)
                continue
            if failed(s):
                assert s is not None
                s = with_plugin(s, name)
                if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    # Preemption cannot help: no need to run the other PreFilter plugins.
                    return None, s, set()
                if s.code == Code.UNSCHEDULABLE:
                    # Preemption may help later in this cycle, which needs every PreFilter state.
                    return_status = s
                    continue
                return (
                    None,
                    error_status(f'running PreFilter plugin "{name}": {s.message()}', name, s.err),
                    set(),
                )
            if r is not None and not r.all_nodes():
                plugins_with_nodes.add(name)
            if r is not None:
                result = r if result is None else result.merge(r)
            if result is not None and not result.all_nodes() and not result.node_names:
                names = sorted(plugins_with_nodes)
                if len(names) == 1:
                    msg = f"node(s) didn't satisfy plugin {names[0]}"
                else:
                    msg = f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"
                return result, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [msg]), plugins_with_nodes
        return result, return_status, plugins_with_nodes

    def run_filter_plugins(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        """Whether the pod fits the node: the first plugin that does not pass decides, and the
        status names it (upstream RunFilterPlugins)."""
        skip = state.skip_filter_plugins
        for name, plugin in self._filter:
            if name in skip:
                continue
            try:
                s = plugin.filter(state, pod_info, node_info)
            except Exception as e:
                s = exception_status(e)
            if failed(s):
                assert s is not None
                return filter_failure(name, s)
        return None

    def filter_plugins_to_run(self, state: CycleState) -> list[tuple[str, FilterPlugin]]:
        """The Filter plugins in order, without those PreFilter skipped for this cycle."""
        skip = state.skip_filter_plugins
        return [(name, plugin) for name, plugin in self._filter if name not in skip]

    def pre_filter_extensions_to_run(self, state: CycleState) -> list[str]:
        """The plugins whose AddPod/RemovePod extensions run this cycle (not skipped)."""
        skip = state.skip_filter_plugins
        return [name for name, _ in self._pre_filter_extensions if name not in skip]

    def run_filter_plugins_over(
        self,
        state: CycleState,
        pod_info: PodInfo,
        snapshot: Snapshot,
        order: IntP,
        num_to_find: int,
    ) -> FilterOutcome:
        """Filter the nodes `order` (indices of `snapshot.node_info_list`, in scan order) until
        `num_to_find` passed or one gives an Error: the loop of upstream findNodesThatPassFilters
        with parallelism 1. With `batch` the engine evaluates many nodes per plugin call; without,
        `run_filter_plugins` runs node after node. Both give the same outcome."""
        outcome = self._filter_over(state, pod_info, snapshot, order, num_to_find)
        if self._nominator is None or not self._nominator.has_nominated_pods():
            return outcome
        return self._filter_with_nominated_pods(state, pod_info, snapshot, order, num_to_find, outcome)

    def _filter_over(
        self,
        state: CycleState,
        pod_info: PodInfo,
        snapshot: Snapshot,
        order: IntP,
        num_to_find: int,
    ) -> FilterOutcome:
        if self._batch:
            return self._engine.filter(state, pod_info, snapshot, order, num_to_find)
        infos = snapshot.node_info_list
        rejected: list[tuple[int, Status]] = []
        feasible: list[int] = []
        error: Status | None = None
        for i in order.tolist():
            s = self.run_filter_plugins(state, pod_info, infos[i])
            if s is None or s.code == Code.SUCCESS:
                feasible.append(i)
                if len(feasible) >= num_to_find:
                    break
            elif s.code == Code.ERROR:
                error = s
                break
            else:
                rejected.append((i, s))
        return FilterOutcome(np.array(feasible, dtype=np.intp), rejected, error)

    def _filter_with_nominated_pods(
        self,
        state: CycleState,
        pod_info: PodInfo,
        snapshot: Snapshot,
        order: IntP,
        num_to_find: int,
        outcome: FilterOutcome,
    ) -> FilterOutcome:
        """Upstream filters every node with RunFilterPluginsWithNominatedPods. A node passes it
        only if it passes without the nominated pods too, so the scan above (without them)
        already has every rejection; only its feasible nodes that hold nominated pods of this
        pod's priority or higher are filtered again with them. Nodes that fail then count as
        rejected, and the scan goes on past them until `num_to_find` nodes passed."""
        infos = snapshot.node_info_list
        affected = self._nodes_with_nominated_pods(pod_info, snapshot)
        # The scan stopped at `num_to_find`, an Error or the end: if none of its feasible nodes
        # holds a nominated pod, the loop below would give back the same outcome.
        if not affected or not np.isin(outcome.feasible, np.fromiter(affected, np.intp, len(affected))).any():
            return outcome
        feasible: list[int] = []
        rejected = list(outcome.rejected)
        pos = outcome.processed
        current = outcome
        while True:
            for i in current.feasible.tolist():
                if i in affected:
                    s = self.run_filter_plugins_with_nominated_pods(state, pod_info, infos[i])
                    if s is not None and s.code == Code.ERROR:
                        return FilterOutcome(np.array(feasible, dtype=np.intp), rejected, s)
                    if failed(s):
                        assert s is not None
                        rejected.append((i, s))
                        continue
                feasible.append(i)
            if current.error is not None:
                return FilterOutcome(np.array(feasible, dtype=np.intp), rejected, current.error)
            if len(feasible) >= num_to_find or pos >= len(order):
                return FilterOutcome(np.array(feasible, dtype=np.intp), rejected)
            current = self._filter_over(state, pod_info, snapshot, order[pos:], num_to_find - len(feasible))
            rejected.extend(current.rejected)
            pos += current.processed

    def _nodes_with_nominated_pods(self, pod_info: PodInfo, snapshot: Snapshot) -> set[int]:
        """Snapshot indices of the nodes where a pod other than this one, of its priority or
        higher, is nominated."""
        assert self._nominator is not None
        priority = pod_priority(pod_info.pod)
        me = pod_info.uid_key
        out: set[int] = set()
        for node in self._nominator.nodes():
            if any(
                pod_priority(p.pod) >= priority and p.uid_key != me
                for p in self._nominator.nominated_pods_for_node(node)
            ):
                try:
                    out.add(snapshot.index_of(node))
                except KeyError:
                    continue
        return out

    # ------------------------------------------------------------------ nominated pods

    def set_preemption_executor(self, executor: PreemptionExecutor | None) -> None:
        """The API side of preemption (the scheduler's); None: preemption only nominates."""
        self._preemption_executor = executor

    def preemption_executor(self) -> PreemptionExecutor | None:
        return self._preemption_executor

    def set_pod_nominator(self, nominator: PodNominator | None) -> None:
        """The queue's nominator (upstream the handle's PodNominator); None: no nominated pods."""
        self._nominator = nominator

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        if self._nominator is None:
            return []
        return self._nominator.nominated_pods_for_node(node_name)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """AddPod of every PreFilter plugin's extensions not skipped by PreFilter (upstream
        RunPreFilterExtensionAddPod); an Error status names the plugin."""
        return self._run_pre_filter_extension("AddPod", state, pod_to_schedule, pod_to_add, node_info)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """RemovePod of every PreFilter plugin's extensions (upstream RunPreFilterExtensionRemovePod)."""
        return self._run_pre_filter_extension("RemovePod", state, pod_to_schedule, pod_to_remove, node_info)

    def _run_pre_filter_extension(
        self, op: str, state: CycleState, pod_to_schedule: PodInfo, other: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        skip = state.skip_filter_plugins
        for name, ext in self._pre_filter_extensions:
            if name in skip:
                continue
            try:
                if op == "AddPod":
                    s = ext.add_pod(state, pod_to_schedule, other, node_info)
                else:
                    s = ext.remove_pod(state, pod_to_schedule, other, node_info)
            except Exception as e:
                s = exception_status(e)
            if failed(s):
                assert s is not None
                return error_status(f'running {op} on PreFilter plugin "{name}": {s.message()}', name, s.err)
        return None

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        """Filter the node as if the pods nominated to it with this pod's priority or higher
        were running there (upstream RunFilterPluginsWithNominatedPods).

        Two passes, as upstream: first with those nominated pods added (they may take the room
        this pod needs), then, if any were added and the pod passed, without them (a pod with
        affinity to a nominated pod must not count on a pod that may never run there)."""
        if self._nominator is None or not self._nominator.has_nominated_pods():
            return self.run_filter_plugins(state, pod_info, node_info)  # nobody to add
        status: Status | None = None
        for attempt in range(2):
            state_to_use, info_to_use = state, node_info
            if attempt == 0:
                added, state_to_use, info_to_use, err = self._add_nominated_pods(state, pod_info, node_info)
                if err is not None:
                    return err
            elif not added or failed(status):
                break
            status = self.run_filter_plugins(state_to_use, pod_info, info_to_use)
            if failed(status) and status is not None and not status.is_rejected():
                return status
        return status

    def _add_nominated_pods(
        self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo
    ) -> tuple[bool, CycleState, NodeInfo, Status | None]:
        """Upstream addGENominatedPods: a copy of the node and the state with the nominated pods
        of priority >= the pod's (other than the pod itself) added."""
        if self._nominator is None or node_info.node is None:
            return False, state, node_info, None
        nominated = self._nominator.nominated_pods_for_node(node_info.name)
        if not nominated:
            return False, state, node_info, None
        priority = pod_priority(pod_info.pod)
        me = pod_info.uid_key
        info_out: NodeInfo | None = None
        state_out = state
        for pi in nominated:
            if pod_priority(pi.pod) < priority or pi.uid_key == me:
                continue
            if info_out is None:
                info_out, state_out = node_info.clone(), state.clone()
            info_out.add_pod(pi)
            s = self.run_pre_filter_extension_add_pod(state_out, pod_info, pi, info_out)
            if failed(s):
                return False, state, node_info, s
        if info_out is None:
            return False, state, node_info, None
        return True, state_out, info_out, None

    def filter_batch(
        self,
        state: CycleState,
        pod_info: PodInfo,
        snapshot: Snapshot,
        order: IntP,
        num_to_find: int,
    ) -> FilterOutcome:
        """The batch engine's Filter scan, whatever `batch` says (with `batch=False` it calls
        only the plugins' scalar methods, in chunks): what tests compare with the literal path."""
        return self._engine.filter(state, pod_info, snapshot, order, num_to_find)

    # ------------------------------------------------------------------ PostFilter

    def run_post_filter_plugins(
        self, state: CycleState, pod_info: PodInfo, filtered_node_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Until the first Success, Error or UnschedulableAndUnresolvable; else every plugin
        runs and their reasons are joined (upstream RunPostFilterPlugins)."""
        fold = _PostFilterFold()
        for name, plugin in self._post_filter:
            try:
                r, s = plugin.post_filter(state, pod_info, filtered_node_status)
            except Exception as e:
                r, s = None, exception_status(e)
            if fold.add(name, r, s):
                break
        return fold.result()

    async def run_post_filter_plugins_async(
        self, state: CycleState, pod_info: PodInfo, filtered_node_status: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """`run_post_filter_plugins` for a scheduler with extenders: a plugin that has
        `post_filter_async` (DefaultPreemption, whose evaluator then asks the extenders'
        preemptVerb over HTTP) is awaited; the others run as usual."""
        fold = _PostFilterFold()
        for name, plugin in self._post_filter:
            run_async = getattr(plugin, "post_filter_async", None)
            try:
                if run_async is not None:
                    r, s = await run_async(state, pod_info, filtered_node_status)
                else:
                    r, s = plugin.post_filter(state, pod_info, filtered_node_status)
            except Exception as e:
                r, s = None, exception_status(e)
            if fold.add(name, r, s):
                break
        return fold.result()

    # ------------------------------------------------------------------ PreScore / Score

    def run_pre_score_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        """Fills `state.skip_score_plugins` with the plugins that Skip; any other failure is an
        Error (upstream RunPreScorePlugins)."""
        skip: set[str] = set()
        try:
            for name, plugin in self._pre_score:
                try:
                    s = plugin.pre_score(state, pod_info, nodes)
                except Exception as e:
                    s = exception_status(e)
                if s is not None and s.code == Code.SKIP:
                    skip.add(name)
                    continue
                if failed(s):
                    assert s is not None
                    return error_status(f'running PreScore plugin "{name}": {s.message()}', err=s.err)
            return None
        finally:
            state.skip_score_plugins = skip

    def run_score_plugins(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[NodePluginScores], Status | None]:
        """Every Score plugin not skipped by PreScore scores every node; then each plugin's
        NormalizeScore; then scores are checked to be in [0, 100] and weighted (upstream
        RunScorePlugins, scalar). Returns ([], status) on failure."""
        plugins = [(n, p) for n, p in self._score if n not in state.skip_score_plugins]
        per_plugin: list[list[NodeScore]] = []
        for name, plugin in plugins:
            scores = []
            for ni in nodes:
                try:
                    value, s = plugin.score(state, pod_info, ni)
                except Exception as e:
                    value, s = 0, exception_status(e)
                if failed(s):
                    assert s is not None
                    return [], score_failure(name, s)
                scores.append(NodeScore(ni.name, value))
            per_plugin.append(scores)
        for (name, plugin), scores in zip(plugins, per_plugin, strict=True):
            ext = plugin.score_extensions()
            if ext is None:
                continue
            try:
                s = ext.normalize_score(state, pod_info, scores)
            except Exception as e:
                s = exception_status(e)
            if failed(s):
                assert s is not None
                return [], normalize_failure(name, s)
        out = []
        for j, ni in enumerate(nodes):
            nps = NodePluginScores(ni.name, [])
            for (name, _), scores in zip(plugins, per_plugin, strict=True):
                score = scores[j].score
                if score > MAX_NODE_SCORE or score < MIN_NODE_SCORE:
                    return [], invalid_score(name, score)
                weighted = score * self.score_weights[name]
                nps.scores.append(PluginScore(name, weighted))
                nps.total_score += weighted
            out.append(nps)
        return out, None

    def run_score_plugins_over(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: IntP
    ) -> tuple[ScoreMatrix | None, Status | None]:
        """Score the nodes at `indices` of the snapshot (upstream RunScorePlugins), as a
        ScoreMatrix; (None, status) on failure. With `batch` the engine scores arrays of nodes;
        without, `run_score_plugins` runs node after node. Both give the same scores."""
        if self._batch:
            return self._engine.score(state, pod_info, snapshot, indices)
        view = NodeInfoView(snapshot.node_info_list, indices.tolist())
        scores, s = self.run_score_plugins(state, pod_info, view)
        if failed(s):
            return None, s
        return ScoreMatrix.of_node_plugin_scores(scores, self.score_weights, indices), None

    def score_matrix(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: IntP
    ) -> tuple[ScoreMatrix | None, Status | None]:
        """The batch engine's Score, whatever `batch` says (with `batch=False` it calls only the
        plugins' scalar methods): what tests compare with `run_score_plugins`."""
        return self._engine.score(state, pod_info, snapshot, indices)

    # ------------------------------------------------------------------ Reserve / Permit

    def run_reserve_plugins_reserve(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        """Stops at the first failure; the caller must then run Unreserve."""
        for name, plugin in self._reserve:
            try:
                s = plugin.reserve(state, pod_info, node_name)
            except Exception as e:
                s = exception_status(e)
            if failed(s):
                assert s is not None
                if s.is_rejected():
                    return with_plugin(s, name)
                return error_status(f'running Reserve plugin "{name}": {s.message()}', name, s.err)
        return None

    def run_reserve_plugins_unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        """Unreserve of every Reserve plugin, in the reverse order of Reserve."""
        for name, plugin in reversed(self._reserve):
            try:
                plugin.unreserve(state, pod_info, node_name)
            except Exception:
                log.exception("Unreserve of plugin %s failed for pod %s", name, pod_info.key)

    def run_permit_plugins(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        """None (permitted), a rejection naming the plugin, an Error, or Wait: then the pod is in
        the waiting-pods map until every plugin that asked to wait allows it, one rejects it, or
        that plugin's timeout (capped at `max_permit_timeout`) passes."""
        waits: dict[str, float] = {}
        for name, plugin in self._permit:
            try:
                s, timeout = plugin.permit(state, pod_info, node_name)
            except Exception as e:
                s, timeout = exception_status(e), 0.0
            if not failed(s):
                continue
            assert s is not None
            if s.is_rejected():
                return with_plugin(s, name)
            if s.code == Code.WAIT:
                waits[name] = min(float(timeout), self._max_permit_timeout)
                continue
            return error_status(f'running Permit plugin "{name}": {s.message()}', name, s.err)
        if waits:
            pod = pod_info.pod
            self.waiting_pods.add(WaitingPod(pod, waits, self._timers))
            return Status(
                Code.WAIT,
                [f'one or more plugins asked to wait and no plugin rejected pod "{pod.metadata.name}"'],
            )
        return None

    def will_wait_on_permit(self, pod: pb.Pod | PodInfo) -> bool:
        p = pod.pod if isinstance(pod, PodInfo) else pod
        return self.waiting_pods.get(uid_key(p)) is not None

    async def wait_on_permit(self, pod: pb.Pod | PodInfo) -> Status | None:
        """Wait until a pod waiting at Permit is allowed (None) or rejected (upstream
        WaitOnPermit); returns at once for a pod that is not waiting."""
        p = pod.pod if isinstance(pod, PodInfo) else pod
        uid = uid_key(p)
        wp = self.waiting_pods.get(uid)
        if wp is None:
            return None
        try:
            s = await wp.wait()
        finally:
            self.waiting_pods.remove(uid)
        if not failed(s):
            return None
        assert s is not None
        if s.is_rejected():
            return s
        return error_status(f"waiting on permit for pod: {s.message()}", s.plugin, s.err)

    # ------------------------------------------------------------------ binding cycle

    async def run_pre_bind_plugins(
        self, state: CycleState, pod_info: PodInfo, node_name: str
    ) -> Status | None:
        for name, plugin in self._pre_bind:
            if name in state.skip_pre_bind_plugins:
                continue
            try:
                s = await plugin.pre_bind(state, pod_info, node_name)
            except Exception as e:
                s = exception_status(e)
            if failed(s):
                assert s is not None
                if s.is_rejected():
                    return with_plugin(s, name)
                return error_status(f'running PreBind plugin "{name}": {s.message()}', err=s.err)
        return None

    async def run_bind_plugins(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        """Bind plugins in order until one does not Skip (upstream RunBindPlugins); Skip if all
        did."""
        status: Status | None = Status(Code.SKIP)
        for name, plugin in self._bind:
            try:
                status = await plugin.bind(state, pod_info, node_name)
            except Exception as e:
                status = exception_status(e)
            if status is not None and status.code == Code.SKIP:
                continue
            if failed(status):
                assert status is not None
                if status.is_rejected():
                    return with_plugin(status, name)
                return error_status(f'running Bind plugin "{name}": {status.message()}', err=status.err)
            return status
        return status

    async def run_post_bind_plugins(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        for name, plugin in self._post_bind:
            try:
                await plugin.post_bind(state, pod_info, node_name)
            except Exception:
                log.exception("PostBind of plugin %s failed for pod %s", name, pod_info.key)


class _PostFilterFold:
    """The outcome of the PostFilter plugins so far (upstream RunPostFilterPlugins' loop body):
    `add` says whether to stop; `result` is the answer."""

    def __init__(self) -> None:
        self._done: tuple[PostFilterResult | None, Status | None] | None = None
        self._result: PostFilterResult | None = None
        self._reasons: list[str] = []
        self._rejector = ""

    def add(self, name: str, r: PostFilterResult | None, s: Status | None) -> bool:
        if not failed(s):
            self._done = (r, s)
            return True
        assert s is not None
        if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            self._done = (r, with_plugin(s, name))
            return True
        if not s.is_rejected():
            self._done = (None, error_status(s.message(), name, s.err))
            return True
        if r is not None:  # ModeOverride (None is ModeNoop)
            self._result = r
        self._reasons.extend(s.reasons)
        if not self._rejector:
            self._rejector = name
        return False

    def result(self) -> tuple[PostFilterResult | None, Status | None]:
        if self._done is not None:
            return self._done
        return self._result, Status(Code.UNSCHEDULABLE, self._reasons, self._rejector)
