"""Writing the PodScheduled condition of pods that failed to schedule (upstream
``schedule_one.go: updatePod`` with ``podutil.UpdatePodCondition``).

* Only when it changes: the write is skipped when the pod already has a PodScheduled condition
  with the same status, reason and message. ``lastTransitionTime`` moves only when the status
  does, as ``UpdatePodCondition`` does.
* Off the scheduling loop: ``submit`` returns at once; writes run as tasks (bounded concurrency)
  in the updater's own task group. Writes for one pod are coalesced: while one is in flight, a
  newer condition replaces any not yet written, so a pod failing fast never piles up writes and
  the last condition wins (as upstream's API dispatcher merges pod status patches).
* Never over a binding: the write goes through pods/status with the resourceVersion of the pod it
  was computed from. On a conflict the pod is read again; if it is bound (or gone, or another
  pod under the same name) nothing is written, otherwise the condition is re-applied (a few times
  at most).
* Fenced: a write carries the fence token current when the condition was *submitted* (the term
  under which the scheduler decided), never a later term's; ``discard_pending`` drops what is not
  yet written when a term ends; a write refused as fenced calls ``on_fenced(token)`` and is not
  retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kse.client.clientset import Clientset
from kse.client.errors import ApiError, ConflictError, FencedError, NotFoundError
from kse.objects.meta import uid_key
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb
from scheduler.binder import FencedHook, FenceSource

log = logging.getLogger(__name__)

POD_SCHEDULED = "PodScheduled"
REASON_UNSCHEDULABLE = "Unschedulable"  # v1.PodReasonUnschedulable
REASON_SCHEDULER_ERROR = "SchedulerError"  # v1.PodReasonSchedulerError
CONDITION_FALSE = "False"

MAX_CONFLICT_RETRIES = 3

PodLookup = Callable[[str, str], pb.Pod | None]


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


def unschedulable(message: str, reason: str = REASON_UNSCHEDULABLE) -> Condition:
    return Condition(POD_SCHEDULED, CONDITION_FALSE, reason, message)


def update_pod_condition(status: pb.PodStatus, cond: Condition, now: str) -> bool:
    """Set `cond` in `status` (in place) as upstream podutil.UpdatePodCondition: True if
    anything but the timestamps changed (then the status must be written)."""
    for existing in status.conditions:
        if existing.type != cond.type:
            continue
        if (existing.status, existing.reason, existing.message) == (cond.status, cond.reason, cond.message):
            return False
        if existing.status != cond.status or not existing.last_transition_time:
            existing.last_transition_time = now
        existing.status, existing.reason, existing.message = cond.status, cond.reason, cond.message
        return True
    status.conditions.add(
        type=cond.type, status=cond.status, reason=cond.reason, message=cond.message, last_transition_time=now
    )
    return True


class PodStatusUpdater:
    """Writes PodScheduled conditions (see the module doc). Run `run()` as a task."""

    def __init__(
        self,
        clientset: Clientset,
        *,
        lookup: PodLookup | None = None,
        clock: Callable[[], float] = time.time,
        concurrency: int = 16,
        fence: FenceSource | None = None,
        on_fenced: FencedHook | None = None,
    ) -> None:
        self._cs = clientset
        self._lookup = lookup
        self._clock = clock
        self._fence = fence
        self.on_fenced = on_fenced
        self._sem = asyncio.Semaphore(concurrency)
        # uid -> the newest (pod, condition, nominated node, fence) not yet written; present while
        # a writer runs.
        self._pending: dict[str, tuple[pb.Pod, Condition, str | None, pb.FenceToken | None] | None] = {}
        self._tg: asyncio.TaskGroup | None = None
        self._backlog: list[str] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self.written = 0
        self.skipped = 0
        self.failed = 0
        self.fenced = 0
        self.discarded = 0

    def set_fence(self, fence: FenceSource | None) -> None:
        self._fence = fence

    def submit(self, pod: pb.Pod, condition: Condition, nominated_node_name: str | None = None) -> None:
        """Queue a condition write for `pod` (returns at once). `nominated_node_name` not None
        also sets status.nominatedNodeName (upstream updatePod with ModeOverride; "" clears)."""
        uid = uid_key(pod)
        running = uid in self._pending
        fence = self._fence() if self._fence is not None else None
        prev = self._pending.get(uid)
        if nominated_node_name is None and prev is not None:
            nominated_node_name = prev[2]  # a newer condition must not drop a nomination not yet written
        self._pending[uid] = (pod, condition, nominated_node_name, fence)
        if running:
            return
        self._idle.clear()
        if self._tg is None:
            self._backlog.append(uid)
        else:
            self._tg.create_task(self._drain(uid), name=f"pod-status-{uid}")

    async def run(self) -> None:
        """Run the writers until cancelled."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            try:
                for uid in self._backlog:
                    tg.create_task(self._drain(uid))
                self._backlog.clear()
                await asyncio.get_running_loop().create_future()
            finally:
                self._tg = None

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def discard_pending(self) -> int:
        """Drop every condition not yet being written (a term ended); writes in flight finish.
        Returns how many were dropped."""
        n = 0
        for uid, item in self._pending.items():
            if item is not None:
                self._pending[uid] = None
                n += 1
        if self._backlog:  # not started yet: nothing runs for these
            for uid in self._backlog:
                self._pending.pop(uid, None)
            self._backlog.clear()
            if not self._pending:
                self._idle.set()
        self.discarded += n
        return n

    async def _drain(self, uid: str) -> None:
        try:
            while True:
                item = self._pending.get(uid)
                if item is None:
                    return
                self._pending[uid] = None  # taken; a submit meanwhile puts a newer one here
                pod, cond, nominated, fence = item
                async with self._sem:
                    try:
                        await self.write(pod, cond, fence=fence, nominated_node_name=nominated)
                    except FencedError as e:
                        self.fenced += 1
                        log.info(
                            "PodScheduled condition of %s/%s refused: %s",
                            pod.metadata.namespace,
                            pod.metadata.name,
                            e.message,
                        )
                        if fence is not None and self.on_fenced is not None:
                            self.on_fenced(fence)
                    except ApiError as e:
                        self.failed += 1
                        log.warning(
                            "updating the PodScheduled condition of %s/%s: %s",
                            pod.metadata.namespace,
                            pod.metadata.name,
                            e.message,
                        )
        finally:
            self._pending.pop(uid, None)
            if not self._pending:
                self._idle.set()

    async def write(
        self,
        pod: pb.Pod,
        cond: Condition,
        *,
        fence: pb.FenceToken | None = None,
        nominated_node_name: str | None = None,
    ) -> bool:
        """Write `cond` (and `nominated_node_name` when not None) into the pod's status if it
        changes anything, under `fence`; True if written. FencedError if the API server refuses
        the token."""
        base = self._latest(pod)
        for attempt in range(MAX_CONFLICT_RETRIES + 1):
            if base is None or base.spec.node_name or base.metadata.uid != pod.metadata.uid:
                self.skipped += 1
                return False  # gone, bound, or another pod under the same name
            update = pb.Pod()
            update.metadata.CopyFrom(base.metadata)
            update.status.CopyFrom(base.status)
            changed = update_pod_condition(update.status, cond, format_time(self._clock()))
            if nominated_node_name is not None and update.status.nominated_node_name != nominated_node_name:
                update.status.nominated_node_name = nominated_node_name
                changed = True
            if not changed:
                self.skipped += 1
                return False
            try:
                await self._cs.pods.update_status(update, fence=fence)
            except NotFoundError:
                self.skipped += 1
                return False
            except ConflictError:
                if attempt == MAX_CONFLICT_RETRIES:
                    raise
                try:
                    base = await self._cs.pods.get(pod.metadata.namespace, pod.metadata.name)
                except NotFoundError:
                    base = None
                continue
            self.written += 1
            return True
        return False

    def _latest(self, pod: pb.Pod) -> pb.Pod | None:
        """The newest copy of the pod we know: the informer's, unless older than `pod`."""
        if self._lookup is None:
            return pod
        cached = self._lookup(pod.metadata.namespace, pod.metadata.name)
        if cached is None:
            return pod
        if _rv(cached) >= _rv(pod):
            return cached
        return pod


def _rv(pod: pb.Pod) -> int:
    rv = pod.metadata.resource_version
    return int(rv) if rv.isdigit() else 0
