"""Deployment arithmetic and bookkeeping, as upstream's
`pkg/controller/deployment/util/deployment_util.go` (pure functions, unit-tested on its tables).

* the pod-template-hash: `deployment.kubernetes.io`'s `pod-template-hash` label, which names and
  selects a Deployment's ReplicaSet per template (`compute_hash`: FNV-32a over the template and the
  collisionCount, encoded as upstream's SafeEncodeString; the input bytes are kse's deterministic
  protobuf, so the hash differs from upstream's for the same template, but has the same properties);
* annotations: `revision` (which rollout a ReplicaSet is), `revision-history`, `desired-replicas`
  and `max-replicas` (the deployment's size and size + maxSurge when the ReplicaSet was last scaled,
  which proportional scaling reads);
* MaxSurge / MaxUnavailable resolution (`resolve_fenceposts`), `new_rs_new_replicas`, replica counts,
  the proportion of a scale-up or -down each ReplicaSet takes;
* the conditions (Progressing, Available, ReplicaFailure) and their reasons.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence

from controllers.podutil import creation_time
from kse.objects.intstr import int_or_string, scaled_value
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"
# Annotations of a Deployment that are not copied to its ReplicaSets (skipCopyAnnotation).
SKIPPED_ANNOTATIONS = frozenset(
    {
        LAST_APPLIED_ANNOTATION,
        REVISION_ANNOTATION,
        REVISION_HISTORY_ANNOTATION,
        DESIRED_REPLICAS_ANNOTATION,
        MAX_REPLICAS_ANNOTATION,
        ROLLBACK_TO_ANNOTATION,
    }
)
# deployment-controller's maxRevHistoryLengthInChars.
MAX_REV_HISTORY_LENGTH_IN_CHARS = 2000
MAX_INT32 = 2**31 - 1

ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"

# Condition types and reasons (deployment_util.go).
AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
REPLICA_SET_UPDATED_REASON = "ReplicaSetUpdated"
NEW_REPLICA_SET_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
PAUSED_DEPLOY_REASON = "DeploymentPaused"
RESUMED_DEPLOY_REASON = "DeploymentResumed"


# ---------------------------------------------------------------- the template hash

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery rand.SafeEncodeString: no vowels, no 0/1/3


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def safe_encode_string(text: str) -> str:
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in text)


def compute_hash(template: pb.PodTemplateSpec, collision_count: int | None) -> str:
    """controller.ComputeHash: a short, label-safe hash of the template (and collisionCount)."""
    data = template.SerializeToString(deterministic=True)
    if collision_count is not None:
        data += collision_count.to_bytes(4, "little", signed=False)
    return safe_encode_string(str(fnv32a(data)))


def template_without_hash(template: pb.PodTemplateSpec) -> pb.PodTemplateSpec:
    out = pb.PodTemplateSpec()
    out.CopyFrom(template)
    out.metadata.labels.pop(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, None)
    return out


def equal_ignore_hash(a: pb.PodTemplateSpec, b: pb.PodTemplateSpec) -> bool:
    """EqualIgnoreHash: the templates are the same but for the pod-template-hash label."""
    return template_without_hash(a) == template_without_hash(b)


# ---------------------------------------------------------------- ordering and finding


def _created(rs: pb.ReplicaSet) -> float:
    t = creation_time(rs.metadata)
    return t if t is not None else 0.0


def by_creation_timestamp(rss: Iterable[pb.ReplicaSet]) -> list[pb.ReplicaSet]:
    """ReplicaSetsByCreationTimestamp: oldest first, ties by name."""
    return sorted(rss, key=lambda r: (_created(r), r.metadata.name))


def by_size_older(rss: Iterable[pb.ReplicaSet]) -> list[pb.ReplicaSet]:
    """ReplicaSetsBySizeOlder: largest first, ties oldest first."""
    return sorted(rss, key=lambda r: (-r.spec.replicas, _created(r), r.metadata.name))


def by_size_newer(rss: Iterable[pb.ReplicaSet]) -> list[pb.ReplicaSet]:
    """ReplicaSetsBySizeNewer: largest first, ties newest first."""
    ordered = sorted(rss, key=lambda r: (_created(r), r.metadata.name), reverse=True)
    return sorted(ordered, key=lambda r: -r.spec.replicas)


def revision(rs: pb.ReplicaSet) -> int:
    """The revision annotation as an int (0 when absent or unparsable, as upstream logs and skips)."""
    text = rs.metadata.annotations.get(REVISION_ANNOTATION, "")
    try:
        return int(text, 10)
    except ValueError:
        return 0


def by_revision(rss: Iterable[pb.ReplicaSet]) -> list[pb.ReplicaSet]:
    """ReplicaSetsByRevision: lowest revision first, ties by creation."""
    return sorted(rss, key=lambda r: (revision(r), _created(r), r.metadata.name))


def max_revision(rss: Iterable[pb.ReplicaSet]) -> int:
    return max((revision(r) for r in rss), default=0)


def find_new_replica_set(d: pb.Deployment, rss: Sequence[pb.ReplicaSet]) -> pb.ReplicaSet | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template is the deployment's."""
    for rs in by_creation_timestamp(rss):
        if equal_ignore_hash(rs.spec.template, d.spec.template):
            return rs
    return None


