"""Certificate rotation against a real API server process (real etcd, real mTLS), without restarts.

* a client leaf rotated mid-watch and mid-bind-burst: the reloading channel source swaps channels,
  no call fails, and the informer's event sequence has no gap, duplicate or reordering (the watch
  ended on the old channel and resumed from its last revision on the new one, no relist);
* the server's serving pair rotated: new handshakes get it at once, a long-lived connection gets it
  once max connection age has closed it;
* a whole CA rotation (add -> switch -> remove) under load, with live clients throughout: zero failed
  calls; afterwards an old-CA leaf is refused;
* an expired client cert cannot handshake (UNAVAILABLE) until the files are rotated.

Rotation rewrites the PKI, so this module overrides the `pki` fixture with a PKI of each test's own;
the API server fixtures then serve from it (the session PKI is never touched). No fixed sleeps: every
wait is a condition polled against a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import grpc
import grpc.aio
import pytest
from cryptography import x509

from certs.layout import PKI, CertPaths
from certs.pki import init_pki, issue_leaf, load_pair
from certs.rotation import rotate, rotate_ca_add, rotate_ca_remove, rotate_ca_switch
from kse.client.channel import channel_source_from_connection, secure_channel
from kse.client.clientset import NO_RETRY, Clientset
from kse.client.credentials import ReloadingChannelSource
from kse.client.errors import UnavailableError
from kse.client.informer import HistoryRecord, Informer
from kse.client.reflector import Backoff
from kse.config import ConnectionFile
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, ApiServerFactory, assert_delivered_exactly
from tests.fixtures.pki import served_certificate
from tests.fixtures.polling import until

pytestmark = pytest.mark.integration

NS = "default"
DEADLINE = 20.0
FAST = Backoff(initial=0.02, maximum=0.2)
POLL = 0.1  # the sources' poll interval here (1 s by default)


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    """Each test's own PKI (overrides the session one for this module: rotation rewrites files)."""
    return init_pki(tmp_path / "pki", scheduler_replicas=1)


# ---------------------------------------------------------------------------------------------- helpers


def reloading(server: ApiServer, identity: str, **kwargs: object) -> ReloadingChannelSource:
    kwargs.setdefault("poll_interval", POLL)
    return channel_source_from_connection(server.connection(identity), **kwargs)


def pod(name: str) -> pb.Pod:
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace=NS),
        spec=pb.PodSpec(containers=[pb.Container(name="c", image="nginx")]),
    )


def binding(name: str, node: str = "node-a") -> pb.Binding:
    b = pb.Binding(metadata=pb.ObjectMeta(namespace=NS, name=name))
    b.target.name = node
    return b


def failed_calls(cs: Clientset) -> dict[tuple[str, str, str], int]:
    """Unary requests that did not end OK (watch streams end by design when a channel retires)."""
    return {k: n for k, n in cs.metrics.requests.items() if k[0] != "watch" and k[2] != "OK"}


def watch_records(history: list[HistoryRecord]) -> list[tuple[str, str, int]]:
    return [(r.type, r.key, int(r.resource_version)) for r in history if r.source == "watch"]


async def handshake(conn: ConnectionFile) -> grpc.StatusCode:
    """One List on a brand-new channel (so a new TLS handshake); its status code."""
    async with secure_channel(conn) as channel:
        cs = Clientset(channel, qps=0, retry=NO_RETRY, timeout=5)
        try:
            await cs.pods.list(NS, limit=1)
        except UnavailableError as e:
            return e.code
    return grpc.StatusCode.OK


async def served_cert(server: ApiServer, client: CertPaths | None = None) -> x509.Certificate:
    """The serving cert a new handshake gets (python's ssl: grpc does not show it to clients)."""
    paths = client or server.pki.admin
    return await asyncio.to_thread(served_certificate, server.address, paths, paths.ca_bundle)


