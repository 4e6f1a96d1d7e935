"""The scheduling queue (scheduler/queue), checked against upstream behaviour.

Most tests re-express cases of kube-scheduler's pkg/scheduler/backend/queue/*_test.go (named in
each docstring) with queueing hints on, as upstream runs by default. Time is a fake clock; no test
sleeps. The last part is a property-based test driving random operations.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from proto import kse_pb2 as pb
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    EventResource,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    Status,
)
from scheduler.queue.backoff import BackoffQueue
from scheduler.queue.heap import Heap
from scheduler.queue.pod_events import pod_scheduling_properties_change
from scheduler.queue.scheduling_queue import (
    BACKOFF_COMPLETE,
    DEFAULT_POD_INITIAL_BACKOFF,
    DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION,
    EVENT_ASSIGNED_POD_ADD,
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_UNSCHEDULED_POD_ADD,
    EVENT_UNSCHEDULED_POD_UPDATE,
    PriorityQueue,
    QueueError,
    _Strategy,
    event_label,
)

# ---------------------------------------------------------------- fixtures and helpers

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
# Upstream's tests use PV/PVC/CSINode events as "other" events; kse has no storage resources, so
# distinct Node actions play those parts.
PV_ADD = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
PV_UPDATE = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ANNOTATION)
PVC_ADD = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT)
CSI_NODE_UPDATE = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_CONDITION)

LOW, MID, HIGH = 0, 100, 1000
MEDIUM = (LOW + HIGH) // 2


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def step(self, seconds: float) -> None:
        self.t += seconds


def make_pod(
    name: str,
    ns: str = "ns1",
    *,
    uid: str | None = None,
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    gates: Iterable[str] = (),
    node: str = "",
    nominated: str = "",
    requests: dict[str, str] | None = None,
    affinity_exists: tuple[str, str] | None = None,
    spread: bool = False,
) -> pb.Pod:
    pod = pb.Pod()
    pod.metadata.name = name
    pod.metadata.namespace = ns
    pod.metadata.uid = uid if uid is not None else f"{name}{ns}"
    if priority is not None:
        pod.spec.priority = priority
    pod.metadata.labels.update(labels or {})
    pod.metadata.annotations.update(annotations or {})
    for g in gates:
        pod.spec.scheduling_gates.add(name=g)
    pod.spec.node_name = node
    pod.status.nominated_node_name = nominated
    c = pod.spec.containers.add(name="c")
    c.resources.requests.update(requests or {})
    if affinity_exists:
        key, topology = affinity_exists
        term = pod.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution.add()
        term.label_selector.match_expressions.add(key=key, operator="Exists")
        term.topology_key = topology
    if spread:
        pod.spec.topology_spread_constraints.add(
            max_skew=1, topology_key="node", when_unsatisfiable="DoNotSchedule"
        )
    return pod


def copy_pod(pod: pb.Pod) -> pb.Pod:
    new = pb.Pod()
    new.CopyFrom(pod)
    return new


def priority_of(pod: pb.Pod) -> int:
    return pod.spec.priority if pod.spec.HasField("priority") else 0


def priority_sort(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """Upstream PrioritySort.Less: higher priority first, then older timestamp."""
    pa, pb_ = priority_of(a.pod), priority_of(b.pod)
    return pa > pb_ or (pa == pb_ and a.timestamp < b.timestamp)


def queue_hint(pod: pb.Pod, old: Any, new: Any) -> QueueingHint:
    return QueueingHint.QUEUE


def skip_hint(pod: pb.Pod, old: Any, new: Any) -> QueueingHint:
    return QueueingHint.SKIP


def qpi(
    pod: pb.Pod, *plugins: str, attempts: int = 0, timestamp: float = 0.0, pending: Iterable[str] = ()
) -> QueuedPodInfo:
    """A QueuedPodInfo made by hand, as upstream's newQueuedPodInfoForLookup (+attemptQueuedPodInfo)."""
    return QueuedPodInfo(
        pod_info=PodInfo(pod),
        timestamp=timestamp,
        attempts=attempts,
        unschedulable_plugins=set(plugins),
        pending_plugins=set(pending),
    )


def new_queue(clock: FakeClock | None = None, **kwargs: Any) -> PriorityQueue:
    return PriorityQueue(priority_sort, clock=clock or FakeClock(), **kwargs)


def pop(q: PriorityQueue, pod: pb.Pod | None = None) -> QueuedPodInfo:
    p = q.try_pop()
    assert p is not None, "queue unexpectedly empty"
    if pod is not None:
        assert p.pod.metadata.uid == pod.metadata.uid, f"popped {p.key}, want {pod.metadata.name}"
    return p


def where(q: PriorityQueue, pod: pb.Pod) -> str | None:
    places = q.where(f"{pod.metadata.namespace}/{pod.metadata.name}")
    assert len(places) <= 1, f"pod in several places: {places}"
    return places[0] if places else None


def names(pods: Iterable[pb.Pod]) -> list[str]:
    return sorted(p.metadata.name for p in pods)


def in_flight_log(q: PriorityQueue) -> list[str | ClusterEvent]:
    return [e.metadata.uid if isinstance(e, pb.Pod) else e for e in q.in_flight_events()]


def gates_pre_enqueue(pod_info: PodInfo) -> Status | None:
    """The SchedulingGates plugin: hold pods that still have scheduling gates."""
    if pod_info.pod.spec.scheduling_gates:
        return Status.unschedulable("waiting for scheduling gates", resolvable=False)
    return None


def allowlist_pre_enqueue(*allowed: str) -> Callable[[PodInfo], Status | None]:
    """Upstream's test preEnqueuePlugin: admit pods carrying one of the allowed label keys."""

    def fn(pod_info: PodInfo) -> Status | None:
        if any(label in allowed for label in pod_info.pod.metadata.labels):
            return None
        return Status.unschedulable("pod name not in allowlists", resolvable=False)

    return fn


high_pod = make_pod("hpp", uid="hppns1", priority=HIGH)
med_pod = make_pod(
    "mpp", "ns2", uid="mppns2", priority=MEDIUM, annotations={"annot2": "val2"}, nominated="node1"
)
unsched_pod = make_pod("up", uid="upns1", priority=LOW, annotations={"annot2": "val2"}, nominated="node1")


# ---------------------------------------------------------------- heap


def test_heap_orders_updates_and_deletes() -> None:
    h: Heap[tuple[str, int]] = Heap(lambda x: x[0], lambda a, b: a[1] < b[1])
    for k, v in [("a", 5), ("b", 3), ("c", 9), ("d", 1)]:
        h.add_or_update((k, v))
    h.add_or_update(("c", 0))  # update moves it to the front
    assert h.delete_by_key("b") == ("b", 3)
    assert h.delete_by_key("b") is None
    assert len(h) == 3 and "a" in h and "b" not in h
    assert [h.pop(), h.pop(), h.pop(), h.pop()] == [("c", 0), ("d", 1), ("a", 5), None]


# ---------------------------------------------------------------- add / pop / order


def test_add_pops_in_priority_order() -> None:
    """TestPriorityQueue_Add and _AddWithReversePriorityLessFunc (nominator parts left out)."""
    q = new_queue()
    for p in (med_pod, unsched_pod, high_pod):
        q.add(p)
    assert [pop(q).pod.metadata.name for _ in range(3)] == ["hpp", "mpp", "up"]
    assert q.try_pop() is None


def test_pop_from_backoff_q_when_active_q_is_empty() -> None:
    """TestPriorityQueue_Pop: with pop-from-backoff, an empty activeQ yields podBackoffQ's head,
    never podErrorBackoffQ's; without it, only activeQ pods are popped."""
    high2 = make_pod("hpp2", uid="hpp2ns1", priority=HIGH)
    for enabled, want in ((True, ["mpp", "hpp"]), (False, ["mpp"])):
        q = new_queue(pop_from_backoff=enabled)
        q.add(med_pod)
        q._backoff.add(q._new_queued_pod_info(high_pod, "plugin"))
        q._backoff.add(q._new_queued_pod_info(high2))  # error backoff
        q._unschedulable[unsched_pod.metadata.namespace + "/up"] = q._new_queued_pod_info(
            unsched_pod, "plugin"
        )
        got = []
        while (p := q.try_pop()) is not None:
            got.append(p.pod.metadata.name)
        assert got == want


async def test_pop_waits_for_a_pod_and_close_releases_waiters() -> None:
    """TestSchedulingQueue_Close: a waiting Pop returns None once the queue is closed."""
    q = new_queue()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add(high_pod)
    got = await asyncio.wait_for(waiter, timeout=5)
    assert got is not None and got.pod.metadata.name == "hpp"

    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    q.close()
    assert await asyncio.wait_for(waiter, timeout=5) is None


def test_close_clears_in_flight_state() -> None:
    """active_queue_test TestClose: close() drops in-flight pods and events."""
    q = new_queue(queueing_hints={"p": [(NODE_ADD, queue_hint), (CSI_NODE_UPDATE, queue_hint)]})
    q.add(make_pod("p1", "foo"))
    q.add(make_pod("p2", "bar"))
    pop(q), pop(q)
    q.move_all_to_active_or_backoff(NODE_ADD)
    q.move_all_to_active_or_backoff(CSI_NODE_UPDATE)
    assert len(q.in_flight_events()) == 4 and len(q.in_flight_pods()) == 2
    q.close()
    assert q.in_flight_events() == [] and q.in_flight_pods() == []


def test_get_pod() -> None:
    """TestPriorityQueue_GetPod."""
    q = new_queue()
    p1, p2, p3 = (make_pod(f"pod{i}", "default") for i in (1, 2, 3))
    q.add(p1)
    q._backoff.add(qpi(p2))
    q._unschedulable["default/pod3"] = qpi(p3)
    for pod in (p1, p2, p3):
        got = q.get_pod(pod.metadata.name, "default")
        assert got is not None and got.pod == pod
    assert q.get_pod("pod4", "default") is None


# ---------------------------------------------------------------- in-flight events


@dataclass
class InFlightCase:
    name: str
    hints: dict[str, list[tuple[ClusterEvent, Any]]]
    initial: list[pb.Pod]
    actions: list[tuple[Any, ...]]
    want_in_flight: list[pb.Pod] = field(default_factory=list)
    want_log: list[pb.Pod | ClusterEvent] = field(default_factory=list)
    want_active: list[str] | None = None
    want_backoff: list[str] | None = None
    want_unschedulable: list[str] = field(default_factory=list)


