"""DefaultPreemption in a real `kse scheduler` process against a real API server over real etcd.

Two full nodes: node-0 runs two low-priority pods, node-1 two of a middle priority. A
high-priority pod that fits nowhere preempts the lowest-priority pods (both of node-0's): it gets
status.nominatedNodeName=node-0, each victim gets the DisruptionTarget condition and is deleted
with a Preempted event ("Preempted by pod <uid> on node node-0"), and the preemptor is bound to
node-0 once they are gone. A pod of the same priority with preemptionPolicy: Never preempts
nobody and stays Pending, saying so in upstream's FailedScheduling message."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from certs.layout import PKI
from kse.client.clientset import Clientset
from kse.client.errors import NotFoundError
from kse.scrape import parse_exposition
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.integration.test_scheduler_process import _create_all, eventually, make_pod, start_scheduler

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NS = "default"


def node(name: str) -> pb.Node:
    n = pb.Node(metadata=pb.ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}))
    alloc = {"cpu": "2", "memory": "8Gi", "pods": "10"}
    n.status.capacity.update(alloc)
    n.status.allocatable.update(alloc)
    n.status.conditions.add(type="Ready", status="True")
    return n


def priority_class(name: str, value: int, policy: str = "") -> pb.PriorityClass:
    pc = pb.PriorityClass(metadata=pb.ObjectMeta(name=name), value=value)
    if policy:
        pc.preemption_policy = policy
    return pc


def pod(name: str, cpu: str, priority_class_name: str, node_name: str = "") -> pb.Pod:
    p = make_pod(name, cpu, app=name)
    p.spec.priority_class_name = priority_class_name
    if node_name:
        p.spec.node_name = node_name
    return p


def condition(p: pb.Pod, kind: str) -> pb.PodCondition | None:
    return {c.type: c for c in p.status.conditions}.get(kind)


async def test_a_high_priority_pod_preempts_the_lowest_priority_pods_of_one_node(
    apiserver: ApiServer, pki: PKI, tmp_path: Path
) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    await _create_all(cs, [node("node-0"), node("node-1")], cs.nodes)
    await _create_all(
        cs,
        [
            priority_class("low", 10),
            priority_class("mid", 20),
            priority_class("high", 1000),
            priority_class("high-never", 1000, "Never"),
        ],
        cs.priority_classes,
    )
    running = [
        pod("low-a", "1", "low", "node-0"),
        pod("low-b", "1", "low", "node-0"),
        pod("mid-a", "1", "mid", "node-1"),
        pod("mid-b", "1", "mid", "node-1"),
    ]
    await _create_all(cs, running, cs.pods)
    start_rv = (await cs.pods.list(NS)).resource_version

    # Every change of the victims, from a watch: the DisruptionTarget condition must come
    # before the deletion.
    seen: list[tuple[str, str, bool]] = []

    async def watch_victims() -> None:
        async with cs.pods.watch(NS, resource_version=start_rv) as stream:
            async for ev in stream:
                if ev.object is None or not ev.object.metadata.name.startswith("low-"):
                    continue
                target = condition(ev.object, "DisruptionTarget")
                seen.append(
                    (ev.object.metadata.name, ev.type, target is not None and target.status == "True")
                )

    # The nodes have no kubelet: this plays its part for a graceful delete (the victims are
    # deleted with their own grace period, so they are Terminating until their kubelet is done).
    async def kubelet() -> None:
        async with cs.pods.watch(NS, resource_version=start_rv) as stream:
            async for ev in stream:
                p = ev.object
                if ev.type == "MODIFIED" and p is not None and p.metadata.deletion_timestamp:
                    with contextlib.suppress(NotFoundError):
                        await cs.pods.delete(NS, p.metadata.name, grace_period_seconds=0)

    watcher = asyncio.create_task(watch_victims())
    kubelet_task = asyncio.create_task(kubelet())
    sched = await start_scheduler(apiserver, pki, tmp_path)
    try:
        await eventually(lambda: sched.http_get("/readyz"), lambda r: r[0] == 200, 30, "/readyz")
        await cs.pods.create(pod("high", "2", "high"))
        high = await eventually(
            lambda: cs.pods.get(NS, "high"), lambda p: bool(p.spec.node_name), 60, "the preemptor bound"
        )
        assert high.spec.node_name == "node-0"
        assert high.spec.priority == 1000
        assert high.status.nominated_node_name == "node-0"  # kept after binding, as upstream

        names = {p.metadata.name for p in (await cs.pods.list(NS)).items}
        assert names == {"high", "mid-a", "mid-b"}  # both low pods preempted, nobody else

        async def preempted_events() -> dict[str, pb.Event]:
            items = (await cs.events.list(NS)).items
            return {e.involved_object.name: e for e in items if e.reason == "Preempted"}

        events = await eventually(preempted_events, lambda e: len(e) == 2, 20, "two Preempted events")
        assert set(events) == {"low-a", "low-b"}
        for ev in events.values():
            assert ev.type == "Normal"
            assert ev.message == f"Preempted by pod {high.metadata.uid} on node node-0"

        async def deletions() -> int:
            return sum(1 for _, t, _ in seen if t == "DELETED")

        await eventually(deletions, lambda n: n == 2, 20, "both deletions watched")
        for victim in ("low-a", "low-b"):
            changes = [(t, target) for name, t, target in seen if name == victim]
            deleted_at = next(i for i, (t, _) in enumerate(changes) if t == "DELETED")
            assert any(target for t, target in changes[:deleted_at] if t == "MODIFIED"), changes

        status, text = await sched.http_get("/metrics")
        assert status == 200
        metrics = parse_exposition(text)
        assert metrics["scheduler_preemption_attempts_total"][0][1] >= 1
        assert metrics["scheduler_preemption_victims_count"][0][1] == 1
        assert metrics["scheduler_preemption_victims_sum"][0][1] == 2

        # preemptionPolicy: Never preempts nobody, even with the priority to do so.
        await cs.pods.create(pod("never", "2", "high-never"))
        never = await eventually(
            lambda: cs.pods.get(NS, "never"),
            lambda p: (c := condition(p, "PodScheduled")) is not None and c.reason == "Unschedulable",
            30,
            "the Never pod unschedulable",
        )
        cond = condition(never, "PodScheduled")
        assert cond is not None
        assert cond.message == (
            "0/2 nodes are available: 2 Insufficient cpu. "
            "preemption: not eligible due to preemptionPolicy=Never.."
        )
        assert not never.status.nominated_node_name and not never.spec.node_name
        assert {p.metadata.name for p in (await cs.pods.list(NS)).items} == {
            "high",
            "mid-a",
            "mid-b",
            "never",
        }
    finally:
        for task in (watcher, kubelet_task):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        rc = await sched.stop()
    log = sched.log()
    assert rc == 0, log[-4000:]
    assert "Traceback" not in log, log[-4000:]
