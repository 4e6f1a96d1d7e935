"""Certificate rotation under a running cluster of real component processes.

A real API server (mTLS, fencing, audit log, max connection age 2 s so every connection
re-handshakes often) over real etcd, three `kse scheduler` replicas electing a leader, `kse nodesim`
and `kse workload` creating pods at a steady rate; every client process logs its failed RPCs with
`--rpc-error-log`. While pods are being created and scheduled, every leaf is rotated, then the CA
is rotated add -> switch -> remove. Afterwards:

* no component saw a failed RPC (their error logs are empty);
* nobody lost leadership: the Lease has the same holder and leaseTransitions as before;
* every pod was bound exactly once (the audit log, read by the chaos checker);
* every component really runs on its final certificate: its log names the serial of the cert now
  on disk, the old CA is in no bundle, and calls kept succeeding after that through connections
  re-handshaken every 2 s (which the API server accepts only from new-CA certificates).

Processes are real; waits poll with deadlines.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509

from certs.layout import PKI, CertPaths
from certs.pki import init_pki
from certs.rotation import rotate, rotate_ca_add, rotate_ca_remove, rotate_ca_switch
from chaos.checker.invariants import pods_bound_once
from chaos.history import APPLICATION_CODES, History, RpcErrorRecord, read_jsonl
from kse.audit import read_audit_log
from kse.client.channel import channel_source_from_connection
from kse.client.clientset import Clientset
from kse.client.errors import NotFoundError
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, ApiServerFactory
from tests.fixtures.polling import eventually, until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO_ROOT = Path(__file__).resolve().parents[2]
NS = "default"
LEASE_NS, LEASE_NAME = "kube-system", "kube-scheduler"
DEADLINE = 40.0
REPLICAS = ("scheduler-1", "scheduler-2", "scheduler-3")


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    """This test's own PKI (rotation rewrites files); the API server fixtures serve from it."""
    return init_pki(tmp_path / "pki", scheduler_replicas=3)


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    rpc_errors: Path
    cert: CertPaths
    stopped: bool = False  # by the test, on purpose

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def reloads(self, version: int) -> int:
        return self.log().count(f"client credentials reloaded (version {version},")

    def errors(self) -> list[RpcErrorRecord]:
        return list(read_jsonl(self.rpc_errors, RpcErrorRecord.from_json))

    def stop(self, sig: signal.Signals = signal.SIGTERM, grace: float = 15.0) -> int:
        self.stopped = True
        if self.running:
            self.process.send_signal(sig)
            try:
                return self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


class Cluster:
    def __init__(self, server: ApiServer, pki: PKI, workdir: Path) -> None:
        self.server, self.pki, self.workdir = server, pki, workdir
        self.run_dir = workdir / "run"
        self.procs: dict[str, Proc] = {}

    def spawn(self, name: str, cert: CertPaths, *argv: str) -> Proc:
        d = self.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        rpc_errors = self.run_dir / f"rpc-errors-{name}.jsonl"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        log_path = d / "out.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kse", *argv, "--rpc-error-log", str(rpc_errors)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=env,
            )
        p = Proc(name, proc, log_path, rpc_errors, cert)
        self.procs[name] = p
        return p

    async def wait_file(self, p: Proc, path: Path) -> dict[str, object]:
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                return dict(json.loads(await asyncio.to_thread(path.read_text)))
            except (OSError, ValueError):
                pass
            assert p.running, f"{p.name} exited with {p.process.returncode}:\n{p.log()[-4000:]}"
            assert time.monotonic() < deadline, f"{p.name} wrote no {path.name}:\n{p.log()[-4000:]}"
            await asyncio.sleep(0.05)

    async def scheduler(self, identity: str) -> Proc:
        ident = self.pki[identity]
        ready = self.workdir / identity / "ready.json"
        p = self.spawn(
            identity,
            ident,
            "scheduler",
            "--server", self.server.address,
            "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
            "--identity", identity,
            "--kube-api-qps", "1000", "--kube-api-burst", "1000",
            "--leader-elect-lease-duration", "4s",
            "--leader-elect-renew-deadline", "3s",
            "--leader-elect-retry-period", "0.5s",
            "--metrics-bind-address", "127.0.0.1:0",
            "--ready-file", str(ready),
        )  # fmt: skip
        await self.wait_file(p, ready)
        return p

    async def nodesim(self, nodes: int) -> Proc:
        ready = self.workdir / "nodesim" / "ready.json"
        p = self.spawn(
            "nodesim",
            self.pki["nodesim"],
            "nodesim",
            "--server", self.server.address, "--pki-dir", str(self.pki.dir),
            "--nodes", str(nodes), "--cpu", "64", "--memory", "256Gi", "--pods", "250",
            "--heartbeat-interval", "1s", "--stats-interval", "0",
            "--ready-file", str(ready),
        )  # fmt: skip
        await self.wait_file(p, ready)
        return p

    async def workload(self, rate: float) -> Proc:
        ready = self.workdir / "workload" / "ready.json"
        p = self.spawn(
            "workload",
            self.pki["workload"],
            "workload",
            "--server", self.server.address, "--pki-dir", str(self.pki.dir),
            "--rate", str(rate), "--duration", "10m", "--name-prefix", "w-", "--json",
            "--ready-file", str(ready),
        )  # fmt: skip
        await self.wait_file(p, ready)
        return p

    def logs(self) -> str:
        return "\n".join(f"===== {n}\n{p.log()[-3000:]}" for n, p in self.procs.items())

    def check_running(self) -> None:
        for p in self.procs.values():
            assert p.running or p.stopped, f"{p.name} exited with {p.process.returncode}:\n{p.log()[-4000:]}"

    def reloaded(self, version: int) -> Callable[[], bool]:
        """Every component took credentials `version` (a scheduler has two connections)."""
        wanted = {n: 2 if n.startswith("scheduler") else 1 for n in self.procs}
        return lambda: all(p.reloads(version) >= wanted[n] for n, p in self.procs.items())