pod1 = make_pod("targetpod", "", uid="pod1")
pod2 = make_pod("targetpod2", "", uid="pod2")
pod3 = make_pod("targetpod3", "", uid="pod3")
_popped: dict[str, QueuedPodInfo] = {}


def _foo1(*events: ClusterEvent, hint: Any = queue_hint) -> dict[str, list[tuple[ClusterEvent, Any]]]:
    return {"fooPlugin1": [(e, hint) for e in events]}


def _inject_duplicate(q: PriorityQueue, clock: FakeClock) -> None:
    # Simulate a bug: pod1 put back into activeQ while it is being scheduled.
    q._active.heap.add_or_update(qpi(pod1, timestamp=clock()))
    clock.step(1)


def _requeue_popped(
    name: str, unsched: Iterable[str] = (), pending: Iterable[str] = ()
) -> Callable[..., None]:
    def fn(q: PriorityQueue, clock: FakeClock) -> None:
        p = _popped[name]
        p.unschedulable_plugins, p.pending_plugins = set(unsched), set(pending)
        q.add_unschedulable_if_not_present(p, q.scheduling_cycle)

    return fn


def _pop_and_keep(pod: pb.Pod) -> Callable[..., None]:
    def fn(q: PriorityQueue, clock: FakeClock) -> None:
        _popped[pod.metadata.name] = pop(q, pod)

    return fn


def _pop_check_cleared(q: PriorityQueue, clock: FakeClock) -> None:
    p = pop(q, pod1)
    assert not p.unschedulable_plugins and not p.pending_plugins
    _popped["targetpod"] = p


IN_FLIGHT_CASES = [
    InFlightCase(
        "Pod and interested events are registered in inFlightPods/inFlightEvents",
        _foo1(PV_ADD),
        [pod1],
        [("event", PVC_ADD), ("pop", pod1), ("event", PV_ADD), ("event", PV_UPDATE)],
        want_in_flight=[pod1],
        want_log=[pod1, PV_ADD],
    ),
    InFlightCase(
        "Pod, registered in inFlightPods, is enqueued back to activeQ",
        _foo1(PV_ADD, NODE_ADD, PVC_ADD),
        [pod1, pod2],
        [
            ("event", PVC_ADD),
            ("pop", pod1),
            ("event", PV_ADD),
            ("pop", pod2),
            ("event", NODE_ADD),
            ("enqueue", pod1, ()),
        ],
        want_backoff=["targetpod"],
        want_in_flight=[pod2],
        want_log=[pod2, NODE_ADD],
    ),
    InFlightCase(
        "All Pods registered in inFlightPods are enqueued back to activeQ",
        _foo1(PV_ADD, NODE_ADD, PVC_ADD, CSI_NODE_UPDATE),
        [pod1, pod2],
        [
            ("event", PVC_ADD),
            ("pop", pod1),
            ("event", PV_ADD),
            ("pop", pod2),
            ("event", NODE_ADD),
            ("enqueue", pod1, ()),
            ("event", CSI_NODE_UPDATE),
            ("enqueue", pod2, ()),
        ],
        want_backoff=["targetpod", "targetpod2"],
    ),
    InFlightCase(
        "One intermediate Pod registered in inFlightPods is enqueued back to activeQ",
        _foo1(PV_ADD, NODE_ADD, EVENT_ASSIGNED_POD_ADD),
        [pod1, pod2, pod3],
        [
            ("event", PVC_ADD),
            ("pop", pod1),
            ("event", PV_ADD),
            ("pop", pod2),
            ("event", NODE_ADD),
            ("pop", pod3),
            ("event", EVENT_ASSIGNED_POD_ADD),
            ("enqueue", pod2, ()),
        ],
        want_backoff=["targetpod2"],
        want_in_flight=[pod1, pod3],
        want_log=[pod1, PV_ADD, NODE_ADD, pod3, EVENT_ASSIGNED_POD_ADD],
    ),
    InFlightCase(
        "events before popping Pod are ignored when Pod is enqueued back to queue",
        _foo1(EVENT_ASSIGNED_POD_ADD, hint=skip_hint),
        [pod1],
        [
            ("event", EVENT_UNSCHEDULABLE_TIMEOUT),
            ("pop", pod1),
            ("event", EVENT_ASSIGNED_POD_ADD),
            ("enqueue", pod1, ("fooPlugin1",)),
        ],
        want_unschedulable=["targetpod"],
    ),
    InFlightCase(
        "pod is enqueued to backoff if no failed plugin",
        _foo1(EVENT_ASSIGNED_POD_ADD),
        [pod1],
        [("pop", pod1), ("event", EVENT_ASSIGNED_POD_ADD), ("enqueue", pod1, ())],
        want_backoff=["targetpod"],
    ),
    InFlightCase(
        "pod is enqueued to unschedulable pod pool if no events that can make the pod schedulable",
        _foo1(EVENT_ASSIGNED_POD_ADD),
        [pod1],
        [("pop", pod1), ("event", NODE_ADD), ("enqueue", pod1, ("fooPlugin1",))],
        want_unschedulable=["targetpod"],
    ),
    InFlightCase(
        "pod is enqueued to unschedulable pod pool because the failed plugin has a hint fn "
        "but it returns Skip",
        _foo1(EVENT_ASSIGNED_POD_ADD, hint=skip_hint),
        [pod1],
        [("pop", pod1), ("event", EVENT_ASSIGNED_POD_ADD), ("enqueue", pod1, ("fooPlugin1",))],
        want_unschedulable=["targetpod"],
    ),
    InFlightCase(
        "pod is enqueued to activeQ because the Pending plugins has a hint fn and it returns Queue",
        {
            "fooPlugin3": [(EVENT_ASSIGNED_POD_ADD, skip_hint)],
            "fooPlugin2": [(EVENT_ASSIGNED_POD_ADD, queue_hint)],
            "fooPlugin1": [(EVENT_ASSIGNED_POD_ADD, queue_hint)],
        },
        [pod1],
        [
            ("pop", pod1),
            ("event", EVENT_ASSIGNED_POD_ADD),
            ("enqueue", pod1, ("fooPlugin2", "fooPlugin3"), ("fooPlugin1",)),
        ],
        want_active=["targetpod"],
    ),
    InFlightCase(
        "pod is enqueued to backoffQ because the failed plugin has a hint fn and it returns Queue",
        {
            "fooPlugin2": [(EVENT_ASSIGNED_POD_ADD, skip_hint)],
            "fooPlugin1": [(EVENT_ASSIGNED_POD_ADD, queue_hint)],
        },
        [pod1],
        [("pop", pod1), ("event", EVENT_ASSIGNED_POD_ADD), ("enqueue", pod1, ("fooPlugin1", "fooPlugin2"))],
        want_backoff=["targetpod"],
    ),
    InFlightCase(
        "pod is enqueued to activeQ because the failed plugin has a hint fn and it returns Queue for a "
        "concurrent event that was received while some other pod was in flight",
        {
            "fooPlugin3": [(EVENT_ASSIGNED_POD_ADD, skip_hint)],
            "fooPlugin2": [(EVENT_ASSIGNED_POD_ADD, queue_hint)],
            "fooPlugin1": [(EVENT_ASSIGNED_POD_ADD, queue_hint)],
        },
        [pod1, pod2],
        [
            ("call", _pop_and_keep(pod1)),
            ("event", NODE_ADD),
            ("call", _pop_and_keep(pod2)),
            ("event", EVENT_ASSIGNED_POD_ADD),
            ("call", _requeue_popped("targetpod")),
            ("call", _requeue_popped("targetpod2", ("fooPlugin2", "fooPlugin3"), ("fooPlugin1",))),
        ],
        want_active=["targetpod2"],
    ),
    InFlightCase(
        "popped pod must have empty UnschedulablePlugins and PendingPlugins",
        _foo1(PV_ADD),
        [pod1],
        [
            ("call", _pop_and_keep(pod1)),
            ("call", _requeue_popped("targetpod", ("fooPlugin2",), ("fooPlugin1",))),
            ("event", PV_ADD),  # active again
            ("call", _pop_check_cleared),
            ("call", _requeue_popped("targetpod")),  # failed: to backoff
        ],
        want_backoff=["targetpod"],
    ),
    InFlightCase(
        "Pop is made twice for the same Pod, but the cleanup still happen correctly",
        _foo1(PV_ADD, NODE_ADD, PVC_ADD, CSI_NODE_UPDATE),
        [pod1, pod2],
        [
            ("event", PVC_ADD),
            ("pop", pod1),
            ("event", PV_ADD),
            ("pop", pod2),
            ("call", _inject_duplicate),
            ("create", pod3),
            ("pop", pod3),  # pod1 is discarded: it is already in flight
            ("call", lambda q, c: None if not q.pods_in_active_q() else pytest.fail("activeQ not empty")),
            ("event", NODE_ADD),
            ("enqueue", pod1, ()),
            ("event", CSI_NODE_UPDATE),
            ("enqueue", pod2, ()),
            ("enqueue", pod3, ()),
        ],
        want_backoff=["targetpod", "targetpod2", "targetpod3"],
    ),
]


@pytest.mark.parametrize("case", IN_FLIGHT_CASES, ids=lambda c: c.name)
def test_in_flight_pods(case: InFlightCase) -> None:
    """Test_InFlightPods (the cases with queueing hints on)."""
    clock = FakeClock()
    q = new_queue(clock, queueing_hints=case.hints)
    for p in case.initial:
        q.add(p)
        clock.step(1)
    for action in case.actions:
        kind = action[0]
        if kind == "create":
            q.add(action[1])
        elif kind == "pop":
            pop(q, action[1])
        elif kind == "event":
            q.move_all_to_active_or_backoff(action[1])
        elif kind == "enqueue":
            pending = action[3] if len(action) > 3 else ()
            q.add_unschedulable_if_not_present(qpi(action[1], *action[2], attempts=1, pending=pending))
        else:
            action[1](q, clock)

    assert sorted(p.metadata.uid for p in q.in_flight_pods()) == sorted(
        p.metadata.uid for p in case.want_in_flight
    )
    want_log = [e.metadata.uid if isinstance(e, pb.Pod) else e for e in case.want_log]
    assert in_flight_log(q) == want_log
    if case.want_active is not None:
        assert names(q.pods_in_active_q()) == case.want_active
    if case.want_backoff is not None:
        assert names(q.pods_in_backoff_q()) == case.want_backoff
    for name in case.want_unschedulable:
        assert name in names(q.unschedulable_pods())


