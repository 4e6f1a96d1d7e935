"""Deletion ranking on upstream's TestSortingActivePods / TestSortingActivePodsWithRanks cases."""

from __future__ import annotations

import random

from controllers.ranking import less, pods_to_delete, rank_by_related_pods_on_node, sort_for_deletion
from tests.unit.controllers.helpers import pod

NOW = 1_700_000_000.0


def test_the_upstream_order_from_most_to_least_deletable() -> None:
    """Each pod below should be deleted before every pod after it (TestSortingActivePods)."""
    ordered = [
        pod("unscheduled", node="", phase="Pending", ready=False),
        pod("pending", phase="Pending", ready=False),
        pod("unknown", phase="Unknown", ready=False),
        pod("running-not-ready", ready=False),
        pod("ready-recently-many-restarts", ready_since=NOW - 10, restarts=5),
        pod("ready-recently", ready_since=NOW - 10),
        pod("ready-long-ago", ready_since=NOW - 100_000),
    ]
    for _ in range(20):
        shuffled = random.sample(ordered, len(ordered))
        got = sort_for_deletion(shuffled, [0] * len(shuffled), NOW)
        assert [p.metadata.name for p in got] == [p.metadata.name for p in ordered]


def test_deletion_cost_beats_colocation_and_age() -> None:
    cheap = pod("cheap", cost="-10", ready_since=NOW - 100_000)
    dear = pod("dear", cost="100", ready_since=NOW - 10)
    assert less(cheap, dear, 0, 5, NOW)
    assert not less(dear, cheap, 5, 0, NOW)
    assert less(pod("bad-cost", cost="x"), pod("positive", cost="1"), 0, 0, NOW)  # unparsable: 0


def test_doubled_up_pods_go_first() -> None:
    a, b = pod("a", node="n1"), pod("b", node="n2")
    assert less(a, b, 3, 1, NOW) and not less(b, a, 1, 3, NOW)


def test_ready_times_in_the_same_log2_bucket_tie_break_on_uid() -> None:
    # 1200 s and 1300 s ago fall in the same power-of-two bucket of nanoseconds (2^40 ns ~ 1100 s).
    x = pod("x", ready_since=NOW - 1200, uid="b")
    y = pod("y", ready_since=NOW - 1300, uid="a")
    assert less(y, x, 0, 0, NOW) and not less(x, y, 0, 0, NOW)


def test_newer_pods_go_before_older_ones_and_empty_timestamps_first() -> None:
    young, old = pod("young", ready=False, created=NOW - 10), pod("old", ready=False, created=NOW - 100_000)
    assert less(young, old, 0, 0, NOW)
    no_time = pod("no-time", ready=False)
    no_time.metadata.creation_timestamp = ""
    assert less(no_time, old, 0, 0, NOW)


def test_ranks_count_related_active_pods_on_the_same_node() -> None:
    mine = [pod("a", node="n1"), pod("b", node="n2")]
    related = [*mine, pod("c", node="n1"), pod("gone", node="n2", phase="Succeeded")]
    assert rank_by_related_pods_on_node(mine, related) == [2, 1]


def test_pods_to_delete_takes_the_most_deletable() -> None:
    pods = [pod("ready", ready_since=NOW - 100), pod("pending", phase="Pending", ready=False), pod("other")]
    assert [p.metadata.name for p in pods_to_delete(pods, pods, 1, NOW)] == ["pending"]
    assert len(pods_to_delete(pods, pods, 5, NOW)) == 3
