"""The watch contract (DESIGN.md "Storage"): ordered, unique, atomic, reliable, resumable,
bookmarkable, and Kubernetes' filtering; plus slow watchers, compaction and the event ring."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from kse.etcdclient import Op, prefix_range_end
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pbg
from tests.fixtures.apiserver import (
    ApiServer,
    ApiServerFactory,
    current_rv,
    make_node,
    make_pod,
    rpc_error,
    start_apiserver,
    summary,
    watch,
)

pytestmark = pytest.mark.integration


async def create(stub, name: str, **kw) -> int:
    out = await stub.Create(pb.WriteRequest(object=make_pod(name, **kw)))
    return int(out.pod.metadata.resource_version)


async def relabel(stub, name: str, labels: dict[str, str]) -> int:
    cur = await stub.Get(pb.GetRequest(resource="pods", namespace="default", name=name))
    cur.pod.metadata.labels.clear()
    cur.pod.metadata.labels.update(labels)
    out = await stub.Update(pb.WriteRequest(object=cur))
    return int(out.pod.metadata.resource_version)


async def delete(stub, name: str) -> int:
    out = await stub.Delete(pb.DeleteRequest(resource="pods", namespace="default", name=name))
    return int(out.pod.metadata.resource_version)


async def test_contract_under_concurrent_writers(apiserver: ApiServer):
    """Three watchers see exactly the writes the writers produced, in revision order, once each
    (concurrent creates may share a revision: they are group-committed into one txn)."""
    stub = apiserver.stub("admin")
    start = await stub.List(pb.ListRequest(resource="pods"))
    start_rv = start.metadata.resource_version
    streams = [watch(apiserver.stub("admin"), resource_version=start_rv) for _ in range(3)]
    written: set[tuple[int, str]] = set()

    async def writer(w: int) -> None:
        for i in range(30):
            name = f"w{w}-{i}"
            written.add((await create(stub, name), name))
            if i % 3 == 0:
                written.add((await relabel(stub, name, {"i": str(i)}), name))
            if i % 5 == 0:
                written.add((await delete(stub, name), name))

    await asyncio.gather(*(writer(w) for w in range(4)))
    for s in streams:
        events = await s.events_until(lambda ev: len(ev) >= len(written))
        seen = [(int(e.resource_version), e.object.pod.metadata.name) for e in events]
        assert [rev for rev, _ in seen] == sorted(rev for rev, _ in seen)  # ordered
        assert sorted(seen) == sorted(written)  # reliable and unique: no gap, no extra, none twice
        s.cancel()
    assert [summary(s.batches[i].events) for i in range(5)] == [
        summary(b.events) for b in streams[1].batches[:5]
    ]


async def test_one_revision_one_batch(apiserver: ApiServer):
    """A transaction that writes two pods (done directly in etcd) arrives as one batch."""
    stub = apiserver.stub("admin")
    s = watch(stub, resource_version=await current_rv(stub))
    etcd = await apiserver.etcd()
    try:
        values = [make_pod(n).pod for n in ("tx-a", "tx-b")]
        res = await etcd.txn(
            [],
            [
                Op.put(apiserver.key("pods", "default", v.metadata.name), v.SerializeToString())
                for v in values
            ],
        )
    finally:
        await etcd.close()
    batch = await s.next_batch()
    assert summary(batch.events) == [("ADDED", res.revision, "tx-a"), ("ADDED", res.revision, "tx-b")]


async def test_resume_after_drop_gets_exactly_the_next_events(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    s = watch(stub, resource_version=await current_rv(stub))
    revs = [await create(stub, f"p{i}") for i in range(5)]
    seen = await s.events_until(lambda ev: len(ev) >= 3)
    s.cancel()  # the client drops after reading three
    last = int(seen[2].resource_version)
    assert last == revs[2]
    revs += [await create(stub, f"p{i}") for i in range(5, 8)]
    revs.append(await delete(stub, "p0"))
    resumed = watch(stub, resource_version=str(last))
    events = await resumed.events_until(lambda ev: len(ev) >= len(revs) - 3)
    assert [int(e.resource_version) for e in events] == revs[3:]
    assert summary(events)[-1] == ("DELETED", revs[-1], "p0")
    # Nothing more arrives: a bookmark-free read would block; check with a short timeout.
    with pytest.raises(TimeoutError):
        await resumed.next_batch(timeout_s=0.3)


async def test_older_than_the_ring_is_out_of_range(apiserver_factory: ApiServerFactory):
    server = await apiserver_factory("--watch-cache-capacity", "5")
    stub = server.stub("admin")
    first = await create(stub, "p0")
    for i in range(1, 10):
        await create(stub, f"p{i}")
    e = await rpc_error(watch(stub, resource_version=str(first)).next_batch())
    assert e.code() == grpc.StatusCode.OUT_OF_RANGE
    assert e.details().startswith(f"too old resource version: {first} (")
    # The newest revisions can still be replayed.
    listing = await stub.List(pb.ListRequest(resource="pods", resource_version="0"))
    rv = int(listing.metadata.resource_version)
    ok = watch(stub, resource_version=str(rv - 2))
    events = await ok.events_until(lambda ev: len(ev) >= 2)
    assert [int(e.resource_version) for e in events] == [rv - 1, rv]


async def test_watch_from_compacted_revision_is_out_of_range(etcd_factory, pki, tmp_path):
    cluster = await etcd_factory(members=1)
    server = await start_apiserver(cluster, pki, tmp_path / "api")
    try:
        stub = server.stub("admin")
        first = await create(stub, "p0")
        for i in range(1, 4):
            await create(stub, f"p{i}")
        client = await server.etcd()
        try:
            _, current = await client.get(b"/")
            await client.compact(current)
        finally:
            await client.close()
        e = await rpc_error(watch(stub, resource_version=str(first)).next_batch())
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE
        assert e.details().startswith(f"too old resource version: {first} (")
        e = await rpc_error(stub.List(pb.ListRequest(resource="pods", resource_version=str(first))))
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE
        # From the current revision the watch works.
        s = watch(stub, resource_version=str(current))
        rev = await create(stub, "after")
        assert summary(await s.events_until(lambda ev: len(ev) >= 1)) == [("ADDED", rev, "after")]
    finally:
        await server.stop()


async def test_bookmarks_on_an_idle_resource_are_safe_to_resume_from(apiserver_factory: ApiServerFactory):
    server = await apiserver_factory("--bookmark-interval", "0.2")
    stub = server.stub("admin")
    idle = watch(stub, "nodes", resource_version="0", allow_watch_bookmarks=True)
    t0 = time.monotonic()
    [bm] = await idle.events_until(lambda ev: len(ev) >= 1, timeout_s=5, bookmarks=True)
    assert bm.type == "BOOKMARK" and not bm.HasField("object")
    assert time.monotonic() - t0 < 3
    # Writes elsewhere (pods) advance the nodes cache too: later bookmarks carry newer revisions.
    pod_rev = await create(stub, "elsewhere")
    later = await idle.events_until(
        lambda ev: any(int(e.resource_version) >= pod_rev for e in ev), timeout_s=5, bookmarks=True
    )
    assert all(e.type == "BOOKMARK" for e in later)
    resume_rv = int(later[-1].resource_version)
    idle.cancel()
    node_rev = (await stub.Create(pb.WriteRequest(object=make_node("n1")))).node.metadata.resource_version
    resumed = watch(stub, "nodes", resource_version=str(resume_rv))
    assert summary(await resumed.events_until(lambda ev: len(ev) >= 1)) == [("ADDED", int(node_rev), "n1")]
    # A watcher that did not ask for bookmarks gets none.
    plain = watch(stub, "nodes", resource_version="0")
    with pytest.raises(TimeoutError):
        await plain.next_batch(timeout_s=0.6)


async def test_label_selector_transitions(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    s = watch(stub, resource_version=await current_rv(stub), label_selector="app=web")
    await create(stub, "p", labels={"app": "db"})  # never seen
    r_added = await relabel(stub, "p", {"app": "web"})
    r_mod = await relabel(stub, "p", {"app": "web", "v": "2"})
    r_gone = await relabel(stub, "p", {"app": "db"})
    await delete(stub, "p")  # deleted while not matching: not seen
    r_other = await create(stub, "q", labels={"app": "web"})
    r_del = await delete(stub, "q")
    events = await s.events_until(lambda ev: len(ev) >= 5)
    assert summary(events) == [
        ("ADDED", r_added, "p"),
        ("MODIFIED", r_mod, "p"),
        ("DELETED", r_gone, "p"),
        ("ADDED", r_other, "q"),
        ("DELETED", r_del, "q"),
    ]
    assert events[2].object.pod.metadata.labels["app"] == "web"  # the last state that matched


async def test_field_selector_and_namespace(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    s = watch(
        stub, namespace="team", resource_version=await current_rv(stub), field_selector="spec.nodeName=node-a"
    )
    await create(stub, "elsewhere")  # other namespace
    await stub.Create(pb.WriteRequest(object=make_pod("p", namespace="team")))
    bound = await stub.Bind(
        pb.BindRequest(
            binding=pb.Binding(
                metadata=pb.ObjectMeta(name="p", namespace="team"), target=pb.ObjectReference(name="node-a")
            )
        )
    )
    events = await s.events_until(lambda ev: len(ev) >= 1)
    assert summary(events) == [("ADDED", int(bound.pod.metadata.resource_version), "p")]
    e = await rpc_error(watch(stub, field_selector="spec.color=red").next_batch())
    assert (
        e.code() == grpc.StatusCode.INVALID_ARGUMENT
        and "field label not supported: spec.color" in e.details()
    )
    e = await rpc_error(watch(stub, label_selector="a in (").next_batch())
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_send_initial_events_then_bookmark_then_live(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    for i in range(3):
        await create(stub, f"p{i}", labels={"app": "x" if i != 1 else "y"})
    s = watch(stub, resource_version="", send_initial_events=True, label_selector="app=x")
    initial = []
    while True:
        batch = await s.next_batch()
        initial.extend(batch.events)
        if batch.events[-1].type == "BOOKMARK":
            break
    assert [(e.type, n) for e, (_, _, n) in zip(initial, summary(initial), strict=True)] == [
        ("ADDED", "p0"),
        ("ADDED", "p2"),
        ("BOOKMARK", ""),
    ]
    rev = await create(stub, "p3", labels={"app": "x"})
    assert summary(await s.events_until(lambda ev: len(ev) >= 1)) == [("ADDED", rev, "p3")]


async def test_timeout_seconds_ends_the_stream(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    call = stub.Watch(pb.WatchRequest(resource="pods", timeout_seconds=1))
    t0 = time.monotonic()
    assert await asyncio.wait_for(call.read(), 5) is grpc.aio.EOF
    assert 0.9 <= time.monotonic() - t0 < 4
    assert await call.code() == grpc.StatusCode.OK


async def test_future_resource_version_is_refused(apiserver: ApiServer):
    e = await rpc_error(watch(apiserver.stub("admin"), resource_version="999999999").next_batch())
    assert e.code() == grpc.StatusCode.UNAVAILABLE and "Too large resource version" in e.details()


async def test_slow_watcher_is_cut_off_while_a_fast_one_keeps_up(apiserver_factory: ApiServerFactory):
    server = await apiserver_factory("--watch-queue-length", "16")
    stub = server.stub("admin")
    # The slow client has its own connection (not the fast one's, whose reads would keep the shared
    # connection's flow-control window open) and no BDP probing, so its window stays at 64 KiB.
    slow_channel = server.raw_channel(
        "admin", **{"grpc.http2.bdp_probe": 0, "grpc.use_local_subchannel_pool": 1}
    )
    slow_stub = pbg.ResourcesStub(slow_channel)
    start = await current_rv(stub)
    slow = slow_stub.Watch(pb.WatchRequest(resource="pods", resource_version=start))
    await slow.initial_metadata()  # the stream is open; now never read from it
    fast = watch(stub, resource_version=start)
    written: list[int] = []
    big = {"blob": "x" * 20000}
    expected = 400

    async def writer() -> None:
        for i in range(expected):
            obj = make_pod(f"p{i}")
            obj.pod.metadata.annotations.update(big)
            out = await stub.Create(pb.WriteRequest(object=obj))
            written.append(int(out.pod.metadata.resource_version))

    events, _ = await asyncio.gather(
        fast.events_until(lambda ev: len(ev) >= expected, timeout_s=60), writer()
    )
    assert [int(e.resource_version) for e in events] == written
    # The slow stream was closed with RESOURCE_EXHAUSTED: its client reads what was in flight (what
    # fit in its flow-control window), then the status.
    got, code = await asyncio.wait_for(_drain(slow), 30)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "too slow" in (await slow.details())
    assert got < expected // 4
    assert "closing slow watcher" in server.log()


async def test_a_client_that_stops_reading_is_closed(apiserver_factory: ApiServerFactory):
    """No queue overflow needed: a write the client does not take within --watch-send-timeout ends
    the stream with RESOURCE_EXHAUSTED (instead of holding it open for ever)."""
    server = await apiserver_factory("--watch-send-timeout", "1")
    stub = server.stub("admin")
    stalled_channel = server.raw_channel(
        "admin", **{"grpc.http2.bdp_probe": 0, "grpc.use_local_subchannel_pool": 1}
    )
    start = await current_rv(stub)
    stalled = pbg.ResourcesStub(stalled_channel).Watch(
        pb.WatchRequest(resource="pods", resource_version=start)
    )
    await stalled.initial_metadata()
    for i in range(8):  # 8 x 20 KB: more than a 64 KiB window, far less than the queue
        obj = make_pod(f"p{i}")
        obj.pod.metadata.annotations["blob"] = "x" * 20000
        await stub.Create(pb.WriteRequest(object=obj))
    deadline = time.monotonic() + 15
    while "closing stalled watcher" not in server.log():
        assert time.monotonic() < deadline, server.log()[-2000:]
        await asyncio.sleep(0.05)
    got, code = await asyncio.wait_for(_drain(stalled), 10)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and got < 8
    assert "took no data for 1s" in await stalled.details()


async def _drain(call) -> tuple[int, grpc.StatusCode]:
    n = 0
    try:
        async for batch in call:
            n += len(batch.events)
    except grpc.aio.AioRpcError as e:
        return n, e.code()
    return n, await call.code()


async def test_watch_sees_writes_made_through_etcd_directly(apiserver: ApiServer):
    """The cache follows etcd, not the API server's own writes (e.g. another API server's)."""
    stub = apiserver.stub("admin")
    s = watch(stub, "nodes", resource_version=await current_rv(stub, "nodes"))
    etcd = await apiserver.etcd()
    try:
        node = make_node("raw").node
        rev = await etcd.put(apiserver.key("nodes", "", "raw"), node.SerializeToString())
        events = await s.events_until(lambda ev: len(ev) >= 1)
        assert summary(events) == [("ADDED", rev, "raw")]
        start = f"{apiserver.prefix}/nodes/".encode()
        await etcd.delete(start, range_end=prefix_range_end(start))
        events = await s.events_until(lambda ev: len(ev) >= 1)
        assert [e.type for e in events] == ["DELETED"]
    finally:
        await etcd.close()
