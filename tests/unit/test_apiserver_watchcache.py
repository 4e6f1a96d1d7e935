"""Watch cache logic without etcd: applying batches, fan-out, filtering transitions, slow watchers."""

from __future__ import annotations

import grpc
import pytest

from apiserver_mock.watchcache.cache import WatchCache
from apiserver_mock.watchcache.model import make_filter
from apiserver_mock.watchcache.ring import TooOld
from apiserver_mock.watchcache.watcher import WatchClosed, Watcher
from kse.etcdclient import KeyValue, WatchBatch, WatchEvent
from kse.objects.fields import parse_field_selector
from kse.objects.kinds import BY_FIELD
from kse.objects.labels import parse_selector
from proto import kse_pb2 as pb

POD = BY_FIELD["pod"]
PREFIX = b"/t"


def pod_bytes(name: str, labels: dict[str, str] | None = None, node: str = "") -> bytes:
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace="default", labels=labels or {}),
        spec=pb.PodSpec(node_name=node),
    ).SerializeToString()


def key(name: str, ns: str = "default") -> bytes:
    return PREFIX + b"/pods/" + ns.encode() + b"/" + name.encode()


def put(rev: int, name: str, **kw) -> WatchEvent:
    return WatchEvent("PUT", KeyValue(key(name), pod_bytes(name, **kw), 0, rev, 1), None)


def delete(rev: int, name: str) -> WatchEvent:
    return WatchEvent("DELETE", KeyValue(key(name), b"", 0, rev, 0), None)


def batch(rev: int, *events: WatchEvent) -> WatchBatch:
    return WatchBatch(rev, tuple(events), False)


def new_cache(capacity: int = 100, queue_limit: int = 100) -> WatchCache:
    cache = WatchCache(POD, None, PREFIX, capacity=capacity, queue_limit=queue_limit)  # type: ignore[arg-type]
    cache.ring.reset(1)
    cache.revision = 1
    return cache


def everything():
    return make_filter("", parse_selector(""), parse_field_selector(""))


async def drain(w: Watcher) -> list[list[tuple[str, str, str]]]:
    """Every queued batch as [(type, rv, name)], without waiting for more."""
    out = []
    while w._backlog is not None or w.queued:
        item = await w.next()
        assert item is not None
        out.append(
            [
                (e.type, e.resource_version, e.object.pod.metadata.name)
                for e in pb.WatchEventBatch.FromString(item).events
            ]
        )
    return out


async def test_apply_updates_objects_ring_and_watchers():
    cache = new_cache()
    w = cache.add_watcher(everything(), from_revision=None, send_initial_events=False, bookmarks=False)
    cache._apply(batch(2, put(2, "a"), put(2, "b")))
    cache._apply(batch(3, put(3, "a", labels={"x": "1"})))
    cache._apply(batch(4, delete(4, "b")))
    assert sorted(cache.objects) == [key("a")]
    assert cache.revision == 4
    assert cache.get(key("a")).labels == {"x": "1"}
    assert await drain(w) == [
        [("ADDED", "2", "a"), ("ADDED", "2", "b")],  # one revision, one batch
        [("MODIFIED", "3", "a")],
        [("DELETED", "4", "b")],  # carries the last state, at the deleting revision
    ]


async def test_progress_and_marker_only_advance_the_revision():
    cache = new_cache()
    w = cache.add_watcher(everything(), from_revision=None, send_initial_events=False, bookmarks=False)
    cache._apply(WatchBatch(5, (), True))
    marker = WatchEvent("PUT", KeyValue(cache.marker_key, b"", 0, 6, 1), None)
    cache._apply(batch(6, marker))
    assert cache.revision == 6 and not cache.objects and len(cache.ring) == 0
    assert await drain(w) == []


async def test_replay_from_revision_and_too_old():
    cache = new_cache(capacity=3)
    for rev, name in ((2, "a"), (3, "b"), (4, "c"), (5, "d")):
        cache._apply(batch(rev, put(rev, name)))
    assert cache.ring.floor == 2
    w = cache.add_watcher(everything(), from_revision=3, send_initial_events=False, bookmarks=False)
    cache._apply(batch(6, put(6, "e")))
    assert await drain(w) == [[("ADDED", "4", "c")], [("ADDED", "5", "d")], [("ADDED", "6", "e")]]
    with pytest.raises(TooOld):
        cache.add_watcher(everything(), from_revision=1, send_initial_events=False, bookmarks=False)


