"""Graceful deletion from the command line: `kse delete` with kubectl's --grace-period / --now /
--force / --wait, and the real kubectl against the HTTP API (it waits for the pod to go; `get`
shows Terminating), with nodesim as the kubelet that ends terminating pods."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kse.client.clientset import Clientset
from kse.client.errors import NotFoundError
from nodesim.simulator import NodeSimConfig, NodeSimulator
from nodesim.template import FleetConfig
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import kubectl
from tests.integration.test_cli import kse

pytestmark = pytest.mark.integration

NS = "default"
FAST = {"heartbeat_interval": 0.3, "node_status_batch_interval": 0.1, "stats_interval": 0.0}
FORCE_WARNING = "Warning: Immediate deletion does not wait for confirmation"


@pytest.fixture
def config(apiserver: ApiServer, tmp_path: Path) -> str:
    path = tmp_path / "admin.json"
    apiserver.connection("admin").save(path)
    return str(path)


async def bound_pod(cs: Clientset, name: str, node: str) -> pb.Pod:
    pod = pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace=NS),
        spec=pb.PodSpec(containers=[pb.Container(name="c", image="registry.k8s.io/pause:3.10")]),
    )
    await cs.pods.create(pod)
    binding = pb.Binding(metadata=pb.ObjectMeta(name=name, namespace=NS))
    binding.target.kind, binding.target.name = "Node", node
    return await cs.pods.bind(binding)


async def test_kse_delete_grace_period_now_force_and_wait(apiserver: ApiServer, config: str) -> None:
    admin = Clientset(await apiserver.channel("admin"), qps=0, burst=0)
    await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="no-kubelet")))
    await bound_pod(admin, "p", "no-kubelet")

    r = await kse("delete", "pod", "p", "--no-wait", "--config", config)
    assert (r.code, r.out) == (0, 'pod "p" deleted\n'), r.err
    p = await admin.pods.get(NS, "p")
    assert p.metadata.deletion_grace_period_seconds == 30  # the pod's default period
    r = await kse("get", "pods", "--config", config)
    assert r.out.splitlines()[1].split()[2] == "Terminating", r.out

    r = await kse("delete", "pod", "p", "--now", "--grace-period", "5", "--config", config)
    assert (r.code, r.err.strip()) == (1, "error: --now and --grace-period cannot be specified together")
    # --grace-period=0 without --force means 1 s; nothing ends the pod here, so the wait times out.
    r = await kse("delete", "pod", "p", "--grace-period=0", "--timeout", "1s", "--config", config)
    assert r.code == 1 and "timed out waiting for the condition on pods/p" in r.err, r
    assert (await admin.pods.get(NS, "p")).metadata.deletion_grace_period_seconds == 1
    # --force: grace 0, removed at once (with kubectl's warning).
    r = await kse("delete", "pod", "p", "--force", "--config", config)
    assert (r.code, r.out) == (0, 'pod "p" deleted\n') and FORCE_WARNING in r.err, r
    with pytest.raises(NotFoundError):
        await admin.pods.get(NS, "p")


async def test_kse_and_kubectl_delete_wait_for_the_kubelet_to_end_the_pod(
    apiserver: ApiServer, config: str, tmp_path: Path
) -> None:
    admin = Clientset(await apiserver.channel("admin"), qps=0, burst=0)
    sim_cs = Clientset(await apiserver.channel("nodesim"), qps=0, burst=1)
    kubeconfig = apiserver.kubeconfig(tmp_path / "kubeconfig", "admin")
    cfg = NodeSimConfig(
        fleet=FleetConfig(count=1, name_prefix="gd-"), image_pull_bandwidth=0, termination_delay=1.0, **FAST
    )
    async with NodeSimulator(sim_cs, cfg).running() as sim:
        await bound_pod(admin, "a", "gd-0")
        await bound_pod(admin, "b", "gd-0")
        r = await kse("delete", "pod", "a", "--config", config)  # waits: returns once nodesim deleted it
        assert (r.code, r.out) == (0, 'pod "a" deleted\n'), r.err
        with pytest.raises(NotFoundError):
            await admin.pods.get(NS, "a")
        # kubectl in a thread: nodesim runs on this event loop.
        out = await asyncio.to_thread(kubectl, kubeconfig, "delete", "pod", "b", "--timeout=20s")
        assert out.stdout.strip() == 'pod "b" deleted', out
        with pytest.raises(NotFoundError):
            await admin.pods.get(NS, "b")
        assert sim.stats.pods_finalized == 2

    # Without a kubelet, kubectl get shows the pod Terminating until a forced delete removes it.
    await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="ghost")))
    await bound_pod(admin, "c", "ghost")
    await admin.pods.delete(NS, "c")
    out = await asyncio.to_thread(kubectl, kubeconfig, "get", "pods", "--no-headers")
    assert out.stdout.split()[:3] == ["c", "0/1", "Terminating"], out.stdout
    out = await asyncio.to_thread(kubectl, kubeconfig, "delete", "pod", "c", "--force", "--grace-period=0")
    assert 'pod "c" force deleted' in out.stdout, out