class Load:
    """Background traffic through live clients: admin creates pods, the scheduler binds them.

    Every call must succeed; `created`/`bound` keep (key, revision) for the event-sequence check.
    """

    def __init__(self, admin: Clientset, scheduler: Clientset, prefix: str) -> None:
        self.admin, self.scheduler, self.prefix = admin, scheduler, prefix
        self.created: list[tuple[str, int]] = []
        self.bound: list[tuple[str, int]] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"{self.prefix}-{i}"
            made = await self.admin.pods.create(pod(name))
            self.created.append((f"{NS}/{name}", int(made.metadata.resource_version)))
            got = await self.scheduler.pods.bind(binding(name))
            self.bound.append((f"{NS}/{name}", int(got.metadata.resource_version)))
            await self.scheduler.pods.get(NS, name)
            i += 1

    async def __aenter__(self) -> Load:
        self._task = asyncio.create_task(self._run(), name="load")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task  # re-raises the first failed call, if any

    async def progress(self, more: int) -> None:
        """Wait until `more` further pods went through (and the load is still healthy)."""
        target = len(self.bound) + more
        assert self._task is not None
        task = self._task
        await until(lambda: len(self.bound) >= target or task.done(), f"{more} more binds")
        if task.done():
            task.result()

    def expected(self) -> list[tuple[str, str, int]]:
        return [("ADDED", k, rv) for k, rv in self.created] + [("MODIFIED", k, rv) for k, rv in self.bound]


# ---------------------------------------------------------------------------------------------- client leaf


async def test_client_leaf_rotated_mid_watch_loses_no_event(
    apiserver_factory: ApiServerFactory, pki: PKI
) -> None:
    server = await apiserver_factory()
    async with reloading(server, "admin") as admin_src, reloading(server, "scheduler-1") as source:
        admin = Clientset(admin_src, qps=200, burst=10)
        cs = Clientset(source, qps=0)
        history: list[HistoryRecord] = []
        informer = Informer(cs.pods, namespace=NS, history=history.append, backoff=FAST)
        async with informer.running():
            await asyncio.wait_for(informer.wait_for_sync(), DEADLINE)
            created: list[tuple[str, int]] = []

            async def writer() -> None:
                for i in range(300):
                    made = await admin.pods.create(pod(f"w-{i}"))
                    created.append((f"{NS}/w-{i}", int(made.metadata.resource_version)))

            write = asyncio.create_task(writer())
            serials = {source.certificate.serial_number}
            for round_ in (1, 2):
                await until(lambda: len(created) >= 100 * round_, "writes under way")  # noqa: B023
                rotate(pki.dir, "scheduler-1")
                await until(lambda: source.stats.retired >= round_, "old channel retired")  # noqa: B023
                serials.add(source.certificate.serial_number)
            await write
            await asyncio.wait_for(informer.wait_for_revision(created[-1][1]), DEADLINE)

        assert len(serials) == 3 and source.stats.swaps == 2
        assert_delivered_exactly(watch_records(history), [("ADDED", k, rv) for k, rv in created])
        # The watch really moved: it ended on each retired channel and resumed, never relisted.
        assert informer.reflector.resumes >= 2 and informer.reflector.lists == 1
        assert failed_calls(cs) == {} and failed_calls(admin) == {}


