"""The pieces around the scheduling loop: metrics exposition, the health server, the PodScheduled
condition rules, event aggregation, and which informer events go to the cache or the queue."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import aiohttp
import pytest

from kse.client.errors import FencedError, NotFoundError
from kse.scrape import histogram_quantile, http_get, parse_exposition, sample_sum
from proto import kse_pb2 as pb
from scheduler.cache.cache import Cache
from scheduler.eventhandlers import EventHandlers, node_scheduling_properties_change
from scheduler.events import WARNING, EventRecorder, truncate_message
from scheduler.framework.plugins.queuesort import PrioritySort
from scheduler.framework.types import ActionType, PodInfo
from scheduler.metrics import Registry, SchedulerMetrics, exponential_buckets
from scheduler.queue.scheduling_queue import PriorityQueue
from scheduler.server import HealthServer
from scheduler.status import PodStatusUpdater, unschedulable, update_pod_condition

# ---------------------------------------------------------------- metrics


def test_exposition_format_and_upstream_buckets() -> None:
    m = SchedulerMetrics()
    m.pod_scheduled("default-scheduler", 0.0031)
    m.pod_unschedulable("default-scheduler", 20.0)
    m.pending_pods.set(3, "active")
    text = m.expose()
    assert "# TYPE scheduler_schedule_attempts_total counter" in text
    # Labels sorted by name, as Go's client prints them; values as prometheus_client prints floats.
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0' in text
    assert 'scheduler_pending_pods{queue="active"} 3.0' in text
    assert "_created" not in text  # OpenMetrics-only series, which kube-scheduler does not expose
    assert "scheduler_queue_incoming_pods_total" not in text  # no series yet: no family, as Go
    # ExponentialBuckets(0.001, 2, 15).
    les = [
        lbl["le"]
        for lbl, _ in parse_exposition(text)["scheduler_scheduling_attempt_duration_seconds_bucket"]
        if lbl["result"] == "scheduled"
    ]
    assert les[:4] == ["0.001", "0.002", "0.004", "0.008"] and les[-2:] == ["16.384", "+Inf"]
    # 20 s is above the last finite bucket: only +Inf and the count see it.
    samples = parse_exposition(text)
    assert sample_sum(samples, "scheduler_scheduling_attempt_duration_seconds_bucket", result="unschedulable",
                      le="16.384") == 0  # fmt: skip
    assert (
        sample_sum(samples, "scheduler_scheduling_attempt_duration_seconds_count", result="unschedulable")
        == 1
    )
    assert exponential_buckets(0.01, 2, 20)[-1] == pytest.approx(5242.88)


def test_label_escaping_round_trips() -> None:
    r = Registry()
    c = r.counter("x_total", "help", ("a",))
    c.inc('quo"te\\back\nline')
    assert parse_exposition(r.expose())["x_total"] == [({"a": 'quo"te\\back\nline'}, 1.0)]
    with pytest.raises(ValueError):
        c.inc("1", "2")
    with pytest.raises(ValueError):
        c.inc(amount=-1, a="x")


def test_each_scheduler_metrics_has_its_own_registry() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()  # no "Duplicated timeseries" from a global registry
    a.incoming("active", "PodAdd")
    b.queue_incoming_pods.inc(queue="active", event="PodAdd", amount=2)  # by name: the same series
    b.incoming("active", "PodAdd")
    assert sample_sum(parse_exposition(a.expose()), "scheduler_queue_incoming_pods_total") == 1
    assert parse_exposition(b.expose())["scheduler_queue_incoming_pods_total"] == [
        ({"event": "PodAdd", "queue": "active"}, 3.0)
    ]
    with pytest.raises(ValueError, match=r"scheduler_queue_incoming_pods_total.*missing"):
        b.queue_incoming_pods.inc(queue="active")
    with pytest.raises(ValueError, match="registered twice"):
        b.registry.counter("scheduler_queue_incoming_pods_total", "again")


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    r = Registry()
    h = r.histogram("lat_seconds", "help", [0.1, 0.2, 0.4])
    for v in (0.05, 0.15, 0.15, 0.3, 5.0):
        h.observe(v)
    s = parse_exposition(r.expose())
    assert histogram_quantile(0.5, s, "lat_seconds") == pytest.approx(0.1 + 0.1 * (2.5 - 1) / 2)
    assert histogram_quantile(0.99, s, "lat_seconds") == 0.4  # in +Inf: the highest finite bound
    assert math.isnan(histogram_quantile(0.5, s, "absent"))


def test_request_observer_maps_verbs_to_methods() -> None:
    m = SchedulerMetrics()
    m.observe_request("h:1", "create", "pods/binding", "OK", 0.01)
    m.observe_request("h:1", "update", "pods/status", "ABORTED", 0.02)
    m.observe_request("h:1", "watch", "pods", "OK", 300.0)
    s = parse_exposition(m.expose())
    assert sample_sum(s, "rest_client_requests_total", method="POST", resource="pods/binding", code="OK") == 1
    assert sample_sum(s, "rest_client_requests_total", method="PUT", code="ABORTED") == 1
    assert sample_sum(s, "rest_client_request_duration_seconds_count") == 2  # not the watch


# ---------------------------------------------------------------- health server


async def test_health_endpoints() -> None:
    ready = {"ok": False}
    async with HealthServer(
        "127.0.0.1:0",
        healthz={"loop": lambda: (True, "ok")},
        readyz={"sync": lambda: (ready["ok"], "not yet")},
        metrics=lambda: "m 1\n",
    ) as server:
        assert await http_get(server.address, "/healthz") == (200, "ok")
        assert await http_get(server.address, "/livez") == (200, "ok")
        status, body = await http_get(server.address, "/readyz")
        assert status == 500
        assert body == "[+]ping ok\n[-]sync failed: reason withheld\nreadyz check failed\n"
        ready["ok"] = True
        assert await http_get(server.address, "/readyz") == (200, "ok")
        status, body = await http_get(server.address, "/readyz?verbose")
        assert status == 200 and "[+]sync ok" in body
        assert await http_get(server.address, "/readyz/sync") == (200, "ok")
        assert (await http_get(server.address, "/readyz/nope"))[0] == 404
        assert await http_get(server.address, "/metrics") == (200, "m 1\n")
        assert (await http_get(server.address, "/other"))[0] == 404
        assert await http_get(server.address, "/readyz/") == (200, "ok")  # a trailing slash is the same
        async with aiohttp.ClientSession() as session:
            async with session.post(f"http://{server.address}/healthz") as reply:
                assert (reply.status, await reply.text()) == (405, "method not allowed\n")
            async with session.head(f"http://{server.address}/metrics") as reply:
                assert reply.status == 200 and reply.headers["Content-Length"] == "4"
                assert reply.headers["X-Content-Type-Options"] == "nosniff"
                assert await reply.read() == b""
        # The metrics port is plain HTTP/1.1: a request without Host is refused, not served.
        host, port = server.address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /healthz HTTP/1.1\r\n\r\n")
        assert (await reader.read()).split(b"\r\n", 1)[0].split(b" ")[1] == b"400"
        writer.close()


# ---------------------------------------------------------------- PodScheduled condition


def test_condition_written_only_when_it_changes() -> None:
    status = pb.PodStatus()
    assert update_pod_condition(status, unschedulable("0/3 nodes are available: 3 Insufficient cpu."), "t1")
    (cond,) = status.conditions
    assert (cond.type, cond.status, cond.reason, cond.last_transition_time) == (
        "PodScheduled", "False", "Unschedulable", "t1",
    )  # fmt: skip
    assert not update_pod_condition(
        status, unschedulable("0/3 nodes are available: 3 Insufficient cpu."), "t2"
    )
    # Another message: written, but the status did not change, so neither does the transition time.
    assert update_pod_condition(status, unschedulable("0/4 nodes are available: 4 Insufficient cpu."), "t3")
    assert status.conditions[0].last_transition_time == "t1"
    status.conditions[0].status = "True"
    assert update_pod_condition(status, unschedulable("x"), "t4")
    assert status.conditions[0].last_transition_time == "t4"


# ---------------------------------------------------------------- events


class FakeEvents:
    def __init__(self) -> None:
        self.stored: dict[str, pb.Event] = {}
        self.creates = 0
        self.updates = 0

    async def create(self, ev: pb.Event, *, fence: Any = None) -> pb.Event:
        self.creates += 1
        out = pb.Event()
        out.CopyFrom(ev)
        out.metadata.resource_version = str(self.creates + self.updates)
        self.stored[ev.metadata.name] = out
        return out

    async def update(self, ev: pb.Event, *, fence: Any = None) -> pb.Event:
        if ev.metadata.name not in self.stored:
            raise NotFoundError(f'events "{ev.metadata.name}" not found')
        self.updates += 1
        out = pb.Event()
        out.CopyFrom(ev)
        self.stored[ev.metadata.name] = out
        return out


class FakeClientset:
    def __init__(self) -> None:
        self.events = FakeEvents()
        self.batch_creates = False


async def test_repeated_events_are_aggregated_into_a_count() -> None:
    cs = FakeClientset()
    rec = EventRecorder(cs, instance="s1", writers=2)  # type: ignore[arg-type]
    pod = pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="ns", uid="u1", resource_version="7"))
    runner = asyncio.create_task(rec.run())
    try:
        for _ in range(3):
            rec.eventf(pod, WARNING, "FailedScheduling", "Scheduling", "0/1 nodes are available: x.",
                       component="default-scheduler")  # fmt: skip
        rec.eventf(
            pod, WARNING, "FailedScheduling", "Scheduling", "another message", component="default-scheduler"
        )
        await asyncio.wait_for(rec.wait_idle(), 5)
        events = sorted(cs.events.stored.values(), key=lambda e: e.message)
        assert [(e.message, e.count) for e in events] == [
            ("0/1 nodes are available: x.", 3),
            ("another message", 1),
        ]
        ev = events[0]
        assert ev.metadata.name.startswith("p.") and ev.metadata.namespace == "ns"
        assert (ev.involved_object.kind, ev.involved_object.uid, ev.involved_object.resource_version) == (
            "Pod", "u1", "7",
        )  # fmt: skip
        assert ev.source.component == "default-scheduler" and ev.reporting_instance == "s1"
        assert ev.type == "Warning" and ev.action == "Scheduling" and ev.event_time
        # The stored event vanished: the next repeat creates a fresh one.
        cs.events.stored.clear()
        rec.eventf(pod, WARNING, "FailedScheduling", "Scheduling", "0/1 nodes are available: x.",
                   component="default-scheduler")  # fmt: skip
        await asyncio.wait_for(rec.wait_idle(), 5)
        assert [e.count for e in cs.events.stored.values()] == [1]
    finally:
        runner.cancel()


def token(transitions: int) -> pb.FenceToken:
    return pb.FenceToken(
        lease_namespace="kube-system", lease_name="kube-scheduler", holder_identity="s1",
        lease_transitions=transitions,
    )  # fmt: skip


class FencingEvents(FakeEvents):
    """Refuses every write whose token is not `current` (FAILED_PRECONDITION); records the tokens."""

    def __init__(self, current: pb.FenceToken) -> None:
        super().__init__()
        self.current = current
        self.tokens: list[pb.FenceToken | None] = []

    async def create(self, ev: pb.Event, *, fence: Any = None) -> pb.Event:
        self.tokens.append(fence)
        if fence != self.current:
            raise FencedError(f'events "{ev.metadata.name}": lease kube-system/kube-scheduler moved on')
        return await super().create(ev, fence=fence)


async def test_events_carry_the_token_they_were_recorded_under_and_report_a_refusal() -> None:
    cs = FakeClientset()
    cs.events = events = FencingEvents(current=token(2))
    now = token(1)
    fenced: list[pb.FenceToken] = []
    rec = EventRecorder(cs, writers=1, fence=lambda: now, on_fenced=fenced.append)  # type: ignore[arg-type]
    pod = pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="ns", uid="u1"))
    rec.eventf(pod, WARNING, "FailedScheduling", "Scheduling", "decided in term 1", component="c")
    now = token(2)  # the next term began before the writer ran: the event keeps term 1's token
    rec.eventf(pod, WARNING, "FailedScheduling", "Scheduling", "decided in term 2", component="c")
    runner = asyncio.create_task(rec.run())
    try:
        await asyncio.wait_for(rec.wait_idle(), 5)
        assert events.tokens == [token(1), token(2)]
        assert [e.message for e in events.stored.values()] == ["decided in term 2"]
        assert fenced == [token(1)] and rec.fenced == 1 and rec.failed == 0
    finally:
        runner.cancel()
    # What a term leaves queued is dropped when it ends.
    for i in range(3):
        rec.eventf(pod, WARNING, "R", "A", f"m{i}", component="c")
    assert rec.discard_pending() == 3
    await asyncio.wait_for(rec.wait_idle(), 1)


class FencingPods:
    def __init__(self, current: pb.FenceToken) -> None:
        self.current = current
        self.tokens: list[pb.FenceToken | None] = []

    async def update_status(self, pod: pb.Pod, *, fence: Any = None) -> pb.Pod:
        self.tokens.append(fence)
        if fence != self.current:
            raise FencedError(f'pods "{pod.metadata.name}": lease kube-system/kube-scheduler moved on')
        return pod


async def test_conditions_carry_the_token_they_were_submitted_under_and_are_not_retried() -> None:
    class Pods:
        pods = FencingPods(current=token(2))

    cs = Pods()
    now = token(1)
    fenced: list[pb.FenceToken] = []
    updater = PodStatusUpdater(cs, fence=lambda: now, on_fenced=fenced.append)  # type: ignore[arg-type]
    p1 = pb.Pod(metadata=pb.ObjectMeta(name="p1", namespace="ns", uid="u1", resource_version="1"))
    p2 = pb.Pod(metadata=pb.ObjectMeta(name="p2", namespace="ns", uid="u2", resource_version="1"))
    updater.submit(p1, unschedulable("term 1"))
    now = token(2)
    updater.submit(p2, unschedulable("term 2"))
    runner = asyncio.create_task(updater.run())
    try:
        await asyncio.wait_for(updater.wait_idle(), 5)
        assert sorted(cs.pods.tokens, key=lambda t: t.lease_transitions) == [token(1), token(2)]
        assert fenced == [token(1)] and updater.fenced == 1 and updater.written == 1
        assert updater.failed == 0
    finally:
        runner.cancel()
    # Not yet running when the term ends: dropped.
    updater2 = PodStatusUpdater(cs, fence=lambda: now)  # type: ignore[arg-type]
    updater2.submit(p1, unschedulable("x"))
    assert updater2.discard_pending() == 1
    await asyncio.wait_for(updater2.wait_idle(), 1)


async def test_status_writes_set_and_clear_the_nominated_node() -> None:
    """upstream updatePod: nominatedNodeName is written with the condition when it changes; a
    newer condition for the same pod does not drop a nomination not yet written."""

    class Pods:
        def __init__(self) -> None:
            self.written: list[pb.Pod] = []

        async def update_status(self, pod: pb.Pod, *, fence: Any = None) -> pb.Pod:
            out = pb.Pod()
            out.CopyFrom(pod)
            self.written.append(out)
            return pod

    class Cs:
        pods = Pods()

    cs = Cs()
    updater = PodStatusUpdater(cs)  # type: ignore[arg-type]
    p = pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="ns", uid="u", resource_version="1"))
    updater.submit(p, unschedulable("first"), "node-1")
    updater.submit(p, unschedulable("second"))  # coalesced before any write ran
    runner = asyncio.create_task(updater.run())
    try:
        await asyncio.wait_for(updater.wait_idle(), 5)
        (written,) = cs.pods.written
        assert written.status.nominated_node_name == "node-1"
        assert written.status.conditions[0].message == "second"
        # The same condition and node: nothing to write; "" clears the nomination.
        nominated = written
        updater.submit(nominated, unschedulable("second"), "node-1")
        await asyncio.wait_for(updater.wait_idle(), 5)
        assert len(cs.pods.written) == 1
        updater.submit(nominated, unschedulable("second"), "")
        await asyncio.wait_for(updater.wait_idle(), 5)
        assert cs.pods.written[-1].status.nominated_node_name == ""
    finally:
        runner.cancel()


def test_event_queue_drops_when_full() -> None:
    rec = EventRecorder(FakeClientset(), max_queued=2)  # type: ignore[arg-type]
    pod = pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="ns"))
    for i in range(5):
        rec.eventf(pod, WARNING, "R", "A", f"m{i}", component="c")
    assert rec.dropped == 3
    assert truncate_message("x" * 2000).endswith(" ...") and len(truncate_message("x" * 2000)) == 1024


# ---------------------------------------------------------------- event handlers


def node(name: str, **labels: str) -> pb.Node:
    n = pb.Node(metadata=pb.ObjectMeta(name=name, labels=labels))
    n.status.allocatable.update({"cpu": "4", "memory": "8Gi", "pods": "10"})
    return n


def test_node_update_events_as_upstream() -> None:
    old = node("n", a="1")
    new = pb.Node()
    new.CopyFrom(old)
    assert node_scheduling_properties_change(new, old) == []
    new.status.allocatable["cpu"] = "4000m"  # the same quantity: no change
    assert node_scheduling_properties_change(new, old) == []
    new.status.allocatable["cpu"] = "8"
    new.metadata.labels["b"] = "2"
    new.spec.taints.add(key="k", effect="NoSchedule")
    new.status.conditions.add(type="Ready", status="True")
    new.metadata.annotations["x"] = "y"
    actions = [e.action for e in node_scheduling_properties_change(new, old)]
    assert actions == [
        ActionType.UPDATE_NODE_ALLOCATABLE,
        ActionType.UPDATE_NODE_LABEL,
        ActionType.UPDATE_NODE_TAINT,
        ActionType.UPDATE_NODE_CONDITION,
        ActionType.UPDATE_NODE_ANNOTATION,
    ]
    cordoned = pb.Node()
    cordoned.CopyFrom(old)
    cordoned.spec.unschedulable = True
    assert node_scheduling_properties_change(cordoned, old) == []  # less schedulable: nothing to retry
    assert [e.action for e in node_scheduling_properties_change(old, cordoned)] == [
        ActionType.UPDATE_NODE_TAINT
    ]


def pod(name: str, node_name: str = "", scheduler: str = "default-scheduler", rv: str = "1") -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version=rv))
    p.spec.containers.add(name="c").resources.requests.update({"cpu": "1"})
    p.spec.node_name = node_name
    p.spec.scheduler_name = scheduler
    return p


@pytest.fixture
def handlers() -> EventHandlers:
    queue = PriorityQueue(PrioritySort().less)
    return EventHandlers(cache=Cache(), queue=queue, profiles={"default-scheduler"})


def test_unassigned_pods_of_our_profiles_go_to_the_queue(handlers: EventHandlers) -> None:
    handlers.add_node(node("n1"))
    handlers.add_pod(pod("mine"))
    handlers.add_pod(pod("theirs", scheduler="other-scheduler"))
    handlers.add_pod(pod("bound", node_name="n1", scheduler="other-scheduler"))
    assert [p.metadata.name for p in handlers.queue.pods_in_active_q()] == ["mine"]
    assert [(i.pod.metadata.name, n) for i, n, _ in handlers.cache.pods()] == [("bound", "n1")]
    # The same object again (a resync) does not touch the queue; a real update does.
    handlers.update_pod(pod("mine"), pod("mine"))
    handlers.update_pod(pod("mine"), pod("mine", rv="2"))
    assert handlers.queue.pods_in_active_q()[0].metadata.resource_version == "2"
    handlers.delete_pod(pod("mine", rv="2"))
    assert handlers.queue.pods_in_active_q() == []


def test_the_binding_moves_a_pod_from_the_queue_to_the_cache(handlers: EventHandlers) -> None:
    handlers.add_node(node("n1"))
    handlers.add_pod(pod("p"))
    qpi = handlers.queue.try_pop()
    assert qpi is not None
    handlers.cache.assume_pod(qpi.pod_info, "n1")
    # Updates of a pod whose binding is in flight are ignored ...
    handlers.update_pod(pod("p"), pod("p", rv="2"))
    assert handlers.queue.pods_in_active_q() == []
    # ... and the bound pod confirms the assumed one.
    handlers.update_pod(pod("p", rv="2"), pod("p", node_name="n1", rv="3"))
    assert not handlers.cache.is_assumed_pod(qpi.pod)
    assert handlers.cache.pod_count() == 1
    handlers.queue.done(qpi.pod_info.uid_key)
    assert sum(handlers.queue.pending_pods().values()) == 0
    handlers.delete_pod(pod("p", node_name="n1", rv="4"))
    assert handlers.cache.pod_count() == 0


def test_deleting_an_assumed_pod_frees_its_resources_at_once(handlers: EventHandlers) -> None:
    handlers.add_node(node("n1"))
    handlers.add_pod(pod("p"))
    qpi = handlers.queue.try_pop()
    assert qpi is not None
    handlers.cache.assume_pod(qpi.pod_info, "n1")
    assert handlers.cache.node_info("n1").requested.milli_cpu == 1000  # type: ignore[union-attr]
    going = pod("p", rv="2")
    going.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    handlers.update_pod(pod("p"), going)
    assert handlers.cache.pod_count() == 0
    assert handlers.cache.node_info("n1").requested.milli_cpu == 0  # type: ignore[union-attr]


def test_a_stale_deleted_object_still_cleans_the_cache(handlers: EventHandlers) -> None:
    handlers.add_node(node("n1"))
    handlers.add_pod(pod("p", node_name="n1"))
    # A relist found the pod gone; the last state it knows is from before the binding.
    handlers.delete_pod(pod("p"))
    assert handlers.cache.pod_count() == 0
    handlers.delete_node(node("n1"))
    assert handlers.cache.node_count() == 0


def test_pod_info_of_a_confirmed_pod_is_derived_once(handlers: EventHandlers) -> None:
    handlers.add_node(node("n1"))
    info = PodInfo(pod("p"))
    assert info.requests == {"cpu": 1000}
    handlers.cache.assume_pod(info, "n1")
    handlers.add_pod(pod("p", node_name="n1", rv="2"))
    got = handlers.cache.get_pod(info.pod)
    assert got is not None and got[0].requests is info.requests


def test_metric_readers_see_what_was_recorded() -> None:
    """The readers tests use (`value`, `count`, `sum`) read back each series, 0 before any."""
    m = SchedulerMetrics()
    assert m.schedule_attempts.value("error", "default-scheduler") == 0
    m.schedule_attempts.inc("error", "default-scheduler")
    m.schedule_attempts.inc("error", "default-scheduler")
    assert m.schedule_attempts.value("error", "default-scheduler") == 2
    assert m.schedule_attempts.value(result="error", profile="default-scheduler") == 2
    assert m.schedule_attempts.value("scheduled", "default-scheduler") == 0
    m.permit_wait_duration.observe(0.5, "success")
    m.permit_wait_duration.observe(0.25, "success")
    assert (m.permit_wait_duration.count("success"), m.permit_wait_duration.sum("success")) == (2, 0.75)
    assert m.permit_wait_duration.count("rejected") == 0
