"""The drain planner on a synthetic cluster: actions, budgets, replacements in queue order."""

from __future__ import annotations

from typing import Any

import pytest

from kse.drain.drainer import DrainOptions
from kse.objects.intstr import set_int_or_string
from kse.objects.timeutil import to_epoch
from proto import kse_pb2 as pb
from scheduler import drainplan, drainreport
from scheduler.drainplan import ClusterState, DrainPlanError, plan_drain

PENDING = (
    "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: 0/3 nodes are "
    "available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.."
)  # what the scheduler posts, its PostFilter (DefaultPreemption) included
NOW = "2026-01-01T00:00:00Z"


def node(name: str, cpu: str = "4") -> pb.Node:
    n = pb.Node(metadata=pb.ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}))
    n.status.allocatable.update({"cpu": cpu, "memory": "8Gi", "pods": "10"})
    return n


def pod(
    name: str,
    node_name: str,
    cpu: str = "1",
    *,
    owner: tuple[str, str] | None = ("ReplicaSet", "web"),
    labels: dict[str, str] | None = None,
    priority: int | None = None,
) -> pb.Pod:
    p = pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace="default", uid=f"uid-{name}", creation_timestamp=NOW)
    )
    p.metadata.labels.update(labels if labels is not None else {"app": owner[1] if owner else name})
    p.spec.containers.add(name="c", image="pause").resources.requests.update({"cpu": cpu})
    p.spec.node_name = node_name
    if priority is not None:
        p.spec.priority = priority
    p.status.phase = "Running"
    p.status.conditions.add(type="Ready", status="True")
    if owner is not None:
        kind, oname = owner
        p.metadata.owner_references.add(
            api_version="apps/v1", kind=kind, name=oname, uid=f"uid-{oname}", controller=True
        )
    return p


def pdb(name: str, app: str, allowed: int) -> pb.PodDisruptionBudget:
    b = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name=name, namespace="default"))
    b.spec.selector.match_labels["app"] = app
    set_int_or_string(b.spec.min_available, 1)
    b.status.disruptions_allowed = allowed
    b.status.current_healthy = 4
    b.status.desired_healthy = 4 - allowed
    return b


def by_pod(plan: drainplan.DrainPlan) -> dict[str, drainplan.PodPlan]:
    return {p.pod.split("/", 1)[1]: p for p in plan.pods}


@pytest.fixture
def cluster() -> ClusterState:
    # n1 is drained. n2 has 2 of 4 CPUs taken by a bare pod; n3 is empty.
    return ClusterState(
        nodes=[node("n1", "8"), node("n2"), node("n3")],
        pods=[
            pod("big", "n1", "3", owner=("ReplicaSet", "big")),
            pod("web-a", "n1"),
            pod("web-b", "n1"),
            pod("web-c", "n1"),
            pod("web-d", "n1"),
            pod("other", "n2", "2", owner=None),
        ],
        pdbs=[pdb("web", "web", 1)],
    )


def test_budget_rounds_and_replacements_in_queue_order(cluster: ClusterState) -> None:
    plan = plan_drain(cluster, ["n1"])
    p = by_pod(plan)
    assert [x.action for x in plan.pods] == ["evict"] * 5
    # big and web-a go at once (the budget allows one); the others wait for replacements.
    assert p["big"].pdb is None and p["big"].blocked_by is None
    assert (p["web-a"].pdb, p["web-a"].disruptions_allowed, p["web-a"].blocked_by) == ("default/web", 1, None)
    assert p["web-b"].blocked_by == "until 1 replacement is ready"
    assert p["web-c"].blocked_by == "until 2 replacements are ready"
    assert p["web-d"].blocked_by == "until 3 replacements are ready"
    # The 3-CPU replacement fits only n3; web-a's then prefers the emptier n2 (least allocated).
    assert p["big"].replacement == drainplan.Replacement("n3")
    assert p["web-a"].replacement is not None and p["web-a"].replacement.node == "n2"
    # One CPU is left on each of n2 and n3: web-b and web-c take them; web-d's stays Pending.
    placed = {p["web-b"].replacement.node, p["web-c"].replacement.node}  # type: ignore[union-attr]
    assert placed == {"n2", "n3"}
    assert p["web-d"].replacement == drainplan.Replacement(None, PENDING)
    s = plan.summary()
    assert (s["replacementsScheduled"], s["replacementsPending"], s["completes"]) == (4, 1, True)


