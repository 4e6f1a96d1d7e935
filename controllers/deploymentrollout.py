"""The two rollout strategies, as upstream's `pkg/controller/deployment/rolling.go` and
`recreate.go`.

RollingUpdate, each sync doing one step and returning (the writes' events bring the next sync):

1. scale the new ReplicaSet up, keeping the sum of all ReplicaSets' sizes <= replicas + maxSurge
   (`new_rs_new_replicas`);
2. otherwise scale old ReplicaSets down, keeping available pods >= replicas - maxUnavailable:
   first the old replicas that are not available at all (they cost no availability), then, oldest
   ReplicaSet first, as many as availability allows;
3. once complete, delete old empty ReplicaSets beyond revisionHistoryLimit.

Recreate: scale every old ReplicaSet to 0, wait until none of their pods is left running, then
create or scale the new ReplicaSet to the full size.
"""

from __future__ import annotations

from collections.abc import Sequence

from controllers import deploymentutil as du
from controllers.deploymentprogress import sync_rollout_status
from controllers.deploymentsync import DeploymentSync
from proto import kse_pb2 as pb


async def rollout_rolling(s: DeploymentSync, d: pb.Deployment, rss: Sequence[pb.ReplicaSet]) -> None:
    new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(d, rss, True)
    assert new_rs is not None  # created when missing, or the create raised
    all_rss: list[pb.ReplicaSet] = [*old_rss, new_rs]
    if await reconcile_new_replica_set(s, all_rss, new_rs, d):
        await sync_rollout_status(s, all_rss, new_rs, d)
        return
    if await reconcile_old_replica_sets(s, all_rss, du.filter_active(old_rss), new_rs, d):
        await sync_rollout_status(s, all_rss, new_rs, d)
        return
    if du.deployment_complete(d, d.status):
        await s.cleanup_deployment(old_rss, d)
    await sync_rollout_status(s, all_rss, new_rs, d)


def new_replica_set_target(all_rss: Sequence[pb.ReplicaSet], new_rs: pb.ReplicaSet, d: pb.Deployment) -> int:
    """reconcileNewReplicaSet's decision: the size the new ReplicaSet should have now."""
    if new_rs.spec.replicas >= d.spec.replicas:
        return d.spec.replicas
    return du.new_rs_new_replicas(d, all_rss, new_rs)


async def reconcile_new_replica_set(
    s: DeploymentSync, all_rss: Sequence[pb.ReplicaSet], new_rs: pb.ReplicaSet, d: pb.Deployment
) -> bool:
    target = new_replica_set_target(all_rss, new_rs, d)
    if target == new_rs.spec.replicas:
        return False
    scaled, _ = await s.scale_replica_set_and_record_event(new_rs, target, d)
    return scaled


def max_scaled_down(all_rss: Sequence[pb.ReplicaSet], new_rs: pb.ReplicaSet, d: pb.Deployment) -> int:
    """How many old replicas may go now without dropping below minAvailable, counting the new
    ReplicaSet's unavailable pods as already missing (reconcileOldReplicaSets)."""
    all_pods = du.replica_count(all_rss)
    min_available = d.spec.replicas - du.max_unavailable(d)
    new_unavailable = new_rs.spec.replicas - new_rs.status.available_replicas
    return all_pods - min_available - new_unavailable


Plan = list[tuple[pb.ReplicaSet, int]]  # (a ReplicaSet as it is, its new size), in order


class InvalidScaleDown(Exception):
    """The cleanup would scale an old ReplicaSet *up*: its status counts more available pods
    than its spec asks for (the ReplicaSet controller has not yet deleted the pods of a
    scale-down it has not observed). Upstream returns this as a sync error so the deployment is
    retried once the status catches up; acting on it would re-create pods just being removed
    and overshoot maxSurge (seen right after a controller-manager leader change)."""


def unhealthy_cleanup_plan(old_rss: Sequence[pb.ReplicaSet], max_cleanup: int) -> Plan:
    """cleanupUnhealthyReplicas: remove old replicas that are not available (they cost no
    availability), oldest ReplicaSet first, at most `max_cleanup`. Raises InvalidScaleDown as
    upstream does (`pkg/controller/deployment/rolling.go`) when a ReplicaSet reports more
    available pods than its size."""
    plan: Plan = []
    total = 0
    for rs in du.by_creation_timestamp(old_rss):
        if total >= max_cleanup:
            break
        if rs.spec.replicas == 0 or rs.spec.replicas == rs.status.available_replicas:
            continue
        count = min(max_cleanup - total, rs.spec.replicas - rs.status.available_replicas)
        if count < 0:
            raise InvalidScaleDown(
                "when cleaning up unhealthy replicas, got invalid request to scale down "
                f"{rs.metadata.namespace}/{rs.metadata.name} {rs.spec.replicas} -> {rs.spec.replicas - count}"
            )
        plan.append((rs, rs.spec.replicas - count))
        total += count
    return plan


