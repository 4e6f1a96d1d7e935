"""An etcd member restarted (SIGTERM) or crashed (SIGKILL) under load is invisible to the API
server's clients while a quorum remains.

Real processes throughout: a 3-member etcd over mTLS, a `kse apiserver` process, and a client doing
creates, binds, status updates, deletes, gets and consistent lists (no client-side retries, so any
failure the API server passes on is counted) while an informer watches. Then:

* every request succeeded (no UNAVAILABLE, INTERNAL, ...), the informer's one watch never broke
  and it never relisted;
* the watch delivered every acknowledged write once, in revision order (nothing lost, duplicated or
  reordered across the etcd watch moving between members);
* every acknowledged write is in etcd (the last acknowledged revision of each pod is what etcd
  holds; acknowledged deletes are gone).

kse.etcdclient.retry and apiserver_mock/storage/store.py explain how (retry rules, resolution of
writes whose outcome is unknown).
"""

from __future__ import annotations

import asyncio
import re
import signal
import ssl
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from certs.layout import APISERVER_ETCD_CLIENT, PKI
from harness.procs.etcd import EtcdCluster, EtcdProcess, EtcdServerTLS
from kse.client.clientset import NO_RETRY, Clientset
from kse.client.informer import HistoryRecord, Informer
from kse.client.reflector import Backoff
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, assert_delivered_exactly, start_apiserver
from tests.fixtures.etcd import EtcdFactory
from tests.fixtures.polling import until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

NS = "default"
DEADLINE = 30.0
FAST = Backoff(initial=0.02, maximum=0.2)
WORKERS = 4


class Load:
    """`WORKERS` tasks, each: create a pod, bind it, get it, set its status, delete every other one,
    and a consistent list now and then. Every call must succeed; acknowledged writes are recorded."""

    def __init__(self, admin: Clientset) -> None:
        self.admin = admin
        self.expected: list[tuple[str, str, int]] = []  # (event type, ns/name, revision) acknowledged
        self.final: dict[str, int | None] = {}  # name -> last acknowledged revision (None: deleted)
        self._stop = False
        self._tasks: list[asyncio.Task[None]] = []

    async def _worker(self, w: int) -> None:
        pods = self.admin.pods
        i = 0
        while not self._stop:
            name = f"w{w}-{i}"
            key = f"{NS}/{name}"
            pod = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=NS))
            pod.spec.containers.add(name="c", image="nginx")
            made = await pods.create(pod)
            self._ack("ADDED", name, made)
            binding = pb.Binding(metadata=pb.ObjectMeta(namespace=NS, name=name))
            binding.target.name = "node-a"
            bound = await pods.bind(binding)
            self._ack("MODIFIED", name, bound)
            got = await pods.get(NS, name)
            assert got.metadata.resource_version == bound.metadata.resource_version, key
            got.status.phase = "Running"
            running = await pods.update_status(got)
            self._ack("MODIFIED", name, running)
            if i % 2:
                gone = await pods.delete(NS, name, grace_period_seconds=0)  # bound: gone now, not graceful
                self._ack("DELETED", name, gone)
                self.final[name] = None
            if i % 5 == 0:
                await pods.list(NS)  # consistent: a range (and maybe a progress marker write)
            i += 1

    def _ack(self, kind: str, name: str, obj: pb.Pod) -> None:
        rv = int(obj.metadata.resource_version)
        self.expected.append((kind, f"{NS}/{name}", rv))
        self.final[name] = rv

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker(w), name=f"load-{w}") for w in range(WORKERS)]

    def check(self) -> None:
        for task in self._tasks:
            if task.done():
                task.result()  # re-raises the failed call

    async def progress(self, more: int) -> None:
        target = len(self.expected) + more
        await until(
            lambda: len(self.expected) >= target or any(t.done() for t in self._tasks),
            f"{more} more acknowledged writes",
            DEADLINE,
        )
        self.check()

    async def stop(self) -> None:
        self._stop = True
        await asyncio.gather(*self._tasks)


