"""The scheduling queue: kube-scheduler's ``PriorityQueue``, as in
``pkg/scheduler/backend/queue/scheduling_queue.go`` with queueing hints on (their default since
v1.32, GA in v1.34).

Where a pending pod is, at any moment, exactly one of:

- **activeQ**: a heap ordered by the profile's QueueSort ``less``; ``pop()`` takes its head.
- **backoffQ**: pods that must wait out ``initial * 2**(attempts-1)`` (capped) since their last
  failure; ``flush_backoff_completed()`` moves the expired ones to activeQ.
- **unschedulablePods**: pods rejected by plugins, waiting for a cluster event that one of those
  plugins says may help (its queueing hint returns QUEUE), or for
  ``pod_max_in_unschedulable_pods_duration`` (``flush_unschedulable_pods_leftover()``). Pods held
  by a PreEnqueue plugin (scheduling gates) wait here too, counted as ``gated``.
- **in flight**: popped and not yet ``done()``; events arriving meanwhile are logged and replayed
  when the pod comes back through ``add_unschedulable_if_not_present``.

Everything is synchronous except ``pop()``, which awaits a pod; the queue is meant to be used
from one event loop (no locks). Time comes from an injected clock (seconds, float).

Differences from upstream, each deliberate:

- ``add()`` of a pod that is in flight does not also put it in activeQ (upstream would, and
  later discard the duplicate at pop); it is logged as an event for that pod instead.
- ``delete()`` of an in-flight pod is remembered: if that attempt then fails, the pod is dropped
  instead of requeued (upstream relies on the caller re-checking its informer).
- ``update()`` of an in-flight pod keeps the newest object, which is the one requeued.
- ``update()`` of an unschedulable pod stops at the first event that moves it out of
  unschedulablePods (upstream stops only at activeQ unless pop-from-backoff is on, and a later
  event answered QueueSkip would then re-add the pod to unschedulablePods while it is in
  backoffQ).
- Nominated pods (preemption) are tracked by ``self.nominator`` (``nominator.py``): added with
  the pod's ``status.nominatedNodeName`` on ``add``, refreshed on ``update``, dropped on
  ``delete``; the scheduler overrides the node after a PostFilter and drops it on assume.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kse.objects.meta import object_key
from proto import kse_pb2 as pb
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    EventResource,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    Status,
)

from .active_queue import ActiveQueue, InFlightEvent
from .backoff import BackoffQueue
from .nominator import Nominator
from .pod_events import NamespaceLabels, pod_scheduling_properties_change, rejected_by_cross_topology_term
from .unschedulable_pods import UnschedulablePods

log = logging.getLogger(__name__)

# ---------------------------------------------------------------- types

Clock = Callable[[], float]
LessFunc = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
# A plugin's verdict on an event for a pod it rejected: (pod, old_obj, new_obj) -> hint.
# An exception counts as QUEUE, so a buggy hint can never strand a pod (upstream).
QueueingHintFn = Callable[[pb.Pod, Any, Any], QueueingHint]
# plugin name -> the events it registered, each with its hint (None: always QUEUE, as upstream's
# default hint for plugins without one).
HintRegistrations = Mapping[str, Sequence[tuple[ClusterEvent, QueueingHintFn | None]]]
# A PreEnqueue plugin's pre_enqueue: None or a success Status lets the pod in; anything else
# (an exception included) holds it.
PreEnqueueFn = Callable[[PodInfo], Status | None]
PreCheck = Callable[[pb.Pod], bool]
# Called with (queue, event label) each time a pod enters a queue: scheduler_queue_incoming_pods.
IncomingRecorder = Callable[[str, str], None]

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION = 300.0
BACKOFF_FLUSH_INTERVAL = 1.0
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0

ACTIVE_Q = "active"
BACKOFF_Q = "backoff"
UNSCHEDULABLE_Q = "unschedulable"
GATED = "gated"

# Event labels that are not cluster events (upstream framework/events.go).
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"
FORCE_ACTIVATE = "ForceActivate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"

EVENT_ASSIGNED_POD_ADD = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD)
EVENT_ASSIGNED_POD_UPDATE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD)
EVENT_UNSCHEDULED_POD_UPDATE = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE)
EVENT_UNSCHEDULED_POD_DELETE = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.DELETE)
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, UNSCHEDULABLE_TIMEOUT)
EVENT_FORCE_ACTIVATE = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, FORCE_ACTIVATE)
_SCALE_DOWN = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCALE_DOWN)


def is_wildcard(event: ClusterEvent) -> bool:
    """An event that concerns every pod, whatever rejected it (upstream ClusterEventIsWildCard)."""
    return event.resource == EventResource.WILDCARD and event.action == ActionType.ALL


_ACTION_NAMES = {
    ActionType.ADD: "Add",
    ActionType.DELETE: "Delete",
    ActionType.UPDATE_NODE_ALLOCATABLE: "UpdateNodeAllocatable",
    ActionType.UPDATE_NODE_LABEL: "UpdateNodeLabel",
    ActionType.UPDATE_NODE_TAINT: "UpdateNodeTaint",
    ActionType.UPDATE_NODE_CONDITION: "UpdateNodeCondition",
    ActionType.UPDATE_NODE_ANNOTATION: "UpdateNodeAnnotation",
    ActionType.UPDATE_POD_LABEL: "UpdatePodLabel",
    ActionType.UPDATE_POD_SCALE_DOWN: "UpdatePodScaleDown",
    ActionType.UPDATE_POD_TOLERATIONS: "UpdatePodToleration",
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED: "UpdatePodSchedulingGatesEliminated",
    ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM: "UpdatePodGeneratedResourceClaim",
}


@functools.cache  # events are few and frozen; every pod add asks for its label
def event_label(event: ClusterEvent) -> str:
    """As upstream ClusterEvent.Label(): the custom label, else resource + action."""
    if event.label:
        return event.label
    if event.action == ActionType.ALL:
        action = "All"
    elif event.action == ActionType.UPDATE:
        action = "Update"
    else:
        action = "|".join(name for bit, name in _ACTION_NAMES.items() if event.action & bit)
    return f"{event.resource.value}{action}"


class QueueError(Exception):
    """A caller broke the queue's contract (e.g. requeued a pod that is already queued)."""


