"""API Priority and Fairness: classification, seats, queues, fairness, refusals (pure asyncio)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from apiserver_mock.errors import TooManyRequests
from apiserver_mock.flowcontrol import FlowControl, FlowControlConfig
from apiserver_mock.flowcontrol.queueset import QueueSet, Rejected
from apiserver_mock.flowcontrol.schemas import (
    GLOBAL_DEFAULT,
    LEADER_ELECTION,
    NODE_HIGH,
    SYSTEM,
    WORKLOAD_HIGH,
    PriorityLevel,
    classify,
    nominal_limits,
)
from certs.identity import Identity
from proto import kse_pb2 as pb

SCHEDULER = Identity("system:kube-scheduler")
CONTROLLERS = Identity("system:kube-controller-manager")
NODE = Identity("system:node:n1", ("system:nodes",))
NODESIM = Identity("kse:nodesim", ("kse:nodesims",))
WORKLOAD = Identity("kse:workload", ("kse:workloads",))
ADMIN = Identity("kse:admin", ("system:masters",))


@pytest.mark.parametrize(
    ("ident", "verb", "resource", "namespace", "schema", "level", "flow"),
    [
        (ADMIN, "create", "pods", "default", "exempt", None, ""),
        (
            SCHEDULER,
            "update",
            "leases",
            "kube-system",
            "system-leader-election",
            LEADER_ELECTION,
            "system-leader-election/system:kube-scheduler",
        ),
        (
            CONTROLLERS,
            "get",
            "leases",
            "kube-system",
            "system-leader-election",
            LEADER_ELECTION,
            "system-leader-election/system:kube-controller-manager",
        ),
        # A scheduler's lease *delete* or list is not leader election (upstream's verbs: get/create/update).
        (
            SCHEDULER,
            "list",
            "leases",
            "kube-system",
            "kube-scheduler",
            WORKLOAD_HIGH,
            "kube-scheduler/kube-system",
        ),
        (
            SCHEDULER,
            "create",
            "pods/binding",
            "team-a",
            "kube-scheduler",
            WORKLOAD_HIGH,
            "kube-scheduler/team-a",
        ),
        (
            CONTROLLERS,
            "update",
            "pods/status",
            "b",
            "kube-controller-manager",
            WORKLOAD_HIGH,
            "kube-controller-manager/b",
        ),
        (
            NODE,
            "update",
            "nodes/status",
            "",
            "system-node-high",
            NODE_HIGH,
            "system-node-high/system:node:n1",
        ),
        (
            NODESIM,
            "update",
            "leases",
            "kube-node-lease",
            "system-node-high",
            NODE_HIGH,
            "system-node-high/kse:nodesim",
        ),
        (NODE, "update", "pods/status", "default", "system-nodes", SYSTEM, "system-nodes/system:node:n1"),
        (
            WORKLOAD,
            "update",
            "leases",
            "default",
            "global-default",
            GLOBAL_DEFAULT,
            "global-default/kse:workload",
        ),
        (
            WORKLOAD,
            "create",
            "pods",
            "default",
            "global-default",
            GLOBAL_DEFAULT,
            "global-default/kse:workload",
        ),
    ],
)
def test_classification_follows_upstreams_flow_schemas(ident, verb, resource, namespace, schema, level, flow):
    c = classify(ident, verb, resource, namespace)
    assert (c.flow_schema, c.level, c.flow) == (schema, level, flow)


def test_nominal_limits_divide_the_servers_seats_by_shares():
    limits = nominal_limits(600)
    # ceil(600 * shares / 245), upstream's NominalCL for the bootstrap levels.
    assert limits == {
        "leader-election": 25,
        "node-high": 98,
        "system": 74,
        "workload-high": 98,
        "workload-low": 245,
        "global-default": 49,
        "catch-all": 13,
    }
    assert min(nominal_limits(1).values()) == 1


LEVEL = PriorityLevel("test", 1, queues=8, hand_size=2, queue_length_limit=3)


def _flows_on_distinct_queues(qs: QueueSet, n: int) -> list[str]:
    """n flow names whose hands share no queue (so each has queues of its own)."""
    chosen: list[str] = []
    used: set[int] = set()
    for i in itertools.count():
        flow = f"flow-{i}"
        hand = set(qs.hand(flow))
        if not hand & used:
            chosen.append(flow)
            used |= hand
            if len(chosen) == n:
                return chosen
    raise AssertionError("unreachable")


async def test_requests_run_at_once_until_the_seats_are_taken_then_queue_in_order():
    qs = QueueSet(LEVEL, limit=2, wait_limit=10)
    a = await qs.acquire("f")
    b = await qs.acquire("f")
    assert (qs.executing, qs.waiting) == (2, 0)
    started: list[str] = []

    async def later(name: str) -> tuple[int, int]:
        ticket = await qs.acquire("f")
        started.append(name)
        return ticket

    c = asyncio.create_task(later("c"))
    d = asyncio.create_task(later("d"))
    await asyncio.sleep(0)
    assert (qs.executing, qs.waiting, started) == (2, 2, [])
    qs.release(a)
    tc = await c
    assert started == ["c"] and qs.waiting == 1
    qs.release(b)
    td = await d
    assert started == ["c", "d"]
    qs.release(tc)
    qs.release(td)
    assert (qs.executing, qs.waiting) == (0, 0)
    assert qs.stats.dispatched == 4 and qs.stats.queued == 2


async def test_a_full_queue_refuses_and_a_long_wait_times_out():
    qs = QueueSet(LEVEL, limit=1, wait_limit=0.05)
    held = await qs.acquire("f")
    waiters = [
        asyncio.create_task(qs.acquire("f")) for _ in range(LEVEL.queue_length_limit * LEVEL.hand_size)
    ]
    await asyncio.sleep(0)
    assert qs.waiting == LEVEL.queue_length_limit * LEVEL.hand_size  # every queue of the hand is full
    with pytest.raises(Rejected) as full:
        await qs.acquire("f")
    assert full.value.reason == "queue-full"
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, Rejected) and r.reason == "time-out" for r in results)
    assert qs.waiting == 0 and qs.stats.rejected == {"queue-full": 1, "time-out": len(waiters)}
    qs.release(held)
    assert qs.executing == 0


async def test_a_waiter_whose_caller_leaves_gives_its_place_and_leaks_no_seat():
    qs = QueueSet(LEVEL, limit=1, wait_limit=10)
    held = await qs.acquire("f")
    gone = asyncio.create_task(qs.acquire("f"))
    stays = asyncio.create_task(qs.acquire("f"))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert qs.waiting == 1
    qs.release(held)
    ticket = await stays
    assert qs.executing == 1
    qs.release(ticket)
    assert (qs.executing, qs.waiting) == (0, 0)


async def test_a_waiter_cancelled_just_after_its_dispatch_hands_the_seat_on():
    one_queue = PriorityLevel("one", 1, queues=1, hand_size=1, queue_length_limit=10)
    qs = QueueSet(one_queue, limit=1, wait_limit=10)
    held = await qs.acquire("f")
    first = asyncio.create_task(qs.acquire("f"))
    second = asyncio.create_task(qs.acquire("f"))
    await asyncio.sleep(0)
    qs.release(held)  # dispatches `first` (its future is set, its task has not resumed yet)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    ticket = await asyncio.wait_for(second, 5)  # the seat `first` left went on to `second`
    qs.release(ticket)
    assert (qs.executing, qs.waiting) == (0, 0)


async def test_a_flood_on_one_flow_does_not_starve_another_flow():
    qs = QueueSet(
        PriorityLevel("t", 1, queues=16, hand_size=2, queue_length_limit=1000), limit=1, wait_limit=60
    )
    noisy, quiet = _flows_on_distinct_queues(qs, 2)
    held = await qs.acquire(noisy)
    order: list[str] = []

    async def one(flow: str) -> None:
        ticket = await qs.acquire(flow)
        order.append(flow)
        await asyncio.sleep(0)
        qs.release(ticket)

    tasks = [asyncio.create_task(one(noisy)) for _ in range(200)]
    await asyncio.sleep(0)
    tasks += [asyncio.create_task(one(quiet)) for _ in range(5)]
    await asyncio.sleep(0)
    qs.release(held)
    await asyncio.gather(*tasks)
    # Served round-robin over the backlogged queues: the quiet flow's 5 requests go out among the
    # first dispatches, not after the noisy flow's 200 (which FIFO service would do).
    last_quiet = max(i for i, f in enumerate(order) if f == quiet)
    assert last_quiet < 20, order[:30]


def _lease_update() -> pb.WriteRequest:
    lease = pb.Lease()
    lease.metadata.name, lease.metadata.namespace = "kube-scheduler", "kube-system"
    return pb.WriteRequest(object=pb.Object(lease=lease))


def _pod_create() -> pb.WriteRequest:
    pod = pb.Pod()
    pod.metadata.name, pod.metadata.namespace = "p", "default"
    return pb.WriteRequest(object=pb.Object(pod=pod))


async def test_a_workload_flood_leaves_the_lease_its_seats():
    gate = FlowControl(FlowControlConfig(max_requests_inflight=1, max_mutating_requests_inflight=1))
    level = gate.levels["global-default"]
    seats = [await gate.admit(WORKLOAD, "Create", _pod_create()) for _ in range(level.limit)]
    assert level.executing == level.limit
    # The workloads' level is full; the Lease update runs at once in its own level.
    lease_seat = await gate.admit(SCHEDULER, "Update", _lease_update())
    assert gate.levels["leader-election"].executing == 1
    gate.release(lease_seat)
    for seat in seats:
        gate.release(seat)
    assert all(q.executing == 0 for q in gate.levels.values())


async def test_without_priority_and_fairness_a_write_flood_refuses_the_lease_too():
    gate = FlowControl(
        FlowControlConfig(
            enable_priority_and_fairness=False, max_requests_inflight=5, max_mutating_requests_inflight=2
        )
    )
    seats = [await gate.admit(WORKLOAD, "Create", _pod_create()) for _ in range(2)]
    with pytest.raises(TooManyRequests) as refused:
        await gate.admit(SCHEDULER, "Update", _lease_update())
    assert refused.value.retry_after == 1 and "Too many requests" in str(refused.value)
    reads = await gate.admit(
        SCHEDULER, "Get", pb.GetRequest(resource="leases", namespace="kube-system", name="x")
    )
    assert await gate.admit(ADMIN, "Create", _pod_create()) is None  # system:masters is exempt
    for seat in [*seats, reads]:
        gate.release(seat)
    assert gate.inflight == {"readonly": 0, "mutating": 0}
    assert gate.rejected_inflight == {"readonly": 0, "mutating": 1}


async def test_a_large_list_takes_a_seat_per_hundred_objects():
    sizes = {"pods": 750, "nodes": 5000}
    gate = FlowControl(
        FlowControlConfig(max_requests_inflight=400, max_mutating_requests_inflight=200),
        list_size=sizes.__getitem__,
    )
    q = gate.levels["global-default"]
    seat = await gate.admit(WORKLOAD, "List", pb.ListRequest(resource="pods"))
    assert q.executing == 8  # ceil(750 / 100)
    gate.release(seat)
    seat = await gate.admit(WORKLOAD, "List", pb.ListRequest(resource="nodes"))
    assert q.executing == 10  # at most 10
    gate.release(seat)
    seat = await gate.admit(WORKLOAD, "List", pb.ListRequest(resource="pods", limit=50))
    assert q.executing == 1  # a page of 50 touches 50
    gate.release(seat)


def test_the_config_refuses_a_server_without_seats():
    with pytest.raises(ValueError, match="at least 1"):
        FlowControlConfig(max_requests_inflight=0, max_mutating_requests_inflight=0)
    FlowControlConfig(
        enable_priority_and_fairness=False, max_requests_inflight=0, max_mutating_requests_inflight=0
    )
