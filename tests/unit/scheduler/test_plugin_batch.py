# ruff: noqa: E501 -- the strategy tables read better one strategy per row
"""The batch (numpy) paths equal the scalar ones: NodeResourcesFit.filter_nodes vs filter, and
score_nodes vs score for LeastAllocated, MostAllocated, RequestedToCapacityRatio and
BalancedAllocation, on random clusters with extended resources, empty and overcommitted nodes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from proto import kse_pb2 as pb
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins import imagelocality, nodename, nodeunschedulable, tainttoleration
from scheduler.framework.plugins.noderesources import balanced_allocation as ba
from scheduler.framework.plugins.noderesources import fit
from scheduler.framework.types import PodInfo

from .wrappers import FakeHandle, make_node, make_pod, new_state

GPU, FPGA = "example.com/gpu", "example.com/fpga"


def _random_cluster(rng: np.random.Generator, n_nodes: int, kinds: int = 7) -> Snapshot:
    """Node kinds by i % kinds: 0 no cpu or memory, 1-2 a GPU, 3 storage and FPGA, 4 few pods,
    5-6 cpu and memory only; kinds=2 gives kinds 1 and 2 only: every node has cpu and memory."""
    nodes, pods = [], []
    for i in range(n_nodes):
        kind = i % kinds if kinds != 2 else 1 + i % 2
        if kind == 0:
            res: dict[str, str] = {}  # no cpu/memory at all
        else:
            res = {"cpu": f"{rng.integers(1, 32000)}m", "memory": str(int(rng.integers(1, 64)) * 2**30)}
        if kind in (1, 2):
            res[GPU] = str(rng.integers(0, 8))
        if kind == 3:
            res["ephemeral-storage"] = str(int(rng.integers(1, 100)) * 10**9)
            res[FPGA] = str(rng.integers(1, 4))
        w = make_node().name(f"n{i}").capacity(res)
        if kind == 4:
            w.capacity({**res, "pods": str(rng.integers(0, 3))})
        nodes.append(w.obj())
        for j in range(int(rng.integers(0, 6))):
            pods.append(_random_pod(rng, f"p{i}-{j}", f"n{i}"))
    return Snapshot.from_objects(pods, nodes)


def _random_pod(rng: np.random.Generator, name: str, node_name: str = "") -> pb.Pod:
    w = make_pod().name(name).uid(name)
    if node_name:
        w.node(node_name)
    for _ in range(int(rng.integers(1, 3))):
        req: dict[str, str] = {}
        if rng.random() < 0.7:
            req["cpu"] = f"{rng.integers(0, 6000)}m"
        if rng.random() < 0.7:
            req["memory"] = str(int(rng.integers(0, 8 * 2**30)))
        if rng.random() < 0.2:
            req[GPU] = str(rng.integers(0, 3))
        if rng.random() < 0.1:
            req[FPGA] = str(rng.integers(0, 2))
        if rng.random() < 0.1:
            req["ephemeral-storage"] = str(int(rng.integers(0, 10)) * 10**9)
        if req:
            w.req(req)
        else:
            w.container()
    if rng.random() < 0.2:
        w.init_req({"cpu": f"{rng.integers(0, 9000)}m"})
    return w.obj()


STRATEGIES: list[dict[str, Any]] = [
    {"type": "LeastAllocated"},
    {"type": "MostAllocated"},
    {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 3}, {"name": GPU, "weight": 2}]},
    {"type": "MostAllocated", "resources": [{"name": "memory", "weight": 1}, {"name": FPGA, "weight": 5},
                                            {"name": "ephemeral-storage", "weight": 2}]},
    {"type": "RequestedToCapacityRatio",
     "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}},
    {"type": "RequestedToCapacityRatio", "resources": [{"name": "cpu", "weight": 2}, {"name": GPU, "weight": 1}],
     "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 30, "score": 7},
                                            {"utilization": 70, "score": 3}, {"utilization": 100, "score": 10}]}},
]  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fit_filter_nodes_equals_filter(seed: int) -> None:
    rng = np.random.default_rng(seed)
    snap = _random_cluster(rng, 120)
    for ignored in ({}, {"ignoredResources": [GPU]}, {"ignoredResourceGroups": ["example.com"]}):
        pl = fit.new(ignored, None)
        for k in range(40):
            pod = PodInfo(_random_pod(rng, f"incoming-{k}"))
            state = new_state()
            pl.pre_filter(state, pod, snap.list())
            indices = np.arange(snap.num_nodes())
            if k % 2:
                indices = rng.permutation(indices)[: snap.num_nodes() // 2]
            mask = pl.filter_nodes(state, pod, snap, indices)
            want = [pl.filter(state, pod, snap.list()[i]) is None for i in indices]
            assert mask.tolist() == want


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fit_filter_statuses_equal_filter(seed: int) -> None:
    """The statuses the batch engine takes for the nodes filter_nodes rejected: each equal to
    filter's (code, reasons in fits_request's order), one object per distinct status."""
    rng = np.random.default_rng(seed)
    snap = _random_cluster(rng, 120)
    for ignored in ({}, {"ignoredResources": [GPU]}):
        pl = fit.new(ignored, None)
        for k in range(40):
            pod = PodInfo(_random_pod(rng, f"incoming-{k}"))
            state = new_state()
            pl.pre_filter(state, pod, snap.list())
            indices = rng.permutation(np.arange(snap.num_nodes()))
            got = pl.filter_statuses(state, pod, snap, indices)
            want = [pl.filter(state, pod, snap.list()[i]) for i in indices]
            assert [(s.code, s.reasons) if s else None for s in got] == [
                (s.code, s.reasons) if s else None for s in want
            ]
            assert len({id(s) for s in got if s is not None}) == len({(s.code, tuple(s.reasons)) for s in want if s})


@pytest.mark.parametrize("strategy", STRATEGIES, ids=[str(s) for s in STRATEGIES])
def test_fit_score_nodes_equals_score(strategy: dict[str, Any]) -> None:
    rng = np.random.default_rng(11)
    snap = _random_cluster(rng, 120)
    pl = fit.new({"scoringStrategy": strategy}, None)
    _check_scores(pl, snap, rng)


BALANCED_RESOURCES: list[list[dict[str, Any]] | None] = [
    None,
    [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}],
    [{"name": "cpu"}, {"name": FPGA}, {"name": GPU}, {"name": "ephemeral-storage"}],
]


@pytest.mark.parametrize("resources", BALANCED_RESOURCES)
def test_balanced_score_nodes_equals_score(resources: list[dict[str, Any]] | None) -> None:
    rng = np.random.default_rng(5)
    snap = _random_cluster(rng, 120)
    pl = ba.new({"resources": resources} if resources else None, None)
    _check_scores(pl, snap, rng)


def test_balanced_score_nodes_equals_score_where_every_node_has_cpu_and_memory() -> None:
    """The two-fraction shortcut of balanced_resource_vector (cpu and memory everywhere)."""
    rng = np.random.default_rng(11)
    snap = _random_cluster(rng, 120, kinds=2)
    _check_scores(ba.new(None, None), snap, rng)


def _check_scores(pl: Any, snap: Snapshot, rng: np.random.Generator) -> None:
    for k in range(40):
        pod = PodInfo(_random_pod(rng, f"incoming-{k}"))
        state = new_state()
        status = pl.pre_score(state, pod, snap.list())
        if status is not None:  # BalancedAllocation skips best-effort pods
            continue
        indices = np.arange(snap.num_nodes())
        if k % 2:
            indices = rng.permutation(indices)[: snap.num_nodes() // 3]
        got = pl.score_nodes(state, pod, snap, indices)
        want = []
        for i in indices:
            score, st = pl.score(state, pod, snap.list()[i])
            assert st is None
            want.append(score)
        assert got.tolist() == want


def test_score_nodes_after_incremental_refresh() -> None:
    rng = np.random.default_rng(3)
    snap = _random_cluster(rng, 30)
    pl = fit.new({"scoringStrategy": {"type": "MostAllocated"}}, None)
    snap.arrays()
    for i in range(0, 30, 3):
        snap.list()[i].add_pod(_random_pod(rng, f"late-{i}", f"n{i}"))
        snap.refresh(i)
    _check_scores(pl, snap, rng)


# ----------------------------------------------------------------------------- node-level plugins

EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
TAINT_KEYS = ("dedicated", "gpu", "node.kubernetes.io/sla")


def _node_level_cluster(rng: np.random.Generator, n_nodes: int) -> Snapshot:
    nodes = []
    for i in range(n_nodes):
        w = make_node().name(f"n{i}")
        if rng.random() < 0.1:
            w.unschedulable()
        taints = []
        for _ in range(int(rng.integers(0, 3))):
            key = str(rng.choice(TAINT_KEYS))
            value = str(rng.integers(0, 3)) if key.endswith("sla") else str(rng.choice(["a", "b"]))
            taints.append((key, value, str(rng.choice(EFFECTS))))
        w.taints(taints)
        if rng.random() < 0.3:
            w.images([([f"img{rng.integers(0, 4)}:latest"], int(rng.integers(1, 3000)) * 2**20)])
        nodes.append(w.obj())
    return Snapshot.from_objects([], nodes)


def _node_level_pod(rng: np.random.Generator, k: int, n_nodes: int) -> pb.Pod:
    w = make_pod().name(f"x{k}").uid(f"x{k}")
    for _ in range(int(rng.integers(0, 3))):
        key = str(rng.choice(TAINT_KEYS))
        if key.endswith("sla"):
            w.toleration(
                key, str(rng.choice(["Gt", "Lt"])), str(rng.integers(0, 3)), str(rng.choice(EFFECTS))
            )
        else:
            w.toleration(key, str(rng.choice(["Equal", "Exists"])), "a", str(rng.choice(["", *EFFECTS])))
    if rng.random() < 0.1:
        w.toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule")
    if rng.random() < 0.2:
        w.node(f"n{rng.integers(0, n_nodes + 5)}")
    for _ in range(int(rng.integers(0, 3))):
        w.container(image=f"img{rng.integers(0, 5)}")
    return w.obj()


@pytest.mark.parametrize("seed", [1, 2])
def test_node_level_batch_filters_and_scores(seed: int) -> None:
    rng = np.random.default_rng(seed)
    snap = _node_level_cluster(rng, 150)
    handle = FakeHandle(snap)
    filters: list[Any] = [
        tainttoleration.new(None, handle),
        nodeunschedulable.new(None, handle),
        nodename.new(None, handle),
    ]
    scorers: list[Any] = [tainttoleration.new(None, handle), imagelocality.new(None, handle)]
    infos = snap.list()
    for k in range(60):
        pod = PodInfo(_node_level_pod(rng, k, 150))
        indices = np.arange(snap.num_nodes()) if k % 2 else rng.permutation(snap.num_nodes())[:70]
        for f in filters:
            state = new_state()
            mask = f.filter_nodes(state, pod, snap, indices)
            assert mask.tolist() == [f.filter(state, pod, infos[i]) is None for i in indices]
        for s in scorers:
            state = new_state()
            if hasattr(s, "pre_score"):
                s.pre_score(state, pod, infos)
            got = s.score_nodes(state, pod, snap, indices)
            assert got.tolist() == [s.score(state, pod, infos[i])[0] for i in indices]
