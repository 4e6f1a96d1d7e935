"""The Scheduler in this process against a real API server: binds the API server refuses.

A pod bound by someone else, or deleted, between our decision and our bind gets ABORTED /
NOT_FOUND. The scheduler must forget its assumed pod, not requeue the pod, leave its status alone,
and account the attempt as an error; the cache must end with the truth (the other binding).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kse.client.clientset import Clientset
from proto import kse_pb2 as pb
from scheduler.framework.plugins.registry import REGISTRY
from scheduler.framework.types import Code, Status
from scheduler.profile import load_scheduler_config
from scheduler.scheduler import Scheduler, SchedulerOptions
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.objects import NS, cpu_pod, small_node
from tests.fixtures.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
async def env(apiserver: ApiServer) -> AsyncIterator[tuple[Scheduler, Clientset]]:
    admin = Clientset(await apiserver.channel("admin"), qps=0)
    for name in ("n1", "n2"):
        await admin.nodes.create(small_node(name))
    cs = Clientset(await apiserver.channel("scheduler-1"), qps=0)
    sched = Scheduler(load_scheduler_config(), cs, options=SchedulerOptions(identity="test"))
    task = asyncio.create_task(sched.run())
    await asyncio.wait_for(sched.synced.wait(), 15)
    try:
        yield sched, admin
    finally:
        sched.stop()
        try:
            await asyncio.wait_for(task, 10)
        finally:
            task.cancel()


@pytest.mark.parametrize("interference", ["bound elsewhere", "deleted"])
async def test_a_refused_bind_is_not_retried(env: tuple[Scheduler, Clientset], interference: str) -> None:
    sched, admin = env
    real_bind = sched.binder.bind
    interfered: list[str] = []

    async def bind_after_interference(p: pb.Pod, node_name: str) -> pb.Pod:
        other = "n2" if node_name == "n1" else "n1"
        if interference == "bound elsewhere":
            binding = pb.Binding(metadata=pb.ObjectMeta(namespace=NS, name=p.metadata.name))
            binding.target.name = other
            await admin.pods.bind(binding)
        else:
            await admin.pods.delete(NS, p.metadata.name)
        interfered.append(other)
        return await real_bind(p, node_name)

    sched.binder.bind = bind_after_interference  # type: ignore[method-assign]
    await admin.pods.create(cpu_pod("p"))

    def errors() -> float:
        return sched.metrics.schedule_attempts.value("error", "default-scheduler")

    await eventually(errors, lambda n: n == 1, "the failed attempt")
    assert sched.binder.failures == 1
    assert sched.attempts == 1
    # Not requeued, nor in flight: the pod is gone from the queue for good.
    assert sched.queue.where(f"{NS}/p") == []
    assert sched.queue.in_flight_pods() == []
    assert sum(sched.queue.pending_pods().values()) == 0

    if interference == "bound elsewhere":
        # The cache holds the truth: the pod on the other node, confirmed, not assumed.
        def cached() -> list[tuple[str, str, bool]]:
            return [(info.pod.metadata.name, n, assumed) for info, n, assumed in sched.cache.pods()]

        await eventually(cached, lambda c: c == [("p", interfered[0], False)], "the bound pod in the cache")
        stored = await admin.pods.get(NS, "p")
        assert stored.spec.node_name == interfered[0]
        # Its status was not touched: PodScheduled is the binding's True.
        conds = {c.type: c for c in stored.status.conditions}
        assert conds["PodScheduled"].status == "True"
    else:
        assert sched.cache.pod_count() == 0
    assert sched.cache.assumed_pod_count() == 0
    # A later pod still schedules normally.
    sched.binder.bind = real_bind  # type: ignore[method-assign]
    await admin.pods.create(cpu_pod("q"))
    q = await eventually(lambda: admin.pods.get(NS, "q"), lambda p: bool(p.spec.node_name), "q bound")
    assert q.spec.node_name in ("n1", "n2")
    assert sched.attempts == 2


async def test_unschedulable_condition_written_once_per_change(env: tuple[Scheduler, Clientset]) -> None:
    sched, admin = env
    big = cpu_pod("big")
    big.spec.containers[0].resources.requests["cpu"] = "64"
    await admin.pods.create(big)
    p = await eventually(
        lambda: admin.pods.get(NS, "big"),
        lambda p: any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in p.status.conditions),
        "the Unschedulable condition",
    )
    cond = next(c for c in p.status.conditions if c.type == "PodScheduled")
    assert cond.status == "False"
    assert cond.message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    )
    rv = p.metadata.resource_version
    # Force another attempt with the same outcome: the condition is unchanged, so no write.
    sched.queue.activate([p])
    await eventually(lambda: sched.attempts, lambda n: n >= 2, "a second attempt")
    await sched.status.wait_idle()
    assert (await admin.pods.get(NS, "big")).metadata.resource_version == rv
    assert sched.status.written == 1


GANG = "Gang"


class GangPermit:
    """Holds every pod at Permit until `size` pods wait, then lets them all go (a coscheduling
    plugin in miniature)."""

    def __init__(self, handle: Any, size: int) -> None:
        self._handle = handle
        self._size = size

    def name(self) -> str:
        return GANG

    def permit(self, state: Any, pod_info: Any, node_name: str) -> tuple[Status | None, float]:
        waiting = len(self._handle.waiting_pods)
        if waiting + 1 < self._size:
            return Status(Code.WAIT), 30.0
        self._handle.iterate_over_waiting_pods(lambda wp: wp.allow(GANG))
        return None, 0.0


async def test_pods_waiting_at_permit_do_not_hold_binding_slots(apiserver: ApiServer) -> None:
    """A gang of 4 with only 2 binding slots: were waiting pods to hold slots, the loop would stop
    after 2 pods and the gang would never complete."""
    registry = dict(REGISTRY)
    registry[GANG] = lambda args, handle: GangPermit(handle, size=4)
    cfg = load_scheduler_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    permit:\n      enabled:\n"
        f"      - name: {GANG}\n",
        registry=registry,
    )
    admin = Clientset(await apiserver.channel("admin"), qps=0)
    await admin.nodes.create(small_node("n1"))
    cs = Clientset(await apiserver.channel("scheduler-1"), qps=0)
    sched = Scheduler(cfg, cs, options=SchedulerOptions(max_binds_in_flight=2), registry=registry)
    task = asyncio.create_task(sched.run())
    try:
        for i in range(4):
            await admin.pods.create(cpu_pod(f"g{i}"))
        pods = await eventually(
            lambda: admin.pods.list(NS), lambda r: all(p.spec.node_name for p in r.items), "the gang bound"
        )
        assert len(pods.items) == 4
        assert sched.metrics.permit_wait_duration.count("success") == 3
    finally:
        sched.stop()
        try:
            await asyncio.wait_for(task, 10)
        finally:
            task.cancel()