class _Strategy(enum.IntEnum):
    """How to requeue a pod from unschedulablePods (upstream queueingStrategy)."""

    SKIP = 0  # stay in unschedulablePods
    AFTER_BACKOFF = 1  # backoffQ if still backing off, else activeQ
    IMMEDIATELY = 2  # activeQ, skipping backoff (a Pending plugin said QUEUE)


@dataclass(frozen=True)
class _Hint:
    event: ClusterEvent
    plugin: str
    fn: QueueingHintFn | None


def _pod_key(pod: pb.Pod) -> str:
    """The queue's key of a pod (upstream podInfoKeyFunc: cache.ObjectName.String())."""
    return object_key(pod.metadata.namespace, pod.metadata.name)


def _flatten(registrations: HintRegistrations) -> list[_Hint]:
    return [_Hint(ev, plugin, fn) for plugin, regs in registrations.items() for ev, fn in regs]


# ---------------------------------------------------------------- the queue


class PriorityQueue:
    """kube-scheduler's scheduling queue. See the module docstring for the states of a pod.

    ``less`` is the QueueSort plugin's ordering. ``queueing_hints`` (plugin -> registered events
    with hints) applies to every profile unless ``queueing_hints_per_profile`` has an entry for
    the pod's ``spec.schedulerName``; likewise ``pre_enqueue`` (plugin -> PreEnqueue function).
    """

    def __init__(
        self,
        less: LessFunc,
        *,
        clock: Clock = time.monotonic,
        pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        pod_max_in_unschedulable_pods_duration: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION,
        queueing_hints: HintRegistrations | None = None,
        queueing_hints_per_profile: Mapping[str, HintRegistrations] | None = None,
        pre_enqueue: Mapping[str, PreEnqueueFn] | None = None,
        pre_enqueue_per_profile: Mapping[str, Mapping[str, PreEnqueueFn]] | None = None,
        pop_from_backoff: bool = False,
        pod_update_events: Callable[[pb.Pod, pb.Pod], list[ClusterEvent]] = pod_scheduling_properties_change,
        namespace_labels: NamespaceLabels | None = None,
        pod_info_factory: Callable[[pb.Pod], PodInfo] = PodInfo,
        on_incoming: IncomingRecorder | None = None,
    ) -> None:
        self._clock = clock
        self._max_in_unschedulable = pod_max_in_unschedulable_pods_duration
        self._hints = _flatten(queueing_hints or {})
        self._hints_per_profile = {k: _flatten(v) for k, v in (queueing_hints_per_profile or {}).items()}
        self._interest: dict[ClusterEvent, bool] = {}
        self._pre_enqueue: Mapping[str, PreEnqueueFn] = dict(pre_enqueue or {})
        self._pre_enqueue_per_profile = {k: dict(v) for k, v in (pre_enqueue_per_profile or {}).items()}
        self._plugin_events: dict[str, list[ClusterEvent]] = {}
        for hint in [*self._hints, *(h for hs in self._hints_per_profile.values() for h in hs)]:
            self._plugin_events.setdefault(hint.plugin, []).append(hint.event)
        self._pop_from_backoff = pop_from_backoff
        self._pod_update_events = pod_update_events
        self._namespace_labels = namespace_labels
        self._pod_info_factory = pod_info_factory
        self._on_incoming = on_incoming

        self._active = ActiveQueue(less)
        self._backoff = BackoffQueue(clock, pod_initial_backoff, pod_max_backoff, less, pop_from_backoff)
        self._unschedulable = UnschedulablePods()
        # In-flight pods deleted meanwhile (never requeue them) and their newest objects.
        self._deleted_in_flight: set[str] = set()
        self._latest_in_flight: dict[str, pb.Pod] = {}
        # Pods nominated to nodes by preemption (upstream PriorityQueue embeds its nominator).
        self.nominator = Nominator()
        self._closed = False
        self._wakeup = asyncio.Event()
        self._stop = asyncio.Event()

    # ================================================================ pod lifecycle

    def add(self, pod: pb.Pod) -> None:
        """A new unscheduled pod: to activeQ (or gated into unschedulablePods)."""
        if self._active.add_events_if_pod_in_flight(None, pod, [EVENT_UNSCHEDULED_POD_ADD]):
            self._latest_in_flight[pod.metadata.uid] = pod
            return
        pinfo = self._new_queued_pod_info(pod)
        if pod.status.nominated_node_name:
            self.nominator.add_nominated_pod(pinfo.pod_info)
        if self._move_to_active_q(pinfo, event_label(EVENT_UNSCHEDULED_POD_ADD)):
            self._broadcast()

    def update(self, old: pb.Pod | None, new: pb.Pod) -> None:
        """An unscheduled pod changed (upstream ``Update``).

        In activeQ/backoffQ it is updated in place. In unschedulablePods the update is offered to
        the rejecting plugins' hints as the events it amounts to (labels, scale-down, gates
        removed, tolerations, or a plain update) and may move the pod. In flight, the events are
        logged for its return. Unknown pods are added to activeQ.
        """
        events = self._pod_update_events(new, old) if old is not None else [EVENT_UNSCHEDULED_POD_UPDATE]
        if self.nominator.has_nominated_pods() or new.status.nominated_node_name:
            self.nominator.update_nominated_pod(old if old is not None else new, self._pod_info_factory(new))
        if self._active.add_events_if_pod_in_flight(old, new, events):
            self._latest_in_flight[new.metadata.uid] = new
            return
        key = _pod_key(old if old is not None else new)  # names are immutable; either will do
        pinfo = self._active.heap.get_by_key(key)
        if pinfo is not None:
            pinfo.pod_info = self._pod_info_factory(new)
            self._active.heap.add_or_update(pinfo)
            return
        pinfo = self._backoff.get_by_key(key)
        if pinfo is not None:
            pinfo.pod_info = self._pod_info_factory(new)
            self._backoff.replace(pinfo)
            return
        pinfo = self._unschedulable.get(key)
        if pinfo is not None:
            pinfo.pod_info = self._pod_info_factory(new)
            self._unschedulable[key] = pinfo  # the new pod decides which pods it is listed among
            for event in events:
                strategy = self._is_pod_worth_requeuing(pinfo, event, old, new)
                queue = self._requeue(pinfo, strategy, event_label(event))
                if queue != UNSCHEDULABLE_Q:
                    if queue == ACTIVE_Q or (self._pop_from_backoff and queue == BACKOFF_Q):
                        self._broadcast()
                    break
            return
        if self._move_to_active_q(self._new_queued_pod_info(new), event_label(EVENT_UNSCHEDULED_POD_UPDATE)):
            self._broadcast()

    def delete(self, pod: pb.Pod) -> None:
        """The pod is gone (deleted, or now assigned): drop it from wherever it is."""
        self.nominator.delete_nominated_pod_if_exists(pod)
        key = _pod_key(pod)
        if self._active.heap.delete_by_key(key) is not None:
            return
        if self._backoff.delete_by_key(key) is not None:
            return
        if self._unschedulable.pop(key, None) is not None:
            return
        if self._active.is_in_flight(pod.metadata.uid):
            self._deleted_in_flight.add(pod.metadata.uid)

    def activate(self, pods: Iterable[pb.Pod] | Mapping[str, pb.Pod]) -> None:
        """Move the given pods from unschedulablePods/backoffQ to activeQ (plugins call this).

        A pod in flight gets a ForceActivate event logged, so it is requeued when it comes back;
        unknown pods are ignored.
        """
        activated = False
        for pod in pods.values() if isinstance(pods, Mapping) else pods:
            if self._activate_one(pod):
                activated = True
                continue
            self._active.add_events_if_pod_in_flight(None, pod, [EVENT_FORCE_ACTIVATE])
        if activated:
            self._broadcast()

    def _activate_one(self, pod: pb.Pod) -> bool:
        key = _pod_key(pod)
        from_backoff = False
        pinfo = self._unschedulable.get(key)
        if pinfo is None:
            pinfo = self._backoff.delete_by_key(key)
            if pinfo is None:
                return False
            from_backoff = True
        return self._move_to_active_q(pinfo, FORCE_ACTIVATE, from_backoff=from_backoff)

    # ================================================================ scheduling attempts

    async def pop(self) -> QueuedPodInfo | None:
        """Wait for and take the head of activeQ; None once the queue is closed and empty.

        The pod becomes in flight: ``attempts`` is incremented, its rejecting plugins are
        cleared for the new attempt, and the scheduling cycle advances. The caller must end the
        attempt with ``add_unschedulable_if_not_present`` (failure) or ``done`` (bound/dropped).
        """
        while True:
            pinfo = self.try_pop()
            if pinfo is not None:
                return pinfo
            if self._closed:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()

    def try_pop(self) -> QueuedPodInfo | None:
        """``pop`` without waiting: None if there is nothing to pop."""
        while True:
            pinfo = self._active.heap.pop()
            from_backoff = False
            if pinfo is None and self._pop_from_backoff:
                pinfo = self._backoff.pop_backoff()
                from_backoff = True
            if pinfo is None:
                return None
            if not self._active.move_to_in_flight(pinfo):
                log.error("discarding popped pod %s: it is already in flight", pinfo.key)
                continue
            if from_backoff:
                self._record(ACTIVE_Q, POP_FROM_BACKOFF_Q)
            pinfo.attempts += 1
            pinfo.backoff_expiration = None
            pinfo.unschedulable_plugins = set()
            pinfo.pending_plugins = set()
            if pinfo.initial_attempt_timestamp is None:
                pinfo.initial_attempt_timestamp = self._clock()
            return pinfo

    def done(self, pod_uid: str) -> None:
        """The attempt for this pod is over (bound, dropped, or requeued)."""
        self._active.done(pod_uid)
        self._deleted_in_flight.discard(pod_uid)
        self._latest_in_flight.pop(pod_uid, None)

    def add_unschedulable_if_not_present(
        self, pinfo: QueuedPodInfo, pod_scheduling_cycle: int | None = None
    ) -> None:
        """Requeue a pod whose attempt failed (upstream ``AddUnschedulableIfNotPresent``).

        Rejected by plugins (``unschedulable_plugins``/``pending_plugins``): to
        unschedulablePods, unless an event logged during the attempt is one a rejector's hint
        answers QUEUE, in which case to backoffQ/activeQ. Failed with an error (no rejector): to
        backoffQ. Ends the in-flight state either way. ``pod_scheduling_cycle`` is accepted for
        upstream's signature; with queueing hints the event log replaces it.

        Raises QueueError if the pod is already queued (the queued copy wins).
        """
        uid = pinfo.pod.metadata.uid
        try:
            if uid in self._deleted_in_flight:
                log.info("not requeueing pod %s: it was deleted during its attempt", pinfo.key)
                return
            latest = self._latest_in_flight.get(uid)
            if latest is not None:
                pinfo.pod_info = self._pod_info_factory(latest)
            key = pinfo.key
            for name, present in (
                (UNSCHEDULABLE_Q, key in self._unschedulable),
                (ACTIVE_Q, key in self._active.heap),
                (BACKOFF_Q, self._backoff.has_key(key)),
            ):
                if present:
                    raise QueueError(f"pod {key} is already present in the {name} queue")
            if not pinfo.unschedulable_plugins and not pinfo.pending_plugins:
                pinfo.consecutive_errors_count += 1
            else:
                pinfo.unschedulable_count += 1
                pinfo.consecutive_errors_count = 0
            pinfo.timestamp = self._clock()
            pinfo.backoff_expiration = None
            strategy = self._scheduling_hint_for_in_flight_pod(pinfo)
            queue = self._requeue(pinfo, strategy, SCHEDULE_ATTEMPT_FAILURE)
            if queue == ACTIVE_Q or (self._pop_from_backoff and queue == BACKOFF_Q):
                self._broadcast()
        finally:
            self.done(uid)

    def _scheduling_hint_for_in_flight_pod(self, pinfo: QueuedPodInfo) -> _Strategy:
        if not pinfo.unschedulable_plugins and not pinfo.pending_plugins:
            # Failed with an error: retry after backoff, or it would wait for the next flush.
            return _Strategy.AFTER_BACKOFF
        events = self._active.cluster_events_for_pod(pinfo.pod.metadata.uid)
        if events is None:
            log.error("pod %s requeued but not in flight; queueing after backoff", pinfo.key)
            return _Strategy.AFTER_BACKOFF
        strategy = _Strategy.SKIP
        for e in events:
            s = self._is_pod_worth_requeuing(pinfo, e.event, e.old_obj, e.new_obj)
            if s == _Strategy.IMMEDIATELY:
                return s
            if s == _Strategy.AFTER_BACKOFF:
                strategy = s
                if not pinfo.pending_plugins:
                    return s
        return strategy

    # ================================================================ cluster events

    def move_all_to_active_or_backoff(
        self, event: ClusterEvent, old_obj: Any = None, new_obj: Any = None, pre_check: PreCheck | None = None
    ) -> None:
        """A cluster event happened: move the unschedulable pods it may help (upstream
        ``MoveAllToActiveOrBackoffQueue``). ``pre_check`` narrows the candidates first."""
        if not self._is_event_of_interest(event):
            return
        pods = self._unschedulable.offered_for(event, pre_check)
        self._move_pods(pods, event, old_obj, new_obj)

    def assigned_pod_added(self, pod: pb.Pod) -> None:
        """A bound pod appeared: only pods it could satisfy (pod affinity / topology spread in
        its namespace) are considered."""
        self._move_pods(self._cross_topology_candidates(pod), EVENT_ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(
        self, old: pb.Pod | None, new: pb.Pod, event: ClusterEvent | None = None
    ) -> None:
        """A bound pod changed. A request scale-down may help any pod (resources freed); other
        changes only cross-topology candidates. Without ``event``, the update is classified."""
        if event is not None:
            events = [event]
        elif old is not None:
            events = self._pod_update_events(new, old)
        else:
            events = [EVENT_ASSIGNED_POD_UPDATE]
        for ev in events:
            if _SCALE_DOWN.matches(ev):
                self.move_all_to_active_or_backoff(ev, old, new)
            else:
                self._move_pods(self._cross_topology_candidates(new), ev, old, new)

    def assigned_pod_deleted(self, pod: pb.Pod) -> None:
        self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)

    def _cross_topology_candidates(self, pod: pb.Pod) -> list[QueuedPodInfo]:
        return [
            p
            for p in self._unschedulable.cross_topology_candidates()
            if rejected_by_cross_topology_term(p, pod, self._namespace_labels)
        ]

    def _move_pods(self, pods: list[QueuedPodInfo], event: ClusterEvent, old_obj: Any, new_obj: Any) -> None:
        if not self._is_event_of_interest(event):
            return
        activated = False
        label = event_label(event)
        for pinfo in pods:
            if pinfo.gated and not any(e.matches(event) for e in pinfo.gating_plugin_events):
                # Only an event its gating plugin registered can let a gated pod through.
                continue
            strategy = self._is_pod_worth_requeuing(pinfo, event, old_obj, new_obj)
            if strategy == _Strategy.SKIP:
                continue
            self._unschedulable.pop(pinfo.key, None)
            queue = self._requeue(pinfo, strategy, label)
            if queue == ACTIVE_Q or (self._pop_from_backoff and queue == BACKOFF_Q):
                activated = True
        # Pods in flight did not see this event; they will replay it if they come back.
        self._active.add_event_if_any_in_flight(old_obj, new_obj, event)
        if activated:
            self._broadcast()

    def _hints_for(self, pod: pb.Pod) -> list[_Hint]:
        return self._hints_per_profile.get(pod.spec.scheduler_name, self._hints)

    def _is_event_of_interest(self, event: ClusterEvent) -> bool:
        known = self._interest.get(event)
        if known is None:  # the hints are fixed at construction, so the answer is per event
            known = self._interest[event] = is_wildcard(event) or any(
                h.event.matches(event) for hs in [self._hints, *self._hints_per_profile.values()] for h in hs
            )
        return known

    def _is_pod_worth_requeuing(
        self, pinfo: QueuedPodInfo, event: ClusterEvent, old_obj: Any, new_obj: Any
    ) -> _Strategy:
        """Upstream ``isPodWorthRequeuing``: ask the hints of the plugins that rejected the pod.

        No rejector: AFTER_BACKOFF. Wildcard event: AFTER_BACKOFF, unless it names another pod.
        Otherwise the hints registered for a matching event by a rejecting plugin: a QUEUE from a
        Pending plugin means IMMEDIATELY, from an Unschedulable one AFTER_BACKOFF; all SKIP (or
        none registered) means SKIP.
        """
        rejectors = pinfo.unschedulable_plugins | pinfo.pending_plugins
        if not rejectors:
            return _Strategy.AFTER_BACKOFF
        if is_wildcard(event):
            if new_obj is not None and (
                not isinstance(new_obj, pb.Pod) or new_obj.metadata.uid != pinfo.pod.metadata.uid
            ):
                return _Strategy.SKIP  # a wildcard aimed at another pod (ForceActivate)
            return _Strategy.AFTER_BACKOFF
        strategy = _Strategy.SKIP
        for hint in self._hints_for(pinfo.pod):
            if hint.plugin not in rejectors or not hint.event.matches(event):
                continue
            if hint.fn is None:
                verdict = QueueingHint.QUEUE
            else:
                try:
                    verdict = hint.fn(pinfo.pod, old_obj, new_obj)
                except Exception:
                    log.exception(
                        "queueing hint of %s failed for pod %s on %s; treating as Queue",
                        hint.plugin,
                        pinfo.key,
                        event_label(event),
                    )
                    verdict = QueueingHint.QUEUE
            if verdict == QueueingHint.SKIP:
                continue
            if hint.plugin in pinfo.pending_plugins:
                return _Strategy.IMMEDIATELY
            if not pinfo.pending_plugins:
                return _Strategy.AFTER_BACKOFF
            strategy = _Strategy.AFTER_BACKOFF
        return strategy

    # ================================================================ moving between queues

    def _requeue(self, pinfo: QueuedPodInfo, strategy: _Strategy, event: str) -> str:
        """Upstream ``requeuePodWithQueueingStrategy``; returns the queue the pod went to."""
        if strategy == _Strategy.SKIP:
            self._add_unschedulable(pinfo, event)
            return UNSCHEDULABLE_Q
        if strategy == _Strategy.AFTER_BACKOFF and self._backoff.is_pod_backing_off(pinfo):
            return BACKOFF_Q if self._move_to_backoff_q(pinfo, event) else UNSCHEDULABLE_Q
        # IMMEDIATELY, or its backoff is already over.
        return ACTIVE_Q if self._move_to_active_q(pinfo, event) else UNSCHEDULABLE_Q

    def _move_to_active_q(self, pinfo: QueuedPodInfo, event: str, *, from_backoff: bool = False) -> bool:
        """To activeQ unless a PreEnqueue plugin holds the pod (then to unschedulablePods, gated).

        With pop-from-backoff, PreEnqueue already ran when the pod entered backoffQ.
        """
        if not (self._pop_from_backoff and from_backoff):
            self._run_pre_enqueue(pinfo)
        key = pinfo.key
        if pinfo.gated:
            if key in self._unschedulable:
                self._unschedulable[key] = pinfo  # still held, perhaps by another plugin: refile it
                return False
            if key in self._active.heap or self._backoff.has_key(key):
                return False
            self._add_unschedulable(pinfo, event)
            return False
        if pinfo.initial_attempt_timestamp is None:
            pinfo.initial_attempt_timestamp = self._clock()
        self._unschedulable.pop(key, None)
        self._backoff.delete_by_key(key)
        self._active.heap.add_or_update(pinfo)
        self._record(ACTIVE_Q, event)
        return True

    def _move_to_backoff_q(self, pinfo: QueuedPodInfo, event: str) -> bool:
        if self._pop_from_backoff:
            # It may be popped straight from backoffQ, so it must pass PreEnqueue now.
            self._run_pre_enqueue(pinfo)
            if pinfo.gated:
                if pinfo.key not in self._unschedulable:
                    self._add_unschedulable(pinfo, event)
                else:
                    self._unschedulable[pinfo.key] = pinfo  # still held: refile it
                return False
        self._unschedulable.pop(pinfo.key, None)
        self._backoff.add(pinfo)
        self._record(BACKOFF_Q, event)
        return True

    def _add_unschedulable(self, pinfo: QueuedPodInfo, event: str) -> None:
        if pinfo.key not in self._unschedulable:
            self._record(UNSCHEDULABLE_Q, event)
        self._unschedulable[pinfo.key] = pinfo

    def _run_pre_enqueue(self, pinfo: QueuedPodInfo) -> None:
        """Run PreEnqueue plugins, the one currently gating the pod first; the first that
        rejects becomes the gating plugin and a rejector (upstream ``runPreEnqueuePlugins``)."""
        plugins = self._pre_enqueue_per_profile.get(pinfo.pod.spec.scheduler_name, self._pre_enqueue)
        gating = pinfo.gating_plugin
        if gating and gating in plugins and not self._run_pre_enqueue_plugin(gating, plugins[gating], pinfo):
            return
        for name, fn in plugins.items():
            if name == gating:
                continue
            if not self._run_pre_enqueue_plugin(name, fn, pinfo):
                return
        pinfo.gating_plugin = ""
        pinfo.gating_plugin_events = []
        pinfo.gated = False

    def _run_pre_enqueue_plugin(self, name: str, fn: PreEnqueueFn, pinfo: QueuedPodInfo) -> bool:
        try:
            status = fn(pinfo.pod_info)
        except Exception as exc:
            log.exception("PreEnqueue plugin %s failed for pod %s", name, pinfo.key)
            status = Status.error(str(exc))
        if status is None or status.is_success():
            return True
        pinfo.unschedulable_plugins.add(name)
        pinfo.gating_plugin = name
        pinfo.gating_plugin_events = list(self._plugin_events.get(name, []))
        pinfo.gated = True
        return False

    # ================================================================ periodic work

    def flush_backoff_completed(self) -> None:
        """Move pods whose backoff has ended to activeQ (upstream runs this every second)."""
        activated = False
        for pinfo in self._backoff.pop_all_backoff_completed():
            if self._move_to_active_q(pinfo, BACKOFF_COMPLETE, from_backoff=True):
                activated = True
        if activated:
            self._broadcast()

    def flush_unschedulable_pods_leftover(self) -> None:
        """Give pods that waited longer than ``pod_max_in_unschedulable_pods_duration`` in
        unschedulablePods another try (upstream runs this every 30 s)."""
        now = self._clock()
        leftover = [p for p in self._unschedulable.values() if now - p.timestamp > self._max_in_unschedulable]
        if leftover:
            self._move_pods(leftover, EVENT_UNSCHEDULABLE_TIMEOUT, None, None)

    async def run(
        self,
        *,
        backoff_flush_interval: float = BACKOFF_FLUSH_INTERVAL,
        unschedulable_flush_interval: float = UNSCHEDULABLE_FLUSH_INTERVAL,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        """Run both periodic flushes until ``close()``. ``sleep`` replaces the wait between runs
        (tests pass one that advances a fake clock)."""

        async def every(interval: float, flush: Callable[[], None]) -> None:
            while not self._closed:
                if sleep is not None:
                    await sleep(interval)
                else:
                    try:
                        await asyncio.wait_for(self._stop.wait(), interval)
                    except TimeoutError:
                        pass
                if self._closed:
                    return
                flush()

        async with asyncio.TaskGroup() as tg:
            tg.create_task(every(backoff_flush_interval, self.flush_backoff_completed))
            tg.create_task(every(unschedulable_flush_interval, self.flush_unschedulable_pods_leftover))

    def close(self) -> None:
        """Stop: waiting ``pop()`` calls return None, ``run()`` ends, in-flight state is
        dropped (as upstream, which calls done() for every in-flight pod)."""
        self._closed = True
        self._active.done_all()
        self._deleted_in_flight.clear()
        self._latest_in_flight.clear()
        self._stop.set()
        self._broadcast()

    @property
    def closed(self) -> bool:
        return self._closed

    # ================================================================ introspection

    @property
    def scheduling_cycle(self) -> int:
        return self._active.scheduling_cycle

    def pending_pods(self) -> dict[str, int]:
        """Counts per queue, for ``scheduler_pending_pods{queue}``."""
        gated = sum(1 for p in self._unschedulable.values() if p.gated)
        return {
            ACTIVE_Q: len(self._active.heap),
            BACKOFF_Q: len(self._backoff),
            UNSCHEDULABLE_Q: len(self._unschedulable) - gated,
            GATED: gated,
        }

    def get_pod(self, name: str, namespace: str) -> QueuedPodInfo | None:
        key = object_key(namespace, name)
        return (
            self._backoff.get_by_key(key) or self._unschedulable.get(key) or self._active.heap.get_by_key(key)
        )

    def pods_in_active_q(self) -> list[pb.Pod]:
        return [p.pod for p in self._active.heap.items()]

    def pods_in_backoff_q(self) -> list[pb.Pod]:
        return [p.pod for p in self._backoff.pod_infos()]

    def unschedulable_pods(self) -> list[pb.Pod]:
        return [p.pod for p in self._unschedulable.values()]

    def in_flight_pods(self) -> list[pb.Pod]:
        return self._active.in_flight_pods()

    def in_flight_events(self) -> list[pb.Pod | ClusterEvent]:
        """The in-flight log: pods (at their pop) and events, oldest first."""
        return self._active.in_flight_log()

    def where(self, key: str) -> list[str]:
        """Every place the pod ``namespace/name`` is in (for invariant checks): a subset of
        active, backoff, unschedulable; in-flight pods are reported by ``in_flight_pods``."""
        places = []
        if key in self._active.heap:
            places.append(ACTIVE_Q)
        if self._backoff.has_key(key):
            places.append(BACKOFF_Q)
        if key in self._unschedulable:
            places.append(UNSCHEDULABLE_Q)
        return places

    def pending_events_for(self, pod_uid: str) -> list[InFlightEvent] | None:
        return self._active.cluster_events_for_pod(pod_uid)

    # ================================================================ helpers

    def _new_queued_pod_info(self, pod: pb.Pod, *plugins: str) -> QueuedPodInfo:
        return QueuedPodInfo(
            pod_info=self._pod_info_factory(pod), timestamp=self._clock(), unschedulable_plugins=set(plugins)
        )

    def _broadcast(self) -> None:
        self._wakeup.set()

    def _record(self, queue: str, event: str) -> None:
        if self._on_incoming is not None:
            self._on_incoming(queue, event)
