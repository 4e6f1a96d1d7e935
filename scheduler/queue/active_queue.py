"""The active queue and the in-flight bookkeeping, as upstream ``active_queue.go``.

``in-flight`` pods are those popped and not yet ``done()``. Cluster events that arrive while any
pod is in flight are appended to one ordered log, interleaved with the pods' pop markers. When a
pod comes back as unschedulable, the events logged after its marker are exactly the ones it did
not see during its attempt; the queue replays them through the queueing hints so none is lost.
When the oldest in-flight pod is done, the events before the next marker are no longer needed by
anyone and are dropped, so the log stays bounded by what in-flight pods can still need.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from proto import kse_pb2 as pb
from scheduler.framework.types import ClusterEvent, QueuedPodInfo

from .heap import Heap


@dataclass(frozen=True)
class InFlightEvent:
    """A cluster event recorded while pods were in flight, with the objects involved."""

    event: ClusterEvent
    old_obj: Any = None
    new_obj: Any = None


@dataclass(frozen=True)
class _PodMarker:
    pod: pb.Pod


class ActiveQueue:
    def __init__(self, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool]) -> None:
        self.heap: Heap[QueuedPodInfo] = Heap(lambda p: p.key, less)
        self._in_flight_pods: dict[str, int] = {}  # pod UID -> its marker's sequence number
        self._log: OrderedDict[int, InFlightEvent | _PodMarker] = OrderedDict()
        self._seq = 0
        self.scheduling_cycle = 0

    # ------------------------------------------------------------------ in-flight pods

    def is_in_flight(self, uid: str) -> bool:
        return uid in self._in_flight_pods

    def move_to_in_flight(self, pinfo: QueuedPodInfo) -> bool:
        """Record a popped pod as in flight; False if it already is (a bug elsewhere: upstream
        discards the duplicate rather than track one pod twice)."""
        uid = pinfo.pod.metadata.uid
        if uid in self._in_flight_pods:
            return False
        self._seq += 1
        self._log[self._seq] = _PodMarker(pinfo.pod)
        self._in_flight_pods[uid] = self._seq
        self.scheduling_cycle += 1
        return True

    def done(self, uid: str) -> None:
        seq = self._in_flight_pods.pop(uid, None)
        if seq is None:
            return
        del self._log[seq]
        # Events before the oldest remaining marker were seen by every in-flight pod's attempt.
        while self._log:
            first = next(iter(self._log))
            if isinstance(self._log[first], _PodMarker):
                break
            del self._log[first]

    def done_all(self) -> None:
        for uid in list(self._in_flight_pods):
            self.done(uid)

    # ------------------------------------------------------------------ events

    def add_events_if_pod_in_flight(
        self, old_pod: pb.Pod | None, new_pod: pb.Pod, events: Sequence[ClusterEvent]
    ) -> bool:
        """Log ``events`` (about ``new_pod`` itself) if that pod is in flight."""
        if new_pod.metadata.uid not in self._in_flight_pods:
            return False
        for event in events:
            self._append(InFlightEvent(event, old_pod, new_pod))
        return True

    def add_event_if_any_in_flight(self, old_obj: Any, new_obj: Any, event: ClusterEvent) -> bool:
        if not self._in_flight_pods:
            return False
        self._append(InFlightEvent(event, old_obj, new_obj))
        return True

    def cluster_events_for_pod(self, uid: str) -> list[InFlightEvent] | None:
        """Events logged since the pod was popped; None if it is not in flight."""
        seq = self._in_flight_pods.get(uid)
        if seq is None:
            return None
        return [e for s, e in self._log.items() if s > seq and isinstance(e, InFlightEvent)]

    def _append(self, entry: InFlightEvent) -> None:
        self._seq += 1
        self._log[self._seq] = entry

    # ------------------------------------------------------------------ debugging

    def in_flight_pods(self) -> list[pb.Pod]:
        return [e.pod for e in self._log.values() if isinstance(e, _PodMarker)]

    def in_flight_log(self) -> list[pb.Pod | ClusterEvent]:
        """The log as upstream ``listInFlightEvents`` shows it: pods and events in order."""
        return [e.pod if isinstance(e, _PodMarker) else e.event for e in self._log.values()]