def test_pop_clears_pending_plugins() -> None:
    """TestPop: a pod queued immediately by its Pending plugin comes out with no Pending plugins."""
    q = new_queue(queueing_hints={"fooPlugin1": [(PV_ADD, queue_hint)]})
    q.add(pod1)
    p = pop(q, pod1)
    p.pending_plugins = {"fooPlugin1"}
    q.add_unschedulable_if_not_present(p, q.scheduling_cycle)
    q.move_all_to_active_or_backoff(PV_ADD)
    assert not pop(q, pod1).pending_plugins


# ---------------------------------------------------------------- requeue after a failed attempt


def test_add_unschedulable_if_not_present() -> None:
    """TestPriorityQueue_AddUnschedulableIfNotPresent: no event during the attempt -> unschedulable."""
    q = new_queue()
    q.add(unsched_pod)
    pop(q, unsched_pod)
    q.add(high_pod)
    q.add_unschedulable_if_not_present(qpi(unsched_pod, "plugin"), q.scheduling_cycle)
    assert pop(q).pod == high_pod
    assert where(q, unsched_pod) == "unschedulable"


def test_add_unschedulable_if_not_present_refuses_a_queued_pod() -> None:
    q = new_queue()
    q.add(high_pod)
    p = pop(q, high_pod)
    q._active.heap.add_or_update(qpi(high_pod))  # someone queued it meanwhile
    with pytest.raises(QueueError, match="already present in the active queue"):
        q.add_unschedulable_if_not_present(p)
    assert q.in_flight_pods() == []  # done() ran anyway


def test_add_unschedulable_if_not_present_backoff() -> None:
    """TestPriorityQueue_AddUnschedulableIfNotPresent_Backoff: pods whose attempts overlapped a
    move request go to backoffQ, not unschedulablePods."""
    q = new_queue()
    pods = [make_pod(f"pod{i}", f"ns{i}", uid=f"upns{i}", priority=i) for i in range(10)]
    for p in pods:
        q.add(p)
    for i in range(9, 0, -1):
        assert pop(q).pod == pods[i]
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    assert pop(q).pod == pods[0]
    for p in pods[1:]:
        q.add_unschedulable_if_not_present(qpi(p, "plugin", attempts=1))
    assert all(where(q, p) == "backoff" for p in pods[1:])


def test_error_without_rejector_goes_to_backoff_and_counts() -> None:
    q = new_queue()
    q.add(high_pod)
    p = pop(q)
    q.add_unschedulable_if_not_present(p)
    assert where(q, high_pod) == "backoff" and p.consecutive_errors_count == 1
    q._clock.step(10)  # type: ignore[attr-defined]
    q.flush_backoff_completed()
    p = pop(q)
    p.unschedulable_plugins = {"x"}
    q.add_unschedulable_if_not_present(p)
    assert (p.unschedulable_count, p.consecutive_errors_count) == (1, 0)


# ---------------------------------------------------------------- update / delete / activate

UPDATE_HINTS = {
    "queuePlugin": [(EVENT_UNSCHEDULED_POD_UPDATE, queue_hint)],
    "skipPlugin": [(EVENT_UNSCHEDULED_POD_UPDATE, skip_hint)],
}


def _annotated(pod: pb.Pod, value: str) -> pb.Pod:
    new = copy_pod(pod)
    new.metadata.annotations["foo"] = value
    return new


def _fail_with(q: PriorityQueue, pod: pb.Pod, plugin: str) -> None:
    q.add(pod)
    p = pop(q, pod)
    p.unschedulable_plugins = {plugin}
    q.add_unschedulable_if_not_present(p)
    assert where(q, pod) == "unschedulable"


