"""The scheduler cache (scheduler/cache): assume / confirm / forget / expire, nodes and ghosts, and
the incremental snapshot update. Ported in spirit from upstream backend/cache/cache_test.go; time
comes from an injected clock."""

from __future__ import annotations

import numpy as np
import pytest

from proto import kse_pb2 as pb
from scheduler.cache.cache import Cache, CacheError, confirmed_pod_info
from scheduler.cache.snapshot_update import NodeTree, zone_key
from scheduler.framework.nodeinfo import ResourceArrays, Snapshot
from scheduler.framework.types import PodInfo


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def make_node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    *,
    zone: str = "",
    images: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
) -> pb.Node:
    node = pb.Node(metadata=pb.ObjectMeta(name=name, labels=labels or {}))
    if zone:
        node.metadata.labels["topology.kubernetes.io/zone"] = zone
    node.status.allocatable.update({"cpu": cpu, "memory": memory, "pods": pods})
    node.status.capacity.update(node.status.allocatable)
    for image, size in (images or {}).items():
        node.status.images.add(names=[image], size_bytes=size)
    return node


def make_pod(
    name: str, node: str = "", cpu: str = "100m", memory: str = "100Mi", *, uid: str = "", anti: bool = False
) -> pb.Pod:
    pod = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace="default", uid=uid or f"uid-{name}"))
    c = pod.spec.containers.add(name="c", image="busybox")
    c.resources.requests.update({"cpu": cpu, "memory": memory})
    pod.spec.node_name = node
    if anti:
        term = pod.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution.add()
        term.topology_key = "kubernetes.io/hostname"
        term.label_selector.match_labels["app"] = "x"
    return pod


def bound(pod: pb.Pod, node: str) -> pb.Pod:
    out = pb.Pod()
    out.CopyFrom(pod)
    out.spec.node_name = node
    out.metadata.resource_version = "42"
    return out


def requested_cpu(cache: Cache, node: str) -> int:
    ni = cache.node_info(node)
    assert ni is not None
    return ni.requested.milli_cpu


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> Cache:
    c = Cache(ttl=30.0, clock=clock)
    for i in range(3):
        c.add_node(make_node(f"n{i}"))
    return c


# ---------------------------------------------------------------- assume / confirm / forget / expire


def test_assumed_pod_counts_at_once_and_in_the_next_snapshot(cache: Cache) -> None:
    snap = cache.new_snapshot()
    pod = PodInfo(make_pod("p", cpu="500m"))
    cache.assume_pod(pod, "n1")
    assert cache.is_assumed_pod(pod)
    assert requested_cpu(cache, "n1") == 500
    cache.update_snapshot(snap)
    assert snap.get("n1").requested.milli_cpu == 500
    assert snap.arrays().req_milli_cpu[snap.index_of("n1")] == 500
    assert cache.get_pod(pod) == (pod, "n1")


def test_assume_twice_is_an_error(cache: Cache) -> None:
    pod = PodInfo(make_pod("p"))
    cache.assume_pod(pod, "n0")
    with pytest.raises(CacheError, match="is in the cache, so can't be assumed"):
        cache.assume_pod(pod, "n1")
    assert requested_cpu(cache, "n1") == 0


def test_assumed_pod_expires_only_after_finish_binding_plus_ttl(cache: Cache, clock: FakeClock) -> None:
    pod = PodInfo(make_pod("p", cpu="1"))
    cache.assume_pod(pod, "n0")
    clock.step(3600)  # binding still in flight: never expires, however long
    assert cache.cleanup_assumed_pods() == []
    cache.finish_binding(pod)
    clock.step(29.9)
    assert cache.cleanup_assumed_pods() == []
    assert requested_cpu(cache, "n0") == 1000
    clock.step(0.2)
    assert cache.cleanup_assumed_pods() == [(pod, "n0")]
    assert requested_cpu(cache, "n0") == 0
    assert not cache.is_assumed_pod(pod)
    assert cache.pod_count() == 0