def find_old_replica_sets(d: pb.Deployment, rss: Sequence[pb.ReplicaSet]) -> list[pb.ReplicaSet]:
    """FindOldReplicaSets (the "all old" list): every ReplicaSet but the new one."""
    new = find_new_replica_set(d, rss)
    return [rs for rs in rss if new is None or rs.metadata.uid != new.metadata.uid]


def filter_active(rss: Iterable[pb.ReplicaSet | None]) -> list[pb.ReplicaSet]:
    """FilterActiveReplicaSets: those with spec.replicas > 0."""
    return [rs for rs in rss if rs is not None and rs.spec.replicas > 0]


def find_active_or_latest(
    new_rs: pb.ReplicaSet | None, old_rss: Sequence[pb.ReplicaSet]
) -> pb.ReplicaSet | None:
    """FindActiveOrLatest: the only active ReplicaSet, or the newest when none is active; None
    when several are active."""
    if new_rs is None and not old_rss:
        return None
    olds = list(reversed(by_creation_timestamp(old_rss)))
    active = filter_active([*olds, new_rs])
    if not active:
        return new_rs if new_rs is not None else olds[0]
    if len(active) == 1:
        return active[0]
    return None


# ---------------------------------------------------------------- counts


def replica_count(rss: Iterable[pb.ReplicaSet | None]) -> int:
    """GetReplicaCountForReplicaSets: the sum of spec.replicas."""
    return sum(rs.spec.replicas for rs in rss if rs is not None)


def actual_replica_count(rss: Iterable[pb.ReplicaSet | None]) -> int:
    """GetActualReplicaCountForReplicaSets: the sum of status.replicas."""
    return sum(rs.status.replicas for rs in rss if rs is not None)


def ready_replica_count(rss: Iterable[pb.ReplicaSet | None]) -> int:
    return sum(rs.status.ready_replicas for rs in rss if rs is not None)


def available_replica_count(rss: Iterable[pb.ReplicaSet | None]) -> int:
    return sum(rs.status.available_replicas for rs in rss if rs is not None)


# ---------------------------------------------------------------- surge and unavailability


def is_rolling_update(d: pb.Deployment) -> bool:
    return d.spec.strategy.type == ROLLING_UPDATE


def _intstr_or_zero(strategy: pb.DeploymentStrategy, field: str) -> int | str:
    """A rolling-update field, 0 when unset (intstrutil.ValueOrDefault(x, 0))."""
    ru = strategy.rolling_update
    if not ru.HasField(field):
        return 0
    got = int_or_string(getattr(ru, field))
    return 0 if got is None else got


def resolve_fenceposts(max_surge: int | str, max_unavailable: int | str, desired: int) -> tuple[int, int]:
    """ResolveFenceposts: surge rounds up, unavailable down; both 0 would never progress, so
    unavailable becomes 1."""
    surge = scaled_value(max_surge, desired, round_up=True)
    unavailable = scaled_value(max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: pb.Deployment) -> int:
    if not is_rolling_update(d):
        return 0
    surge, _ = resolve_fenceposts(
        _intstr_or_zero(d.spec.strategy, "max_surge"),
        _intstr_or_zero(d.spec.strategy, "max_unavailable"),
        d.spec.replicas,
    )
    return surge


def max_unavailable(d: pb.Deployment) -> int:
    if not is_rolling_update(d) or d.spec.replicas == 0:
        return 0
    _, unavailable = resolve_fenceposts(
        _intstr_or_zero(d.spec.strategy, "max_surge"),
        _intstr_or_zero(d.spec.strategy, "max_unavailable"),
        d.spec.replicas,
    )
    return min(unavailable, d.spec.replicas)


