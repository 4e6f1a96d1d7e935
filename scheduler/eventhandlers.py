"""Informer event handlers: which pods go to the scheduling queue and which to the cache, and the
cluster events the queue hears (upstream ``pkg/scheduler/eventhandlers.go``, queueing hints on).

Pods (one informer over every pod that is not terminal, as upstream's
``status.phase!=Succeeded,status.phase!=Failed``):

* an *assigned* pod (``spec.nodeName`` set), whoever scheduled it, is in the cache: add, update,
  delete; each change is also a cluster event for the queue (AssignedPod Add / the update's
  specific events / Delete), so pods waiting for resources or for an affine pod are retried;
* an *unassigned* pod whose ``schedulerName`` is one of our profiles is in the queue: add,
  update, delete. An update from unassigned to assigned is the binding arriving: the pod goes to
  the cache (confirming our assumed pod) and leaves the queue;
* a pod we assumed and whose binding is still in flight is in neither: its updates are ignored,
  except a deletion, which rejects it at Permit or forgets it in the cache at once so its
  resources are free for others (upstream handleAssumedPodDeletion).

Nodes: the cache, plus NodeAdd / NodeDelete and, for updates, the events of
``node_scheduling_properties_change`` (allocatable, labels, taints, conditions, annotations,
unschedulable lifted), each offered to the queue.

Pods with ``spec.nodeName`` set are never queued. Handlers run on the informer's coroutine, in
delivery order; a failure is logged and never stops the informer.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from kse.objects.podresources import resource_list_units
from proto import kse_pb2 as pb
from scheduler.cache.cache import Cache, CacheError
from scheduler.framework.types import ActionType, ClusterEvent, EventResource
from scheduler.queue.pod_events import pod_scheduling_properties_change
from scheduler.queue.scheduling_queue import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_ASSIGNED_POD_UPDATE,
    EVENT_UNSCHEDULED_POD_ADD,
    EVENT_UNSCHEDULED_POD_DELETE,
    EVENT_UNSCHEDULED_POD_UPDATE,
    PriorityQueue,
    event_label,
)

if TYPE_CHECKING:
    from kse.client.informer import HandlerRegistration, Informer
    from scheduler.framework.runtime import Framework
    from scheduler.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

# The scheduler's pod informer leaves out terminal pods (upstream scheduler.NewInformerFactory).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

EVENT_NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
EVENT_NODE_DELETE = ClusterEvent(EventResource.NODE, ActionType.DELETE)


_label = functools.lru_cache(maxsize=512)(event_label)


def assigned_pod(pod: pb.Pod) -> bool:
    return bool(pod.spec.node_name)


def node_scheduling_properties_change(new: pb.Node, old: pb.Node) -> list[ClusterEvent]:
    """The events a node update amounts to (upstream framework.NodeSchedulingPropertiesChange)."""
    actions: list[ActionType] = []
    if new.spec.unschedulable != old.spec.unschedulable and not new.spec.unschedulable:
        # Upstream reports the lifted unschedulable flag as a taint change.
        actions.append(ActionType.UPDATE_NODE_TAINT)
    if new.status.allocatable != old.status.allocatable and resource_list_units(
        new.status.allocatable
    ) != resource_list_units(old.status.allocatable):
        actions.append(ActionType.UPDATE_NODE_ALLOCATABLE)
    if new.metadata.labels != old.metadata.labels:
        actions.append(ActionType.UPDATE_NODE_LABEL)
    if list(new.spec.taints) != list(old.spec.taints):
        actions.append(ActionType.UPDATE_NODE_TAINT)
    if _condition_statuses(new) != _condition_statuses(old):
        actions.append(ActionType.UPDATE_NODE_CONDITION)
    if new.metadata.annotations != old.metadata.annotations:
        actions.append(ActionType.UPDATE_NODE_ANNOTATION)
    return [ClusterEvent(EventResource.NODE, a) for a in dict.fromkeys(actions)]


def _condition_statuses(node: pb.Node) -> dict[str, str]:
    return {c.type: c.status for c in node.status.conditions}


class EventHandlers:
    """The handlers of the scheduler's pod and node informers (see the module doc)."""

    def __init__(
        self,
        *,
        cache: Cache,
        queue: PriorityQueue,
        profiles: Mapping[str, Framework] | Collection[str],
        metrics: SchedulerMetrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self._profiles = profiles
        self._metrics = metrics
        self._clock = clock

    def responsible_for(self, pod: pb.Pod) -> bool:
        """Whether one of our profiles schedules this pod (upstream responsibleForPod)."""
        return pod.spec.scheduler_name in self._profiles

    def register(self, pods: Informer[pb.Pod], nodes: Informer[pb.Node]) -> list[HandlerRegistration[Any]]:
        return [
            pods.add_event_handler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod),
            nodes.add_event_handler(
                on_add=self.add_node, on_update=self.update_node, on_delete=self.delete_node
            ),
        ]

    def _observe(self, event: ClusterEvent, start: float) -> None:
        if self._metrics is not None:
            self._metrics.event_handling_duration.observe(self._clock() - start, _label(event))

    # ---------------------------------------------------------------- nodes

    def add_node(self, node: pb.Node) -> None:
        start = self._clock()
        log.debug("add event for node %s", node.metadata.name)
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node)
        self._observe(EVENT_NODE_ADD, start)

    def update_node(self, old: pb.Node, new: pb.Node) -> None:
        start = self._clock()
        self.cache.update_node(old, new)
        for event in node_scheduling_properties_change(new, old):
            self.queue.move_all_to_active_or_backoff(event, old, new)
            self._observe(event, start)

    def delete_node(self, node: pb.Node) -> None:
        start = self._clock()
        log.debug("delete event for node %s", node.metadata.name)
        self.queue.move_all_to_active_or_backoff(EVENT_NODE_DELETE, node, None)
        try:
            self.cache.remove_node(node)
        except CacheError as e:
            log.error("scheduler cache RemoveNode failed: %s", e)
        self._observe(EVENT_NODE_DELETE, start)

    # ---------------------------------------------------------------- pods

    def add_pod(self, pod: pb.Pod) -> None:
        if assigned_pod(pod):
            self._add_assigned(pod)
        elif self.responsible_for(pod):
            start = self._clock()
            log.debug("add event for unscheduled pod %s/%s", pod.metadata.namespace, pod.metadata.name)
            self.queue.add(pod)
            self._observe(EVENT_UNSCHEDULED_POD_ADD, start)

    def update_pod(self, old: pb.Pod, new: pb.Pod) -> None:
        if assigned_pod(old):
            self._update_assigned(old, new)
        elif assigned_pod(new):
            # The binding arrived: the pod joins the cache (confirming our assumed pod) ...
            self._add_assigned(new)
            if self.responsible_for(old):
                # ... and leaves the queue; not a removal from the cluster, so nothing else moves.
                self.queue.delete(old)
        elif self.responsible_for(old):
            self._update_unscheduled(old, new)

    def delete_pod(self, pod: pb.Pod) -> None:
        if assigned_pod(pod):
            self._delete_assigned(pod)
            return
        cached = self.cache.get_pod(pod)
        if cached is not None and not self.cache.is_assumed_pod(pod):
            # A stale last-known state (a relist found the pod gone): it had been bound meanwhile.
            self._delete_assigned(pod)
        if self.responsible_for(pod):
            start = self._clock()
            self.queue.delete(pod)
            if self.cache.is_assumed_pod(pod):
                self.handle_assumed_pod_deletion(pod)
            self._observe(EVENT_UNSCHEDULED_POD_DELETE, start)

    def _update_unscheduled(self, old: pb.Pod, new: pb.Pod) -> None:
        # Identical objects (a resync) must not requeue the pod (upstream #96071).
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        start = self._clock()
        if self.cache.is_assumed_pod(new):
            # Its binding is in flight: the update is ours to ignore, unless the pod is going away.
            if new.metadata.deletion_timestamp and not old.metadata.deletion_timestamp:
                self.handle_assumed_pod_deletion(new)
            return
        self.queue.update(old, new)
        self._observe(EVENT_UNSCHEDULED_POD_UPDATE, start)

    def handle_assumed_pod_deletion(self, pod: pb.Pod) -> None:
        """An assumed pod is being deleted: free its resources now rather than when its binding
        fails (upstream handleAssumedPodDeletion)."""
        cached = self.cache.get_pod(pod)
        if cached is None:
            return  # its binding cycle already finished and forgot it
        pod_info, node_name = cached
        fwk = self._framework_for(pod)
        rejected = fwk is not None and fwk.reject_waiting_pod(pod_info.uid_key)
        if not rejected:
            # Past Permit (in PreBind or Bind): the bind will fail, but free the resources now.
            try:
                self.cache.forget_pod(pod_info, node_name)
            except CacheError as e:
                log.error("scheduler cache ForgetPod failed: %s", e)
        self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod_info.pod, None)

    def _framework_for(self, pod: pb.Pod) -> Framework | None:
        profiles = self._profiles
        if isinstance(profiles, Mapping):
            return profiles.get(pod.spec.scheduler_name)
        return None

    # ---------------------------------------------------------------- assigned pods

    def _add_assigned(self, pod: pb.Pod) -> None:
        start = self._clock()
        try:
            self.cache.add_pod(pod)
        except CacheError as e:
            log.error("scheduler cache AddPod failed: %s", e)
        # With queueing hints every plugin's hint decides, not an in-tree pre-filter
        # (upstream addAssignedPodToCache).
        self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, None, pod)
        self._observe(EVENT_ASSIGNED_POD_ADD, start)

    def _update_assigned(self, old: pb.Pod, new: pb.Pod) -> None:
        start = self._clock()
        try:
            self.cache.update_pod(old, new)
        except CacheError as e:
            log.error("scheduler cache UpdatePod failed: %s", e)
        for event in pod_scheduling_properties_change(new, old):
            self.queue.move_all_to_active_or_backoff(event, old, new)
        self._observe(EVENT_ASSIGNED_POD_UPDATE, start)

    def _delete_assigned(self, pod: pb.Pod) -> None:
        start = self._clock()
        try:
            self.cache.remove_pod(pod)
        except CacheError as e:
            log.error("scheduler cache RemovePod failed: %s", e)
        self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)
        self._observe(EVENT_ASSIGNED_POD_DELETE, start)