def test_higher_priority_replacement_is_placed_first(cluster: ClusterState) -> None:
    cluster.pods = [
        pod("a-low", "n1", "2", owner=("ReplicaSet", "low")),
        pod("b-high", "n1", "2", owner=("ReplicaSet", "high"), priority=1000),
        pod("other", "n2", "2", owner=None),
        pod("filler", "n3", "2", owner=None),
    ]
    cluster.pdbs = []
    cluster.pods[3] = pod("filler", "n3", "4", owner=None)  # n3 full: room for one 2-CPU pod, on n2
    p = by_pod(plan_drain(cluster, ["n1"]))
    assert p["b-high"].replacement == drainplan.Replacement("n2")  # queued first, though listed second
    assert p["a-low"].replacement is not None and p["a-low"].replacement.node is None


def test_zero_budget_without_replacement_blocks_indefinitely(cluster: ClusterState) -> None:
    cluster.pods = [pod("solo", "n1", labels={"app": "solo"}, owner=("ReplicaSet", "solo"))]
    cluster.pdbs = [pdb("solo", "solo", 0)]
    plan = plan_drain(cluster, ["n1"])
    (only,) = plan.pods
    assert (only.action, only.disruptions_allowed, only.blocked_by) == ("evict", 0, "indefinitely")
    assert plan.summary()["completes"] is False
    assert plan.to_json()["pods"][0]["blockedBy"] == "indefinitely"


def test_kubectl_filters_decide_the_actions(cluster: ClusterState) -> None:
    ds = pb.DaemonSet(metadata=pb.ObjectMeta(name="agent", namespace="default"))
    cluster.daemon_sets = [ds]
    cluster.pods = [
        pod("agent-x", "n1", owner=("DaemonSet", "agent")),
        pod("bare", "n1", owner=None),
        pod("web-a", "n1"),
        pod("later", "n2"),
    ]
    cluster.pdbs = []
    p = by_pod(plan_drain(cluster, ["n1", "n2"]))
    # Without --ignore-daemonsets and --force kubectl refuses n1 altogether, and stops there.
    assert p["agent-x"].action == "blocked"
    assert p["agent-x"].reason == "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
    assert p["bare"].reason == "cannot delete Pods that declare no controller (use --force to override)"
    assert p["web-a"].action == "blocked" and p["web-a"].reason.startswith("node n1 is not drained: [cannot")
    assert (p["later"].action, p["later"].reason) == ("blocked", "the drain stops at node n1")
    opts = DrainOptions(ignore_daemonsets=True, force=True)
    p = by_pod(plan_drain(cluster, ["n1", "n2"], opts))
    assert (p["agent-x"].action, p["agent-x"].reason) == ("skip", "ignoring DaemonSet-managed Pods")
    assert (p["bare"].action, p["bare"].replacement) == ("evict", None)  # nothing recreates it
    # n2 is drained too: web-a's replacement has only n3.
    assert p["web-a"].replacement == drainplan.Replacement("n3")
    assert p["later"].replacement == drainplan.Replacement("n3")
    assert (
        by_pod(
            plan_drain(
                cluster, ["n1"], DrainOptions(disable_eviction=True, force=True, ignore_daemonsets=True)
            )
        )["web-a"].action
        == "delete"
    )


