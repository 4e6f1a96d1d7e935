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


async def reconcile_new_replica_set(
    s: DeploymentSync, all_rss: Sequence[pb.ReplicaSet], new_rs: pb.ReplicaSet, d: pb.Deployment
) -> bool:
    if new_rs.spec.replicas == d.spec.replicas:
        return False
    if new_rs.spec.replicas > d.spec.replicas:
        scaled, _ = await s.scale_replica_set_and_record_event(new_rs, d.spec.replicas, d)
        return scaled
    count = du.new_rs_new_replicas(d, all_rss, new_rs)
    scaled, _ = await s.scale_replica_set_and_record_event(new_rs, count, d)
    return scaled


def max_scaled_down(all_rss: Sequence[pb.ReplicaSet], new_rs: pb.ReplicaSet, d: pb.Deployment) -> int:
    """How many old replicas may go now without dropping below minAvailable, counting the new
    ReplicaSet's unavailable pods as already missing (reconcileOldReplicaSets)."""
    all_pods = du.replica_count(all_rss)
    min_available = d.spec.replicas - du.max_unavailable(d)
    new_unavailable = new_rs.spec.replicas - new_rs.status.available_replicas
    return all_pods - min_available - new_unavailable


async def reconcile_old_replica_sets(
    s: DeploymentSync,
    all_rss: Sequence[pb.ReplicaSet],
    old_rss: list[pb.ReplicaSet],
    new_rs: pb.ReplicaSet,
    d: pb.Deployment,
) -> bool:
    if du.replica_count(old_rss) == 0:
        return False
    budget = max_scaled_down(all_rss, new_rs, d)
    if budget <= 0:
        return False
    old_rss, cleaned = await cleanup_unhealthy_replicas(s, old_rss, d, budget)
    scaled = await scale_down_old_for_rolling_update(s, [*old_rss, new_rs], old_rss, d)
    return cleaned + scaled > 0


async def cleanup_unhealthy_replicas(
    s: DeploymentSync, old_rss: list[pb.ReplicaSet], d: pb.Deployment, max_cleanup: int
) -> tuple[list[pb.ReplicaSet], int]:
    """cleanupUnhealthyReplicas: drop old replicas that are not available, oldest first."""
    ordered = du.by_creation_timestamp(old_rss)
    total = 0
    for i, rs in enumerate(ordered):
        if total >= max_cleanup:
            break
        if rs.spec.replicas == 0 or rs.spec.replicas == rs.status.available_replicas:
            continue
        count = min(max_cleanup - total, rs.spec.replicas - rs.status.available_replicas)
        new_count = rs.spec.replicas - count
        if new_count > rs.spec.replicas:
            raise ValueError(
                f"when cleaning up unhealthy replicas, got invalid request to scale down "
                f"{rs.metadata.namespace}/{rs.metadata.name} {rs.spec.replicas} -> {new_count}"
            )
        _, ordered[i] = await s.scale_replica_set_and_record_event(rs, new_count, d)
        total += count
    return ordered, total


async def scale_down_old_for_rolling_update(
    s: DeploymentSync, all_rss: Sequence[pb.ReplicaSet], old_rss: Sequence[pb.ReplicaSet], d: pb.Deployment
) -> int:
    """scaleDownOldReplicaSetsForRollingUpdate: the available pods above minAvailable, oldest
    ReplicaSet first."""
    min_available = d.spec.replicas - du.max_unavailable(d)
    available = du.available_replica_count(all_rss)
    if available <= min_available:
        return 0
    budget = available - min_available
    total = 0
    for rs in du.by_creation_timestamp(old_rss):
        if total >= budget:
            break
        if rs.spec.replicas == 0:
            continue
        count = min(rs.spec.replicas, budget - total)
        await s.scale_replica_set_and_record_event(rs, rs.spec.replicas - count, d)
        total += count
    return total


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
