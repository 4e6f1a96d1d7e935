"""The backoff queue: pods that must wait out their backoff before they may be retried.

Upstream: ``pkg/scheduler/backend/queue/backoff_queue.go``. Two heaps ordered by backoff expiry:
``podBackoffQ`` for pods rejected by plugins, ``podErrorBackoffQ`` for pods whose attempt ended in
an error (no rejecting plugin). Keeping them apart stops a burst of erroring pods from delaying
the flush of ordinary ones, and lets pop-from-backoff take only rejected pods.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from scheduler.framework.types import QueuedPodInfo

from .heap import Heap

log = logging.getLogger(__name__)

Clock = Callable[[], float]
LessFunc = Callable[[QueuedPodInfo, QueuedPodInfo], bool]

# The width of one ordering window of the podBackoffQ when pods may be popped from it directly
# (upstream backoffQOrderingWindowDuration, KEP-5142): backoff expiries are truncated to whole
# seconds and pods in one window are ordered like the activeQ. It is also the flush period.
ORDERING_WINDOW = 1.0


def pod_key(pinfo: QueuedPodInfo) -> str:
    return pinfo.key


class BackoffQueue:
    def __init__(
        self,
        clock: Clock,
        initial: float,
        maximum: float,
        active_less: LessFunc,
        pop_from_backoff: bool,
    ) -> None:
        self._clock = clock
        self.initial = initial
        self.maximum = maximum
        self._active_less = active_less
        self._pop_from_backoff = pop_from_backoff
        self._backoff: Heap[QueuedPodInfo] = Heap(
            pod_key, self._less_with_priority if pop_from_backoff else self._less
        )
        self._error_backoff: Heap[QueuedPodInfo] = Heap(pod_key, self._less)

    # ------------------------------------------------------------------ timing

    def align(self, t: float) -> float:
        """Truncate ``t`` to its ordering window (identity unless pop-from-backoff is on)."""
        if not self._pop_from_backoff:
            return t
        return math.floor(t / ORDERING_WINDOW) * ORDERING_WINDOW

    def calculate_backoff_duration(self, pinfo: QueuedPodInfo) -> float:
        """``initial * 2**(attempts-1)`` capped at ``maximum``; 0 before the first attempt.

        Computed by doubling exactly as upstream ``calculateBackoffDuration`` (which also means a
        first attempt gets ``initial`` even if it exceeds ``maximum``; validation forbids that).
        """
        if pinfo.attempts == 0:
            return 0.0
        duration = self.initial
        for _ in range(1, pinfo.attempts):
            if duration > self.maximum - duration:
                return self.maximum
            duration += duration
        return duration

    def backoff_time(self, pinfo: QueuedPodInfo) -> float:
        """When the pod's backoff ends, cached in ``pinfo.backoff_expiration``.

        A pod never attempted has no backoff: -inf (upstream's zero time, which is not cached).
        The cache is cleared whenever ``attempts`` or ``timestamp`` change (pop, requeue).
        """
        if pinfo.attempts == 0:
            return -math.inf
        if pinfo.backoff_expiration is None:
            pinfo.backoff_expiration = self.align(pinfo.timestamp + self.calculate_backoff_duration(pinfo))
        return pinfo.backoff_expiration

    def is_pod_backing_off(self, pinfo: QueuedPodInfo) -> bool:
        """Still waiting. Not ``After``: an expiry inside the current window still waits
        (upstream ``isPodBackingoff``)."""
        return not self.backoff_time(pinfo) < self.align(self._clock())

    def _less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.backoff_time(a) < self.backoff_time(b)

    def _less_with_priority(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        ba, bb = self.backoff_time(a), self.backoff_time(b)
        if ba != bb:
            return ba < bb
        return self._active_less(a, b)

    # ------------------------------------------------------------------ contents

    def add(self, pinfo: QueuedPodInfo) -> None:
        """Add to podErrorBackoffQ if no plugin rejected the pod (it failed with an error), else
        to podBackoffQ; never both."""
        if not pinfo.unschedulable_plugins and not pinfo.pending_plugins:
            self._error_backoff.add_or_update(pinfo)
            if self._backoff.delete(pinfo) is not None:
                log.error("backoff add: pod %s was also in podBackoffQ", pinfo.key)
            return
        self._backoff.add_or_update(pinfo)
        if self._error_backoff.delete(pinfo) is not None:
            log.error("backoff add: pod %s was also in podErrorBackoffQ", pinfo.key)

    def replace(self, pinfo: QueuedPodInfo) -> None:
        """Re-sort a stored pod after its pod object changed (its backoff did not)."""
        for heap in (self._backoff, self._error_backoff):
            if heap.has(pinfo):
                heap.add_or_update(pinfo)
                return

    def delete_by_key(self, key: str) -> QueuedPodInfo | None:
        return self._backoff.delete_by_key(key) or self._error_backoff.delete_by_key(key)

    def get_by_key(self, key: str) -> QueuedPodInfo | None:
        return self._backoff.get_by_key(key) or self._error_backoff.get_by_key(key)

    def has_key(self, key: str) -> bool:
        return key in self._backoff or key in self._error_backoff

    def __len__(self) -> int:
        return len(self._backoff) + len(self._error_backoff)

    def len_backoff(self) -> int:
        """Pods that pop-from-backoff may take (only podBackoffQ, never the error queue)."""
        return len(self._backoff)

    def pod_infos(self) -> list[QueuedPodInfo]:
        return self._backoff.items() + self._error_backoff.items()

    def pop_backoff(self) -> QueuedPodInfo | None:
        """The head of podBackoffQ, backoff finished or not (pop-from-backoff when activeQ is
        empty)."""
        return self._backoff.pop()

    def pop_all_backoff_completed(self) -> list[QueuedPodInfo]:
        """Remove and return every pod whose backoff has ended, from both heaps."""
        done: list[QueuedPodInfo] = []
        for heap in (self._backoff, self._error_backoff):
            while True:
                head = heap.peek()
                if head is None or self.is_pod_backing_off(head):
                    break
                heap.pop()
                done.append(head)
        return done
