"""nodesim's registry pull model against a real API server: pull policies and bytes pulled.

Pods are created and bound by hand as admin; the simulator runs in-process as `kse:nodesim` with
`registry_bandwidth` set (the fleet-wide model). Every wait polls with a deadline.
"""

from __future__ import annotations

import pytest

from kse.client.clientset import Clientset
from nodesim.simulator import NodeSimConfig, NodeSimulator
from nodesim.template import FleetConfig
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

Mi = 1024 * 1024
NS = "default"
APP = "example.com/app:1"  # 4 MiB: 0.1 s at 40 MiB/s
CACHED = "example.com/cached:1"  # on the node from the start


def pod(name: str, image: str, policy: str) -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=NS))
    p.spec.containers.add(name="c", image=image, image_pull_policy=policy)
    return p


async def bind(admin: Clientset, p: pb.Pod, node: str) -> None:
    created = await admin.pods.create(p)
    await admin.pods.bind(
        pb.Binding(
            metadata=pb.ObjectMeta(name=created.metadata.name, namespace=NS),
            target=pb.ObjectReference(kind="Node", name=node),
        )
    )


async def phase(admin: Clientset, name: str) -> str:
    return (await admin.pods.get(NS, name)).status.phase


async def test_pull_policies_and_bytes_pulled(apiserver: ApiServer) -> None:
    admin = Clientset(await apiserver.channel("admin"), qps=0)
    cfg = NodeSimConfig(
        fleet=FleetConfig(count=1, name_prefix="reg-", images={CACHED: 8 * Mi}, image_fraction=1.0),
        image_sizes={APP: 4 * Mi},
        image_pull_bandwidth=40.0 * Mi,
        registry_bandwidth=80.0 * Mi,
        always_pull_check_s=0.05,
        node_status_batch_interval=0.1,
        heartbeat_interval=1.0,
        stats_interval=0.0,
    )
    sim = NodeSimulator(Clientset(await apiserver.channel("nodesim"), qps=0), cfg)
    async with sim.running():
        # Never, image absent: stays Pending, counted.
        await bind(admin, pod("never", APP, "Never"), "reg-0")
        await eventually(lambda: sim.stats.pods_waiting_never_pull, lambda n: n == 1, "the Never pod noticed")
        # Always on a cached image: starts after the manifest check, pulls nothing.
        await bind(admin, pod("always", CACHED, "Always"), "reg-0")
        await eventually(lambda: phase(admin, "always"), lambda p: p == "Running", "the Always pod Running")
        assert sim.stats.bytes_pulled == 0
        assert await phase(admin, "never") == "Pending"
        # IfNotPresent, absent: pulled (4 MiB); the Never pod then finds its image and starts too.
        await bind(admin, pod("pulls", APP, "IfNotPresent"), "reg-0")
        await eventually(lambda: phase(admin, "pulls"), lambda p: p == "Running", "the pulling pod Running")
        await eventually(lambda: phase(admin, "never"), lambda p: p == "Running", "the Never pod Running")
        assert (sim.stats.images_pulled, sim.stats.bytes_pulled) == (1, 4 * Mi)

        async def listed() -> set[str]:
            node = await admin.nodes.get("reg-0")
            return {n for i in node.status.images for n in i.names}

        await eventually(listed, lambda names: {APP, CACHED} <= names, "both images in status.images")
