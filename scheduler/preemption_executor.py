"""The API side of preemption for a scheduler replica (upstream: the Evaluator's PreemptPod and
clearNominatedNodeName, on the handle's ClientSet, informers and event recorder).

For each victim (upstream ``Evaluator.PreemptPod``):

* a victim waiting at Permit is rejected there (it was never bound: nothing to delete);
* otherwise the ``DisruptionTarget`` condition (status True, reason ``PreemptionByScheduler``,
  message "<schedulerName>: preempting to accommodate a higher priority pod") is written through
  pods/status, then the pod is deleted with its UID as precondition and default options, so the
  API server applies the victim's own termination grace period. A victim already gone is fine;
* then a Normal ``Preempted`` event on the victim: "Preempted by pod <preemptor UID> on node
  <node>".

Every write carries the current term's fence token; a write refused as fenced calls `on_fenced`
and is raised (the Evaluator then gives the preemptor back to activeQ, which a new leader
schedules anyway). The work runs as tasks of the current term (`spawn`); outside a term there is
nothing to preempt for, so the task is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from kse.client.clientset import Clientset
from kse.client.errors import ConflictError, FencedError, NotFoundError
from kse.objects.meta import uid_key
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb
from scheduler.binder import FencedHook, FenceSource
from scheduler.events import NORMAL, EventRecorder
from scheduler.framework.waiting_pods import WaitingPodsMap
from scheduler.status import Condition, update_pod_condition

log = logging.getLogger(__name__)

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
REASON_PREEMPTED = "Preempted"
ACTION_PREEMPTING = "Preempting"
MAX_CONFLICT_RETRIES = 3

PodLookup = Callable[[str, str], pb.Pod | None]
Spawner = Callable[[Coroutine[Any, Any, None], str], None]


def preempted_message(preemptor: pb.Pod, node_name: str) -> str:
    return f"Preempted by pod {preemptor.metadata.uid} on node {node_name}"


def disruption_target(preemptor: pb.Pod) -> Condition:
    return Condition(
        DISRUPTION_TARGET,
        "True",
        REASON_PREEMPTION_BY_SCHEDULER,
        f"{preemptor.spec.scheduler_name}: preempting to accommodate a higher priority pod",
    )


class APIPreemptionExecutor:
    """A `scheduler.framework.preemption.PreemptionExecutor` over the API server."""

    def __init__(
        self,
        clientset: Clientset,
        *,
        pod_lookup: PodLookup,
        pdbs: Callable[[], Sequence[pb.PodDisruptionBudget]],
        waiting_pods: WaitingPodsMap,
        recorder: EventRecorder,
        spawner: Spawner,
        activator: Callable[[Sequence[pb.Pod]], None],
        fence: FenceSource | None = None,
        on_fenced: FencedHook | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self._cs = clientset
        self._lookup = pod_lookup
        self._pdbs = pdbs
        self._waiting = waiting_pods
        self._recorder = recorder
        self._spawner = spawner
        self._activator = activator
        self._fence = fence
        self.on_fenced = on_fenced
        self._clock = clock or time.time
        self.preempted = 0

    def set_fence(self, fence: FenceSource | None) -> None:
        self._fence = fence

    # ------------------------------------------------------------------ PreemptionExecutor

    def pod_disruption_budgets(self) -> Sequence[pb.PodDisruptionBudget]:
        return self._pdbs()

    def get_pod(self, namespace: str, name: str) -> pb.Pod | None:
        return self._lookup(namespace, name)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._spawner(coro, name)

    def activate(self, pods: Sequence[pb.Pod]) -> None:
        self._activator(pods)

    async def preempt_pod(self, node_name: str, preemptor: pb.Pod, victim: pb.Pod, plugin: str) -> None:
        wp = self._waiting.get(uid_key(victim))
        if wp is not None:
            wp.reject(plugin, "preempted")
            log.info(
                "pod %s preempted waiting pod %s on %s",
                preemptor.metadata.name,
                victim.metadata.name,
                node_name,
            )
        else:
            if not await self._delete_victim(preemptor, victim):
                return  # already gone
            log.info(
                "pod %s preempted pod %s on %s", preemptor.metadata.name, victim.metadata.name, node_name
            )
        self.preempted += 1
        self._recorder.eventf(
            victim,
            NORMAL,
            REASON_PREEMPTED,
            ACTION_PREEMPTING,
            preempted_message(preemptor, node_name),
            component=preemptor.spec.scheduler_name,
        )

    async def clear_nominated_node_name(self, pods: Sequence[pb.Pod]) -> None:
        errors: list[str] = []
        for pod in pods:
            try:
                await self._update_status(pod, lambda st: _clear_nominated(st))
            except FencedError:
                raise
            except Exception as e:
                errors.append(f"{pod.metadata.namespace}/{pod.metadata.name}: {e}")
        if errors:
            raise RuntimeError("clearing nominatedNodeName: " + "; ".join(errors))

    # ------------------------------------------------------------------ writes

    async def _delete_victim(self, preemptor: pb.Pod, victim: pb.Pod) -> bool:
        """The DisruptionTarget condition, then the delete; False if the victim was gone."""
        cond = disruption_target(preemptor)
        now = format_time(self._clock())
        written = await self._update_status(victim, lambda st: update_pod_condition(st, cond, now))
        if written is None:
            return False
        fence = self._token()
        try:
            await self._cs.pods.delete(
                victim.metadata.namespace, victim.metadata.name, uid=victim.metadata.uid, fence=fence
            )
        except NotFoundError:
            return False
        except FencedError:
            self._fenced(fence)
            raise
        except ConflictError:
            return False  # the UID precondition failed: another pod now has that name
        return True

    async def _update_status(self, pod: pb.Pod, change: Callable[[pb.PodStatus], bool]) -> bool | None:
        """Apply `change` to the newest status of `pod` and write it if it changed anything:
        True written, False nothing to write, None the pod is gone (or replaced)."""
        base: pb.Pod | None = self._lookup(pod.metadata.namespace, pod.metadata.name) or pod
        for attempt in range(MAX_CONFLICT_RETRIES + 1):
            if base is None or base.metadata.uid != pod.metadata.uid:
                return None
            update = pb.Pod()
            update.metadata.CopyFrom(base.metadata)
            update.status.CopyFrom(base.status)
            if not change(update.status):
                return False
            fence = self._token()
            try:
                await self._cs.pods.update_status(update, fence=fence)
                return True
            except NotFoundError:
                return None
            except FencedError:
                self._fenced(fence)
                raise
            except ConflictError:
                if attempt == MAX_CONFLICT_RETRIES:
                    raise
                try:
                    base = await self._cs.pods.get(pod.metadata.namespace, pod.metadata.name)
                except NotFoundError:
                    return None
        return False

    def _token(self) -> pb.FenceToken | None:
        return self._fence() if self._fence is not None else None

    def _fenced(self, token: pb.FenceToken | None) -> None:
        if token is not None and self.on_fenced is not None:
            self.on_fenced(token)


def _clear_nominated(status: pb.PodStatus) -> bool:
    if not status.nominated_node_name:
        return False
    status.nominated_node_name = ""
    return True
