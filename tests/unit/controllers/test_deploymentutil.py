"""deploymentutil on upstream's deployment_util_test.go tables (our own data)."""

from __future__ import annotations

import pytest

from controllers import deploymentutil as du
from kse.objects.intstr import IntOrStringError
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb
from tests.unit.controllers.helpers import deployment, replica_set


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "want"),
    [
        ("0%", "0%", 0, (0, 1)),
        ("39%", "39%", 10, (4, 3)),
        (0, "39%", 10, (0, 3)),  # nil maxSurge: 0
        ("39%", 0, 10, (4, 0)),
        (0, 0, 10, (0, 1)),
    ],
)
def test_resolve_fenceposts(
    surge: int | str, unavailable: int | str, desired: int, want: tuple[int, int]
) -> None:
    assert du.resolve_fenceposts(surge, unavailable, desired) == want


@pytest.mark.parametrize(("surge", "unavailable"), [("oops", "39%"), ("55%", "urg")])
def test_resolve_fenceposts_refuses_what_is_not_a_percentage(surge: str, unavailable: str) -> None:
    with pytest.raises(IntOrStringError):
        du.resolve_fenceposts(surge, unavailable, 10)


@pytest.mark.parametrize(
    ("replicas", "unavailable", "want"),
    [(10, 5, 5), (10, 10, 10), (5, 10, 5), (0, 10, 0), (10, "50%", 5), (10, "100%", 10), (5, "100%", 5)],
)
def test_max_unavailable(replicas: int, unavailable: int | str, want: int) -> None:
    assert du.max_unavailable(deployment(replicas, surge=1, unavailable=unavailable)) == want


def test_max_unavailable_and_surge_of_recreate_are_zero() -> None:
    d = deployment(3, strategy="Recreate")
    assert du.max_unavailable(d) == 0 and du.max_surge(d) == 0


@pytest.mark.parametrize(
    ("strategy", "dep_replicas", "new_rs_replicas", "surge", "want"),
    [
        ("RollingUpdate", 1, 5, 1, 5),  # cannot scale up: stays at newRSReplicas
        ("RollingUpdate", 6, 2, 10, 6),  # scale up to the deployment's size
        ("Recreate", 3, 1, 1, 3),
    ],
)
def test_new_rs_new_replicas(
    strategy: str, dep_replicas: int, new_rs_replicas: int, surge: int, want: int
) -> None:
    d = deployment(dep_replicas, surge=surge, unavailable=1)
    d.spec.strategy.type = strategy
    new = replica_set("new", new_rs_replicas)
    assert du.new_rs_new_replicas(d, [replica_set("rs5", 5)], new) == want


def _template(
    labels: dict[str, str], annotations: dict[str, str] | None = None, node: str = "foo-node"
) -> pb.PodTemplateSpec:
    t = pb.PodTemplateSpec()
    t.metadata.labels.update(labels)
    t.metadata.annotations.update(annotations or {})
    t.spec.node_name = node
    return t


H = du.DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (_template({H: "v1", "x": "y"}), _template({H: "v1", "x": "y"}), True),
        (_template({H: "v1", "x": "y"}), _template({H: "v2", "x": "y"}), True),
        (_template({"x": "y"}), _template({H: "v2", "x": "y"}), True),
        (_template({"x": "y"}), _template({H: "v2"}), False),
        (_template({H: "v1"}), _template({H: "v1", "x": "y"}), False),
        (_template({H: "v1"}, {"a": "1"}), _template({H: "v1"}, {"b": "1"}), False),
        (_template({"x": "y"}, node="n1"), _template({"z": "y"}, node="n2"), False),
    ],
)
def test_equal_ignore_hash(a: pb.PodTemplateSpec, b: pb.PodTemplateSpec, want: bool) -> None:
    assert du.equal_ignore_hash(a, b) is want
    assert du.equal_ignore_hash(b, a) is want
    assert H in a.metadata.labels or H not in b.metadata.labels or True  # inputs not mutated below
    before = a.SerializeToString(deterministic=True)
    du.equal_ignore_hash(a, b)
    assert a.SerializeToString(deterministic=True) == before


