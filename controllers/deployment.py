"""The Deployment controller, as upstream's `pkg/controller/deployment/deployment_controller.go`:
informers, event handlers, the work queue and `syncDeployment`'s dispatch.

What a sync does lives beside it, as upstream splits it: `deploymentsync` (the new ReplicaSet per
template hash, scaling, status, cleanup: sync.go), `deploymentrollout` (rolling.go and
recreate.go) and `deploymentprogress` (progress.go: the Progressing condition, deadlines).

A Deployment's ReplicaSets are those it controls (controller reference to its UID) and that still
match its selector; matching orphans are adopted, as the ReplicaSet controller does with pods.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from controllers import deploymentutil as du
from controllers.base import ControllerContext
from controllers.deploymentrollout import rollout_recreate, rollout_rolling
from controllers.deploymentsync import DeploymentSync, copy_deployment
from controllers.refmanager import claim, controller_ref, new_controller_ref
from controllers.worker import run_workers
from controllers.workqueue import RateLimitingQueue
from kse.objects.labels import SelectorError, label_selector_as_selector
from kse.objects.meta import key_of
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

CONTROLLER_NAME = "deployment"
API_VERSION = "apps/v1"
KIND = "Deployment"


class DeploymentController:
    """One Deployment controller per leadership term (see the module doc)."""

    name: ClassVar[str] = CONTROLLER_NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        cs = ctx.clientset
        self.d_informer = ctx.informers.informer_for(cs.deployments)
        self.rs_informer = ctx.informers.informer_for(cs.replica_sets)
        self.pod_informer = ctx.informers.informer_for(cs.pods)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(CONTROLLER_NAME, metrics=ctx.workqueue_metrics)
        self.d_informer.add_event_handler(
            on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new), on_delete=self._enqueue
        )
        self.rs_informer.add_event_handler(
            on_add=self._add_rs, on_update=self._update_rs, on_delete=self._delete_rs
        )
        self.pod_informer.add_event_handler(on_delete=self._delete_pod)

    async def run(self) -> None:
        workers = self.ctx.options.syncs_for(CONTROLLER_NAME)
        await run_workers(CONTROLLER_NAME, self.queue, self.sync, workers, self.ctx)

    # ------------------------------------------------------------------ lookups and handlers

    def _enqueue(self, d: pb.Deployment) -> None:
        self.queue.add(key_of(d))

    def _resolve(self, namespace: str, ref: pb.OwnerReference) -> pb.Deployment | None:
        if ref.kind != KIND:
            return None
        d = self.d_informer.store.get_by(namespace, ref.name)
        if d is None or d.metadata.uid != ref.uid:
            return None
        return d

    def _deployments_for_rs(self, rs: pb.ReplicaSet) -> list[pb.Deployment]:
        """getDeploymentsForReplicaSet: the deployments whose selector matches an orphan."""
        out = []
        for d in self.d_informer.store:
            if d.metadata.namespace != rs.metadata.namespace:
                continue
            try:
                selector = label_selector_as_selector(d.spec.selector)
            except SelectorError:
                continue
            if not selector.empty and selector.matches(rs.metadata.labels):
                out.append(d)
        return out

    def _add_rs(self, rs: pb.ReplicaSet) -> None:
        if rs.metadata.deletion_timestamp:
            self._delete_rs(rs)
            return
        ref = controller_ref(rs.metadata)
        if ref is not None:
            d = self._resolve(rs.metadata.namespace, ref)
            if d is not None:
                self._enqueue(d)
            return
        for d in self._deployments_for_rs(rs):
            self._enqueue(d)

    def _update_rs(self, old: pb.ReplicaSet, new: pb.ReplicaSet) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        new_ref, old_ref = controller_ref(new.metadata), controller_ref(old.metadata)
        if new_ref != old_ref and old_ref is not None:
            d = self._resolve(old.metadata.namespace, old_ref)
            if d is not None:
                self._enqueue(d)
        if new_ref is not None:
            d = self._resolve(new.metadata.namespace, new_ref)
            if d is not None:
                self._enqueue(d)
            return
        if dict(old.metadata.labels) != dict(new.metadata.labels) or new_ref != old_ref:
            for d in self._deployments_for_rs(new):
                self._enqueue(d)

    def _delete_rs(self, rs: pb.ReplicaSet) -> None:
        ref = controller_ref(rs.metadata)
        if ref is None:
            return
        d = self._resolve(rs.metadata.namespace, ref)
        if d is not None:
            self._enqueue(d)

    def _delete_pod(self, pod: pb.Pod) -> None:
        """deletePod: a Recreate deployment waits for its old pods to be gone; look again."""
        ref = controller_ref(pod.metadata)
        if ref is None or ref.kind != "ReplicaSet":
            return
        rs = self.rs_informer.store.get_by(pod.metadata.namespace, ref.name)
        if rs is None or rs.metadata.uid != ref.uid:
            return
        rs_ref = controller_ref(rs.metadata)
        if rs_ref is None:
            return
        d = self._resolve(rs.metadata.namespace, rs_ref)
        if d is not None and d.spec.strategy.type == du.RECREATE:
            self._enqueue(d)

    # ------------------------------------------------------------------ sync

    async def _claim_replica_sets(self, d: pb.Deployment) -> list[pb.ReplicaSet]:
        """getReplicaSetsForDeployment."""
        selector = label_selector_as_selector(d.spec.selector)
        candidates = [r for r in self.rs_informer.store if r.metadata.namespace == d.metadata.namespace]
        ref = new_controller_ref(d.metadata, API_VERSION, KIND)

        async def update(rs: pb.ReplicaSet) -> pb.ReplicaSet:
            return await self.ctx.clientset.replica_sets.update(rs, fence=self.ctx.fence())

        def copy(rs: pb.ReplicaSet) -> pb.ReplicaSet:
            out = pb.ReplicaSet()
            out.CopyFrom(rs)
            return out

        return await claim(d.metadata, selector, candidates, ref, update, copy)

    def _pod_map(self, d: pb.Deployment, rss: list[pb.ReplicaSet]) -> dict[str, list[pb.Pod]]:
        """getPodMapForDeployment: the pods of each ReplicaSet, by ReplicaSet UID."""
        by_uid: dict[str, list[pb.Pod]] = {rs.metadata.uid: [] for rs in rss}
        for pod in self.pod_informer.store:
            if pod.metadata.namespace != d.metadata.namespace:
                continue
            ref = controller_ref(pod.metadata)
            if ref is not None and ref.uid in by_uid:
                by_uid[ref.uid].append(pod)
        return by_uid

    async def sync(self, key: str) -> None:
        """syncDeployment for one key."""
        cached = self.d_informer.store.get(key)
        if cached is None:
            log.debug("deployment %s has been deleted", key)
            return
        d = copy_deployment(cached)
        s = DeploymentSync(self.ctx, self.queue, self.rs_informer.store, cached)
        if not d.spec.selector.match_labels and not d.spec.selector.match_expressions:
            # An empty selector would select every pod: refuse to act, as upstream.
            log.warning("deployment %s: selects everything; refusing to act", key)
            if d.status.observed_generation < d.metadata.generation:
                d.status.observed_generation = d.metadata.generation
                await s.update_status(d)
            return
        try:
            rss = await self._claim_replica_sets(d)
        except SelectorError as e:
            log.error("deployment %s: invalid spec.selector: %s", key, e)
            return
        pod_map = self._pod_map(d, rss)
        if d.metadata.deletion_timestamp:
            await s.sync_status_only(d, rss)
            return
        await s.check_paused_conditions(d)
        if d.spec.paused:
            await s.sync(d, rss)
            return
        if await s.is_scaling_event(d, rss):
            await s.sync(d, rss)
            return
        if d.spec.strategy.type == du.RECREATE:
            await rollout_recreate(s, d, rss, pod_map)
        elif d.spec.strategy.type == du.ROLLING_UPDATE:
            await rollout_rolling(s, d, rss)
        else:
            log.error("deployment %s: unexpected strategy type %r", key, d.spec.strategy.type)
