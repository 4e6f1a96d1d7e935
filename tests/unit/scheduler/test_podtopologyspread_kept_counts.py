"""PodTopologySpread's kept counts and batch forms give what upstream's full scan gives.

The plugin keeps its PreFilter/PreScore counts across cycles (recounting only nodes whose
generation changed) and filters, scores and normalizes over arrays. A reference instance whose
handle hides the Snapshot (so it can keep nothing) scans every node each cycle, per node, as
upstream does; both run on random clusters (zones, racks, hostnames, nodes missing keys,
taints), random pods (hard and soft constraints, selectors, minDomains, nodeSelector,
nodeTaintsPolicy), and again after pods are added to and removed from random nodes and nodes
change zones (the label index must notice).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from kse.objects.labels import Selector, selector_from_set
from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodeScore
from scheduler.framework.nodeinfo import NodeInfo, NodeInfoView, Snapshot
from scheduler.framework.plugins import podtopologyspread as pts
from scheduler.framework.plugins.feature import Features
from scheduler.framework.types import PodInfo

ZONE, RACK, HOST = "zone", "rack", "kubernetes.io/hostname"
APPS = ("a", "b", "c")


class _ScanOnly:
    """A lister over the same nodes that is not a Snapshot: the plugin cannot keep counts."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def snapshot_shared_lister(self) -> _ScanOnly:
        return self

    def node_infos(self) -> _ScanOnly:
        return self

    def list(self) -> list[NodeInfo]:
        return self._snapshot.list()

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        raise AssertionError("not used")


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def snapshot_shared_lister(self) -> Snapshot:
        return self.snapshot

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        raise AssertionError("not used")


def _pod(rng: np.random.Generator, name: str, node: str = "", namespace: str = "default") -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=namespace, uid=name))
    p.metadata.labels["app"] = str(rng.choice(APPS))
    if rng.random() < 0.3:
        p.metadata.labels["tier"] = str(rng.choice(("web", "db")))
    p.spec.node_name = node
    p.spec.containers.add(name="c", image="i")
    if node and rng.random() < 0.05:
        p.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"  # terminating: not counted
    return p


def _by_app(pod: pb.Pod) -> Selector:
    return selector_from_set({"app": pod.metadata.labels["app"]})


def _cluster(rng: np.random.Generator, n_nodes: int) -> Snapshot:
    nodes = []
    for i in range(n_nodes):
        n = pb.Node(metadata=pb.ObjectMeta(name=f"n{i}"))
        if rng.random() < 0.95:
            n.metadata.labels[HOST] = f"n{i}"
        if rng.random() < 0.9:
            n.metadata.labels[ZONE if rng.random() < 0.5 else pts.LABEL_TOPOLOGY_ZONE] = (
                f"z{rng.integers(0, 4)}"
            )
        if rng.random() < 0.7:
            n.metadata.labels[RACK] = f"r{rng.integers(0, 8)}"
        if rng.random() < 0.1:
            n.spec.taints.add(key="dedicated", value="x", effect="NoSchedule")
        nodes.append(n)
    pods = []
    for j in range(n_nodes * 2):
        ns = "default" if rng.random() < 0.85 else "other"
        pods.append(_pod(rng, f"e{j}", f"n{rng.integers(0, n_nodes)}", ns))
    return Snapshot.from_objects(pods, nodes)


def _incoming(rng: np.random.Generator, k: int) -> pb.Pod:
    p = _pod(rng, f"in{k}")
    for _ in range(int(rng.integers(1, 4))):
        c = p.spec.topology_spread_constraints.add(
            max_skew=int(rng.integers(1, 4)),
            topology_key=str(rng.choice((ZONE, RACK, HOST))),
            when_unsatisfiable=str(rng.choice((pts.DO_NOT_SCHEDULE, pts.SCHEDULE_ANYWAY))),
        )
        choice = rng.random()
        if choice < 0.6:
            c.label_selector.match_labels["app"] = str(rng.choice(APPS))
        elif choice < 0.8:
            c.label_selector.match_expressions.add(key="tier", operator="Exists")
        if rng.random() < 0.2:
            c.min_domains = int(rng.integers(1, 6))
        if rng.random() < 0.15:
            c.node_taints_policy = pts.HONOR
    if rng.random() < 0.15:
        p.spec.node_selector[ZONE] = "z1"
    return p


def _dedupe(pod: pb.Pod) -> pb.Pod:
    """Upstream's validation refuses two constraints with the same key and action: keep one."""
    seen: set[tuple[str, str]] = set()
    keep = []
    for c in pod.spec.topology_spread_constraints:
        if (c.topology_key, c.when_unsatisfiable) not in seen:
            seen.add((c.topology_key, c.when_unsatisfiable))
            keep.append(c)
    del pod.spec.topology_spread_constraints[:]
    pod.spec.topology_spread_constraints.extend(keep)
    return pod


