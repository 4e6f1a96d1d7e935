"""Pod helpers shared by the controllers (upstream pkg/api/v1/pod and pkg/controller/controller_utils.go)."""

from __future__ import annotations

from kse.objects.meta import object_key
from kse.objects.timeutil import now_rfc3339, to_epoch
from proto import kse_pb2 as pb

SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINAL_PHASES = (SUCCEEDED, FAILED)

POD_READY = "Ready"
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


def is_ready(pod: pb.Pod) -> bool:
    c = condition(pod.status, POD_READY)
    return c is not None and c.status == "True"


def is_available(pod: pb.Pod, min_ready_seconds: int, now: float) -> bool:
    """podutil.IsPodAvailable: Ready, and Ready for at least minReadySeconds."""
    c = condition(pod.status, POD_READY)
    if c is None or c.status != "True":
        return False
    if min_ready_seconds <= 0:
        return True
    if not c.last_transition_time:
        return False
    try:
        return to_epoch(c.last_transition_time) + min_ready_seconds <= now
    except ValueError:
        return False


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
