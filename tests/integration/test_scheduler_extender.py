"""Extenders end to end: real `kse scheduler` processes configured with extenders, a real
`kse extender-sample` process, a real API server over real mTLS and etcd.

* filter, prioritize and bind through the sample: pods never land on the nodes it filters out,
  all land on the node it prefers (its score x weight x 10 outweighs the plugins'), and the
  binds are the extender's (its /stats count them; the scheduler's own binder sends none);
* preemption: DefaultPreemption's candidates go to the sample's preemptVerb before one is chosen;
* an unreachable extender: skipped when ignorable (pods schedule), otherwise every attempt fails
  with upstream's message in the FailedScheduling event and a PodScheduled=False/SchedulerError
  condition.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from certs.layout import PKI
from kse.client.clientset import Clientset
from kse.scrape import http_get, parse_exposition, sample_sum
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.integration.test_scheduler_process import _spawn, eventually, start_scheduler, wait_for_ready_file

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NS = "default"
CONFIG_HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def node(name: str, **labels: str) -> pb.Node:
    return pb.Node(
        metadata=pb.ObjectMeta(name=name, labels={"kubernetes.io/hostname": name, **labels}),
        status=pb.NodeStatus(
            capacity={"cpu": "8", "memory": "16Gi", "pods": "110"},
            allocatable={"cpu": "8", "memory": "16Gi", "pods": "110"},
        ),
    )


def pod(name: str, scheduler_name: str = "default-scheduler") -> pb.Pod:
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace=NS),
        spec=pb.PodSpec(
            scheduler_name=scheduler_name,
            containers=[pb.Container(name="c", image="nginx", resources=pb.ResourceRequirements(
                requests={"cpu": "100m", "memory": "64Mi"}))],
        ),
    )  # fmt: skip


@asynccontextmanager
async def extender_sample(apiserver: ApiServer, workdir: Path, *flags: str) -> AsyncIterator[str]:
    """A `kse extender-sample` process binding as admin; yields its HOST:PORT."""
    ready = workdir / "extender-ready.json"
    log_path = workdir / "extender.log"
    admin = apiserver.paths("admin")
    argv = [
        sys.executable, "-m", "kse", "extender-sample", "--listen", "127.0.0.1:0", "--ready-file", str(ready),
        "--server", apiserver.address, "--ca", str(admin.ca_bundle), "--cert", str(admin.cert),
        "--key", str(admin.key), *flags,
    ]  # fmt: skip
    proc = _spawn(argv, log_path)
    try:
        info = await wait_for_ready_file(proc, ready, log_path, "extender-sample")
        yield str(info["address"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def write_config(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONFIG_HEAD + body)
    return path


async def bound_pods(cs: Clientset) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in (await cs.pods.list(NS)).items}


async def test_filter_prioritize_and_bind_through_the_sample_extender(
    apiserver: ApiServer, pki: PKI, tmp_path: Path
) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    for n in (
        node("plain"),
        node("ok-1", ok="yes"),
        node("ok-fast", ok="yes", fast=""),
        node("ok-2", ok="yes"),
    ):
        await cs.nodes.create(n)
    async with extender_sample(
        apiserver, tmp_path, "--filter-label", "ok", "--prefer-label", "fast", "--bind"
    ) as addr:
        config = write_config(
            tmp_path / "config.yaml",
            f"extenders:\n- urlPrefix: http://{addr}/scheduler\n  filterVerb: filter\n"
            "  prioritizeVerb: prioritize\n  weight: 1\n  bindVerb: bind\n",
        )
        sched = await start_scheduler(apiserver, pki, tmp_path, "--config", str(config))
        try:
            names = [f"p{i}" for i in range(6)]
            for name in names:
                await cs.pods.create(pod(name))
            placed = await eventually(
                lambda: bound_pods(cs), lambda m: all(m.get(n) for n in names), 60, "every pod bound"
            )
            assert set(placed.values()) == {"ok-fast"}, placed
            status, body = await http_get(addr, "/stats")
            stats = json.loads(body)
            assert status == 200 and stats["bind"] == 6 and stats["filter"] >= 6 and stats["prioritize"] >= 6
            # The scheduler's own binder sent nothing: every pods/binding came from the extender.
            _, metrics = await sched.http_get("/metrics")
            binds = sample_sum(
                parse_exposition(metrics), "rest_client_requests_total", resource="pods/binding"
            )
            assert binds == 0, metrics

            # Events are written after the bind, asynchronously (the recorder batches them, as
            # upstream's broadcaster does its own): poll for the last ones.
            async def scheduled_for() -> set[str]:
                items = (await cs.events.list(NS)).items
                return {e.involved_object.name for e in items if e.reason == "Scheduled"}

            await eventually(scheduled_for, lambda got: got == set(names), 30, "a Scheduled event per pod")
        finally:
            code = await sched.stop()
        assert code == 0, sched.log()


async def test_preemption_asks_the_sample_extenders_preempt_verb(
    apiserver: ApiServer, pki: PKI, tmp_path: Path
) -> None:
    """A high-priority pod that fits nowhere: DefaultPreemption's candidates go to the sample's
    preemptVerb (upstream callExtenders), which agrees; the victim goes and the preemptor binds."""
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    full = node("full")
    for res in (full.status.capacity, full.status.allocatable):
        res["cpu"] = "1"
    await cs.nodes.create(full)
    await cs.priority_classes.create(pb.PriorityClass(metadata=pb.ObjectMeta(name="high"), value=1000))
    victim = pod("victim")
    victim.spec.node_name = "full"
    victim.spec.termination_grace_period_seconds = 0  # no kubelet here: deleted at once
    victim.spec.containers[0].resources.requests["cpu"] = "900m"
    await cs.pods.create(victim)
    async with extender_sample(apiserver, tmp_path) as addr:
        config = write_config(
            tmp_path / "config.yaml",
            f"extenders:\n- urlPrefix: http://{addr}/scheduler\n  preemptVerb: preempt\n",
        )
        sched = await start_scheduler(apiserver, pki, tmp_path, "--config", str(config))
        try:
            preemptor = pod("preemptor")
            preemptor.spec.priority_class_name = "high"
            preemptor.spec.containers[0].resources.requests["cpu"] = "900m"
            await cs.pods.create(preemptor)
            placed = await eventually(
                lambda: bound_pods(cs), lambda m: bool(m.get("preemptor")), 60, "the preemptor bound"
            )
            assert placed == {"preemptor": "full"}, placed  # the victim is gone
            status, body = await http_get(addr, "/stats")
            assert status == 200 and json.loads(body).get("preempt", 0) >= 1, body
        finally:
            code = await sched.stop()
        assert code == 0, sched.log()


async def test_unreachable_extender_ignorable_or_not(apiserver: ApiServer, pki: PKI, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]  # nothing listens here once the socket is closed
    dead = f"http://127.0.0.1:{dead_port}"
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    await cs.nodes.create(node("n1"))
    await cs.nodes.create(node("n2"))
    lenient = write_config(
        tmp_path / "lenient" / "config.yaml",
        f"profiles:\n- schedulerName: lenient\nextenders:\n- urlPrefix: {dead}\n  filterVerb: filter\n"
        "  ignorable: true\n",
    )
    strict = write_config(
        tmp_path / "strict" / "config.yaml",
        f"profiles:\n- schedulerName: strict\nextenders:\n- urlPrefix: {dead}\n  filterVerb: filter\n",
    )
    a = await start_scheduler(apiserver, pki, tmp_path / "lenient", "--config", str(lenient))
    b = await start_scheduler(apiserver, pki, tmp_path / "strict", "--config", str(strict))
    try:
        await cs.pods.create(pod("skips-the-extender", "lenient"))
        await cs.pods.create(pod("fails", "strict"))
        await eventually(
            lambda: bound_pods(cs), lambda m: bool(m.get("skips-the-extender")), 60, "the lenient pod bound"
        )
        want = f'Post "{dead}/filter": dial tcp 127.0.0.1:{dead_port}: connect: connection refused'

        async def failed_events() -> list[str]:
            return [
                e.message for e in (await cs.events.list(NS)).items
                if e.reason == "FailedScheduling" and e.involved_object.name == "fails"
            ]  # fmt: skip

        messages = await eventually(failed_events, bool, 60, "a FailedScheduling event for the strict pod")
        assert messages[0] == want
        p = await cs.pods.get(NS, "fails")
        cond = {c.type: c for c in p.status.conditions}.get("PodScheduled")
        assert cond is not None and (cond.status, cond.reason, cond.message) == (
            "False",
            "SchedulerError",
            want,
        )
        assert not p.spec.node_name
        assert "Skipping extender" in a.log()
    finally:
        codes = [await a.stop(), await b.stop()]
    assert codes == [0, 0], a.log() + b.log()


async def test_extender_over_mutual_tls(apiserver: ApiServer, pki: PKI, tmp_path: Path) -> None:
    """enableHTTPS + tlsConfig: the sample serves HTTPS and demands a client certificate; the
    scheduler verifies it with caFile and serverName and presents its own pair."""
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    await cs.nodes.create(node("plain"))
    await cs.nodes.create(node("labelled", ok="yes"))
    serving, client = pki["apiserver"], pki["scheduler-1"]
    tls_flags = (
        "--tls-cert",
        str(serving.cert),
        "--tls-key",
        str(serving.key),
        "--tls-client-ca",
        str(serving.ca_bundle),
    )
    async with extender_sample(apiserver, tmp_path, "--filter-label", "ok", *tls_flags) as addr:
        config = write_config(
            tmp_path / "config.yaml",
            f"extenders:\n- urlPrefix: https://{addr}/\n  filterVerb: filter\n  enableHTTPS: true\n"
            f"  tlsConfig:\n    serverName: localhost\n    caFile: {serving.ca_bundle}\n"
            f"    certFile: {client.cert}\n    keyFile: {client.key}\n",
        )
        sched = await start_scheduler(apiserver, pki, tmp_path, "--config", str(config))
        try:
            await cs.pods.create(pod("tls"))
            placed = await eventually(
                lambda: bound_pods(cs), lambda m: bool(m.get("tls")), 60, "the pod bound"
            )
            assert placed["tls"] == "labelled"
        finally:
            assert await sched.stop() == 0, sched.log()


async def test_the_sample_stops_gracefully_on_sigterm_sent_as_soon_as_it_is_ready(tmp_path: Path) -> None:
    """Its signal handlers are in before its ready file: a caller that signals the moment it reads
    the address gets a clean exit and the ready file removed, not the default kill."""
    ready = tmp_path / "extender-ready.json"
    log_path = tmp_path / "extender.log"
    argv = [
        sys.executable,
        "-m",
        "kse",
        "extender-sample",
        "--listen",
        "127.0.0.1:0",
        "--ready-file",
        str(ready),
    ]
    proc = _spawn(argv, log_path)
    try:
        await wait_for_ready_file(proc, ready, log_path, "extender-sample")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0, log_path.read_text()
        assert not ready.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