@pytest.fixture
async def cluster(apiserver_factory: ApiServerFactory, pki: PKI, tmp_path: Path) -> AsyncIterator[Cluster]:
    server = await apiserver_factory(
        "--max-connection-age", "2",
        "--audit-log", str(tmp_path / "audit.jsonl"),
        "--fencing", "on",
        "--require-fence-for", "system:kube-scheduler",
    )  # fmt: skip
    c = Cluster(server, pki, tmp_path / "cluster")
    try:
        yield c
    finally:
        for p in reversed(list(c.procs.values())):
            await asyncio.to_thread(p.stop)


async def test_rotate_every_leaf_and_the_ca_under_a_running_cluster(cluster: Cluster, pki: PKI) -> None:
    source = channel_source_from_connection(cluster.server.connection("admin"), poll_interval=0.1)
    admin = Clientset(source, qps=0)
    try:
        for identity in REPLICAS:
            await cluster.scheduler(identity)
        await cluster.nodesim(nodes=4)

        async def lease() -> pb.Lease | None:
            try:
                return await admin.leases.get(LEASE_NS, LEASE_NAME)
            except NotFoundError:
                return None

        first = await eventually(
            lease, lambda ls: ls is not None and bool(ls.spec.holder_identity), "a leader"
        )
        assert first is not None
        holder, transitions = first.spec.holder_identity, first.spec.lease_transitions
        workload = await cluster.workload(rate=10)

        async def bound() -> int:
            items = (await admin.pods.list(NS)).items
            return sum(1 for p in items if p.spec.node_name)

        async def more_bound(n: int) -> None:
            target = await bound() + n
            await eventually(bound, lambda b: b >= target, f"{n} more pods bound", DEADLINE)
            cluster.check_running()

        await more_bound(15)

        # Every leaf (API server, schedulers, nodesim, workload, admin, ...) from the same CA.
        rotate(pki.dir, "all")
        await until(cluster.reloaded(2), "every component took its new leaf", DEADLINE)
        await more_bound(15)

        # CA rotation, in Kubernetes' order, each phase reaching every process before the next.
        rotate_ca_add(pki.dir)
        await until(cluster.reloaded(3), "every component trusts the new CA", DEADLINE)
        await more_bound(15)
        rotate_ca_switch(pki.dir)
        await until(cluster.reloaded(4), "every component moved to its new-CA pair", DEADLINE)
        await more_bound(15)
        rotate_ca_remove(pki.dir)
        await until(cluster.reloaded(5), "every component dropped the old CA", DEADLINE)
        # Keep going for several max-connection-age periods: every connection re-handshakes, and the
        # API server (trusting the new CA alone) accepts only the new certificates.
        await more_bound(40)

        assert workload.stop() == 0, workload.log()[-4000:]  # every create succeeded
        summary = json.loads(workload.log().strip().splitlines()[-1])
        created = int(summary["created"])
        assert created >= 100 and not summary.get("failed")

        async def all_bound() -> list[pb.Pod]:
            return list((await admin.pods.list(NS)).items)

        pods = await eventually(
            all_bound, lambda ps: len(ps) == created and all(p.spec.node_name for p in ps), "all pods bound"
        )

        # 1. No failed RPC anywhere. Answers to the request itself (a standby's Get of a Lease that
        # does not exist yet: NOT_FOUND) are not transport failures: the checker's rule.
        assert all(p.rpc_errors.exists() for p in cluster.procs.values())
        errors = {
            n: [e for e in p.errors() if e.code not in APPLICATION_CODES] for n, p in cluster.procs.items()
        }
        assert errors == {n: [] for n in cluster.procs}, errors

        # 2. Nobody lost leadership.
        last = await lease()
        assert last is not None
        assert (last.spec.holder_identity, last.spec.lease_transitions) == (holder, transitions)
        for name in REPLICAS:
            assert "stopped leading" not in cluster.procs[name].log(), cluster.procs[name].log()[-3000:]

        # 3. Every pod bound exactly once.
        history = History(
            audit=list(read_audit_log(cluster.server.log_path.parent.parent / "audit.jsonl")),
            pods=pods,
            nodes=list((await admin.nodes.list()).items),
        )
        once = pods_bound_once(history)
        assert once.passed, once.detail

        # 4. Everyone is on its final certificate, from the new CA, and the old CA is trusted nowhere.
        bundle = x509.load_pem_x509_certificates(pki.ca_bundle.read_bytes())
        ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
        assert [c.subject for c in bundle] == [ca.subject]
        for p in cluster.procs.values():
            cert = x509.load_pem_x509_certificate(p.cert.cert.read_bytes())
            assert cert.issuer == ca.subject
            assert f"serial {cert.serial_number:x}," in p.log(), f"{p.name} never loaded its final cert"
            assert "Traceback" not in p.log(), p.log()[-4000:]
        cluster.check_running()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        await source.close()
