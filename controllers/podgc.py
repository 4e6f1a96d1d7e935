"""podgc: deletes pods nobody else will: orphans of deleted nodes, terminated pods beyond the
threshold, and unscheduled pods already being deleted.

Upstream: pkg/controller/podgc/gc_controller.go. Every `pod_gc_period_s` (gcCheckPeriod, 20 s):

* **terminated** (`--terminated-pod-gc-threshold`, 12500; 0 disables): when more pods are
  Succeeded/Failed than the threshold, the excess is deleted, evicted pods first, then oldest
  first by creationTimestamp, name as tie-breaker (byEvictionAndCreationTimestamp);
* **orphaned**: a pod bound to a node the node informer does not have puts that node in
  quarantine (quarantineTime, 40 s); once the quarantine is over and the node is still absent
  from the informer *and* a GET confirms it is gone, its pods are marked Failed with the
  DisruptionTarget condition (reason DeletionByPodGC) and deleted;
* **unscheduled terminating**: a pod with a deletionTimestamp and no node is deleted.

Not modelled: the out-of-service taint pass (gcTerminating). Deletes carry the pod's uid as
precondition and grace 0 (a forced delete, as upstream: no kubelet is left to finish a graceful
one) and every write the term's fence.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import ClassVar

from controllers.base import ControllerContext
from controllers.podutil import DISRUPTION_TARGET, POD_FAILED, is_terminal, update_condition
from kse.client.errors import ApiError, ConflictError, FencedError, NotFoundError
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

GC_REASON = "DeletionByPodGC"
GC_MESSAGE = "PodGC: node no longer exists"


def is_evicted(pod: pb.Pod) -> bool:
    """eviction.PodIsEvicted: Failed with reason Evicted."""
    return pod.status.phase == POD_FAILED and pod.status.reason == "Evicted"


def terminated_to_delete(pods: Iterable[pb.Pod], threshold: int) -> list[pb.Pod]:
    """gcTerminated's choice: the terminated pods beyond `threshold`, evicted first, then oldest."""
    if threshold <= 0:
        return []
    terminated = [p for p in pods if is_terminal(p)]
    excess = len(terminated) - threshold
    if excess <= 0:
        return []
    terminated.sort(key=lambda p: (not is_evicted(p), p.metadata.creation_timestamp, p.metadata.name))
    return terminated[:excess]


def unscheduled_terminating(pods: Iterable[pb.Pod]) -> list[pb.Pod]:
    return [p for p in pods if p.metadata.deletion_timestamp and not p.spec.node_name]


class Quarantine:
    """The delaying queue of nodes suspected gone (nodeQueue.AddAfter): a node is due
    `delay` seconds after it was first added; adding it again does not postpone it."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._due: dict[str, float] = {}

    def add(self, node: str, now: float) -> None:
        self._due.setdefault(node, now + self.delay)

    def pop_due(self, now: float) -> list[str]:
        out = sorted(n for n, t in self._due.items() if t <= now)
        for n in out:
            del self._due[n]
        return out

    def __contains__(self, node: object) -> bool:
        return node in self._due


class PodGCController:
    """See the module doc."""

    name: ClassVar[str] = "podgc"

    def __init__(self, ctx: ControllerContext, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.cs = ctx.clientset
        self.options = ctx.options
        self._clock = clock
        self.pods = ctx.informers.informer_for(ctx.clientset.pods)
        self.nodes = ctx.informers.informer_for(ctx.clientset.nodes)
        self.quarantine = Quarantine(self.options.pod_gc_quarantine_s)
        self.deleted = 0

    async def run(self) -> None:
        while True:
            await self.gc()
            await asyncio.sleep(self.options.pod_gc_period_s)

    async def gc(self) -> None:
        """One pass (gc): terminated, orphaned, unscheduled terminating."""
        pods = self.pods.store.list()
        for pod in terminated_to_delete(pods, self.options.terminated_pod_gc_threshold):
            await self._fail_and_delete(pod, None)
        await self._gc_orphaned(pods)
        for pod in unscheduled_terminating(pods):
            await self._fail_and_delete(pod, None)

    async def _gc_orphaned(self, pods: list[pb.Pod]) -> None:
        now = self._clock()
        existing = set(self.nodes.store.keys())
        for pod in pods:
            if pod.spec.node_name and pod.spec.node_name not in existing:
                self.quarantine.add(pod.spec.node_name, now)
        deleted: set[str] = set()
        for name in self.quarantine.pop_due(now):
            if name in self.nodes.store:
                continue
            try:
                await self.cs.nodes.get(name)
            except NotFoundError:
                deleted.add(name)
            except ApiError as e:
                log.info("podgc: cannot check node %s: %s", name, e.message)
        if not deleted:
            return
        cond = pb.PodCondition(type=DISRUPTION_TARGET, status="True", reason=GC_REASON, message=GC_MESSAGE)
        for pod in pods:
            if pod.spec.node_name in deleted:
                log.info(
                    "podgc: deleting pod %s/%s of deleted node %s",
                    pod.metadata.namespace,
                    pod.metadata.name,
                    pod.spec.node_name,
                )
                await self._fail_and_delete(pod, cond)

    async def _fail_and_delete(self, pod: pb.Pod, cond: pb.PodCondition | None) -> None:
        """markFailedAndDeletePodWithCondition: a pod not yet terminal becomes Failed (with the
        condition), then it is deleted."""
        ns, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
        try:
            if not is_terminal(pod):
                status = pb.PodStatus()
                status.CopyFrom(pod.status)
                status.phase = POD_FAILED
                if cond is not None:
                    update_condition(status, cond)
                update = pb.Pod(
                    metadata=pb.ObjectMeta(
                        name=name, namespace=ns, resource_version=pod.metadata.resource_version
                    ),
                    status=status,
                )
                await self.cs.pods.update_status(update, fence=self.ctx.fence())
            # Force (grace 0), as upstream: no kubelet is left to finish a graceful deletion.
            await self.cs.pods.delete(ns, name, uid=uid, grace_period_seconds=0, fence=self.ctx.fence())
            self.deleted += 1
        except (NotFoundError, ConflictError):
            return  # gone, or changed: the next pass sees the new state
        except FencedError:
            self.ctx.on_fenced(self.ctx.fence())  # another replica leads: the term ends
        except ApiError as e:
            log.info("podgc: deleting %s/%s failed: %s", ns, name, e.message)