def _prep_new(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    return med_pod, _annotated(med_pod, "test")


def _prep_nominated(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    new = copy_pod(high_pod)
    new.status.nominated_node_name = "node1"
    return high_pod, new


def _prep_in_active(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    q.add(high_pod)
    return high_pod, high_pod


def _prep_in_backoff(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    q._backoff.add(q._new_queued_pod_info(med_pod))
    return med_pod, med_pod


def _prep_unsched_backing_off(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    _fail_with(q, med_pod, "queuePlugin")
    return med_pod, _annotated(med_pod, "test")


def _prep_unsched_done_backing_off(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    _fail_with(q, med_pod, "queuePlugin")
    c.step(10)  # podMaxBackoffDuration
    return med_pod, _annotated(med_pod, "test1")


def _prep_unsched_skip(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    _fail_with(q, med_pod, "skipPlugin")
    return med_pod, _annotated(med_pod, "test1")


def _prep_in_flight(q: PriorityQueue, c: FakeClock) -> tuple[pb.Pod, pb.Pod]:
    q.add(med_pod)
    pop(q, med_pod)
    return med_pod, _annotated(med_pod, "bar")


@pytest.mark.parametrize(
    ("prepare", "want"),
    [
        (_prep_new, "active"),
        (_prep_nominated, "active"),
        (_prep_in_active, "active"),
        (_prep_in_backoff, "backoff"),
        (_prep_unsched_backing_off, "backoff"),
        (_prep_unsched_done_backing_off, "active"),
        (_prep_unsched_skip, "unschedulable"),
        (_prep_in_flight, None),
    ],
    ids=[
        "pod that didn't exist goes to activeQ",
        "pod gaining a nominatedNodeName goes to activeQ",
        "pod in activeQ stays in activeQ",
        "pod in backoffQ is updated in backoffQ",
        "unschedulable pod still backing off moves to backoffQ",
        "unschedulable pod done backing off moves to activeQ",
        "unschedulable pod whose plugin answers Skip stays",
        "pod in flight is not added to any queue",
    ],
)
def test_update(prepare: Callable[..., tuple[pb.Pod, pb.Pod]], want: str | None) -> None:
    """TestPriorityQueue_Update (queueing hints on)."""
    clock = FakeClock()
    q = new_queue(clock, queueing_hints=UPDATE_HINTS)
    old, new = prepare(q, clock)
    q.update(old, new)
    assert where(q, new) == want
    if want is not None:
        got = q.get_pod(new.metadata.name, new.metadata.namespace)
        assert got is not None and got.pod == new


def test_update_when_in_flight() -> None:
    """TestPriorityQueue_UpdateWhenInflight: an update during the attempt that may help sends the
    rejected pod to backoffQ, with the updated object."""
    q = new_queue(queueing_hints={"fakePlugin": [(EVENT_UNSCHEDULED_POD_UPDATE, queue_hint)]})
    test_pod = make_pod("test-pod", "test-ns", uid="test-uid")
    q.add(test_pod)
    pop(q, test_pod)
    updated = copy_pod(test_pod)
    updated.spec.tolerations.add(key="foo", effect="NoSchedule")
    q.update(test_pod, updated)
    q.add_unschedulable_if_not_present(qpi(test_pod, "fakePlugin", attempts=1))
    got = q.get_pod("test-pod", "test-ns")
    assert where(q, updated) == "backoff" and got is not None and got.pod == updated


def test_update_amounting_to_two_events_moves_pod_once() -> None:
    """A label + toleration change is two events. If the first sends the pod to backoffQ, the
    second (answered QueueSkip) must not put it back into unschedulablePods as well; upstream
    only stops at activeQ unless pop-from-backoff is on (kse divergence, see the module doc)."""
    label_event = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL)
    q = new_queue(queueing_hints={"Labels": [(label_event, queue_hint)]})
    pod = make_pod("p", labels={"app": "a"})
    _fail_with(q, pod, "Labels")
    new = copy_pod(pod)
    new.metadata.labels["app"] = "b"
    new.spec.tolerations.add(key="t")
    q.update(pod, new)
    assert q.where("ns1/p") == ["backoff"]


def test_delete() -> None:
    """TestPriorityQueue_Delete (nominator parts left out)."""
    q = new_queue()
    nominated = copy_pod(high_pod)
    nominated.status.nominated_node_name = "node1"
    q.update(high_pod, nominated)
    q.add(unsched_pod)
    q.delete(nominated)
    assert where(q, unsched_pod) == "active" and where(q, nominated) is None
    q.delete(unsched_pod)
    assert q.pending_pods() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


def test_delete_in_flight_pod_is_not_requeued() -> None:
    q = new_queue()
    q.add(high_pod)
    p = pop(q)
    q.delete(high_pod)
    p.unschedulable_plugins = {"x"}
    q.add_unschedulable_if_not_present(p)
    assert where(q, high_pod) is None and q.in_flight_pods() == []


@pytest.mark.parametrize(
    ("case", "want_active", "want_event"),
    [
        ("pod already in activeQ", 1, False),
        ("pod not in unschedulablePods/backoffQ", 0, False),
        ("pod not in unschedulablePods/backoffQ but in-flight", 0, True),
        ("pod not in unschedulablePods/backoffQ and not in-flight", 0, False),
        ("pod in unschedulablePods", 1, False),
        ("pod in backoffQ", 1, False),
    ],
)
def test_activate(case: str, want_active: int, want_event: bool) -> None:
    """TestPriorityQueue_Activate."""
    q = new_queue()
    target = make_pod("hpp", uid="hppns1", priority=HIGH, nominated="node1")
    if "in-flight" in case:
        flying = target if "but in-flight" in case else med_pod
        q.add(flying)
        pop(q, flying)
        assert len(q.in_flight_events()) == 1
    if case == "pod already in activeQ":
        q.add(target)
    elif case == "pod in unschedulablePods":
        q._unschedulable["ns1/hpp"] = qpi(target)
    elif case == "pod in backoffQ":
        q._backoff.add(qpi(target))
    q.activate({"test_pod": target})
    assert len(q.pods_in_active_q()) == want_active
    if want_event:
        log = q.in_flight_events()
        assert len(log) == 2 and log[1] == EVENT_FORCE_ACTIVATE
        evs = q.pending_events_for(target.metadata.uid)
        assert evs is not None and evs[0].old_obj is None and evs[0].new_obj == target


# ---------------------------------------------------------------- PreEnqueue


def _per_pop_from_backoff(cases: list[tuple[Any, ...]]) -> list[Any]:
    """Upstream runs these cases with SchedulerPopFromBackoffQ on and off; ``only_with`` (the
    second field) limits a case to one setting."""
    return [
        pytest.param(enabled, *rest, id=f"{name} popFromBackoffQ({enabled})")
        for name, only_with, *rest in cases
        for enabled in (False, True)
        if only_with is None or only_with == enabled
    ]


MOVE_TO_ACTIVE_CASES = [
    ("no plugins registered", None, [], "p", "UnscheduledPodAdd", 0, True),
    (
        "preEnqueue plugin registered, pod name not in allowlists",
        None,
        [(), ()],
        "p",
        "UnscheduledPodAdd",
        1,
        False,
    ),
    (
        "preEnqueue plugin registered, pod failed one preEnqueue plugin",
        None,
        [("foo", "bar"), ("foo",)],
        "bar",
        "UnscheduledPodAdd",
        1,
        False,
    ),
    (
        "preEnqueue plugin registered, preEnqueue plugin would reject the pod, but isn't run",
        False,
        [("foo", "bar"), ("foo",)],
        "bar",
        BACKOFF_COMPLETE,
        1,
        False,
    ),
    (
        "preEnqueue plugin registered, pod would fail one preEnqueue plugin, but is after backoff",
        True,
        [("foo", "bar"), ("foo",)],
        "bar",
        BACKOFF_COMPLETE,
        0,
        True,
    ),
    (
        "preEnqueue plugin registered, pod passed all preEnqueue plugins",
        None,
        [("foo", "bar"), ("bar",)],
        "bar",
        "UnscheduledPodAdd",
        0,
        True,
    ),
]


@pytest.mark.parametrize(
    ("pop_from_backoff", "plugins", "pod_label", "event", "want_unsched", "want_ok"),
    _per_pop_from_backoff(MOVE_TO_ACTIVE_CASES),
)
def test_move_to_active_q(
    pop_from_backoff: bool,
    plugins: list[tuple[str, ...]],
    pod_label: str,
    event: str,
    want_unsched: int,
    want_ok: bool,
) -> None:
    """TestPriorityQueue_moveToActiveQ."""
    pre = {f"preEnqueuePlugin{i}": allowlist_pre_enqueue(*allow) for i, allow in enumerate(plugins)}
    q = new_queue(
        pre_enqueue=pre, pop_from_backoff=pop_from_backoff, pod_initial_backoff=30, pod_max_backoff=60
    )
    pod = make_pod(pod_label, labels={pod_label: ""})
    ok = q._move_to_active_q(q._new_queued_pod_info(pod), event, from_backoff=event == BACKOFF_COMPLETE)
    assert ok == want_ok
    assert q.pending_pods()["unschedulable"] + q.pending_pods()["gated"] == want_unsched
    q.update(pod, _annotated(pod, ""))  # an unrelated update keeps a gated pod gated
    assert q.pending_pods()["unschedulable"] + q.pending_pods()["gated"] == want_unsched


MOVE_TO_BACKOFF_CASES = [
    ("no plugins registered", None, [], "p", True),
    ("preEnqueue plugin registered, pod name would not be in allowlists", False, [(), ()], "p", True),
    ("preEnqueue plugin registered, pod name not in allowlists", True, [(), ()], "p", False),
    (
        "preEnqueue plugin registered, preEnqueue plugin would reject the pod, but isn't run",
        False,
        [("foo", "bar"), ("foo",)],
        "bar",
        True,
    ),
    (
        "preEnqueue plugin registered, pod failed one preEnqueue plugin",
        True,
        [("foo", "bar"), ("foo",)],
        "bar",
        False,
    ),
    (
        "preEnqueue plugin registered, pod passed all preEnqueue plugins",
        None,
        [("foo", "bar"), ("bar",)],
        "bar",
        True,
    ),
]


@pytest.mark.parametrize(
    ("pop_from_backoff", "plugins", "pod_label", "want_ok"), _per_pop_from_backoff(MOVE_TO_BACKOFF_CASES)
)
def test_move_to_backoff_q(
    pop_from_backoff: bool, plugins: list[tuple[str, ...]], pod_label: str, want_ok: bool
) -> None:
    """TestPriorityQueue_moveToBackoffQ."""
    pre = {f"preEnqueuePlugin{i}": allowlist_pre_enqueue(*allow) for i, allow in enumerate(plugins)}
    q = new_queue(pre_enqueue=pre, pop_from_backoff=pop_from_backoff)
    pod = make_pod(pod_label, labels={pod_label: ""})
    assert q._move_to_backoff_q(q._new_queued_pod_info(pod), "UnscheduledPodAdd") == want_ok
    assert where(q, pod) == ("backoff" if want_ok else "unschedulable")


def test_gated_pod_is_released_by_removing_its_gates() -> None:
    """Test_queuedPodInfo_gatedSetUponCreationAndUnsetUponUpdate."""
    gates_hint = [
        (ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED), queue_hint)
    ]
    q = new_queue(
        pre_enqueue={"SchedulingGates": gates_pre_enqueue}, queueing_hints={"SchedulingGates": gates_hint}
    )
    gated = make_pod("p", gates=["hello world"])
    q.add(gated)
    info = q.get_pod("p", "ns1")
    assert info is not None and info.gated and info.gating_plugin == "SchedulingGates"
    assert q.pending_pods() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}
    assert q.try_pop() is None
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)  # gated pods ignore the timeout
    assert q.try_pop() is None
    ungated = copy_pod(gated)
    del ungated.spec.scheduling_gates[:]
    q.update(gated, ungated)
    p = pop(q)
    assert not p.gated and p.pod == ungated


# ---------------------------------------------------------------- move on cluster events

_gated_by_gates = ("SchedulingGates", [EVENT_UNSCHEDULED_POD_UPDATE])
_gated_by_foo = ("foo", [NODE_ADD])


def _hint_must_not_run(pod: pb.Pod, old: Any, new: Any) -> QueueingHint:
    raise AssertionError("QueueingHintFn should not be called as pod is gated")


@pytest.mark.parametrize(
    ("pending", "unsched", "attempts", "gate", "hint", "step", "want"),
    [
        ({"foo"}, set(), 0, None, queue_hint, 0.0, "active"),
        (set(), {"foo"}, 1, None, queue_hint, 0.0, "backoff"),
        (set(), {"foo"}, 0, None, queue_hint, DEFAULT_POD_INITIAL_BACKOFF, "active"),
        (set(), {"foo"}, 0, None, skip_hint, 0.0, "unschedulable"),
        (set(), set(), 0, _gated_by_gates, _hint_must_not_run, 0.0, "unschedulable"),
        (set(), set(), 0, _gated_by_foo, queue_hint, 0.0, "active"),
        (set(), set(), 1, _gated_by_foo, queue_hint, 0.0, "backoff"),
    ],
    ids=[
        "Queue queues pod to activeQ",
        "Queue queues pod to backoffQ if Pod is backing off",
        "Queue queues pod to activeQ if Pod is not backing off",
        "Skip queues pod to unschedulablePods",
        "QueueHintFunction is not called when Pod is gated by the plugin that isn't interested in the event",
        "QueueHintFunction is called when Pod is gated by the plugin that is interested in the event",
        "Pod that experienced a scheduling failure before should be queued to backoffQ after un-gated",
    ],
)
def test_move_all_with_queueing_hint(
    pending: set[str], unsched: set[str], attempts: int, gate: Any, hint: Any, step: float, want: str
) -> None:
    """TestPriorityQueue_MoveAllToActiveOrBackoffQueueWithQueueingHint."""
    clock = FakeClock()
    q = new_queue(
        clock,
        queueing_hints={
            "foo": [(NODE_ADD, hint)],
            "SchedulingGates": [(EVENT_UNSCHEDULED_POD_UPDATE, queue_hint)],
        },
        pre_enqueue={"SchedulingGates": gates_pre_enqueue, "foo": allowlist_pre_enqueue("foo")},
    )
    p = make_pod("pod1", uid="1", labels={"foo": "bar"})
    info = qpi(p, *unsched, attempts=attempts, pending=pending)
    if gate is not None:
        info.gating_plugin, info.gating_plugin_events, info.gated = gate[0], list(gate[1]), True
        info.unschedulable_plugins = {gate[0]}
    q.add(p)
    pop(q, p)
    q.add_unschedulable_if_not_present(info, q.scheduling_cycle)
    clock.step(step)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert where(q, p) == want


def test_move_all_to_active_or_backoff_queue() -> None:
    """TestPriorityQueue_MoveAllToActiveOrBackoffQueue (the long scenario)."""
    clock = FakeClock()
    q = new_queue(clock, queueing_hints={"fooPlugin": [(NODE_ADD, queue_hint)]})

    def in_flight() -> list[str]:
        return sorted(p.metadata.uid for p in q.in_flight_pods())

    def fail(pod: pb.Pod, *plugins: str) -> None:
        q.add_unschedulable_if_not_present(qpi(pod, *plugins, attempts=1, timestamp=clock()))

    q.add(unsched_pod)
    pop(q, unsched_pod)
    q.add(high_pod)
    pop(q, high_pod)
    assert in_flight() == ["hppns1", "upns1"]
    fail(unsched_pod, "fooPlugin")
    fail(high_pod, "fooPlugin")
    assert in_flight() == []
    hpp1 = make_pod("hpp1", uid="hpp1ns1", priority=HIGH)
    q.add(hpp1)
    pop(q, hpp1)
    fail(hpp1)  # no rejector: backoffQ
    hpp2 = make_pod("hpp2", uid="hpp2ns1", priority=HIGH)
    q.add(hpp2)
    pop(q, hpp2)
    fail(hpp2, "barPlugin")  # unschedulablePods
    q.move_all_to_active_or_backoff(NODE_ADD)  # moves the fooPlugin pods to backoffQ
    q.add(med_pod)
    assert len(q.pods_in_active_q()) == 1
    pop(q, med_pod)
    assert in_flight() == ["mppns2"]
    assert len(q.pods_in_backoff_q()) == 3

    clock.step(10)
    q._backoff.pop_all_backoff_completed()  # emptied without going anywhere
    for pod in (unsched_pod, high_pod, hpp1):
        q.add(pod)
        pop(q, pod)
    assert in_flight() == ["hpp1ns1", "hppns1", "mppns2", "upns1"]
    fail(unsched_pod, "fooPlugin")
    fail(high_pod, "fooPlugin")
    fail(hpp1)
    assert in_flight() == ["mppns2"]
    q.add(med_pod)  # in flight: only logged
    for pod in (unsched_pod, high_pod, hpp2):
        assert where(q, pod) == "unschedulable"
    assert where(q, hpp1) == "backoff"

    clock.step(10)
    q.flush_backoff_completed()
    q.move_all_to_active_or_backoff(NODE_ADD)
    # Upstream counts 4 here because its Add put the in-flight med pod in activeQ too.
    assert names(q.pods_in_active_q()) == ["hpp", "hpp1", "up"]
    assert q.pods_in_backoff_q() == []
    assert in_flight() == ["mppns2"]
    assert names(q.unschedulable_pods()) == ["hpp2"]  # regardless of its backoff timer


AFFINITY_POD = make_pod(
    "afp", uid="afp", annotations={"annot2": "val2"}, affinity_exists=("service", "region")
)
SPREAD_POD = make_pod("tsp", uid="tsp", spread=True)
PLAIN_POD = make_pod("afp", uid="afp", annotations={"annot2": "val2"})
MATCHING = make_pod("lbp", labels={"service": "securityscan"}, node="node1")
UNRELATED = make_pod("lbp", "unrelated", labels={"unrelated": "unrelated"}, node="node1")

ASSIGNED_CASES = [
    (
        "Pod rejected by pod affinity is requeued with matching Pod's update",
        AFFINITY_POD,
        "InterPodAffinity",
        MATCHING,
        True,
    ),
    (
        "Pod rejected by pod affinity isn't requeued with unrelated Pod's update",
        AFFINITY_POD,
        "InterPodAffinity",
        UNRELATED,
        False,
    ),
    (
        "Pod rejected by pod topology spread is requeued with Pod's update in the same namespace",
        SPREAD_POD,
        "PodTopologySpread",
        MATCHING,
        True,
    ),
    (
        "Pod rejected by pod topology spread isn't requeued with unrelated Pod's update",
        AFFINITY_POD,
        "PodTopologySpread",
        UNRELATED,
        False,
    ),
    (
        "Pod rejected by other plugins isn't requeued with any Pod's update",
        PLAIN_POD,
        "fakePlugin",
        UNRELATED,
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "plugin", "assigned", "want"), ASSIGNED_CASES, ids=[c[0] for c in ASSIGNED_CASES]
)
def test_assigned_pod_added(name: str, pod: pb.Pod, plugin: str, assigned: pb.Pod, want: bool) -> None:
    """TestPriorityQueue_AssignedPodAdded."""
    clock = FakeClock()
    hints = {
        p: [(EVENT_ASSIGNED_POD_ADD, queue_hint)]
        for p in ("fakePlugin", "InterPodAffinity", "PodTopologySpread")
    }
    q = new_queue(clock, queueing_hints=hints)
    q.add(pod)
    pop(q, pod)
    q.add_unschedulable_if_not_present(q._new_queued_pod_info(pod, plugin), q.scheduling_cycle)
    clock.step(DEFAULT_POD_INITIAL_BACKOFF + 1)
    q.assigned_pod_added(assigned)
    assert (where(q, pod) == "active") == want


POD_LABEL_EVENT = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL)
SCALE_DOWN = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_SCALE_DOWN)
UPDATED_CASES = [
    *[(n, p, pl, a, POD_LABEL_EVENT, w) for n, p, pl, a, w in ASSIGNED_CASES[:4]],
    (
        "Pod rejected by resource fit is requeued with assigned Pod's scale down",
        make_pod("rp", uid="afp", requests={"cpu": "1"}),
        "NodeResourcesFit",
        make_pod("lbp", "ns2", node="node1"),
        SCALE_DOWN,
        True,
    ),
    (*ASSIGNED_CASES[4][:4], POD_LABEL_EVENT, False),
]


@pytest.mark.parametrize(
    ("name", "pod", "plugin", "assigned", "event", "want"), UPDATED_CASES, ids=[c[0] for c in UPDATED_CASES]
)
def test_assigned_pod_updated(
    name: str, pod: pb.Pod, plugin: str, assigned: pb.Pod, event: ClusterEvent, want: bool
) -> None:
    """TestPriorityQueue_AssignedPodUpdated."""
    clock = FakeClock()
    hints: dict[str, list[tuple[ClusterEvent, Any]]] = {
        p: [(POD_LABEL_EVENT, queue_hint)] for p in ("fakePlugin", "InterPodAffinity", "PodTopologySpread")
    }
    hints["NodeResourcesFit"] = [
        (ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCALE_DOWN), queue_hint)
    ]
    q = new_queue(clock, queueing_hints=hints)
    q.add(pod)
    pop(q, pod)
    q.add_unschedulable_if_not_present(q._new_queued_pod_info(pod, plugin), q.scheduling_cycle)
    clock.step(DEFAULT_POD_INITIAL_BACKOFF + 1)
    q.assigned_pod_updated(None, assigned, event)
    assert (where(q, pod) == "active") == want


