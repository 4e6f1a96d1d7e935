"""Highly available scheduling: real `kse scheduler` replicas electing a leader over a real API
server (mTLS, fencing on, audit log) over real etcd.

Each replica is its own process with its own client certificate and election identity
(`scheduler-1..3` of the PKI) and short lease settings (2 s / 1.5 s / 0.3 s unless a test needs
otherwise). Faults are process signals: SIGKILL (a crash: nothing released), SIGTERM (a clean stop:
the leader releases the lease), SIGSTOP/SIGCONT (a pause past the lease: the deposed leader must
not get a single write in). Correctness is judged on what the API server recorded: the Lease, the
pods, and its audit log, read by the chaos checker (`pods_bound_once`, `no_stale_writes`: every
accepted scheduler write carried the fence token of the lease holder at that revision).

Everything polls with deadlines; there are no sleeps to wait a bit, and the only timing assertions
are sanity bounds that tell a release from an expiry (timings belong to `kse bench failover`).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

from certs.layout import PKI
from chaos.checker.invariants import no_stale_writes, pods_bound_once
from chaos.history import History
from kse.audit import read_audit_log
from kse.client.clientset import Clientset
from kse.client.errors import NotFoundError
from kse.scrape import http_get, parse_exposition
from proto import kse_pb2 as pb
from tests.fixtures import polling
from tests.fixtures.apiserver import ApiServer, ApiServerFactory
from tests.fixtures.procs import spawn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

NS = "default"
LEASE_NS, LEASE_NAME = "kube-system", "kube-scheduler"
LEASE_KEY = f"{LEASE_NS}/{LEASE_NAME}"
# Lease duration, renew deadline, retry period.
SHORT_LEASE = ("2s", "1.5s", "0.3s")
DEADLINE = 30.0
T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], what: str, within: float = DEADLINE
) -> T:
    """`polling.eventually` with a growing pause: every probe here is a round trip to a process."""
    return await polling.eventually(probe, done, what, within, max_interval=0.2)


# ---------------------------------------------------------------- one replica


@dataclass
class Replica:
    identity: str
    process: subprocess.Popen[bytes]
    metrics_address: str
    log_path: Path
    stopped: bool = False  # SIGSTOPped

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def send(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)
        if sig == signal.SIGSTOP:
            self.stopped = True
        elif sig == signal.SIGCONT:
            self.stopped = False

    async def get(self, path: str) -> tuple[int, str] | None:
        """GET on the metrics endpoint; None if it does not answer (gone, paused)."""
        if not self.running or self.stopped:
            return None
        try:
            return await http_get(self.metrics_address, path, within=5.0)
        except OSError:
            return None

    async def master_status(self) -> float | None:
        """leader_election_master_status{name="kube-scheduler"}; None if it does not answer."""
        got = await self.get("/metrics")
        if got is None or got[0] != 200:
            return None
        samples = parse_exposition(got[1])
        if "leader_election_master_status" not in samples:
            return None
        return sum(
            v for lbl, v in samples["leader_election_master_status"] if lbl.get("name") == "kube-scheduler"
        )

    async def wait_exit(self, within: float = DEADLINE) -> int:
        try:
            return await asyncio.to_thread(self.process.wait, within)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.identity} did not exit within {within}s:\n{self.log()[-3000:]}"
            ) from None

    def kill(self) -> None:
        if self.running:
            if self.stopped:
                self.send(signal.SIGCONT)
            self.process.kill()
        self.process.wait()


# ---------------------------------------------------------------- the cluster


@dataclass
class Cluster:
    apiserver: ApiServer
    pki: PKI
    workdir: Path
    audit_path: Path
    admin: Clientset
    replicas: dict[str, Replica] = field(default_factory=dict)

    async def start(self, identity: str, *extra: str, lease: tuple[str, str, str] = SHORT_LEASE) -> Replica:
        """Start `kse scheduler` as `identity` (its PKI stem is the identity) and wait for its
        ready file."""
        d = self.workdir / identity
        d.mkdir(parents=True, exist_ok=True)
        ready, log_path = d / "ready.json", d / "scheduler.log"
        ready.unlink(missing_ok=True)  # a killed predecessor's
        ident = self.pki[identity]
        argv = [
            sys.executable, "-m", "kse", "scheduler",
            "--server", self.apiserver.address,
            "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
            "--identity", identity,
            "--kube-api-qps", "1000", "--kube-api-burst", "1000",
            "--leader-elect-lease-duration", lease[0],
            "--leader-elect-renew-deadline", lease[1],
            "--leader-elect-retry-period", lease[2],
            "--metrics-bind-address", "127.0.0.1:0",
            "--ready-file", str(ready),
            *extra,
        ]  # fmt: skip
        proc = spawn(argv, log_path)
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                info = json.loads(ready.read_text())
                break
            except (OSError, ValueError):
                pass
            if proc.poll() is not None:
                raise AssertionError(f"{identity} exited with {proc.returncode}:\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"{identity} wrote no ready file:\n{log_path.read_text()}")
            await asyncio.sleep(0.02)
        replica = Replica(identity, proc, info["metrics"], log_path)
        self.replicas[identity] = replica
        return replica

    async def lease(self) -> pb.Lease | None:
        try:
            return await self.admin.leases.get(LEASE_NS, LEASE_NAME)
        except NotFoundError:
            return None

    async def holder(self) -> str:
        lease = await self.lease()
        return lease.spec.holder_identity if lease is not None else ""

    async def leader(self, *, other_than: str = "", within: float = DEADLINE) -> Replica:
        """The one leader, once the Lease names a live replica (other than `other_than`) that says
        it leads, and every other live replica says it does not."""

        async def probe() -> tuple[str, dict[str, float | None]]:
            holder = await self.holder()
            status = {
                name: await r.master_status()
                for name, r in self.replicas.items()
                if r.running and not r.stopped
            }
            return holder, status

        def one_leader(state: tuple[str, dict[str, float | None]]) -> bool:
            holder, status = state
            if not holder or holder == other_than or status.get(holder) != 1:
                return False
            return all(v == 0 for name, v in status.items() if name != holder)

        holder, _ = await eventually(probe, one_leader, "exactly one leader", within)
        return self.replicas[holder]

    async def create_pods(self, prefix: str, n: int) -> list[str]:
        names = [f"{prefix}-{i}" for i in range(n)]
        for name in names:
            pod = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=NS))
            c = pod.spec.containers.add(name="app", image="registry.k8s.io/pause:3.9")
            c.resources.requests.update({"cpu": "10m", "memory": "16Mi"})
            await self.admin.pods.create(pod)
        return names

    async def wait_bound(self, names: list[str], within: float = DEADLINE) -> dict[str, str]:
        wanted = set(names)

        async def probe() -> dict[str, str]:
            items = (await self.admin.pods.list(NS)).items
            return {p.metadata.name: p.spec.node_name for p in items if p.metadata.name in wanted}

        placed = await eventually(
            probe, lambda m: len(m) == len(wanted) and all(m.values()), f"{len(wanted)} pods bound", within
        )
        return placed

    async def history(self) -> History:
        pods = (await self.admin.pods.list(NS)).items
        nodes = (await self.admin.nodes.list()).items
        return History(audit=list(read_audit_log(self.audit_path)), pods=list(pods), nodes=list(nodes))

    def binds_by_holder(self, history: History, names: list[str]) -> dict[str, str]:
        """pod name -> the fence holder of the bind that bound it: its accepted bind (one whose
        answer never reached its writer, a replica killed just after sending, is recorded with its
        real outcome too: the API server finishes a write whose caller went away)."""
        wanted = set(names)
        out = {
            r.name: r.fence.holder if r.fence else ""
            for r in history.audit
            if r.verb == "bind" and r.code == "OK" and r.name in wanted
        }
        assert set(out) == wanted, f"no bind recorded for {sorted(wanted - set(out))}"
        return out

    def logs(self) -> str:
        return "\n".join(f"===== {n}\n{r.log()[-4000:]}" for n, r in self.replicas.items())


def node(name: str) -> pb.Node:
    n = pb.Node(metadata=pb.ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}))
    n.status.allocatable.update({"cpu": "8", "memory": "16Gi", "pods": "110"})
    n.status.capacity.update({"cpu": "8", "memory": "16Gi", "pods": "110"})
    n.status.conditions.add(type="Ready", status="True")
    return n


@pytest.fixture
async def cluster(apiserver_factory: ApiServerFactory, pki: PKI, tmp_path: Path) -> AsyncIterator[Cluster]:
    audit = tmp_path / "audit.jsonl"
    server = await apiserver_factory("--fencing", "on", "--audit-log", str(audit))
    admin = Clientset(await server.channel("admin"), qps=0)
    for i in range(4):
        await admin.nodes.create(node(f"node-{i}"))
    c = Cluster(server, pki, tmp_path / "replicas", audit, admin)
    try:
        yield c
    finally:
        for r in c.replicas.values():
            r.kill()


def check_history(history: History) -> None:
    bound_once = pods_bound_once(history)
    assert bound_once.passed, bound_once.detail
    stale = no_stale_writes(history)
    assert stale.passed, stale.detail
    assert stale.counts["checked"] > 0 and stale.counts["unfenced_writes"] == 0, stale.detail


def no_tracebacks(*replicas: Replica) -> None:
    for r in replicas:
        text = r.log()
        assert "Traceback" not in text, f"{r.identity}:\n{text[-4000:]}"


# ---------------------------------------------------------------- the tests


async def test_one_leader_and_a_standby_takes_over_after_kill_9(cluster: Cluster) -> None:
    replicas = [await cluster.start(f"scheduler-{i}") for i in (1, 2, 3)]
    first = await cluster.leader()
    for r in replicas:
        await eventually(partial(r.get, "/readyz"), lambda got: got == (200, "ok"), "informers synced")
        got = await r.get("/healthz?verbose")
        assert got is not None and got[0] == 200 and "[+]leaderElection ok" in got[1], got

    batch1 = await cluster.create_pods("before", 20)
    await cluster.wait_bound(batch1)

    killed_at = time.monotonic()
    first.kill()  # SIGKILL: nothing released, the standbys wait out the lease
    second = await cluster.leader(other_than=first.identity)
    takeover = time.monotonic() - killed_at
    lease = await cluster.lease()
    assert lease is not None and lease.spec.holder_identity == second.identity

    batch2 = await cluster.create_pods("after", 20)
    await cluster.wait_bound(batch2)

    history = await cluster.history()
    check_history(history)
    by_holder = cluster.binds_by_holder(history, batch1 + batch2)
    assert {by_holder[n] for n in batch1} == {first.identity}
    assert {by_holder[n] for n in batch2} == {second.identity}
    terms = history.lease_history().terms(LEASE_KEY)
    assert [t.holder for t in terms[-2:]] == [first.identity, second.identity]
    assert not terms[-2].released  # killed: it could not release
    assert terms[-1].transitions == terms[-2].transitions + 1
    no_tracebacks(*(r for r in replicas if r is not first))
    print(f"takeover after SIGKILL: {takeover:.2f}s")


async def test_sigterm_hands_over_at_once_by_releasing_the_lease(cluster: Cluster) -> None:
    # A long lease, so that a takeover well before it can only come from the release.
    lease = ("20s", "15s", "0.3s")
    replicas = [await cluster.start(f"scheduler-{i}", lease=lease) for i in (1, 2)]
    first = await cluster.leader()
    batch1 = await cluster.create_pods("before", 10)
    await cluster.wait_bound(batch1)

    termed_at = time.monotonic()
    first.send(signal.SIGTERM)
    second = await cluster.leader(other_than=first.identity)
    handover = time.monotonic() - termed_at
    assert handover < 10.0, f"handover took {handover:.1f}s: the lease was not released"
    assert await first.wait_exit() == 0, first.log()[-3000:]

    batch2 = await cluster.create_pods("after", 10)
    await cluster.wait_bound(batch2)

    history = await cluster.history()
    check_history(history)
    terms = history.lease_history().terms(LEASE_KEY)
    assert [t.holder for t in terms[-2:]] == [first.identity, second.identity]
    assert terms[-2].released, terms  # ended by the release, not by an expiry
    by_holder = cluster.binds_by_holder(history, batch2)
    assert set(by_holder.values()) == {second.identity}
    assert "released lease kube-system/kube-scheduler" in first.log()
    no_tracebacks(*replicas)
    print(f"handover after SIGTERM: {handover:.2f}s")


async def test_a_paused_leader_is_fenced_off_and_exits(cluster: Cluster) -> None:
    replicas = [await cluster.start(f"scheduler-{i}") for i in (1, 2, 3)]
    first = await cluster.leader()
    batch1 = await cluster.create_pods("before", 10)
    await cluster.wait_bound(batch1)

    first.send(signal.SIGSTOP)  # paused past its lease: to the others it is gone
    second = await cluster.leader(other_than=first.identity)
    # Pods the paused leader's informers will hear about the moment it wakes up.
    batch2 = await cluster.create_pods("during", 20)
    await cluster.wait_bound(batch2)
    first.send(signal.SIGCONT)
    # It learns that it lost the lease (its own renew deadline passed, or the renewal or a write
    # fails) and, with the default --on-lost-lease=exit, exits 1 as kube-scheduler does.
    assert await first.wait_exit() == 1, first.log()[-3000:]
    assert "leaderelection lost" in first.log()

    batch3 = await cluster.create_pods("after", 10)
    await cluster.wait_bound(batch3)
    history = await cluster.history()
    check_history(history)  # none of the old leader's writes landed after the takeover
    by_holder = cluster.binds_by_holder(history, batch2 + batch3)
    assert set(by_holder.values()) == {second.identity}
    no_tracebacks(*replicas)


async def test_on_lost_lease_standby_returns_to_standby_and_can_lead_again(cluster: Cluster) -> None:
    a, b = [await cluster.start(f"scheduler-{i}", "--on-lost-lease", "standby") for i in (1, 2)]
    first = await cluster.leader()
    other = b if first is a else a
    batch1 = await cluster.create_pods("before", 10)
    await cluster.wait_bound(batch1)

    first.send(signal.SIGSTOP)
    await cluster.leader(other_than=first.identity)
    batch2 = await cluster.create_pods("during", 10)
    await cluster.wait_bound(batch2)
    first.send(signal.SIGCONT)

    # Back to standby: alive, healthy, not leading.
    async def standby_state() -> tuple[float | None, tuple[int, str] | None]:
        return await first.master_status(), await first.get("/healthz")

    await eventually(standby_state, lambda s: s == (0, (200, "ok")), "the old leader back in standby")
    assert first.running
    assert "stopped leading" in first.log()

    # It can lead again: stop the current leader cleanly; the former one takes over and schedules.
    other.send(signal.SIGTERM)
    assert await other.wait_exit() == 0, other.log()[-3000:]
    again = await cluster.leader(other_than=other.identity)
    assert again is first
    batch3 = await cluster.create_pods("after", 10)
    await cluster.wait_bound(batch3)

    history = await cluster.history()
    check_history(history)
    by_holder = cluster.binds_by_holder(history, batch3)
    assert set(by_holder.values()) == {first.identity}
    terms = [t for t in history.lease_history().terms(LEASE_KEY) if t.holder == first.identity]
    assert len(terms) == 2 and terms[1].transitions > terms[0].transitions
    no_tracebacks(a, b)
