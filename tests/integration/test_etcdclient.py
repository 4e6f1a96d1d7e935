"""kse.etcdclient against real etcd: KV and txn basics, then each requirement DEPENDENCIES.md names.

* watch: every revision exactly once, in order, across an etcd restart (SIGTERM and SIGKILL) in the
  middle of a catch-up, and across a member failure in a 3-member cluster;
* compaction: range and watch raise CompactedError at once;
* several endpoints: idempotent calls fail over, writes that may have been applied are not retried;
* mTLS with client certificates; messages over 4 MiB; a throughput smoke test.

Waiting is always for a condition with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import grpc
import pytest

from certs.layout import PKI
from harness.procs.etcd import EtcdCluster, EtcdServerTLS, find_etcd_binary
from harness.procs.ports import free_port
from kse.etcdclient import (
    CompactedError,
    Compare,
    EtcdClient,
    EtcdClosedError,
    EtcdError,
    EtcdOutcomeUnknownError,
    EtcdTLS,
    EtcdUnavailableError,
    FutureRevisionError,
    KeyValue,
    Op,
    RangeResult,
    Watch,
    WatchBatch,
    prefix_range_end,
    progress_request_is_ordered,
)
from tests.fixtures.etcd import EtcdFactory

pytestmark = pytest.mark.integration


def key(prefix: str, name: str) -> bytes:
    return f"{prefix}/{name}".encode()


async def until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    """Poll `predicate` until it holds; fail after `within` seconds."""
    async with asyncio.timeout(within):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.005)


async def current_revision(client: EtcdClient) -> int:
    return (await client.get(b"\x00kse-test-no-such-key"))[1]


# ---------------------------------------------------------------------------------------------- helpers


async def create_keys(client: EtcdClient, keys: Iterable[bytes], *, concurrency: int = 8) -> int:
    """Create each key once with a CAS txn (version == 0), retrying through outages.

    A retry after EtcdOutcomeUnknownError is safe *because* of the compare: if the first attempt was
    applied, the retry fails its compare and writes nothing. Returns how many outcomes were unknown.
    """
    pending = iter(keys)
    unknown = 0

    async def create(k: bytes) -> None:
        nonlocal unknown
        give_up = time.monotonic() + 60
        while True:
            try:
                await client.txn([Compare.version(k) == 0], [Op.put(k, b"v-" + k)])
                return
            except EtcdOutcomeUnknownError:
                unknown += 1
            except EtcdUnavailableError:
                pass
            if time.monotonic() > give_up:
                raise AssertionError(f"could not create {k!r} within 60 s")

    async def worker() -> None:
        for k in pending:
            await create(k)

    async with asyncio.TaskGroup() as tg:
        for _ in range(concurrency):
            tg.create_task(worker())
    return unknown


def assert_exact_history(batches: list[WatchBatch], first: int, last: int, keys: set[bytes]) -> None:
    """The watch delivered revisions first..last, each exactly once and in order, one key created per
    revision, and nothing else."""
    revisions = [b.revision for b in batches if not b.progress]
    duplicates = len(revisions) - len(set(revisions))
    assert duplicates == 0, f"{duplicates} revisions delivered twice"
    assert revisions == sorted(revisions), "revisions out of order"
    missing = sorted(set(range(first, last + 1)) - set(revisions))
    assert not missing, f"{len(missing)} revisions lost, first ones: {missing[:10]}"
    assert revisions == list(range(first, last + 1))
    seen = [ev.kv.key for b in batches for ev in b.events]
    assert len(seen) == len(keys) and set(seen) == keys
    for b in batches:
        assert all(ev.kv.mod_revision == b.revision for ev in b.events)


async def collect_until(watch: Watch, *, keys: int = 0, sentinel: bytes | None = None) -> list[WatchBatch]:
    """Batches until `keys` events arrived, or until the batch holding `sentinel` (inclusive)."""
    batches: list[WatchBatch] = []
    count = 0
    async for batch in watch:
        batches.append(batch)
        count += len(batch.events)
        if sentinel is not None and any(ev.kv.key == sentinel for ev in batch.events):
            break
        if sentinel is None and count >= keys:
            break
    return batches


# ---------------------------------------------------------------------------------------------- pure


def test_prefix_range_end() -> None:
    assert prefix_range_end(b"/registry/pods/") == b"/registry/pods0"
    assert prefix_range_end(b"a\xff") == b"b"
    assert prefix_range_end(b"\xff\xff") == b"\x00"
    assert prefix_range_end(b"") == b"\x00"


def test_compare_builders_type_check() -> None:
    assert "==" in repr(Compare.version(b"k") == 0)
    assert "mod_revision" in repr(Compare.mod_revision(b"k") != 5)
    assert "<" in repr(Compare.create_revision(b"k") < 3)
    assert ">" in repr(Compare.value(b"k") > b"a")
    with pytest.raises(TypeError):
        _ = Compare.value(b"k") == 1
    with pytest.raises(TypeError):
        _ = Compare.version(b"k") == b"1"
    with pytest.raises(TypeError):
        Compare.version("k")  # type: ignore[arg-type]


def test_progress_request_versions() -> None:
    """Requested progress notifications are ordered from etcd 3.4.25 / 3.5.8 (etcd-io/etcd#15220)."""
    assert not progress_request_is_ordered("3.5.1")
    assert not progress_request_is_ordered("3.5.7")
    assert progress_request_is_ordered("3.5.8")
    assert progress_request_is_ordered("3.5.21")
    assert not progress_request_is_ordered("3.4.24")
    assert progress_request_is_ordered("3.4.25")
    assert progress_request_is_ordered("3.6.0")
    assert not progress_request_is_ordered(None)
    assert not progress_request_is_ordered("garbage")


def test_find_etcd_binary() -> None:
    binary = find_etcd_binary()
    assert binary.is_file() and binary.name == "etcd"


# ---------------------------------------------------------------------------------------------- KV


async def test_put_get_range_delete(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    c = etcd_client
    rev1 = await c.put(key(etcd_prefix, "a"), b"1")
    rev2 = await c.put(key(etcd_prefix, "b"), b"2")
    rev3 = await c.put(key(etcd_prefix, "a"), b"3")
    assert rev1 < rev2 < rev3

    kv, rev = await c.get(key(etcd_prefix, "a"))
    assert kv == KeyValue(key(etcd_prefix, "a"), b"3", rev1, rev3, 2)
    assert rev >= rev3
    assert await c.get(key(etcd_prefix, "missing")) == (None, rev)

    prefix = f"{etcd_prefix}/".encode()
    end = prefix_range_end(prefix)
    everything = await c.range(prefix, end)
    assert [kv.key for kv in everything.kvs] == [key(etcd_prefix, "a"), key(etcd_prefix, "b")]
    assert everything.count == 2 and not everything.more

    limited = await c.range(prefix, end, limit=1)
    assert len(limited.kvs) == 1 and limited.more and limited.count == 2

    old = await c.range(key(etcd_prefix, "a"), revision=rev2)
    assert old.kvs[0].value == b"1"

    keys_only = await c.range(prefix, end, keys_only=True)
    assert [kv.value for kv in keys_only.kvs] == [b"", b""]
    counted = await c.range(prefix, end, count_only=True)
    assert counted.kvs == [] and counted.count == 2

    rev4 = await c.delete(key(etcd_prefix, "a"))
    assert rev4 > rev3
    assert (await c.get(key(etcd_prefix, "a")))[0] is None
    await c.delete(prefix, range_end=end)
    assert (await c.range(prefix, end, count_only=True)).count == 0

    with pytest.raises(FutureRevisionError):
        await c.range(prefix, end, revision=rev4 + 1_000_000)


async def test_txn_create_update_and_results(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    c = etcd_client
    k = key(etcd_prefix, "pod")

    created = await c.txn([Compare.version(k) == 0], [Op.put(k, b"v1")], [Op.get(k)])
    assert created.succeeded and created.responses == [None]
    again = await c.txn([Compare.version(k) == 0], [Op.put(k, b"dup")], [Op.get(k)])
    assert not again.succeeded
    current = again.responses[0]
    assert isinstance(current, RangeResult) and current.kvs[0].value == b"v1"
    rv = current.kvs[0].mod_revision
    assert rv == created.revision

    # Update with a resourceVersion precondition; prev_kv returns what was replaced.
    updated = await c.txn([Compare.mod_revision(k) == rv], [Op.put(k, b"v2", prev_kv=True)])
    assert updated.succeeded and updated.revision > rv
    prev = updated.responses[0]
    assert isinstance(prev, KeyValue) and prev.value == b"v1"
    stale = await c.txn([Compare.mod_revision(k) == rv], [Op.put(k, b"lost")])
    assert not stale.succeeded

    # All comparison operators and targets reach etcd as meant.
    assert (await c.txn([Compare.mod_revision(k) != rv], [])).succeeded
    assert (await c.txn([Compare.mod_revision(k) > rv], [])).succeeded
    assert (await c.txn([Compare.create_revision(k) < rv + 1], [])).succeeded
    assert (await c.txn([Compare.value(k) == b"v2", Compare.version(k) == 2], [])).succeeded
    assert not (await c.txn([Compare.value(k) == b"v1"], [])).succeeded

    # One txn touching several keys is one revision; delete with prev_kv returns the deleted value.
    other = key(etcd_prefix, "other")
    multi = await c.txn([], [Op.put(other, b"x"), Op.delete(k, prev_kv=True), Op.get(other)])
    deleted, read = multi.responses[1], multi.responses[2]
    assert isinstance(deleted, KeyValue) and deleted.value == b"v2"
    assert isinstance(read, RangeResult) and read.kvs[0].mod_revision == multi.revision
    assert (await c.txn([], [Op.delete(k, prev_kv=True)])).responses == [None]


async def test_status(etcd_client: EtcdClient) -> None:
    status = await etcd_client.status()
    assert status["version"].startswith("3.")
    assert status["leader"] and status["is_leader"]
    assert status["revision"] >= 1 and status["db_size"] > 0
    assert (await etcd_client.status(endpoint=etcd_client.endpoints[0]))["member_id"] == status["member_id"]


# ---------------------------------------------------------------------------------------------- watch


async def test_watch_batches_are_whole_revisions(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    c = etcd_client
    prefix = f"{etcd_prefix}/".encode()
    start = await current_revision(c) + 1
    async with c.watch(prefix, prefix_range_end(prefix), start_revision=start) as w:
        a, b, d = key(etcd_prefix, "a"), key(etcd_prefix, "b"), key(etcd_prefix, "d")
        r1 = await c.put(a, b"1")
        r2 = (await c.txn([], [Op.put(a, b"2"), Op.put(b, b"1"), Op.put(d, b"1")])).revision
        r3 = await c.delete(a)
        got: list[WatchBatch] = []
        async with asyncio.timeout(10):
            async for batch in w:
                if batch.progress:
                    continue
                got.append(batch)
                if batch.revision == r3:
                    break
        assert [x.revision for x in got] == [r1, r2, r3]
        assert [ev.kv.key for ev in got[1].events] == [a, b, d]
        update = got[1].events[0]
        assert update.type == "PUT" and update.prev_kv is not None and update.prev_kv.value == b"1"
        deletion = got[2].events[0]
        assert deletion.type == "DELETE" and deletion.kv.mod_revision == r3 and deletion.kv.value == b""
        assert deletion.prev_kv is not None and deletion.prev_kv.value == b"2"
        assert w.next_revision == r3 + 1


async def test_watch_read_cancelled_by_a_timeout_resumes(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    """A timeout around `anext(watch)` cancels the read (and grpc the stream under it); the next read
    resumes where the watch was, without a stray CancelledError and without losing the event."""
    k = key(etcd_prefix, "k")
    first = await etcd_client.put(k, b"1")
    async with etcd_client.watch(k, start_revision=first, progress_notify=False) as w:
        async with asyncio.timeout(10):
            assert (await anext(aiter(w))).revision == first
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await anext(aiter(w))
        second = await etcd_client.put(k, b"2")
        async with asyncio.timeout(10):
            batch = await anext(aiter(w))
        assert batch.revision == second and batch.events[0].kv.value == b"2"


async def test_watch_from_now(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    """start_revision=0 resolves to "after the current revision": earlier writes are not replayed."""
    k = key(etcd_prefix, "k")
    await etcd_client.put(k, b"before")
    async with etcd_client.watch(k, start_revision=0) as w:
        # The stream exists only once iteration starts; write from a task that waits for it.
        async def write_when_open() -> int:
            await until(lambda: w.endpoint is not None)
            return await etcd_client.put(k, b"after")

        writer = asyncio.create_task(write_when_open())
        async with asyncio.timeout(10):
            batch = await anext(aiter(w))
            while batch.progress:
                batch = await anext(aiter(w))
        assert batch.events[0].kv.value == b"after"
        assert batch.revision == await writer


async def test_watch_progress_notifications_are_safe_bookmarks(etcd_factory: EtcdFactory) -> None:
    """Periodic progress notifications arrive on an idle watch, advance with other keys' writes, and
    resuming from them (across a restart) repeats nothing."""
    cluster = await etcd_factory(1, progress_notify_interval=0.1)
    async with await cluster.connect(timeout=10) as c:
        watched = b"/watched/k"
        start = await current_revision(c)
        async with c.watch(watched, start_revision=start + 1) as w:
            async with asyncio.timeout(10):
                async for batch in w:
                    assert batch.progress and not batch.events
                    if batch.revision >= start:
                        break
            assert w.next_revision == batch.revision + 1
            elsewhere = await c.put(b"/elsewhere", b"x")
            async with asyncio.timeout(10):
                async for batch in w:
                    if batch.revision >= elsewhere:
                        break
            assert batch.progress and w.next_revision == elsewhere + 1

            await cluster.members[0].restart(signal.SIGKILL)
            written = await c.put(watched, b"v")
            async with asyncio.timeout(20):
                async for batch in w:
                    if not batch.progress:
                        break
            assert batch.revision == written and [e.kv.value for e in batch.events] == [b"v"]
            assert w.reconnects >= 1


async def test_request_progress(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    """On etcd >= 3.5.8 a requested progress notification arrives; before that the request is not
    sent (etcd could answer it ahead of events) and the client says so."""
    c = etcd_client
    version = (await c.status())["version"]
    assert c.progress_request_supported == progress_request_is_ordered(version)
    start = await current_revision(c)
    async with c.watch(key(etcd_prefix, "idle"), start_revision=start + 1, progress_notify=False) as w:
        await c.request_progress()  # before the stream exists: remembered, sent once it is up
        if not c.progress_request_supported:
            # Harmless no-op; the watch still works.
            written = await c.put(key(etcd_prefix, "idle"), b"x")
            async with asyncio.timeout(10):
                batch = await anext(aiter(w))
            assert not batch.progress and batch.revision == written
            return

        async def ask_until_answered() -> None:
            while True:  # etcd >= 3.5.13 answers only a synced watcher: ask again until it does
                await c.request_progress()
                await asyncio.sleep(0.1)

        asker = asyncio.create_task(ask_until_answered())
        try:
            async with asyncio.timeout(10):
                batch = await anext(aiter(w))
        finally:
            asker.cancel()
        assert batch.progress and batch.revision >= start


# ---------------------------------------------------------------------------------------------- compaction


async def test_compacted_range_and_watch_raise_at_once(etcd_factory: EtcdFactory) -> None:
    cluster = await etcd_factory(1)
    async with await cluster.connect() as c:
        first = await c.put(b"/c/k", b"1")
        for i in range(5):
            await c.put(b"/c/k", str(i).encode())
        compact_at = await c.put(b"/c/k", b"last")
        await c.compact(compact_at)
        await c.compact(compact_at)  # compacting again to the same revision is not an error

        with pytest.raises(CompactedError) as caught:
            await c.range(b"/c/k", revision=first)
        assert caught.value.compact_revision == compact_at and caught.value.requested_revision == first
        with pytest.raises(CompactedError):
            await c.compact(first)

        w = c.watch(b"/c/", prefix_range_end(b"/c/"), start_revision=first)
        started = time.monotonic()
        with pytest.raises(CompactedError) as caught:
            async with asyncio.timeout(10):
                async for batch in w:
                    pytest.fail(f"a compacted watch yielded {batch}")
        assert caught.value.compact_revision == compact_at and caught.value.requested_revision == first
        assert time.monotonic() - started < 5
        assert w.closed
        with pytest.raises(StopAsyncIteration):
            await anext(aiter(w))

        # From the compaction point on, the history is still there.
        async with c.watch(b"/c/k", start_revision=compact_at) as ok:
            async with asyncio.timeout(10):
                batch = await anext(aiter(ok))
            assert batch.revision == compact_at and batch.events[0].kv.value == b"last"


# ---------------------------------------------------------------------------------------------- restart


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_watch_loses_nothing_across_etcd_restart(
    etcd_factory: EtcdFactory, sig: signal.Signals
) -> None:
    """4000 keys, one revision each. The watch starts behind (catching up 1500 revisions), etcd is
    restarted while the consumer sits in the middle of that catch-up and writes keep coming; the
    watch must deliver every revision exactly once, in order."""
    cluster = await etcd_factory(1)
    member = cluster.members[0]
    total, before_watch, pause_after = 4000, 1500, 700
    prefix = b"/restart/"
    names = [prefix + b"%05d" % i for i in range(total)]
    sentinel = prefix + b"zz-end"
    async with await cluster.connect(timeout=10) as c:
        start = await current_revision(c)
        await create_keys(c, names[:before_watch])

        reached_pause = asyncio.Event()
        restarted = asyncio.Event()
        w = c.watch(prefix, prefix_range_end(prefix), start_revision=start + 1, progress_notify=False)

        async def consume() -> list[WatchBatch]:
            batches: list[WatchBatch] = []
            count = 0
            async for batch in w:
                batches.append(batch)
                count += len(batch.events)
                if count >= pause_after and not reached_pause.is_set():
                    reached_pause.set()
                    await restarted.wait()
                if any(ev.kv.key == sentinel for ev in batch.events):
                    break
            return batches

        async with asyncio.timeout(90):
            consumer = asyncio.create_task(consume())
            await reached_pause.wait()
            writer = asyncio.create_task(create_keys(c, names[before_watch:]))
            await member.restart(sig)
            restarted.set()
            await writer
            last = await c.put(sentinel, b"end")
            batches = await consumer
        await w.aclose()

    assert_exact_history(batches, start + 1, last, {*names, sentinel})
    assert w.reconnects >= 1


@pytest.mark.parametrize("victim", ["follower", "leader"])
async def test_three_members_one_killed(etcd_factory: EtcdFactory, victim: str) -> None:
    """Kill the member the clients are using (one client for writes, one for the watch): calls move
    to the others and the watch resumes there without losing or repeating a revision."""
    cluster = await etcd_factory(3)
    leader = await cluster.leader()
    dying = leader if victim == "leader" else next(m for m in cluster.members if m is not leader)
    others = [m.endpoint for m in cluster.members if m is not dying]
    total, before_kill = 1200, 400
    prefix = b"/members/"
    names = [prefix + b"%05d" % i for i in range(total)]
    sentinel = prefix + b"zz-end"
    endpoints = [dying.endpoint, *others]
    async with (
        await EtcdClient.connect(endpoints, timeout=10) as writer,
        await EtcdClient.connect(endpoints, timeout=10) as watcher,
    ):
        assert writer.current_endpoint == watcher.current_endpoint == dying.endpoint
        start = await current_revision(writer)
        async with watcher.watch(prefix, prefix_range_end(prefix), start_revision=start + 1) as w:
            consumer = asyncio.create_task(collect_until(w, sentinel=sentinel))
            await create_keys(writer, names[:before_kill])
            await dying.kill()

            if victim == "follower":
                # Once the writer's channel has seen the member go (poll, with a deadline), a write to
                # it fails before being sent, so it is retried on another member and just succeeds.
                async with asyncio.timeout(10):
                    while True:
                        try:
                            await writer.status(endpoint=dying.endpoint)
                        except EtcdUnavailableError:
                            break
                assert writer.current_endpoint == dying.endpoint
                k = names[before_kill]
                assert (await writer.txn([Compare.version(k) == 0], [Op.put(k, b"v-" + k)])).succeeded
                assert writer.current_endpoint != dying.endpoint

            await create_keys(writer, names[before_kill:])
            await create_keys(writer, [sentinel])
            last = (await writer.get(sentinel))[0].mod_revision  # type: ignore[union-attr]
            async with asyncio.timeout(30):
                batches = await consumer
            assert w.reconnects >= 1
            assert w.endpoint in others

    assert_exact_history(batches, start + 1, last, {*names, sentinel})


# ---------------------------------------------------------------------------------------------- failures


async def test_unreachable_endpoints(etcd: EtcdCluster) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(EtcdUnavailableError):
        await EtcdClient.connect([dead], timeout=0.5)
    assert time.monotonic() - started < 3

    # A dead endpoint first in the list is skipped.
    async with await EtcdClient.connect([dead, *etcd.endpoints], timeout=2) as c:
        assert c.current_endpoint == etcd.endpoints[0]
        assert (await c.get(b"\x00nothing"))[0] is None


async def test_writes_with_unknown_outcome_are_not_retried(etcd_factory: EtcdFactory) -> None:
    """A hung member (SIGSTOP): a read times out as EtcdUnavailableError; a txn, which was sent and
    may yet be applied, raises EtcdOutcomeUnknownError and is applied at most once."""
    cluster = await etcd_factory(1)
    member = cluster.members[0]
    async with await cluster.connect(timeout=0.5) as c:
        k = b"/hung/k"
        await c.put(k, b"0")
        await member.pause()
        try:
            with pytest.raises(EtcdUnavailableError) as read_error:
                await c.get(k)
            assert not isinstance(read_error.value, EtcdOutcomeUnknownError)
            with pytest.raises(EtcdOutcomeUnknownError):
                await c.txn([], [Op.put(k, b"1")])
        finally:
            await member.resume()
        async with asyncio.timeout(10):
            while True:
                try:
                    kv, _ = await c.get(k)
                    break
                except EtcdUnavailableError:
                    continue
        assert kv is not None and kv.version in (1, 2)


async def test_all_members_down_write_is_unavailable_not_unknown(etcd_factory: EtcdFactory) -> None:
    """With etcd gone (connection refused), a txn is never sent: plain EtcdUnavailableError after the
    deadline, which tells the caller nothing was applied."""
    cluster = await etcd_factory(1)
    async with await cluster.connect(timeout=0.5) as c:
        await c.put(b"/down/k", b"0")
        await cluster.members[0].kill()
        async with asyncio.timeout(10):
            while True:  # until the channel has noticed (reads are safe to repeat)
                try:
                    await c.get(b"/down/k")
                except EtcdUnavailableError:
                    break
        with pytest.raises(EtcdUnavailableError) as caught:
            await c.txn([], [Op.put(b"/down/k", b"1")])
        assert not isinstance(caught.value, EtcdOutcomeUnknownError)


async def test_close_ends_watches_and_calls(
    etcd_client: EtcdClient, etcd_prefix: str, etcd: EtcdCluster
) -> None:
    c = await EtcdClient.connect(etcd.endpoints)
    w = c.watch(key(etcd_prefix, "k"), start_revision=0, progress_notify=False)
    reader = asyncio.create_task(anext(aiter(w)))
    await until(lambda: w.endpoint is not None)  # stream up
    await c.close()
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(10):
            await reader
    with pytest.raises(EtcdClosedError):
        await c.get(b"k")
    with pytest.raises(EtcdClosedError):
        c.watch(b"k", start_revision=0)


# ---------------------------------------------------------------------------------------------- TLS


async def test_mutual_tls(etcd_factory: EtcdFactory, pki: PKI, foreign_pki: PKI) -> None:
    cluster = await etcd_factory(1, tls=EtcdServerTLS.from_pki_dir(pki.dir))
    assert all(e.startswith("https://") for e in cluster.endpoints)
    identity = pki.apiserver_etcd_client
    tls = EtcdTLS(pki.ca_bundle, identity.cert, identity.key)
    async with await EtcdClient.connect(cluster.endpoints, tls=tls) as c:
        rev = await c.put(b"/tls/k", b"v")
        async with c.watch(b"/tls/k", start_revision=rev) as w:
            async with asyncio.timeout(10):
                batch = await anext(aiter(w))
            assert batch.events[0].kv.value == b"v"

    # No client cert, a client cert from another CA, a server CA we do not trust: all refused.
    foreign = foreign_pki.apiserver_etcd_client
    for bad in (
        EtcdTLS(pki.ca_bundle),
        EtcdTLS(pki.ca_bundle, foreign.cert, foreign.key),
        EtcdTLS(foreign_pki.ca_bundle, identity.cert, identity.key),
    ):
        with pytest.raises(EtcdUnavailableError):
            await EtcdClient.connect(cluster.endpoints, tls=bad, timeout=0.5)
    with pytest.raises(ValueError):
        await EtcdClient.connect(cluster.endpoints)  # https endpoint without TLS config


# ---------------------------------------------------------------------------------------------- size


async def test_messages_over_4_mib(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    """A range of ~9 MiB and a watch catch-up of the same keys (grpc's default cap is 4 MiB). etcd
    sends that catch-up as ~1.5 MiB fragments (or, if buffered before the watch was announced, as
    one 9 MiB message): either way the client must join it into whole revisions."""
    c = etcd_client
    prefix = f"{etcd_prefix}/big/".encode()
    value = bytes(range(256)) * 4096  # 1 MiB, under etcd's 1.5 MiB request limit
    start = await current_revision(c)
    for i in range(9):
        await c.put(prefix + b"%d" % i, value)
    result = await c.range(prefix, prefix_range_end(prefix))
    assert len(result.kvs) == 9 and all(kv.value == value for kv in result.kvs)

    async with c.watch(prefix, prefix_range_end(prefix), start_revision=start + 1) as w:
        async with asyncio.timeout(20):
            batches = await collect_until(w, keys=9)
    events = [ev for b in batches for ev in b.events]
    assert len(events) == 9 and all(ev.kv.value == value for ev in events)


async def test_channel_limit_is_configurable(etcd: EtcdCluster, etcd_prefix: str) -> None:
    async with await EtcdClient.connect(etcd.endpoints, max_message_bytes=1024) as small:
        k = key(etcd_prefix, "k")
        await small.put(k, b"x" * 100)
        with pytest.raises(EtcdError) as caught:
            await small.put(k, b"x" * 4096)
        assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED.name


# ---------------------------------------------------------------------------------------------- speed


async def test_cas_txn_throughput(
    etcd_client: EtcdClient, etcd_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """16 concurrent compare-and-swap txns for ~1 s (the bind path). Prints the rate; the floor is
    far below what this client does alone, since other tests share the machine."""
    c = etcd_client
    stop = time.monotonic() + 1.0
    done = itertools.count()

    async def worker(i: int) -> None:
        k = key(etcd_prefix, f"cas-{i}")
        rev = await c.put(k, b"0")
        while time.monotonic() < stop:
            result = await c.txn([Compare.mod_revision(k) == rev], [Op.put(k, b"x" * 256)])
            assert result.succeeded
            rev = result.revision
            next(done)

    started = time.monotonic()
    async with asyncio.TaskGroup() as tg:
        for i in range(16):
            tg.create_task(worker(i))
    rate = next(done) / (time.monotonic() - started)
    with capsys.disabled():
        print(f"\n[etcdclient] 16 concurrent CAS txns: {rate:.0f}/s")
    assert rate > 300


# ---------------------------------------------------------------------------------------------- CLI


async def _run_kse_etcd(data_dir: Path) -> tuple[asyncio.subprocess.Process, list[str]]:
    """Start `kse etcd` and read its banner up to the endpoints line."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kse",
        "etcd",
        "--data-dir",
        str(data_dir),
        "--fast",
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        while True:
            line = (await proc.stdout.readline()).decode()
            assert line, f"kse etcd exited early with {await proc.wait()}"
            if line.startswith("endpoints: "):
                return proc, line.split()[1].split(",")


async def test_kse_etcd_command_restarts_on_same_ports(tmp_path: Path) -> None:
    data_dir = tmp_path / "etcd"
    proc, endpoints = await _run_kse_etcd(data_dir)
    try:
        async with await EtcdClient.connect(endpoints) as c:
            await c.put(b"/cli/k", b"kept")
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await proc.wait() == 0

    proc, again = await _run_kse_etcd(data_dir)
    try:
        assert again == endpoints
        async with await EtcdClient.connect(again) as c:
            kv, _ = await c.get(b"/cli/k")
            assert kv is not None and kv.value == b"kept"
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await proc.wait() == 0