def new_rs_new_replicas(
    d: pb.Deployment, all_rss: Sequence[pb.ReplicaSet | None], new_rs: pb.ReplicaSet
) -> int:
    """NewRSNewReplicas: how big the new ReplicaSet may be now."""
    if d.spec.strategy.type == ROLLING_UPDATE:
        surge = scaled_value(_intstr_or_zero(d.spec.strategy, "max_surge"), d.spec.replicas, round_up=True)
        current = replica_count(all_rss)
        max_total = d.spec.replicas + surge
        if current >= max_total:
            return new_rs.spec.replicas
        scale_up = min(max_total - current, d.spec.replicas - new_rs.spec.replicas)
        return new_rs.spec.replicas + scale_up
    if d.spec.strategy.type == RECREATE:
        return d.spec.replicas
    raise ValueError(f"deployment type {d.spec.strategy.type!r} isn't supported")


def is_saturated(d: pb.Deployment, rs: pb.ReplicaSet | None) -> bool:
    """IsSaturated: the ReplicaSet alone is at the deployment's full, available size."""
    if rs is None:
        return False
    desired = _int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)
    return (
        desired == d.spec.replicas
        and rs.spec.replicas == d.spec.replicas
        and rs.status.available_replicas == d.spec.replicas
    )


# ---------------------------------------------------------------- proportional scaling


def _int_annotation(rs: pb.ReplicaSet, key: str) -> int | None:
    """getNonNegativeInt32FromAnnotation: the value if it is a decimal in [0, MaxInt32], else None."""
    text = rs.metadata.annotations.get(key)
    if text is None:
        return None
    value = int(text, 10) if text.isdigit() and text.isascii() else -1
    if not 0 <= value <= MAX_INT32:
        log.debug("replicaset %s: annotation %s=%r is not a non-negative int32", rs.metadata.name, key, text)
        return None
    return value


def desired_replicas_annotation(rs: pb.ReplicaSet) -> int | None:
    return _int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)


def _round_half_away(x: float) -> int:
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def replica_set_fraction(rs: pb.ReplicaSet, d: pb.Deployment) -> int:
    """getReplicaSetFraction: this ReplicaSet's share of the change in the deployment's max size."""
    if d.spec.replicas == 0:
        return -rs.spec.replicas
    deployment_max = d.spec.replicas + max_surge(d)
    before = _int_annotation(rs, MAX_REPLICAS_ANNOTATION)
    if not before:
        before = d.status.replicas
        if before == 0:
            return 0
    new_size = rs.spec.replicas * deployment_max / before
    return _round_half_away(new_size) - rs.spec.replicas


def replica_set_proportion(rs: pb.ReplicaSet | None, d: pb.Deployment, to_add: int, added: int) -> int:
    """GetReplicaSetProportion: how many replicas this ReplicaSet adds (or, negative, removes)
    of `to_add`, `added` having been handed out already."""
    if rs is None or rs.spec.replicas == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


# ---------------------------------------------------------------- annotations


def replicas_annotations_need_update(rs: pb.ReplicaSet, desired: int, max_replicas: int) -> bool:
    ann = rs.metadata.annotations
    return ann.get(DESIRED_REPLICAS_ANNOTATION) != str(desired) or ann.get(MAX_REPLICAS_ANNOTATION) != str(
        max_replicas
    )


def set_replicas_annotations(rs: pb.ReplicaSet, desired: int, max_replicas: int) -> bool:
    """SetReplicasAnnotations: whether anything changed."""
    if not replicas_annotations_need_update(rs, desired, max_replicas):
        return False
    rs.metadata.annotations[DESIRED_REPLICAS_ANNOTATION] = str(desired)
    rs.metadata.annotations[MAX_REPLICAS_ANNOTATION] = str(max_replicas)
    return True


def copy_deployment_annotations_to_replica_set(d: pb.Deployment, rs: pb.ReplicaSet) -> bool:
    changed = False
    for k, v in d.metadata.annotations.items():
        if k in SKIPPED_ANNOTATIONS or rs.metadata.annotations.get(k) == v:
            continue
        rs.metadata.annotations[k] = v
        changed = True
    return changed