async def test_initial_events_then_bookmark_then_live():
    cache = new_cache()
    cache._apply(batch(2, put(2, "a", labels={"app": "x"}), put(2, "b")))
    filt = make_filter("", parse_selector("app=x"), parse_field_selector(""))
    w = cache.add_watcher(filt, from_revision=None, send_initial_events=True, bookmarks=False)
    cache._apply(batch(3, put(3, "c", labels={"app": "x"})))
    assert await drain(w) == [[("ADDED", "2", "a")], [("BOOKMARK", "2", "")], [("ADDED", "3", "c")]]


async def test_selector_transitions_are_added_and_deleted():
    cache = new_cache()
    filt = make_filter("", parse_selector("app=web"), parse_field_selector(""))
    w = cache.add_watcher(filt, from_revision=None, send_initial_events=False, bookmarks=False)
    cache._apply(batch(2, put(2, "p")))  # not matching: nothing
    cache._apply(batch(3, put(3, "p", labels={"app": "web"})))  # starts matching
    cache._apply(batch(4, put(4, "p", labels={"app": "web", "v": "2"})))  # still matching
    cache._apply(batch(5, put(5, "p", labels={"app": "db"})))  # stops matching
    cache._apply(batch(6, delete(6, "p")))  # gone while not matching: nothing
    events = await drain(w)
    assert events == [[("ADDED", "3", "p")], [("MODIFIED", "4", "p")], [("DELETED", "5", "p")]]


async def test_deleted_on_unmatch_carries_the_last_matching_state():
    cache = new_cache()
    filt = make_filter("", parse_selector(""), parse_field_selector("spec.nodeName=n1", POD))
    w = cache.add_watcher(filt, from_revision=None, send_initial_events=False, bookmarks=False)
    cache._apply(batch(2, put(2, "p", node="n1")))
    cache._apply(batch(3, put(3, "p", node="n2")))
    await w.next()
    last = pb.WatchEventBatch.FromString(await w.next()).events[0]
    assert last.type == "DELETED" and last.resource_version == "3"
    assert last.object.pod.spec.node_name == "n1"
    assert last.object.pod.metadata.resource_version == "3"


async def test_namespace_filter():
    cache = new_cache()
    filt = make_filter("kube-system", parse_selector(""), parse_field_selector(""))
    w = cache.add_watcher(filt, from_revision=None, send_initial_events=False, bookmarks=False)
    other = WatchEvent(
        "PUT",
        KeyValue(
            key("q", "kube-system"),
            pb.Pod(metadata=pb.ObjectMeta(name="q", namespace="kube-system")).SerializeToString(),
            0,
            3,
            1,
        ),
        None,
    )
    cache._apply(batch(2, put(2, "p")))
    cache._apply(batch(3, other))
    assert await drain(w) == [[("ADDED", "3", "q")]]


async def test_slow_watcher_is_closed_and_others_keep_everything():
    cache = new_cache(queue_limit=5)
    slow = cache.add_watcher(everything(), from_revision=None, send_initial_events=False, bookmarks=False)
    fast = cache.add_watcher(everything(), from_revision=None, send_initial_events=False, bookmarks=False)
    got = []
    for rev in range(2, 12):
        cache._apply(batch(rev, put(rev, f"p{rev}")))
        got += await drain(fast)
    assert len(got) == 10
    assert slow.closed
    with pytest.raises(WatchClosed) as e:
        await slow.next()
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "too slow" in e.value.message


async def test_bookmarks_when_due_and_finish():
    cache = new_cache()
    cache.bookmark_interval = 0.0
    w = cache.add_watcher(everything(), from_revision=None, send_initial_events=False, bookmarks=True)
    quiet = cache.add_watcher(everything(), from_revision=None, send_initial_events=False, bookmarks=False)
    cache._apply(WatchBatch(7, (), True))
    assert await drain(w) == [[("BOOKMARK", "7", "")]]
    assert await drain(quiet) == []
    w.finish()
    assert await w.next() is None


async def test_snapshot_is_sorted_and_paged():
    cache = new_cache()
    for i, name in enumerate(["c", "a", "b"]):
        cache._apply(batch(2 + i, put(2 + i, name)))
    assert [o.name for o in cache.snapshot(everything())] == ["a", "b", "c"]
    assert [o.name for o in cache.snapshot(everything(), start_after=key("a"))] == ["b", "c"]
