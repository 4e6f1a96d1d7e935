"""DefaultPreemption and the preemption Evaluator, on upstream's test tables
(plugins/defaultpreemption/default_preemption_test.go: TestPostFilter, TestDryRunPreemption /
SelectVictimsOnNode, TestPodEligibleToPreemptOthers, TestCalculateNumCandidates;
framework/preemption/preemption_test.go: pickOneNodeForPreemption), with our own data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins.defaultpreemption import DefaultPreemption, filter_pods_with_pdb_violation
from scheduler.framework.plugins.defaultpreemption import new as new_plugin
from scheduler.framework.preemption import Candidate, pick_one_node_for_preemption
from scheduler.framework.preemption.util import more_important_pod
from scheduler.framework.runtime import Framework
from scheduler.framework.types import Code, PodInfo, Status
from scheduler.profile import load_scheduler_config, new_framework
from scheduler.queue.nominator import NominatingInfo, Nominator
from tests.unit.scheduler.wrappers import make_node, make_pod

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400"}
VIOLATING_KEY = "test.kubernetes.io/is-violating-pdb"

PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled:
      - name: PrioritySort
      - name: NodeResourcesFit
      - name: DefaultPreemption
      - name: DefaultBinder
      disabled:
      - name: '*'
"""


def epoch(n: int) -> str:
    """Start times a second apart (upstream uses nanoseconds; RFC 3339 here has seconds)."""
    return f"1970-01-01T00:00:{n:02d}Z"


def pod(name: str, node: str = "", priority: int | None = None, req: dict[str, str] | None = None) -> Any:
    w = make_pod().name(name).uid(name).namespace("default")
    if node:
        w = w.node(node)
    if priority is not None:
        w = w.priority(priority)
    if req:
        w = w.req(req)
    return w


def started(p: Any, n: int) -> pb.Pod:
    obj: pb.Pod = p.obj()
    obj.status.start_time = epoch(n)
    return obj


def node(name: str, capacity: dict[str, str]) -> pb.Node:
    return make_node().name(name).capacity(capacity).obj()


def pdb(
    name: str, labels: dict[str, str], allowed: int = 0, disrupted: Sequence[str] = ()
) -> pb.PodDisruptionBudget:
    b = pb.PodDisruptionBudget()
    b.metadata.name, b.metadata.namespace = name, "default"
    b.spec.selector.match_labels.update(labels)
    b.status.disruptions_allowed = allowed
    for p in disrupted:
        b.status.disrupted_pods[p] = epoch(0)
    return b


def framework(
    pods: Sequence[pb.Pod], nodes: Sequence[pb.Node], profile: str = PROFILE
) -> tuple[Framework, Snapshot]:
    snapshot = Snapshot.from_objects(pods, list(nodes))
    fwk = new_framework(load_scheduler_config(profile).profiles[0], snapshot=snapshot)
    return fwk, snapshot


def plugin_of(fwk: Framework) -> DefaultPreemption:
    p = fwk.plugins_map["DefaultPreemption"]
    assert isinstance(p, DefaultPreemption)
    p.offset_rand = lambda n: 0  # deterministic, as upstream's tests override getOffsetRand
    return p


def post_filter(
    fwk: Framework,
    preemptor: pb.Pod,
    statuses: dict[str, Status],
    pdbs: Sequence[pb.PodDisruptionBudget] = (),
) -> tuple[Any, Status | None]:
    plugin = plugin_of(fwk)
    plugin.evaluator.pdbs = list(pdbs)
    state = CycleState()
    pi = PodInfo(preemptor)
    fwk.run_pre_filter_plugins(state, pi)
    return plugin.post_filter(state, pi, statuses)


U = Status(Code.UNSCHEDULABLE)
UU = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


# ------------------------------------------------------------------------- TestPostFilter