@pytest.mark.parametrize(
    ("pre_check", "event", "want"),
    [
        (None, EVENT_UNSCHEDULABLE_TIMEOUT, {"p0", "p1", "p2", "p3", "p4"}),
        (lambda p: priority_of(p) >= 2, EVENT_UNSCHEDULABLE_TIMEOUT, {"p2", "p3", "p4"}),
        (
            lambda p: priority_of(p) % 2 == 0 and priority_of(p) >= 2,
            EVENT_UNSCHEDULABLE_TIMEOUT,
            {"p2", "p4"},
        ),
        (lambda p: priority_of(p) % 2 == 0 and priority_of(p) < 0, EVENT_UNSCHEDULABLE_TIMEOUT, set()),
        (_hint_must_not_run, PV_ADD, set()),
    ],
    ids=[
        "nil PreEnqueueCheck",
        "move Pods with priority greater than 2",
        "move Pods with even priority and greater than 2",
        "move Pods with even and negative priority",
        "preCheck isn't called if the event is not interested by any plugins",
    ],
)
def test_move_all_pre_enqueue_checks(pre_check: Any, event: ClusterEvent, want: set[str]) -> None:
    """TestMoveAllToActiveOrBackoffQueue_PreEnqueueChecks."""
    clock = FakeClock()
    q = new_queue(clock)
    for i in range(5):
        pod = make_pod(f"p{i}", "", priority=i)
        q.add(pod)
        p = pop(q, pod)
        p.unschedulable_plugins = {"plugin"}
        q.add_unschedulable_if_not_present(p, q.scheduling_cycle)
    q.move_all_to_active_or_backoff(event, pre_check=pre_check)
    clock.step(20)
    assert {p.pod.metadata.name for p in q._backoff.pop_all_backoff_completed()} == want


# ---------------------------------------------------------------- ordering and fairness


def _fail_as_unschedulable(q: PriorityQueue, p: QueuedPodInfo) -> None:
    p.unschedulable_plugins = {"plugin"}
    q.add_unschedulable_if_not_present(p, q.scheduling_cycle)


def test_recently_tried_pods_go_back() -> None:
    """TestRecentlyTriedPodsGoBack: a retried pod goes behind same-priority pods."""
    clock = FakeClock()
    q = new_queue(clock)
    for i in range(5):
        q.add(make_pod(f"test-pod-{i}", uid=f"tp00{i}", priority=HIGH, node="node1", nominated="node1"))
    clock.step(1e-6)
    p1 = pop(q)
    _fail_as_unschedulable(q, p1)
    clock.step(10)
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    popped = [pop(q) for _ in range(5)]
    assert popped[-1] is p1 and p1 not in popped[:-1]


def test_pod_failing_repeatedly_does_not_block_newer_pod() -> None:
    """TestPodFailedSchedulingMultipleTimesDoesNotBlockNewerPod."""
    clock = FakeClock()
    q = new_queue(clock)
    failing = make_pod("test-pod-unscheduled", uid="tp001", priority=HIGH, nominated="node1")
    q.add(failing)
    pop(q, failing)
    q.add_unschedulable_if_not_present(qpi(failing, "plugin"), q.scheduling_cycle)
    clock.step(DEFAULT_POD_INITIAL_BACKOFF + 1)
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    pop(q, failing)
    newer = make_pod("test-newer-pod", uid="tp002", priority=HIGH, nominated="node1")
    q.add(newer)
    q.add_unschedulable_if_not_present(qpi(failing, "plugin"), q.scheduling_cycle)
    clock.step(DEFAULT_POD_INITIAL_BACKOFF + 1)
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    pop(q, newer)


def test_high_priority_backoff() -> None:
    """TestHighPriorityBackoff: an unschedulable high-priority pod does not block others."""
    q = new_queue()
    mid = make_pod("test-midpod", uid="tp-mid", priority=MID, nominated="node1")
    high = make_pod("test-highpod", uid="tp-high", priority=HIGH, nominated="node1")
    q.add(mid)
    q.add(high)
    p = pop(q, high)
    q.add_unschedulable_if_not_present(p, q.scheduling_cycle)
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    pop(q, mid)


def test_high_priority_flush_unschedulable_pods_leftover() -> None:
    """TestHighPriorityFlushUnschedulablePodsLeftover."""
    clock = FakeClock()
    q = new_queue(clock, queueing_hints={"fakePlugin": [(NODE_ADD, queue_hint)]})
    mid = make_pod("test-midpod", uid="tp-mid", priority=MID, nominated="node1")
    high = make_pod("test-highpod", uid="tp-high", priority=HIGH, nominated="node1")
    q.add(high)
    pop(q, high)
    q.add(mid)
    pop(q, mid)
    q.add_unschedulable_if_not_present(q._new_queued_pod_info(high, "fakePlugin"), q.scheduling_cycle)
    q.add_unschedulable_if_not_present(q._new_queued_pod_info(mid, "fakePlugin"), q.scheduling_cycle)
    clock.step(DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION + 1)
    q.flush_unschedulable_pods_leftover()
    pop(q, high)
    pop(q, mid)


@pytest.mark.parametrize("max_duration", [None, 30.0])
def test_pod_max_in_unschedulable_pods_duration(max_duration: float | None) -> None:
    """TestPriorityQueue_initPodMaxInUnschedulablePodsDuration: default and user-set durations."""
    clock = FakeClock()
    kwargs = {} if max_duration is None else {"pod_max_in_unschedulable_pods_duration": max_duration}
    q = new_queue(clock, **kwargs)
    a = qpi(make_pod("test-pod-1", uid="tp-1"), "plugin", attempts=1, timestamp=clock() - 1)
    b = qpi(make_pod("test-pod-2", "ns2", uid="tp-2"), "plugin", attempts=1, timestamp=clock() - 2)
    q._unschedulable[a.key], q._unschedulable[b.key] = a, b
    clock.step(max_duration or DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION)
    q.flush_unschedulable_pods_leftover()
    assert [pop(q).key for _ in range(2)] == [b.key, a.key]


def _add_directly(q: PriorityQueue, p: QueuedPodInfo) -> None:
    q._active.heap.add_or_update(p)