def test_find_new_replica_set_is_the_oldest_with_the_template() -> None:
    d = deployment(1)
    newer, older, other = (
        replica_set("newer", 0, 200.0),
        replica_set("older", 0, 100.0),
        replica_set("other", 0, 50.0),
    )
    for rs, h in ((newer, "h1"), (older, "h2")):
        rs.spec.template.CopyFrom(d.spec.template)
        rs.spec.template.metadata.labels[H] = h
    other.spec.template.CopyFrom(d.spec.template)
    other.spec.template.metadata.labels["different"] = "x"
    found = du.find_new_replica_set(d, [newer, other, older])
    assert found is not None and found.metadata.name == "older"
    assert [r.metadata.name for r in du.find_old_replica_sets(d, [newer, other, older])] == ["newer", "other"]
    assert du.find_new_replica_set(d, [other]) is None


def test_replica_counts() -> None:
    rs1, rs2, rs3 = replica_set("a", 1), replica_set("b", 2), replica_set("c", 3)
    rs1.status.replicas, rs2.status.replicas, rs3.status.replicas = 2, 3, 0
    assert du.replica_count([rs1, rs2, rs3, None]) == 6
    assert du.actual_replica_count([rs1, rs2, rs3, None]) == 5


@pytest.mark.parametrize(
    ("desired", "current", "updated", "available", "unavailable", "surge", "want"),
    [
        (5, 5, 5, 4, 1, 0, False),
        (5, 5, 5, 3, 1, 0, False),
        (5, 5, 5, 5, 0, 0, True),
        (5, 5, 4, 5, 0, 0, False),
        (1, 2, 1, 1, 0, 1, False),
        (1, 1, 1, 0, 1, 1, False),
    ],
)
def test_deployment_complete(
    desired: int, current: int, updated: int, available: int, unavailable: int, surge: int, want: bool
) -> None:
    d = deployment(desired, surge=surge, unavailable=unavailable)
    d.metadata.generation = 0
    d.status.replicas, d.status.updated_replicas, d.status.available_replicas = current, updated, available
    assert du.deployment_complete(d, d.status) is want


def _status(current: int, updated: int, ready: int, available: int) -> pb.DeploymentStatus:
    return pb.DeploymentStatus(
        replicas=current, updated_replicas=updated, ready_replicas=ready, available_replicas=available
    )


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        ((10, 4, 4, 4), (10, 6, 4, 4), True),
        ((10, 4, 4, 4), (10, 4, 4, 4), False),
        ((10, 4, 6, 6), (8, 4, 6, 6), True),
        ((10, 7, 3, 3), (10, 6, 3, 3), False),
        ((10, 4, 7, 7), (8, 8, 5, 5), True),
        ((10, 10, 9, 8), (10, 10, 10, 8), True),
        ((10, 10, 10, 9), (10, 10, 10, 10), True),
    ],
)
def test_deployment_progressing(old: tuple[int, ...], new: tuple[int, ...], want: bool) -> None:
    d = pb.Deployment()
    d.status.CopyFrom(_status(*old))
    assert du.deployment_progressing(d, _status(*new)) is want


T0 = 1451606400.0  # 2016-01-01T00:00:00Z


@pytest.mark.parametrize(
    ("deadline", "reason", "since", "now", "want"),
    [
        (None, "", T0 + 69, T0 + 80, False),
        (du.MAX_INT32, "", T0 + 69, T0 + 80, False),
        (10, "", T0 + 69, T0 + 80, True),  # 11 s without progress
        (10, "", T0 + 71, T0 + 80, False),  # 9 s
        (None, du.NEW_RS_AVAILABLE_REASON, T0, T0 + 1000, False),
    ],
)
def test_deployment_timed_out(
    deadline: int | None, reason: str, since: float, now: float, want: bool
) -> None:
    d = pb.Deployment()
    if deadline is not None:
        d.spec.progress_deadline_seconds = deadline
    d.status.conditions.add(
        type=du.PROGRESSING, status="True", reason=reason, last_update_time=format_time(since)
    )
    assert du.deployment_timed_out(d, d.status, now) is want