async def test_client_leaf_rotated_mid_bind_burst(apiserver_factory: ApiServerFactory, pki: PKI) -> None:
    server = await apiserver_factory()
    async with reloading(server, "admin") as admin_src, reloading(server, "scheduler-1") as source:
        admin = Clientset(admin_src, qps=0)
        names = [f"b-{i}" for i in range(200)]
        created = await asyncio.gather(*(admin.pods.create(pod(n)) for n in names))
        list_rv = max(int(p.metadata.resource_version) for p in created)
        # Paced so the 200 binds straddle the rotation: some start before it, some after.
        cs = Clientset(source, qps=300, burst=60)
        history: list[HistoryRecord] = []
        informer = Informer(cs.pods, namespace=NS, history=history.append, backoff=FAST)
        async with informer.running():
            await asyncio.wait_for(informer.wait_for_revision(list_rv), DEADLINE)
            done: list[pb.Pod] = []

            async def bind(name: str) -> None:
                done.append(await cs.pods.bind(binding(name)))

            binds = [asyncio.create_task(bind(n)) for n in names]
            await until(lambda: len(done) >= 20 and (source.in_flight() or 0) >= 1, "binds in flight")
            rotate(pki.dir, "scheduler-1")
            assert source.reload()  # on demand, with binds in flight on the old channel
            at_swap = len(done)
            await asyncio.gather(*binds)  # any failed bind fails the test here
            await until(lambda: source.stats.retired == 1, "the old channel retired")
            await asyncio.wait_for(
                informer.wait_for_revision(max(int(p.metadata.resource_version) for p in done)), DEADLINE
            )

        assert 20 <= at_swap < 200
        assert source.stats.drained_calls >= 1 and source.stats.cut_calls == 0
        assert cs.metrics.count(verb="create", resource="pods/binding", code="OK") == 200
        assert failed_calls(cs) == {} and failed_calls(admin) == {}
        assert all(p.spec.node_name == "node-a" for p in done)
        bound = [("MODIFIED", f"{NS}/{p.metadata.name}", int(p.metadata.resource_version)) for p in done]
        assert_delivered_exactly(watch_records(history), bound)
        assert informer.reflector.resumes >= 1 and informer.reflector.lists == 1


# ---------------------------------------------------------------------------------------------- server pair


async def test_serving_pair_rotated_without_restart(apiserver_factory: ApiServerFactory, pki: PKI) -> None:
    server = await apiserver_factory("--max-connection-age", "2")
    old = await served_cert(server)
    pid = server.process.pid
    # A long-lived client with fixed credentials: only max connection age makes it re-handshake.
    channel = server.raw_channel("admin")
    cs = Clientset(channel, qps=0)
    history: list[HistoryRecord] = []
    informer = Informer(cs.pods, namespace=NS, history=history.append, backoff=FAST)
    async with informer.running():
        await asyncio.wait_for(informer.wait_for_sync(), DEADLINE)
        states: list[grpc.ChannelConnectivity] = []

        async def follow_states() -> None:
            state = channel.get_state()
            while True:
                await channel.wait_for_state_change(state)
                state = channel.get_state()
                states.append(state)

        follower = asyncio.create_task(follow_states())
        try:
            [leaf] = rotate(pki.dir, "apiserver")
            assert "reloaded (version 2)" not in server.log()  # nothing has handshaken since
            # The connection ends at its max age (2 s + 2 s grace) and the channel makes a new one:
            # its handshake is the first since the rotation, so it is what reloads the files.
            await until(lambda: grpc.ChannelConnectivity.CONNECTING in states, "a re-handshake")
            made = await cs.pods.create(pod("after"))
            await asyncio.wait_for(informer.wait_for_revision(made.metadata.resource_version), DEADLINE)
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
    await until(lambda: "serving TLS credentials reloaded (version 2)" in server.log(), "reload logged")
    new = await served_cert(server)
    assert new.serial_number == leaf.serial != old.serial_number
    assert server.running and server.process.pid == pid
    assert informer.reflector.resumes >= 1 and failed_calls(cs) == {}
    assert [r[1] for r in watch_records(history)] == [f"{NS}/after"]


# ---------------------------------------------------------------------------------------------- CA rotation


