"""The shared-registry pull model's arithmetic (nodesim.pullmodel) and the pull policies."""

from __future__ import annotations

import math

import pytest

from nodesim.pullmodel import PullEngine, max_min_shares
from nodesim.pullpolicy import ALWAYS, IF_NOT_PRESENT, NEVER, effective_policy, plan_images
from proto import kse_pb2 as pb

Mi = 1024 * 1024


def test_max_min_shares_water_fills() -> None:
    assert max_min_shares([], 10.0) == []
    assert max_min_shares([5.0, 5.0], 100.0) == [5.0, 5.0]  # both at their cap
    assert max_min_shares([10.0, 10.0, 10.0], 12.0) == [4.0, 4.0, 4.0]  # equal split
    # The small flow keeps its cap; what it leaves goes to the others.
    assert max_min_shares([1.0, 10.0, 10.0], 12.0) == [1.0, 5.5, 5.5]
    assert max_min_shares([3.0, 7.0], math.inf) == [3.0, 7.0]


def test_one_pull_takes_size_over_node_bandwidth() -> None:
    e = PullEngine(node_bandwidth=100 * Mi)
    e.advance(0.0)
    assert e.request("n1", "a:1", 250 * Mi, 0.0)
    assert e.next_completion() == pytest.approx(2.5)
    assert e.advance(2.0) == []
    done = e.advance(3.0)
    assert [(p.image, p.finished_at) for p in done] == [("a:1", pytest.approx(2.5))]
    assert e.bytes_pulled == 250 * Mi
    assert e.next_completion() is None


def test_serial_pulls_queue_behind_each_other() -> None:
    e = PullEngine(node_bandwidth=100 * Mi)
    e.advance(0.0)
    e.request("n1", "a:1", 100 * Mi, 0.0)
    e.request("n1", "b:1", 200 * Mi, 0.0)
    assert not e.request("n1", "b:1", 200 * Mi, 0.0)  # already queued: wait for it
    assert e.pulling("n1", "b:1")
    done = e.advance(10.0)
    assert [(p.image, p.started_at, p.finished_at) for p in done] == [
        ("a:1", 0.0, pytest.approx(1.0)),
        ("b:1", pytest.approx(1.0), pytest.approx(3.0)),
    ]


def test_parallel_pulls_split_the_node_link() -> None:
    e = PullEngine(node_bandwidth=100 * Mi, serialize=False)
    e.advance(0.0)
    e.request("n1", "a:1", 100 * Mi, 0.0)
    e.request("n1", "b:1", 300 * Mi, 0.0)
    done = e.advance(10.0)
    # Both at 50 MiB/s until a ends at 2 s (100 MiB); b has 200 MiB left, alone at 100 MiB/s: 4 s.
    got = [(p.image, p.finished_at) for p in done]
    assert got == [("a:1", pytest.approx(2.0)), ("b:1", pytest.approx(4.0))]


def test_the_registry_is_shared_among_nodes() -> None:
    # Registry 100 MiB/s, nodes 100 MiB/s: two nodes pulling at once get 50 MiB/s each.
    e = PullEngine(node_bandwidth=100 * Mi, registry_bandwidth=100 * Mi)
    e.advance(0.0)
    e.request("n1", "a:1", 100 * Mi, 0.0)
    e.request("n2", "a:1", 100 * Mi, 0.0)  # the same image on another node is another pull
    assert e.next_completion() == pytest.approx(2.0)
    # A third node joins at 1 s: each has 50 MiB left; now 33.3 MiB/s each -> n1, n2 end at 2.5 s.
    assert e.advance(1.0) == []
    e.request("n3", "b:1", 100 * Mi, 1.0)
    done = e.advance(2.5)
    assert sorted(p.node for p in done) == ["n1", "n2"]
    assert all(p.finished_at == pytest.approx(2.5) for p in done)
    # n3 pulled 50 MiB in 1.5 s; alone now at 100 MiB/s: the other 50 MiB take 0.5 s.
    assert e.next_completion() == pytest.approx(3.0)


def test_node_cap_leaves_registry_share_to_others() -> None:
    e = PullEngine(node_bandwidth=40 * Mi, registry_bandwidth=100 * Mi, serialize=False)
    e.advance(0.0)
    e.request("n1", "a:1", 40 * Mi, 0.0)
    e.request("n2", "b:1", 40 * Mi, 0.0)
    e.request("n2", "c:1", 40 * Mi, 0.0)
    rates = {p.image: p.rate for p in e.in_flight()}
    # n2's two pulls are capped at 20 MiB/s each by its link; n1 gets 40 (its cap), 20 MiB/s unused.
    assert rates == {
        "a:1": pytest.approx(40 * Mi),
        "b:1": pytest.approx(20 * Mi),
        "c:1": pytest.approx(20 * Mi),
    }


def test_no_limits_means_instant_and_zero_size_pulls_end_at_once() -> None:
    e = PullEngine(node_bandwidth=0)
    e.advance(5.0)
    e.request("n1", "a:1", 10 * Mi, 5.0)
    assert [p.finished_at for p in e.advance(5.0)] == [5.0]
    e2 = PullEngine(node_bandwidth=10 * Mi)
    e2.advance(0.0)
    e2.request("n1", "empty:1", 0, 0.0)
    assert [p.image for p in e2.advance(0.0)] == ["empty:1"]


def test_request_refuses_to_skip_time() -> None:
    e = PullEngine(node_bandwidth=10 * Mi)
    e.advance(0.0)
    e.request("n1", "a:1", 100 * Mi, 0.0)
    with pytest.raises(RuntimeError, match="advance"):
        e.request("n1", "b:1", 1, 5.0)


def _container(image: str, policy: str = "") -> pb.Container:
    return pb.Container(name="c", image=image, image_pull_policy=policy)


def test_default_policy_is_upstreams() -> None:
    # SetDefaults_Container: Always for :latest or no tag, else IfNotPresent; a digest is not latest.
    assert effective_policy(_container("nginx")) == ALWAYS
    assert effective_policy(_container("nginx:latest")) == ALWAYS
    assert effective_policy(_container("nginx:1.27")) == IF_NOT_PRESENT
    assert effective_policy(_container("reg:5000/nginx")) == ALWAYS
    assert effective_policy(_container("nginx@sha256:abc")) == IF_NOT_PRESENT
    assert effective_policy(_container("nginx:1.27", "Never")) == NEVER


def test_plan_images_per_policy() -> None:
    pod = pb.Pod(
        spec=pb.PodSpec(
            init_containers=[_container("init:1", "IfNotPresent")],
            containers=[_container("app:1", "Always"), _container("side:1", "IfNotPresent")],
        )
    )
    plan = plan_images(pod, cached={"app:1", "side:1"})
    assert plan.to_pull == ["init:1"]
    assert plan.always_checks == 1  # app:1 present with Always: a manifest check, no bytes
    assert plan.never_missing == []
    plan = plan_images(pod, cached=set())
    assert plan.to_pull == ["init:1", "app:1", "side:1"]
    assert plan.always_checks == 0
    never = pb.Pod(spec=pb.PodSpec(containers=[_container("gone:1", "Never")]))
    assert plan_images(never, cached=set()).never_missing == ["gone:1"]
    assert plan_images(never, cached={"gone:1"}).never_missing == []
