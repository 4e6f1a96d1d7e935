"""The ImagePrePull sample Permit plugin against a real API server, a real Scheduler and nodesim.

The scheduler (in this process, as `system:kube-scheduler`) runs a profile with ImagePrePull at
Permit; nodesim (in this process, as `kse:nodesim`, `pre_pull_events=True`) pulls what the
plugin's PrePullImages events ask. A pod whose image arrives within the wait is bound only once the
node lists it; a pod whose image cannot arrive in time is rejected by the timeout with upstream's
message, the wait capped by `--permit-wait-timeout` (SchedulerOptions.permit_wait_timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kse.client.clientset import Clientset
from kse.objects.prepull import REASON_PRE_PULL, parse_pre_pull_message
from nodesim.simulator import NodeSimConfig, NodeSimulator
from nodesim.template import FleetConfig
from proto import kse_pb2 as pb
from scheduler.profile import load_scheduler_config
from scheduler.scheduler import Scheduler, SchedulerOptions
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.objects import NS
from tests.fixtures.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

Mi = 1024 * 1024
SMALL = "example.com/small:1"  # 4 MiB at 20 MiB/s: 0.2 s
HUGE = "example.com/huge:1"  # 20 GiB at 20 MiB/s: 17 min, far beyond the wait
CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    permit:
      enabled:
      - name: ImagePrePull
  pluginConfig:
  - name: ImagePrePull
    args:
      timeout: 10m
"""


def pod(name: str, image: str) -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=NS))
    c = p.spec.containers.add(name="c", image=image, image_pull_policy="IfNotPresent")
    c.resources.requests.update({"cpu": "100m"})
    return p


def listed(node: pb.Node) -> set[str]:
    return {n for i in node.status.images for n in i.names}


@pytest.fixture
async def cluster(apiserver: ApiServer) -> AsyncIterator[tuple[Scheduler, Clientset, NodeSimulator]]:
    admin = Clientset(await apiserver.channel("admin"), qps=0)
    sim = NodeSimulator(
        Clientset(await apiserver.channel("nodesim"), qps=0),
        NodeSimConfig(
            fleet=FleetConfig(count=1, name_prefix="pp-"),
            image_sizes={SMALL: 4 * Mi, HUGE: 20 * 1024 * Mi},
            image_pull_bandwidth=20.0 * Mi,
            node_status_batch_interval=0.1,
            heartbeat_interval=1.0,
            stats_interval=0.0,
            pre_pull_events=True,
        ),
    )
    cs = Clientset(await apiserver.channel("scheduler-1"), qps=0)
    # The plugin asks for 10m; the flag caps every Permit wait at 1.5 s.
    sched = Scheduler(
        load_scheduler_config(CONFIG), cs, options=SchedulerOptions(identity="test", permit_wait_timeout=1.5)
    )
    async with sim.running():
        task = asyncio.create_task(sched.run())
        await asyncio.wait_for(sched.synced.wait(), 15)
        try:
            yield sched, admin, sim
        finally:
            sched.stop()
            try:
                await asyncio.wait_for(task, 10)
            finally:
                task.cancel()


async def test_pod_is_held_until_its_image_is_on_the_node(
    cluster: tuple[Scheduler, Clientset, NodeSimulator],
) -> None:
    sched, admin, sim = cluster
    assert SMALL not in listed(await admin.nodes.get("pp-0"))
    await admin.pods.create(pod("held", SMALL))

    bound = await eventually(
        lambda: admin.pods.get(NS, "held"), lambda p: bool(p.spec.node_name), "the pod bound", within=30
    )
    assert bound.spec.node_name == "pp-0"
    # Bound only after the node reported the image: it is listed by now, pulled by the pre-pull.
    assert SMALL in listed(await admin.nodes.get("pp-0"))
    assert sim.stats.pre_pull_requests >= 1
    assert sched.metrics.permit_wait_duration.count("success") == 1

    # The event is recorded before the bind but written asynchronously (batched): poll for it.
    async def asks() -> list[tuple[str, list[str]] | None]:
        items = (await admin.events.list(NS)).items
        return [parse_pre_pull_message(e.message) for e in items if e.reason == REASON_PRE_PULL]

    await eventually(asks, lambda got: ("pp-0", [SMALL]) in got, "the pre-pull event", within=30)
    await eventually(
        lambda: admin.pods.get(NS, "held"), lambda p: p.status.phase == "Running", "the pod Running"
    )

    # The image is there now: the next pod with it does not wait at all.
    await admin.pods.create(pod("at-once", SMALL))
    await eventually(
        lambda: admin.pods.get(NS, "at-once"), lambda p: bool(p.spec.node_name), "the second pod bound"
    )
    assert sched.metrics.permit_wait_duration.count("success") == 1


async def test_pod_is_rejected_after_the_timeout(cluster: tuple[Scheduler, Clientset, NodeSimulator]) -> None:
    sched, admin, _ = cluster
    await admin.pods.create(pod("too-big", HUGE))

    def rejected(p: pb.Pod) -> Any:
        return next(
            (c for c in p.status.conditions if c.type == "PodScheduled" and c.status == "False"), None
        )

    got = await eventually(
        lambda: admin.pods.get(NS, "too-big"), rejected, "the pod rejected at Permit", within=30
    )
    cond = rejected(got)
    assert "rejected due to timeout after waiting 1.5s at plugin ImagePrePull" in cond.message
    assert not got.spec.node_name
    assert sched.metrics.permit_wait_duration.count("failure") >= 1
