"""UnschedulablePods keeps apart the pods an assigned pod may help, and the queue's answer for an
assigned pod is the full walk's (`rejected_by_cross_topology_term` over every unschedulable pod)."""

from __future__ import annotations

import numpy as np
import pytest

from proto import kse_pb2 as pb
from scheduler.framework.types import ActionType, ClusterEvent, EventResource, PodInfo, QueuedPodInfo
from scheduler.queue.pod_events import POD_TOPOLOGY_SPREAD, rejected_by_cross_topology_term
from scheduler.queue.unschedulable_pods import UnschedulablePods


def _pod(name: str, namespace: str = "default", affinity_to: str | None = None) -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=namespace, uid=name, labels={"app": name}))
    if affinity_to is not None:
        term = p.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution.add(
            topology_key="zone"
        )
        term.label_selector.match_labels["app"] = affinity_to
    return p


def _queued(pod: pb.Pod, plugins: set[str] | None = None, gated: bool = False) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo(pod), 0.0, unschedulable_plugins=set(plugins or ()), gated=gated)


def test_only_spread_rejected_and_pod_affinity_pods_are_candidates() -> None:
    u = UnschedulablePods()
    u["default/spread"] = _queued(_pod("spread"), {POD_TOPOLOGY_SPREAD})
    u["default/affine"] = _queued(_pod("affine", affinity_to="web"), {"InterPodAffinity"})
    u["default/fit"] = _queued(_pod("fit"), {"NodeResourcesFit"})
    u["default/gated"] = _queued(_pod("gated"), gated=True)
    assert [p.pod.metadata.name for p in u.cross_topology_candidates()] == ["spread", "affine"]
    assert (
        len(u) == 4
        and "default/gated" in u
        and list(u) == [f"default/{n}" for n in ("spread", "affine", "fit", "gated")]
    )
    assert u.pop("default/spread") is not None and u.pop("default/spread") is None
    # an update that changes what the pod is listed among (the PodInfo replaced in place)
    fit = u.get("default/fit")
    assert fit is not None
    fit.pod_info = PodInfo(_pod("fit", affinity_to="web"))
    u["default/fit"] = fit
    assert [p.pod.metadata.name for p in u.cross_topology_candidates()] == ["affine", "fit"]
    affine = u.get("default/affine")
    assert affine is not None
    affine.pod_info = PodInfo(_pod("affine"))
    u["default/affine"] = affine
    assert [p.pod.metadata.name for p in u.cross_topology_candidates()] == ["fit"]


@pytest.mark.parametrize("seed", range(30))
def test_the_candidates_give_the_full_walks_answer(seed: int) -> None:
    rng = np.random.default_rng(seed)
    u = UnschedulablePods()
    names = ["web", "db", "cache"]
    for i in range(60):
        ns = str(rng.choice(["default", "other"]))
        kind = rng.random()
        pod = _pod(f"p{i}", ns, affinity_to=str(rng.choice(names)) if kind < 0.3 else None)
        plugins = (
            {POD_TOPOLOGY_SPREAD}
            if 0.3 <= kind < 0.5
            else {str(rng.choice(["NodeResourcesFit", "TaintToleration"]))}
        )
        u[f"{ns}/p{i}"] = _queued(pod, plugins, gated=kind > 0.9)
        if rng.random() < 0.2:
            u.pop(f"{ns}/p{int(rng.integers(0, i + 1))}")
    for j in range(10):
        assigned = _pod(str(rng.choice(names)), str(rng.choice(["default", "other"])))
        assigned.metadata.name = f"a{j}"
        want = [p.key for p in u.values() if rejected_by_cross_topology_term(p, assigned)]
        got = [p.key for p in u.cross_topology_candidates() if rejected_by_cross_topology_term(p, assigned)]
        assert sorted(got) == sorted(want)


GATES_GONE = ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED


def _passes_gate(p: QueuedPodInfo, event: ClusterEvent) -> bool:
    """The queue's own check of each pod offered (scheduling_queue._move_pods)."""
    return not p.gated or any(e.matches(event) for e in p.gating_plugin_events)


@pytest.mark.parametrize("seed", range(30))
def test_an_event_is_offered_every_pod_the_full_walk_would_move(seed: int) -> None:
    rng = np.random.default_rng(seed)
    gates = {
        "SchedulingGates": [ClusterEvent(EventResource.POD, GATES_GONE)],
        "OtherGate": [ClusterEvent(EventResource.NODE, ActionType.ADD)],
    }
    u = UnschedulablePods()
    for i in range(50):
        q = _queued(_pod(f"p{i}"), {"NodeResourcesFit"})
        if rng.random() < 0.6:
            q.gated = True
            q.gating_plugin = str(rng.choice(list(gates)))
            q.gating_plugin_events = list(gates[q.gating_plugin])
        u[f"default/p{i}"] = q
        if rng.random() < 0.3:  # re-evaluated in place: another gate, or none (then set again)
            victim = u.get(f"default/p{int(rng.integers(0, i + 1))}")
            if victim is not None:
                victim.gated = bool(rng.random() < 0.5)
                victim.gating_plugin = str(rng.choice(list(gates))) if victim.gated else ""
                victim.gating_plugin_events = list(gates[victim.gating_plugin]) if victim.gated else []
                u[victim.key] = victim
    events = [
        ClusterEvent(EventResource.NODE, ActionType.ADD),
        ClusterEvent(EventResource.POD, ActionType.DELETE),
        ClusterEvent(EventResource.POD, GATES_GONE),
        ClusterEvent(EventResource.WILDCARD, ActionType.ALL),
    ]
    for event in events:
        want = sorted(p.key for p in u.values() if _passes_gate(p, event))
        got = sorted(p.key for p in u.offered_for(event, None) if _passes_gate(p, event))
        assert got == want, event
        odd = sorted(p.key for p in u.offered_for(event, lambda pod: pod.metadata.name.endswith("1")))
        assert set(odd) <= {p.key for p in u.values()} and all(k.endswith("1") for k in odd)