def set_new_replica_set_annotations(
    d: pb.Deployment,
    rs: pb.ReplicaSet,
    new_revision: str,
    exists: bool,
    rev_history_limit_in_chars: int = MAX_REV_HISTORY_LENGTH_IN_CHARS,
) -> bool:
    """SetNewReplicaSetAnnotations: copy the deployment's annotations, raise the revision (keeping
    the old one in revision-history), and on creation the desired/max replicas; whether anything
    changed."""
    changed = copy_deployment_annotations_to_replica_set(d, rs)
    ann = rs.metadata.annotations
    had_old = REVISION_ANNOTATION in ann
    old_revision = ann.get(REVISION_ANNOTATION, "")
    try:
        old_int = int(old_revision, 10) if old_revision else 0
    except ValueError:
        return False
    try:
        new_int = int(new_revision, 10)
    except ValueError:
        return False
    if old_int < new_int:
        ann[REVISION_ANNOTATION] = new_revision
        changed = True
    if had_old and old_int < new_int:
        history = ann.get(REVISION_HISTORY_ANNOTATION, "")
        olds = history.split(",")
        if not olds[0]:
            ann[REVISION_HISTORY_ANNOTATION] = old_revision
        else:
            total = len(history) + len(old_revision) + 1
            start = 0
            while total > rev_history_limit_in_chars and start < len(olds):
                total -= len(olds[start]) + 1
                start += 1
            if total <= rev_history_limit_in_chars:
                ann[REVISION_HISTORY_ANNOTATION] = ",".join([*olds[start:], old_revision])
            else:
                log.warning(
                    "not appending revision %s to revision-history of %s: too long",
                    old_revision,
                    rs.metadata.name,
                )
    if not exists and set_replicas_annotations(rs, d.spec.replicas, d.spec.replicas + max_surge(d)):
        changed = True
    return changed


def set_deployment_revision(d: pb.Deployment, rev: str) -> bool:
    if d.metadata.annotations.get(REVISION_ANNOTATION) == rev:
        return False
    d.metadata.annotations[REVISION_ANNOTATION] = rev
    return True


# ---------------------------------------------------------------- conditions


def new_condition(type_: str, status: str, reason: str, message: str, now: float) -> pb.DeploymentCondition:
    t = format_time(now)
    return pb.DeploymentCondition(
        type=type_, status=status, reason=reason, message=message, last_update_time=t, last_transition_time=t
    )


def get_condition(status: pb.DeploymentStatus, type_: str) -> pb.DeploymentCondition | None:
    for c in status.conditions:
        if c.type == type_:
            return c
    return None


def set_condition(status: pb.DeploymentStatus, cond: pb.DeploymentCondition) -> None:
    """SetDeploymentCondition: same status and reason: unchanged; same status: keep its
    lastTransitionTime; the condition goes last."""
    current = get_condition(status, cond.type)
    if current is not None and current.status == cond.status and current.reason == cond.reason:
        return
    new = pb.DeploymentCondition()
    new.CopyFrom(cond)
    if current is not None and current.status == cond.status:
        new.last_transition_time = current.last_transition_time
    remove_condition(status, cond.type)
    status.conditions.append(new)


def remove_condition(status: pb.DeploymentStatus, type_: str) -> None:
    kept = [c for c in status.conditions if c.type != type_]
    if len(kept) != len(status.conditions):
        del status.conditions[:]
        status.conditions.extend(kept)


def has_progress_deadline(d: pb.Deployment) -> bool:
    return d.spec.HasField("progress_deadline_seconds") and d.spec.progress_deadline_seconds != MAX_INT32


def has_revision_history_limit(d: pb.Deployment) -> bool:
    return d.spec.HasField("revision_history_limit") and d.spec.revision_history_limit != MAX_INT32


def deployment_complete(d: pb.Deployment, status: pb.DeploymentStatus) -> bool:
    """DeploymentComplete: every replica updated and available, nothing old left, observed."""
    n = d.spec.replicas
    return (
        status.updated_replicas == n
        and status.replicas == n
        and status.available_replicas == n
        and status.observed_generation >= d.metadata.generation
    )


def deployment_progressing(d: pb.Deployment, new: pb.DeploymentStatus) -> bool:
    """DeploymentProgressing: more updated, fewer old, more ready or more available than before."""
    old = d.status
    return (
        new.updated_replicas > old.updated_replicas
        or (new.replicas - new.updated_replicas) < (old.replicas - old.updated_replicas)
        or new.ready_replicas > old.ready_replicas
        or new.available_replicas > old.available_replicas
    )


def deployment_timed_out(d: pb.Deployment, new: pb.DeploymentStatus, now: float) -> bool:
    """DeploymentTimedOut: no progress for progressDeadlineSeconds since the Progressing
    condition last changed."""
    from kse.objects.timeutil import to_epoch

    if not has_progress_deadline(d):
        return False
    cond = get_condition(new, PROGRESSING)
    if cond is None or cond.reason == NEW_RS_AVAILABLE_REASON:
        return False
    if cond.reason == TIMED_OUT_REASON:
        return True
    try:
        since = to_epoch(cond.last_update_time)
    except ValueError:
        return False
    return since + d.spec.progress_deadline_seconds < now