def test_ttl_zero_never_expires(clock: FakeClock) -> None:
    cache = Cache(ttl=0, clock=clock)
    cache.add_node(make_node("n0"))
    pod = PodInfo(make_pod("p"))
    cache.assume_pod(pod, "n0")
    cache.finish_binding(pod)
    clock.step(10**6)
    assert cache.cleanup_assumed_pods() == []
    assert cache.is_assumed_pod(pod)


def test_informer_add_confirms_an_assumed_pod(cache: Cache, clock: FakeClock) -> None:
    raw = make_pod("p", cpu="700m")
    info = PodInfo(raw)
    cache.assume_pod(info, "n2")
    cache.finish_binding(info)
    cache.add_pod(bound(raw, "n2"))
    assert not cache.is_assumed_pod(raw)
    clock.step(3600)
    assert cache.cleanup_assumed_pods() == []
    assert requested_cpu(cache, "n2") == 700
    got = cache.get_pod(raw)
    assert got is not None and got[0].pod.spec.node_name == "n2"
    # Added now: a second add is refused, an update works, forget refuses.
    with pytest.raises(CacheError, match="already in added state"):
        cache.add_pod(bound(raw, "n2"))
    with pytest.raises(CacheError, match="is not assumed"):
        cache.forget_pod(raw)


def test_confirmation_on_another_node_moves_the_pod(cache: Cache) -> None:
    raw = make_pod("p", cpu="300m")
    cache.assume_pod(PodInfo(raw), "n0")
    cache.add_pod(bound(raw, "n1"))
    assert requested_cpu(cache, "n0") == 0
    assert requested_cpu(cache, "n1") == 300


def test_forget_undoes_assume(cache: Cache) -> None:
    raw = make_pod("p", cpu="1")
    info = PodInfo(raw)
    cache.assume_pod(info, "n0")
    with pytest.raises(CacheError, match="was assumed on n1 but assigned to n0"):
        cache.forget_pod(info, "n1")
    cache.forget_pod(info, "n0")
    assert requested_cpu(cache, "n0") == 0
    assert cache.pod_count() == 0
    cache.forget_pod(info)  # gone already: fine, as upstream


def test_pods_are_keyed_by_uid(cache: Cache) -> None:
    a = make_pod("same", "n0", uid="u1")
    b = make_pod("same", "n1", uid="u2")  # deleted and recreated under the same name
    cache.add_pod(a)
    cache.add_pod(b)
    assert cache.pod_count() == 2
    cache.remove_pod(a)
    assert requested_cpu(cache, "n0") == 0
    assert requested_cpu(cache, "n1") == 100


def test_update_and_remove_of_assigned_pods(cache: Cache) -> None:
    old = make_pod("p", "n0", cpu="1")
    cache.add_pod(old)
    new = pb.Pod()
    new.CopyFrom(old)
    new.spec.containers[0].resources.requests["cpu"] = "250m"  # an in-place resize
    cache.update_pod(old, new)
    assert requested_cpu(cache, "n0") == 250
    cache.remove_pod(new)
    assert requested_cpu(cache, "n0") == 0
    with pytest.raises(CacheError, match="not found in scheduler cache"):
        cache.remove_pod(new)
    with pytest.raises(CacheError, match="not added to scheduler cache"):
        cache.update_pod(old, new)


def test_assumed_pod_must_not_be_updated(cache: Cache) -> None:
    raw = make_pod("p")
    cache.assume_pod(PodInfo(raw), "n0")
    with pytest.raises(CacheError, match="should not be updated"):
        cache.update_pod(bound(raw, "n0"), bound(raw, "n0"))


# ---------------------------------------------------------------- nodes and ghosts


def test_pod_before_its_node(clock: FakeClock) -> None:
    cache = Cache(clock=clock)
    cache.add_pod(make_pod("p", "late", cpu="1"))
    snap = cache.new_snapshot()
    assert snap.num_nodes() == 0  # a node-less NodeInfo is not a node
    cache.add_node(make_node("late"))
    cache.update_snapshot(snap)
    assert snap.num_nodes() == 1
    assert snap.get("late").requested.milli_cpu == 1000


