"""Resolving writes whose outcome is unknown (apiserver_mock/storage/store.py), against real etcd.

The unknown outcome is made on purpose and deterministically: the store's etcd client reaches its
first member through `MuteProxy`, a TCP proxy that can stop forwarding one direction. Muting the
answers (etcd -> client) lets the request through and applies it, but its answer never comes;
muting the requests (client -> etcd) swallows it. `cut()` then closes every connection and the
listener, which is what a member dying under the request looks like to grpc (UNAVAILABLE "Socket
closed": EtcdOutcomeUnknownError), and the client moves to the other two members, where the store
works out what happened. Other writers interleave through a direct client to set up each case.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from apiserver_mock.fencing import Guard
from apiserver_mock.storage import Store, WriteResult
from harness.procs.etcd import EtcdCluster
from kse.etcdclient import Compare, EtcdClient, EtcdOutcomeUnknownError, KeyValue
from tests.fixtures.etcd import EtcdFactory

pytestmark = pytest.mark.timeout(60)

DEADLINE = 10.0


class MuteProxy:
    """A TCP proxy to one etcd member that can drop either direction, then cut everything."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname is not None and parts.port is not None
        self.upstream = (parts.hostname, parts.port)
        self.mute_up = False  # client -> etcd bytes are read and dropped
        self.mute_down = False  # etcd -> client bytes are read and dropped
        self.dropped_up = 0
        self.dropped_down = 0
        self.swallowed = asyncio.Event()  # set once a request byte was dropped
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self._writers |= {writer, up_writer}
        for task in (
            asyncio.create_task(self._pipe(reader, up_writer, up=True)),
            asyncio.create_task(self._pipe(up_reader, writer, up=False)),
        ):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, up: bool) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                if self.mute_up if up else self.mute_down:
                    if up:
                        self.dropped_up += len(data)
                        self.swallowed.set()
                    else:
                        self.dropped_down += len(data)
                    continue
                writer.write(data)
                await writer.drain()
        writer.close()

    def cut(self) -> None:
        """Close the listener (new connections are refused) and every connection."""
        if self._server is not None:
            self._server.close()
        for w in self._writers:
            w.close()

    async def aclose(self) -> None:
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass
class Rig:
    cluster: EtcdCluster
    proxy: MuteProxy
    client: EtcdClient  # the store's: first member through the proxy, then the two others
    store: Store
    direct: EtcdClient  # another writer, straight to the members


@pytest.fixture
async def rig(etcd_factory: EtcdFactory) -> AsyncIterator[Rig]:
    cluster = await etcd_factory(3)
    proxy = MuteProxy(cluster.members[0].endpoint)
    await proxy.start()
    others = [m.endpoint for m in cluster.members[1:]]
    # A per-call deadline well past each test's setup steps: the cut, not the deadline, ends the call.
    client = await EtcdClient.connect([proxy.url, *others], timeout=8)
    direct = await EtcdClient.connect(others)
    try:
        assert client.current_endpoint == proxy.url
        yield Rig(cluster, proxy, client, Store(client), direct)
    finally:
        await client.close()
        await direct.close()
        await proxy.aclose()


async def until_value(client: EtcdClient, key: bytes, check: object) -> KeyValue | None:
    """Poll `key` until `check(kv)` holds (a deadline, no fixed sleep)."""
    assert callable(check)
    async with asyncio.timeout(DEADLINE):
        while True:
            kv, _ = await client.get(key)
            if check(kv):
                return kv
            await asyncio.sleep(0.01)


async def answer_lost(rig: Rig, write: Awaitable[WriteResult], applied: object) -> asyncio.Task[WriteResult]:
    """Send `write` with etcd's answers muted; returns once etcd applied it (`applied(kv)`)."""
    rig.proxy.mute_down = True
    task = asyncio.ensure_future(write)
    await until_value(rig.direct, KEY, applied)
    assert not task.done()
    return task


async def request_lost(rig: Rig, write: Awaitable[WriteResult]) -> asyncio.Task[WriteResult]:
    """Send `write` with the requests muted; returns once the proxy swallowed it."""
    rig.proxy.mute_up = True
    task = asyncio.ensure_future(write)
    await asyncio.wait_for(rig.proxy.swallowed.wait(), DEADLINE)
    return task


async def finish(rig: Rig, task: asyncio.Task[WriteResult]) -> WriteResult:
    """Cut the proxied member away under the write and let the store resolve it."""
    rig.proxy.cut()
    async with asyncio.timeout(DEADLINE):
        res = await task
    assert rig.client.current_endpoint != rig.proxy.url  # moved to a live member, and stays there
    return res