def _add_unschedulable(q: PriorityQueue, p: QueuedPodInfo) -> None:
    p.attempts += 1
    q._unschedulable[p.key] = p


@pytest.mark.parametrize("scenario", ["activeQ", "unschedulablePods", "backoffQ"])
def test_pod_timestamp(scenario: str) -> None:
    """TestPodTimestamp: requeued pods keep their timestamp order."""
    clock = FakeClock()
    q = new_queue(clock)
    p1 = QueuedPodInfo(PodInfo(make_pod("test-pod-1", uid="tp-1", nominated="node1")), timestamp=clock())
    p2 = QueuedPodInfo(
        PodInfo(make_pod("test-pod-2", "ns2", uid="tp-2", nominated="node2")), timestamp=clock() + 1
    )
    if scenario == "activeQ":
        _add_directly(q, p2), _add_directly(q, p1)
    elif scenario == "unschedulablePods":
        _add_unschedulable(q, p2), _add_unschedulable(q, p1)
        clock.step(3)
        q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    else:
        _add_directly(q, p2)
        q._backoff.add(p1)
        clock.step(3)
        q.flush_backoff_completed()
        q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    assert [pop(q) for _ in range(2)] == [p1, p2]


# ---------------------------------------------------------------- counts, metrics, attempts

_QUEUEABLE = [
    qpi(make_pod(f"x-{i}", f"ns{i}", uid=f"tp-{i}", labels={"queueable": ""})) for i in range(1, 51)
]
_GATED = [qpi(make_pod(f"y-{i}", f"ns{i}", uid=f"tp-{i}", labels={"failme": ""})) for i in range(1, 11)]


def _pending_queue(clock: FakeClock) -> PriorityQueue:
    return new_queue(
        clock,
        pre_enqueue={"preEnqueuePlugin": allowlist_pre_enqueue("queueable")},
        queueing_hints={"preEnqueuePlugin": [(EVENT_UNSCHEDULED_POD_UPDATE, queue_hint)]},
    )


def _op_active(q: PriorityQueue, p: QueuedPodInfo) -> None:
    q.add(p.pod)


def _op_backoff(q: PriorityQueue, p: QueuedPodInfo) -> None:
    q._backoff.add(q._new_queued_pod_info(p.pod))


def _op_unschedulable(q: PriorityQueue, p: QueuedPodInfo) -> None:
    info = q._new_queued_pod_info(p.pod)
    if "failme" in p.pod.metadata.labels:
        info.gated, info.gating_plugin, info.unschedulable_plugins = (
            True,
            "preEnqueuePlugin",
            {"preEnqueuePlugin"},
        )
        info.gating_plugin_events = [EVENT_UNSCHEDULED_POD_UPDATE]
    else:
        info.attempts = 1
    q._unschedulable[info.key] = info


def _op_delete(q: PriorityQueue, p: QueuedPodInfo) -> None:
    q.delete(p.pod)


def _op_queueable(q: PriorityQueue, p: QueuedPodInfo) -> None:
    new = copy_pod(p.pod)
    new.metadata.labels.clear()
    new.metadata.labels["queueable"] = ""
    q.update(p.pod, new)


def _op_move_all(q: PriorityQueue, p: QueuedPodInfo | None) -> None:
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)


_ALL = _QUEUEABLE + _GATED
PENDING_CASES = [
    (
        "add pods to activeQ and unschedulablePods",
        [(_op_active, _ALL[:30]), (_op_unschedulable, _ALL[30:])],
        (30, 0, 20, 10),
    ),
    (
        "add pods to all kinds of queues",
        [(_op_active, _ALL[:15]), (_op_backoff, _ALL[15:40]), (_op_unschedulable, _ALL[40:])],
        (15, 25, 10, 10),
    ),
    (
        "add pods to unschedulablePods and then move all to activeQ",
        [(_op_unschedulable, _ALL), ("step", 3), (_op_move_all, [None])],
        (50, 0, 0, 10),
    ),
    (
        "add pods to activeQ/unschedulablePods and then delete some Pods",
        [
            (_op_active, _ALL[:30]),
            (_op_unschedulable, _ALL[30:]),
            (_op_delete, _ALL[:2]),
            (_op_delete, _ALL[30:33]),
            (_op_delete, _ALL[50:54]),
        ],
        (28, 0, 17, 6),
    ),
    (
        "add pods to activeQ/unschedulablePods and then update some Pods as queueable",
        [(_op_active, _ALL[:30]), (_op_unschedulable, _ALL[30:]), (_op_queueable, _ALL[50:55])],
        (35, 0, 20, 5),
    ),
]


@pytest.mark.parametrize(("name", "ops", "want"), PENDING_CASES, ids=[c[0] for c in PENDING_CASES])
def test_pending_pods_counts(name: str, ops: list[Any], want: tuple[int, int, int, int]) -> None:
    """TestPendingPodsMetric (the scheduler_pending_pods cases)."""
    clock = FakeClock()
    q = _pending_queue(clock)
    for op, operands in ops:
        if op == "step":
            clock.step(operands)
            continue
        for p in operands:
            op(q, p)
    active, backoff, unschedulable, gated = want
    assert q.pending_pods() == {
        "active": active,
        "backoff": backoff,
        "unschedulable": unschedulable,
        "gated": gated,
    }


def test_pending_pods() -> None:
    """TestPriorityQueue_PendingPods."""
    q = new_queue()
    for pod in (unsched_pod, high_pod):
        q.add(pod)
        pop(q, pod)
    q.add(med_pod)
    q.add_unschedulable_if_not_present(qpi(unsched_pod, "plugin", attempts=1))
    q.add_unschedulable_if_not_present(qpi(high_pod, "plugin", attempts=1))
    assert q.pending_pods() == {"active": 1, "backoff": 0, "unschedulable": 2, "gated": 0}
    q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    assert q.pending_pods() == {"active": 1, "backoff": 2, "unschedulable": 0, "gated": 0}


def _scenario_once(c: FakeClock, q: PriorityQueue, pod: pb.Pod) -> None:
    q.add(pod)


def _scenario_twice(c: FakeClock, q: PriorityQueue, pod: pb.Pod, update: bool = False) -> None:
    q.add(pod)
    p = pop(q)
    p.unschedulable_plugins = {"plugin"}
    q.add_unschedulable_if_not_present(p, 1)
    c.step(DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION + 1e-9)
    q.flush_unschedulable_pods_leftover()
    if update:
        new = copy_pod(pod)
        new.metadata.generation = 1
        q.update(pod, new)


def _scenario_gated(c: FakeClock, q: PriorityQueue, pod: pb.Pod) -> None:
    q._pre_enqueue = {"preEnqueuePlugin": allowlist_pre_enqueue("foo")}
    q.add(pod)
    assert where(q, pod) == "unschedulable"
    c.step(60)
    new = copy_pod(pod)
    new.metadata.labels["foo"] = ""
    q.update(pod, new)


@pytest.mark.parametrize(
    ("scenario", "want_attempts", "want_initial_offset"),
    [
        (_scenario_once, 1, 0.0),
        (_scenario_twice, 2, 0.0),
        (lambda c, q, p: _scenario_twice(c, q, p, update=True), 2, 0.0),
        (_scenario_gated, 1, 60.0),
    ],
    ids=[
        "pod is created and scheduled after 1 attempt",
        "pod is created and scheduled after 2 attempts",
        "pod is created and scheduled after 2 attempts but before the second pop, call update",
        "A gated pod is created and scheduled after lifting gate",
    ],
)
def test_per_pod_scheduling_metrics(scenario: Any, want_attempts: int, want_initial_offset: float) -> None:
    """TestPerPodSchedulingMetrics: attempts count and initialAttemptTimestamp is kept."""
    clock = FakeClock()
    start = clock()
    q = new_queue(clock, queueing_hints={"preEnqueuePlugin": [(EVENT_UNSCHEDULED_POD_UPDATE, queue_hint)]})
    pod = make_pod("test-pod", "test-ns", uid="test-uid")
    scenario(clock, q, pod)
    p = pop(q)
    assert p.attempts == want_attempts
    assert p.initial_attempt_timestamp == start + want_initial_offset


def _requeue_unschedulable(q: PriorityQueue, c: FakeClock, p: QueuedPodInfo) -> None:
    q.add(p.pod)
    got = pop(q, p.pod)
    got.unschedulable_plugins = {"unschedulable_plugin"}
    q.add_unschedulable_if_not_present(got, 1)


def _requeue_backoff(q: PriorityQueue, c: FakeClock, p: QueuedPodInfo) -> None:
    q.add(p.pod)
    q.add_unschedulable_if_not_present(pop(q, p.pod), 1)


def _step3(q: PriorityQueue, c: FakeClock, p: QueuedPodInfo) -> None:
    c.step(3)


def _flush_backoff(q: PriorityQueue, c: FakeClock, p: QueuedPodInfo) -> None:
    c.step(3)
    q.flush_backoff_completed()


INCOMING_CASES = [
    ("add pods to activeQ", [lambda q, c, p: q.add(p.pod)], {("active", "UnscheduledPodAdd"): 3}),
    (
        "add pods to unschedulablePods",
        [_requeue_unschedulable],
        {("active", "UnscheduledPodAdd"): 3, ("unschedulable", "ScheduleAttemptFailure"): 3},
    ),
    (
        "add pods to unschedulablePods and then move all to backoffQ",
        [_requeue_unschedulable, lambda q, c, p: _op_move_all(q, p)],
        {
            ("active", "UnscheduledPodAdd"): 3,
            ("unschedulable", "ScheduleAttemptFailure"): 3,
            ("backoff", "UnschedulableTimeout"): 3,
        },
    ),
    (
        "add pods to unschedulablePods and then move all to activeQ",
        [_requeue_unschedulable, _step3, lambda q, c, p: _op_move_all(q, p)],
        {
            ("active", "UnscheduledPodAdd"): 3,
            ("unschedulable", "ScheduleAttemptFailure"): 3,
            ("active", "UnschedulableTimeout"): 3,
        },
    ),
    (
        "make some pods subject to backoff and add them to backoffQ, then flush backoffQ",
        [_requeue_backoff, _step3, _flush_backoff],
        {
            ("active", "UnscheduledPodAdd"): 3,
            ("backoff", "ScheduleAttemptFailure"): 3,
            ("active", "BackoffComplete"): 3,
        },
    ),
]


