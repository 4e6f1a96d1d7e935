"""Graceful deletion of pods: what a Delete with a grace period does to a stored pod.

Upstream splits it in two: `rest.BeforeDelete` (k8s.io/apiserver/pkg/registry/rest/delete.go) and
the pod strategy's `CheckGracefulDelete` (pkg/registry/core/pod/strategy.go). Their rules, kept here:

* the grace period is the DeleteOptions' `gracePeriodSeconds`, else the pod's
  `spec.terminationGracePeriodSeconds` (defaulted to 30 on create), else 0; a negative one counts
  as 1 s;
* an unscheduled pod (no `spec.nodeName`) or a terminal one (Succeeded / Failed) is deleted at
  once, whatever the grace period: no kubelet has anything to stop;
* grace 0 deletes at once; grace > 0 instead sets `metadata.deletionTimestamp` (now + grace) and
  `deletionGracePeriodSeconds`, and the pod stays until its kubelet (nodesim) has stopped it and
  deletes it with grace 0;
* a pod already terminating: a shorter grace period moves the deadline earlier (the timestamp
  minus the old period plus the new one); an equal or longer one, or none, changes nothing (the
  delete answers the pod as it is); a terminating pod whose period is 0 (or unset) is deleted.

Other kinds have no graceful strategy: they are always deleted at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kse.objects.timeutil import format_time, to_epoch
from proto import kse_pb2 as pb

DEFAULT_TERMINATION_GRACE_PERIOD_S = 30  # SetDefaults_PodSpec's TerminationGracePeriodSeconds
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Deletion:
    """What a delete does: remove the key now (`immediate`), write `pod` (a graceful delete
    starting or shortened), or nothing (`pod is None` and not immediate: already pending)."""

    immediate: bool
    pod: pb.Pod | None = None

    @property
    def pending(self) -> bool:
        return not self.immediate and self.pod is None


IMMEDIATE = Deletion(True)
PENDING = Deletion(False)


def effective_grace(requested: int | None) -> int | None:
    """BeforeDelete: a negative grace period is treated as 1 s."""
    if requested is not None and requested < 0:
        return 1
    return requested


def plan_pod_deletion(pod: pb.Pod, requested: int | None, now: float | None = None) -> Deletion:
    """The deletion of stored `pod` for a DeleteOptions grace period `requested` (None: unset).
    The returned pod (if any) is a copy; `pod` is not modified."""
    now = time.time() if now is None else now
    grace = effective_grace(requested)
    meta = pod.metadata
    if meta.deletion_timestamp:
        old = meta.deletion_grace_period_seconds if meta.HasField("deletion_grace_period_seconds") else 0
        if old <= 0:
            return IMMEDIATE
        if grace is None or grace >= old:
            return PENDING
        if grace == 0:
            return IMMEDIATE
        out = pb.Pod()
        out.CopyFrom(pod)
        deadline = to_epoch(meta.deletion_timestamp) - old + grace
        out.metadata.deletion_timestamp = format_time(deadline)
        out.metadata.deletion_grace_period_seconds = grace
        out.metadata.resource_version = ""
        return Deletion(False, out)
    period = grace
    if period is None:
        spec = pod.spec
        period = (
            spec.termination_grace_period_seconds if spec.HasField("termination_grace_period_seconds") else 0
        )
    if not pod.spec.node_name or pod.status.phase in TERMINAL_PHASES:
        period = 0
    if period <= 0:
        return IMMEDIATE
    return Deletion(False, terminating(pod, period, now))


def terminating(pod: pb.Pod, grace: int, now: float) -> pb.Pod:
    """A copy of `pod` marked for deletion in `grace` seconds from `now` (BeforeDelete: the
    generation moves too, as for any object whose deletion starts)."""
    out = pb.Pod()
    out.CopyFrom(pod)
    meta = out.metadata
    meta.deletion_timestamp = format_time(now + grace)
    meta.deletion_grace_period_seconds = grace
    if meta.generation > 0:
        meta.generation += 1
    meta.resource_version = ""
    return out
