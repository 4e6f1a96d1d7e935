"""What one Deployment sync does to ReplicaSets and status, as upstream's
`pkg/controller/deployment/sync.go`: find or create the new ReplicaSet (one per template hash,
named `<deployment>-<hash>`), keep the revision annotations, scale (proportionally, when the
deployment is resized mid-rollout), clean up old ReplicaSets beyond revisionHistoryLimit, and
write the status.

Every write carries the term's fence; every update has the cached object's resourceVersion as
its precondition, so a sync that acted on a stale cache fails with a conflict and is retried
instead of over- or under-scaling.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from controllers import deploymentutil as du
from controllers.base import ControllerContext
from controllers.refmanager import controller_ref, new_controller_ref
from controllers.workqueue import RateLimitingQueue
from kse.client.errors import AlreadyExistsError, ApiError
from kse.client.informer import Store
from kse.events import NORMAL
from kse.objects.meta import key_of
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

API_VERSION = "apps/v1"
KIND = "Deployment"
EVENT_COMPONENT = "deployment-controller"


def copy_deployment(d: pb.Deployment) -> pb.Deployment:
    out = pb.Deployment()
    out.CopyFrom(d)
    return out


def _copy_rs(rs: pb.ReplicaSet) -> pb.ReplicaSet:
    out = pb.ReplicaSet()
    out.CopyFrom(rs)
    return out


def _present(rss: Sequence[pb.ReplicaSet | None]) -> list[pb.ReplicaSet]:
    return [rs for rs in rss if rs is not None]


def calculate_status(
    all_rss: Sequence[pb.ReplicaSet | None], new_rs: pb.ReplicaSet | None, d: pb.Deployment, now: float
) -> pb.DeploymentStatus:
    """calculateStatus: the counts over the ReplicaSets and the Available condition."""
    available = du.available_replica_count(all_rss)
    unavailable = max(0, du.replica_count(all_rss) - available)
    status = pb.DeploymentStatus(
        observed_generation=d.metadata.generation,
        replicas=du.actual_replica_count(all_rss),
        updated_replicas=du.actual_replica_count([new_rs]),
        ready_replicas=du.ready_replica_count(all_rss),
        available_replicas=available,
        unavailable_replicas=unavailable,
    )
    if d.status.HasField("collision_count"):
        status.collision_count = d.status.collision_count
    status.conditions.extend(d.status.conditions)
    if available >= d.spec.replicas - du.max_unavailable(d):
        cond = du.new_condition(
            du.AVAILABLE, "True", du.MINIMUM_REPLICAS_AVAILABLE, "Deployment has minimum availability.", now
        )
    else:
        cond = du.new_condition(
            du.AVAILABLE,
            "False",
            du.MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.",
            now,
        )
    du.set_condition(status, cond)
    return status


class DeploymentSync:
    """The writes of one sync (a fresh one per sync; it holds no state between syncs)."""

    def __init__(
        self,
        ctx: ControllerContext,
        queue: RateLimitingQueue[str],
        rs_store: Store[pb.ReplicaSet],
        stored: pb.Deployment,
    ) -> None:
        self.ctx = ctx
        self.queue = queue
        self.rs_store = rs_store
        # The revision annotation as stored: a different one in the working copy must be written.
        self.stored_revision: str | None = stored.metadata.annotations.get(du.REVISION_ANNOTATION)

    @property
    def now(self) -> float:
        return self.ctx.now()

    # ------------------------------------------------------------------ writes

    async def update_status(self, d: pb.Deployment) -> pb.Deployment:
        """Write `d.status`; `d` takes the new resourceVersion, so a later write in the same sync
        is not refused as stale by this sync's own earlier one."""
        updated = await self.ctx.clientset.deployments.update_status(d, fence=self.ctx.fence())
        d.metadata.resource_version = updated.metadata.resource_version
        return updated

    async def _update_rs(self, rs: pb.ReplicaSet) -> pb.ReplicaSet:
        return await self.ctx.clientset.replica_sets.update(rs, fence=self.ctx.fence())

    # ------------------------------------------------------------------ the new ReplicaSet

    async def get_all_replica_sets_and_sync_revision(
        self, d: pb.Deployment, rss: Sequence[pb.ReplicaSet], create_if_not_existed: bool
    ) -> tuple[pb.ReplicaSet | None, list[pb.ReplicaSet]]:
        old = du.find_old_replica_sets(d, rss)
        new = await self.get_new_replica_set(d, rss, old, create_if_not_existed)
        return new, old

    async def get_new_replica_set(
        self,
        d: pb.Deployment,
        rss: Sequence[pb.ReplicaSet],
        old_rss: Sequence[pb.ReplicaSet],
        create_if_not_existed: bool,
    ) -> pb.ReplicaSet | None:
        """getNewReplicaSet: the existing new ReplicaSet with its annotations brought up to date,
        or (when asked) a new one, sized by NewRSNewReplicas. `d` is updated in place with the
        revision annotation and the Progressing condition written here."""
        existing = du.find_new_replica_set(d, rss)
        new_revision = str(du.max_revision(old_rss) + 1)
        if existing is not None:
            rs = _copy_rs(existing)
            annotations_updated = du.set_new_replica_set_annotations(d, rs, new_revision, True)
            min_ready_changed = rs.spec.min_ready_seconds != d.spec.min_ready_seconds
            if annotations_updated or min_ready_changed:
                rs.spec.min_ready_seconds = d.spec.min_ready_seconds
                return await self._update_rs(rs)
            needs_update = du.set_deployment_revision(
                d, rs.metadata.annotations.get(du.REVISION_ANNOTATION, "")
            )
            cond = du.get_condition(d.status, du.PROGRESSING)
            if du.has_progress_deadline(d) and cond is None:
                msg = f'Found new replica set "{rs.metadata.name}"'
                du.set_condition(
                    d.status, du.new_condition(du.PROGRESSING, "True", du.FOUND_NEW_RS_REASON, msg, self.now)
                )
                needs_update = True
            if needs_update:
                await self._write_deployment_and_status(d)
            return rs
        if not create_if_not_existed:
            return None
        return await self._create_new_replica_set(d, old_rss, new_revision)

    async def _create_new_replica_set(
        self, d: pb.Deployment, old_rss: Sequence[pb.ReplicaSet], new_revision: str
    ) -> pb.ReplicaSet | None:
        collision = d.status.collision_count if d.status.HasField("collision_count") else None
        template = pb.PodTemplateSpec()
        template.CopyFrom(d.spec.template)
        pod_hash = du.compute_hash(template, collision)
        template.metadata.labels[du.DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY] = pod_hash
        rs = pb.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
        rs.metadata.name = f"{d.metadata.name}-{pod_hash}"
        rs.metadata.namespace = d.metadata.namespace
        rs.metadata.owner_references.append(new_controller_ref(d.metadata, API_VERSION, KIND))
        rs.metadata.labels.update(template.metadata.labels)
        rs.spec.replicas = 0
        rs.spec.min_ready_seconds = d.spec.min_ready_seconds
        rs.spec.selector.CopyFrom(d.spec.selector)
        rs.spec.selector.match_labels[du.DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY] = pod_hash
        rs.spec.template.CopyFrom(template)
        rs.spec.replicas = du.new_rs_new_replicas(d, [*old_rss, rs], rs)
        du.set_new_replica_set_annotations(d, rs, new_revision, False)
        already_exists = False
        try:
            created = await self.ctx.clientset.replica_sets.create(rs, fence=self.ctx.fence())
        except AlreadyExistsError:
            already_exists = True
            found = self.rs_store.get_by(rs.metadata.namespace, rs.metadata.name)
            ref = controller_ref(found.metadata) if found is not None else None
            if (
                found is not None
                and ref is not None
                and ref.uid == d.metadata.uid
                and du.equal_ignore_hash(d.spec.template, found.spec.template)
            ):
                created = found
            else:
                if found is None:
                    raise  # not in the cache yet: retry once it is
                # A hash collision: another template has this name. Bump collisionCount so the
                # next sync computes another hash (upstream's answer).
                d.status.collision_count = (collision or 0) + 1
                log.info(
                    "deployment %s: hash collision on %s; collisionCount now %d",
                    key_of(d),
                    rs.metadata.name,
                    d.status.collision_count,
                )
                await self.update_status(d)
                raise
        except ApiError as e:
            if du.has_progress_deadline(d):
                msg = f'Failed to create new replica set "{rs.metadata.name}": {e}'
                du.set_condition(
                    d.status,
                    du.new_condition(du.PROGRESSING, "False", du.FAILED_RS_CREATE_REASON, msg, self.now),
                )
                try:
                    await self.update_status(d)
                except ApiError:
                    pass
            raise
        if not already_exists and rs.spec.replicas > 0:
            self.ctx.event(
                d,
                KIND,
                NORMAL,
                "ScalingReplicaSet",
                f"Scaled up replica set {created.metadata.name} from 0 to {rs.spec.replicas}",
                component=EVENT_COMPONENT,
            )
            log.info(
                "deployment %s: scaled up replica set %s from 0 to %d",
                key_of(d),
                created.metadata.name,
                rs.spec.replicas,
            )
        needs_update = du.set_deployment_revision(d, new_revision)
        if not already_exists and du.has_progress_deadline(d):
            msg = f'Created new replica set "{created.metadata.name}"'
            du.set_condition(
                d.status, du.new_condition(du.PROGRESSING, "True", du.NEW_REPLICA_SET_REASON, msg, self.now)
            )
            needs_update = True
        if needs_update:
            await self._write_deployment_and_status(d)
        return created

    async def _write_deployment_and_status(self, d: pb.Deployment) -> None:
        """Write the revision annotation and the status. Upstream writes both with UpdateStatus
        (its status strategy keeps metadata changes); kse's status subresource replaces only
        `.status`, so a changed annotation is written first with an update (same spec: the
        generation does not move)."""
        revision = d.metadata.annotations.get(du.REVISION_ANNOTATION)
        if revision != self.stored_revision:
            updated = await self.ctx.clientset.deployments.update(d, fence=self.ctx.fence())
            d.metadata.resource_version = updated.metadata.resource_version
            self.stored_revision = revision
        await self.update_status(d)

    # ------------------------------------------------------------------ scaling

    async def scale_replica_set(
        self, rs: pb.ReplicaSet, new_scale: int, d: pb.Deployment, operation: str
    ) -> tuple[bool, pb.ReplicaSet]:
        """scaleReplicaSet: set the size and the desired/max replicas annotations."""
        size_changed = rs.spec.replicas != new_scale
        desired, max_replicas = d.spec.replicas, d.spec.replicas + du.max_surge(d)
        if not size_changed and not du.replicas_annotations_need_update(rs, desired, max_replicas):
            return False, rs
        old_scale = rs.spec.replicas
        copy = _copy_rs(rs)
        copy.spec.replicas = new_scale
        du.set_replicas_annotations(copy, desired, max_replicas)
        updated = await self._update_rs(copy)
        if size_changed:
            self.ctx.event(
                d,
                KIND,
                NORMAL,
                "ScalingReplicaSet",
                f"Scaled {operation} replica set {rs.metadata.name} from {old_scale} to {new_scale}",
                component=EVENT_COMPONENT,
            )
            log.info(
                "deployment %s: scaled %s replica set %s from %d to %d",
                key_of(d),
                operation,
                rs.metadata.name,
                old_scale,
                new_scale,
            )
        return size_changed, updated

    async def scale_replica_set_and_record_event(
        self, rs: pb.ReplicaSet, new_scale: int, d: pb.Deployment
    ) -> tuple[bool, pb.ReplicaSet]:
        if rs.spec.replicas == new_scale:
            return False, rs
        operation = "up" if rs.spec.replicas < new_scale else "down"
        return await self.scale_replica_set(rs, new_scale, d, operation)

    async def scale(
        self, d: pb.Deployment, new_rs: pb.ReplicaSet | None, old_rss: list[pb.ReplicaSet]
    ) -> None:
        """scale: resize the ReplicaSets for a scaling event (see `scale_plan`)."""
        plan, operation = scale_plan(d, new_rs, old_rss)
        for rs, size in plan:
            if operation is None:
                await self.scale_replica_set_and_record_event(rs, size, d)
            else:
                # Proportional: every active ReplicaSet is written, its size or not, so its
                # desired/max replicas annotations record the new deployment size.
                await self.scale_replica_set(rs, size, d, operation)

    # ------------------------------------------------------------------ status, cleanup, sync

    async def sync_deployment_status(
        self, all_rss: Sequence[pb.ReplicaSet | None], new_rs: pb.ReplicaSet | None, d: pb.Deployment
    ) -> None:
        status = calculate_status(all_rss, new_rs, d, self.now)
        if _same_status(d.status, status):
            return
        d.status.CopyFrom(status)
        await self.update_status(d)

    async def cleanup_deployment(self, old_rss: Sequence[pb.ReplicaSet], d: pb.Deployment) -> None:
        """cleanupDeployment: delete the oldest empty ReplicaSets beyond revisionHistoryLimit."""
        if not du.has_revision_history_limit(d):
            return
        cleanable = [rs for rs in old_rss if not rs.metadata.deletion_timestamp]
        diff = len(cleanable) - d.spec.revision_history_limit
        if diff <= 0:
            return
        for rs in du.by_revision(cleanable)[:diff]:
            if (
                rs.status.replicas != 0
                or rs.spec.replicas != 0
                or rs.metadata.generation > rs.status.observed_generation
                or rs.metadata.deletion_timestamp
            ):
                continue
            log.info("deployment %s: deleting old replica set %s", key_of(d), rs.metadata.name)
            await self.ctx.clientset.replica_sets.delete(
                rs.metadata.namespace, rs.metadata.name, uid=rs.metadata.uid, fence=self.ctx.fence()
            )

    async def sync(self, d: pb.Deployment, rss: Sequence[pb.ReplicaSet]) -> None:
        """sync: a scaling event or a paused deployment: scale, no rollout."""
        new_rs, old_rss = await self.get_all_replica_sets_and_sync_revision(d, rss, False)
        await self.scale(d, new_rs, old_rss)
        if d.spec.paused:
            await self.cleanup_deployment(old_rss, d)
        await self.sync_deployment_status([*old_rss, new_rs], new_rs, d)

    async def sync_status_only(self, d: pb.Deployment, rss: Sequence[pb.ReplicaSet]) -> None:
        new_rs, old_rss = await self.get_all_replica_sets_and_sync_revision(d, rss, False)
        await self.sync_deployment_status([*old_rss, new_rs], new_rs, d)

    async def is_scaling_event(self, d: pb.Deployment, rss: Sequence[pb.ReplicaSet]) -> bool:
        """isScalingEvent: an active ReplicaSet was last sized for another deployment size."""
        new_rs, old_rss = await self.get_all_replica_sets_and_sync_revision(d, rss, False)
        for rs in du.filter_active([*old_rss, new_rs]):
            desired = du.desired_replicas_annotation(rs)
            if desired is not None and desired != d.spec.replicas:
                return True
        return False

    async def check_paused_conditions(self, d: pb.Deployment) -> None:
        """checkPausedConditions: Progressing Unknown DeploymentPaused / DeploymentResumed."""
        if not du.has_progress_deadline(d):
            return
        cond = du.get_condition(d.status, du.PROGRESSING)
        if cond is not None and cond.reason == du.TIMED_OUT_REASON:
            return
        paused_exists = cond is not None and cond.reason == du.PAUSED_DEPLOY_REASON
        if d.spec.paused and not paused_exists:
            new = du.new_condition(
                du.PROGRESSING, "Unknown", du.PAUSED_DEPLOY_REASON, "Deployment is paused", self.now
            )
        elif not d.spec.paused and paused_exists:
            new = du.new_condition(
                du.PROGRESSING, "Unknown", du.RESUMED_DEPLOY_REASON, "Deployment is resumed", self.now
            )
        else:
            return
        du.set_condition(d.status, new)
        await self.update_status(d)


