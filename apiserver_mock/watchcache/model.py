"""What the watch cache holds: objects, their events, and per-watcher filters.

An object enters the cache as its stored bytes and revision; its serialized `Object` form (for lists
and watch events) is assembled from them without decoding (see `wire`). It is decoded at most once,
on first need (a filtered watcher, a list with selectors, an update based on it), and its labels and
selectable fields are computed then and kept. An event's wire forms (ADDED / MODIFIED / DELETED, see
`Filter.frame`) are built on first use and shared by every watcher.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from google.protobuf.message import Message

from apiserver_mock import wire
from kse.objects.fields import FieldSelector, fields_of
from kse.objects.kinds import Kind
from kse.objects.labels import Selector
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)


class CachedObject:
    """One stored object at one revision (immutable by convention: never modify `.obj`)."""

    __slots__ = (
        "_fields",
        "_labels",
        "_obj",
        "key",
        "kind",
        "name",
        "namespace",
        "revision",
        "value",
        "wire",
    )

    def __init__(self, kind: Kind, key: bytes, value: bytes, revision: int, prefix_len: int = 0) -> None:
        self.kind = kind
        self.key = key
        self.value = value  # the stored bytes (typed message, resourceVersion unset)
        self.revision = revision
        self.wire = wire.object_wire(kind, value, revision)
        # <prefix>/<resource>/<namespace>/<name>, or <prefix>/<resource>/<name> when cluster-scoped.
        rest = key[prefix_len:].decode() if prefix_len else ""
        if kind.namespaced:
            self.namespace, _, self.name = rest.partition("/")
        else:
            self.namespace, self.name = "", rest
        self._obj: pb.Object | None = None
        self._labels: dict[str, str] | None = None
        self._fields: dict[str, str] | None = None

    @property
    def obj(self) -> pb.Object:
        """The decoded `Object` (with resourceVersion). Shared: copy before modifying."""
        obj = self._obj
        if obj is None:
            try:
                obj = pb.Object.FromString(self.wire)
            except Exception as e:  # a corrupt stored value must not break the cache or a filter
                log.error("cannot decode %r at revision %d: %s", self.key, self.revision, e)
                obj = pb.Object(**{self.kind.field: self.kind.message()})
            self._obj = obj
        return obj

    @property
    def message(self) -> Message:
        """The typed message (Pod, Node, ...). Shared: copy before modifying."""
        msg: Message = getattr(self.obj, self.kind.field)
        return msg

    @property
    def labels(self) -> dict[str, str]:
        labels = self._labels
        if labels is None:
            labels = self._labels = dict(self.message.metadata.labels)  # type: ignore[attr-defined]
        return labels

    @property
    def fields(self) -> dict[str, str]:
        fields = self._fields
        if fields is None:
            fields = self._fields = fields_of(self.obj)
        return fields


class CacheEvent:
    """One change of one key at one revision. `cur` is None for a delete, `prev` None for a create."""

    __slots__ = ("_frames", "cur", "prev", "revision")

    def __init__(self, revision: int, cur: CachedObject | None, prev: CachedObject | None) -> None:
        self.revision = revision
        self.cur = cur
        self.prev = prev
        self._frames: dict[str, bytes] = {}

    @property
    def natural_type(self) -> str:
        if self.cur is None:
            return wire.DELETED
        return wire.MODIFIED if self.prev is not None else wire.ADDED

    def frame(self, event_type: str) -> bytes:
        """This event as one framed `WatchEvent` of `event_type` (DELETED carries `prev` at this revision)."""
        framed = self._frames.get(event_type)
        if framed is None:
            if event_type == wire.DELETED:
                assert self.prev is not None
                obj_wire = wire.object_wire(self.prev.kind, self.prev.value, self.revision)
            else:
                assert self.cur is not None
                obj_wire = self.cur.wire
            framed = wire.frame_event(wire.watch_event(event_type, obj_wire, self.revision))
            self._frames[event_type] = framed
        return framed


class RevisionGroup:
    """All events of one resource at one etcd revision: delivered together (atomic per revision)."""

    __slots__ = ("_all", "events", "revision")

    def __init__(self, revision: int, events: tuple[CacheEvent, ...]) -> None:
        self.revision = revision
        self.events = events
        self._all: bytes | None = None

    def __len__(self) -> int:
        return len(self.events)

    def batch(self) -> bytes:
        """The unfiltered `WatchEventBatch`, serialized once for every unfiltered watcher."""
        if self._all is None:
            self._all = b"".join(ev.frame(ev.natural_type) for ev in self.events)
        return self._all


@dataclass(frozen=True, slots=True)
class Filter:
    """Namespace, label and field selection, as a Kubernetes watch or list applies it."""

    namespace: str = ""
    labels: Selector | None = None
    fields: FieldSelector | None = None

    @property
    def everything(self) -> bool:
        return not self.namespace and self.labels is None and self.fields is None

    def matches(self, o: CachedObject) -> bool:
        if self.namespace and o.namespace != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(o.labels):
            return False
        return self.fields is None or self.fields.matches(o.fields)

    def frame(self, ev: CacheEvent) -> bytes | None:
        """The event as this watcher sees it: ADDED when an object starts matching, DELETED when it
        stops (with its last matching state at the event's revision), or None when never matching."""
        cur_ok = ev.cur is not None and self.matches(ev.cur)
        prev_ok = ev.prev is not None and self.matches(ev.prev)
        if cur_ok:
            return ev.frame(wire.MODIFIED if prev_ok else wire.ADDED)
        if prev_ok:
            return ev.frame(wire.DELETED)
        return None

    def batch(self, group: RevisionGroup) -> bytes | None:
        if self.everything:
            return group.batch()
        parts = [f for ev in group.events if (f := self.frame(ev)) is not None]
        return b"".join(parts) if parts else None


def make_filter(namespace: str, labels: Selector, fields: FieldSelector) -> Filter:
    return Filter(namespace, None if labels.empty else labels, None if fields.empty else fields)