KEY = b"/resolve/k"


async def seed(rig: Rig, value: bytes = b"v0") -> KeyValue:
    await rig.direct.put(KEY, value)
    kv, _ = await rig.direct.get(KEY)
    assert kv is not None
    return kv


async def test_update_that_landed_is_reported_applied_once(rig: Rig) -> None:
    base = await seed(rig)
    task = await answer_lost(
        rig, rig.store.update(KEY, b"mine", base.mod_revision), lambda kv: kv.value == b"mine"
    )
    res = await finish(rig, task)
    kv, _ = await rig.direct.get(KEY)
    assert kv is not None and res.succeeded and res.revision == kv.mod_revision
    assert kv.version == base.version + 1  # applied exactly once
    assert (rig.store.resolved_landed, rig.store.resolved_not_landed) == (1, 0)


async def test_update_that_never_arrived_is_sent_again(rig: Rig) -> None:
    base = await seed(rig)
    task = await request_lost(rig, rig.store.update(KEY, b"mine", base.mod_revision))
    res = await finish(rig, task)
    kv, _ = await rig.direct.get(KEY)
    assert kv is not None and kv.value == b"mine"
    assert res.succeeded and res.revision == kv.mod_revision and kv.version == base.version + 1
    assert (rig.store.resolved_landed, rig.store.resolved_not_landed) == (0, 1)


async def test_update_that_landed_and_was_overwritten_is_found_in_the_history(rig: Rig) -> None:
    """The bind-then-kubelet case: our write landed, someone wrote on top before we could look."""
    base = await seed(rig)
    task = await answer_lost(
        rig, rig.store.update(KEY, b"mine", base.mod_revision), lambda kv: kv.value == b"mine"
    )
    ours, _ = await rig.direct.get(KEY)
    assert ours is not None
    await rig.direct.put(KEY, b"theirs")
    res = await finish(rig, task)
    assert res.succeeded and res.revision == ours.mod_revision
    assert rig.store.resolved_landed == 1


async def test_update_that_lost_the_race_is_a_conflict(rig: Rig) -> None:
    base = await seed(rig)
    task = await request_lost(rig, rig.store.update(KEY, b"mine", base.mod_revision))
    await rig.direct.put(KEY, b"theirs")
    res = await finish(rig, task)
    assert not res.succeeded
    assert res.current is not None and res.current.value == b"theirs"  # what the CAS would have said
    assert (rig.store.resolved_landed, rig.store.resolved_not_landed) == (0, 0)


async def test_delete_that_landed(rig: Rig) -> None:
    base = await seed(rig)
    task = await answer_lost(rig, rig.store.delete(KEY, base.mod_revision), lambda kv: kv is None)
    _, after = await rig.direct.get(KEY)
    res = await finish(rig, task)
    assert res.succeeded and res.revision == after  # the deleting revision, from the history
    assert rig.store.resolved_landed == 1


async def test_create_that_landed_and_was_updated(rig: Rig) -> None:
    task = await answer_lost(rig, rig.store.create(KEY, b"mine"), lambda kv: kv is not None)
    created, _ = await rig.direct.get(KEY)
    assert created is not None
    await rig.direct.put(KEY, b"bound")
    res = await finish(rig, task)
    assert res.succeeded and res.revision == created.create_revision
    assert rig.store.resolved_landed == 1


async def test_create_that_never_arrived_is_created_once(rig: Rig) -> None:
    task = await request_lost(rig, rig.store.create(KEY, b"mine"))
    res = await finish(rig, task)
    kv, _ = await rig.direct.get(KEY)
    assert kv is not None and kv.version == 1 and res.succeeded and res.revision == kv.mod_revision


async def test_fenced_write_that_landed(rig: Rig) -> None:
    """A guarded write (a bind's fence compare on a lease key): the guard does not hide our write."""
    lease = b"/resolve/lease"
    await rig.direct.put(lease, b"holder")
    lease_kv, _ = await rig.direct.get(lease)
    assert lease_kv is not None
    guard = Guard((Compare.mod_revision(lease) == lease_kv.mod_revision,), (lease,), lease="ns/lease")
    base = await seed(rig)
    write = rig.store.update(KEY, b"mine", base.mod_revision, guard)
    task = await answer_lost(rig, write, lambda kv: kv.value == b"mine")
    res = await finish(rig, task)
    kv, _ = await rig.direct.get(KEY)
    assert kv is not None and res.succeeded and res.revision == kv.mod_revision