def _compare_cycle(
    kept: pts.PodTopologySpread,
    scan: pts.PodTopologySpread,
    snap: Snapshot,
    pod: pb.Pod,
    rng: np.random.Generator,
) -> None:
    nodes = snap.list()
    a_state, b_state = CycleState(), CycleState()
    a_info, b_info = PodInfo(pod), PodInfo(pod)
    got = kept.pre_filter(a_state, a_info, nodes)
    want = scan.pre_filter(b_state, b_info, list(nodes))
    assert got == want
    if want[1] is None:
        a = a_state.read(pts.PRE_FILTER_STATE_KEY)
        b = b_state.read(pts.PRE_FILTER_STATE_KEY)
        assert a.tp_value_to_match_num == b.tp_value_to_match_num
        assert [p.min_match_num() for p in a.critical_paths] == [p.min_match_num() for p in b.critical_paths]
        indices = np.arange(len(nodes), dtype=np.intp)
        mask = kept.filter_nodes(a_state, a_info, snap, indices)
        statuses = [scan.filter(b_state, b_info, ni) for ni in nodes]
        assert mask.tolist() == [s is None for s in statuses]
        assert [kept.filter(a_state, a_info, ni) for ni in nodes] == statuses
        assert kept.filter_statuses(a_state, a_info, snap, indices) == statuses
        # AddPod on the same state (a nominated pod, a preemption victim put back): the batch
        # Filter must see the new counts
        target = nodes[int(rng.integers(0, len(nodes)))]
        extra = PodInfo(_pod(rng, "nominated", target.name))
        assert kept.add_pod(a_state, a_info, extra, target) is None
        assert scan.add_pod(b_state, b_info, extra, target) is None
        mask = kept.filter_nodes(a_state, a_info, snap, indices)
        assert mask.tolist() == [scan.filter(b_state, b_info, ni) is None for ni in nodes]
    # PreScore over a random subset of feasible-looking nodes
    chosen = sorted(rng.choice(len(nodes), size=max(1, len(nodes) // 2), replace=False).tolist())
    candidates: Sequence[NodeInfo] = [nodes[i] for i in chosen]
    # the batch engine hands PreScore a view over the snapshot's list; the scan gets a plain list
    got_s = kept.pre_score(a_state, a_info, NodeInfoView(snap.node_info_list, chosen))
    want_s = scan.pre_score(b_state, b_info, list(candidates))
    assert got_s == want_s
    if want_s is not None:
        return
    a_pre = a_state.read(pts.PRE_SCORE_STATE_KEY)
    b_pre = b_state.read(pts.PRE_SCORE_STATE_KEY)
    assert a_pre.topology_value_to_pod_counts == b_pre.topology_value_to_pod_counts
    assert a_pre.ignored_nodes == b_pre.ignored_nodes
    want_scores = [NodeScore(ni.name, scan.score(b_state, b_info, ni)[0]) for ni in candidates]
    raw = kept.score_nodes(a_state, a_info, snap, np.array(chosen, dtype=np.intp))
    assert raw.tolist() == [ns.score for ns in want_scores]
    assert scan.normalize_score(b_state, b_info, want_scores) is None
    assert kept.normalize_scores(a_state, a_info, candidates, raw) is None
    assert raw.tolist() == [ns.score for ns in want_scores]
    # NormalizeScore alone, on any raw scores
    arbitrary = rng.integers(0, 300, size=len(candidates)).astype(np.int64)
    as_list = [NodeScore(ni.name, int(v)) for ni, v in zip(candidates, arbitrary.tolist(), strict=True)]
    assert scan.normalize_score(b_state, b_info, as_list) is None
    assert kept.normalize_scores(a_state, a_info, candidates, arbitrary) is None
    assert arbitrary.tolist() == [ns.score for ns in as_list]


@pytest.mark.parametrize("seed", range(120))
def test_kept_counts_and_batch_forms_equal_the_scan(seed: int) -> None:
    rng = np.random.default_rng(seed)
    snap = _cluster(rng, int(rng.integers(3, 40)))
    features = Features(enable_node_inclusion_policy_in_pod_topology_spread=bool(rng.random() < 0.8))
    if rng.random() < 0.3:
        # System defaulting, with a selector source: pods without constraints get hostname and
        # zone spreading as soft constraints (nodes missing a key still scored on the others)
        kept = pts.PodTopologySpread(_Handle(snap), pts.SYSTEM_DEFAULT_CONSTRAINTS, True, features, _by_app)
        scan = pts.PodTopologySpread(
            _ScanOnly(snap),  # type: ignore[arg-type]
            pts.SYSTEM_DEFAULT_CONSTRAINTS,
            True,
            features,
            _by_app,
        )
        pods = [_pod(rng, f"plain{k}") for k in range(3)]
    else:
        kept = pts.new({"defaultingType": "List"}, _Handle(snap), features)
        scan = pts.new({"defaultingType": "List"}, _ScanOnly(snap), features)  # type: ignore[arg-type]
        pods = [_dedupe(_incoming(rng, k)) for k in range(3)]
    for cycle in range(4):
        for pod in pods:
            _compare_cycle(kept, scan, snap, pod, rng)
        # between cycles, pods come and go on random nodes (the kept counts must follow)
        n = len(snap.list())
        for i in sorted({int(x) for x in rng.integers(0, n, size=3)}):
            ni = snap.list()[i]
            if ni.node is not None and rng.random() < 0.2:
                moved = pb.Node()
                moved.CopyFrom(ni.node)
                moved.metadata.labels[ZONE] = f"z{rng.integers(0, 6)}"  # a node moves to a zone
                if RACK in moved.metadata.labels and rng.random() < 0.3:
                    del moved.metadata.labels[RACK]
                ni.set_node(moved)
            elif ni.pods and rng.random() < 0.4:
                ni.remove_pod(ni.pods[int(rng.integers(0, len(ni.pods)))])
            else:
                ni.add_pod(_pod(rng, f"late-{seed}-{cycle}-{i}", ni.name))
            snap.refresh(i)