@pytest.mark.parametrize(("name", "ops", "want"), INCOMING_CASES, ids=[c[0] for c in INCOMING_CASES])
def test_incoming_pods_metrics(name: str, ops: list[Any], want: dict[tuple[str, str], int]) -> None:
    """TestIncomingPodsMetrics, through the on_incoming hook."""
    got: dict[tuple[str, str], int] = {}

    def record(queue: str, event: str) -> None:
        got[(queue, event)] = got.get((queue, event), 0) + 1

    clock = FakeClock()
    q = new_queue(clock, on_incoming=record)
    pods = [
        qpi(make_pod(f"test-pod-{i}", f"ns{i}", uid=f"tp-{i}"), "unschedulable_plugin") for i in (1, 2, 3)
    ]
    for op in ops:
        for p in pods:
            op(q, clock, p)
    assert got == want


@pytest.mark.parametrize("pop_from_backoff", [False, True])
def test_backoff_flow(pop_from_backoff: bool) -> None:
    """TestBackOffFlow: backoff doubles from 1 s up to 10 s; an early flush keeps the pod."""
    clock = FakeClock(1000.25)
    q = new_queue(clock, pop_from_backoff=pop_from_backoff)
    pod = make_pod("test-pod", "test-ns", uid="test-uid")
    q.add(pod)
    for i, want in enumerate([1, 2, 4, 8, 10, 10, 10]):
        timestamp = clock()
        p = pop(q)
        assert p.attempts == i + 1
        q.add_unschedulable_if_not_present(p, i)
        q.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
        assert where(q, pod) == "backoff"
        assert p.backoff_expiration is not None
        backoff = p.backoff_expiration - timestamp
        if pop_from_backoff:  # expiry is truncated to its 1 s window
            backoff = math.floor(backoff) + 1
        assert backoff == pytest.approx(want)
        clock.step(1)
        q.flush_backoff_completed()
        assert where(q, pod) == "backoff"  # still backing off after an early flush
        clock.step(backoff)
        q.flush_backoff_completed()
        assert where(q, pod) == "active"


def test_new_with_options() -> None:
    """TestPriorityQueue_NewWithOptions."""
    q = new_queue(pod_initial_backoff=2, pod_max_backoff=20)
    assert (q._backoff.initial, q._backoff.maximum) == (2, 20)


@pytest.mark.parametrize(
    ("initial", "maximum", "attempts", "want"),
    [
        (1e-9, 32e-9, 0, 0),
        (1e-9, 32e-9, 16, 32e-9),
        (1e-9, (2**31 - 1) * 1e-9, 32, (2**31 - 1) * 1e-9),
        (1e-9, (2**63 - 1) * 1e-9, 64, (2**63 - 1) * 1e-9),
        (1, 10, 1, 1),
        (1, 10, 4, 8),
        (1, 10, 5, 10),
    ],
    ids=["no backoff", "normal", "overflow_32bit", "overflow_64bit", "first", "fourth", "capped"],
)
def test_calculate_backoff_duration(initial: float, maximum: float, attempts: int, want: float) -> None:
    """TestBackoffQueue_calculateBackoffDuration (+ the 1 s/10 s defaults)."""
    bq = BackoffQueue(FakeClock(), initial, maximum, priority_sort, False)
    assert bq.calculate_backoff_duration(qpi(make_pod("p"), attempts=attempts)) == pytest.approx(want)


@pytest.mark.parametrize(
    ("in_backoff", "want"),
    [
        ([], []),
        (["pod0", "pod1"], ["pod0"]),
        (["pod2", "pod3"], ["pod2"]),
        (["pod0", "pod1", "pod2", "pod3"], ["pod0", "pod2"]),
        (["pod0", "pod2"], ["pod0", "pod2"]),
        (["pod1", "pod3"], []),
    ],
    ids=[
        "both empty",
        "only backoffQ",
        "only errorBackoffQ",
        "both, some move",
        "both, all move",
        "both, none move",
    ],
)
def test_pop_each_backoff_completed(in_backoff: list[str], want: list[str]) -> None:
    """TestBackoffQueue_popEachBackoffCompleted. Upstream's pods "done" expire exactly now (1 s
    ago + 1 s); current upstream treats an expiry equal to now as still backing off (isPodBackingoff
    uses !Before, not After), so here they failed 2 s ago."""
    clock = FakeClock()
    infos = {
        "pod0": qpi(make_pod("pod0"), "plugin", attempts=1, timestamp=clock() - 2),
        "pod1": qpi(make_pod("pod1"), "plugin", attempts=1, timestamp=clock() + 1),
        "pod2": qpi(make_pod("pod2"), attempts=1, timestamp=clock() - 2),
        "pod3": qpi(make_pod("pod3"), attempts=1, timestamp=clock() + 1),
    }
    bq = BackoffQueue(clock, 1.0, 10.0, priority_sort, False)
    for name in in_backoff:
        bq.add(infos[name])
    assert [p.pod.metadata.name for p in bq.pop_all_backoff_completed()] == want
    assert len(bq) == len(in_backoff) - len(want)


# ---------------------------------------------------------------- isPodWorthRequeuing

_calls = 0


def _counting(verdict: QueueingHint | None) -> Callable[[pb.Pod, Any, Any], QueueingHint]:
    def fn(pod: pb.Pod, old: Any, new: Any) -> QueueingHint:
        global _calls
        _calls += 1
        if verdict is None:
            raise RuntimeError("unexpected error")
        return verdict

    return fn


_Q, _S, _E = _counting(QueueingHint.QUEUE), _counting(QueueingHint.SKIP), _counting(None)
_NODE_LABEL = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL)
_NODE_UPDATE = ClusterEvent(EventResource.NODE, ActionType.UPDATE)
_WILD_ADD = ClusterEvent(EventResource.WILDCARD, ActionType.ADD)
_WILD_ALL = ClusterEvent(EventResource.WILDCARD, ActionType.ALL)
_THIS_POD = make_pod("pod1", uid="1")
_OTHER_POD = make_pod("pod-different", "ns2", uid="2")

WORTH_CASES = [
    (
        "return Queue when no queueing hint function is registered for the event",
        {"fooPlugin1"},
        set(),
        NODE_ADD,
        None,
        {"fooPlugin1": [(EVENT_ASSIGNED_POD_ADD, _Q)]},
        _Strategy.SKIP,
        0,
    ),
    (
        "Treat the event as Queue when QueueHintFn returns error",
        {"fooPlugin1"},
        set(),
        NODE_ADD,
        None,
        {"fooPlugin1": [(NODE_ADD, _E)]},
        _Strategy.AFTER_BACKOFF,
        1,
    ),
    (
        "return Queue when the event is wildcard",
        {"fooPlugin1"},
        set(),
        EVENT_UNSCHEDULABLE_TIMEOUT,
        None,
        {},
        _Strategy.AFTER_BACKOFF,
        0,
    ),
    (
        "return Queue when the event is wildcard and the wildcard targets the pod to be requeued right now",
        {"fooPlugin1"},
        set(),
        EVENT_FORCE_ACTIVATE,
        _THIS_POD,
        {},
        _Strategy.AFTER_BACKOFF,
        0,
    ),
    (
        "return Skip when the event is wildcard, but the wildcard targets a different pod",
        {"fooPlugin1"},
        set(),
        EVENT_FORCE_ACTIVATE,
        _OTHER_POD,
        {},
        _Strategy.SKIP,
        0,
    ),
    (
        "interprets Queue from the Pending plugin as queueImmediately",
        {"fooPlugin1", "fooPlugin3"},
        {"fooPlugin2"},
        NODE_ADD,
        None,
        {
            "fooPlugin1": [(NODE_ADD, _Q)],
            "fooPlugin2": [(NODE_ADD, _Q)],
            "fooPlugin3": [(NODE_ADD, _Q)],
            "fooPlugin4": [(NODE_ADD, _E)],
        },
        _Strategy.IMMEDIATELY,
        2,
    ),
    (
        "interprets Queue from the Unschedulable plugin as queueAfterBackoff",
        {"fooPlugin1", "fooPlugin2"},
        set(),
        NODE_ADD,
        None,
        {"fooPlugin1": [(NODE_ADD, _S)], "fooPlugin2": [(NODE_ADD, _Q)]},
        _Strategy.AFTER_BACKOFF,
        2,
    ),
    (
        "Queueing hint function that isn't from the plugin in UnschedulablePlugins/PendingPlugins is ignored",
        {"fooPlugin1", "fooPlugin2"},
        set(),
        NODE_ADD,
        None,
        {"fooPlugin1": [(NODE_ADD, _S)], "fooPlugin2": [(NODE_ADD, _S)], "fooPlugin3": [(NODE_ADD, _Q)]},
        _Strategy.SKIP,
        2,
    ),
    (
        "If event is specific Node update event, queueing hint function for "
        "NodeUpdate/UpdateNodeLabel is also executed",
        {"fooPlugin1", "fooPlugin2"},
        set(),
        _NODE_LABEL,
        None,
        {
            "fooPlugin1": [(_NODE_LABEL, _Q), (_NODE_UPDATE, _Q), (NODE_ADD, _Q)],
            "fooPlugin2": [(_NODE_LABEL, _Q)],
        },
        _Strategy.AFTER_BACKOFF,
        1,
    ),
    (
        "If event with '*' Resource, queueing hint function for specified Resource is also executed",
        {"fooPlugin1"},
        set(),
        NODE_ADD,
        None,
        {"fooPlugin1": [(_WILD_ADD, _Q)]},
        _Strategy.AFTER_BACKOFF,
        1,
    ),
    (
        "If event is a wildcard one, queueing hint function for all kinds of events is executed",
        {"fooPlugin1"},
        set(),
        ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT),
        None,
        {"fooPlugin1": [(_WILD_ALL, _Q)]},
        _Strategy.AFTER_BACKOFF,
        1,
    ),
]


@pytest.mark.parametrize(
    ("name", "unsched", "pending", "event", "new_obj", "hints", "want", "want_calls"),
    WORTH_CASES,
    ids=[c[0] for c in WORTH_CASES],
)
def test_is_pod_worth_requeuing(
    name: str,
    unsched: set[str],
    pending: set[str],
    event: ClusterEvent,
    new_obj: Any,
    hints: Any,
    want: _Strategy,
    want_calls: int,
) -> None:
    """Test_isPodWorthRequeuing."""
    global _calls
    _calls = 0
    q = new_queue(queueing_hints=hints)
    info = qpi(_THIS_POD, *unsched, pending=pending)
    assert q._is_pod_worth_requeuing(info, event, None, new_obj) == want
    assert _calls == want_calls