def test_set_condition_keeps_the_transition_time_of_the_same_status_and_goes_last() -> None:
    status = pb.DeploymentStatus()
    du.set_condition(status, du.new_condition(du.PROGRESSING, "False", "ForSomeReason", "", T0))
    du.set_condition(status, du.new_condition(du.AVAILABLE, "True", "AwesomeController", "", T0))
    assert [c.type for c in status.conditions] == [du.PROGRESSING, du.AVAILABLE]
    du.set_condition(status, du.new_condition(du.PROGRESSING, "True", "BecauseItIs", "", T0 + 5))
    assert [c.type for c in status.conditions] == [du.AVAILABLE, du.PROGRESSING]
    du.set_condition(status, du.new_condition(du.PROGRESSING, "True", "Other", "", T0 + 9))
    progressing = du.get_condition(status, du.PROGRESSING)
    assert progressing is not None and progressing.reason == "Other"
    assert progressing.last_transition_time == format_time(T0 + 5)  # same status: kept
    du.remove_condition(status, du.PROGRESSING)
    du.remove_condition(status, du.REPLICA_FAILURE)  # absent: nothing happens
    assert [c.type for c in status.conditions] == [du.AVAILABLE]


def test_revision_annotations_and_history() -> None:
    """TestAnnotationUtils: revisions 11..20 with a 5-character history limit."""
    d = deployment(1)
    d.metadata.annotations[du.REVISION_ANNOTATION] = "1"
    d.metadata.annotations["team"] = "web"
    rs = replica_set("rs", 0)
    for i in range(10, 20):
        du.set_new_replica_set_annotations(d, rs, str(i + 1), True, 5)
        assert rs.metadata.annotations[du.REVISION_ANNOTATION] == str(i + 1)
        if i >= 12:
            assert rs.metadata.annotations[du.REVISION_HISTORY_ANNOTATION] == f"{i - 1},{i}"
    assert rs.metadata.annotations["team"] == "web"  # copied
    assert du.set_replicas_annotations(rs, 10, 11)
    assert rs.metadata.annotations[du.DESIRED_REPLICAS_ANNOTATION] == "10"
    assert rs.metadata.annotations[du.MAX_REPLICAS_ANNOTATION] == "11"
    assert not du.set_replicas_annotations(rs, 10, 11)
    rs.metadata.annotations[du.DESIRED_REPLICAS_ANNOTATION] = "1"
    rs.status.available_replicas, rs.spec.replicas = 1, 1
    assert du.is_saturated(d, rs)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0", 0),
        ("13", 13),
        (str(du.MAX_INT32), du.MAX_INT32),
        ("-1", None),
        ("x", None),
        (str(du.MAX_INT32 + 1), None),
        ("", None),
    ],
)
def test_replicas_annotations_are_non_negative_int32(text: str, want: int | None) -> None:
    rs = replica_set("rs", 1)
    rs.metadata.annotations[du.DESIRED_REPLICAS_ANNOTATION] = text
    assert du.desired_replicas_annotation(rs) == want


def test_compute_hash_depends_on_template_and_collision_count_and_is_label_safe() -> None:
    t = deployment(1).spec.template
    h = du.compute_hash(t, None)
    assert h == du.compute_hash(t, None)
    assert h != du.compute_hash(t, 1) and du.compute_hash(t, 1) != du.compute_hash(t, 2)
    other = pb.PodTemplateSpec()
    other.CopyFrom(t)
    other.metadata.labels["x"] = "y"
    assert du.compute_hash(other, None) != h
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789") and 0 < len(h) <= 10
