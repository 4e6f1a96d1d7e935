"""The rollout decisions on upstream's rolling_test.go and sync_test.go (TestScale) tables."""

from __future__ import annotations

import pytest

from controllers import deploymentutil as du
from controllers.deploymentrollout import (
    InvalidScaleDown,
    new_replica_set_target,
    old_replica_sets_plan,
    rolling_scale_down_plan,
    unhealthy_cleanup_plan,
)
from controllers.deploymentsync import scale_plan
from proto import kse_pb2 as pb
from tests.unit.controllers.helpers import NEW, OLD, OLDER, deployment, replica_set


@pytest.mark.parametrize(
    ("replicas", "surge", "old", "new", "want"),
    [
        (10, 0, 10, 0, 0),  # no room: no scale-up
        (10, 2, 10, 0, 2),
        (10, 2, 5, 0, 7),
        (10, 2, 10, 2, 2),
        (10, 2, 2, 11, 10),  # too big: scaled down to the deployment's size
    ],
)
def test_reconcile_new_replica_set(replicas: int, surge: int, old: int, new: int, want: int) -> None:
    d = deployment(replicas, surge=surge, unavailable=0)
    new_rs, old_rs = replica_set("foo-v2", new), replica_set("foo-v1", old)
    assert new_replica_set_target([new_rs, old_rs], new_rs, d) == want


@pytest.mark.parametrize(
    ("replicas", "unavailable", "old", "new", "old_ready", "new_ready", "want_old"),
    [
        (10, 0, 10, 0, 10, 0, 9),
        (10, 2, 10, 0, 10, 0, 8),
        (10, 2, 10, 0, 8, 0, 8),  # the 2 unhealthy old replicas go first
        (10, 2, 10, 0, 9, 0, 8),  # 1 unhealthy, then 1 ready
        (10, 2, 8, 2, 8, 0, None),  # the new RS's unavailable pods block any further scale-down
    ],
)
def test_reconcile_old_replica_sets(
    replicas: int, unavailable: int, old: int, new: int, old_ready: int, new_ready: int, want_old: int | None
) -> None:
    d = deployment(replicas, surge=0, unavailable=unavailable)
    new_rs = replica_set("foo-new", new, available=new_ready)
    old_rs = replica_set("foo-old", old, OLD, available=old_ready)
    cleanup, scale_down = old_replica_sets_plan([old_rs, new_rs], [old_rs], new_rs, d)
    final = dict((rs.metadata.name, n) for rs, n in [*cleanup, *scale_down])
    if want_old is None:
        assert not cleanup and not scale_down
    else:
        assert final["foo-old"] == want_old


@pytest.mark.parametrize(("ready", "max_cleanup", "want"), [(8, 1, 1), (8, 3, 2), (8, 0, 0), (10, 3, 0)])
def test_cleanup_unhealthy_replicas(ready: int, max_cleanup: int, want: int) -> None:
    old = replica_set("foo-v2", 10, available=ready)
    plan = unhealthy_cleanup_plan([old], max_cleanup)
    assert sum(rs.spec.replicas - n for rs, n in plan) == want


def test_cleanup_refuses_to_scale_an_old_replica_set_up() -> None:
    """A status that still counts the pods of an unobserved scale-down (available 3 of spec 1)
    must not turn the cleanup into a scale-up: upstream returns an error and retries. The state
    is one a controller-manager saw right after a leader change, when acting on it took the
    rollout to 11 active pods against replicas 6 + maxSurge 2."""
    d = deployment(6, surge=2, unavailable=1)
    new_rs = replica_set("foo-new", 6, available=5)
    old_rs = replica_set("foo-old", 1, OLD, available=3)
    with pytest.raises(InvalidScaleDown, match=r"default/foo-old 1 -> 3"):
        old_replica_sets_plan([old_rs, new_rs], [old_rs], new_rs, d)


@pytest.mark.parametrize(
    ("replicas", "unavailable", "ready", "old", "want"),
    [
        (10, 0, 10, 10, 9),
        (10, 2, 10, 10, 8),
        (10, 2, 8, 10, None),
        (10, 2, 10, 0, None),
        (10, 2, 1, 10, None),
    ],
)
def test_scale_down_old_for_rolling_update(
    replicas: int, unavailable: int, ready: int, old: int, want: int | None
) -> None:
    d = deployment(replicas, surge=0, unavailable=unavailable)
    old_rs = replica_set("foo-v2", old, available=ready)
    plan = rolling_scale_down_plan([old_rs], [old_rs], d)
    if want is None:
        assert plan == []
    else:
        assert [(rs.metadata.name, n) for rs, n in plan] == [("foo-v2", want)]


def _annotate(rs: pb.ReplicaSet | None, old_d: pb.Deployment, desired: int | None = None) -> None:
    if rs is not None:
        n = old_d.spec.replicas if desired is None else desired
        du.set_replicas_annotations(rs, n, n + du.max_surge(old_d))