def scale_plan(
    d: pb.Deployment, new_rs: pb.ReplicaSet | None, old_rss: Sequence[pb.ReplicaSet]
) -> tuple[list[tuple[pb.ReplicaSet, int]], str | None]:
    """scale's decisions: (ReplicaSet, new size) pairs and, for a proportional scale, the
    operation ("up", "down", or "" for annotations only; None otherwise).

    The only active (or the newest) ReplicaSet takes the new size; a saturated new ReplicaSet
    leaves the old ones at 0; mid-rollout, the change is spread over the active ReplicaSets in
    proportion to their sizes, largest first, the rounding leftover to the first (scaling up:
    newer first; down: older first)."""
    only = du.find_active_or_latest(new_rs, old_rss)
    if only is not None:
        return ([(only, d.spec.replicas)] if only.spec.replicas != d.spec.replicas else []), None
    if du.is_saturated(d, new_rs):
        return [(old, 0) for old in du.filter_active(old_rss)], None
    if not du.is_rolling_update(d):
        return [], None
    all_rss = du.filter_active([*old_rss, new_rs])
    allowed = d.spec.replicas + du.max_surge(d) if d.spec.replicas > 0 else 0
    to_add = allowed - du.replica_count(all_rss)
    operation = ""
    if to_add > 0:
        all_rss = du.by_size_newer(all_rss)
        operation = "up"
    elif to_add < 0:
        all_rss = du.by_size_older(all_rss)
        operation = "down"
    sizes = proportional_sizes(d, all_rss, to_add)
    return [(rs, sizes[rs.metadata.name]) for rs in all_rss], operation


def proportional_sizes(d: pb.Deployment, all_rss: Sequence[pb.ReplicaSet], to_add: int) -> dict[str, int]:
    """The new size of each active ReplicaSet when `to_add` replicas (negative: removed) are
    spread over them in order (scale's loop); the leftover of rounding goes to the first."""
    sizes: dict[str, int] = {}
    added = 0
    for rs in all_rss:
        if to_add != 0:
            proportion = du.replica_set_proportion(rs, d, to_add, added)
            sizes[rs.metadata.name] = rs.spec.replicas + proportion
            added += proportion
        else:
            sizes[rs.metadata.name] = rs.spec.replicas
    if to_add != 0 and all_rss:
        first = all_rss[0].metadata.name
        sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


def _same_status(a: pb.DeploymentStatus, b: pb.DeploymentStatus) -> bool:
    return a == b
