"""The scheduler_perf workload shapes of `kse bench throughput --workload`, run in process on a
small cluster: every pod binds and the placements obey the workload's terms."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from scheduler.bench import throughput as t
from scheduler.bench.workloads import HOSTNAME, WORKLOADS, ZONE, workload_nodes, workload_pods


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
    for pod in workload_pods(workload, "init", cfg.init_pods, measured=False):
        loop.queue.add(pod)
    assert asyncio.run(loop.drain(cfg.init_pods)) == cfg.init_pods
    for pod in workload_pods(workload, "m", cfg.pods, measured=True):
        loop.queue.add(pod)
    assert asyncio.run(loop.drain(cfg.pods)) == cfg.pods
    per_node = Counter(pi.pod.spec.node_name for ni in loop.cache.snapshot.list() for pi in ni.pods)
    if workload == "pod-anti-affinity":
        assert max(per_node.values()) == 1  # one green pod per hostname
