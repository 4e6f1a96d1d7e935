"""DaemonSet decisions on upstream's cases (daemon_controller_test.go TestNodeShouldRunDaemonPod,
util/daemonset_util_test.go TestReplaceDaemonSetPodNodeNameNodeAffinity, update_test.go)."""

from __future__ import annotations

import pytest

from controllers.daemonset import (
    REVISION_HASH_LABEL,
    daemon_tolerations,
    max_unavailable,
    node_should_run_daemon_pod,
    plan_sync,
    replace_node_name_affinity,
    target_node_name,
    template_hash,
)
from kse.objects.intstr import set_int_or_string
from proto import kse_pb2 as pb

NOW = 1_800_000_000.0


def ds(**spec: object) -> pb.DaemonSet:
    d = pb.DaemonSet(metadata=pb.ObjectMeta(name="ds", namespace="default", uid="ds-uid", generation=3))
    d.spec.selector.match_labels["app"] = "d"
    d.spec.template.metadata.labels["app"] = "d"
    d.spec.template.spec.containers.add(name="c", image="img")
    d.spec.update_strategy.type = "RollingUpdate"
    set_int_or_string(d.spec.update_strategy.rolling_update.max_unavailable, 1)
    for k, v in spec.items():
        if isinstance(v, dict):
            getattr(d.spec.template.spec, k).update(v)
        else:
            setattr(d.spec.template.spec, k, v)
    return d


def node(name: str, labels: dict[str, str] | None = None, taints: list[tuple[str, str]] = ()) -> pb.Node:  # type: ignore[assignment]
    n = pb.Node(metadata=pb.ObjectMeta(name=name, labels=labels or {}))
    for key, effect in taints:
        n.spec.taints.add(key=key, effect=effect)
    return n


def pod(name: str, node_name: str, d: pb.DaemonSet, *, ready: bool = True, phase: str = "Running",
        created: str = "2027-01-01T00:00:00Z", current: bool = True) -> pb.Pod:  # fmt: skip
    p = pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace="default", uid=f"uid-{name}", creation_timestamp=created)
    )
    p.metadata.labels["app"] = "d"
    p.metadata.labels[REVISION_HASH_LABEL] = template_hash(d.spec.template) if current else "old"
    p.spec.node_name = node_name
    p.status.phase = phase
    p.status.conditions.add(
        type="Ready", status="True" if ready else "False", last_transition_time="2027-01-01T00:00:00Z"
    )
    return p


def test_every_daemon_pod_gets_upstreams_tolerations() -> None:
    spec = pb.PodSpec()
    daemon_tolerations(spec)
    got = [(t.key, t.operator, t.effect, t.HasField("toleration_seconds")) for t in spec.tolerations]
    assert got == [
        ("node.kubernetes.io/not-ready", "Exists", "NoExecute", False),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute", False),
        ("node.kubernetes.io/disk-pressure", "Exists", "NoSchedule", False),
        ("node.kubernetes.io/memory-pressure", "Exists", "NoSchedule", False),
        ("node.kubernetes.io/pid-pressure", "Exists", "NoSchedule", False),
        ("node.kubernetes.io/unschedulable", "Exists", "NoSchedule", False),
    ]
    host = pb.PodSpec(host_network=True)
    daemon_tolerations(host)
    assert host.tolerations[-1].key == "node.kubernetes.io/network-unavailable"


def test_a_300s_default_toleration_is_replaced_by_the_forever_one() -> None:
    spec = pb.PodSpec()
    spec.tolerations.add(
        key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute", toleration_seconds=300
    )
    daemon_tolerations(spec)
    unreachable = [t for t in spec.tolerations if t.key == "node.kubernetes.io/unreachable"]
    assert len(unreachable) == 1 and not unreachable[0].HasField("toleration_seconds")


@pytest.mark.parametrize(
    ("n", "d", "want"),
    [
        (node("n"), ds(), (True, True)),
        (node("n", {"disk": "ssd"}), ds(node_selector={"disk": "ssd"}), (True, True)),
        (node("n", {"disk": "hdd"}), ds(node_selector={"disk": "ssd"}), (False, False)),
        (node("n"), ds(node_name="other"), (False, False)),
        (node("n", taints=[("dedicated", "NoSchedule")]), ds(), (False, True)),  # keeps its pods
        (node("n", taints=[("dedicated", "NoExecute")]), ds(), (False, False)),
        (
            node("n", taints=[("node.kubernetes.io/unschedulable", "NoSchedule")]),
            ds(),
            (True, True),
        ),  # cordoned
        (node("n", taints=[("node.kubernetes.io/unreachable", "NoExecute")]), ds(), (True, True)),
        (node("n", taints=[("node.kubernetes.io/network-unavailable", "NoSchedule")]), ds(), (False, True)),
        (
            node("n", taints=[("node.kubernetes.io/network-unavailable", "NoSchedule")]),
            ds(host_network=True),
            (True, True),
        ),
    ],
)
def test_node_should_run_daemon_pod(n: pb.Node, d: pb.DaemonSet, want: tuple[bool, bool]) -> None:
    assert node_should_run_daemon_pod(n, d) == want


