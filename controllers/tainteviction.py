"""taint-eviction-controller: deletes pods that do not tolerate their node's NoExecute taints.

Upstream: pkg/controller/tainteviction/taint_eviction.go and timed_workers.go. What it keeps:

* The controller remembers each node's NoExecute taints (`tainted_nodes`) and, on every node
  change that alters them and every pod change that alters its tolerations or node, decides per
  pod (`decide`, the pure part, unit-tested on upstream's cases):
  no taints -> cancel any scheduled eviction; a taint not tolerated -> evict now; every taint
  tolerated forever (no tolerationSeconds) -> cancel; else evict at the eviction's creation time
  + the smallest tolerationSeconds of the tolerations used (an eviction already scheduled keeps
  its time, as upstream's processPodOnNode does).
* Node updates are handled before pod updates (upstream's worker drains the node channel first).
* An eviction that fires re-reads the pod, adds the DisruptionTarget condition (reason
  DeletionByTaintManager) through pods/status, and deletes the pod (uid precondition; a graceful
  delete, as upstream's: on an unreachable node the pod stays Terminating until its kubelet
  returns or the node is deleted and podgc removes it), retried up to 5 times; a
  "TaintManagerEviction" event says "Marking for deletion Pod ns/name", and cancelling a
  scheduled one records "Cancelling deletion of Pod ns/name".
* A fired eviction leaves a marker (timed_workers.go keeps a nil worker) so the same pod is not
  evicted twice while its deletion travels back through the informer.

Every write carries the term's fence.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from controllers.base import ControllerContext
from controllers.eventsink import NORMAL, pod_ref, record
from controllers.podutil import DISRUPTION_TARGET, pod_key, update_condition
from kse.client.errors import ApiError, FencedError, NotFoundError
from kse.objects.taints import NO_EXECUTE, matching_tolerations, min_toleration_seconds
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

DELETE_RETRIES = 5
RETRY_PAUSE_S = 0.01
EVENT_REASON = "TaintManagerEviction"
CONDITION_REASON = "DeletionByTaintManager"
CONDITION_MESSAGE = "Taint manager: deleting due to NoExecute taint"
DELETE_WORKERS = 8


def no_execute_taints(node: pb.Node) -> list[pb.Taint]:
    return [t for t in node.spec.taints if t.effect == NO_EXECUTE]


@dataclass(frozen=True)
class Scheduled:
    """A scheduled eviction (timed_workers.go TimedWorker): when it was created, when it fires."""

    created_at: float
    fire_at: float


@dataclass(frozen=True)
class Decision:
    """What processPodOnNode does: "cancel", "evict" (now), "schedule" (at `fire_at`, created
    at `created_at`) or "keep" (the eviction already scheduled stands)."""

    action: str
    created_at: float = 0.0
    fire_at: float = 0.0


def decide(
    taints: list[pb.Taint], tolerations: list[pb.Toleration], now: float, scheduled: Scheduled | None
) -> Decision:
    """taint_eviction.go processPodOnNode, without the side effects."""
    if not taints:
        return Decision("cancel")
    all_tolerated, used = matching_tolerations(taints, tolerations)
    if not all_tolerated:
        return Decision("evict", now, now)
    seconds = min_toleration_seconds(used)
    if seconds is None:
        return Decision("cancel")
    trigger = now + seconds
    if scheduled is not None:
        if scheduled.created_at + seconds < trigger:
            return Decision("keep")
        return Decision("schedule", scheduled.created_at, trigger)
    return Decision("schedule", now, trigger)


class TaintEvictionController:
    """See the module doc."""

    name: ClassVar[str] = "taint-eviction-controller"

    def __init__(self, ctx: ControllerContext, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.cs = ctx.clientset
        self._clock = clock
        self.pods = ctx.informers.informer_for(ctx.clientset.pods)
        self.nodes = ctx.informers.informer_for(ctx.clientset.nodes)
        self.tainted_nodes: dict[str, list[pb.Taint]] = {}
        self.pods_on_node: dict[str, set[str]] = {}
        self.scheduled: dict[str, Scheduled] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._fired: set[str] = set()  # evicted; kept until the pod is gone (timed_workers' nil worker)
        self._node_queue: asyncio.Queue[str] = asyncio.Queue()
        self._pod_queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()  # (pod key, node name)
        self._due: asyncio.Queue[str] = asyncio.Queue()
        self._wake = asyncio.Event()
        self.evicted = 0
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.nodes.add_event_handler(self._node_added, self._node_updated, self._node_deleted)

    # -- informer handlers (synchronous: they only queue)

    def _index(self, pod: pb.Pod) -> None:
        if pod.spec.node_name:
            self.pods_on_node.setdefault(pod.spec.node_name, set()).add(pod_key(pod))

    def _unindex(self, pod: pb.Pod) -> None:
        keys = self.pods_on_node.get(pod.spec.node_name)
        if keys is not None:
            keys.discard(pod_key(pod))
            if not keys:
                del self.pods_on_node[pod.spec.node_name]

    def _pod_added(self, pod: pb.Pod) -> None:
        self._index(pod)
        self._queue_pod(pod_key(pod), pod.spec.node_name)

    def _pod_updated(self, old: pb.Pod, new: pb.Pod) -> None:
        if old.spec.node_name != new.spec.node_name:
            self._unindex(old)
        self._index(new)
        if old.spec.tolerations == new.spec.tolerations and old.spec.node_name == new.spec.node_name:
            return
        self._queue_pod(pod_key(new), new.spec.node_name)

    def _pod_deleted(self, pod: pb.Pod) -> None:
        self._unindex(pod)
        self._queue_pod(pod_key(pod), pod.spec.node_name)

    def _queue_pod(self, key: str, node: str) -> None:
        self._pod_queue.put_nowait((key, node))
        self._wake.set()

    def _node_added(self, node: pb.Node) -> None:
        self._queue_node(node.metadata.name)

    def _node_updated(self, old: pb.Node, new: pb.Node) -> None:
        if no_execute_taints(old) != no_execute_taints(new):
            self._queue_node(new.metadata.name)

    def _node_deleted(self, node: pb.Node) -> None:
        self._queue_node(node.metadata.name)

    def _queue_node(self, name: str) -> None:
        self._node_queue.put_nowait(name)
        self._wake.set()

    # -- the loop

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                for i in range(DELETE_WORKERS):
                    tg.create_task(self._delete_worker(), name=f"taint-eviction-delete-{i}")
                await self._process()
        finally:
            for handle in self._timers.values():
                handle.cancel()
            self._timers.clear()

    async def _process(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while not self._node_queue.empty() or not self._pod_queue.empty():
                while not self._node_queue.empty():
                    self.handle_node_update(self._node_queue.get_nowait())
                if not self._pod_queue.empty():
                    self.handle_pod_update(*self._pod_queue.get_nowait())

    def handle_node_update(self, name: str) -> None:
        node = self.nodes.store.get(name)
        if node is None:
            self.tainted_nodes.pop(name, None)
            return
        taints = no_execute_taints(node)
        if taints:
            self.tainted_nodes[name] = taints
        else:
            self.tainted_nodes.pop(name, None)
        keys = sorted(self.pods_on_node.get(name, ()))
        now = self._clock()
        for key in keys:
            pod = self.pods.store.get(key)
            if pod is None or pod.spec.node_name != name:
                continue
            if not taints:
                self._cancel(key)
                continue
            self._process_pod(key, list(pod.spec.tolerations), taints, now)

    def handle_pod_update(self, key: str, node_name: str) -> None:
        pod = self.pods.store.get(key)
        if pod is None:
            self._cancel(key)
            self._fired.discard(key)
            return
        if pod.spec.node_name != node_name or not node_name:
            return
        taints = self.tainted_nodes.get(node_name)
        if taints is None:
            return
        self._process_pod(key, list(pod.spec.tolerations), taints, self._clock())

    def _process_pod(
        self, key: str, tolerations: list[pb.Toleration], taints: list[pb.Taint], now: float
    ) -> None:
        d = decide(taints, tolerations, now, self.scheduled.get(key))
        if d.action == "keep":
            return
        self._cancel(key)
        if d.action in ("evict", "schedule"):
            self._add(key, d.created_at, d.fire_at)

    # -- timed work (timed_workers.go)

    def _add(self, key: str, created_at: float, fire_at: float) -> None:
        if key in self._fired or key in self.scheduled:
            return
        self.scheduled[key] = Scheduled(created_at, fire_at)
        delay = max(0.0, fire_at - self._clock())
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        if self.scheduled.pop(key, None) is None:
            return
        self._fired.add(key)
        self._due.put_nowait(key)

    def _cancel(self, key: str) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()
        if self.scheduled.pop(key, None) is not None:
            ns, _, name = key.partition("/")
            self._spawn_event(ns, name, f"Cancelling deletion of Pod {key}")

    def _spawn_event(self, ns: str, name: str, message: str) -> None:
        record(self.ctx, pod_ref(ns, name), NORMAL, EVENT_REASON, message, component=self.name)

    # -- deletions

    async def _delete_worker(self) -> None:
        while True:
            item = await self._due.get()
            try:
                await self._evict(item)
            except FencedError:
                self.ctx.on_fenced(self.ctx.fence())  # another replica leads: the term ends
            except Exception:
                log.exception("evicting %s failed", item)

    async def _evict(self, key: str) -> None:
        ns, _, name = key.partition("/")
        log.info("deleting pod %s (NoExecute taint not tolerated)", key)
        self._spawn_event(ns, name, f"Marking for deletion Pod {key}")
        last: ApiError | None = None
        for _ in range(DELETE_RETRIES):
            try:
                await self._condition_and_delete(ns, name)
                self.evicted += 1
                return
            except NotFoundError:
                return
            except FencedError:
                raise
            except ApiError as e:
                last = e
                await asyncio.sleep(RETRY_PAUSE_S)
        self._fired.discard(key)  # let a later update try again, as upstream's failed worker
        if last is not None:
            log.warning("could not delete pod %s: %s", key, last.message)

    async def _condition_and_delete(self, ns: str, name: str) -> None:
        """addConditionAndDeletePod: DisruptionTarget=True, then delete (uid precondition)."""
        pod = await self.cs.pods.get(ns, name)
        status = pb.PodStatus()
        status.CopyFrom(pod.status)
        cond = pb.PodCondition(
            type=DISRUPTION_TARGET, status="True", reason=CONDITION_REASON, message=CONDITION_MESSAGE
        )
        if update_condition(status, cond):
            update = pb.Pod(
                metadata=pb.ObjectMeta(
                    name=name,
                    namespace=ns,
                    uid=pod.metadata.uid,
                    resource_version=pod.metadata.resource_version,
                ),
                status=status,
            )
            await self.cs.pods.update_status(update, fence=self.ctx.fence())  # ConflictError: retried
        await self.cs.pods.delete(ns, name, uid=pod.metadata.uid, fence=self.ctx.fence())
