"""The disruption controller's arithmetic, on cases in the spirit of upstream's
pkg/controller/disruption/disruption_test.go (our own data): integer and percent minAvailable,
maxUnavailable, controller scale from ReplicaSets and Deployments, unmanaged pods, disruptedPods
expiry, and the eviction's checkAndDecrement."""

from __future__ import annotations

import pytest

from apiserver_mock.errors import Forbidden, TooManyRequests
from apiserver_mock.registry.eviction import BUDGET_VIOLATION, check_and_decrement
from apiserver_mock.registry.graceful import plan_pod_deletion
from controllers.disruptionbudget import (
    DELETION_TIMEOUT_S,
    BudgetError,
    Scale,
    build_disrupted_pod_map,
    count_healthy,
    expected_pod_count,
    failed_status,
    sync_budget,
)
from kse.objects.intstr import set_int_or_string
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb

NOW = 1_800_000_000.0
STAMP = format_time(NOW)


def pdb(
    min_available: int | str | None = None, max_unavailable: int | str | None = None
) -> pb.PodDisruptionBudget:
    p = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name="b", namespace="ns", generation=1))
    p.spec.selector.match_labels["app"] = "a"
    if min_available is not None:
        set_int_or_string(p.spec.min_available, min_available)
    if max_unavailable is not None:
        set_int_or_string(p.spec.max_unavailable, max_unavailable)
    return p


def pod(name: str, ready: bool = True, owner: str = "", terminating: bool = False) -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace="ns", labels={"app": "a"}))
    p.status.phase = "Running"
    p.status.conditions.add(type="Ready", status="True" if ready else "False")
    if owner:
        p.metadata.owner_references.add(
            api_version="apps/v1", kind="ReplicaSet", name=owner, uid=owner, controller=True
        )
    if terminating:
        p.metadata.deletion_timestamp = STAMP
    return p


def scales(**replicas: int):  # type: ignore[no-untyped-def]
    def find(ref: pb.OwnerReference, namespace: str) -> Scale | None:
        n = replicas.get(ref.name)
        return Scale(ref.uid, n) if n is not None else None

    return find


NONE = scales()


def status_of(budget: pb.PodDisruptionBudget, pods: list[pb.Pod], find=NONE) -> pb.PodDisruptionBudgetStatus:  # type: ignore[no-untyped-def]
    out = sync_budget(budget, pods, find, NOW, STAMP)
    assert out.status is not None
    return out.status


def counts(st: pb.PodDisruptionBudgetStatus) -> tuple[int, int, int, int]:
    return st.expected_pods, st.desired_healthy, st.current_healthy, st.disruptions_allowed


def test_integer_min_available_counts_the_matching_pods() -> None:
    pods = [pod(f"p{i}") for i in range(4)]
    assert counts(status_of(pdb(3), pods)) == (4, 3, 4, 1)
    pods[0] = pod("p0", ready=False)
    assert counts(status_of(pdb(3), pods)) == (4, 3, 3, 0)


def test_no_pods_means_no_disruptions_even_with_min_available_zero() -> None:
    st = status_of(pdb(0), [])
    assert counts(st) == (0, 0, 0, 0)
    cond = [c for c in st.conditions if c.type == "DisruptionAllowed"]
    assert [(c.status, c.reason, c.observed_generation) for c in cond] == [("False", "InsufficientPods", 1)]
    assert st.observed_generation == 1


def test_percent_min_available_uses_the_replica_set_scale_rounding_up() -> None:
    pods = [pod(f"p{i}", owner="rs") for i in range(10)]
    assert counts(status_of(pdb("28%"), pods, scales(rs=10))) == (10, 3, 10, 7)  # ceil(2.8)
    assert counts(status_of(pdb("28%"), pods[:6], scales(rs=10))) == (10, 3, 6, 3)  # 4 pods missing


