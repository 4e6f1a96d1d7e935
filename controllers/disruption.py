"""The disruption controller: keeps every PodDisruptionBudget's status true to its pods, as
upstream's pkg/controller/disruption/disruption.go.

What it writes (through pods/status' sibling, the PDB status subresource, fenced by the term):
`expectedPods`, `desiredHealthy`, `currentHealthy`, `disruptionsAllowed`, `disruptedPods` and the
`DisruptionAllowed` condition (SufficientPods / InsufficientPods; SyncFailed with the error when
the counts cannot be computed), at the budget's generation (`observedGeneration`: the eviction API
refuses to decrement a budget whose spec the controller has not seen yet). The arithmetic is in
`controllers.disruptionbudget`; this module is the wiring: informers on pods, budgets,
ReplicaSets and Deployments; pod and budget events enqueue the budgets concerned; a worker syncs
one budget at a time from the informers' stores; a budget with pending `disruptedPods` is looked
at again when the earliest entry expires (2 minutes after its eviction). The queue and workers
are the controller-manager's (`controllers.workqueue`, `controllers.worker`): a failed sync (a
conflicting write, the API server away) is retried with the per-key exponential backoff, a write
refused as fenced ends the term.

Events as upstream: NoPods, UnmanagedPods, CalculateExpectedPodCountFailed (on the budget).

Not done here (upstream has it): the stale DisruptionTarget condition cleanup for pods that were
evicted but never deleted (kse's eviction sets that condition in the same transaction as the
deletion timestamp, so such a pod is always terminating), StatefulSets and the scale
subresource of custom controllers (kse has neither).
"""

from __future__ import annotations

import logging
from typing import ClassVar

from controllers.base import ControllerContext
from controllers.disruptionbudget import BudgetError, Scale, controller_of, failed_status, sync_budget
from controllers.worker import run_workers
from controllers.workqueue import RateLimitingQueue
from kse.client.errors import NotFoundError
from kse.objects.disruption import pdb_matches
from kse.objects.meta import object_key
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

APPS_GROUPS = ("apps/v1", "extensions/v1beta1")
EVENT_COMPONENT = "controllermanager"  # upstream's disruption recorder: "controllermanager"


class DisruptionController:
    name: ClassVar[str] = "disruption"

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        cs = ctx.clientset
        self.pods = ctx.informers.informer_for(cs.pods)
        self.pdbs = ctx.informers.informer_for(cs.pod_disruption_budgets)
        self.replica_sets = ctx.informers.informer_for(cs.replica_sets)
        self.deployments = ctx.informers.informer_for(cs.deployments)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(self.name, metrics=ctx.workqueue_metrics)
        self.syncs = 0
        self.writes = 0
        self.pdbs.add_event_handler(self._pdb_changed, lambda _old, new: self._pdb_changed(new), None)
        self.pods.add_event_handler(self._pod_changed, self._pod_updated, self._pod_changed)

    # ------------------------------------------------------------------ events

    def _pdb_changed(self, pdb: pb.PodDisruptionBudget) -> None:
        self.queue.add(object_key(pdb.metadata.namespace, pdb.metadata.name))

    def _pod_changed(self, pod: pb.Pod) -> None:
        for pdb in self.pdbs.store.list():
            if pdb_matches(pdb, pod):
                self._pdb_changed(pdb)

    def _pod_updated(self, old: pb.Pod, new: pb.Pod) -> None:
        self._pod_changed(new)
        if old.metadata.labels != new.metadata.labels:
            self._pod_changed(old)  # the budgets it left

    # ------------------------------------------------------------------ run

    async def run(self) -> None:
        """The workers (`controllers.worker`: a failed sync is retried with the queue's backoff, a
        fenced write ends the term) until cancelled."""
        await run_workers(self.name, self.queue, self.sync, self.ctx.options.syncs_for(self.name), self.ctx)

    # ------------------------------------------------------------------ sync

    async def sync(self, key: str) -> None:
        """Bring one budget's status up to date with the informers' view."""
        pdb = self.pdbs.store.get(key)
        if pdb is None:
            return
        self.syncs += 1
        pods = [p for p in self.pods.store.list() if pdb_matches(pdb, p)]
        now = self.ctx.now()
        stamp = now_rfc3339(lambda: now)
        if not pods:
            self._event(pdb, "Normal", "NoPods", "No matching pods found")
        try:
            result = sync_budget(pdb, pods, self._find_scale, now, stamp)
        except BudgetError as e:
            log.warning("disruption: budget %s: %s", key, e)
            self._event(
                pdb, "Warning", "CalculateExpectedPodCountFailed",
                f"Failed to calculate the number of expected pods: {e}",
            )  # fmt: skip
            await self._write(pdb, failed_status(pdb, str(e), stamp))
            return
        if result.unmanaged:
            log.debug("disruption: budget %s selects unmanaged pods %s", key, ", ".join(result.unmanaged))
            self._event(pdb, "Warning", "UnmanagedPods", _unmanaged_message(pdb))
        if result.status is not None:
            await self._write(pdb, result.status)
        if result.recheck_at is not None:
            self.queue.add_after(key, result.recheck_at - now)

    def _event(self, pdb: pb.PodDisruptionBudget, event_type: str, reason: str, message: str) -> None:
        """An event about the budget (policy/v1), as upstream's recorder; never blocks."""
        events = self.ctx.events
        if events is not None:
            events.eventf(
                pdb, event_type, reason, "", message, component=EVENT_COMPONENT,
                kind="PodDisruptionBudget", api_version="policy/v1",
            )  # fmt: skip

    async def _write(self, pdb: pb.PodDisruptionBudget, status: pb.PodDisruptionBudgetStatus) -> None:
        out = pb.PodDisruptionBudget(metadata=pdb.metadata, spec=pdb.spec, status=status)
        try:
            await self.ctx.clientset.pod_disruption_budgets.update_status(out, fence=self.ctx.fence())
        except NotFoundError:
            return  # deleted meanwhile
        self.writes += 1

    def _find_scale(self, ref: pb.OwnerReference, namespace: str) -> Scale | None:
        """The finders of upstream (getPodReplicaSet, getPodDeployment): a ReplicaSet's replicas,
        or its Deployment's when the ReplicaSet has one as controller; uids must match."""
        if ref.kind != "ReplicaSet" or ref.api_version not in APPS_GROUPS:
            return None
        rs = self.replica_sets.store.get(object_key(namespace, ref.name))
        if rs is None or rs.metadata.uid != ref.uid:
            return None
        owner = controller_of(rs.metadata)
        if owner is None or owner.kind != "Deployment":
            return Scale(rs.metadata.uid, rs.spec.replicas if rs.spec.HasField("replicas") else 1)
        if owner.api_version not in APPS_GROUPS:
            return None
        dep = self.deployments.store.get(object_key(namespace, owner.name))
        if dep is None or dep.metadata.uid != owner.uid:
            return None
        return Scale(dep.metadata.uid, dep.spec.replicas if dep.spec.HasField("replicas") else 1)


def _unmanaged_message(pdb: pb.PodDisruptionBudget) -> str:
    """trySync's UnmanagedPods warning (the selector as upstream prints it: its labels)."""
    labels = ",".join(f"{k}={v}" for k, v in sorted(pdb.spec.selector.match_labels.items()))
    return (
        f"Pods selected by this PodDisruptionBudget (selector: {labels}) were found to be unmanaged. "
        "As a result, the status of the PDB cannot be calculated correctly, which may result in "
        'undefined behavior. To account for these pods please set ".spec.minAvailable" field of the '
        "PDB to an integer value."
    )
