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
at again when the earliest entry expires (2 minutes after its eviction). A failed sync (a
conflicting write, the API server away) is retried with a per-budget exponential backoff, as
upstream's rate-limited work queue.

Not done here (upstream has it): the stale DisruptionTarget condition cleanup for pods that were
evicted but never deleted, StatefulSets and the scale subresource of custom controllers (kse has
neither), and events (kse has no event recorder).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import ClassVar

from controllers.base import ControllerContext
from controllers.disruptionbudget import BudgetError, Scale, controller_of, failed_status, sync_budget
from kse.client.errors import ApiError, NotFoundError
from kse.objects.disruption import pdb_matches
from kse.objects.meta import object_key
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

# The default controller rate limiter's per-item backoff (5 ms doubling), capped lower than
# upstream's 1000 s: a kse cluster is small and short-lived.
BACKOFF_INITIAL_S = 0.005
BACKOFF_MAX_S = 30.0
APPS_GROUPS = ("apps/v1", "extensions/v1beta1")


class KeyQueue:
    """A de-duplicating work queue with delayed adds (client-go's delaying queue, reduced): a key
    is handed to one worker at a time; added again while being processed, it comes back once."""

    def __init__(self) -> None:
        self._ready: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._failures: dict[str, int] = {}

    def add(self, key: str) -> None:
        if key in self._processing:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        """Add `key` in `delay` s; an earlier pending add wins (at most one timer per key)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        old = self._timers.get(key)
        if old is not None:
            if old.when() <= when:
                return
            old.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def retry(self, key: str) -> None:
        """Add `key` again after its backoff (doubling per consecutive failure)."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.add_after(key, min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2**n))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    async def get(self) -> str:
        key = await self._ready.get()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._queued)


class DisruptionController:
    name: ClassVar[str] = "disruption"

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        cs = ctx.clientset
        self.pods = ctx.informers.informer_for(cs.pods)
        self.pdbs = ctx.informers.informer_for(cs.pod_disruption_budgets)
        self.replica_sets = ctx.informers.informer_for(cs.replica_sets)
        self.deployments = ctx.informers.informer_for(cs.deployments)
        self.queue = KeyQueue()
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
        workers = max(1, self.ctx.options.concurrent_syncs.get(self.name, 1))
        try:
            async with asyncio.TaskGroup() as tg:
                for i in range(workers):
                    tg.create_task(self._worker(), name=f"disruption-worker-{i}")
        finally:
            self.queue.close()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.sync(key)
                self.queue.forget(key)
            except ApiError as e:
                log.info("disruption: syncing %s failed (%s: %s); retrying", key, e.code_name, e.message)
                self.queue.retry(key)
            except Exception:
                log.exception("disruption: syncing %s failed; retrying", key)
                self.queue.retry(key)
            finally:
                self.queue.done(key)

    # ------------------------------------------------------------------ sync

    async def sync(self, key: str) -> None:
        """Bring one budget's status up to date with the informers' view."""
        pdb = self.pdbs.store.get(key)
        if pdb is None:
            return
        self.syncs += 1
        pods = [p for p in self.pods.store.list() if pdb_matches(pdb, p)]
        now = time.time()
        stamp = now_rfc3339(lambda: now)
        try:
            result = sync_budget(pdb, pods, self._find_scale, now, stamp)
        except BudgetError as e:
            log.warning("disruption: budget %s: %s", key, e)
            await self._write(pdb, failed_status(pdb, str(e), stamp))
            return
        if result.unmanaged:
            log.debug("disruption: budget %s selects unmanaged pods %s", key, ", ".join(result.unmanaged))
        if result.status is not None:
            await self._write(pdb, result.status)
        if result.recheck_at is not None:
            self.queue.add_after(key, result.recheck_at - now)

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