def test_max_unavailable_int_and_percent() -> None:
    pods = [pod(f"p{i}", owner="rs") for i in range(5)]
    assert counts(status_of(pdb(max_unavailable=1), pods, scales(rs=5))) == (5, 4, 5, 1)
    assert counts(status_of(pdb(max_unavailable="30%"), pods, scales(rs=5))) == (5, 3, 5, 2)  # ceil(1.5)
    assert counts(status_of(pdb(max_unavailable=9), pods, scales(rs=5))) == (5, 0, 5, 5)  # never below 0


def test_two_controllers_add_their_scales_and_unmanaged_pods_do_not_count() -> None:
    pods = [pod("a0", owner="rs-a"), pod("a1", owner="rs-a"), pod("b0", owner="rs-b"), pod("lone")]
    budget = pdb(max_unavailable=1)
    out = sync_budget(budget, pods, scales(**{"rs-a": 2, "rs-b": 3}), NOW, STAMP)
    assert out.status is not None and counts(out.status) == (5, 4, 4, 0)
    assert out.unmanaged == ("lone",)
    # Unmanaged pods only: nothing expected, so nothing may be disrupted.
    assert counts(status_of(budget, [pod("x"), pod("y")])) == (0, 0, 2, 0)


def test_a_pod_whose_controller_is_missing_is_a_sync_error() -> None:
    with pytest.raises(BudgetError, match='found no controllers for pod "p0"'):
        expected_pod_count(pdb("50%"), [pod("p0", owner="gone")], NONE)
    budget = pdb("50%")
    budget.status.disruptions_allowed = 4
    st = failed_status(budget, 'found no controllers for pod "p0"', STAMP)
    assert st.disruptions_allowed == 0
    assert [(c.status, c.reason) for c in st.conditions] == [("False", "SyncFailed")]


def test_terminating_pods_are_not_healthy() -> None:
    pods = [pod("p0"), pod("p1"), pod("p2", terminating=True)]
    assert counts(status_of(pdb(1), pods)) == (3, 1, 2, 1)


def test_disrupted_pods_expire_after_two_minutes_and_leave_when_deleted() -> None:
    budget = pdb(1)
    recent = format_time(NOW - 30)
    old = format_time(NOW - DELETION_TIMEOUT_S - 1)
    budget.status.disrupted_pods["p0"] = recent  # evicted 30 s ago, not yet deleted
    budget.status.disrupted_pods["p1"] = old  # never deleted: counts again
    budget.status.disrupted_pods["p2"] = recent  # terminating now: done
    budget.status.disrupted_pods["gone"] = recent  # deleted: dropped
    pods = [pod("p0"), pod("p1"), pod("p2", terminating=True), pod("p3")]
    kept, recheck = build_disrupted_pod_map(pods, budget, NOW)
    assert kept == {"p0": recent}
    assert recheck == pytest.approx(NOW - 30 + DELETION_TIMEOUT_S, abs=1)
    assert count_healthy(pods, kept, NOW) == 2  # p1, p3
    st = status_of(budget, pods)
    assert dict(st.disrupted_pods) == {"p0": recent}
    assert counts(st) == (4, 1, 2, 1)


def test_an_up_to_date_status_is_not_written_again() -> None:
    budget = pdb(1)
    pods = [pod("p0"), pod("p1")]
    budget.status.CopyFrom(status_of(budget, pods))
    assert sync_budget(budget, pods, NONE, NOW, STAMP).status is None
    budget.metadata.generation = 2  # a spec change: written again, at the new generation
    assert status_of(budget, pods).observed_generation == 2


def test_condition_transition_time_moves_only_when_the_status_changes() -> None:
    budget = pdb(1)
    budget.status.CopyFrom(status_of(budget, [pod("p0"), pod("p1")]))
    first = budget.status.conditions[0]
    assert (first.status, first.reason, first.last_transition_time) == ("True", "SufficientPods", STAMP)
    later = sync_budget(budget, [pod("p0"), pod("p1"), pod("p2")], NONE, NOW + 60, format_time(NOW + 60))
    assert later.status is not None and later.status.conditions[0].last_transition_time == STAMP


