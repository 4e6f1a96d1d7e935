"""nodesim and workload against a real API server, with their own PKI identities.

The simulator runs in-process as `kse:nodesim` (it may act for any node); pods are created and bound
by hand as admin, or by the workload generator as `kse:workload`. Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kse.client.clientset import Clientset
from kse.client.errors import ForbiddenError, NotFoundError
from kse.objects.timeutil import parse_time
from nodesim.kubelet import NODE_LEASE_NAMESPACE, RUNNING
from nodesim.simulator import NodeSimConfig, NodeSimulator
from nodesim.template import LABEL_HOSTNAME, LABEL_REGION, LABEL_ZONE, FleetConfig, parse_taint
from nodesim.workload import RUN_LABEL, Workload, WorkloadConfig
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import REPO_ROOT, ApiServer

pytestmark = pytest.mark.integration

T = TypeVar("T")
Mi = 1024 * 1024
DEADLINE_S = 20.0
FAST: dict[str, Any] = {"heartbeat_interval": 0.3, "node_status_batch_interval": 0.1, "stats_interval": 0.0}


async def eventually(
    check: Callable[[], Awaitable[T | None]], what: str, deadline_s: float = DEADLINE_S
) -> T:
    """Poll `check` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + deadline_s
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(0.05)


async def clientset(apiserver: ApiServer, identity: str) -> Clientset:
    return Clientset(await apiserver.channel(identity), qps=0, burst=1)


def make_pod(name: str, image: str = "example.com/app:v1", namespace: str = "default") -> pb.Pod:
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace=namespace),
        spec=pb.PodSpec(containers=[pb.Container(name="app", image=image)]),
    )


async def bind(admin: Clientset, pod: pb.Pod, node: str) -> pb.Pod:
    return await admin.pods.bind(
        pb.Binding(
            metadata=pb.ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace),
            target=pb.ObjectReference(kind="Node", name=node),
        )
    )


