# ruff: noqa: E501 -- the case tables keep one case per row
"""InterPodAffinity on cases re-expressed from upstream's tables (plugins/interpodaffinity:
filtering_test.go TestRequiredAffinitySingleNode / TestRequiredAffinityMultipleNodes /
TestPreFilterStateAddRemovePod, scoring_test.go TestPreferredAffinity /
TestPreferredAffinityWithHardPodAffinitySymmetricWeight, plugin_test.go queueing hints), with
kse's own data; the batch methods against the scalar ones on random clusters; the API server's
matchLabelKeys merge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from kse.objects.podaffinity import apply_match_label_keys
from proto import kse_pb2 as pb
from scheduler.framework.interface import NodeScore
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins import interpodaffinity as ipa
from scheduler.framework.types import Code, PodInfo, QueueingHint, Status

from .wrappers import FakeHandle, make_node, make_pod, new_state

AFF, ANTI = "affinity", "anti"
REGION, ZONE, HOST = "region", "zone", "kubernetes.io/hostname"
OK, NO, NEVER = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
R_AFF = ipa.ERR_REASON_AFFINITY_RULES_NOT_MATCH
R_ANTI = ipa.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
R_EXIST = ipa.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH


def sel(op: str = "In", key: str = "service", values: Sequence[str] = ("securityscan",)) -> pb.LabelSelector:
    ls = pb.LabelSelector()
    ls.match_expressions.add(key=key, operator=op, values=list(values))
    return ls


def term(
    selector: pb.LabelSelector | None,
    topology_key: str = REGION,
    namespaces: Sequence[str] = (),
    ns_selector: pb.LabelSelector | None = None,
) -> pb.PodAffinityTerm:
    t = pb.PodAffinityTerm(topology_key=topology_key, namespaces=list(namespaces))
    if selector is not None:
        t.label_selector.CopyFrom(selector)
    if ns_selector is not None:
        t.namespace_selector.CopyFrom(ns_selector)
    return t


def pod(
    name: str,
    node: str = "",
    labels: Mapping[str, str] | None = None,
    ns: str = "default",
    required: Sequence[tuple[str, pb.PodAffinityTerm]] = (),
    preferred: Sequence[tuple[str, int, pb.PodAffinityTerm]] = (),
) -> pb.Pod:
    w = make_pod().name(name).uid(name).namespace(ns)
    for k, v in (labels or {}).items():
        w.label(k, v)
    if node:
        w.node(node)
    p = w.obj()
    for kind, t in required:
        aff = p.spec.affinity.pod_affinity if kind == AFF else p.spec.affinity.pod_anti_affinity
        aff.required_during_scheduling_ignored_during_execution.append(t)
    for kind, weight, t in preferred:
        aff = p.spec.affinity.pod_affinity if kind == AFF else p.spec.affinity.pod_anti_affinity
        aff.preferred_during_scheduling_ignored_during_execution.add(weight=weight, pod_affinity_term=t)
    return p


def node(name: str, **labels: str) -> pb.Node:
    w = make_node().name(name)
    for k, v in labels.items():
        w.label(k, v)
    return w.obj()


def plugin(snapshot: Snapshot, **args: object) -> ipa.InterPodAffinity:
    return ipa.new(dict(args) if args else None, FakeHandle(snapshot))


def run_filter(p: pb.Pod, pods: Sequence[pb.Pod], nodes: Sequence[pb.Node]) -> list[Status | None]:
    """PreFilter then Filter on every node; Skip from PreFilter means every node passes. The batch
    filter_nodes must agree with the scalar filter."""
    snap = Snapshot.from_objects(pods, nodes)
    pl = plugin(snap)
    state, pi = new_state(), PodInfo(p)
    _, s = pl.pre_filter(state, pi, snap.list())
    if s is not None and s.code == Code.SKIP:
        return [None] * len(nodes)
    if s is not None:
        return [s] * len(nodes)
    out = [pl.filter(state, pi, ni) for ni in snap.list()]
    batch = pl.filter_nodes(state, pi, snap, np.arange(len(nodes)))
    assert batch.tolist() == [r is None for r in out]
    return out


def codes(statuses: Sequence[Status | None]) -> list[tuple[Code, list[str]]]:
    return [(OK, []) if s is None else (s.code, s.reasons) for s in statuses]


SEC = {"service": "securityscan"}
N1 = node("node1", region="r1", zone="z11", **{HOST: "node1"})

# (name, pod, existing pods, expected (code, reasons) on N1)
SINGLE_NODE = [
    ("a pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
     pod("p"), [], (OK, [])),
    ("satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
     pod("p", required=[(AFF, term(sel()))]), [pod("e", "node1", SEC)], (OK, [])),
    ("satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
     pod("p", required=[(AFF, term(sel("NotIn", values=["securityscan3", "value3"])))]), [pod("e", "node1", SEC)], (OK, [])),
    ("Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
     pod("p", required=[(AFF, term(sel(), namespaces=["DiffNameSpace"]))]), [pod("e", "node1", SEC, ns="ns")], (NEVER, [R_AFF])),
    ("Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
     pod("p", required=[(AFF, term(sel(values=["antivirusscan", "value2"])))]), [pod("e", "node1", SEC)], (NEVER, [R_AFF])),
    ("satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution",
     pod("p", required=[(AFF, term(sel("Exists", values=[]))), (AFF, term(sel("NotIn", key="wrongkey", values=["v"])))]),
     [pod("e", "node1", SEC)], (OK, [])),
    ("The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression items doesn't match",
     pod("p", required=[(AFF, term(sel("Exists", values=[]))), (AFF, term(sel(values=["WrongValue"])))]),
     [pod("e", "node1", SEC)], (NEVER, [R_AFF])),
    ("satisfies the PodAffinity and PodAntiAffinity with the existing pod",
     pod("p", required=[(AFF, term(sel())), (ANTI, term(sel(values=["antivirusscan"]), ZONE))]),
     [pod("e", "node1", SEC)], (OK, [])),
    ("satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
     pod("p", labels=SEC, required=[(AFF, term(sel())), (ANTI, term(sel(values=["antivirusscan"]), ZONE))]),
     [pod("e", "node1", SEC, required=[(ANTI, term(sel(values=["antivirusscan"]), ZONE))])], (OK, [])),
    ("satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
     pod("p", required=[(AFF, term(sel())), (ANTI, term(sel(), ZONE))]), [pod("e", "node1", SEC)], (NO, [R_ANTI])),
    ("satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
     pod("p", labels=SEC, required=[(AFF, term(sel()))]),
     [pod("e", "node1", SEC, required=[(ANTI, term(sel(), ZONE))])], (NO, [R_EXIST])),
    ("pod matches its own Label in PodAffinity and that matches the existing pod Labels",
     pod("p", labels=SEC, required=[(AFF, term(sel(values=["securityscan"])))]), [pod("e", "node2", SEC)], (NEVER, [R_AFF])),
    ("the first pod of a self-affine series: no pod anywhere matches, the pod matches itself",
     pod("p", labels=SEC, required=[(AFF, term(sel()))]), [], (OK, [])),
    ("no pod matches and the pod does not match its own terms",
     pod("p", required=[(AFF, term(sel()))]), [], (NEVER, [R_AFF])),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
     pod("p", labels=SEC), [pod("e", "node1", SEC, required=[(ANTI, term(sel(), ZONE))])], (NO, [R_EXIST])),
    ("verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
     pod("p", labels=SEC), [pod("e", "node1", SEC, required=[(ANTI, term(sel(values=["x"]), ZONE))])], (OK, [])),
    ("existing anti-affinity in another namespace does not select the pod",
     pod("p", labels=SEC), [pod("e", "node1", SEC, ns="other", required=[(ANTI, term(sel(), ZONE))])], (OK, [])),
    ("existing anti-affinity listing the pod's namespace selects it",
     pod("p", labels=SEC), [pod("e", "node1", SEC, ns="other", required=[(ANTI, term(sel(), ZONE, namespaces=["default"]))])], (NO, [R_EXIST])),
    ("existing anti-affinity with namespaceSelector {} selects every namespace",
     pod("p", labels=SEC), [pod("e", "node1", SEC, ns="other", required=[(ANTI, term(sel(), ZONE, ns_selector=pb.LabelSelector()))])], (NO, [R_EXIST])),
    ("affinity to pods of any namespace with namespaceSelector {}",
     pod("p", required=[(AFF, term(sel(), ns_selector=pb.LabelSelector()))]), [pod("e", "node1", SEC, ns="other")], (OK, [])),
    ("affinity to the listed namespaces only",
     pod("p", required=[(AFF, term(sel(), namespaces=["other"]))]), [pod("e", "node1", SEC, ns="other")], (OK, [])),
    ("the node lacks the affinity topology key",
     pod("p", required=[(AFF, term(sel(), "rack"))]), [pod("e", "node1", SEC)], (NEVER, [R_AFF])),
    ("anti-affinity with a topology key the node lacks passes",
     pod("p", required=[(ANTI, term(sel(), "rack"))]), [pod("e", "node1", SEC)], (OK, [])),
    ("a nil labelSelector matches no pod",
     pod("p", required=[(ANTI, term(None, ZONE))]), [pod("e", "node1", SEC)], (OK, [])),
]


@pytest.mark.parametrize(("name", "p", "existing", "want"), SINGLE_NODE, ids=[c[0][:80] for c in SINGLE_NODE])
def test_required_affinity_single_node(name: str, p: pb.Pod, existing: list[pb.Pod], want: tuple[Code, list[str]]) -> None:
    assert codes(run_filter(p, existing, [N1, node("node2", region="r2", **{HOST: "node2"})]))[0] == want


def test_required_affinity_multiple_nodes() -> None:
    nodes = [
        node("n1", region="r1", zone="z11", **{HOST: "n1"}),
        node("n2", region="r1", zone="z12", **{HOST: "n2"}),
        node("n3", region="r2", zone="z21", **{HOST: "n3"}),
        node("n4", zone="z22", **{HOST: "n4"}),  # no region
    ]
    existing = [pod("e", "n1", {"foo": "bar"})]
    # A pod can be scheduled onto all the nodes in the region of the matching pod.
    got = codes(run_filter(pod("p", required=[(AFF, term(sel(key="foo", values=["bar"])))]), existing, nodes))
    assert got == [(OK, []), (OK, []), (NEVER, [R_AFF]), (NEVER, [R_AFF])]
    # Anti-affinity on zone: only the node in the matching pod's zone is out.
    got = codes(run_filter(pod("p", required=[(ANTI, term(sel(key="foo", values=["bar"]), ZONE))]), existing, nodes))
    assert got == [(NO, [R_ANTI]), (OK, []), (OK, []), (OK, [])]
    # Symmetric: the existing pod's region anti-affinity keeps the matching pod out of r1.
    existing = [pod("e", "n1", required=[(ANTI, term(sel(key="foo", values=["bar"])))])]
    got = codes(run_filter(pod("p", labels={"foo": "bar"}), existing, nodes))
    assert got == [(NO, [R_EXIST]), (NO, [R_EXIST]), (OK, []), (OK, [])]
    # Affinity to hostname spreads nowhere else; anti-affinity to hostname spreads.
    existing = [pod("e1", "n1", {"app": "web"}), pod("e2", "n2", {"app": "web"})]
    got = codes(run_filter(pod("p", labels={"app": "web"}, required=[(ANTI, term(sel(key="app", values=["web"]), HOST))]), existing, nodes))
    assert got == [(NO, [R_ANTI]), (NO, [R_ANTI]), (OK, []), (OK, [])]


def test_non_empty_namespace_selector_is_refused_saying_so() -> None:
    p = pod("p", required=[(AFF, term(sel(), ns_selector=sel(key="team", values=["a"])))])
    (s,) = run_filter(p, [], [N1])
    assert s is not None and s.code == NEVER
    assert s.reasons == [
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector: "
        + ipa.NAMESPACE_SELECTOR_UNSUPPORTED
    ]
    p = pod("p", preferred=[(ANTI, 5, term(sel(), ns_selector=sel(key="team", values=["a"])))])
    (s,) = run_filter(p, [], [N1])
    assert s is not None and s.code == NEVER and "preferredDuringScheduling" in s.reasons[0]
    # an existing pod's required anti-affinity that may select the pod through its namespaceSelector
    existing = [pod("e", "node1", ns="other", required=[(ANTI, term(sel(), ZONE, ns_selector=sel(key="team", values=["a"])))])]
    (s,) = run_filter(pod("p", labels=SEC), existing, [N1])
    assert s is not None and s.code == NEVER and "other/e" in s.reasons[0]
    # ... but not when its label selector does not match the pod anyway
    (s,) = run_filter(pod("p", labels={"service": "other"}), existing, [N1])
    assert s is None


def test_invalid_selector_is_unresolvable() -> None:
    bad = pb.LabelSelector()
    bad.match_expressions.add(key="a", operator="In")  # In needs values
    (s,) = run_filter(pod("p", required=[(AFF, term(bad))]), [], [N1])
    assert s is not None and s.code == NEVER and s.reasons[0].startswith("parsing pod: ")


def test_pre_filter_skips_when_nothing_applies() -> None:
    snap = Snapshot.from_objects([pod("e", "node1", SEC)], [N1])
    _, s = plugin(snap).pre_filter(new_state(), PodInfo(pod("p")), snap.list())
    assert s == Status(Code.SKIP)


def test_add_remove_pod_updates_the_state() -> None:
    """Upstream TestPreFilterStateAddRemovePod: AddPod then RemovePod returns to the original."""
    nodes = [node("n1", region="r1", zone="z11"), node("n2", region="r1", zone="z12")]
    p = pod("p", labels=SEC, required=[(AFF, term(sel(key="app", values=["db"]))), (ANTI, term(sel(key="app", values=["cache"]), ZONE))])
    snap = Snapshot.from_objects([], nodes)
    pl = plugin(snap)
    state, pi = new_state(), PodInfo(p)
    pl.pre_filter(state, pi, snap.list())
    n1, n2 = snap.list()
    assert codes([pl.filter(state, pi, n) for n in (n1, n2)]) == [(NEVER, [R_AFF])] * 2
    db = PodInfo(pod("db", "n1", {"app": "db"}))
    assert pl.add_pod(state, pi, db, n1) is None
    assert codes([pl.filter(state, pi, n) for n in (n1, n2)]) == [(OK, []), (OK, [])]
    cache = PodInfo(pod("cache", "n2", {"app": "cache"}))
    pl.add_pod(state, pi, cache, n2)
    assert codes([pl.filter(state, pi, n) for n in (n1, n2)]) == [(OK, []), (NO, [R_ANTI])]
    hater = PodInfo(pod("hater", "n1", required=[(ANTI, term(sel(), REGION))]))
    pl.add_pod(state, pi, hater, n1)
    assert codes([pl.filter(state, pi, n) for n in (n1, n2)]) == [(NO, [R_EXIST]), (NO, [R_ANTI])]
    for other, n in ((hater, n1), (cache, n2), (db, n1)):
        pl.remove_pod(state, pi, other, n)
    assert codes([pl.filter(state, pi, n) for n in (n1, n2)]) == [(NEVER, [R_AFF])] * 2
    s = state.read(ipa.PRE_FILTER_STATE_KEY)
    assert s.affinity_counts == {} and s.anti_affinity_counts == {} and s.existing_anti_affinity_counts == {}


# ----------------------------------------------------------------------------- score


def run_score(p: pb.Pod, pods: Sequence[pb.Pod], nodes: Sequence[pb.Node], **args: object) -> list[int] | Status:
    """PreScore, Score, NormalizeScore on every node (scalar and batch must agree)."""
    snap = Snapshot.from_objects(pods, nodes)
    pl = plugin(snap, **args)
    state, pi = new_state(), PodInfo(p)
    s = pl.pre_score(state, pi, snap.list())
    if s is not None:
        return s
    raw = [pl.score(state, pi, ni)[0] for ni in snap.list()]
    assert pl.score_nodes(state, pi, snap, np.arange(len(nodes))).tolist() == raw
    scores = [NodeScore(ni.name, r) for ni, r in zip(snap.list(), raw, strict=True)]
    assert pl.normalize_score(state, pi, scores) is None
    arr = np.array(raw, dtype=np.int64)
    assert pl.normalize_scores(state, pi, snap.list(), arr) is None
    assert arr.tolist() == [ns.score for ns in scores]
    return [ns.score for ns in scores]


S1 = {"security": "S1"}
S2 = {"security": "S2"}
NODES3 = [node("node1", region="China"), node("node2", region="India"), node("node3", region="China", az="az1")]


def test_preferred_affinity_scores() -> None:
    aff5 = [(AFF, 5, term(sel(key="security", values=["S1"])))]
    anti5 = [(ANTI, 5, term(sel(key="security", values=["S1"])))]
    # all nodes score 0 when the pod has no constraints and no pod has affinity: Skip
    assert run_score(pod("p", labels=S1), [], NODES3) == Status(Code.SKIP)
    # Affinity: nodes in the region of the matching pod score the maximum
    assert run_score(pod("p", labels=S1, preferred=aff5), [pod("e", "node1", S1), pod("f", "node2", S2)], NODES3) == [100, 0, 100]
    # Anti-affinity: the region of the matching pod scores the least
    assert run_score(pod("p", labels=S1, preferred=anti5), [pod("e", "node1", S1), pod("f", "node2", S2)], NODES3) == [0, 100, 0]
    # Affinity and anti-affinity weights sum per region
    both = [(AFF, 8, term(sel(key="security", values=["S1"]))), (ANTI, 2, term(sel(key="security", values=["S2"])))]
    got = run_score(pod("p", preferred=both), [pod("e", "node1", S1), pod("f", "node2", S2), pod("g", "node3", S2)], NODES3)
    # China: +8 -2 = 6, India: -2: normalized (6 - -2) / 8
    assert got == [100, 0, 100]
    # Existing pods' preferred terms towards the incoming pod (symmetry)
    existing = [pod("e", "node2", preferred=[(AFF, 5, term(sel(key="security", values=["S1"])))])]
    assert run_score(pod("p", labels=S1), existing, NODES3) == [0, 100, 0]
    existing = [pod("e", "node2", preferred=[(ANTI, 5, term(sel(key="security", values=["S1"])))])]
    assert run_score(pod("p", labels=S1), existing, NODES3) == [100, 0, 100]
    # ... unless ignorePreferredTermsOfExistingPods
    assert run_score(pod("p", labels=S1), existing, NODES3, ignorePreferredTermsOfExistingPods=True) == Status(Code.SKIP)
    # A topology key none of the nodes has: no scores at all
    assert run_score(pod("p", labels=S1, preferred=[(AFF, 5, term(sel(key="security", values=["S1"]), "rack"))]), [pod("e", "node1", S1)], NODES3) == Status(Code.SKIP)


def test_hard_pod_affinity_symmetric_weight() -> None:
    """Upstream TestPreferredAffinityWithHardPodAffinitySymmetricWeight."""
    existing = [pod("e", "node1", required=[(AFF, term(sel(key="service", values=["S1"])))])]
    nodes = [node("node1", region="China"), node("node2", region="India"), node("node3", region="China")]
    p = pod("p", labels={"service": "S1"})
    assert run_score(p, existing, nodes) == [100, 0, 100]
    assert run_score(p, existing, nodes, hardPodAffinityWeight=0) == Status(Code.SKIP)
    # the weight scales the raw score, not the normalized one
    snap = Snapshot.from_objects(existing, nodes)
    pl = plugin(snap, hardPodAffinityWeight=7)
    state, pi = new_state(), PodInfo(p)
    assert pl.pre_score(state, pi, snap.list()) is None
    assert [pl.score(state, pi, ni)[0] for ni in snap.list()] == [7, 0, 7]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"),
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods: Invalid value"),
    ],
)
def test_args_validation(args: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        ipa.new(args, FakeHandle())


# ----------------------------------------------------------------------------- batch vs scalar


def _random_cluster(rng: np.random.Generator) -> tuple[list[pb.Pod], list[pb.Node]]:
    nodes = []
    for i in range(40):
        labels = {HOST: f"n{i}"}
        if rng.random() < 0.9:
            labels[ZONE] = f"z{rng.integers(0, 4)}"
        if rng.random() < 0.8:
            labels[REGION] = f"r{rng.integers(0, 2)}"
        nodes.append(node(f"n{i}", **labels))
    pods = []
    for j in range(120):
        pods.append(_random_pod(rng, f"e{j}", f"n{rng.integers(0, 40)}"))
    return pods, nodes


def _random_pod(rng: np.random.Generator, name: str, node_name: str = "") -> pb.Pod:
    labels = {"app": f"a{rng.integers(0, 4)}"}
    required: list[tuple[str, pb.PodAffinityTerm]] = []
    preferred: list[tuple[str, int, pb.PodAffinityTerm]] = []
    for _ in range(int(rng.integers(0, 3))):
        kind = AFF if rng.random() < 0.4 else ANTI
        t = term(sel(key="app", values=[f"a{rng.integers(0, 4)}"]), str(rng.choice([HOST, ZONE, REGION])))
        if rng.random() < 0.5:
            required.append((kind, t))
        else:
            preferred.append((kind, int(rng.integers(1, 100)), t))
    return pod(name, node_name, labels, ns=str(rng.choice(["default", "default", "other"])), required=required, preferred=preferred)


@pytest.mark.parametrize("seed", range(12))
def test_batch_equals_scalar(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pods, nodes = _random_cluster(rng)
    for k in range(8):
        p = _random_pod(rng, f"p{k}")
        run_filter(p, pods, nodes)  # asserts filter_nodes == filter
        got = run_score(p, pods, nodes, hardPodAffinityWeight=int(rng.integers(0, 5)))
        assert isinstance(got, Status) or all(0 <= s <= 100 for s in got)


# ----------------------------------------------------------------------------- hints, matchLabelKeys


def test_queueing_hints() -> None:
    pl = plugin(Snapshot())
    p = pod("p", required=[(AFF, term(sel())), (ANTI, term(sel(key="app", values=["db"]), ZONE))])
    matching, other = pod("e", "n1", SEC), pod("e", "n1", {"service": "x"})
    db = pod("d", "n1", {"app": "db"})
    Q, S = QueueingHint.QUEUE, QueueingHint.SKIP
    assert pl.is_schedulable_after_pod_change(p, None, pod("u", "", SEC)) == S  # unscheduled
    assert pl.is_schedulable_after_pod_change(p, None, matching) == Q
    assert pl.is_schedulable_after_pod_change(p, None, other) == S
    assert pl.is_schedulable_after_pod_change(p, other, matching) == Q
    assert pl.is_schedulable_after_pod_change(p, matching, other) == S
    assert pl.is_schedulable_after_pod_change(p, db, other) == Q  # no longer matches the anti term
    assert pl.is_schedulable_after_pod_change(p, db, None) == Q
    assert pl.is_schedulable_after_pod_change(p, matching, None) == S
    n_old, n_region = node("n"), node("n", region="r1")
    assert pl.is_schedulable_after_node_change(p, None, n_region) == Q
    assert pl.is_schedulable_after_node_change(p, n_old, n_region) == Q
    assert pl.is_schedulable_after_node_change(p, n_region, n_region) == S
    only_anti = pod("p", required=[(ANTI, term(sel(), ZONE))])
    assert pl.is_schedulable_after_node_change(only_anti, None, n_old) == Q
    assert pl.is_schedulable_after_node_change(only_anti, node("n", zone="a"), node("n")) == Q
    assert pl.is_schedulable_after_node_change(only_anti, n_old, n_region) == S


def test_match_label_keys_are_merged_on_create() -> None:
    t = term(sel(key="app", values=["web"]), HOST)
    t.match_label_keys.append("tenant")
    t.mismatch_label_keys.append("track")
    t.match_label_keys.append("missing")
    p = pod("p", labels={"app": "web", "tenant": "t1", "track": "canary"}, required=[(ANTI, t)])
    apply_match_label_keys(p)
    got = p.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0].label_selector
    assert [(r.key, r.operator, list(r.values)) for r in got.match_expressions] == [
        ("app", "In", ["web"]),
        ("tenant", "In", ["t1"]),
        ("track", "NotIn", ["canary"]),
    ]
    # Now the anti-affinity only keeps apart pods of the same tenant and another track.
    nodes = [node("n1", **{HOST: "n1"}), node("n2", **{HOST: "n2"})]
    existing = [pod("a", "n1", {"app": "web", "tenant": "t1", "track": "stable"}), pod("b", "n2", {"app": "web", "tenant": "t2", "track": "stable"})]
    assert codes(run_filter(p, existing, nodes)) == [(NO, [R_ANTI]), (OK, [])]
    # a nil selector stays nil (it matches nothing)
    t2 = term(None, HOST)
    t2.match_label_keys.append("tenant")
    q = pod("q", labels={"tenant": "t1"}, required=[(AFF, t2)])
    apply_match_label_keys(q)
    assert not q.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution[0].HasField("label_selector")


def test_counts_follow_the_cluster_across_cycles() -> None:
    """The per-node memo: one plugin instance over cycles, pods added to and removed from a node
    in between (its generation changes, the snapshot is refreshed as the cache does), gives the
    counts of a fresh scan every time."""
    nodes = [node("n1", zone="a"), node("n2", zone="b")]
    snap = Snapshot.from_objects([], nodes)
    pl = plugin(snap)
    n1, n2 = snap.list()
    anti = [(ANTI, term(sel(key="app", values=["db"]), ZONE))]
    pref = [(AFF, 3, term(sel(key="app", values=["db"]), ZONE))]

    def cycle(p: pb.Pod) -> tuple[list[bool], list[int] | None]:
        state, pi = new_state(), PodInfo(p)
        _, s = pl.pre_filter(state, pi, snap.list())
        passed = [True, True] if s is not None else [pl.filter(state, pi, n) is None for n in (n1, n2)]
        if s is None:
            assert pl.filter_nodes(state, pi, snap, np.arange(2)).tolist() == passed
        st = pl.pre_score(state, pi, snap.list())
        scores = None if st is not None else [pl.score(state, pi, n)[0] for n in (n1, n2)]
        return passed, scores

    assert cycle(pod("p1", labels={"app": "web"}, required=anti, preferred=pref)) == ([True, True], None)
    db = n1.add_pod(pod("db", "n1", {"app": "db"}))
    snap.refresh(0)  # as the cache does after changing a NodeInfo in place
    assert cycle(pod("p2", labels={"app": "web"}, required=anti, preferred=pref)) == ([False, True], [3, 0])
    n1.remove_pod(db)
    n2.add_pod(pod("db2", "n2", {"app": "db"}))
    snap.refresh(0)
    snap.refresh(1)
    assert cycle(pod("p3", labels={"app": "web"}, required=anti, preferred=pref)) == ([True, False], [0, 3])


def test_existing_anti_affinity_and_its_refusals_follow_the_cluster_across_cycles() -> None:
    """The incremental sums of existing pods' anti-affinity: pods with such terms added and removed
    between cycles of one plugin instance give what a fresh scan gives, and a refusal (a
    namespaceSelector that may select the pod) ends with the pod that caused it."""
    nodes = [node("n1", zone="a"), node("n2", zone="b")]
    snap = Snapshot.from_objects([], nodes)
    pl = plugin(snap)
    n1, n2 = snap.list()
    incoming = {"app": "web"}

    def cycle() -> list[bool] | Status:
        state, pi = new_state(), PodInfo(pod("p", labels=incoming))
        _, s = pl.pre_filter(state, pi, snap.list())
        if s is not None:
            return s if s.code != Code.SKIP else [True, True]
        passed = [pl.filter(state, pi, n) is None for n in (n1, n2)]
        assert pl.filter_nodes(state, pi, snap, np.arange(2)).tolist() == passed
        return passed

    def changed(*indices: int) -> None:
        for i in indices:
            snap.refresh(i)  # as the cache does after changing a NodeInfo in place

    assert cycle() == [True, True]
    guard = n1.add_pod(pod("guard", "n1", required=[(ANTI, term(sel(key="app", values=["web"]), ZONE))]))
    changed(0)
    assert cycle() == [False, True]
    shy = pod("shy", "n2", ns="other", required=[(ANTI, term(sel(key="app", values=["web"]), ZONE, ns_selector=sel(key="team", values=["a"])))])  # fmt: skip
    shy_info = n2.add_pod(shy)
    changed(1)
    refused = cycle()
    assert isinstance(refused, Status) and refused.code == NEVER and "other/shy" in refused.reasons[0]
    n2.remove_pod(shy_info)
    changed(1)
    assert cycle() == [False, True]
    n1.remove_pod(guard)
    n2.add_pod(pod("guard2", "n2", required=[(ANTI, term(sel(key="app", values=["web"]), ZONE))]))
    changed(0, 1)
    assert cycle() == [True, False]
    # No pod with required anti-affinity left: the cycles skip the sums (the snapshot's list is
    # empty); the nodes changed meanwhile are caught up once such a pod appears again.
    n2.remove_pod(n2.pods_with_required_anti_affinity[0])
    changed(1)
    assert cycle() == [True, True]
    n2.add_pod(pod("filler", "n2", {"app": "db"}))
    changed(1)
    assert cycle() == [True, True]
    n1.add_pod(pod("guard3", "n1", required=[(ANTI, term(sel(key="app", values=["web"]), ZONE))]))
    changed(0)
    assert cycle() == [False, True]
