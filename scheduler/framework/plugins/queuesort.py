"""PrioritySort: the default QueueSort plugin (upstream plugins/queuesort/priority_sort.go)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.interface import FrameworkHandle
from scheduler.framework.types import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    """Higher priority first; for equal priority, the pod that entered the queue earlier."""

    def name(self) -> str:
        return NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        # PodInfo.priority is pod_priority, read once per PodInfo: the heap compares each pod
        # about log2(queue length) times per pop.
        p1, p2 = a.pod_info.priority, b.pod_info.priority
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> PrioritySort:
    return PrioritySort()