def rolling_scale_down_plan(
    all_rss: Sequence[pb.ReplicaSet], old_rss: Sequence[pb.ReplicaSet], d: pb.Deployment
) -> Plan:
    """scaleDownOldReplicaSetsForRollingUpdate: the available pods above minAvailable, oldest
    ReplicaSet first."""
    min_available = d.spec.replicas - du.max_unavailable(d)
    available = du.available_replica_count(all_rss)
    if available <= min_available:
        return []
    budget = available - min_available
    plan: Plan = []
    total = 0
    for rs in du.by_creation_timestamp(old_rss):
        if total >= budget:
            break
        if rs.spec.replicas == 0:
            continue
        count = min(rs.spec.replicas, budget - total)
        plan.append((rs, rs.spec.replicas - count))
        total += count
    return plan


def _resized(rs: pb.ReplicaSet, replicas: int) -> pb.ReplicaSet:
    out = pb.ReplicaSet()
    out.CopyFrom(rs)
    out.spec.replicas = replicas
    return out


def old_replica_sets_plan(
    all_rss: Sequence[pb.ReplicaSet],
    old_rss: Sequence[pb.ReplicaSet],
    new_rs: pb.ReplicaSet,
    d: pb.Deployment,
) -> tuple[Plan, Plan]:
    """reconcileOldReplicaSets' decisions: the unhealthy cleanup, then the scale-down computed on
    the ReplicaSets as the cleanup leaves them."""
    if du.replica_count(old_rss) == 0:
        return [], []
    budget = max_scaled_down(all_rss, new_rs, d)
    if budget <= 0:
        return [], []
    cleanup = unhealthy_cleanup_plan(old_rss, budget)
    sizes = {rs.metadata.name: n for rs, n in cleanup}
    after = [_resized(rs, sizes[rs.metadata.name]) if rs.metadata.name in sizes else rs for rs in old_rss]
    return cleanup, rolling_scale_down_plan([*after, new_rs], after, d)


async def reconcile_old_replica_sets(
    s: DeploymentSync,
    all_rss: Sequence[pb.ReplicaSet],
    old_rss: list[pb.ReplicaSet],
    new_rs: pb.ReplicaSet,
    d: pb.Deployment,
) -> bool:
    cleanup, scale_down = old_replica_sets_plan(all_rss, old_rss, new_rs, d)
    written: dict[str, pb.ReplicaSet] = {}
    for rs, size in cleanup:
        _, written[rs.metadata.name] = await s.scale_replica_set_and_record_event(rs, size, d)
    for rs, size in scale_down:
        current = written.get(rs.metadata.name, rs)  # the cleanup's write: its resourceVersion
        await s.scale_replica_set_and_record_event(current, size, d)
    return bool(cleanup or scale_down)


async def rollout_recreate(
    s: DeploymentSync, d: pb.Deployment, rss: Sequence[pb.ReplicaSet], pod_map: dict[str, list[pb.Pod]]
) -> None:
    new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(d, rss, False)
    all_rss: list[pb.ReplicaSet | None] = [*old_rss, new_rs]
    scaled_down = False
    for rs in du.filter_active(old_rss):
        scaled, _ = await s.scale_replica_set_and_record_event(rs, 0, d)
        scaled_down = scaled_down or scaled
    if scaled_down:
        await sync_rollout_status(s, all_rss, new_rs, d)
        return
    if old_pods_running(new_rs, old_rss, pod_map):
        await sync_rollout_status(s, all_rss, new_rs, d)
        return
    if new_rs is None:
        new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(d, rss, True)
        all_rss = [*old_rss, new_rs]
    assert new_rs is not None
    await s.scale_replica_set_and_record_event(new_rs, d.spec.replicas, d)
    if du.deployment_complete(d, d.status):
        await s.cleanup_deployment(old_rss, d)
    await sync_rollout_status(s, all_rss, new_rs, d)


def old_pods_running(
    new_rs: pb.ReplicaSet | None, old_rss: Sequence[pb.ReplicaSet], pod_map: dict[str, list[pb.Pod]]
) -> bool:
    """oldPodsRunning: an old ReplicaSet still reports pods, or a pod of one is not finished."""
    if du.actual_replica_count(old_rss) > 0:
        return True
    for uid, pods in pod_map.items():
        if new_rs is not None and new_rs.metadata.uid == uid:
            continue
        for pod in pods:
            if pod.status.phase not in ("Failed", "Succeeded"):
                return True
    return False