def test_bad_input_names_it(cluster: ClusterState) -> None:
    with pytest.raises(DrainPlanError, match='nodes "nope" not found'):
        plan_drain(cluster, ["nope"])
    with pytest.raises(DrainPlanError, match="--pod-selector"):
        plan_drain(cluster, ["n1"], DrainOptions(pod_selector="app in (a"))
    with pytest.raises(DrainPlanError, match="no node"):
        plan_drain(cluster, [])


def test_table_and_json(cluster: ClusterState) -> None:
    plan = plan_drain(cluster, ["n1"])
    doc: dict[str, Any] = plan.to_json()
    assert doc["nodes"] == ["n1"] and doc["kind"] == "DrainPlan"
    row = doc["pods"][4]
    assert set(row) >= {"pod", "node", "action", "pdb", "blockedBy", "replacement"}
    assert row["replacement"]["node"] is None and row["replacement"]["message"].startswith("0/3 nodes")
    text = drainplan.format_table(plan)
    assert text.splitlines()[1].split()[:3] == ["NODE", "POD", "ACTION"]
    assert "Pending: 0/3 nodes are available" in text
    assert "the drain completes" in text


def test_report_compares_plan_with_pods(cluster: ClusterState) -> None:
    doc = plan_drain(cluster, ["n1"]).to_json()
    after = [p for p in cluster.pods if p.spec.node_name != "n1"]
    new_time = "2026-01-01T00:00:05Z"
    for name, node_name in (
        ("big-x", "n3"),
        ("web-x", "n2"),
        ("web-y", "n2"),
        ("web-z", "n3"),
        ("web-w", ""),
    ):
        owner = ("ReplicaSet", "big") if name.startswith("big") else ("ReplicaSet", "web")
        rep = pod(name, node_name, owner=owner)
        rep.metadata.creation_timestamp = new_time
        after.append(rep)
    report = drainreport.compare(doc, after, since=to_epoch(NOW))
    assert report.mismatches == 0, drainreport.format_table(report)
    after[-2].spec.node_name = "n2"  # web-z landed elsewhere than planned
    report = drainreport.compare(doc, after, since=to_epoch(NOW))
    assert report.mismatches == 1
    web = next(c for c in report.replacements if c.controller == "default/ReplicaSet/web")
    assert (web.planned, web.actual, web.match) == (["n2", "n2", "n3", None], ["n2", "n2", "n2", None], False)
    with pytest.raises(drainreport.ReportError):
        drainreport.compare({"kind": "Other"}, after)


def test_pods_already_pending_queue_ahead_of_replacements(cluster: ClusterState) -> None:
    waiting = pod("waiting", "", "2", owner=None)
    waiting.status.phase = "Pending"
    cluster.pods = [
        pod("web-a", "n1", "2"),
        pod("other", "n2", "2", owner=None),  # n2: 2 CPUs free; n3: 4 free
        pod("filler", "n3", "2", owner=None),  # n3: 2 free: room for one 2-CPU pod on each
        waiting,
    ]
    cluster.pdbs = []
    (web,) = plan_drain(cluster, ["n1"]).pods
    assert web.replacement is not None and web.replacement.node in ("n2", "n3")
    cluster.pods[2] = pod("filler", "n3", "4", owner=None)  # n3 full: one slot, n2's
    (web,) = plan_drain(cluster, ["n1"]).pods
    assert web.replacement == drainplan.Replacement(None, PENDING)  # the older pending pod took n2 first


def test_a_replacement_that_fits_nowhere_preempts_as_the_scheduler_would(cluster: ClusterState) -> None:
    cluster.pods = [
        pod("vip", "n1", "2", owner=("ReplicaSet", "vip"), priority=1000),
        pod("low", "n2", "4", owner=None, priority=0),
        pod("high", "n3", "4", owner=None, priority=2000),
    ]
    cluster.pdbs = []
    (vip,) = plan_drain(cluster, ["n1"]).pods
    assert vip.replacement == drainplan.Replacement("n2", "", preempts=["default/low"])
    assert vip.to_json()["replacement"] == {"node": "n2", "message": "", "preempts": ["default/low"]}
