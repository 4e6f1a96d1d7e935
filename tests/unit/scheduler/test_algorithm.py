"""The scheduling algorithm (scheduler/algorithm.py) against upstream schedule_one.go and its tests:
numFeasibleNodesToFind's table, the round-robin start index, the one-feasible-node fast path,
the FitError message, the random tie-break, and the batch (numpy) path giving exactly the results
of the literal node-by-node path on random clusters with the real default plugins."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from proto import kse_pb2 as pb
from scheduler.algorithm import (
    AlgorithmState,
    FeasibleNodes,
    NoNodesAvailableError,
    SchedulingError,
    find_nodes_that_fit,
    num_feasible_nodes_to_find,
    prioritize_nodes,
    schedule_pod,
    score_feasible,
    select_host,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import NodePluginScores
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.types import Code, Diagnosis, FitError, PodInfo, Status
from scheduler.profile import load_scheduler_config, new_framework
from tests.unit.scheduler.test_runtime import Filter, PreScore, Score
from tests.unit.scheduler.test_runtime import new_framework as fake_framework
from tests.unit.scheduler.wrappers import make_node, make_pod


def default_framework(snapshot: Snapshot, *, batch: bool = True, percentage: int | None = None) -> Any:
    profile = load_scheduler_config().profiles[0]
    return new_framework(profile, snapshot=snapshot, batch=batch, percentage_of_nodes_to_score=percentage)


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110") -> Any:
    return (
        make_node()
        .name(name)
        .label("kubernetes.io/hostname", name)
        .capacity({"cpu": cpu, "memory": memory, "pods": pods})
    )


def snapshot_of(nodes: list[pb.Node], pods: list[pb.Pod] | None = None) -> Snapshot:
    return Snapshot.from_objects(pods or [], nodes)


def pod(name: str = "p", **requests: str) -> PodInfo:
    w = make_pod().name(name).namespace("default").uid(f"uid-{name}")
    if requests:
        w = w.req(requests)
    return PodInfo(w.obj())


# ------------------------------------------------------------------------------------ numFeasibleNodesToFind


@pytest.mark.parametrize(
    ("percentage", "num_all", "want"),
    [
        # upstream TestNumFeasibleNodesToFind
        (None, 10, 10),
        (40, 10, 10),
        (None, 1000, 420),
        (40, 1000, 400),
        (None, 6000, 300),
        (40, 6000, 2400),
        # more points of the adaptive rule: 50 - n/125 percent, at least 5 %, at least 100 nodes
        (None, 99, 99),
        (None, 100, 100),  # 49 % of 100 is 49 -> the minimum of 100
        (None, 500, 230),
        (None, 5000, 500),
        (None, 5625, 281),  # 5 % floor reached exactly at 50*125 - 5*125
        (None, 100000, 5000),
        (100, 5000, 5000),
        (1, 5000, 100),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, num_all: int, want: int) -> None:
    # an unset percentage falls back on the scheduler's (0: adaptive)
    assert num_feasible_nodes_to_find(percentage, 0, num_all) == want


def test_profile_percentage_overrides_the_global_one() -> None:
    assert num_feasible_nodes_to_find(None, 40, 1000) == 400
    assert num_feasible_nodes_to_find(20, 40, 1000) == 200
    assert num_feasible_nodes_to_find(0, 40, 1000) == 420  # the profile asks for adaptive


# ------------------------------------------------------------------------------------ round robin


def test_round_robin_start_index_across_cycles() -> None:
    log: list[str] = []
    names = [f"n{i:03d}" for i in range(300)]
    snap = snapshot_of([node(n).obj() for n in names])
    rejected = {"n010": Status.unschedulable("no")}
    fwk = fake_framework(
        {"filter": [Filter("F", log, rejected)], "score": [Score("S", [], {})]},
        snapshot=snap,
        percentage_of_nodes_to_score=50,
    )
    alg = AlgorithmState(rng=random.Random(1))
    # 300 nodes at 50 %: stop after 150 feasible nodes; n010 is rejected, so 151 are processed
    feasible, diagnosis = find_nodes_that_fit(fwk, CycleState(), pod(), snap, alg)
    assert len(feasible) == 150 and list(diagnosis.node_to_status) == ["n010"]
    assert feasible.names()[0] == "n000" and feasible.names()[-1] == "n150"
    assert alg.next_start_node_index == 151
    log.clear()
    feasible, _ = find_nodes_that_fit(fwk, CycleState(), pod(), snap, alg)
    # n151..n299 then n000: wrapped around; n010 is not reached this time
    assert feasible.names()[0] == "n151" and feasible.names()[-1] == "n000"
    assert log[0] == "Filter:F:n151"
    assert alg.next_start_node_index == (151 + 150) % 300


@pytest.mark.parametrize("batch", [True, False])
def test_schedule_result_counts_evaluated_nodes(batch: bool) -> None:
    nodes = [node("small", cpu="1").obj(), node("big1").obj(), node("big2").obj()]
    snap = snapshot_of(nodes)
    fwk = default_framework(snap, batch=batch)
    result = schedule_pod(fwk, CycleState(), pod(cpu="2"), snap, AlgorithmState(rng=random.Random(0)))
    assert result.suggested_host in ("big1", "big2")
    assert (result.evaluated_nodes, result.feasible_nodes) == (3, 2)


# ------------------------------------------------------------------------------------ fast paths


def test_single_feasible_node_is_chosen_without_scoring() -> None:
    log: list[str] = []
    snap = snapshot_of([node(n).obj() for n in ("a", "b", "c")])
    no = Status.unschedulable("no")
    fwk = fake_framework(
        {
            "filter": [Filter("F", log, {"a": no, "c": no})],
            "preScore": [PreScore("S", log)],
            "score": [Score("S2", log, {})],
        },
        snapshot=snap,
    )
    result = schedule_pod(fwk, CycleState(), pod(), snap)
    assert (result.suggested_host, result.evaluated_nodes, result.feasible_nodes) == ("b", 3, 1)
    assert not any(entry.startswith(("PreScore", "Score")) for entry in log)


def test_without_score_plugins_the_first_feasible_node_wins() -> None:
    log: list[str] = []
    snap = snapshot_of([node(n).obj() for n in ("a", "b", "c")])
    fwk = fake_framework({"filter": [Filter("F", log, {"a": Status.unschedulable("no")})]}, snapshot=snap)
    result = schedule_pod(fwk, CycleState(), pod(), snap)
    assert (result.suggested_host, result.evaluated_nodes, result.feasible_nodes) == ("b", 2, 1)
    # (nodes past the first feasible one may be evaluated too, as by upstream's parallel scan;
    # they do not count)
    assert log[:2] == ["Filter:F:a", "Filter:F:b"]


def test_no_nodes() -> None:
    snap = Snapshot()
    with pytest.raises(NoNodesAvailableError, match="no nodes available to schedule pods"):
        schedule_pod(default_framework(snap), CycleState(), pod(), snap)


def test_nominated_node_is_tried_first() -> None:
    log: list[str] = []
    snap = snapshot_of([node(n).obj() for n in ("a", "b", "c")])
    fwk = fake_framework({"filter": [Filter("F", log)], "score": [Score("S", [], {})]}, snapshot=snap)
    p = make_pod().name("p").uid("u").nominated("c").obj()
    result = schedule_pod(fwk, CycleState(), PodInfo(p), snap)
    assert (result.suggested_host, result.evaluated_nodes, result.feasible_nodes) == ("c", 1, 1)
    assert log == ["Filter:F:c"]


def test_filter_error_aborts_the_cycle() -> None:
    snap = snapshot_of([node(n).obj() for n in ("a", "b")])
    fwk = fake_framework(
        {"filter": [Filter("F", [], {"b": Status.error("broken")})], "score": [Score("S", [], {})]},
        snapshot=snap,
    )
    alg = AlgorithmState()
    with pytest.raises(SchedulingError, match='running "F" filter plugin: broken'):
        schedule_pod(fwk, CycleState(), pod(), snap, alg)
    assert alg.next_start_node_index == 1  # node a was processed before the error


# ------------------------------------------------------------------------------------ FitError


@pytest.mark.parametrize("batch", [True, False])
def test_fit_error_message(batch: bool) -> None:
    nodes = [node("n1", cpu="1").obj(), node("n2", cpu="1").obj()]
    nodes += [node(f"t{i}").taints([("key", "value", "NoSchedule")]).obj() for i in range(3)]
    snap = snapshot_of(nodes)
    fwk = default_framework(snap, batch=batch)
    with pytest.raises(FitError) as err:
        schedule_pod(fwk, CycleState(), pod(cpu="2"), snap)
    assert (
        str(err.value) == "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s)."
    )
    assert err.value.num_all_nodes == 5
    assert err.value.diagnosis.unschedulable_plugins == {"NodeResourcesFit", "TaintToleration"}


def test_fit_error_reasons_are_sorted_as_strings() -> None:
    d = Diagnosis()
    for i in range(10):
        d.node_to_status[f"b{i}"] = Status.unschedulable("b-reason")
    for i in range(2):
        d.node_to_status[f"a{i}"] = Status.unschedulable("a-reason", "c-reason")
    err = FitError(pb.Pod(), 12, d)
    # Go's sort.Strings over "count reason": "10 ..." sorts before "2 ..."
    assert str(err) == "0/12 nodes are available: 10 b-reason, 2 a-reason, 2 c-reason."


def test_fit_error_pre_filter_and_post_filter_messages() -> None:
    d = Diagnosis(
        pre_filter_msg="node(s) didn't satisfy plugin NodeName", post_filter_msg="preemption: 0/3 nodes"
    )
    d.node_to_status["x"] = Status.unschedulable("ignored when PreFilter rejected")
    assert (
        str(FitError(pb.Pod(), 3, d))
        == "0/3 nodes are available: node(s) didn't satisfy plugin NodeName. preemption: 0/3 nodes."
    )


@pytest.mark.parametrize("batch", [True, False])
def test_node_name_of_a_missing_node(batch: bool) -> None:
    snap = snapshot_of([node(n).obj() for n in ("a", "b", "c")])
    p = PodInfo(make_pod().name("p").uid("u").node("elsewhere").obj())
    with pytest.raises(FitError) as err:
        schedule_pod(default_framework(snap, batch=batch), CycleState(), p, snap)
    assert str(err.value) == "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeName]."
    assert err.value.diagnosis.unschedulable_plugins == {"NodeName"}


def test_node_name_of_a_node_that_does_not_fit() -> None:
    snap = snapshot_of([node("a", cpu="1").obj(), node("b").obj(), node("c").obj()])
    p = PodInfo(make_pod().name("p").uid("u").node("a").req({"cpu": "2"}).obj())
    with pytest.raises(FitError) as err:
        schedule_pod(default_framework(snap), CycleState(), p, snap)
    assert str(err.value) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeName]."
    )


# ------------------------------------------------------------------------------------ tie-break


def test_select_host_picks_the_best() -> None:
    scores = [NodePluginScores("a", [], 5), NodePluginScores("b", [], 9), NodePluginScores("c", [], 7)]
    assert select_host(scores, random.Random(0)) == "b"
    with pytest.raises(ValueError, match="empty priorityList"):
        select_host([])


def test_random_tie_break_is_uniform_and_seedable() -> None:
    scores = [NodePluginScores(n, [], 10) for n in ("a", "b", "c", "d")] + [NodePluginScores("e", [], 9)]
    rng = random.Random(42)
    counts = Counter(select_host(scores, rng) for _ in range(4000))
    assert set(counts) == {"a", "b", "c", "d"}
    assert all(850 < c < 1150 for c in counts.values()), counts
    seq1 = [select_host(scores, random.Random(7)) for _ in range(5)]
    seq2 = [select_host(scores, random.Random(7)) for _ in range(5)]
    assert seq1 == seq2


def test_schedule_pod_spreads_ties_over_identical_nodes() -> None:
    names = [f"n{i}" for i in range(4)]
    snap = snapshot_of([node(n).obj() for n in names])
    fwk = default_framework(snap)
    alg = AlgorithmState(rng=random.Random(3))
    counts = Counter(
        schedule_pod(fwk, CycleState(), pod(cpu="100m"), snap, alg).suggested_host for _ in range(800)
    )
    assert set(counts) == set(names) and all(140 < c < 260 for c in counts.values()), counts


def test_prioritize_nodes_matches_score_feasible() -> None:
    nodes = [node("a", cpu="2").obj(), node("b").obj(), node("c", cpu="8").obj()]
    snap = snapshot_of(nodes)
    fwk = default_framework(snap)
    p = pod(cpu="500m", memory="1Gi")
    state = CycleState()
    feasible, _ = find_nodes_that_fit(fwk, state, p, snap, AlgorithmState())
    listed = prioritize_nodes(fwk, state, p, feasible.node_infos())
    matrix = score_feasible(fwk, state, p, feasible)
    assert [n.total_score for n in listed] == matrix.totals.tolist()
    assert [n.name for n in listed] == ["a", "b", "c"]


def test_prioritize_nodes_without_score_plugins() -> None:
    snap = snapshot_of([node(n).obj() for n in ("a", "b")])
    fwk = fake_framework({"filter": [Filter("F", [])]}, snapshot=snap)
    out = prioritize_nodes(fwk, CycleState(), pod(), FeasibleNodes(snap, np.arange(2, dtype=np.intp)))
    assert [(n.name, n.total_score) for n in out] == [("a", 1), ("b", 1)]


# ------------------------------------------------------------------------------------ batch == scalar


ZONES = ("zone-a", "zone-b", "zone-c")


def random_cluster(rng: random.Random) -> tuple[list[pb.Node], list[pb.Pod]]:
    count = rng.choice((1, 2, 5, 30, 120, 260))
    nodes = []
    for i in range(count):
        w = node(
            f"node-{i:03d}",
            cpu=rng.choice(("1", "2", "4", "8")),
            memory=rng.choice(("2Gi", "4Gi", "8Gi")),
            pods=rng.choice(("3", "10", "110")),
        )
        w.label("topology.kubernetes.io/zone", rng.choice(ZONES))
        if rng.random() < 0.5:
            w.label("disktype", rng.choice(("ssd", "hdd")))
        r = rng.random()
        if r < 0.15:
            w.taints([("dedicated", "gpu", "NoSchedule")])
        elif r < 0.3:
            w.taints([("spot", "true", "PreferNoSchedule")])
        elif r < 0.35:
            w.taints([("spot", "true", "PreferNoSchedule"), ("other", "x", "PreferNoSchedule")])
        if rng.random() < 0.08:
            w.unschedulable()
        if rng.random() < 0.3:
            w.images([(["nginx:1.25"], rng.choice((10, 200, 800)) * 1024 * 1024)])
        nodes.append(w.obj())
    pods = []
    for j in range(rng.randrange(0, 3 * count + 1)):
        host = rng.choice(nodes).metadata.name
        w = make_pod().name(f"existing-{j}").namespace("default").uid(f"e-{j}").node(host)
        w.label("app", rng.choice(("web", "db")))
        w.req({"cpu": rng.choice(("100m", "500m", "1")), "memory": rng.choice(("128Mi", "1Gi"))})
        if rng.random() < 0.1:
            w.host_port(8080)
        pods.append(w.obj())
    return nodes, pods


def random_pod(rng: random.Random, nodes: list[pb.Node], k: int) -> pb.Pod:
    w = make_pod().name(f"pod-{k}").namespace("default").uid(f"uid-{k}").label("app", "web")
    requests = {}
    if rng.random() < 0.8:
        requests["cpu"] = rng.choice(("100m", "500m", "2", "6"))
    if rng.random() < 0.7:
        requests["memory"] = rng.choice(("128Mi", "1Gi", "6Gi"))
    if requests:
        w.req(requests)
    else:
        w.container("c", rng.choice(("nginx:1.25", "busybox")))
    if rng.random() < 0.3:
        w.toleration("dedicated", "Equal", "gpu", "NoSchedule")
    if rng.random() < 0.2:
        w.toleration("spot", "Exists", "", "PreferNoSchedule")
    if rng.random() < 0.2:
        w.node_selector({"disktype": "ssd"})
    if rng.random() < 0.15:
        w.node_affinity_in("topology.kubernetes.io/zone", [rng.choice(ZONES)])
    if rng.random() < 0.2:
        term = w.p.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution.add()
        term.weight = rng.randrange(1, 100)
        term.preference.match_expressions.add(key="disktype", operator="In", values=["ssd"])
    if rng.random() < 0.1:
        w.host_port(8080)
    if rng.random() < 0.25:
        c = w.p.spec.topology_spread_constraints.add()
        c.max_skew = rng.choice((1, 2))
        c.topology_key = rng.choice(("topology.kubernetes.io/zone", "kubernetes.io/hostname"))
        c.when_unsatisfiable = rng.choice(("DoNotSchedule", "ScheduleAnyway"))
        c.label_selector.match_labels["app"] = "web"
    if rng.random() < 0.05:
        w.nominated(rng.choice(nodes).metadata.name)
    if rng.random() < 0.03:
        w.node(rng.choice([*(n.metadata.name for n in nodes), "missing"]))
    return w.obj()


def attempt(fwk: Any, snap: Snapshot, p: pb.Pod, alg: AlgorithmState) -> tuple[Any, ...]:
    state = CycleState()
    info = PodInfo(p)
    try:
        result = schedule_pod(fwk, state, info, snap, alg)
    except FitError as e:
        outcome: tuple[Any, ...] = ("fit", str(e), sorted(e.diagnosis.unschedulable_plugins))
    except SchedulingError as e:
        outcome = ("error", str(e))
    else:
        outcome = ("ok", result)
    # the scores of every feasible node, as the batch and the scalar path compute them
    start = alg.next_start_node_index
    probe = AlgorithmState(percentage_of_nodes_to_score=100, next_start_node_index=0)
    state2 = CycleState()
    try:
        feasible, diagnosis = find_nodes_that_fit(fwk, state2, info, snap, probe)
        statuses = sorted((n, s.plugin, tuple(s.reasons)) for n, s in diagnosis.node_to_status.items())
        scores: Any = None
        if len(feasible) > 1:
            m = score_feasible(fwk, state2, info, feasible)
            scores = (m.plugins, m.weights, feasible.names(), m.scores.tolist(), m.totals.tolist())
    except SchedulingError as e:
        statuses, scores = [], str(e)
    return (*outcome, start, statuses, scores)


@pytest.mark.parametrize("seed", range(30))
def test_batch_path_equals_scalar_path_on_random_clusters(seed: int) -> None:
    rng = random.Random(seed)
    nodes, existing = random_cluster(rng)
    pods = [random_pod(rng, nodes, k) for k in range(6)]
    start = rng.randrange(len(nodes))
    runs = []
    for batch in (True, False):
        snap = snapshot_of([_copy(n) for n in nodes], [_copy(p) for p in existing])
        fwk = default_framework(snap, batch=batch)
        alg = AlgorithmState(next_start_node_index=start, rng=random.Random(seed))
        trace = []
        for p in pods:
            p = _copy(p)
            out = attempt(fwk, snap, p, alg)
            trace.append(out)
            if out[0] == "ok":  # assume it, as the scheduler does, so later pods see it
                host = out[1].suggested_host
                p.spec.node_name = host
                i = snap.index_of(host)
                snap.node_info_list[i].add_pod(p)
                snap.refresh(i)
        runs.append(trace)
    assert runs[0] == runs[1]


def _copy(msg: Any) -> Any:
    c = type(msg)()
    c.CopyFrom(msg)
    return c


def test_scalar_and_batch_agree_on_a_big_cluster() -> None:
    rng = random.Random(99)
    nodes = []
    for i in range(1500):
        w = node(f"n{i:04d}", cpu=rng.choice(("2", "4")))
        if i % 7 == 0:
            w.taints([("spot", "true", "PreferNoSchedule")])
        if i % 11 == 0:
            w.taints([("dedicated", "x", "NoSchedule")])
        nodes.append(w.obj())
    results = []
    for batch in (True, False):
        snap = snapshot_of([_copy(n) for n in nodes])
        fwk = default_framework(snap, batch=batch)
        alg = AlgorithmState(rng=random.Random(5))
        hosts = []
        for k in range(40):
            p = make_pod().name(f"p{k}").namespace("default").uid(f"u{k}").req({"cpu": "300m"}).obj()
            r = schedule_pod(fwk, CycleState(), PodInfo(p), snap, alg)
            hosts.append((r.suggested_host, r.evaluated_nodes, r.feasible_nodes))
            p.spec.node_name = r.suggested_host
            i = snap.index_of(r.suggested_host)
            snap.node_info_list[i].add_pod(p)
            snap.refresh(i)
        results.append((hosts, alg.next_start_node_index))
    assert results[0] == results[1]
    # 1500 nodes: 50 - 12 = 38 % -> 570 feasible nodes to find per cycle
    assert results[0][0][0][2] == 570


def test_unschedulable_statuses_are_complete() -> None:
    """Every rejected node is in the diagnosis with the plugin that rejected it (batch path)."""
    nodes = [node(f"n{i}", cpu="1" if i % 2 else "8").obj() for i in range(150)]
    snap = snapshot_of(nodes)
    fwk = default_framework(snap)
    feasible, diagnosis = find_nodes_that_fit(fwk, CycleState(), pod(cpu="2"), snap, AlgorithmState())
    assert len(feasible) == 75 and len(diagnosis.node_to_status) == 75
    assert {s.plugin for s in diagnosis.node_to_status.values()} == {"NodeResourcesFit"}
    # 2 CPUs on a 1-CPU node: more than its whole allocatable, so preemption cannot help
    assert all(s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in diagnosis.node_to_status.values())
    assert {tuple(s.reasons) for s in diagnosis.node_to_status.values()} == {("Insufficient cpu",)}


# ------------------------------------------------------------------------------------ bench loop


async def test_in_process_throughput_loop_binds_every_pod() -> None:
    """`kse bench throughput` in-process: the real queue, cache and default profile."""
    from scheduler.bench import throughput

    result = await throughput.run_in_process(throughput.Config(nodes=120, init_pods=30, pods=60, seed=1))
    assert {k: result[k] for k in ("mode", "nodes", "pods")} == {
        "mode": "in-process",
        "nodes": 120,
        "pods": 60,
    }
    assert (result["init_bound"], result["bound"]) == (30, 60)
    assert result["unschedulable_attempts"] == result["error_attempts"] == 0
    assert result["pods_per_s"] > 0 and 0 < result["attempt_ms_p50"] <= result["attempt_ms_p99"]


@pytest.mark.parametrize("freeze", [True, False])
async def test_in_process_throughput_freezes_the_loaded_caches_as_the_scheduler_does(freeze: bool) -> None:
    """--gc-freeze (the default, as `kse scheduler`'s): the nodes and init pods are moved out of
    CPython's full collections before the measured phase; --no-gc-freeze leaves them."""
    import gc

    from scheduler.bench import throughput

    gc.unfreeze()
    try:
        result = await throughput.run_in_process(
            throughput.Config(nodes=50, init_pods=20, pods=20, seed=1, gc_freeze=freeze)
        )
        assert result["bound"] == 20 and result["gc_freeze"] is freeze
        assert (gc.get_freeze_count() > 0) is freeze
    finally:
        gc.unfreeze()
