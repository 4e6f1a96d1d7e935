"""Victim ordering helpers (upstream ``pkg/scheduler/util/utils.go``: GetPodStartTime,
GetEarliestPodStartTime, MoreImportantPod)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from kse.objects.timeutil import epoch_or_none
from proto import kse_pb2 as pb
from scheduler.framework.plugins.helper.priority import pod_priority


def pod_start_time(pod: pb.Pod, now: float | None = None) -> float:
    """status.startTime in epoch seconds; a pod that has not started (assumed, or bound and not
    yet running) counts as starting now, as upstream."""
    started = epoch_or_none(pod.status.start_time)
    if started is not None:
        return started
    return time.time() if now is None else now


def earliest_pod_start_time(victims: Sequence[pb.Pod], now: float | None = None) -> float | None:
    """The earliest start time among the highest-priority victims (None for no victims)."""
    if not victims:
        return None
    now = time.time() if now is None else now
    earliest = pod_start_time(victims[0], now)
    max_priority = pod_priority(victims[0])
    for pod in victims:
        p = pod_priority(pod)
        if p == max_priority:
            earliest = min(earliest, pod_start_time(pod, now))
        elif p > max_priority:
            max_priority = p
            earliest = pod_start_time(pod, now)
    return earliest


def more_important_pod(a: pb.Pod, b: pb.Pod, now: float | None = None) -> bool:
    """Higher priority first; for equal priority, the pod that started earlier (it has run
    longer, so preempting it loses more work)."""
    pa, pb_ = pod_priority(a), pod_priority(b)
    if pa != pb_:
        return pa > pb_
    now = time.time() if now is None else now
    return pod_start_time(a, now) < pod_start_time(b, now)