def ready(node: pb.Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def image_names(node: pb.Node) -> set[str]:
    return {n for i in node.status.images for n in i.names}


# ---------------------------------------------------------------- nodes and heartbeats


async def test_nodes_register_ready_with_labels_and_renewing_leases(apiserver: ApiServer) -> None:
    cs, admin = await clientset(apiserver, "nodesim"), await clientset(apiserver, "admin")
    fleet = FleetConfig(
        count=5,
        name_prefix="sim-",
        zones=("zone-a", "zone-b", "zone-c"),
        region="region-x",
        taints=(parse_taint("dedicated=infra:NoSchedule"),),
        taint_fraction=0.4,
        images={"registry.k8s.io/pause:3.10": 700 * 1024},
        image_fraction=1.0,
        seed=1,
    )
    async with NodeSimulator(cs, NodeSimConfig(fleet=fleet, **FAST)).running() as sim:
        nodes = {n.metadata.name: n for n in (await admin.nodes.list()).items}
        assert sorted(nodes) == [f"sim-{i}" for i in range(5)]
        for i in range(5):
            n = nodes[f"sim-{i}"]
            assert ready(n), n.status.conditions
            labels = n.metadata.labels
            assert labels[LABEL_ZONE] == ("zone-a", "zone-b", "zone-c")[i % 3]
            assert labels[LABEL_REGION] == "region-x" and labels[LABEL_HOSTNAME] == f"sim-{i}"
            assert n.status.allocatable["cpu"] == "4" and n.status.allocatable["pods"] == "110"
            assert "registry.k8s.io/pause:3.10" in image_names(n)
        assert sum(1 for n in nodes.values() if n.spec.taints) == 2

        leases = {le.metadata.name: le for le in (await admin.leases.list(NODE_LEASE_NAMESPACE)).items}
        assert sorted(leases) == sorted(nodes)
        for name, lease in leases.items():
            assert lease.spec.holder_identity == name and lease.spec.lease_duration_seconds == 40
            assert [o.uid for o in lease.metadata.owner_references] == [nodes[name].metadata.uid]
        first = {name: parse_time(le.spec.renew_time) for name, le in leases.items()}

        async def all_renewed() -> bool:
            now = {
                le.metadata.name: parse_time(le.spec.renew_time)
                for le in (await admin.leases.list(NODE_LEASE_NAMESPACE)).items
            }
            return all(now[n] > first[n] for n in first)

        await eventually(all_renewed, "every lease renewed")
        assert sim.stats.lease_failures == 0
        # One pod watch for all nodes, never one per node.
        assert sim.informer.reflector.watches == 1
        assert cs.metrics.count("watch", "pods") == 0  # still open: counted when it ends


# ---------------------------------------------------------------- bound pods


async def test_bound_pod_runs_gains_image_and_is_forgotten_when_deleted(apiserver: ApiServer) -> None:
    cs, admin = await clientset(apiserver, "nodesim"), await clientset(apiserver, "admin")
    cfg = NodeSimConfig(
        fleet=FleetConfig(count=2, name_prefix="run-"),
        image_pull_bandwidth=20.0 * Mi,
        default_image_size=2 * Mi,  # a 0.1 s pull
        termination_delay=0.5,
        **FAST,
    )
    async with NodeSimulator(cs, cfg).running() as sim:
        node = sim.nodes["run-1"]
        created = await admin.pods.create(make_pod("web"))
        await bind(admin, created, "run-1")

        async def running() -> pb.Pod | None:
            pod = await admin.pods.get("default", "web")
            return pod if pod.status.phase == "Running" else None

        pod = await eventually(running, "the pod Running")
        st = pod.status
        assert ipaddress.ip_address(st.pod_ip) in node.spec.pod_cidr
        assert st.host_ip == node.internal_ip and st.start_time
        assert {c.type for c in st.conditions if c.status == "True"} >= {
            "PodScheduled",
            "Initialized",
            "ContainersReady",
            "Ready",
        }
        assert [(c.name, c.ready) for c in st.container_statuses] == [("app", True)]

        async def image_listed() -> bool:
            return "example.com/app:v1" in image_names(await admin.nodes.get("run-1"))

        await eventually(image_listed, "the pulled image in the node's status.images")
        assert "example.com/app:v1" not in image_names(await admin.nodes.get("run-0"))
        assert node.pods["default/web"].state == RUNNING

        # A second pod on the same node gets another IP; the image is cached now.
        second = await admin.pods.create(make_pod("web2"))
        await bind(admin, second, "run-1")

        async def second_running() -> pb.Pod | None:
            p = await admin.pods.get("default", "web2")
            return p if p.status.phase == "Running" else None

        assert (await eventually(second_running, "web2 Running")).status.pod_ip != st.pod_ip

        # A graceful delete (the default 30 s): Terminating, containers stopped, then removed by the
        # simulated kubelet, here after its 0.5 s --termination-delay.
        terminating = await admin.pods.delete("default", "web")
        assert terminating.metadata.deletion_timestamp
        assert terminating.metadata.deletion_grace_period_seconds == 30

        async def stopped() -> pb.Pod | None:
            try:
                p = await admin.pods.get("default", "web")
            except NotFoundError:
                return None
            ready = {c.type: c.status for c in p.status.conditions}.get("Ready")
            return p if ready == "False" else None

        stopping = await eventually(stopped, "the terminating pod's containers reported stopped")
        assert stopping.status.phase == "Running" and stopping.metadata.deletion_timestamp
        assert [(c.name, c.ready) for c in stopping.status.container_statuses] == [("app", False)]

        async def forgotten() -> bool:
            return "default/web" not in node.pods

        await eventually(forgotten, "the deleted pod gone from the simulator's bookkeeping")
        with pytest.raises(NotFoundError):
            await admin.pods.get("default", "web")
        assert len(node.ipam) == 1  # web's address was released
        assert sim.stats.pods_started == 2 and sim.stats.pods_deleted == 1


async def test_restarted_simulator_adopts_its_nodes_and_running_pods(apiserver: ApiServer) -> None:
    cs, admin = await clientset(apiserver, "nodesim"), await clientset(apiserver, "admin")
    cfg = NodeSimConfig(fleet=FleetConfig(count=1, name_prefix="again-"), image_pull_bandwidth=0, **FAST)
    async with NodeSimulator(cs, cfg).running():
        await bind(admin, await admin.pods.create(make_pod("kept")), "again-0")

        async def running() -> pb.Pod | None:
            p = await admin.pods.get("default", "kept")
            return p if p.status.phase == "Running" else None

        before = await eventually(running, "the pod Running")
    lease_before = await admin.leases.get(NODE_LEASE_NAMESPACE, "again-0")

    async with NodeSimulator(cs, cfg).running() as sim:

        async def adopted() -> bool:
            return sim.stats.pods_adopted == 1

        await eventually(adopted, "the running pod adopted")
        assert sim.stats.pods_started == 0
        assert sim.nodes["again-0"].pods["default/kept"].ip == before.status.pod_ip
        after = await admin.pods.get("default", "kept")
        assert after.metadata.resource_version == before.metadata.resource_version  # not rewritten

        async def lease_renewed() -> bool:
            lease = await admin.leases.get(NODE_LEASE_NAMESPACE, "again-0")
            return parse_time(lease.spec.renew_time) > parse_time(lease_before.spec.renew_time)

        await eventually(lease_renewed, "the existing lease renewed by the new process")
        assert ready(await admin.nodes.get("again-0"))


async def test_an_identity_without_node_rights_fails_clearly(apiserver: ApiServer) -> None:
    wcs = await clientset(apiserver, "workload")  # may read nodes, not create them
    sim = NodeSimulator(wcs, NodeSimConfig(fleet=FleetConfig(count=2), **FAST))
    with pytest.raises(ForbiddenError, match="cannot create resource"):
        async with sim.running():
            pytest.fail("registered without the right to create nodes")


async def test_delete_nodes_on_exit(apiserver: ApiServer) -> None:
    # As admin: the authorization table does not (yet) let kse:nodesim delete nodes or leases.
    admin = await clientset(apiserver, "admin")
    cfg = NodeSimConfig(fleet=FleetConfig(count=3, name_prefix="gone-"), delete_nodes_on_exit=True, **FAST)
    async with NodeSimulator(admin, cfg).running():
        assert len((await admin.nodes.list()).items) == 3
    assert (await admin.nodes.list()).items == []
    assert (await admin.leases.list(NODE_LEASE_NAMESPACE)).items == []


# ---------------------------------------------------------------- the workload


async def test_workload_creates_pods_at_a_rate(apiserver: ApiServer) -> None:
    wcs = await clientset(apiserver, "workload")
    cfg = WorkloadConfig(rate=20, total=20, run_id="rate1")
    summary = await Workload(wcs, cfg).run()
    assert summary.created == 20 and summary.failed == {} and summary.attempted == 20
    assert summary.stopped_by == "total"
    # 20 pods due over 0.95 s: the run takes about that long, and the rate is about 20 pods/s.
    assert 0.9 <= summary.duration_s < 5.0
    assert 4.0 < summary.achieved_rate <= 22.0
    pods = (await wcs.pods.list("default", label_selector=f"{RUN_LABEL}=rate1")).items
    assert sorted(p.metadata.name for p in pods) == sorted(summary.names)
    assert all(p.spec.containers[0].resources.requests["cpu"] == "100m" for p in pods)
    # Names are unique per run: the same run id again collides, and is counted by code.
    again = await Workload(wcs, WorkloadConfig(total=3, run_id="rate1")).run()
    assert again.created == 0 and again.failed == {"ALREADY_EXISTS": 3}


async def test_churn_with_simulated_nodes(apiserver: ApiServer) -> None:
    """workload -> (a test binder) -> nodesim Running -> workload deletes it: the whole loop."""
    cs, admin = await clientset(apiserver, "nodesim"), await clientset(apiserver, "admin")
    wcs = await clientset(apiserver, "workload")
    cfg = NodeSimConfig(fleet=FleetConfig(count=3, name_prefix="churn-"), image_pull_bandwidth=0, **FAST)

    async def binder() -> None:
        k = 0
        while True:
            for pod in (await admin.pods.list("default", field_selector="spec.nodeName=")).items:
                await bind(admin, pod, f"churn-{k % 3}")
                k += 1
            await asyncio.sleep(0.05)

    async with NodeSimulator(cs, cfg).running() as sim:
        task = asyncio.create_task(binder())
        try:
            wl = Workload(
                wcs,
                WorkloadConfig(rate=10, total=6, delete_after=0.2, drain_timeout=DEADLINE_S, run_id="churn"),
            )
            summary = await asyncio.wait_for(wl.run(), DEADLINE_S + 10)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert summary.created == 6 and summary.running_seen == 6
        assert summary.deleted == 6 and summary.pending_deletes == 0 and summary.delete_failed == {}
        assert (await wcs.pods.list("default", label_selector=f"{RUN_LABEL}=churn")).items == []

        async def forgotten() -> bool:
            return all(not n.pods for n in sim.nodes.values())

        await eventually(forgotten, "every churned pod gone from the simulator")
        assert sim.stats.pods_started == 6


# ---------------------------------------------------------------- the processes


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


async def test_cli_processes(apiserver: ApiServer, tmp_path: Path) -> None:
    ready_file = tmp_path / "nodesim.ready"
    log_path = tmp_path / "nodesim.log"
    conn = ["--server", apiserver.address, "--pki-dir", str(apiserver.pki.dir)]
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kse",
            "nodesim",
            *conn,
            "--nodes",
            "3",
            "--zones",
            "a,b",
            "--heartbeat-interval",
            "500ms",
            "--ready-file",
            str(ready_file),
            "--log-level",
            "debug",
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env=_env(),
        )
    try:

        async def is_ready() -> dict[str, Any] | None:
            if proc.returncode is not None:
                raise AssertionError(f"nodesim exited with {proc.returncode}: {log_path.read_text()}")
            return json.loads(ready_file.read_text()) if ready_file.exists() else None

        info = await eventually(is_ready, "the nodesim ready file")
        assert info == {"nodes": 3, "pid": proc.pid}
        admin = await clientset(apiserver, "admin")
        nodes = (await admin.nodes.list()).items
        assert sorted(n.metadata.name for n in nodes) == ["nodesim-0", "nodesim-1", "nodesim-2"]
        assert all(ready(n) for n in nodes)

        wl = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kse",
            "workload",
            *conn,
            "--rate",
            "10",
            "--total",
            "5",
            "--json",
            "--run-id",
            "cli",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO_ROOT,
            env=_env(),
        )
        out, err = await asyncio.wait_for(wl.communicate(), DEADLINE_S)
        assert wl.returncode == 0, err.decode()
        summary = json.loads(out)
        assert summary["created"] == 5 and summary["failed"] == {} and summary["run_id"] == "cli"
        assert summary["achieved_rate"] > 0 and summary["duration_s"] > 0

        # Unbounded, until SIGTERM: in-flight creates finish, and the summary still comes out.
        wl_ready = tmp_path / "workload.ready"
        wl = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kse",
            "workload",
            *conn,
            "--rate",
            "20",
            "--json",
            "--run-id",
            "sig",
            "--ready-file",
            str(wl_ready),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=REPO_ROOT,
            env=_env(),
        )
        wcs = await clientset(apiserver, "workload")

        async def some_created() -> bool:
            return len((await wcs.pods.list("default", label_selector=f"{RUN_LABEL}=sig")).items) >= 3

        await eventually(some_created, "the unbounded workload to create pods")
        assert json.loads(wl_ready.read_text())["run_id"] == "sig"
        wl.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(wl.communicate(), DEADLINE_S)
        assert wl.returncode == 0, err.decode()
        summary = json.loads(out)
        assert summary["stopped_by"] == "signal" and summary["failed"] == {}
        listed = (await wcs.pods.list("default", label_selector=f"{RUN_LABEL}=sig")).items
        assert summary["created"] == len(listed) >= 3

        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), DEADLINE_S)
        assert code == 0, log_path.read_text()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
