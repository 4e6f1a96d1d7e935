"""The copy-free dry run (defaultpreemption.victims) gives exactly what SelectVictimsOnNode on
copies gives: same candidates, victims, PDB violation counts and statuses, on random clusters
under the default profile (taints, unschedulable nodes, node affinity, PDBs, nominated pods,
extended resources); and it is not taken where it would not be exact."""

from __future__ import annotations

import random
from typing import Any

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins.defaultpreemption import DefaultPreemption
from scheduler.framework.types import PodInfo
from scheduler.profile import load_scheduler_config, new_framework
from scheduler.queue.nominator import Nominator
from tests.unit.scheduler.wrappers import make_node, make_pod

GPU = "example.com/gpu"
# Node-only Filters after NodeResourcesFit too: a node Fit rejected has not passed those.
REORDERED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled:
      - name: PrioritySort
      - name: NodeUnschedulable
      - name: NodeResourcesFit
      - name: TaintToleration
      - name: NodeAffinity
      - name: DefaultPreemption
      - name: DefaultBinder
      disabled:
      - name: '*'
"""


def _cluster(rng: random.Random) -> tuple[list[pb.Pod], list[pb.Node], list[pb.PodDisruptionBudget]]:
    nodes = []
    for i in range(rng.randint(1, 12)):
        w = make_node().name(f"n{i}").label("zone", rng.choice("ab"))
        cap = {"cpu": f"{rng.choice([1000, 2000, 4000])}m", "memory": str(rng.choice([1000, 4000]))}
        cap["pods"] = str(rng.choice([2, 4, 8, 32]))
        if rng.random() < 0.3:
            cap[GPU] = str(rng.randint(0, 2))
        w = w.capacity(cap)
        if rng.random() < 0.15:
            w = w.taints([("dedicated", "x", "NoSchedule")])
        if rng.random() < 0.1:
            w = w.unschedulable()
        nodes.append(w.obj())
    pods = []
    for j in range(rng.randint(0, 40)):
        pw = make_pod().name(f"p{j}").uid(f"p{j}").namespace("default").node(rng.choice(nodes).metadata.name)
        pw = pw.priority(rng.choice([0, 0, 10, 100, 1000]))
        pw = pw.req({"cpu": f"{rng.choice([100, 300, 900])}m", "memory": str(rng.choice([100, 500]))})
        if rng.random() < 0.5:
            pw = pw.label("app", rng.choice(["web", "db"]))
        obj = pw.obj()
        if rng.random() < 0.7:
            obj.status.start_time = f"1970-01-01T00:00:{rng.randint(0, 59):02d}Z"
        pods.append(obj)
    pdbs = []
    for k, app in enumerate(["web", "db"]):
        if rng.random() < 0.5:
            b = pb.PodDisruptionBudget()
            b.metadata.name, b.metadata.namespace = f"pdb{k}", "default"
            b.spec.selector.match_labels["app"] = app
            b.status.disruptions_allowed = rng.randint(0, 2)
            pdbs.append(b)
    return pods, nodes, pdbs


def _preemptor(rng: random.Random, name: str = "preemptor") -> Any:
    w = make_pod().name(name).uid(name).namespace("default").priority(rng.choice([10, 100, 1000, 5000]))
    req = {"cpu": f"{rng.choice([200, 900, 1500, 3000])}m", "memory": str(rng.choice([100, 800]))}
    if rng.random() < 0.2:
        req[GPU] = "1"
    w = w.req(req)
    if rng.random() < 0.2:
        w = w.toleration("dedicated", "Equal", "x", "NoSchedule")
    if rng.random() < 0.2:
        w = w.node_affinity_in("zone", ["a"])
    return w


def _dry_run(
    pods: list[pb.Pod],
    nodes: list[pb.Node],
    pdbs: list[pb.PodDisruptionBudget],
    preemptor: pb.Pod,
    nominated: list[pb.Pod],
    offset: int,
    num: int,
    *,
    copies: bool,
    profile: str | None = None,
) -> tuple[list[tuple[str, list[str], int]], dict[str, tuple[str, str, str]], list[str], bool]:
    snapshot = Snapshot.from_objects(pods, nodes)
    fwk = new_framework(load_scheduler_config(profile).profiles[0], snapshot=snapshot)
    nominator = Nominator()
    for p in nominated:
        nominator.add_nominated_pod(PodInfo(p))
    fwk.set_pod_nominator(nominator)
    plugin = fwk.plugins_map["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    state = CycleState()
    pi = PodInfo(preemptor)
    fwk.run_pre_filter_plugins(state, pi)
    # This cycle's Filter statuses, as the scan gives them to PostFilter.
    filtered = {}
    for ni in snapshot.list():
        s = fwk.run_filter_plugins_with_nominated_pods(state, pi, ni)
        if s is not None and not s.is_success():
            filtered[ni.name] = s
    fast = plugin.victim_selector(state, pi, filtered) is not None
    if copies:
        plugin.victim_selector = lambda *args: None  # type: ignore[method-assign]
    candidates, statuses, errors = plugin.evaluator.dry_run_preemption(
        state, pi, snapshot.list(), pdbs, offset, num, node_to_status=filtered
    )
    # (Nodes the pod fits without preemption are Errors here: a cycle dry-runs only the
    # nodes Filter rejected, this test all of them.)
    return (
        [(c.name, [v.metadata.name for v in c.victims], c.num_pdb_violations) for c in candidates],
        {n: (s.code.name, s.plugin, s.message()) for n, s in statuses.items()},
        [e.message() for e in errors],
        fast,
    )


@pytest.mark.parametrize(
    "seed,profile", [(seed, None) for seed in range(300)] + [(seed, REORDERED) for seed in range(100)]
)
def test_without_copies_matches_select_victims_on_node(seed: int, profile: str | None) -> None:
    rng = random.Random(seed)
    pods, nodes, pdbs = _cluster(rng)
    preemptor = _preemptor(rng).obj()
    nominated = []
    for k in range(rng.choice([0, 0, 1, 3])):
        nominated.append(_preemptor(rng, f"nominated{k}").nominated(rng.choice(nodes).metadata.name).obj())
    offset, num = rng.randrange(len(nodes)), rng.randint(1, len(nodes))
    fast = _dry_run(pods, nodes, pdbs, preemptor, nominated, offset, num, copies=False, profile=profile)
    slow = _dry_run(pods, nodes, pdbs, preemptor, nominated, offset, num, copies=True, profile=profile)
    assert fast[3], "the default profile with a plain pod takes the copy-free path"
    assert fast[:3] == slow[:3]


def test_the_copy_free_path_is_not_taken_when_another_filter_reads_the_pods() -> None:
    """A preemptor with a host port needs the copies: NodePorts reads the node's pods."""
    nodes = [make_node().name("n0").capacity({"cpu": "1"}).obj()]
    low = make_pod().name("low").uid("low").namespace("default").node("n0").priority(0)
    pods = [low.req({"cpu": "1"}).obj()]
    with_port = make_pod().name("a").uid("a").namespace("default").priority(10).req({"cpu": "1"})
    with_port = with_port.host_port(8080)
    got = _dry_run(pods, nodes, [], with_port.obj(), [], 0, 1, copies=False)
    assert not got[3]
    assert got[0] == [("n0", ["low"], 0)]
