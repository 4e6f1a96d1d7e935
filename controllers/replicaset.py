"""The ReplicaSet controller, as upstream's `pkg/controller/replicaset/replica_set.go`.

For each ReplicaSet (a key in the work queue, fed by the informers' handlers):

1. If its expectations are satisfied (every create and delete it issued has been observed, see
   `controllers.expectations`), count its active pods, claiming them (`controllers.refmanager`:
   adopt matching orphans, release owned pods that stopped matching), and create or delete the
   difference with `spec.replicas`: creates in slow-start batches (1, 2, 4, ...; a failing batch
   stops the rest), at most `BURST_REPLICAS` per sync; deletes ranked by `controllers.ranking`
   (unscheduled, then pending, then not ready, ... first).
2. Write `status` (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas,
   observedGeneration, a ReplicaFailure condition when a create or delete failed).
3. With minReadySeconds, requeue after it so availability is re-evaluated when it can change.

Pods with a deletionTimestamp are not active: they neither count nor are deleted again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import ClassVar

from controllers.base import ControllerContext
from controllers.expectations import ControllerExpectations
from controllers.podcontrol import PodControl
from controllers.podutil import is_pod_active, is_pod_available, is_pod_ready
from controllers.ranking import pods_to_delete
from controllers.refmanager import claim, controller_ref, new_controller_ref
from controllers.worker import run_workers
from controllers.workqueue import RateLimitingQueue
from kse.client.errors import ApiError, NotFoundError
from kse.events import NORMAL, WARNING
from kse.objects.labels import SelectorError, label_selector_as_selector, selector_from_set
from kse.objects.meta import key_of
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

CONTROLLER_NAME = "replicaset"
API_VERSION = "apps/v1"
KIND = "ReplicaSet"
# replicaset.BurstReplicas: the most pods one sync creates or deletes.
BURST_REPLICAS = 500
SLOW_START_INITIAL_BATCH_SIZE = 1
STATUS_UPDATE_RETRIES = 1
REPLICA_FAILURE = "ReplicaFailure"
EVENT_COMPONENT = "replicaset-controller"


async def slow_start_batch(
    count: int, initial_batch_size: int, fn: Callable[[], Awaitable[None]]
) -> tuple[int, BaseException | None]:
    """Call `fn` `count` times in batches of growing size (1, 2, 4, ...), each batch at once;
    stop after the first batch with a failure. Returns (successes, the first error)."""
    remaining = count
    successes = 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def calculate_status(
    rs: pb.ReplicaSet, filtered_pods: Sequence[pb.Pod], manage_error: BaseException | None, now: float
) -> pb.ReplicaSetStatus:
    """calculateStatus: counts over the claimed active pods, and the ReplicaFailure condition."""
    status = pb.ReplicaSetStatus()
    status.CopyFrom(rs.status)
    template_selector = selector_from_set(rs.spec.template.metadata.labels)
    fully, ready, available = 0, 0, 0
    for pod in filtered_pods:
        if template_selector.matches(pod.metadata.labels):
            fully += 1
        if is_pod_ready(pod):
            ready += 1
            if is_pod_available(pod, rs.spec.min_ready_seconds, now):
                available += 1
    status.replicas = len(filtered_pods)
    status.fully_labeled_replicas = fully
    status.ready_replicas = ready
    status.available_replicas = available
    failure = next((c for c in status.conditions if c.type == REPLICA_FAILURE), None)
    if manage_error is not None and failure is None:
        diff = len(filtered_pods) - rs.spec.replicas
        reason = "FailedCreate" if diff < 0 else "FailedDelete"
        status.conditions.append(
            pb.ReplicaSetCondition(
                type=REPLICA_FAILURE,
                status="True",
                last_transition_time=format_time(now),
                reason=reason,
                message=str(manage_error),
            )
        )
    elif manage_error is None and failure is not None:
        kept = [c for c in status.conditions if c.type != REPLICA_FAILURE]
        del status.conditions[:]
        status.conditions.extend(kept)
    return status


class ReplicaSetController:
    """One ReplicaSet controller per leadership term (see the module doc)."""

    name: ClassVar[str] = CONTROLLER_NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        cs = ctx.clientset
        self.rs_informer = ctx.informers.informer_for(cs.replica_sets)
        self.pod_informer = ctx.informers.informer_for(cs.pods)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(CONTROLLER_NAME, metrics=ctx.workqueue_metrics)
        self.expectations = ControllerExpectations()
        self.pod_control = PodControl(cs, ctx.fence)
        self.burst_replicas = BURST_REPLICAS
        self.rs_informer.add_event_handler(
            on_add=self._enqueue, on_update=self._update_rs, on_delete=self._delete_rs
        )
        self.pod_informer.add_event_handler(
            on_add=self._add_pod, on_update=self._update_pod, on_delete=self._delete_pod
        )

    async def run(self) -> None:
        workers = self.ctx.options.syncs_for(CONTROLLER_NAME)
        await run_workers(CONTROLLER_NAME, self.queue, self.sync, workers, self.ctx)

    # ------------------------------------------------------------------ lookups

    def _pods_in(self, namespace: str) -> list[pb.Pod]:
        return [p for p in self.pod_informer.store if p.metadata.namespace == namespace]

    def _replica_sets_in(self, namespace: str) -> list[pb.ReplicaSet]:
        return [r for r in self.rs_informer.store if r.metadata.namespace == namespace]

    def _resolve(self, namespace: str, ref: pb.OwnerReference) -> pb.ReplicaSet | None:
        """resolveControllerRef: the ReplicaSet a controller reference names, if it is the same one."""
        if ref.kind != KIND:
            return None
        rs = self.rs_informer.store.get_by(namespace, ref.name)
        if rs is None or rs.metadata.uid != ref.uid:
            return None
        return rs

    def _pod_replica_sets(self, pod: pb.Pod) -> list[pb.ReplicaSet]:
        """GetPodReplicaSets: the ReplicaSets whose selector matches an orphan pod."""
        out = []
        for rs in self._replica_sets_in(pod.metadata.namespace):
            try:
                selector = label_selector_as_selector(rs.spec.selector)
            except SelectorError:
                continue
            if not selector.empty and selector.matches(pod.metadata.labels):
                out.append(rs)
        return out

    # ------------------------------------------------------------------ event handlers

    def _enqueue(self, rs: pb.ReplicaSet) -> None:
        self.queue.add(key_of(rs))

    def _update_rs(self, old: pb.ReplicaSet, new: pb.ReplicaSet) -> None:
        if old.metadata.uid != new.metadata.uid:
            self._delete_rs(old)
        self._enqueue(new)

    def _delete_rs(self, rs: pb.ReplicaSet) -> None:
        key = key_of(rs)
        self.expectations.delete(key)
        self.queue.add(key)

    def _add_pod(self, pod: pb.Pod) -> None:
        if pod.metadata.deletion_timestamp:
            # A restarted controller sees pods already terminating: they count as observed deletions.
            self._delete_pod(pod)
            return
        ref = controller_ref(pod.metadata)
        if ref is not None:
            rs = self._resolve(pod.metadata.namespace, ref)
            if rs is None:
                return
            key = key_of(rs)
            self.expectations.creation_observed(key)
            self.queue.add(key)
            return
        for rs in self._pod_replica_sets(pod):
            self._enqueue(rs)

    def _update_pod(self, old: pb.Pod, new: pb.Pod) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return  # a resync: nothing changed
        labels_changed = dict(old.metadata.labels) != dict(new.metadata.labels)
        if new.metadata.deletion_timestamp:
            self._delete_pod(new)
            if labels_changed:
                self._delete_pod(old)
            return
        new_ref, old_ref = controller_ref(new.metadata), controller_ref(old.metadata)
        ref_changed = new_ref != old_ref
        if ref_changed and old_ref is not None:
            old_rs = self._resolve(old.metadata.namespace, old_ref)
            if old_rs is not None:
                self._enqueue(old_rs)
        if new_ref is not None:
            rs = self._resolve(new.metadata.namespace, new_ref)
            if rs is None:
                return
            self._enqueue(rs)
            if not is_pod_ready(old) and is_pod_ready(new) and rs.spec.min_ready_seconds > 0:
                # Available once minReadySeconds have passed: look again then (upstream adds 1 s).
                self.queue.add_after(key_of(rs), rs.spec.min_ready_seconds + 1.0)
            return
        if labels_changed or ref_changed:
            for rs in self._pod_replica_sets(new):
                self._enqueue(rs)

    def _delete_pod(self, pod: pb.Pod) -> None:
        ref = controller_ref(pod.metadata)
        if ref is None:
            return
        rs = self._resolve(pod.metadata.namespace, ref)
        if rs is None:
            return
        key = key_of(rs)
        self.expectations.deletion_observed(key, key_of(pod))
        self.queue.add(key)

    # ------------------------------------------------------------------ sync

    async def sync(self, key: str) -> None:
        """syncReplicaSet for one key."""
        namespace = key.partition("/")[0]
        rs = self.rs_informer.store.get(key)
        if rs is None:
            log.debug("replicaset %s has been deleted", key)
            self.expectations.delete(key)
            return
        needs_sync = self.expectations.satisfied(key)
        try:
            selector = label_selector_as_selector(rs.spec.selector)
        except SelectorError as e:
            log.error("replicaset %s: invalid spec.selector: %s", key, e)
            return  # not retried: only a change of the object can fix it
        active = [p for p in self._pods_in(namespace) if is_pod_active(p)]
        ref = new_controller_ref(rs.metadata, API_VERSION, KIND)
        filtered = await claim(rs.metadata, selector, active, ref, self._update_pod_ref, _copy_pod)
        manage_error: BaseException | None = None
        if needs_sync and not rs.metadata.deletion_timestamp:
            manage_error = await self.manage_replicas(filtered, rs)
        status = calculate_status(rs, filtered, manage_error, self.ctx.now())
        updated = await self._update_status(rs, status)
        if (
            manage_error is None
            and rs.spec.min_ready_seconds > 0
            and updated.status.ready_replicas == rs.spec.replicas
            and updated.status.available_replicas != rs.spec.replicas
        ):
            self.queue.add_after(key, float(rs.spec.min_ready_seconds))
        if manage_error is not None:
            raise manage_error

    async def _update_pod_ref(self, pod: pb.Pod) -> pb.Pod:
        return await self.ctx.clientset.pods.update(pod, fence=self.ctx.fence())

    async def manage_replicas(self, filtered: Sequence[pb.Pod], rs: pb.ReplicaSet) -> BaseException | None:
        """manageReplicas: create or delete pods towards spec.replicas; the first error, if any."""
        key = key_of(rs)
        diff = len(filtered) - rs.spec.replicas
        ref = new_controller_ref(rs.metadata, API_VERSION, KIND)
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            # Expect before creating: the informer may deliver a pod before create() returns.
            self.expectations.expect_creations(key, count)
            log.info(
                "replicaset %s: too few replicas (need %d, have %d): creating %d",
                key,
                rs.spec.replicas,
                len(filtered),
                count,
            )

            async def create() -> None:
                try:
                    pod = await self.pod_control.create_pod(
                        rs.metadata.namespace, rs.spec.template, rs.metadata.name, ref
                    )
                except ApiError as e:
                    self._event(rs, WARNING, "FailedCreate", f"Error creating: {e}")
                    raise
                self._event(rs, NORMAL, "SuccessfulCreate", f"Created pod: {pod.metadata.name}")

            created, error = await slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE, create)
            for _ in range(count - created):
                # Never observed: the pods that failed or were skipped.
                self.expectations.creation_observed(key)
            return error
        if diff > 0:
            count = min(diff, self.burst_replicas)
            related = self._related_pods(rs)
            victims = pods_to_delete(filtered, related, count, self.ctx.now())
            self.expectations.expect_deletions(key, [key_of(p) for p in victims])
            log.info(
                "replicaset %s: too many replicas (need %d, have %d): deleting %d",
                key,
                rs.spec.replicas,
                len(filtered),
                count,
            )

            async def delete(pod: pb.Pod) -> None:
                try:
                    await self.pod_control.delete_pod(
                        pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
                    )
                except ApiError as e:
                    self.expectations.deletion_observed(key, key_of(pod))
                    if not isinstance(e, NotFoundError):
                        self._event(rs, WARNING, "FailedDelete", f"Error deleting: {e}")
                        raise
                else:
                    self._event(rs, NORMAL, "SuccessfulDelete", f"Deleted pod: {pod.metadata.name}")

            results = await asyncio.gather(*(delete(p) for p in victims), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            return errors[0] if errors else None
        return None

    def _event(self, rs: pb.ReplicaSet, event_type: str, reason: str, message: str) -> None:
        self.ctx.event(rs, KIND, event_type, reason, message, component=EVENT_COMPONENT)

    def _related_pods(self, rs: pb.ReplicaSet) -> list[pb.Pod]:
        """getIndirectlyRelatedPods: the pods of every ReplicaSet with the same controlling owner."""
        owner = controller_ref(rs.metadata)
        uids = {rs.metadata.uid}
        if owner is not None:
            for other in self._replica_sets_in(rs.metadata.namespace):
                other_owner = controller_ref(other.metadata)
                if other_owner is not None and other_owner.uid == owner.uid:
                    uids.add(other.metadata.uid)
        out = []
        for pod in self._pods_in(rs.metadata.namespace):
            ref = controller_ref(pod.metadata)
            if ref is not None and ref.uid in uids:
                out.append(pod)
        return out

    async def _update_status(self, rs: pb.ReplicaSet, status: pb.ReplicaSetStatus) -> pb.ReplicaSet:
        """updateReplicaSetStatus: write only on a change, retrying once on a stale object."""
        status.observed_generation = rs.metadata.generation
        if rs.status == status:
            return rs
        current = rs
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            copy = pb.ReplicaSet()
            copy.CopyFrom(current)
            copy.status.CopyFrom(status)
            try:
                return await self.ctx.clientset.replica_sets.update_status(copy, fence=self.ctx.fence())
            except ApiError as e:
                if attempt >= STATUS_UPDATE_RETRIES or isinstance(e, NotFoundError):
                    raise
                current = await self.ctx.clientset.replica_sets.get(rs.metadata.namespace, rs.metadata.name)
                status.observed_generation = current.metadata.generation
        raise AssertionError("unreachable")  # pragma: no cover


def _copy_pod(pod: pb.Pod) -> pb.Pod:
    out = pb.Pod()
    out.CopyFrom(pod)
    return out
