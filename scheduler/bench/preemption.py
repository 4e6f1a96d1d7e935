"""The API side of preemption for the in-process throughput bench (what `APIPreemptionExecutor`
does against the API server, done to the bench's own cache and queue).

A victim is deleted at once: removed from the cache, and an AssignedPodDelete offered to the
queue (as the informer's Delete would), which requeues the pods it may help, the preemptor among
them (its NodeResourcesFit rejection). The work runs as asyncio tasks, like the scheduler's, so
that the preemptor is held at PreEnqueue until its victims are gone (async preemption)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from kse.tasks import TaskSet
from proto import kse_pb2 as pb
from scheduler.cache.cache import Cache
from scheduler.queue.scheduling_queue import EVENT_ASSIGNED_POD_DELETE, PriorityQueue


class CachePreemptionExecutor:
    """A `scheduler.framework.preemption.PreemptionExecutor` over the bench's cache and queue."""

    def __init__(self, cache: Cache, queue: PriorityQueue) -> None:
        self.cache = cache
        self.queue = queue
        # Every pod of the bench not deleted, by (namespace, name): the "informer".
        self.pods: dict[tuple[str, str], pb.Pod] = {}
        self._owner = TaskSet("bench-preemption")
        # Preparations still running (what the loop waits for when it has nothing to pop).
        self.tasks: set[asyncio.Task[None]] = set()
        self.victims = 0

    def track(self, pod: pb.Pod) -> None:
        self.pods[(pod.metadata.namespace, pod.metadata.name)] = pod

    def pod_disruption_budgets(self) -> Sequence[pb.PodDisruptionBudget]:
        return ()

    def get_pod(self, namespace: str, name: str) -> pb.Pod | None:
        return self.pods.get((namespace, name))

    async def preempt_pod(self, node_name: str, preemptor: pb.Pod, victim: pb.Pod, plugin: str) -> None:
        if self.pods.pop((victim.metadata.namespace, victim.metadata.name), None) is None:
            return  # already gone
        self.cache.remove_pod(victim)
        self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, victim, None)
        self.victims += 1

    async def clear_nominated_node_name(self, pods: Sequence[pb.Pod]) -> None:
        for pod in pods:
            pod.status.nominated_node_name = ""
            self.queue.nominator.delete_nominated_pod_if_exists(pod)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = self._owner.spawn(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def aclose(self) -> None:
        """Cancel and await the preparations still running."""
        await self._owner.aclose()

    def activate(self, pods: Sequence[pb.Pod]) -> None:
        self.queue.activate(pods)
