"""The API server -> etcd link over mTLS, rotated without restarting the API server.

* What etcd 3.5 itself does with rotated files (measured here, relied on by CA rotation): it serves
  a new serving pair at the next handshake, but it reads `--trusted-ca-file` only at start, so a
  client certificate from a CA added to the bundle later is refused until the member restarts.
  CA rotation therefore restarts etcd members (one at a time) after `add`, before `switch`.
* The API server follows `--etcd-ca/--etcd-cert/--etcd-key`: a rotated apiserver-etcd-client pair,
  then a whole CA rotation, move its etcd client to new channels while clients keep creating and
  binding pods through it: no request fails and its watch caches' event streams have no gap
  (a client's informer sees every write exactly once, in order, without relisting).

Each test has its own PKI and its own TLS etcd (rotation rewrites files). No fixed sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509

from certs.layout import APISERVER_ETCD_CLIENT, PKI, CertPaths
from certs.pki import init_pki, issue_leaf, load_pair
from certs.rotation import rotate, rotate_ca_add, rotate_ca_remove, rotate_ca_switch
from harness.procs.etcd import EtcdCluster, EtcdServerTLS
from kse.client.channel import channel_source_from_connection
from kse.client.clientset import Clientset
from kse.client.credentials import ReloadingChannelSource
from kse.client.informer import HistoryRecord, Informer
from kse.client.reflector import Backoff
from kse.etcdclient import EtcdClient, prefix_range_end
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, assert_delivered_exactly, start_apiserver
from tests.fixtures.etcd import EtcdFactory
from tests.fixtures.polling import until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

NS = "default"
DEADLINE = 30.0
FAST = Backoff(initial=0.02, maximum=0.2)


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    """Each test's own PKI (rotation rewrites files)."""
    return init_pki(tmp_path / "pki", scheduler_replicas=1)


async def tls_etcd(etcd_factory: EtcdFactory, pki: PKI) -> EtcdCluster:
    return await etcd_factory(1, tls=EtcdServerTLS.from_pki_dir(pki.dir))


def _handshake(port: int, client: CertPaths, ca_bundle: Path) -> x509.Certificate:
    """A TLS handshake with etcd's client port presenting `client`; the serving cert it showed.
    Raises ssl.SSLError when etcd refuses the client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=str(ca_bundle))
    ctx.load_cert_chain(str(client.cert), str(client.key))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock, ctx.wrap_socket(sock) as tls:
        der = tls.getpeercert(binary_form=True)
        # TLS 1.3 reports a refused client certificate only on the first read.
        tls.sendall(b"GET /health HTTP/1.1\r\nHost: etcd\r\nConnection: close\r\n\r\n")
        answer = tls.recv(64)
    assert der is not None and answer.startswith(b"HTTP/1.1 200"), answer
    return x509.load_der_x509_certificate(der)


async def handshake(port: int, client: CertPaths, ca_bundle: Path) -> x509.Certificate:
    return await asyncio.to_thread(_handshake, port, client, ca_bundle)


async def test_etcd_reloads_its_serving_pair_but_not_its_trusted_ca(
    etcd_factory: EtcdFactory, pki: PKI, tmp_path: Path
) -> None:
    etcd = await tls_etcd(etcd_factory, pki)
    port = etcd.members[0].member.client_port
    client = pki[APISERVER_ETCD_CLIENT]
    before = await handshake(port, client, pki.ca_bundle)

    [leaf] = rotate(pki.dir, "etcd-server")
    after = await handshake(port, client, pki.ca_bundle)
    assert after.serial_number == leaf.serial != before.serial_number  # serving pair: per handshake

    rotate_ca_add(pki.dir)  # the bundle etcd was started with now holds old + new
    new_ca = load_pair(pki.dir / "ca-next.crt", pki.dir / "ca-next.key")
    probe = CertPaths("probe", tmp_path / "probe.crt", tmp_path / "probe.key", pki.ca_bundle)
    pair = issue_leaf(new_ca, "kube-apiserver-etcd-client")
    probe.cert.write_bytes(pair.cert_pem)
    probe.key.write_bytes(pair.key_pem)
    with pytest.raises(ssl.SSLError):
        await handshake(port, probe, pki.ca_bundle)  # trusted CA file: read at start only

    await etcd.members[0].restart()
    await handshake(port, probe, pki.ca_bundle)  # after a restart the new CA is trusted


async def test_etcd_client_swaps_channels_mid_watch_and_mid_writes(
    etcd_factory: EtcdFactory, pki: PKI
) -> None:
    etcd = await tls_etcd(etcd_factory, pki)
    assert etcd.client_tls is not None
    client = await EtcdClient.connect(etcd.endpoints, tls=etcd.client_tls, credential_reload_interval=60)
    try:
        assert client.credentials_version == 1
        prefix = b"/reload/"
        start = await client.put(prefix + b"start", b"0")
        seen: list[int] = []
        w = client.watch(prefix, prefix_range_end(prefix), start_revision=start + 1)

        async def follow() -> None:
            async with w:
                async for batch in w:
                    seen.extend(ev.kv.mod_revision for ev in batch.events)

        watcher = asyncio.create_task(follow())
        written: list[int] = []

        async def writer(n: int) -> None:
            for i in range(n):
                written.append(await client.put(prefix + f"k{len(written)}".encode(), str(i).encode()))

        writes = asyncio.create_task(writer(300))
        await until(lambda: len(written) >= 50, "writes under way")
        rotate(pki.dir, APISERVER_ETCD_CLIENT)
        assert client.reload_credentials()  # on demand, with writes and a watch in flight
        await writes  # none failed
        await until(lambda: len(seen) >= len(written), "the watch caught up", DEADLINE)
        assert seen == written  # resumed on the new channel at its next revision: no gap, no repeat
        assert w.reconnects >= 1  # it really moved: its stream ended with the old channel
        await until(lambda: client.retired_channels == 1, "the old channel retired")
        assert client.credential_swaps == 1 and client.credentials_version == 2
        assert not client.reload_credentials()  # nothing changed since
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    finally:
        await client.close()


class Load:
    """Creates and binds pods through the API server (so through its etcd client); every call must
    succeed. Pausable, for the moments etcd itself restarts (its own need, not the API server's)."""

    def __init__(self, admin: Clientset, prefix: str) -> None:
        self.admin, self.prefix = admin, prefix
        self.expected: list[tuple[str, str, int]] = []
        self.go = asyncio.Event()
        self.go.set()
        self.idle = asyncio.Event()
        self._stop = False
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        i = 0
        while not self._stop:
            if not self.go.is_set():
                self.idle.set()
                await self.go.wait()
                self.idle.clear()
                continue
            name = f"{self.prefix}-{i}"
            pod = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=NS))
            pod.spec.containers.add(name="c", image="nginx")
            made = await self.admin.pods.create(pod)
            self.expected.append(("ADDED", f"{NS}/{name}", int(made.metadata.resource_version)))
            b = pb.Binding(metadata=pb.ObjectMeta(namespace=NS, name=name))
            b.target.name = "node-a"
            bound = await self.admin.pods.bind(b)
            self.expected.append(("MODIFIED", f"{NS}/{name}", int(bound.metadata.resource_version)))
            await self.admin.pods.get(NS, name)
            i += 1

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="load")

    async def pause(self) -> None:
        self.go.clear()
        await until(lambda: self.idle.is_set() or self.done(), "the load paused", DEADLINE)
        self.check()

    def resume(self) -> None:
        self.go.set()

    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def check(self) -> None:
        if self.done():
            assert self._task is not None
            self._task.result()  # re-raises the failed call

    async def progress(self, more: int) -> None:
        target = len(self.expected) + 2 * more
        await until(lambda: len(self.expected) >= target or self.done(), f"{more} more pods", DEADLINE)
        self.check()

    async def stop(self) -> None:
        self._stop = True
        self.go.set()
        assert self._task is not None
        await self._task