def test_required_node_affinity_decides_eligibility() -> None:
    d = ds()
    required = d.spec.template.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    term = required.node_selector_terms.add()
    term.match_expressions.add(key="zone", operator="In", values=["a"])
    assert node_should_run_daemon_pod(node("n", {"zone": "a"}), d) == (True, True)
    assert node_should_run_daemon_pod(node("n", {"zone": "b"}), d) == (False, False)


def test_replace_node_name_affinity_replaces_the_required_terms_and_keeps_preferred() -> None:
    spec = pb.PodSpec()
    na = spec.affinity.node_affinity
    na.required_during_scheduling_ignored_during_execution.node_selector_terms.add().match_expressions.add(
        key="zone", operator="In", values=["a"]
    )
    na.preferred_during_scheduling_ignored_during_execution.add(weight=1)
    replace_node_name_affinity(spec, "n7")
    terms = na.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert len(terms) == 1 and not terms[0].match_expressions
    assert [(r.key, r.operator, list(r.values)) for r in terms[0].match_fields] == [
        ("metadata.name", "In", ["n7"])
    ]
    assert len(na.preferred_during_scheduling_ignored_during_execution) == 1
    assert target_node_name(pb.Pod(spec=spec)) == "n7"


def test_one_pod_per_eligible_node_and_status_counts() -> None:
    d = ds()
    nodes = [node("a"), node("b"), node("c", {"x": "y"}, [("dedicated", "NoExecute")])]
    plan = plan_sync(d, nodes, {"a": [pod("pa", "a", d)], "c": [pod("pc", "c", d)]}, NOW)
    assert plan.create_on == ["b"]
    assert [p.metadata.name for p in plan.delete] == ["pc"]  # misscheduled: may not keep it
    st = plan.status
    assert (st.desired_number_scheduled, st.current_number_scheduled, st.number_misscheduled) == (2, 1, 1)
    assert (st.number_ready, st.number_available, st.updated_number_scheduled) == (1, 1, 1)
    assert st.number_unavailable == 1 and st.observed_generation == 3


def test_extra_pods_are_deleted_keeping_the_oldest_and_failed_pods_are_replaced() -> None:
    d = ds()
    keep = pod("old", "a", d, created="2027-01-01T00:00:00Z")
    extra = pod("new", "a", d, created="2027-01-01T00:01:00Z")
    failed = pod("f", "b", d, phase="Failed")
    plan = plan_sync(d, [node("a"), node("b")], {"a": [extra, keep], "b": [failed]}, NOW)
    assert sorted(p.metadata.name for p in plan.delete) == ["f", "new"]
    assert plan.create_on == []


def test_rolling_update_replaces_at_most_max_unavailable_available_pods() -> None:
    d = ds()
    pods = {n: [pod(f"p{n}", n, d, current=False)] for n in "abc"}
    plan = plan_sync(d, [node(n) for n in "abc"], pods, NOW)
    assert [p.metadata.name for p in plan.delete] == ["pa"]
    assert plan.status.updated_number_scheduled == 0


def test_rolling_update_waits_while_a_new_pod_is_unavailable_but_replaces_unavailable_old_pods() -> None:
    d = ds()
    pods = {
        "a": [pod("pa", "a", d, ready=False)],  # new, not yet available: uses the budget
        "b": [pod("pb", "b", d, current=False)],  # old, available: must wait
        "c": [pod("pc", "c", d, current=False, ready=False)],  # old, unavailable: replaced at once
    }
    plan = plan_sync(d, [node(n) for n in "abc"], pods, NOW)
    assert [p.metadata.name for p in plan.delete] == ["pc"]


def test_max_unavailable_percent_rounds_up_and_is_at_least_one() -> None:
    d = ds()
    set_int_or_string(d.spec.update_strategy.rolling_update.max_unavailable, "25%")
    assert max_unavailable(d, 10) == 3
    set_int_or_string(d.spec.update_strategy.rolling_update.max_unavailable, 0)
    assert max_unavailable(d, 10) == 1


def test_on_delete_never_replaces_old_pods() -> None:
    d = ds()
    d.spec.update_strategy.type = "OnDelete"
    plan = plan_sync(d, [node("a")], {"a": [pod("pa", "a", d, current=False)]}, NOW)
    assert plan.delete == [] and plan.create_on == []
