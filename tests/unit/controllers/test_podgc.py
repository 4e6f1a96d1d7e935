"""podgc's choices on upstream's cases (gc_controller_test.go: TestGCTerminated,
TestGCOrphaned's quarantine, TestGCUnscheduledTerminating)."""

from __future__ import annotations

from controllers.podgc import Quarantine, terminated_to_delete, unscheduled_terminating
from proto import kse_pb2 as pb


def pod(name: str, phase: str = "Running", created: str = "2027-01-01T00:00:00Z", reason: str = "") -> pb.Pod:
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace="default", creation_timestamp=created),
        status=pb.PodStatus(phase=phase, reason=reason),
    )


def names(pods: list[pb.Pod]) -> list[str]:
    return [p.metadata.name for p in pods]


def test_threshold_one_of_two_terminated_deletes_the_oldest() -> None:
    pods = [
        pod("a", "Failed", "2027-01-01T00:00:02Z"),
        pod("b", "Succeeded", "2027-01-01T00:00:01Z"),
        pod("c", "Running", "2027-01-01T00:00:00Z"),
    ]
    assert names(terminated_to_delete(pods, 1)) == ["b"]


def test_under_the_threshold_nothing_is_deleted_and_zero_disables() -> None:
    pods = [pod("a", "Failed"), pod("b", "Succeeded")]
    assert terminated_to_delete(pods, 2) == []
    assert terminated_to_delete(pods, 0) == []


def test_evicted_pods_go_first_then_oldest_then_by_name() -> None:
    pods = [
        pod("old", "Succeeded", "2027-01-01T00:00:00Z"),
        pod("evicted", "Failed", "2027-01-01T00:00:09Z", reason="Evicted"),
        pod("b", "Failed", "2027-01-01T00:00:05Z"),
        pod("a", "Failed", "2027-01-01T00:00:05Z"),
    ]
    assert names(terminated_to_delete(pods, 1)) == ["evicted", "old", "a"]


def test_unscheduled_terminating_pods_are_chosen_bound_ones_are_not() -> None:
    gone = pod("gone")
    gone.metadata.deletion_timestamp = "2027-01-01T00:00:00Z"
    bound = pod("bound")
    bound.metadata.deletion_timestamp = "2027-01-01T00:00:00Z"
    bound.spec.node_name = "n1"
    assert names(unscheduled_terminating([gone, bound, pod("live")])) == ["gone"]


def test_quarantine_releases_a_node_only_after_the_delay_and_adding_again_does_not_postpone() -> None:
    q = Quarantine(40.0)
    q.add("n1", 0.0)
    q.add("n1", 30.0)
    assert q.pop_due(39.9) == []
    assert q.pop_due(40.0) == ["n1"]
    assert "n1" not in q
