"""PrioritySort: the default QueueSort plugin (upstream plugins/queuesort/priority_sort.go)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.framework.interface import FrameworkHandle
from scheduler.framework.plugins.helper.priority import pod_priority
from scheduler.framework.types import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    """Higher priority first; for equal priority, the pod that entered the queue earlier."""

    def name(self) -> str:
        return NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        p1, p2 = pod_priority(a.pod), pod_priority(b.pod)
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> PrioritySort:
    return PrioritySort()