def test_removed_node_with_pods_is_a_ghost_until_its_pods_go(cache: Cache) -> None:
    snap = cache.new_snapshot()
    pod = make_pod("p", "n1")
    cache.add_pod(pod)
    cache.remove_node(make_node("n1"))
    cache.update_snapshot(snap)
    assert [ni.name for ni in snap.list()] == ["n0", "n2"]
    with pytest.raises(KeyError):
        snap.get("n1")
    assert cache.node_count() == 3  # the ghost
    cache.remove_pod(pod)
    assert cache.node_count() == 2
    cache.update_snapshot(snap)
    assert snap.num_nodes() == 2
    with pytest.raises(CacheError, match="node n1 is not found"):
        cache.remove_node(make_node("n1"))


def test_ghost_node_coming_back_keeps_its_pods(cache: Cache) -> None:
    cache.add_pod(make_pod("p", "n1", cpu="2"))
    cache.remove_node(make_node("n1"))
    cache.update_node(None, make_node("n1", cpu="8"))
    snap = cache.new_snapshot()
    ni = snap.get("n1")
    assert ni.requested.milli_cpu == 2000 and ni.allocatable.milli_cpu == 8000


def test_node_update_changes_allocatable_in_the_snapshot(cache: Cache) -> None:
    snap = cache.new_snapshot()
    arrays = snap.arrays()
    cache.update_node(make_node("n0"), make_node("n0", cpu="16"))
    cache.update_snapshot(snap)
    assert snap.arrays() is arrays  # patched in place, not rebuilt
    assert arrays.alloc_milli_cpu.tolist() == [16000, 4000, 4000]


def test_image_states_count_nodes_cluster_wide(clock: FakeClock) -> None:
    cache = Cache(clock=clock)
    cache.add_node(make_node("a", images={"img:1": 100, "other:1": 7}))
    cache.add_node(make_node("b", images={"img:1": 100}))
    snap = cache.new_snapshot()
    assert snap.get("a").image_states["img:1"].num_nodes == 2
    assert snap.get("a").image_states["other:1"].num_nodes == 1
    cache.remove_node(make_node("b"))
    cache.update_node(None, make_node("a", images={"img:1": 100}))
    cache.update_snapshot(snap)
    assert snap.get("a").image_states == {"img:1": snap.get("a").image_states["img:1"]}
    assert snap.get("a").image_states["img:1"].num_nodes == 1


# ---------------------------------------------------------------- incremental snapshots


def _assert_arrays_match(snap: Snapshot) -> None:
    fresh = ResourceArrays(snap.node_info_list)
    got = snap.arrays()
    for name in ResourceArrays.__slots__:
        if name.startswith("_"):
            continue
        np.testing.assert_array_equal(getattr(got, name), getattr(fresh, name), err_msg=name)


def test_update_snapshot_copies_only_changed_nodes_and_keeps_objects(cache: Cache) -> None:
    snap = cache.new_snapshot()
    snap.arrays()
    before = {ni.name: ni for ni in snap.list()}
    frozen = {name: (ni.requested.milli_cpu, len(ni.pods)) for name, ni in before.items()}
    cache.assume_pod(PodInfo(make_pod("p", cpu="1")), "n2")
    cache.update_snapshot(snap)
    after = {ni.name: ni for ni in snap.list()}
    # Same objects everywhere (lists that hold them stay valid) ...
    assert all(after[n] is before[n] for n in before)
    # ... only n2's content moved; the snapshot taken before is independent of the cache.
    assert (after["n0"].requested.milli_cpu, after["n1"].requested.milli_cpu) == (0, 0)
    assert after["n2"].requested.milli_cpu == 1000 and len(after["n2"].pods) == 1
    assert frozen["n2"] == (0, 0)
    _assert_arrays_match(snap)


