"""Two schedulers that do not coordinate over-commit nodes, and `no_overcommit` catches it.

Two `kse scheduler` processes with `--leader-elect=false`, each with its own profile
(schedulerName `sched-a` / `sched-b`: the documented way to run several schedulers, and what
running replicas without election amounts to), share two nodes of 1 CPU. Each gets four pods of
500m. Each binder is held back 1 s by the `binder/bind` failpoint, so both have placed all their
pods in their own caches before either sees the other's binds: 8 pods x 500m land on 2 CPUs. The
check over the audit log and the final snapshot must fail; with one scheduler it passes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.checker.invariants import no_overcommit
from chaos.history import History
from kse.audit import read_audit_log
from kse.client.clientset import Clientset
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServerFactory, make_pod
from tests.fixtures.polling import eventually, truthy
from tests.fixtures.procs import spawn

pytestmark = pytest.mark.integration

PODS_EACH = 4


def node(name: str) -> pb.Node:
    n = pb.Node(metadata=pb.ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}))
    for field in (n.status.capacity, n.status.allocatable):
        field.update({"cpu": "1", "memory": "8Gi", "pods": "110"})
    return n


def scheduler(
    apiserver_address: str, pki: object, stem: str, name: str, workdir: Path
) -> subprocess.Popen[bytes]:
    ident = pki[stem]  # type: ignore[index]
    config = workdir / f"{name}.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"profiles:\n- schedulerName: {name}\n"
    )
    ready = workdir / f"{name}.ready"
    argv = [
        sys.executable, "-m", "kse", "scheduler", "--server", apiserver_address,
        "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
        "--config", str(config), "--leader-elect=false", "--kube-api-qps", "500", "--kube-api-burst", "500",
        "--metrics-bind-address", "127.0.0.1:0", "--ready-file", str(ready),
        "--failpoints", "binder/bind=delay(1000)",
    ]  # fmt: skip
    return spawn(argv, workdir / f"{name}.log")


@pytest.mark.parametrize("schedulers", [1, 2], ids=["one-scheduler", "two-unelected-schedulers"])
async def test_no_overcommit_catches_two_unelected_schedulers(
    apiserver_factory: ApiServerFactory, tmp_path: Path, schedulers: int
) -> None:
    audit = tmp_path / "audit.jsonl"
    server = await apiserver_factory("--audit-log", str(audit))
    cs = Clientset(await server.channel("admin"), qps=0, burst=0)
    for name in ("n1", "n2"):
        await cs.nodes.create(node(name))
    names = ["sched-a", "sched-b"][:schedulers]
    procs = [
        scheduler(server.address, server.pki, f"scheduler-{i + 1}", name, tmp_path)
        for i, name in enumerate(names)
    ]
    try:
        for name in names:
            await truthy(lambda n=name: (tmp_path / f"{n}.ready").exists(), 30, f"{name} ready")
        pods = []
        for name in names:
            for i in range(PODS_EACH):
                pod = make_pod(f"{name}-{i}").pod
                pod.spec.scheduler_name = name
                pod.spec.containers[0].resources.requests["cpu"] = "500m"
                pods.append(pod)
        await asyncio.gather(*(cs.pods.create(p) for p in pods))
        want = 4  # what fits: 2 nodes x 1 CPU / 500m; with two schedulers both fill the nodes

        async def bound() -> int:
            return sum(1 for p in (await cs.pods.list("default")).items if p.spec.node_name)

        got = await eventually(bound, lambda n: n >= want * (2 if schedulers == 2 else 1), "pods bound", 30)
        final = (await cs.pods.list("default")).items
        nodes = (await cs.nodes.list()).items
    finally:
        for p in procs:
            p.kill()
            p.wait()
    history = History(audit=list(read_audit_log(audit)), pods=list(final), nodes=list(nodes))
    result = no_overcommit(history)
    if schedulers == 1:
        assert got == want and result.passed, result.detail
    else:
        assert got == 2 * want
        assert not result.passed, result.detail
        assert {v["node"] for v in result.violations if "node" in v} == {"n1", "n2"}, result.violations
    print(json.dumps(result.to_dict(max_violations=3)))
