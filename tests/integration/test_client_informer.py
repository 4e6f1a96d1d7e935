"""The typed clientset and the informer against a real API server (and real etcd, real mTLS).

What is checked, as client-go's own tests do for its reflector and shared informer:
* the clientset: CRUD on every kind, subresources, typed errors keeping code and message, request
  metrics, rate limiting of unary calls only, retries of reads (not writes) on UNAVAILABLE;
* the informer: list then watch, ordered handlers, resume after a dropped stream (channel swapped,
  API server restarted) with no event lost or repeated, relist on OUT_OF_RANGE with deletions
  delivered, selectors, `wait_for_revision`, and clean shutdown (no task left behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from certs.layout import PKI
from kse.client.channel import channel_credentials, channel_options, secure_channel
from kse.client.clientset import Clientset, RetryPolicy, StaticChannelSource, WatchEvent
from kse.client.errors import (
    AlreadyExistsError,
    ConflictError,
    FencedError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    UnavailableError,
)
from kse.client.informer import HistoryRecord, Informer, InformerFactory, InformerStoppedError
from kse.client.reflector import Backoff
from kse.config import ConnectionFile
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc
from tests.fixtures.apiserver import ApiServer, ApiServerFactory, start_apiserver
from tests.fixtures.polling import until

pytestmark = pytest.mark.integration

DEADLINE = 20.0
FAST = Backoff(initial=0.02, maximum=0.2)


# ---------------------------------------------------------------- helpers


def pod(name: str, ns: str = "default", labels: dict[str, str] | None = None) -> pb.Pod:
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace=ns, labels=labels or {}),
        spec=pb.PodSpec(containers=[pb.Container(name="c", image="nginx")]),
    )


def node(name: str) -> pb.Node:
    return pb.Node(
        metadata=pb.ObjectMeta(name=name),
        status=pb.NodeStatus(capacity={"cpu": "4", "memory": "8Gi"}, allocatable={"cpu": "4"}),
    )


def dead_address() -> str:
    """An address nothing listens on (bound then released: connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class SwitchableSource:
    """A channel source that can swap its channel (as certificate rotation does) or point at a dead
    address for a while (a partition), closing the old channel like the reloader will."""

    def __init__(self, conn: ConnectionFile) -> None:
        self.conn = conn
        self.channel = secure_channel(conn)
        self.swaps = 0
        self.calls = 0

    def current(self) -> grpc.aio.Channel:
        self.calls += 1
        return self.channel

    async def swap(self, conn: ConnectionFile | None = None, grace: float | None = None) -> None:
        old = self.channel
        self.channel = secure_channel(conn or self.conn)
        self.swaps += 1
        await old.close(grace=grace)

    async def partition(self) -> None:
        c = self.conn
        await self.swap(ConnectionFile(dead_address(), c.ca_file, c.cert_file, c.key_file))

    async def heal(self) -> None:
        await self.swap(self.conn)

    async def close(self) -> None:
        await self.channel.close(grace=None)


@contextlib.asynccontextmanager
async def switchable(server: ApiServer, identity: str = "admin") -> AsyncIterator[SwitchableSource]:
    src = SwitchableSource(server.connection(identity))
    try:
        yield src
    finally:
        await src.close()


class Recorder:
    """Handlers that record what they were given, and the informer's history."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (what, name, rv)
        self.deleted: list[pb.Pod] = []
        self.updated: list[tuple[pb.Pod, pb.Pod]] = []
        self.history: list[HistoryRecord] = []
        self.active = 0
        self.max_active = 0

    def _enter(self) -> None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)

    def on_add(self, obj: Any) -> None:
        self._enter()
        self.calls.append(("add", obj.metadata.name, obj.metadata.resource_version))
        self.active -= 1

    def on_update(self, old: Any, new: Any) -> None:
        self._enter()
        self.calls.append(("update", new.metadata.name, new.metadata.resource_version))
        self.updated.append((old, new))
        self.active -= 1

    def on_delete(self, obj: Any) -> None:
        self._enter()
        self.calls.append(("delete", obj.metadata.name, obj.metadata.resource_version))
        self.deleted.append(obj)
        self.active -= 1

    def register(self, informer: Informer[Any]) -> None:
        informer.add_event_handler(on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete)

    def watch_records(self) -> list[HistoryRecord]:
        return [h for h in self.history if h.source == "watch"]


def assert_watch_history_clean(history: list[HistoryRecord]) -> None:
    """No watch event twice, and revisions never go backwards (ordered, unique)."""
    seen: set[tuple[str, str, str]] = set()
    last = 0
    for h in history:
        if h.source != "watch":
            continue
        ident = (h.type, h.key, h.resource_version)
        assert ident not in seen, f"duplicated watch event {ident}"
        seen.add(ident)
        rv = int(h.resource_version)
        assert rv >= last, f"watch event {ident} after revision {last}"
        last = rv


async def state_of(cs: Clientset, ns: str = "default") -> dict[str, str]:
    """name -> resourceVersion of every pod on the server."""
    page = await cs.pods.list_all(ns, page_size=5)
    return {p.metadata.name: p.metadata.resource_version for p in page.items}


def store_state(informer: Informer[Any]) -> dict[str, str]:
    return {o.metadata.name: o.metadata.resource_version for o in informer.store.list()}


def our_tasks() -> list[asyncio.Task[Any]]:
    """Tasks started by kse.client (informers, reflectors), other than the current one."""
    me = asyncio.current_task()
    out = []
    for t in asyncio.all_tasks():
        if t is me or t.done():
            continue
        coro = t.get_coro()
        code = getattr(coro, "cr_code", None)
        filename = code.co_filename if code is not None else ""
        if t.get_name().startswith("informer") or "kse/client" in filename:
            out.append(t)
    return out


@pytest.fixture
async def admin(apiserver: ApiServer) -> Clientset:
    return Clientset(await apiserver.channel("admin"), qps=0, burst=0)


# ---------------------------------------------------------------- clientset


async def test_crud_on_every_kind_returns_typed_objects(admin: Clientset) -> None:
    created = await admin.pods.create(pod("web", labels={"app": "web"}))
    assert isinstance(created, pb.Pod)
    assert created.metadata.uid and created.metadata.resource_version
    got = await admin.pods.get("default", "web")
    assert got == created
    await admin.pods.create(pod("db", labels={"app": "db"}))
    page = await admin.pods.list("default", label_selector="app=web")
    assert [p.metadata.name for p in page.items] == ["web"]
    assert int(page.resource_version) >= int(created.metadata.resource_version)

    got.metadata.labels["tier"] = "front"
    updated = await admin.pods.update(got)
    assert updated.metadata.labels["tier"] == "front"
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)

    n = await admin.nodes.create(node("node-1"))
    assert isinstance(n, pb.Node)
    assert (await admin.nodes.get("node-1")).metadata.uid == n.metadata.uid
    assert [x.metadata.name for x in (await admin.nodes.list()).items] == ["node-1"]

    lease = pb.Lease(metadata=pb.ObjectMeta(name="kube-scheduler", namespace="kube-system"))
    lease.spec.holder_identity = "scheduler-1"
    lease.spec.lease_duration_seconds = 15
    assert (await admin.leases.create(lease)).spec.holder_identity == "scheduler-1"

    pc = pb.PriorityClass(metadata=pb.ObjectMeta(name="high"), value=1000)
    assert (await admin.priority_classes.create(pc)).value == 1000

    ev = pb.Event(
        metadata=pb.ObjectMeta(name="web.1", namespace="default"),
        reason="Scheduled",
        message="assigned",
        type="Normal",
    )
    ev.involved_object.kind = "Pod"
    ev.involved_object.name = "web"
    ev.involved_object.namespace = "default"
    assert (await admin.events.create(ev)).reason == "Scheduled"

    deleted = await admin.pods.delete("default", "db")
    assert deleted.metadata.name == "db"
    assert int(deleted.metadata.resource_version) > int(updated.metadata.resource_version)
    await admin.nodes.delete("node-1")
    assert admin.observed_revision >= int(deleted.metadata.resource_version)
    # Generic access by any kubectl name gives the same clients.
    assert admin.resource("po") is admin.pods
    assert admin.resource("priorityclasses") is admin.priority_classes


async def test_typed_errors_keep_code_and_message(apiserver: ApiServer, admin: Clientset) -> None:
    with pytest.raises(NotFoundError) as nf:
        await admin.pods.get("default", "missing")
    assert nf.value.code == grpc.StatusCode.NOT_FOUND
    assert "missing" in nf.value.message
    assert nf.value.kubectl_message().startswith("Error from server (NotFound): ")

    first = await admin.pods.create(pod("a"))
    with pytest.raises(AlreadyExistsError) as ae:
        await admin.pods.create(pod("a"))
    assert ae.value.code == grpc.StatusCode.ALREADY_EXISTS and '"a"' in ae.value.message

    await admin.pods.update(first)  # moves the resourceVersion on
    with pytest.raises(ConflictError) as ce:
        await admin.pods.update(first)  # stale
    assert ce.value.code == grpc.StatusCode.ABORTED

    with pytest.raises(ConflictError):
        await admin.pods.delete("default", "a", uid="not-the-uid")

    bad = pod("bad")
    del bad.spec.containers[:]
    with pytest.raises(InvalidError) as ie:
        await admin.pods.create(bad)
    assert ie.value.code == grpc.StatusCode.INVALID_ARGUMENT

    workload = Clientset(await apiserver.channel("workload"), qps=0, burst=0)
    with pytest.raises(ForbiddenError) as fe:
        await workload.nodes.create(node("n"))
    assert fe.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert fe.value.message

    assert admin.metrics.count("get", "pods", "NOT_FOUND") == 1
    assert admin.metrics.count("create", "pods", "ALREADY_EXISTS") == 1
    assert admin.metrics.count("update", "pods", "ABORTED") == 1
    assert admin.metrics.count("create", "pods", "INVALID_ARGUMENT") == 1
    assert admin.metrics.count("update", "pods", "OK") == 1
    assert workload.metrics.count("create", "nodes", "PERMISSION_DENIED") == 1


async def test_bind_evict_status_and_fencing(admin: Clientset) -> None:
    await admin.nodes.create(node("node-1"))
    p = await admin.pods.create(pod("p"))
    binding = pb.Binding(metadata=pb.ObjectMeta(name="p", namespace="default", uid=p.metadata.uid))
    binding.target.kind = "Node"
    binding.target.name = "node-1"
    bound = await admin.pods.bind(binding)
    assert bound.spec.node_name == "node-1"
    with pytest.raises(ConflictError):
        await admin.pods.bind(binding)  # already bound
    assert admin.metrics.count("create", "pods/binding", "OK") == 1
    assert admin.metrics.count("create", "pods/binding", "ABORTED") == 1

    bound.status.phase = "Running"
    running = await admin.pods.update_status(bound)
    assert running.status.phase == "Running"
    assert admin.metrics.count("update", "pods/status", "OK") == 1

    evicted = await admin.pods.evict("default", "p")  # bound and Running: a graceful delete
    assert evicted.metadata.name == "p" and evicted.metadata.deletion_timestamp
    await admin.pods.delete("default", "p", grace_period_seconds=0)
    with pytest.raises(NotFoundError):
        await admin.pods.get("default", "p")
    assert admin.metrics.count("create", "pods/eviction", "OK") == 1


async def test_fenced_write_raises_fenced_error(admin: Clientset) -> None:
    await admin.nodes.create(node("node-1"))
    lease = pb.Lease(metadata=pb.ObjectMeta(name="kube-scheduler", namespace="kube-system"))
    lease.spec.holder_identity = "someone-else"
    lease.spec.lease_transitions = 3
    await admin.leases.create(lease)
    q = await admin.pods.create(pod("q"))
    binding = pb.Binding(metadata=pb.ObjectMeta(name="q", namespace="default", uid=q.metadata.uid))
    binding.target.kind = "Node"
    binding.target.name = "node-1"
    stale = pb.FenceToken(
        lease_namespace="kube-system", lease_name="kube-scheduler", holder_identity="me", lease_transitions=3
    )
    try:
        await admin.pods.bind(binding, fence=stale)
    except FencedError as e:
        assert e.code == grpc.StatusCode.FAILED_PRECONDITION
        assert e.message
    else:
        pytest.fail("the API server accepted a bind with a stale fence token")
    good = pb.FenceToken(
        lease_namespace="kube-system",
        lease_name="kube-scheduler",
        holder_identity="someone-else",
        lease_transitions=3,
    )
    assert (await admin.pods.bind(binding, fence=good)).spec.node_name == "node-1"


class CountingLimiter:
    def __init__(self) -> None:
        self.acquired = 0

    async def acquire(self) -> float:
        self.acquired += 1
        return 0.0


async def test_every_unary_call_is_rate_limited_but_watch_is_not(apiserver: ApiServer) -> None:
    limiter = CountingLimiter()
    cs = Clientset(await apiserver.channel("admin"), rate_limiter=limiter)
    await cs.pods.create(pod("a"))
    await cs.pods.get("default", "a")
    listed = await cs.pods.list()
    with pytest.raises(NotFoundError):
        await cs.pods.get("default", "b")
    assert limiter.acquired == 4
    rv = listed.resource_version
    async with cs.pods.watch("default", resource_version=rv, allow_watch_bookmarks=False) as w:
        await cs.pods.create(pod("b"))  # one more limited call
        async with asyncio.timeout(DEADLINE):
            event = await anext(aiter(w))
    assert event.type == "ADDED" and event.object is not None and event.object.metadata.name == "b"
    assert limiter.acquired == 5


async def test_real_token_bucket_paces_calls(apiserver: ApiServer) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=20, burst=2)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.gather(*(cs.pods.list() for _ in range(6)))
    elapsed = loop.time() - start
    stats = cs.rate_limiter.stats  # type: ignore[attr-defined]
    assert stats.calls == 6
    # Two from the burst, then one every 50 ms: the sixth is granted 200 ms in, however fast the
    # server answers; the waits were recorded.
    assert elapsed >= 0.19
    assert stats.waited == 4
    assert stats.max_seconds == pytest.approx(0.2, abs=0.02)


async def test_reads_retry_on_unavailable_writes_do_not(apiserver: ApiServer) -> None:
    good = await apiserver.channel("admin")
    dead = secure_channel(ConnectionFile(dead_address(), *_files(apiserver)))

    class FlakySource:
        """Dead for the first `n` calls, then the real server."""

        def __init__(self, n: int) -> None:
            self.n = n

        def current(self) -> grpc.aio.Channel:
            self.n -= 1
            return dead if self.n >= 0 else good

    cs = Clientset(FlakySource(2), qps=0, burst=0, retry=RetryPolicy(deadline=10.0, initial_backoff=0.01))
    assert (await cs.pods.list()).items == []
    assert cs.metrics.count("list", "pods", "UNAVAILABLE") == 2
    assert cs.metrics.count("list", "pods", "OK") == 1

    cs = Clientset(FlakySource(1), qps=0, burst=0, retry=RetryPolicy(deadline=10.0, initial_backoff=0.01))
    with pytest.raises(UnavailableError):
        await cs.pods.create(pod("x"))
    assert cs.metrics.count("create", "pods") == 1  # one attempt only
    await cs.pods.create(pod("x"))  # the next call reaches the server

    # A read gives up at its deadline.
    always_dead = Clientset(
        StaticChannelSource(dead), qps=0, burst=0, retry=RetryPolicy(deadline=0.3, initial_backoff=0.01)
    )
    with pytest.raises(UnavailableError):
        await always_dead.pods.get("default", "x")
    assert always_dead.metrics.count("get", "pods", "UNAVAILABLE") >= 2
    await dead.close()


def _files(server: ApiServer) -> tuple[Path, Path, Path]:
    c = server.connection("admin")
    return c.ca_file, c.cert_file, c.key_file


async def test_watch_on_a_closed_channel_ends_as_unavailable_not_cancelled(apiserver: ApiServer) -> None:
    async with switchable(apiserver) as src:
        cs = Clientset(src, qps=0, burst=0)
        stream = cs.pods.watch("default")
        async with stream:
            reader = asyncio.create_task(stream.next_batch())
            await until(lambda: stream._call is not None, "watch started")
            await src.swap()  # closes the channel under the stream
            with pytest.raises(UnavailableError) as ue:
                await reader
        assert ue.value.code == grpc.StatusCode.CANCELLED
        # The next call goes over the new channel.
        assert (await cs.pods.list()).items == []


# ---------------------------------------------------------------- informer


async def test_informer_syncs_then_delivers_in_order(admin: Clientset) -> None:
    for name in ("a", "b", "c"):
        await admin.pods.create(pod(name))
    rec = Recorder()
    informer = Informer(admin.pods, history=rec.history.append, backoff=FAST, page_size=2)
    rec.register(informer)
    async with informer.running():
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_sync()
        assert informer.has_synced()
        assert admin.metrics.count("list", "pods", "OK") == 2  # the first list, in pages of two
        assert sorted(informer.store.keys()) == ["default/a", "default/b", "default/c"]
        assert informer.store.get_by("default", "a") is not None
        rvs = {o.metadata.name: o.metadata.resource_version for o in informer.store}
        assert sorted(rec.calls) == [("add", n, rvs[n]) for n in "abc"]
        rec.calls.clear()

        d = await admin.pods.create(pod("d"))
        a = await admin.pods.get("default", "a")
        a.metadata.labels["x"] = "1"
        a2 = await admin.pods.update(a)
        gone = await admin.pods.delete("default", "b")
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_revision(gone.metadata.resource_version)
        assert rec.calls == [
            ("add", "d", d.metadata.resource_version),
            ("update", "a", a2.metadata.resource_version),
            ("delete", "b", gone.metadata.resource_version),
        ]
        old, new = rec.updated[-1]
        assert old.metadata.labels.get("x") is None and new.metadata.labels["x"] == "1"
        assert sorted(informer.store.keys()) == ["default/a", "default/c", "default/d"]
        assert int(informer.last_synced_resource_version) >= int(gone.metadata.resource_version)
        assert rec.max_active == 1  # handlers never overlap
    assert [h.type for h in rec.watch_records()] == ["ADDED", "MODIFIED", "DELETED"]
    assert rec.history[0].type == "LIST"
    assert our_tasks() == []


async def test_late_handler_gets_current_state_and_a_failing_handler_is_contained(admin: Clientset) -> None:
    await admin.pods.create(pod("a"))
    informer = Informer(admin.pods, backoff=FAST)

    def boom(_: Any) -> None:
        raise RuntimeError("handler bug")

    informer.add_event_handler(on_add=boom)
    async with informer.running():
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_sync()
        late = Recorder()
        reg = informer.add_event_handler(on_add=late.on_add)
        assert [c[1] for c in late.calls] == ["a"]
        assert reg.has_synced()
        b = await admin.pods.create(pod("b"))
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_revision(b.metadata.resource_version)
        assert [c[1] for c in late.calls] == ["a", "b"]
        assert informer.handler_errors == 2
        reg.remove()
        c = await admin.pods.create(pod("c"))
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_revision(c.metadata.resource_version)
        assert [c[1] for c in late.calls] == ["a", "b"]


async def test_informer_resumes_across_channel_swaps_without_loss_or_duplicates(
    apiserver: ApiServer, admin: Clientset
) -> None:
    rec = Recorder()
    async with switchable(apiserver) as src:
        cs = Clientset(src, qps=0, burst=0)
        informer = Informer(cs.pods, history=rec.history.append, backoff=FAST)
        rec.register(informer)
        async with informer.running():
            async with asyncio.timeout(DEADLINE):
                await informer.wait_for_sync()
            last = ""
            names = itertools.count()
            for round_ in range(4):
                for _ in range(5):
                    p = await admin.pods.create(pod(f"p{next(names)}"))
                    last = p.metadata.resource_version
                if round_ % 2:
                    await src.swap()  # certificate rotation: new channel, old one closed under the stream
                else:
                    await src.swap(grace=0.05)
            victim = await admin.pods.delete("default", "p3")
            last = victim.metadata.resource_version
            async with asyncio.timeout(DEADLINE):
                await informer.wait_for_revision(last)
            assert store_state(informer) == await state_of(admin)
        assert informer.reflector.lists == 1  # every drop was resumed from the last revision
        assert informer.reflector.resumes >= 4
    watch = rec.watch_records()
    assert len(watch) == 21
    assert [h.key for h in watch if h.type == "ADDED"] == [f"default/p{i}" for i in range(20)]
    assert_watch_history_clean(rec.history)
    assert our_tasks() == []


async def test_slow_handler_gets_the_stream_closed_and_the_informer_resumes(
    apiserver_factory: ApiServerFactory,
) -> None:
    """A watcher that falls behind is closed by the server (RESOURCE_EXHAUSTED "too slow"); the
    informer resumes from the last revision it delivered and loses nothing."""
    server = await apiserver_factory("--watch-queue-length", "1")
    conn = server.connection("admin")
    cs = Clientset(await server.channel("admin"), qps=0, burst=0)
    rec = Recorder()
    informer = Informer(cs.pods, history=rec.history.append, backoff=FAST)
    big = "x" * 1_000_000  # large events fill the HTTP/2 window at once, so the server's queue backs up
    stalled = threading.Event()

    def write_while_stalled() -> None:
        # A plain (sync) gRPC client on its own thread: it keeps writing while the informer's
        # event loop is stuck in a handler.
        with grpc.secure_channel(conn.server, channel_credentials(conn), options=channel_options(conn)) as ch:
            stub = kse_pb2_grpc.ResourcesStub(ch)
            stalled.wait(DEADLINE)
            for i in range(16):
                p = pod(f"big-{i}")
                p.spec.containers[0].args.append(big)
                stub.Create(pb.WriteRequest(object=pb.Object(pod=p)), timeout=DEADLINE)

    def slow_on_add(obj: Any) -> None:
        if obj.metadata.name == "trigger":
            stalled.set()
            writer.join(DEADLINE)  # block the loop until every write has landed

    informer.add_event_handler(on_add=slow_on_add)
    writer = threading.Thread(target=write_while_stalled)
    writer.start()
    try:
        async with informer.running():
            async with asyncio.timeout(DEADLINE):
                await informer.wait_for_sync()
            await cs.pods.create(pod("trigger"))
            await until(lambda: len(informer.store) == 17, "every pod delivered")
            assert store_state(informer) == await state_of(cs)
    finally:
        stalled.set()
        writer.join()
    assert cs.metrics.count("watch", "pods", "RESOURCE_EXHAUSTED") >= 1
    assert informer.reflector.lists == 1
    added = [h.key for h in rec.watch_records() if h.type == "ADDED"]
    assert added == ["default/trigger"] + [f"default/big-{i}" for i in range(16)]
    assert_watch_history_clean(rec.history)


async def test_informer_resumes_after_apiserver_restart(apiserver_factory: ApiServerFactory) -> None:
    first = await apiserver_factory()
    rec = Recorder()
    src = SwitchableSource(first.connection("admin"))
    try:
        cs = Clientset(src, qps=0, burst=0)
        informer = Informer(cs.pods, history=rec.history.append, backoff=FAST)
        rec.register(informer)
        async with informer.running():
            writer = Clientset(await first.channel("admin"), qps=0, burst=0)
            for i in range(5):
                await writer.pods.create(pod(f"before-{i}"))
            async with asyncio.timeout(DEADLINE):
                await informer.wait_for_sync()
            await first.stop()
            # Same etcd prefix, same address: the informer's channel reconnects by itself.
            second = await apiserver_factory("--listen", first.address, prefix=first.prefix)
            writer = Clientset(await second.channel("admin"), qps=0, burst=0)
            last = ""
            for i in range(5):
                last = (await writer.pods.create(pod(f"after-{i}"))).metadata.resource_version
            gone = await writer.pods.delete("default", "before-0")
            async with asyncio.timeout(DEADLINE):
                await informer.wait_for_revision(gone.metadata.resource_version)
            assert store_state(informer) == await state_of(writer)
            assert int(last) < int(gone.metadata.resource_version)
    finally:
        await src.close()
    assert informer.reflector.resumes >= 1
    assert_watch_history_clean(rec.history)
    # Every change reached the handlers exactly once (over the watch, or through a relist diff).
    adds = [c[1] for c in rec.calls if c[0] == "add"]
    assert sorted(adds) == sorted([f"before-{i}" for i in range(5)] + [f"after-{i}" for i in range(5)])
    assert [c[1] for c in rec.calls if c[0] == "delete"] == ["before-0"]


async def test_informer_relists_when_too_old_and_delivers_deletions(
    apiserver_factory: ApiServerFactory,
) -> None:
    server = await apiserver_factory("--watch-cache-capacity", "3")
    admin = Clientset(await server.channel("admin"), qps=0, burst=0)
    for name in ("a", "b", "c"):
        await admin.pods.create(pod(name))
    rec = Recorder()
    async with switchable(server) as src:
        cs = Clientset(src, qps=0, burst=0)
        informer = Informer(cs.pods, history=rec.history.append, backoff=FAST)
        rec.register(informer)
        async with informer.running():
            async with asyncio.timeout(DEADLINE):
                await informer.wait_for_sync()
            a_before = informer.store.get_by("default", "a")
            assert a_before is not None
            await src.partition()  # the informer cannot reach the server for a while
            await admin.pods.delete("default", "a")
            b = await admin.pods.get("default", "b")
            b.metadata.labels["v"] = "2"
            b2 = await admin.pods.update(b)
            for name in ("d", "e", "f", "g"):  # more changes than the server's history keeps
                await admin.pods.create(pod(name))
            rec.calls.clear()
            await src.heal()
            await until(lambda: informer.reflector.lists >= 2, "a relist")
            want = await state_of(admin)
            await until(lambda: store_state(informer) == want, "store equals the server")
    assert cs.metrics.count("watch", "pods", "OUT_OF_RANGE") >= 1
    deleted = [d for d in rec.deleted if d.metadata.name == "a"]
    assert len(deleted) == 1
    assert deleted[0].metadata.uid == a_before.metadata.uid  # the last known state
    assert ("update", "b", b2.metadata.resource_version) in rec.calls
    assert sorted(c[1] for c in rec.calls if c[0] == "add") == ["d", "e", "f", "g"]
    relisted = [h for h in rec.history if h.source == "list"]
    assert relisted[0].type == "LIST" and any(h.type == "DELETED" and h.key == "default/a" for h in relisted)
    assert_watch_history_clean(rec.history)


async def test_informer_relists_after_etcd_compaction(etcd_factory: Any, pki: PKI, tmp_path: Path) -> None:
    """Compaction behind the watch cache (a private etcd: the shared one is never compacted)."""
    private = await etcd_factory()
    server = await start_apiserver(private, pki, tmp_path / "apiserver", "--watch-cache-capacity", "2")
    try:
        admin = Clientset(await server.channel("admin"), qps=0, burst=0)
        rec = Recorder()
        async with switchable(server) as src:
            cs = Clientset(src, qps=0, burst=0)
            informer = Informer(cs.pods, history=rec.history.append, backoff=FAST)
            rec.register(informer)
            async with informer.running():
                keep = await admin.pods.create(pod("keep"))
                async with asyncio.timeout(DEADLINE):
                    await informer.wait_for_revision(keep.metadata.resource_version)
                assert "default/keep" in informer.store
                await src.partition()
                for i in range(4):
                    await admin.pods.create(pod(f"n{i}"))
                gone = await admin.pods.delete("default", "keep")
                etcd = await server.etcd()
                try:
                    await etcd.compact(int(gone.metadata.resource_version))
                finally:
                    await etcd.close()
                await src.heal()
                want = await state_of(admin)
                await until(lambda: store_state(informer) == want, "store equals the server")
        assert informer.reflector.lists >= 2
        assert cs.metrics.count("watch", "pods", "OUT_OF_RANGE") >= 1
        assert [d.metadata.name for d in rec.deleted] == ["keep"]
        assert_watch_history_clean(rec.history)
    finally:
        await server.stop()


async def test_wait_for_revision_of_another_resource_completes_via_bookmarks(
    apiserver_factory: ApiServerFactory,
) -> None:
    server = await apiserver_factory("--bookmark-interval", "0.1")
    admin = Clientset(await server.channel("admin"), qps=0, burst=0)
    informer = Informer(admin.pods, backoff=FAST)
    async with informer.running():
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_sync()
        lease = pb.Lease(metadata=pb.ObjectMeta(name="l", namespace="kube-system"))
        written = await admin.leases.create(lease)  # no pod changes after this
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_revision(written.metadata.resource_version)
        assert int(informer.last_synced_resource_version) >= int(written.metadata.resource_version)


async def test_selectors_and_namespace(admin: Clientset) -> None:
    rec = Recorder()
    informer = Informer(admin.pods, namespace="team", label_selector="app=web", backoff=FAST)
    rec.register(informer)
    await admin.pods.create(pod("other-ns", ns="default", labels={"app": "web"}))
    async with informer.running():
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_sync()
        p = await admin.pods.create(pod("p", ns="team", labels={"app": "db"}))
        p.metadata.labels["app"] = "web"
        p = await admin.pods.update(p)  # starts matching: an add
        p.metadata.labels["app"] = "db"
        p = await admin.pods.update(p)  # stops matching: a delete
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_revision(p.metadata.resource_version)
        assert [(c[0], c[1]) for c in rec.calls] == [("add", "p"), ("delete", "p")]
        assert len(informer.store) == 0


async def test_factory_shares_informers_and_stops_cleanly(admin: Clientset) -> None:
    history: list[HistoryRecord] = []
    factory = InformerFactory(admin, history=history.append, backoff=FAST)
    pods = factory.informer("pods")
    assert factory.informer("po") is pods
    assert factory.informer_for(admin.pods) is pods
    nodes = factory.informer("nodes")
    await admin.nodes.create(node("n1"))
    async with factory.running():
        async with asyncio.timeout(DEADLINE):
            await factory.wait_for_sync()
        assert factory.has_synced()
        assert nodes.store.keys() == ["n1"]
        leases = factory.informer("leases")  # started at once by the running factory
        lease = await admin.leases.create(pb.Lease(metadata=pb.ObjectMeta(name="l", namespace="x")))
        async with asyncio.timeout(DEADLINE):
            await leases.wait_for_revision(lease.metadata.resource_version)
        assert leases.store.keys() == ["x/l"]
    assert our_tasks() == []
    assert {h.resource for h in history} >= {"pods", "nodes", "leases"}


async def test_cancelled_informer_fails_waiters_and_leaves_no_tasks(admin: Clientset) -> None:
    informer = Informer(admin.pods, backoff=FAST)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run())
        async with asyncio.timeout(DEADLINE):
            await informer.wait_for_sync()
        waiter = asyncio.create_task(informer.wait_for_revision(10**12))
        await asyncio.sleep(0)  # let the waiter register
        task.cancel()
    with pytest.raises(InformerStoppedError, match="stopped"):
        await waiter
    assert our_tasks() == []


async def test_running_block_sees_informer_crash(admin: Clientset) -> None:
    informer: Informer[Any] = Informer(admin.pods, backoff=FAST)

    async def crash() -> None:
        raise RuntimeError("reflector bug")

    informer.reflector.run = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="reflector bug"):
        async with informer.running():
            await asyncio.get_running_loop().create_future()  # would wait forever
    assert our_tasks() == []


# ---------------------------------------------------------------- relist diff, without a server


class _NoClient:
    resource = "pods"
    kind = None

    def watch(self, *a: Any, **k: Any) -> Any:  # pragma: no cover - never run
        raise AssertionError


def _p(name: str, rv: str, uid: str = "") -> pb.Pod:
    meta = pb.ObjectMeta(name=name, namespace="default", resource_version=rv, uid=uid or name)
    return pb.Pod(metadata=meta)


def test_relist_diff_adds_updates_deletes_and_recreations() -> None:
    rec = Recorder()
    informer: Informer[pb.Pod] = Informer(_NoClient(), history=rec.history.append)  # type: ignore[arg-type]
    rec.register(informer)
    informer.replace([_p("a", "1"), _p("b", "2"), _p("c", "3")], "3")
    assert informer.has_synced()
    rec.calls.clear()
    informer.apply([WatchEvent("MODIFIED", _p("a", "4"), "4")])
    informer.advance("4")
    # Relist at 9: a unchanged, b changed, c gone, d new, e recreated under a new uid.
    informer.replace([_p("a", "4"), _p("b", "7"), _p("d", "8"), _p("e", "9", uid="e2")], "9")
    assert rec.calls == [
        ("update", "a", "4"),
        ("update", "b", "7"),
        ("add", "d", "8"),
        ("add", "e", "9"),
        ("delete", "c", "3"),
    ]
    informer.replace([_p("a", "4"), _p("b", "7"), _p("d", "8"), _p("e", "10", uid="e3")], "10")
    assert rec.calls[-2:] == [("delete", "e", "9"), ("add", "e", "10")]
    assert rec.deleted[0].metadata.name == "c"  # last known state
    assert [h.type for h in rec.history if h.source == "list"].count("LIST") == 3


async def test_wait_for_revision_returns_at_once_when_reached() -> None:
    informer: Informer[pb.Pod] = Informer(_NoClient())  # type: ignore[arg-type]
    informer.replace([], "5")
    informer.advance("5")
    async with asyncio.timeout(1):
        await informer.wait_for_revision(5)
        await informer.wait_for_revision("3")
    waiter = asyncio.create_task(informer.wait_for_revision(7))
    await asyncio.sleep(0)
    informer.advance("6")
    await asyncio.sleep(0)
    assert not waiter.done()
    informer.advance("7")
    async with asyncio.timeout(1):
        await waiter
