"""The scheduler_perf workload shapes of `kse bench throughput --workload`, run in process on a
small cluster: every pod binds and the placements obey the workload's terms."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from scheduler.bench import throughput as t
from scheduler.bench.workloads import HOSTNAME, WORKLOADS, ZONE, churn_pods, workload_nodes, workload_pods


def test_templates_are_upstreams() -> None:
    (anti,) = workload_pods("pod-anti-affinity", "p", 1, measured=True)
    assert anti.metadata.namespace == "sched-1"
    assert dict(anti.metadata.labels) == {"color": "green", "name": "test"}
    (term,) = anti.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    assert term.topology_key == HOSTNAME and list(term.namespaces) == ["sched-1", "sched-0"]
    (aff,) = workload_pods("pod-affinity", "p", 1, measured=False)
    assert aff.metadata.namespace == "sched-0"
    (aff_term,) = aff.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution
    assert aff_term.topology_key == ZONE
    assert all(n.metadata.labels[ZONE] == "zone1" for n in workload_nodes("pod-affinity", 3))
    (pref,) = workload_pods("preferred-pod-affinity", "p", 1, measured=True)
    assert pref.spec.affinity.pod_affinity.preferred_during_scheduling_ignored_during_execution[0].weight == 1
    (basic,) = workload_pods("basic", "p", 1, measured=True)
    assert basic.metadata.namespace == "default" and not basic.spec.HasField("affinity")


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_pod_binds(workload: str) -> None:
    cfg = t.Config(nodes=30, init_pods=10, pods=15, workload=workload)
    loop = t._setup(cfg)
    init = workload_pods(workload, "init", cfg.init_pods, measured=False)
    for pod in init:
        loop.add(pod)
    assert asyncio.run(loop.drain(len(init))) == len(init)
    for pod in workload_pods(workload, "m", cfg.pods, measured=True):
        loop.add(pod)
    assert asyncio.run(loop.drain(cfg.pods, prefix="m-")) == cfg.pods
    per_node = Counter(pi.pod.spec.node_name for ni in loop.cache.snapshot.list() for pi in ni.pods)
    if workload == "pod-anti-affinity":
        assert max(per_node.values()) == 1  # one green pod per hostname


def test_mixed_base_pod_templates() -> None:
    init = workload_pods("mixed-base-pod", "i", 2, measured=False)
    assert len(init) == 10 and {p.metadata.namespace for p in init} == {"sched-0"}
    colors = [p.metadata.labels.get("color") for p in init]
    assert colors == [None, None, "blue", "blue", "green", "green", "red", "red", "yellow", "yellow"]
    anti = init[-1].spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution
    assert anti[0].weight == 1 and anti[0].pod_affinity_term.topology_key == HOSTNAME
    assert all(n.metadata.labels[ZONE] == "zone1" for n in workload_nodes("mixed-base-pod", 2))
    (measured,) = workload_pods("mixed-base-pod", "m", 1, measured=True)
    assert not measured.spec.HasField("affinity")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_preemption_async_preempts_and_binds_the_high_priority_pods() -> None:
    """PreemptionAsync's shapes: four low-priority pods fill a node to 3.6 CPU; a 3970m pod of
    priority 10000 fits only by preempting all four; it is nominated, its victims leave the
    cache, and it binds on its nominated node after its backoff."""
    cfg = t.Config(nodes=3, init_pods=12, pods=3, workload="preemption-async")
    clock = FakeClock()
    loop = t._setup(cfg, clock=clock)
    (low,) = workload_pods("preemption-async", "x", 1, measured=False)
    assert dict(low.spec.containers[0].resources.requests) == {"cpu": "900m", "memory": "500Mi"}
    assert not low.spec.HasField("priority")

    async def run() -> None:
        init = workload_pods("preemption-async", "init", cfg.init_pods, measured=False)
        for pod in init:
            loop.add(pod)
        assert await loop.drain(len(init)) == 12
        high = churn_pods("high-priority", 2)
        assert high[0].spec.priority == 10000
        for pod in high:
            loop.add(pod)
        # First attempts: no node fits; each preempts a node of its own (the first nomination
        # holds its node against the second pod).
        assert await loop.drain(2, prefix="high-priority") == 0
        assert loop.nominations == 2 and loop.preemption is not None and loop.preemption.victims == 8
        nominated = {p.metadata.name: p.status.nominated_node_name for p in high}
        assert len(set(nominated.values())) == 2
        clock.now += 10  # past their backoff
        loop.queue.flush_backoff_completed()
        assert await loop.drain(2, prefix="high-priority") == 2
        assert {p.metadata.name: p.spec.node_name for p in high} == nominated
        for pod in workload_pods("preemption-async", "pod", cfg.pods, measured=True):
            loop.add(pod)
        assert await loop.drain(cfg.pods, prefix="pod-") == cfg.pods

    asyncio.run(run())