def _txn_count(member: EtcdProcess, pki: PKI) -> int:
    """Txns this member has handled (etcd's grpc_server_handled_total, over its mTLS client port)."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_bundle))
    client = pki[APISERVER_ETCD_CLIENT]
    ctx.load_cert_chain(str(client.cert), str(client.key))
    ctx.check_hostname = False
    with urllib.request.urlopen(f"{member.endpoint}/metrics", context=ctx, timeout=5) as resp:
        text = resp.read().decode()
    pattern = r'^grpc_server_handled_total\{[^}]*grpc_method="Txn"[^}]*\} (\d+)'
    return sum(int(n) for n in re.findall(pattern, text, re.MULTILINE))


async def member_in_use(cluster: EtcdCluster, pki: PKI, load: Load) -> EtcdProcess:
    """The member the API server sends its writes to: the one whose Txn count grows under load."""
    before = [await asyncio.to_thread(_txn_count, m, pki) for m in cluster.members]
    await load.progress(20)
    after = [await asyncio.to_thread(_txn_count, m, pki) for m in cluster.members]
    grown = [a - b for a, b in zip(after, before, strict=True)]
    busiest = max(range(len(grown)), key=grown.__getitem__)
    assert grown[busiest] > 0, grown
    return cluster.members[busiest]


Disruption = Callable[[EtcdCluster, "Load"], Awaitable[None]]


async def run_with(
    etcd_factory: EtcdFactory, pki: PKI, tmp_path: Path, disrupt: Disruption
) -> tuple[ApiServer, Load]:
    """Start etcd + API server + load + informer, run `disrupt(cluster, load)`, then check it all."""
    cluster = await etcd_factory(3, tls=EtcdServerTLS.from_pki_dir(pki.dir))
    server = await start_apiserver(cluster, pki, tmp_path / "apiserver")
    try:
        admin = Clientset(await server.channel("admin"), qps=0, retry=NO_RETRY)
        history: list[HistoryRecord] = []
        informer = Informer(admin.pods, namespace=NS, history=history.append, backoff=FAST)
        async with informer.running():
            await asyncio.wait_for(informer.wait_for_sync(), DEADLINE)
            load = Load(admin)
            load.start()
            await load.progress(20)
            await disrupt(cluster, load)
            await load.progress(20)  # and after the last member is back
            await load.stop()
            # The highest revision, not the last appended: concurrent writes end out of order.
            last = max(rev for _, _, rev in load.expected)
            await asyncio.wait_for(informer.wait_for_revision(last), DEADLINE)

        failed = {k: n for k, n in admin.metrics.requests.items() if k[2] != "OK"}
        assert failed == {}, failed
        reflector = informer.reflector
        assert (reflector.lists, reflector.watches, reflector.last_error) == (1, 1, None)
        records = [(r.type, r.key, int(r.resource_version)) for r in history if r.source == "watch"]
        assert_delivered_exactly(records, load.expected)  # each once, in order, none lost

        etcd = await server.etcd()
        try:
            for name, rv in load.final.items():
                kv, _ = await etcd.get(server.key("pods", NS, name))
                assert (kv.mod_revision if kv is not None else None) == rv, name
        finally:
            await etcd.close()
        assert "Traceback" not in server.log(), server.log()[-3000:]
        return server, load
    finally:
        await server.stop()


async def test_each_member_sigtermed_and_restarted_in_turn(
    etcd_factory: EtcdFactory, pki: PKI, tmp_path: Path
) -> None:
    """What a CA rotation does to etcd: every member restarted, one at a time."""

    async def rolling_restart(cluster: EtcdCluster, load: Load) -> None:
        for member in cluster.members:
            await member.stop(signal.SIGTERM)
            await load.progress(20)  # while it is down
            await member.restart()  # back, healthy, caught up with the leader
            await load.progress(20)

    await run_with(etcd_factory, pki, tmp_path, rolling_restart)


async def test_member_in_use_sigkilled_twice(etcd_factory: EtcdFactory, pki: PKI, tmp_path: Path) -> None:
    """A crash of the very member the API server talks to, mid-write: reads are retried elsewhere,
    writes caught in flight are resolved (landed or re-sent), the etcd watches resume elsewhere."""

    async def crash_in_use(cluster: EtcdCluster, load: Load) -> None:
        for _ in range(2):
            victim = await member_in_use(cluster, pki, load)
            await victim.kill()
            await load.progress(30)
            await victim.restart()
            await load.progress(10)

    server, _ = await run_with(etcd_factory, pki, tmp_path, crash_in_use)
    assert "failed, switching to" in server.log()