SCALE_CASES = [
    # name, deployment and old deployment (replicas, surge), new RS, old RSs, want new, want olds
    ("normal scaling event: 10 -> 12", (12, 0), (10, 0), ("foo-v1", 10, NEW), [], 12, []),
    ("normal scaling event: 10 -> 5", (5, 0), (10, 0), ("foo-v1", 10, NEW), [], 5, []),
    ("proportional scaling: 5 -> 10", (10, 0), (5, 0), ("foo-v2", 2, NEW), [("foo-v1", 3, OLD)], 4, [6]),
    ("proportional scaling: 5 -> 3", (3, 0), (5, 0), ("foo-v2", 2, NEW), [("foo-v1", 3, OLD)], 1, [2]),
    ("proportional scaling: 9 -> 4", (4, 0), (9, 0), ("foo-v2", 8, NEW), [("foo-v1", 1, OLD)], 4, [0]),
    ("proportional scaling: 7 -> 10", (10, 0), (7, 0), ("foo-v3", 2, NEW),
     [("foo-v2", 3, OLD), ("foo-v1", 2, OLDER)], 3, [4, 3]),
    ("proportional scaling: 13 -> 8", (8, 0), (13, 0), ("foo-v3", 2, NEW),
     [("foo-v2", 8, OLD), ("foo-v1", 3, OLDER)], 1, [5, 2]),
    ("leftover distribution: 3 -> 4", (4, 0), (3, 0), ("foo-v3", 1, NEW),
     [("foo-v2", 1, OLD), ("foo-v1", 1, OLDER)], 2, [1, 1]),
    ("leftover distribution: 3 -> 2", (2, 0), (3, 0), ("foo-v3", 1, NEW),
     [("foo-v2", 1, OLD), ("foo-v1", 1, OLDER)], 1, [1, 0]),
    ("proportional scaling (no new rs): 4 -> 5", (5, 0), (4, 0), None,
     [("foo-v2", 2, OLD), ("foo-v1", 2, OLDER)], None, [3, 2]),
    ("proportional scaling: 6 -> 0", (0, 0), (6, 0), ("foo-v3", 3, NEW),
     [("foo-v2", 2, OLD), ("foo-v1", 1, OLDER)], 0, [0, 0]),
    ("proportional scaling: 0 -> 6", (6, 0), (6, 0), ("foo-v3", 0, NEW),
     [("foo-v2", 0, OLD), ("foo-v1", 0, OLDER)], 6, [0, 0]),
    ("deployment with surge pods", (20, 2), (10, 2), ("foo-v2", 6, NEW), [("foo-v1", 6, OLD)], 11, [11]),
    ("change both surge and size", (50, 6), (10, 3), ("foo-v2", 5, NEW), [("foo-v1", 8, OLD)], 22, [34]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "dep", "old_dep", "new", "olds", "want_new", "want_olds"), SCALE_CASES)
def test_scale(
    name: str,
    dep: tuple[int, int],
    old_dep: tuple[int, int],
    new: tuple[str, int, float] | None,
    olds: list[tuple[str, int, float]],
    want_new: int | None,
    want_olds: list[int],
) -> None:
    d, old_d = deployment(dep[0], surge=dep[1]), deployment(old_dep[0], surge=old_dep[1])
    new_rs = replica_set(*new) if new is not None else None
    old_rss = [replica_set(*o) for o in olds]
    for rs in [new_rs, *old_rss]:
        _annotate(rs, old_d)
    plan, _ = scale_plan(d, new_rs, old_rss)
    sizes = {rs.metadata.name: rs.spec.replicas for rs in [*old_rss, *([new_rs] if new_rs else [])]}
    sizes.update({rs.metadata.name: n for rs, n in plan})
    if new_rs is not None:
        assert sizes[new_rs.metadata.name] == want_new, name
    assert [sizes[rs.metadata.name] for rs in old_rss] == want_olds, name


def test_scale_leaves_old_pods_alone_when_a_saturated_new_rs_is_broken() -> None:
    d = deployment(2, surge=1, unavailable=1)
    new_rs, old_rs = replica_set("foo-v2", 2, NEW, available=0), replica_set("foo-v1", 1, OLD)
    for rs in (new_rs, old_rs):
        _annotate(rs, d)
    plan, _ = scale_plan(d, new_rs, [old_rs])
    assert {rs.metadata.name: n for rs, n in plan} == {"foo-v2": 2, "foo-v1": 1}


def test_scale_with_an_unchanged_size_still_rewrites_the_annotations() -> None:
    """A scaling event whose spread adds nothing must still record the new size, or every later
    sync would see a scaling event again."""
    d, old_d = deployment(5), deployment(3)
    new_rs, old_rs = replica_set("foo-v2", 3, NEW), replica_set("foo-v1", 2, OLD)
    for rs in (new_rs, old_rs):
        _annotate(rs, old_d)
    plan, operation = scale_plan(d, new_rs, [old_rs])
    assert operation == "" and {rs.metadata.name: n for rs, n in plan} == {"foo-v2": 3, "foo-v1": 2}
