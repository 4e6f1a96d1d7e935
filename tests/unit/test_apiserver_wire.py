"""The hand-assembled wire forms parse, with protobuf's own parser, to exactly the intended messages."""

from __future__ import annotations

import pytest

from apiserver_mock import wire
from kse.objects.kinds import BY_FIELD, KINDS
from proto import kse_pb2 as pb


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.resource)
def test_object_wire_sets_resource_version(kind):
    msg = kind.message()
    msg.metadata.name = "x"
    msg.metadata.labels["a"] = "b"
    obj = pb.Object.FromString(wire.object_wire(kind, msg.SerializeToString(), 1234))
    inner = getattr(obj, kind.field)
    assert obj.WhichOneof("kind") == kind.field
    assert inner.metadata.resource_version == "1234"
    assert inner.metadata.name == "x"
    assert dict(inner.metadata.labels) == {"a": "b"}


def test_object_wire_overrides_a_stored_resource_version():
    pod = pb.Pod(metadata=pb.ObjectMeta(name="p", resource_version="1"))
    obj = pb.Object.FromString(wire.object_wire(BY_FIELD["pod"], pod.SerializeToString(), 99))
    assert obj.pod.metadata.resource_version == "99"
    # Without a revision the wrapper is just the stored message.
    plain = pb.Object.FromString(wire.object_wire(BY_FIELD["pod"], pod.SerializeToString()))
    assert plain.pod == pod


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16384, 2**21, 2**35])
def test_varint(n):
    # A length-delimited field of n bytes must parse back to n bytes.
    payload = b"x" * min(n, 100000)
    framed = wire.field(1, payload)
    assert pb.EventSource.FromString(framed).component == payload.decode()


def test_watch_events_and_batches():
    pod = pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="default"))
    obj_wire = wire.object_wire(BY_FIELD["pod"], pod.SerializeToString(), 7)
    added = wire.frame_event(wire.watch_event(wire.ADDED, obj_wire, 7))
    deleted = wire.frame_event(wire.watch_event(wire.DELETED, obj_wire, 8))
    batch = pb.WatchEventBatch.FromString(added + deleted + wire.bookmark_batch(9))
    assert [(e.type, e.resource_version) for e in batch.events] == [
        ("ADDED", "7"),
        ("DELETED", "8"),
        ("BOOKMARK", "9"),
    ]
    assert batch.events[0].object.pod.metadata.name == "p"
    assert batch.events[0].object.pod.metadata.resource_version == "7"
    assert not batch.events[2].HasField("object")
    expected = pb.WatchEventBatch(
        events=[pb.WatchEvent(type="BOOKMARK", resource_version="9")]
    ).SerializeToString()
    assert wire.bookmark_batch(9) == expected


def test_object_list():
    kind = BY_FIELD["node"]
    items = [
        wire.object_wire(kind, pb.Node(metadata=pb.ObjectMeta(name=f"n{i}")).SerializeToString(), i)
        for i in (3, 5)
    ]
    lst = pb.ObjectList.FromString(wire.object_list(10, items, "tok", 4))
    assert lst.metadata.resource_version == "10"
    assert getattr(lst.metadata, "continue") == "tok"
    assert lst.metadata.remaining_item_count == 4
    assert [o.node.metadata.name for o in lst.items] == ["n3", "n5"]
    assert [o.node.metadata.resource_version for o in lst.items] == ["3", "5"]
    empty = pb.ObjectList.FromString(wire.object_list(11, []))
    assert not empty.metadata.HasField("remaining_item_count") and not empty.items


def test_length_delimited_fields_split_lists_and_batches_into_their_exact_bytes() -> None:
    pod = BY_FIELD["pod"]
    obj = wire.object_wire(pod, pb.Pod(metadata=pb.ObjectMeta(name="a")).SerializeToString(), 7)
    lst = wire.object_list(9, [obj, obj], "tok", 3)
    fields = list(wire.length_delimited_fields(lst))
    assert [n for n, _ in fields] == [1, 2, 2] and fields[1][1] == obj and fields[2][1] == obj
    assert pb.ListMeta.FromString(fields[0][1]).resource_version == "9"
    batch = wire.frame_event(wire.watch_event("ADDED", obj, 7)) + wire.bookmark_batch(9)
    events = [dict(wire.length_delimited_fields(e)) for _, e in wire.length_delimited_fields(batch)]
    assert events == [{1: b"ADDED", 2: obj, 3: b"7"}, {1: b"BOOKMARK", 3: b"9"}]
    for bad in (b"\x08\x01", b"\x12\x05ab", b"\x12"):
        with pytest.raises(ValueError):
            list(wire.length_delimited_fields(bad))
