"""The rollout's status and the Progressing condition, as upstream's
`pkg/controller/deployment/progress.go` (syncRolloutStatus, requeueStuckDeployment).

Progressing is True with reason NewReplicaSetAvailable once the rollout is complete, True with
ReplicaSetUpdated while it makes progress (more updated, fewer old, more ready or available pods
than the last status said), and False with ProgressDeadlineExceeded once no progress was made for
progressDeadlineSeconds. `kubectl rollout status` reads these (and the counts) to decide.
"""

from __future__ import annotations

from collections.abc import Sequence

from controllers import deploymentutil as du
from controllers.deploymentsync import DeploymentSync, calculate_status
from kse.objects.meta import key_of
from kse.objects.timeutil import to_epoch
from proto import kse_pb2 as pb


def rollout_status(
    d: pb.Deployment, all_rss: Sequence[pb.ReplicaSet | None], new_rs: pb.ReplicaSet | None, now: float
) -> pb.DeploymentStatus:
    """The status syncRolloutStatus writes (pure: the counts, Available, Progressing, ReplicaFailure)."""
    status = calculate_status(all_rss, new_rs, d, now)
    if not du.has_progress_deadline(d):
        du.remove_condition(status, du.PROGRESSING)
    current = du.get_condition(d.status, du.PROGRESSING)
    complete = (
        status.replicas == status.updated_replicas
        and current is not None
        and current.reason == du.NEW_RS_AVAILABLE_REASON
    )
    if du.has_progress_deadline(d) and not complete:
        if du.deployment_complete(d, status):
            name = new_rs.metadata.name if new_rs is not None else ""
            msg = f'ReplicaSet "{name}" has successfully progressed.'
            du.set_condition(
                status, du.new_condition(du.PROGRESSING, "True", du.NEW_RS_AVAILABLE_REASON, msg, now)
            )
        elif du.deployment_progressing(d, status):
            msg = f'Deployment "{d.metadata.name}" is progressing.'
            if new_rs is not None:
                msg = f'ReplicaSet "{new_rs.metadata.name}" is progressing.'
            cond = du.new_condition(du.PROGRESSING, "True", du.REPLICA_SET_UPDATED_REASON, msg, now)
            if current is not None:
                if current.status == "True":
                    cond.last_transition_time = current.last_transition_time
                du.remove_condition(status, du.PROGRESSING)
            du.set_condition(status, cond)
        elif du.deployment_timed_out(d, status, now):
            msg = f'Deployment "{d.metadata.name}" has timed out progressing.'
            if new_rs is not None:
                msg = f'ReplicaSet "{new_rs.metadata.name}" has timed out progressing.'
            du.set_condition(status, du.new_condition(du.PROGRESSING, "False", du.TIMED_OUT_REASON, msg, now))
    failure = replica_failure(all_rss, new_rs)
    if failure is not None:
        du.set_condition(status, failure)
    else:
        du.remove_condition(status, du.REPLICA_FAILURE)
    return status


def replica_failure(
    all_rss: Sequence[pb.ReplicaSet | None], new_rs: pb.ReplicaSet | None
) -> pb.DeploymentCondition | None:
    """getReplicaFailures: the new ReplicaSet's ReplicaFailure condition, else any old one's."""
    ordered = [new_rs, *(rs for rs in all_rss if rs is not new_rs)]
    for rs in ordered:
        if rs is None:
            continue
        for c in rs.status.conditions:
            if c.type == du.REPLICA_FAILURE:
                return pb.DeploymentCondition(
                    type=c.type,
                    status=c.status,
                    reason=c.reason,
                    message=c.message,
                    last_update_time=c.last_transition_time,
                    last_transition_time=c.last_transition_time,
                )
    return None


def requeue_after(d: pb.Deployment, status: pb.DeploymentStatus, now: float) -> float | None:
    """requeueStuckDeployment: when to look again so a stuck rollout times out on time (None:
    no need)."""
    current = du.get_condition(d.status, du.PROGRESSING)
    if not du.has_progress_deadline(d) or current is None:
        return None
    if du.deployment_complete(d, status) or current.reason == du.TIMED_OUT_REASON:
        return None
    try:
        since = to_epoch(current.last_update_time)
    except ValueError:
        return None
    after = since + d.spec.progress_deadline_seconds - now
    return 0.0 if after < 1.0 else after + 1.0


async def sync_rollout_status(
    s: DeploymentSync, all_rss: Sequence[pb.ReplicaSet | None], new_rs: pb.ReplicaSet | None, d: pb.Deployment
) -> None:
    """syncRolloutStatus: write the status if it changed, else requeue a stuck deployment."""
    now = s.now
    status = rollout_status(d, all_rss, new_rs, now)
    if d.status == status:
        after = requeue_after(d, status, now)
        if after is not None:
            if after == 0.0:
                s.queue.add_rate_limited(key_of(d))
            else:
                s.queue.add_after(key_of(d), after)
        return
    d.status.CopyFrom(status)
    await s.update_status(d)
