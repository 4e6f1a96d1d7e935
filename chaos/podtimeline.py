"""The pods' availability over time, as a chaos run saw it: what the drain invariants judge.

The audit log says which writes were accepted, but not what a pod looked like after them (ready,
terminating, whose it is). A drain's safety is a statement about exactly that: how many of a
budget's pods were available at each moment. So the runner's pods informer also writes one
`PodStateRecord` per delivered change (`pods-timeline.jsonl`), and the invariants replay them in
revision order.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kse.objects.meta import key_of
from kse.records import JsonlWriter, read_jsonl
from proto import kse_pb2 as pb

TIMELINE_FILE = "pods-timeline.jsonl"


def pod_is_ready(pod: pb.Pod) -> bool:
    """The pod's Ready condition is True (upstream's podutil.IsPodReady)."""
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def controller_of(pod: pb.Pod) -> str:
    """ "Kind/name" of the pod's controller owner reference, "" when it has none."""
    for ref in pod.metadata.owner_references:
        if ref.controller:
            return f"{ref.kind}/{ref.name}"
    return ""


@dataclass(frozen=True)
class PodStateRecord:
    """One pod as of one delivered change. `deleted` is true for the DELETED event (the pod's last
    state is then the one before)."""

    ts: float
    resource_version: int
    key: str  # namespace/name
    uid: str
    node: str = ""
    phase: str = ""
    ready: bool = False
    terminating: bool = False
    deleted: bool = False
    owner: str = ""  # "ReplicaSet/web-abc12", "DaemonSet/agent"
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        """Counts toward a disruption budget: ready, not terminating, not gone (as upstream's
        disruption controller counts currentHealthy)."""
        return self.ready and not self.terminating and not self.deleted

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> PodStateRecord:
        data: dict[str, Any] = json.loads(line)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def of(cls, pod: pb.Pod, ts: float, resource_version: int, *, deleted: bool = False) -> PodStateRecord:
        return cls(
            ts=ts,
            resource_version=resource_version,
            key=key_of(pod),
            uid=pod.metadata.uid,
            node=pod.spec.node_name,
            phase=pod.status.phase,
            ready=pod_is_ready(pod),
            terminating=bool(pod.metadata.deletion_timestamp),
            deleted=deleted,
            owner=controller_of(pod),
            labels=dict(pod.metadata.labels),
        )


class PodTimelineRecorder:
    """An informer event handler set (add/update/delete) writing `PodStateRecord`s as JSON lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = JsonlWriter(path)

    def record(self, pod: pb.Pod, *, deleted: bool = False) -> None:
        rv = int(pod.metadata.resource_version or 0)
        self._writer.append(PodStateRecord.of(pod, time.time(), rv, deleted=deleted))

    def on_add(self, pod: pb.Pod) -> None:
        self.record(pod)

    def on_update(self, _old: pb.Pod, new: pb.Pod) -> None:
        self.record(new)

    def on_delete(self, pod: pb.Pod) -> None:
        self.record(pod, deleted=True)

    def close(self) -> None:
        self._writer.close()


def read_timeline(path: Path) -> list[PodStateRecord]:
    if not path.exists():
        return []
    return list(read_jsonl(path, PodStateRecord.from_json))


__all__ = [
    "TIMELINE_FILE",
    "PodStateRecord",
    "PodTimelineRecorder",
    "controller_of",
    "pod_is_ready",
    "read_timeline",
]
