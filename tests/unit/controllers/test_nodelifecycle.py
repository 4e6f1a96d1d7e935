"""Node lifecycle decisions on upstream's cases (node_lifecycle_controller_test.go:
TestMonitorNodeHealthUpdateStatus, TestTaintsNodeByCondition, TestSwapUnreachableNotReadyTaints)."""

from __future__ import annotations

from controllers.nodelifecycle import (
    NEVER_REASON,
    UNKNOWN_MESSAGE,
    UNKNOWN_REASON,
    NodeLifecycleController,
    desired_taints,
    mark_unknown,
    reconcile_taints,
)
from proto import kse_pb2 as pb
from tests.unit.controllers.offline import offline_context

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
T0 = 1_800_000_000.0


def node(name: str = "n1", ready: str | None = "True", **conds: str) -> pb.Node:
    n = pb.Node(
        metadata=pb.ObjectMeta(name=name, resource_version="1", creation_timestamp="2027-01-15T08:00:00Z")
    )
    if ready is not None:
        n.status.conditions.add(type="Ready", status=ready, reason="KubeletReady")
    for ctype, status in conds.items():
        n.status.conditions.add(type=ctype, status=status)
    return n


def lease(name: str, renew: str, rv: str = "1") -> pb.Lease:
    return pb.Lease(
        metadata=pb.ObjectMeta(name=name, namespace="kube-node-lease", resource_version=rv),
        spec=pb.LeaseSpec(renew_time=renew),
    )


def test_ready_nodes_want_no_taints() -> None:
    assert desired_taints(node()) == set()


def test_not_ready_and_unknown_get_their_noschedule_and_noexecute_taints() -> None:
    assert desired_taints(node(ready="False")) == {(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")}
    assert desired_taints(node(ready="Unknown")) == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}


def test_pressure_conditions_and_unschedulable_taint_by_condition() -> None:
    n = node(MemoryPressure="True", DiskPressure="True", PIDPressure="False", NetworkUnavailable="True")
    n.spec.unschedulable = True
    assert desired_taints(n) == {
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/network-unavailable", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    }


def test_reconcile_swaps_unreachable_for_not_ready_and_keeps_foreign_taints() -> None:
    n = node(ready="False")
    n.spec.taints.add(key="dedicated", value="infra", effect="NoSchedule")
    n.spec.taints.add(key=UNREACHABLE, effect="NoExecute", time_added="2027-01-15T08:00:00Z")
    n.spec.taints.add(key=UNREACHABLE, effect="NoSchedule")
    out = reconcile_taints(n, T0)
    assert out is not None
    assert [(t.key, t.effect) for t in out] == [
        ("dedicated", "NoSchedule"),
        (NOT_READY, "NoExecute"),
        (NOT_READY, "NoSchedule"),
    ]
    assert all(t.time_added for t in out[1:])
    n2 = node(ready="False")
    n2.spec.taints.extend(out)
    assert reconcile_taints(n2, T0) is None  # in line: no write


def test_recovery_removes_the_managed_taints() -> None:
    n = node(ready="True")
    n.spec.taints.add(key=UNREACHABLE, effect="NoExecute")
    n.spec.taints.add(key=UNREACHABLE, effect="NoSchedule")
    assert reconcile_taints(n, T0) == []


def test_mark_unknown_as_try_update_node_health() -> None:
    n = node(ready="True", MemoryPressure="False")
    status = pb.NodeStatus()
    status.CopyFrom(n.status)
    assert mark_unknown(status, n.metadata.creation_timestamp, T0)
    by_type = {c.type: c for c in status.conditions}
    assert by_type["Ready"].status == "Unknown"
    assert (by_type["Ready"].reason, by_type["Ready"].message) == (UNKNOWN_REASON, UNKNOWN_MESSAGE)
    assert by_type["DiskPressure"].reason == NEVER_REASON  # never posted
    assert by_type["PIDPressure"].last_heartbeat_time == n.metadata.creation_timestamp
    assert not mark_unknown(status, n.metadata.creation_timestamp, T0 + 1)  # already Unknown


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def controller(clock: Clock, grace: float = 40.0) -> NodeLifecycleController:
    ctx = offline_context(node_monitor_grace_period_s=grace)
    return NodeLifecycleController(ctx, clock=clock, wall=lambda: T0)


def test_a_node_goes_unknown_only_once_its_lease_is_stale_for_the_grace_period() -> None:
    clock = Clock()
    c = controller(clock)
    n = node()
    c.leases.replace([lease("n1", "2027-01-15T08:00:00.000001Z")], "1")
    assert c.try_update_node_health(n, clock())[0] is None  # first sight counts as a probe
    clock.t += 30
    c.leases.replace([lease("n1", "2027-01-15T08:00:10.000001Z", "2")], "2")  # renewed: probe again
    assert c.try_update_node_health(n, clock())[0] is None
    clock.t += 39
    assert c.try_update_node_health(n, clock())[0] is None  # 39 s since the last renewal
    clock.t += 2
    status, grace = c.try_update_node_health(n, clock())
    assert grace == 40.0 and status is not None
    assert [c.status for c in status.conditions if c.type == "Ready"] == ["Unknown"]


def test_a_stale_lease_seen_for_the_first_time_gets_the_whole_grace_period() -> None:
    """The controller trusts only its own clock: an old renewTime at start-up is not yet stale."""
    clock = Clock()
    c = controller(clock)
    c.leases.replace([lease("n1", "2020-01-01T00:00:00.000000Z")], "1")
    assert c.try_update_node_health(node(), clock())[0] is None
    clock.t += 41
    assert c.try_update_node_health(node(), clock())[0] is not None


def test_a_status_change_counts_as_a_heartbeat() -> None:
    clock = Clock()
    c = controller(clock)
    assert c.try_update_node_health(node(), clock())[0] is None
    clock.t += 35
    changed = node()
    changed.status.conditions[0].last_heartbeat_time = "2027-01-15T08:01:00Z"
    changed.metadata.resource_version = "2"  # every stored change has a new resourceVersion
    assert c.try_update_node_health(changed, clock())[0] is None
    clock.t += 35
    assert c.try_update_node_health(changed, clock())[0] is None
    clock.t += 6
    assert c.try_update_node_health(changed, clock())[0] is not None


def test_the_same_resource_version_is_not_read_again_as_a_change() -> None:
    clock = Clock()
    c = controller(clock)
    assert c.try_update_node_health(node(), clock())[0] is None
    clock.t += 41
    assert c.try_update_node_health(node(), clock())[0] is not None
