"""Pod predicates every workload controller shares, as upstream's `pkg/api/v1/pod/util.go` and
`pkg/controller/controller_utils.go`: active, ready, available, and the time a pod became ready.

A pod is *active* while it may still run: not Succeeded or Failed, and not terminating
(`metadata.deletionTimestamp` set). *Ready* is its Ready condition being True (nodesim sets it
when it starts the pod). *Available* is ready for at least `minReadySeconds`, measured from the
Ready condition's lastTransitionTime on the controller's clock.
"""

from __future__ import annotations

from kse.objects.meta import object_key
from kse.objects.timeutil import now_rfc3339, to_epoch
from proto import kse_pb2 as pb

POD_SUCCEEDED = "Succeeded"
POD_FAILED = "Failed"
POD_READY = "Ready"
CONDITION_TRUE = "True"


def is_pod_active(pod: pb.Pod) -> bool:
    """controller.IsPodActive: not finished and not being deleted."""
    return pod.status.phase not in (POD_SUCCEEDED, POD_FAILED) and not pod.metadata.deletion_timestamp


def is_pod_terminating(pod: pb.Pod) -> bool:
    return bool(pod.metadata.deletion_timestamp)


def ready_condition(pod: pb.Pod) -> pb.PodCondition | None:
    for cond in pod.status.conditions:
        if cond.type == POD_READY:
            return cond
    return None


def is_pod_ready(pod: pb.Pod) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.status == CONDITION_TRUE


def pod_ready_time(pod: pb.Pod) -> float | None:
    """When the pod became ready (epoch seconds), or None if not ready or unknown."""
    cond = ready_condition(pod)
    if cond is None or cond.status != CONDITION_TRUE or not cond.last_transition_time:
        return None
    try:
        return to_epoch(cond.last_transition_time)
    except ValueError:
        return None


def is_pod_available(pod: pb.Pod, min_ready_seconds: int, now: float) -> bool:
    """podutil.IsPodAvailable: ready, and for minReadySeconds already (0: ready is enough)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    since = pod_ready_time(pod)
    return since is not None and since + min_ready_seconds <= now


def creation_time(obj_meta: pb.ObjectMeta) -> float | None:
    if not obj_meta.creation_timestamp:
        return None
    try:
        return to_epoch(obj_meta.creation_timestamp)
    except ValueError:
        return None


# -- used by the node controllers (nodelifecycle, taint eviction, podgc, daemonset)

TERMINAL_PHASES = (POD_SUCCEEDED, POD_FAILED)
DISRUPTION_TARGET = "DisruptionTarget"


def pod_key(pod: pb.Pod) -> str:
    return object_key(pod.metadata.namespace, pod.metadata.name)


def is_terminal(pod: pb.Pod) -> bool:
    return pod.status.phase in TERMINAL_PHASES


def condition(status: pb.PodStatus, ctype: str) -> pb.PodCondition | None:
    for c in status.conditions:
        if c.type == ctype:
            return c
    return None


def update_condition(status: pb.PodStatus, new: pb.PodCondition) -> bool:
    """podutil.UpdatePodCondition: set `new` in `status`; lastTransitionTime moves only when the
    status changes. False when nothing changed."""
    old = condition(status, new.type)
    stamp = new.last_transition_time or now_rfc3339()
    if old is None:
        cond = status.conditions.add()
        cond.CopyFrom(new)
        cond.last_transition_time = stamp
        return True
    if (old.status, old.reason, old.message) == (new.status, new.reason, new.message):
        return False
    if old.status != new.status:
        old.last_transition_time = stamp
    old.status, old.reason, old.message = new.status, new.reason, new.message
    if new.last_probe_time:
        old.last_probe_time = new.last_probe_time
    return True


def controller_of(meta: pb.ObjectMeta) -> pb.OwnerReference | None:
    """metav1.GetControllerOf: the owner reference with controller=true."""
    for ref in meta.owner_references:
        if ref.HasField("controller") and ref.controller:
            return ref
    return None