def test_unchanged_nodes_are_not_copied(cache: Cache, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = cache.new_snapshot()
    import scheduler.cache.cache as cache_module

    copied: list[str] = []
    real = cache_module.copy_into

    def spy(dst: object, src: object) -> None:
        copied.append(src.name)  # type: ignore[attr-defined]
        real(dst, src)  # type: ignore[arg-type]

    monkeypatch.setattr(cache_module, "copy_into", spy)
    cache.update_snapshot(snap)
    assert copied == []
    cache.add_pod(make_pod("a", "n0"))
    cache.add_pod(make_pod("b", "n1"))
    cache.update_snapshot(snap)
    assert sorted(copied) == ["n0", "n1"]


def test_snapshot_is_isolated_from_later_cache_changes(cache: Cache) -> None:
    snap = cache.new_snapshot()
    cache.add_pod(make_pod("a", "n0", cpu="1"))
    assert snap.get("n0").requested.milli_cpu == 0  # not until update_snapshot
    cache.update_snapshot(snap)
    assert snap.get("n0").requested.milli_cpu == 1000


def test_affinity_lists_follow_changes(cache: Cache) -> None:
    snap = cache.new_snapshot()
    pod = make_pod("anti", "n1", anti=True)
    cache.add_pod(pod)
    cache.update_snapshot(snap)
    assert [ni.name for ni in snap.have_pods_with_required_anti_affinity_list()] == ["n1"]
    assert [ni.name for ni in snap.have_pods_with_affinity_list()] == ["n1"]
    cache.remove_pod(pod)
    cache.update_snapshot(snap)
    assert snap.have_pods_with_required_anti_affinity_list() == []


def test_node_order_is_stable_and_interleaves_zones(clock: FakeClock) -> None:
    cache = Cache(clock=clock)
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")]:
        cache.add_node(make_node(name, zone=zone))
    snap = cache.new_snapshot()
    order = [ni.name for ni in snap.list()]
    assert order == ["a1", "b1", "c1", "a2", "c2", "a3"]
    for i, name in enumerate(order):
        cache.add_pod(make_pod(f"p{i}", name))
    cache.update_node(make_node("b1", zone="b"), make_node("b1", cpu="8", zone="b"))
    cache.update_snapshot(snap)
    assert [ni.name for ni in snap.list()] == order  # pod and node changes keep the order
    cache.remove_node(make_node("b1", zone="b"))  # b1 has a pod: ghost, left out
    cache.add_node(make_node("b2", zone="b"))
    cache.update_snapshot(snap)
    assert [ni.name for ni in snap.list()] == ["a1", "c1", "b2", "a2", "c2", "a3"]
    _assert_arrays_match(snap)


def test_node_moving_zone_moves_in_the_order(clock: FakeClock) -> None:
    tree = NodeTree()
    for name, zone in [("x", "a"), ("y", "b"), ("z", "a")]:
        tree.add_node(make_node(name, zone=zone))
    assert tree.list() == ["x", "y", "z"]
    tree.update_node(None, make_node("x", zone="b"))
    assert tree.list() == ["z", "y", "x"]
    assert zone_key(make_node("n")) == ""
    assert zone_key(make_node("n", labels={"topology.kubernetes.io/region": "r"})) == "r:\x00:"


def test_many_random_operations_agree_with_a_fresh_snapshot(clock: FakeClock) -> None:
    """Property: after any sequence of cache operations, the incrementally updated snapshot equals
    a snapshot built from scratch."""
    import random

    rng = random.Random(7)
    cache = Cache(clock=clock)
    snap = Snapshot()
    nodes = {f"n{i}": make_node(f"n{i}", zone=rng.choice("abc")) for i in range(12)}
    live_nodes: set[str] = set()
    pods: dict[str, pb.Pod] = {}
    assumed: dict[str, PodInfo] = {}
    for step in range(600):
        op = rng.random()
        if op < 0.15:
            name = rng.choice(list(nodes))
            if name in live_nodes:
                cache.remove_node(nodes[name])
                live_nodes.discard(name)
            else:
                cache.add_node(nodes[name])
                live_nodes.add(name)
        elif op < 0.45 and live_nodes:
            p = make_pod(
                f"p{step}",
                rng.choice(sorted(live_nodes)),
                cpu=f"{rng.randint(1, 9)}00m",
                anti=rng.random() < 0.2,
            )
            cache.add_pod(p)
            pods[p.metadata.uid] = p
        elif op < 0.65 and pods:
            uid = rng.choice(sorted(pods))
            cache.remove_pod(pods.pop(uid))
        elif op < 0.85 and live_nodes:
            info = PodInfo(make_pod(f"a{step}", cpu="50m"))
            cache.assume_pod(info, rng.choice(sorted(live_nodes)))
            assumed[info.uid_key] = info
        elif assumed:
            uid = rng.choice(sorted(assumed))
            cache.forget_pod(assumed.pop(uid))
        if rng.random() < 0.3:
            cache.update_snapshot(snap)
            if rng.random() < 0.5:
                snap.arrays()
            fresh = cache.new_snapshot()
            assert [ni.name for ni in snap.list()] == [ni.name for ni in fresh.list()]
            for a, b in zip(snap.list(), fresh.list(), strict=True):
                assert a.requested == b.requested and len(a.pods) == len(b.pods), a.name
            assert {ni.name for ni in snap.have_pods_with_affinity_list()} == {
                ni.name for ni in fresh.have_pods_with_affinity_list()
            }
            _assert_arrays_match(snap)


def test_confirmation_reuses_what_was_derived_unless_the_spec_changed(cache: Cache) -> None:
    raw = make_pod("p", cpu="300m")
    info = PodInfo(raw)
    assert info.resource.resource.milli_cpu == 300
    info.derived["SomePlugin"] = object()
    cache.assume_pod(info, "n0")
    cache.add_pod(bound(raw, "n0"))
    got = cache.get_pod(raw)
    assert got is not None
    confirmed = got[0]
    assert confirmed is not info and confirmed.pod.spec.node_name == "n0"
    assert confirmed.resource is info.resource and confirmed.derived is info.derived

    other = make_pod("q", cpu="300m")
    other_info = PodInfo(other)
    assert other_info.resource.resource.milli_cpu == 300
    cache.assume_pod(other_info, "n1")
    changed = bound(other, "n1")
    changed.spec.tolerations.add(key="k", operator="Exists")  # not only nodeName: derive afresh
    cache.add_pod(changed)
    got = cache.get_pod(other)
    assert got is not None and got[0].resource is not other_info.resource
    assert requested_cpu(cache, "n1") == 300


def test_a_terminating_bound_pod_keeps_its_resources_until_it_is_gone(cache: Cache) -> None:
    """As upstream: a pod with a deletionTimestamp is still in its NodeInfo (its containers may
    still run for the grace period); only its DELETED event frees the node."""
    pod = make_pod("t", node="n0", cpu="700m")
    cache.add_pod(pod)
    terminating = pb.Pod()
    terminating.CopyFrom(pod)
    terminating.metadata.deletion_timestamp = "2026-01-01T00:00:30Z"
    terminating.metadata.deletion_grace_period_seconds = 30
    cache.update_pod(pod, terminating)
    assert requested_cpu(cache, "n0") == 700
    cache.remove_pod(terminating)
    assert requested_cpu(cache, "n0") == 0


def test_a_confirmed_pod_keeps_what_was_derived_from_its_assumed_pod_unless_the_binding_changed_it() -> None:
    """The bound pod's PodInfo takes over the assumed one's computed attributes and plugins'
    parsed data when only spec.nodeName (and status) moved, and recomputes them otherwise."""
    assumed = PodInfo(make_pod("p", anti=True))
    resource, labels = assumed.resource, assumed.labels
    assert assumed.has_required_anti_affinity and assumed.priority == 0
    assumed.derived["plugin/parsed"] = parsed = object()

    info = confirmed_pod_info(assumed, bound(assumed.pod, "n1"))
    assert info.pod.spec.node_name == "n1" and info.pod is not assumed.pod
    assert info.resource is resource and info.labels is labels
    assert info.has_required_anti_affinity and info.derived["plugin/parsed"] is parsed

    relabelled = bound(assumed.pod, "n1")
    relabelled.metadata.labels["app"] = "new"
    fresh = confirmed_pod_info(assumed, relabelled)
    assert fresh.labels == {"app": "new"} and fresh.resource is not resource
    assert fresh.resource.resource.milli_cpu == 100 and "plugin/parsed" not in fresh.derived