POST_FILTER_CASES = [
    (
        "pod with higher priority can be made schedulable",
        pod("p", priority=HIGH).obj(),
        [pod("p1", "node1").obj()],
        [node("node1", ONE_POD)],
        {"node1": U},
        [],
        "node1",
        None,
    ),
    (
        "pod with tied priority is still unschedulable",
        pod("p").obj(),
        [pod("p1", "node1").obj()],
        [node("node1", ONE_POD)],
        {"node1": U},
        [],
        "",
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    ),
    (
        "preemption should respect filteredNodesStatuses",
        pod("p", priority=HIGH).obj(),
        [pod("p1", "node1").obj()],
        [node("node1", ONE_POD)],
        {"node1": UU},
        [],
        "",
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    (
        "an absent status means UnschedulableAndUnresolvable",
        pod("p", priority=HIGH).obj(),
        [pod("p1", "node1").obj()],
        [node("node1", ONE_POD)],
        {},
        [],
        "",
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    ),
    (
        "pod can be made schedulable on one node",
        pod("p", priority=MID).obj(),
        [pod("p1", "node1", HIGH).obj(), pod("p2", "node2", LOW).obj()],
        [node("node1", ONE_POD), node("node2", ONE_POD)],
        {"node1": U, "node2": U},
        [],
        "node2",
        None,
    ),
    (
        "pod can be made schedulable on minHighestPriority node",
        pod("p", priority=VERY_HIGH).obj(),
        [
            pod("p1", "node1", HIGH).label(VIOLATING_KEY, "non-violating").obj(),
            pod("p2", "node1", LOW).label(VIOLATING_KEY, "violating").obj(),
            pod("p3", "node2", MID).label(VIOLATING_KEY, "violating").obj(),
        ],
        [node("node1", ONE_POD), node("node2", ONE_POD)],
        {"node1": U, "node2": U},
        [
            pdb("violating-pdb", {VIOLATING_KEY: "violating"}),
            pdb("ok", {VIOLATING_KEY: "non-violating"}, 2**31 - 1),
        ],
        "node2",
        None,
    ),
    (
        "no candidate nodes found, no enough resource after removing low priority pods",
        pod("p", priority=HIGH, req=LARGE).obj(),
        [pod("p1", "node1").obj(), pod("p2", "node2").obj()],
        [node("node1", NODE_RES), node("node2", NODE_RES)],
        {"node1": U, "node2": U},
        [],
        "",
        "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
    ),
    (
        "no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource",
        pod("p", priority=HIGH, req=LARGE).obj(),
        [pod("p1", "node1", HIGH).obj(), pod("p2", "node2").obj(), pod("p3", "node3", HIGH).obj()],
        [node("node1", ONE_POD), node("node2", NODE_RES), node("node3", ONE_POD)],
        {"node1": U, "node2": U, "node3": U},
        [],
        "",
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
        "2 No preemption victims found for incoming pod.",
    ),
    (
        "no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable, 2 without CPU",
        pod("p", priority=HIGH, req=LARGE).obj(),
        [pod("p1", "node1").obj(), pod("p2", "node2").obj()],
        [node(f"node{i}", NODE_RES) for i in range(1, 5)],
        {"node1": U, "node2": U, "node3": UU, "node4": UU},
        [],
        "",
        "preemption: 0/4 nodes are available: 2 Insufficient cpu, "
        "2 Preemption is not helpful for scheduling.",
    ),
]


@pytest.mark.parametrize(
    "name,preemptor,pods,nodes,statuses,pdbs,want_node,want_message",
    POST_FILTER_CASES,
    ids=[c[0] for c in POST_FILTER_CASES],
)
def test_post_filter(
    name: str,
    preemptor: pb.Pod,
    pods: list[pb.Pod],
    nodes: list[pb.Node],
    statuses: dict[str, Status],
    pdbs: list[pb.PodDisruptionBudget],
    want_node: str,
    want_message: str | None,
) -> None:
    fwk, _ = framework(pods, nodes)
    result, status = post_filter(fwk, preemptor, statuses, pdbs)
    assert result is not None and result.nominated_node_name == want_node
    if want_message is None:
        assert status is None or status.is_success()
    else:
        assert status is not None and status.code == Code.UNSCHEDULABLE
        assert status.message() == want_message


def test_preemption_policy_never_does_not_preempt() -> None:
    preemptor = pod("p", priority=HIGH).obj()
    preemptor.spec.preemption_policy = "Never"
    fwk, _ = framework([pod("p1", "node1").obj()], [node("node1", ONE_POD)])
    result, status = post_filter(fwk, preemptor, {"node1": U})
    assert result is None  # the nomination is left alone
    assert status is not None and status.code == Code.UNSCHEDULABLE
    assert status.message() == "preemption: not eligible due to preemptionPolicy=Never."


# ------------------------------------------------------------------------- SelectVictimsOnNode


def victims_on(
    pods: Sequence[pb.Pod],
    nodes: Sequence[pb.Node],
    preemptor: pb.Pod,
    pdbs: Sequence[pb.PodDisruptionBudget] = (),
    *,
    offset: int = 0,
    num: int | None = None,
) -> tuple[list[tuple[str, list[str], int]], dict[str, str]]:
    fwk, snapshot = framework(pods, nodes)
    plugin = plugin_of(fwk)
    state = CycleState()
    pi = PodInfo(preemptor)
    fwk.run_pre_filter_plugins(state, pi)
    candidates, statuses, _ = plugin.evaluator.dry_run_preemption(
        state, pi, snapshot.list(), pdbs, offset, num if num is not None else len(nodes)
    )
    return (
        [(c.name, [v.metadata.name for v in c.victims], c.num_pdb_violations) for c in candidates],
        {n: s.message() for n, s in statuses.items()},
    )


def test_dry_run_a_pod_that_does_not_fit_anywhere() -> None:
    got, statuses = victims_on(
        [pod("p1", "node1", MID, VERY_LARGE).obj(), pod("p2", "node2", MID, VERY_LARGE).obj()],
        [node("node1", {"cpu": "400m", "memory": "400"}), node("node2", {"cpu": "400m", "memory": "400"})],
        pod("p", priority=HIGH, req=VERY_LARGE).obj(),
    )
    assert got == []
    assert statuses == {
        "node1": "Insufficient cpu, Insufficient memory",
        "node2": "Insufficient cpu, Insufficient memory",
    }


def test_dry_run_a_pod_that_fits_with_low_priority_pods_removed() -> None:
    cap = {"cpu": "500m", "memory": "500"}
    got, _ = victims_on(
        [
            started(pod("p1", "node1", MID, MEDIUM), 1),
            started(pod("p2", "node1", MID, MEDIUM), 2),
            pod("p3", "node2", MID, LARGE).obj(),
        ],
        [node("node1", cap), node("node2", cap)],
        pod("p", priority=HIGH, req=LARGE).obj(),
    )
    # node1 has room for p next to one of its pods (p1, the older, is reprieved); node2 only
    # without p3.
    assert got == [("node1", ["p2"], 0), ("node2", ["p3"], 0)]


def test_dry_run_higher_priority_pods_are_never_victims() -> None:
    cap = {"cpu": "500m", "memory": "500"}
    got, statuses = victims_on(
        [pod("p1", "node1", LOW, SMALL).obj(), pod("p2", "node1", VERY_HIGH, LARGE).obj()],
        [node("node1", cap)],
        pod("p", priority=HIGH, req=LARGE).obj(),
    )
    assert got == []
    assert "Insufficient cpu" in statuses["node1"]


def test_dry_run_reprieves_the_most_important_victims_first() -> None:
    cap = {"cpu": "500m", "memory": "500"}
    pods = [
        started(pod("a", "node1", LOW, MEDIUM), 3),
        started(pod("b", "node1", MID, MEDIUM), 5),
        started(pod("c", "node1", LOW, MEDIUM), 1),  # same priority as a, started earlier
    ]
    got, _ = victims_on(pods, [node("node1", cap)], pod("p", priority=HIGH, req=LARGE).obj())
    # 500m: p (300m) + one 200m pod. b (higher priority) is reprieved first; a and c go.
    assert got == [("node1", ["c", "a"], 0)]


def test_dry_run_prefers_reprieving_pdb_violating_pods() -> None:
    cap = {"pods": "2"}
    # Same priority; "early" is more important (started first) so without PDBs it would be
    # reprieved first and "protected" would be the victim.
    pods = [
        started(pod("protected", "node1", LOW).label("app", "db"), 5),
        started(pod("early", "node1", LOW), 1),
    ]
    preemptor = pod("p", priority=HIGH).obj()
    got, _ = victims_on(pods, [node("node1", cap)], preemptor)
    assert got == [("node1", ["protected"], 0)]
    got, _ = victims_on(pods, [node("node1", cap)], preemptor, [pdb("db", {"app": "db"}, allowed=0)])
    assert got == [("node1", ["early"], 0)]


def test_dry_run_counts_pdb_violations() -> None:
    cap = {"pods": "1"}
    pods = [pod("v", "node1", LOW).label("app", "db").obj(), pod("w", "node2", LOW).obj()]
    got, _ = victims_on(
        pods,
        [node("node1", cap), node("node2", cap)],
        pod("p", priority=HIGH).obj(),
        [pdb("db", {"app": "db"})],
    )
    # Candidates violating no PDB come first.
    assert got == [("node2", ["w"], 0), ("node1", ["v"], 1)]


def test_dry_run_stops_at_enough_candidates_from_the_offset() -> None:
    cap = {"pods": "1"}
    nodes = [node(f"n{i}", cap) for i in range(5)]
    pods = [pod(f"p{i}", f"n{i}", LOW).obj() for i in range(5)]
    got, _ = victims_on(pods, nodes, pod("p", priority=HIGH).obj(), offset=3, num=2)
    assert [c[0] for c in got] == ["n3", "n4"]
    got, _ = victims_on(pods, nodes, pod("p", priority=HIGH).obj(), offset=4, num=3)
    assert [c[0] for c in got] == ["n4", "n0", "n1"]


# ------------------------------------------------------------------------- filterPodsWithPDBViolation


def test_filter_pods_with_pdb_violation() -> None:
    infos = [PodInfo(pod(f"p{i}").label("app", "a").obj()) for i in range(3)]
    infos.append(PodInfo(pod("other").label("app", "b").obj()))
    infos.append(PodInfo(pod("nolabels").obj()))
    budget = pdb("a", {"app": "a"}, allowed=1)
    violating, ok = filter_pods_with_pdb_violation(infos, [budget])
    assert [p.pod.metadata.name for p in violating] == ["p1", "p2"]
    assert [p.pod.metadata.name for p in ok] == ["p0", "other", "nolabels"]
    # A pod already in disruptedPods does not spend the budget again.
    violating, _ = filter_pods_with_pdb_violation(infos, [pdb("a", {"app": "a"}, 1, disrupted=["p0"])])
    assert [p.pod.metadata.name for p in violating] == ["p2"]
    # Another namespace, and an empty selector, match nothing.
    other_ns = pdb("a", {"app": "a"})
    other_ns.metadata.namespace = "kube-system"
    empty = pdb("e", {})
    assert filter_pods_with_pdb_violation(infos, [other_ns, empty])[0] == []


# ------------------------------------------------------------------------- pickOneNodeForPreemption


def cand(name: str, victims: Sequence[pb.Pod], violations: int = 0) -> Candidate:
    return Candidate(name, list(victims), violations)


def p(name: str, priority: int, start: int = 0) -> pb.Pod:
    return started(pod(name, priority=priority), start)


PICK_CASES = [
    ("fewest PDB violations", [cand("a", [p("x", LOW)], 1), cand("b", [p("y", HIGH)], 0)], "b"),
    (
        "lowest highest-victim priority",
        [cand("a", [p("x", HIGH)]), cand("b", [p("y", MID), p("z", LOW)])],
        "b",
    ),
    (
        "smallest priority sum",
        [cand("a", [p("x", MID), p("y", MID)]), cand("b", [p("z", MID), p("w", LOW)])],
        "b",
    ),
    (
        "negative priorities: fewer victims win the sum",
        [cand("a", [p("x", NEG), p("y", NEG)]), cand("b", [p("z", NEG)])],
        "b",
    ),
    (
        "fewest victims",
        [cand("a", [p("x", LOW), p("y", LOW)]), cand("b", [p("z", LOW), p("w", LOW), p("v", LOW)])],
        "a",
    ),
    (
        "latest start of the highest-priority victims",
        [cand("a", [p("x", MID, 1), p("y", LOW, 9)]), cand("b", [p("z", MID, 5), p("w", LOW, 0)])],
        "b",
    ),
    ("ties: the first candidate", [cand("a", [p("x", LOW, 2)]), cand("b", [p("y", LOW, 2)])], "a"),
]


@pytest.mark.parametrize("name,candidates,want", PICK_CASES, ids=[c[0] for c in PICK_CASES])
def test_pick_one_node_for_preemption(name: str, candidates: list[Candidate], want: str) -> None:
    assert pick_one_node_for_preemption({c.name: c for c in candidates}) == want


def test_pick_one_node_of_nothing() -> None:
    assert pick_one_node_for_preemption({}) == ""


def test_more_important_pod() -> None:
    assert more_important_pod(p("a", HIGH), p("b", LOW))
    assert not more_important_pod(p("a", LOW), p("b", HIGH))
    assert more_important_pod(p("a", LOW, 1), p("b", LOW, 2))
    assert not more_important_pod(p("a", LOW, 2), p("b", LOW, 2))


# ------------------------------------------------------------------------- eligibility


def test_pod_eligible_to_preempt_others() -> None:
    victim = pod("v", "node1", LOW).terminating().obj()
    victim.status.conditions.add(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")
    fwk, _ = framework([victim], [node("node1", ONE_POD), node("node2", ONE_POD)])
    plugin = plugin_of(fwk)
    nominated = pod("p", priority=HIGH).nominated("node1").obj()
    ok, msg = plugin.pod_eligible_to_preempt_others(nominated, U)
    assert (ok, msg) == (False, "not eligible due to a terminating pod on the nominated node.")
    # ... unless the nominated node is now UnschedulableAndUnresolvable for it.
    assert plugin.pod_eligible_to_preempt_others(nominated, UU) == (True, "")
    assert plugin.pod_eligible_to_preempt_others(pod("q", priority=HIGH).nominated("node2").obj(), U) == (
        True,
        "",
    )
    assert plugin.pod_eligible_to_preempt_others(pod("r", priority=HIGH).obj(), None) == (True, "")
    # A terminating pod not deleted by preemption does not hold the preemptor back.
    fwk2, _ = framework([pod("v", "node1", LOW).terminating().obj()], [node("node1", ONE_POD)])
    assert plugin_of(fwk2).pod_eligible_to_preempt_others(nominated, U) == (True, "")


# ------------------------------------------------------------------------- args


@pytest.mark.parametrize(
    "pct,absolute,nodes,want",
    [
        (10, 100, 10, 10),  # fewer nodes than minCandidateNodesAbsolute: all of them
        (10, 100, 10000, 1000),  # 10% of 10000
        (10, 100, 500, 100),  # 10% is less than the absolute minimum
        (0, 5, 1000, 5),
        (100, 0, 7, 7),
        (50, 0, 7, 3),
    ],
)
def test_calculate_num_candidates(pct: int, absolute: int, nodes: int, want: int) -> None:
    plugin = new_plugin(
        {"minCandidateNodesPercentage": pct, "minCandidateNodesAbsolute": absolute}, handle=None
    )  # type: ignore[arg-type]
    assert plugin.calculate_num_candidates(nodes) == want


@pytest.mark.parametrize(
    "args,message",
    [
        (
            {"minCandidateNodesPercentage": 101},
            "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
        ),
        (
            {"minCandidateNodesAbsolute": -1},
            "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
        ),
        (
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
            "minCandidateNodesAbsolute",
        ),
        (
            {"minCandidateNodesAbsolute": "3"},
            "minCandidateNodesAbsolute: Invalid value: '3': must be an integer",
        ),
    ],
)
def test_invalid_args_name_the_field(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        new_plugin(args, handle=None)  # type: ignore[arg-type]
    assert str(e.value) == message


# ------------------------------------------------------------------------- nominated pods


def test_nominator_modes() -> None:
    n = Nominator()
    a = pod("a", priority=HIGH).nominated("node1").obj()
    n.add_nominated_pod(PodInfo(a))  # ModeNoop: the pod's own field
    assert [pi.pod.metadata.name for pi in n.nominated_pods_for_node("node1")] == ["a"]
    n.add_nominated_pod(PodInfo(a), NominatingInfo("node2"))  # ModeOverride
    assert n.nominated_pods_for_node("node1") == []
    assert [pi.pod.metadata.name for pi in n.nominated_pods_for_node("node2")] == ["a"]
    # An update that neither sets nor clears the field keeps the in-memory nomination.
    plain = pod("b").obj()
    n.add_nominated_pod(PodInfo(plain), NominatingInfo("node3"))
    n.update_nominated_pod(plain, PodInfo(pod("b").label("x", "y").obj()))
    assert n.nominated_node_of(plain) == "node3"
    n.add_nominated_pod(PodInfo(plain), NominatingInfo(""))  # cleared
    assert n.nominated_node_of(plain) is None
    n.delete_nominated_pod_if_exists(a)
    assert not n.has_nominated_pods()


def test_nominator_skips_bound_or_gone_pods() -> None:
    bound = pod("a", "node1").nominated("node1").obj()
    n = Nominator(pod_lookup=lambda ns, name: bound if name == "a" else None)
    n.add_nominated_pod(PodInfo(bound))
    n.add_nominated_pod(PodInfo(pod("gone").nominated("node1").obj()))
    assert n.nominated_pods_for_node("node1") == []


@pytest.mark.parametrize("batch", [True, False])
def test_filter_counts_nominated_pods_of_higher_or_equal_priority(batch: bool) -> None:
    nodes = [node("node1", ONE_POD), node("node2", ONE_POD)]
    snapshot = Snapshot.from_objects([], nodes)
    fwk = new_framework(load_scheduler_config(PROFILE).profiles[0], snapshot=snapshot, batch=batch)
    nominator = Nominator()
    fwk.set_pod_nominator(nominator)
    nominator.add_nominated_pod(PodInfo(pod("big", priority=HIGH).nominated("node1").obj()))

    from scheduler.algorithm import AlgorithmState, schedule_pod

    # A lower-priority pod must not take the room held for the nominated pod.
    for _ in range(3):
        result = schedule_pod(
            fwk, CycleState(), PodInfo(pod("low", priority=LOW).obj()), snapshot, AlgorithmState()
        )
        assert result.suggested_host == "node2"
    # One of higher priority may: the nominated pod counts only for pods it outranks or ties.
    state = CycleState()
    higher = PodInfo(pod("higher", priority=VERY_HIGH).obj())
    fwk.run_pre_filter_plugins(state, higher)
    assert fwk.run_filter_plugins_with_nominated_pods(state, higher, snapshot.get("node1")) is None
    state = CycleState()
    low = PodInfo(pod("low", priority=LOW).obj())
    fwk.run_pre_filter_plugins(state, low)
    s = fwk.run_filter_plugins_with_nominated_pods(state, low, snapshot.get("node1"))
    assert s is not None and s.message() == "Too many pods"
    # The nominated pod itself is not counted against itself.
    state = CycleState()
    big = PodInfo(pod("big", priority=HIGH).nominated("node1").obj())
    fwk.run_pre_filter_plugins(state, big)
    assert fwk.run_filter_plugins_with_nominated_pods(state, big, snapshot.get("node1")) is None
