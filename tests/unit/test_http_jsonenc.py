"""The HTTP door's fast protobuf -> JSON conversion gives exactly `to_dict`'s JSON, for every kind;
watch lines are assembled once per batch for all watchers.

Objects come from a filler that sets every field of every message (64-bit integers past 2**53,
repeated fields and maps with several entries, `optional` fields set to their zero value,
managedFields' Struct with nested lists), random subsets of that, and the Kubernetes
documentation's own manifests.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from apiserver_mock.http.codec import JSON_CACHE, JSONCache, dumps
from apiserver_mock.http.jsonenc import object_dict
from kse.objects.kinds import KINDS
from kse.objects.manifest import ManifestError, load_manifests, to_dict
from proto import kse_pb2 as pb

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "k8s-examples"


def _scalar(fd: FieldDescriptor, rng: random.Random | None, zero: bool) -> object:
    if fd.type == FieldDescriptor.TYPE_STRING:
        return "" if zero else f"{fd.name}-{rng.randrange(1000) if rng else 7}"
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return not zero
    if zero:
        return 0
    if fd.type in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64):
        return -(2**62) + 3 if rng and rng.random() < 0.5 else 2**60 + 1
    if fd.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return 2**63 + 5
    return 12345


def _struct(depth: int = 0) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update({"f:metadata": {"f:labels": {"f:app": {}}}, 'k:{"name":"c"}': {".": {}}, "s": "x", "b": True})
    s["lst"] = ["a", {"n": None}]
    return s


def fill(msg: Message, rng: random.Random | None = None, depth: int = 0, zero: bool = False) -> Message:
    """Set every field of `msg` (or, with `rng`, a random half of them), recursively."""
    desc: Descriptor = msg.DESCRIPTOR
    for fd in desc.fields:
        if rng is not None and rng.random() < 0.5:
            continue
        if (
            fd.containing_oneof is not None
            and fd.containing_oneof.name == "kind"
            and desc is pb.Object.DESCRIPTOR
        ):
            continue  # the Object envelope: one kind, set by the caller
        value_type = fd.message_type
        if value_type is not None and value_type.GetOptions().map_entry:
            container = getattr(msg, fd.name)
            value_fd = value_type.fields_by_name["value"]
            for i in range(2):
                key = f"k{i}/x.y"
                if value_fd.message_type is not None:
                    if depth < 4:
                        fill(container[key], rng, depth + 1)
                else:
                    container[key] = _scalar(value_fd, rng, False)
        elif value_type is not None:
            if value_type.full_name == "google.protobuf.Struct":
                targets = (
                    list(getattr(msg, fd.name).add() for _ in range(2))
                    if fd.is_repeated
                    else [getattr(msg, fd.name)]
                )
                for t in targets:
                    t.CopyFrom(_struct())
            elif depth < 4:
                if fd.is_repeated:
                    for _ in range(2):
                        fill(getattr(msg, fd.name).add(), rng, depth + 1)
                else:
                    sub = getattr(msg, fd.name)
                    sub.SetInParent()  # an empty message is still present: {} in JSON
                    fill(sub, rng, depth + 1)
        elif fd.is_repeated:
            getattr(msg, fd.name).extend([_scalar(fd, rng, False), _scalar(fd, rng, False)])
        else:
            # `optional` fields get their zero value now and then: present, so printed.
            setattr(
                msg,
                fd.name,
                _scalar(fd, rng, zero or (fd.has_presence and rng is not None and rng.random() < 0.3)),
            )
    return msg


def _assert_same(obj: pb.Object) -> None:
    wire = obj.SerializeToString()
    expected = to_dict(pb.Object.FromString(wire))
    got = object_dict(wire)
    assert got == expected
    assert dumps(got) == dumps(expected)  # key order too: the text is what clients read


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_every_field_of_every_kind(kind) -> None:
    obj = pb.Object()
    fill(getattr(obj, kind.field))
    _assert_same(obj)


@pytest.mark.parametrize("seed", range(40))
def test_random_subsets(seed: int) -> None:
    rng = random.Random(seed)
    for kind in KINDS:
        obj = pb.Object()
        getattr(obj, kind.field).SetInParent()
        fill(getattr(obj, kind.field), rng)
        _assert_same(obj)


def test_kubernetes_documentation_manifests() -> None:
    if not EXAMPLES.is_dir():
        pytest.skip(f"shared Kubernetes examples not found at {EXAMPLES}")
    loaded = 0
    for path in sorted(EXAMPLES.rglob("*.yaml")) + sorted(EXAMPLES.rglob("*.json")):
        try:
            objects = load_manifests(path.read_text(encoding="utf-8"), str(path))
        except ManifestError:
            continue  # kinds kse does not serve
        for obj in objects:
            _assert_same(obj)
            loaded += 1
    assert loaded >= 10


def test_the_shared_cache_serves_the_same_text() -> None:
    obj = pb.Object()
    fill(obj.pod)
    wire = obj.SerializeToString()
    assert JSONCache().text(wire) == JSON_CACHE.text(wire) == dumps(to_dict(pb.Object.FromString(wire)))


def test_watch_lines_are_shared_and_bookmarks_are_not_cached() -> None:
    from apiserver_mock import wire
    from apiserver_mock.http.watch import LineCache

    obj = pb.Object(pod=pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="ns", resource_version="7")))
    event = pb.WatchEvent(type="ADDED", object=obj, resource_version="7")
    batch = wire.field(1, event.SerializeToString())
    cache = LineCache(limit=2)
    text = cache.lines(batch)
    assert text == b'{"type":"ADDED","object":' + JSON_CACHE.text(obj.SerializeToString()) + b"}\n"
    assert cache.lines(bytes(batch)) is text  # equal bytes from another watcher: the same text
    assert cache.lines(wire.bookmark_batch(9)) is None  # per watcher (allowWatchBookmarks)
    cache.lines(wire.field(1, pb.WatchEvent(type="DELETED", object=obj).SerializeToString()))
    assert len(cache._lines) <= 2