async def test_history_compacted_away_stays_unknown(rig: Rig) -> None:
    """Only when the evidence is gone does the caller get EtcdOutcomeUnknownError."""
    base = await seed(rig)
    task = await answer_lost(
        rig, rig.store.update(KEY, b"mine", base.mod_revision), lambda kv: kv.value == b"mine"
    )
    rev = await rig.direct.put(KEY, b"theirs")
    await rig.direct.compact(rev)
    with pytest.raises(EtcdOutcomeUnknownError, match="compacted"):
        await finish(rig, task)


# ---------------------------------------------------------------- several keys in one transaction

OTHER = b"/resolve/other"


async def test_write_all_is_both_or_neither(rig: Rig) -> None:
    from apiserver_mock.storage import KeyWrite

    base = await seed(rig)
    await rig.direct.put(OTHER, b"o0")
    other, _ = await rig.direct.get(OTHER)
    assert other is not None
    stale = await rig.store.write_all(
        [KeyWrite(KEY, b"mine", base.mod_revision), KeyWrite(OTHER, None, other.mod_revision - 1)]
    )
    assert not stale.succeeded and [kv.value if kv else None for kv in stale.currents] == [b"v0", b"o0"]
    assert (await rig.direct.get(KEY))[0].value == b"v0"  # type: ignore[union-attr]
    res = await rig.store.write_all(
        [KeyWrite(KEY, b"mine", base.mod_revision), KeyWrite(OTHER, None, other.mod_revision)]
    )
    kv, _ = await rig.direct.get(KEY)
    assert res.succeeded and kv is not None and kv.value == b"mine" and kv.mod_revision == res.revision
    assert (await rig.direct.get(OTHER))[0] is None


async def test_write_all_that_landed_is_reported_applied_once(rig: Rig) -> None:
    from apiserver_mock.storage import KeyWrite

    base = await seed(rig)
    await rig.direct.put(OTHER, b"o0")
    other, _ = await rig.direct.get(OTHER)
    assert other is not None
    writes = [KeyWrite(KEY, b"mine", base.mod_revision), KeyWrite(OTHER, b"o1", other.mod_revision)]
    task = await answer_lost(rig, rig.store.write_all(writes), lambda kv: kv.value == b"mine")  # type: ignore[arg-type]
    res = await finish(rig, task)  # type: ignore[arg-type]
    kv, _ = await rig.direct.get(KEY)
    assert kv is not None and res.succeeded and res.revision == kv.mod_revision
    assert kv.version == base.version + 1 and (await rig.direct.get(OTHER))[0].value == b"o1"  # type: ignore[union-attr]
    assert (rig.store.resolved_landed, rig.store.resolved_not_landed) == (1, 0)


async def test_write_all_that_never_arrived_is_sent_again(rig: Rig) -> None:
    from apiserver_mock.storage import KeyWrite

    base = await seed(rig)
    writes = [KeyWrite(KEY, b"mine", base.mod_revision), KeyWrite(OTHER, b"new", 0)]
    task = await request_lost(rig, rig.store.write_all(writes))  # type: ignore[arg-type]
    res = await finish(rig, task)  # type: ignore[arg-type]
    assert res.succeeded and (await rig.direct.get(OTHER))[0].value == b"new"  # type: ignore[union-attr]
    assert (rig.store.resolved_landed, rig.store.resolved_not_landed) == (0, 1)


# ---------------------------------------------------------------- group-committed writes

async def test_grouped_writes_that_landed_are_each_reported_applied_once(rig: Rig) -> None:
    """A batch txn whose answer was lost (apiserver_mock/storage/groupcommit.py): every write of it
    is resolved on its own, and each finds its own write in etcd."""
    from apiserver_mock.storage.groupcommit import GroupCommitter

    committer = GroupCommitter(rig.client, max_inflight=1)
    store = Store(rig.client, group_commit=committer)
    base = await seed(rig)
    await rig.direct.put(OTHER, b"o0")
    other, _ = await rig.direct.get(OTHER)
    assert other is not None
    rig.proxy.mute_down = True
    writes = asyncio.gather(
        store.update(KEY, b"mine", base.mod_revision, grouped=True),
        store.update(OTHER, b"o1", other.mod_revision, grouped=True),
    )
    try:
        await until_value(rig.direct, OTHER, lambda kv: kv is not None and kv.value == b"o1")
        rig.proxy.cut()
        async with asyncio.timeout(DEADLINE):
            mine, theirs = await writes
    finally:
        await committer.aclose()
    kv, _ = await rig.direct.get(KEY)
    assert kv is not None and kv.version == base.version + 1  # applied exactly once
    assert mine.succeeded and theirs.succeeded and mine.revision == theirs.revision == kv.mod_revision
    assert committer.batches == 1 and (store.resolved_landed, store.resolved_not_landed) == (2, 0)