def reloaded_etcd(server: ApiServer, version: int) -> Callable[[], bool]:
    return lambda: f"etcd client TLS credentials reloaded (version {version})" in server.log()


async def test_apiserver_follows_rotated_etcd_client_pair_and_ca(
    etcd_factory: EtcdFactory, pki: PKI, tmp_path: Path
) -> None:
    etcd = await tls_etcd(etcd_factory, pki)
    server = await start_apiserver(etcd, pki, tmp_path / "apiserver", "--max-connection-age", "3")
    pid = server.process.pid
    sources: list[ReloadingChannelSource] = []
    try:
        admin_src = channel_source_from_connection(server.connection("admin"), poll_interval=0.1)
        sources.append(admin_src)
        admin = Clientset(admin_src, qps=0)
        history: list[HistoryRecord] = []
        informer = Informer(admin.pods, namespace=NS, history=history.append, backoff=FAST)
        async with informer.running():
            await asyncio.wait_for(informer.wait_for_sync(), DEADLINE)
            load = Load(admin, "p")
            load.start()
            await load.progress(10)

            # 1. The API server's etcd client pair, same CA.
            rotate(pki.dir, APISERVER_ETCD_CLIENT)
            await until(reloaded_etcd(server, 2), "the API server took the new etcd client pair", DEADLINE)
            await load.progress(10)

            # 2. CA rotation. add: every bundle trusts old + new. etcd reads its trusted CA only at
            # start (measured above), so it restarts now, while requests are held back.
            rotate_ca_add(pki.dir)
            await until(reloaded_etcd(server, 3), "the API server took the new bundle", DEADLINE)
            await load.progress(5)
            await load.pause()
            await etcd.members[0].restart()
            load.resume()
            await load.progress(10)

            # switch: the etcd client pair (and etcd's serving pair) now come from the new CA.
            rotate_ca_switch(pki.dir)
            await until(reloaded_etcd(server, 4), "the API server took its new-CA pair", DEADLINE)
            await load.progress(10)

            # remove: only the new CA is trusted. etcd restarts once more, trusting the new CA
            # alone: the API server keeps working only because it really presents its new pair.
            rotate_ca_remove(pki.dir)
            await until(reloaded_etcd(server, 5), "the API server took the new-only bundle", DEADLINE)
            await load.progress(5)
            await load.pause()
            await etcd.members[0].restart()
            load.resume()
            await load.progress(10)
            await load.stop()
            # The highest revision, not the last appended: concurrent writes end out of order.
            last = max(rev for _, _, rev in load.expected)
            await asyncio.wait_for(informer.wait_for_revision(last), DEADLINE)

        assert server.running and server.process.pid == pid
        failed = {k: n for k, n in admin.metrics.requests.items() if k[0] != "watch" and k[2] != "OK"}
        assert failed == {}
        # The watch caches' etcd watches moved channels (and survived etcd restarts) without a gap:
        # the client saw every write once, in revision order, from its first and only list.
        records = [(r.type, r.key, int(r.resource_version)) for r in history if r.source == "watch"]
        assert_delivered_exactly(records, load.expected)
        assert informer.reflector.lists == 1
        log = server.log()
        assert "Traceback" not in log, log[-3000:]
        # Old etcd channels were retired (closed once drained), never failed over from.
        assert "failed, switching to" not in log
    finally:
        for src in sources:
            await src.close()
        await server.stop()
