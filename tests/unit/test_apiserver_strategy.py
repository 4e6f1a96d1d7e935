"""Per-kind create strategy: the SchedulingGated condition and generated names, as upstream."""

from __future__ import annotations

import re

from apiserver_mock.registry.strategy import STRATEGIES, generate_name
from kse.objects.kinds import BY_FIELD
from proto import kse_pb2 as pb

POD = BY_FIELD["pod"]


def created(pod: pb.Pod) -> pb.Pod:
    STRATEGIES["pod"].prepare_for_create(POD, pod)
    return pod


def gated_pod() -> pb.Pod:
    pod = pb.Pod(metadata=pb.ObjectMeta(name="test-pod"))
    pod.spec.containers.add(name="pause", image="registry.k8s.io/pause:3.6")
    pod.spec.scheduling_gates.add(name="example.com/foo")
    return pod


def test_a_gated_pod_is_created_with_podscheduled_false_schedulinggated() -> None:
    pod = created(gated_pod())
    [cond] = pod.status.conditions
    assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "SchedulingGated")
    assert cond.message == "Scheduling is blocked due to non-empty scheduling gates"
    assert cond.last_transition_time


def test_an_ungated_pod_gets_no_condition() -> None:
    pod = gated_pod()
    del pod.spec.scheduling_gates[:]
    assert not created(pod).status.conditions


def test_generated_names_are_the_prefix_and_five_characters_of_upstreams_alphabet() -> None:
    for _ in range(50):
        assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", generate_name("web-"))
    long = "x" * 70
    assert generate_name(long)[:58] == "x" * 58
    assert len(generate_name(long)) == 63


def test_match_label_keys_are_merged_into_the_selector_on_create() -> None:
    """Upstream PrepareForCreate applyMatchLabelKeysAndMismatchLabelKeys: the stored pod carries
    `key In [value]` / `key NotIn [value]` for the keys it has labels for."""
    pod = pb.Pod(metadata=pb.ObjectMeta(name="web", labels={"app": "web", "tenant": "a"}))
    pod.spec.containers.add(name="c", image="x")
    term = pod.spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution.add(
        weight=1
    ).pod_affinity_term
    term.topology_key = "kubernetes.io/hostname"
    term.label_selector.match_labels["app"] = "web"
    term.match_label_keys.append("tenant")
    term.mismatch_label_keys.append("app")
    created(pod)
    got = [(r.key, r.operator, list(r.values)) for r in term.label_selector.match_expressions]
    assert got == [("tenant", "In", ["a"]), ("app", "NotIn", ["web"])]
    assert list(term.match_label_keys) == ["tenant"]  # the keys stay, as upstream