async def test_full_ca_rotation_under_load(
    apiserver_factory: ApiServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = await apiserver_factory("--max-connection-age", "3")
    # Kept aside: scheduler-1's pair as the old CA issued it.
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    for f in (pki.scheduler(1).cert, pki.scheduler(1).key):
        shutil.copy2(f, old_dir / f.name)
    old_ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())

    async with reloading(server, "admin") as admin_src, reloading(server, "scheduler-1") as source:
        admin = Clientset(admin_src, qps=0)
        cs = Clientset(source, qps=0)
        history: list[HistoryRecord] = []
        informer = Informer(cs.pods, namespace=NS, history=history.append, backoff=FAST)
        async with informer.running():
            await asyncio.wait_for(informer.wait_for_sync(), DEADLINE)
            async with Load(admin, cs, "ca") as load:
                await load.progress(10)

                def reloaded(version: int) -> Callable[[], bool]:
                    return lambda: min(admin_src.credentials.version, source.credentials.version) >= version

                # add: both bundles now trust old + new. The server reloads its client CAs at the next
                # handshake: a leaf from the new CA (not used by anyone yet) is accepted.
                rotate_ca_add(pki.dir)
                await until(reloaded(2), "clients reloaded the bundle")
                new_ca = load_pair(pki.dir / "ca-next.crt", pki.dir / "ca-next.key")
                probe = CertPaths("probe", tmp_path / "probe.crt", tmp_path / "probe.key", pki.ca_bundle)
                pair = issue_leaf(new_ca, "system:kube-scheduler")
                probe.cert.write_bytes(pair.cert_pem)
                probe.key.write_bytes(pair.key_pem)
                assert await handshake(server.connection(probe)) == grpc.StatusCode.OK
                await load.progress(10)

                # switch: every leaf reissued from the new CA; the clients move to their new pairs.
                rotate_ca_switch(pki.dir)
                await until(reloaded(3), "clients reloaded their new-CA pairs")
                assert (await served_cert(server)).issuer == new_ca.certificate.subject
                assert source.certificate.issuer == new_ca.certificate.subject
                await load.progress(10)

                # remove: only the new CA is trusted.
                rotate_ca_remove(pki.dir)
                await until(reloaded(4), "clients reloaded the new-only bundle")
                await load.progress(10)
            await asyncio.wait_for(informer.wait_for_revision(load.bound[-1][1]), DEADLINE)

        assert failed_calls(cs) == {} and failed_calls(admin) == {}
        assert_delivered_exactly(watch_records(history), load.expected())
        assert informer.reflector.lists == 1 and source.stats.swaps == 3 and admin_src.stats.swaps == 3

    # An old-CA leaf is refused now (presented with a bundle that verifies the server, so the refusal
    # is the server's), while the same identity's new-CA leaf is accepted.
    old_leaf = CertPaths("old", old_dir / "scheduler-1.crt", old_dir / "scheduler-1.key", pki.ca_bundle)
    assert x509.load_pem_x509_certificate(old_leaf.cert.read_bytes()).issuer == old_ca.subject
    assert await handshake(server.connection(old_leaf)) == grpc.StatusCode.UNAVAILABLE
    assert await handshake(server.connection("scheduler-1")) == grpc.StatusCode.OK


# ---------------------------------------------------------------------------------------------- expiry


async def test_expired_client_cert_is_refused_until_rotated(
    apiserver_factory: ApiServerFactory, pki: PKI
) -> None:
    server = await apiserver_factory()
    rotate(pki.dir, "scheduler-1", ttl=timedelta(seconds=3))
    conn = server.connection("scheduler-1")
    async with channel_source_from_connection(conn, poll_interval=None) as early:
        early_cs = Clientset(early, qps=0, retry=NO_RETRY)
        await early_cs.pods.list(NS)  # connected while the cert is valid
        assert await handshake(conn) == grpc.StatusCode.OK

        # Wait for expiry the only honest way: until a new handshake fails.
        end = time.monotonic() + DEADLINE
        while (code := await handshake(conn)) == grpc.StatusCode.OK:
            assert time.monotonic() < end, "the 3-second cert never stopped working"
            await asyncio.sleep(0.1)
        assert code == grpc.StatusCode.UNAVAILABLE

        # TLS checks validity at the handshake only: the connection made before expiry still works
        # (until max connection age ends it, which is why servers set one).
        await early_cs.pods.list(NS)

        late = channel_source_from_connection(conn, poll_interval=None)
        try:
            late_cs = Clientset(late, qps=0, retry=NO_RETRY, timeout=5)
            with pytest.raises(UnavailableError) as e:
                await late_cs.pods.list(NS)
            assert e.value.code == grpc.StatusCode.UNAVAILABLE

            rotate(pki.dir, "scheduler-1", ttl=timedelta(hours=1))
            assert late.reload()
            await late_cs.pods.list(NS)  # recovered, same process, same source
            assert late_cs.metrics.count(verb="list", code="OK") == 1
        finally:
            await late.close()