# ---------------------------------------------------------------- the eviction's side


def admitted(allowed: int, healthy: int = 5, desired: int = 3) -> pb.PodDisruptionBudget:
    b = pdb(desired)
    b.status.observed_generation = 1
    b.status.disruptions_allowed = allowed
    b.status.current_healthy = healthy
    b.status.desired_healthy = desired
    return b


def test_check_and_decrement() -> None:
    out = check_and_decrement(admitted(2), "p0", STAMP)
    assert out.status.disruptions_allowed == 1 and dict(out.status.disrupted_pods) == {"p0": STAMP}
    assert not out.status.conditions  # the condition changes only when the last one goes
    last = check_and_decrement(out, "p1", STAMP)
    assert last.status.disruptions_allowed == 0
    assert [(c.status, c.reason) for c in last.status.conditions] == [("False", "InsufficientPods")]
    with pytest.raises(TooManyRequests) as exc:
        check_and_decrement(last, "p2", STAMP)
    assert str(exc.value) == BUDGET_VIOLATION
    assert exc.value.causes == (
        ("DisruptionBudget", "The disruption budget b needs 3 healthy pods and has 5 currently"),
    )


def test_check_and_decrement_refuses_stale_negative_and_oversized_budgets() -> None:
    stale = admitted(2)
    stale.metadata.generation = 2
    with pytest.raises(TooManyRequests) as exc:
        check_and_decrement(stale, "p", STAMP)
    assert exc.value.retry_after == 10 and "still being processed" in exc.value.causes[0][1]
    with pytest.raises(Forbidden, match="negative"):
        check_and_decrement(admitted(-1), "p", STAMP)
    big = admitted(5)
    for i in range(2001):
        big.status.disrupted_pods[f"p{i}"] = STAMP
    with pytest.raises(Forbidden, match="DisruptedPods map too big"):
        check_and_decrement(big, "p", STAMP)


# ---------------------------------------------------------------- graceful deletion


def bound(grace: int | None = 30, phase: str = "Running") -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="ns", generation=1), spec=pb.PodSpec(node_name="n"))
    if grace is not None:
        p.spec.termination_grace_period_seconds = grace
    p.status.phase = phase
    return p


def test_graceful_deletion_rules() -> None:
    d = plan_pod_deletion(bound(), None, NOW)
    assert d.pod is not None and d.pod.metadata.deletion_grace_period_seconds == 30
    assert d.pod.metadata.deletion_timestamp == format_time(NOW + 30) and d.pod.metadata.generation == 2
    assert plan_pod_deletion(bound(), 0, NOW).immediate
    assert plan_pod_deletion(bound(grace=None), None, NOW).immediate  # no period at all: 0
    assert plan_pod_deletion(bound(phase="Succeeded"), 30, NOW).immediate  # terminal
    unscheduled = bound()
    unscheduled.spec.node_name = ""
    assert plan_pod_deletion(unscheduled, 30, NOW).immediate
    negative = plan_pod_deletion(bound(), -5, NOW)
    assert negative.pod is not None and negative.pod.metadata.deletion_grace_period_seconds == 1


def test_a_second_delete_may_only_shorten_the_grace_period() -> None:
    first = plan_pod_deletion(bound(), None, NOW).pod
    assert first is not None
    assert plan_pod_deletion(first, 60, NOW + 1).pending
    assert plan_pod_deletion(first, None, NOW + 1).pending
    shorter = plan_pod_deletion(first, 10, NOW + 1).pod
    assert shorter is not None and shorter.metadata.deletion_timestamp == format_time(NOW + 10)
    assert plan_pod_deletion(first, 0, NOW + 1).immediate
    zero = pb.Pod()
    zero.CopyFrom(first)
    zero.metadata.deletion_grace_period_seconds = 0
    assert plan_pod_deletion(zero, None, NOW).immediate