# ---------------------------------------------------------------- pod events and periodic work


def test_pod_scheduling_properties_change() -> None:
    old = make_pod("p", labels={"a": "1"}, requests={"cpu": "500m", "memory": "1Gi"}, gates=["g"])
    new = copy_pod(old)
    assert pod_scheduling_properties_change(new, old) == [EVENT_UNSCHEDULED_POD_UPDATE]
    new.metadata.labels["a"] = "2"
    new.spec.containers[0].resources.requests["cpu"] = "0.25"
    del new.spec.scheduling_gates[:]
    new.spec.tolerations.add(key="k")
    actions = [e.action for e in pod_scheduling_properties_change(new, old)]
    assert actions == [
        ActionType.UPDATE_POD_LABEL,
        ActionType.UPDATE_POD_SCALE_DOWN,
        ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        ActionType.UPDATE_POD_TOLERATIONS,
    ]
    new.spec.node_name = "n1"
    assert pod_scheduling_properties_change(new, old)[0].resource == EventResource.ASSIGNED_POD


def test_event_labels() -> None:
    assert event_label(EVENT_UNSCHEDULED_POD_ADD) == "UnscheduledPodAdd"
    assert event_label(EVENT_UNSCHEDULABLE_TIMEOUT) == "UnschedulableTimeout"
    assert event_label(ClusterEvent(EventResource.NODE, ActionType.UPDATE)) == "NodeUpdate"


async def test_run_flushes_periodically() -> None:
    """run() drives both flushes on the clock: here a fake sleep that advances the fake clock."""
    clock = FakeClock()
    q = new_queue(clock)
    a, b = make_pod("a", uid="a"), make_pod("b", uid="b")
    for pod, plugins in ((a, ()), (b, ("x",))):
        q.add(pod)
        p = pop(q, pod)
        p.unschedulable_plugins = set(plugins)
        q.add_unschedulable_if_not_present(p)
    assert (where(q, a), where(q, b)) == ("backoff", "unschedulable")

    async def fake_sleep(seconds: float) -> None:
        clock.step(seconds / 2)  # two loops share the clock
        await asyncio.sleep(0)

    runner = asyncio.create_task(q.run(sleep=fake_sleep))
    for _ in range(2000):
        await asyncio.sleep(0)
        if where(q, a) == "active" and where(q, b) == "active":
            break
    q.close()
    await asyncio.wait_for(runner, timeout=5)
    assert (where(q, a), where(q, b)) == ("active", "active")


# ---------------------------------------------------------------- property-based: no pod lost or duplicated

GATES_ELIMINATED = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)


def _flaky_hint(pod: pb.Pod, old: Any, new: Any) -> QueueingHint:
    raise RuntimeError("buggy hint")


MACHINE_HINTS: dict[str, list[tuple[ClusterEvent, Any]]] = {
    "NodeFit": [
        (NODE_ADD, queue_hint),
        (ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE), None),
    ],
    "Labels": [
        (ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL), queue_hint),
        (NODE_ADD, skip_hint),
    ],
    "Affinity": [(EVENT_ASSIGNED_POD_ADD, queue_hint)],
    "Flaky": [(PVC_ADD, _flaky_hint)],
    "SchedulingGates": [(GATES_ELIMINATED, queue_hint)],
}
MACHINE_EVENTS = [
    NODE_ADD,
    PVC_ADD,
    PV_UPDATE,
    ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE),
    EVENT_UNSCHEDULABLE_TIMEOUT,
]
REJECTORS = ["NodeFit", "Labels", "Affinity", "Flaky", "Unregistered"]


class QueueMachine(RuleBasedStateMachine):
    """Random operations against the queue; a model tracks which pods exist and which are in
    flight. After every step each existing pod is in exactly one place; at the end, once every
    attempt is over and every gate lifted, every existing pod is popped exactly once."""

    pop_from_backoff = False

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.q = PriorityQueue(
            priority_sort,
            clock=self.clock,
            queueing_hints=MACHINE_HINTS,
            pre_enqueue={"SchedulingGates": gates_pre_enqueue},
            pop_from_backoff=self.pop_from_backoff,
        )
        self.live: dict[str, pb.Pod] = {}
        self.in_flight: dict[str, QueuedPodInfo] = {}
        self.n = 0

    def _key(self, name: str) -> str:
        return f"ns/{name}"

    @initialize(count=st.integers(1, 6))
    def some_pods(self, count: int) -> None:
        for i in range(count):
            self.add(gated=i % 3 == 2, priority=i % 2, label="ab"[i % 2])

    @rule(gated=st.booleans(), priority=st.integers(0, 3), label=st.sampled_from(["a", "b"]))
    def add(self, gated: bool, priority: int, label: str) -> None:
        self.n += 1
        pod = make_pod(
            f"p{self.n}", "ns", priority=priority, labels={"app": label}, gates=["g"] if gated else []
        )
        self.live[pod.metadata.name] = pod
        self.q.add(pod)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.live)))
        self.q.delete(self.live.pop(name))

    @precondition(lambda self: self.live)
    @rule(
        data=st.data(),
        kind=st.sampled_from(["label", "toleration", "ungate", "annotation", "label+toleration"]),
    )
    def update(self, data: st.DataObject, kind: str) -> None:
        # Half the time aim at a pod waiting in unschedulablePods: updates matter most there.
        waiting = sorted(p.metadata.name for p in self.q.unschedulable_pods() if p.metadata.name in self.live)
        pool = waiting if waiting and data.draw(st.booleans()) else sorted(self.live)
        name = data.draw(st.sampled_from(pool))
        old = self.live[name]
        new = copy_pod(old)
        if "label" in kind:
            new.metadata.labels["app"] = "b" if old.metadata.labels.get("app") == "a" else "a"
        if "toleration" in kind:
            new.spec.tolerations.add(key="t")
        if kind == "ungate":
            del new.spec.scheduling_gates[:]
        if kind == "annotation":
            new.metadata.annotations["n"] = str(self.n)
        self.live[name] = new
        self.q.update(old, new)

    @rule()
    def pop(self) -> None:
        p = self.q.try_pop()
        if p is None:
            return
        name = p.pod.metadata.name
        assert name in self.live, f"popped {name}, which was deleted or bound"
        assert name not in self.in_flight
        assert not p.gated and not self.live[name].spec.scheduling_gates
        self.in_flight[name] = p

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data(), rejectors=st.sets(st.sampled_from(REJECTORS), max_size=2), pending=st.booleans())
    def fail(self, data: st.DataObject, rejectors: set[str], pending: bool) -> None:
        self._fail(data.draw(st.sampled_from(sorted(self.in_flight))), rejectors, pending)

    @rule(rejectors=st.sets(st.sampled_from(REJECTORS), max_size=2), pending=st.booleans())
    def pop_and_fail(self, rejectors: set[str], pending: bool) -> None:
        before = set(self.in_flight)
        self.pop()
        for name in set(self.in_flight) - before:
            self._fail(name, rejectors, pending)

    def _fail(self, name: str, rejectors: set[str], pending: bool) -> None:
        p = self.in_flight.pop(name)
        if pending and rejectors:
            first = sorted(rejectors)[0]
            p.pending_plugins = {first}
            p.unschedulable_plugins = rejectors - {first}
        else:
            p.unschedulable_plugins = set(rejectors)
        self.q.add_unschedulable_if_not_present(p, self.q.scheduling_cycle)

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def bind(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.in_flight)))
        p = self.in_flight.pop(name)
        self.q.done(p.pod.metadata.uid)
        pod = self.live.pop(name, None)
        if pod is not None:  # the scheduler drops assigned pods from the queue
            self.q.delete(pod)

    @rule(event=st.sampled_from(MACHINE_EVENTS))
    def cluster_event(self, event: ClusterEvent) -> None:
        self.q.move_all_to_active_or_backoff(event)

    @rule(label=st.sampled_from(["a", "b"]))
    def assigned_pod_added(self, label: str) -> None:
        self.q.assigned_pod_added(make_pod("bound", "ns", labels={"app": label}, node="n1"))

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def activate(self, data: st.DataObject) -> None:
        self.q.activate([self.live[data.draw(st.sampled_from(sorted(self.live)))]])

    @rule(seconds=st.sampled_from([0.0, 0.3, 1.0, 2.5, 10.0, 61.0, 301.0]))
    def advance(self, seconds: float) -> None:
        self.clock.step(seconds)

    @rule()
    def flush_backoff(self) -> None:
        self.q.flush_backoff_completed()

    @rule()
    def flush_leftover(self) -> None:
        self.q.flush_unschedulable_pods_leftover()

    @invariant()
    def each_pod_in_exactly_one_place(self) -> None:
        flying = {p.metadata.name for p in self.q.in_flight_pods()}
        assert flying == set(self.in_flight)
        queued = 0
        for name, pod in self.live.items():
            places = self.q.where(self._key(name))
            if name in self.in_flight:
                assert places == [], f"{name} is in flight and also in {places}"
                continue
            assert len(places) == 1, f"{name} is in {places}"
            queued += 1
            if pod.spec.scheduling_gates:
                info = self.q.get_pod(name, "ns")
                assert places == ["unschedulable"] and info is not None and info.gated
        assert sum(self.q.pending_pods().values()) == queued  # nothing else is queued

    def teardown(self) -> None:
        for p in list(self.in_flight.values()):  # end every attempt with an error
            p.unschedulable_plugins = set()
            self.q.add_unschedulable_if_not_present(p)
        self.in_flight.clear()
        for name, pod in list(self.live.items()):
            if pod.spec.scheduling_gates:
                new = copy_pod(pod)
                del new.spec.scheduling_gates[:]
                self.live[name] = new
                self.q.update(pod, new)
        self.clock.step(DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION + 100)
        self.q.flush_unschedulable_pods_leftover()
        self.clock.step(20)
        self.q.flush_backoff_completed()
        popped: list[str] = []
        while (p := self.q.try_pop()) is not None:
            popped.append(p.pod.metadata.name)
            self.q.done(p.pod.metadata.uid)
        assert sorted(popped) == sorted(self.live), "a pod was lost or popped twice"
        assert self.q.pending_pods() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


class QueueMachinePopFromBackoff(QueueMachine):
    pop_from_backoff = True


_machine_settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestQueueMachine = QueueMachine.TestCase
TestQueueMachine.settings = _machine_settings
TestQueueMachinePopFromBackoff = QueueMachinePopFromBackoff.TestCase
TestQueueMachinePopFromBackoff.settings = _machine_settings
