"""The Scheduler's terms of leadership, in this process, against a real API server with fencing on.

The elector is played by the test: it hands the scheduler a fence token and a leader check, calls
`lead(term)` and `stop_leading()`, and writes the Lease itself (as admin) to make a token current or
stale. What is checked is the scheduler's side of the contract: it catches up with the revision the
lease was acquired at before it pops anything; a bind refused as fenced stops the leading at once,
is not retried and writes no event or condition; stopping cancels the binds in flight; and whatever
a term leaves behind is forgotten, so the next term schedules the same pods cleanly.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field

import pytest

from kse import failpoints
from kse.client.clientset import Clientset
from kse.leaderelection import LeaderTerm
from proto import kse_pb2 as pb
from scheduler.profile import load_scheduler_config
from scheduler.scheduler import Scheduler, SchedulerOptions
from tests.fixtures.apiserver import ApiServer, ApiServerFactory
from tests.fixtures.objects import NS, cpu_pod, small_node
from tests.fixtures.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

LEASE_NS, LEASE_NAME = "kube-system", "kube-scheduler"
ME = "scheduler-1"


@dataclass
class Env:
    """A leader-elected Scheduler (informers running, no term yet) and the test's elector."""

    sched: Scheduler
    admin: Clientset
    token: pb.FenceToken | None = None
    leader: bool = True
    fenced: list[pb.FenceToken] = field(default_factory=list)

    async def hold(self, holder: str) -> tuple[pb.FenceToken, LeaderTerm]:
        """Write the Lease as held by `holder` in a new term; the token and term of that term."""
        try:
            lease = await self.admin.leases.get(LEASE_NS, LEASE_NAME)
            lease.spec.holder_identity = holder
            lease.spec.lease_transitions += 1
            lease = await self.admin.leases.update(lease)
        except Exception:
            lease = await self.admin.leases.create(
                pb.Lease(
                    metadata=pb.ObjectMeta(namespace=LEASE_NS, name=LEASE_NAME),
                    spec=pb.LeaseSpec(holder_identity=holder, lease_duration_seconds=15, lease_transitions=0),
                )
            )
        transitions = lease.spec.lease_transitions
        term = LeaderTerm(
            identity=holder,
            lease_namespace=LEASE_NS,
            lease_name=LEASE_NAME,
            lease_transitions=transitions,
            acquired_revision=int(lease.metadata.resource_version),
            acquire_time="",
            acquired_at=0.0,
            deadline=0.0,
        )
        return term.fence, term

    def events(self) -> Awaitable[list[pb.Event]]:
        async def get() -> list[pb.Event]:
            return list((await self.admin.events.list(NS)).items)

        return get()


@pytest.fixture
async def env(apiserver_factory: ApiServerFactory) -> AsyncIterator[Env]:
    server: ApiServer = await apiserver_factory("--fencing", "on")
    admin = Clientset(await server.channel("admin"), qps=0)
    for name in ("n1", "n2"):
        await admin.nodes.create(small_node(name))
    cs = Clientset(await server.channel(ME), qps=0)
    sched = Scheduler(load_scheduler_config(), cs, options=SchedulerOptions(identity=ME))
    e = Env(sched, admin)
    sched.set_fence(lambda: e.token)
    sched.set_leader_check(lambda: e.leader)
    sched.on_fenced = e.fenced.append
    task = asyncio.create_task(sched.run(leader_elected=True))
    await asyncio.wait_for(sched.synced.wait(), 15)
    try:
        yield e
    finally:
        sched.stop()
        try:
            await asyncio.wait_for(task, 10)
        finally:
            task.cancel()


async def test_a_fenced_bind_stops_the_term_at_once_and_the_next_term_schedules_the_pod(env: Env) -> None:
    sched, admin = env.sched, env.admin
    stale, term = await env.hold(ME)
    await env.hold("scheduler-2")  # someone else took the lease since: our token is stale
    env.token = stale
    lead = asyncio.create_task(sched.lead(term))
    await admin.pods.create(cpu_pod("p"))

    await asyncio.wait_for(lead, 15)  # the refusal ended the term: lead() returns by itself
    assert env.fenced == [stale]
    assert not sched.leading
    assert sched.binder.failures == 1 and sched.binder.binds == 0  # sent once, never retried
    assert sched.metrics.schedule_attempts.value("error", "default-scheduler") == 1
    assert (await admin.pods.get(NS, "p")).spec.node_name == ""
    # Forgotten and requeued, with no event and no condition written for the refused attempt.
    assert sched.cache.assumed_pod_count() == 0
    assert sched.queue.where(f"{NS}/p") == ["active"]
    await sched.recorder.wait_idle()
    assert [e for e in await env.events() if e.involved_object.name == "p"] == []
    assert not (await admin.pods.get(NS, "p")).status.conditions

    # A new term (the lease is ours again): the same pod is scheduled, under the new token.
    fresh, term2 = await env.hold(ME)
    env.token = fresh
    lead = asyncio.create_task(sched.lead(term2))
    try:
        bound = await eventually(lambda: admin.pods.get(NS, "p"), lambda p: bool(p.spec.node_name), "p bound")
        assert bound.spec.node_name in ("n1", "n2")
        scheduled = await eventually(
            env.events, lambda evs: any(e.reason == "Scheduled" for e in evs), "the Scheduled event"
        )
        assert [e.involved_object.name for e in scheduled if e.reason == "Scheduled"] == ["p"]
        assert env.fenced == [stale]
    finally:
        sched.stop_leading()
        await asyncio.wait_for(lead, 10)


async def test_stop_leading_cancels_the_binds_in_flight_and_forgets_the_term(env: Env) -> None:
    sched, admin = env.sched, env.admin
    env.token, term = await env.hold(ME)
    real_bind = sched.binder.bind
    in_bind = asyncio.Event()

    async def stuck_bind(p: pb.Pod, node_name: str) -> pb.Pod:
        in_bind.set()
        await asyncio.Event().wait()  # an API server that does not answer
        raise AssertionError("unreachable")

    sched.binder.bind = stuck_bind  # type: ignore[method-assign]
    lead = asyncio.create_task(sched.lead(term))
    await admin.pods.create(cpu_pod("p"))
    await asyncio.wait_for(in_bind.wait(), 15)
    assert sched.cache.assumed_pod_count() == 1 and sched.debug_state()["binds_in_flight"] == 1

    sched.stop_leading()  # synchronous: the loop pops nothing more, the bind is cancelled
    await asyncio.wait_for(lead, 10)
    assert sched.cache.assumed_pod_count() == 0
    assert sched.debug_state()["binds_in_flight"] == 0
    assert sched.queue.in_flight_pods() == []
    assert sched.queue.where(f"{NS}/p") == ["active"]

    # The next term starts clean and binds the pod.
    sched.binder.bind = real_bind  # type: ignore[method-assign]
    env.token, term2 = await env.hold(ME)
    lead = asyncio.create_task(sched.lead(term2))
    try:
        await eventually(lambda: admin.pods.get(NS, "p"), lambda p: bool(p.spec.node_name), "p bound")
    finally:
        sched.stop_leading()
        await asyncio.wait_for(lead, 10)


async def test_a_leader_whose_own_clock_says_the_term_is_over_sends_nothing(env: Env) -> None:
    sched, admin = env.sched, env.admin
    env.token, term = await env.hold(ME)
    env.leader = False  # e.g. woken from a pause past its renew deadline
    lead = asyncio.create_task(sched.lead(term))
    await admin.pods.create(cpu_pod("p"))
    await asyncio.wait_for(lead, 15)  # it popped, checked, and stopped
    assert sched.binder.binds == 0 and sched.binder.failures == 0
    assert sched.queue.where(f"{NS}/p") == ["active"]
    assert (await admin.pods.get(NS, "p")).spec.node_name == ""


async def test_a_new_leader_catches_up_with_the_acquired_revision_before_it_binds(env: Env) -> None:
    sched, admin = env.sched, env.admin
    await admin.pods.create(cpu_pod("p"))  # pending before the term begins: in the standby's queue
    await eventually(lambda: sched.queue.where(f"{NS}/p"), lambda w: w == ["active"], "p queued")
    env.token, term = await env.hold(ME)  # acquired at a revision the pod informer has not seen
    informer_rv_at_bind: list[int] = []
    real_bind = sched.binder.bind

    async def bind(p: pb.Pod, node_name: str) -> pb.Pod:
        informer_rv_at_bind.append(int(sched.pod_informer.last_synced_resource_version))
        return await real_bind(p, node_name)

    sched.binder.bind = bind  # type: ignore[method-assign]
    lead = asyncio.create_task(sched.lead(term))
    try:
        await eventually(lambda: admin.pods.get(NS, "p"), lambda p: bool(p.spec.node_name), "p bound")
        assert informer_rv_at_bind and informer_rv_at_bind[0] >= term.acquired_revision
    finally:
        sched.stop_leading()
        await asyncio.wait_for(lead, 10)


def _catch_up_tasks() -> list[str]:
    return sorted(t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("catch-up-"))


async def test_a_new_leader_waits_for_a_node_view_as_new_as_its_lease(env: Env) -> None:
    """A standby whose node watch is down (the failpoint holds its node informer back) must not
    schedule from that view when it becomes leader: n1 was cordoned after the view stopped, so a
    pod that fits only n1 would be bound there; the leader waits, then sees the cordon."""
    sched, admin = env.sched, env.admin
    stale_rv = int(sched.node_informer.last_synced_resource_version)
    failpoints.enable("reflector/deliver-nodes=pause")
    try:
        n1 = await admin.nodes.get("n1")
        n1.spec.unschedulable = True
        await admin.nodes.update(n1)
        p = cpu_pod("only-n1")
        p.spec.node_selector["kubernetes.io/hostname"] = "n1"
        await admin.pods.create(p)
        await eventually(lambda: sched.queue.where(f"{NS}/only-n1"), lambda w: w == ["active"], "queued")
        env.token, term = await env.hold(ME)
        assert int(sched.node_informer.last_synced_resource_version) == stale_rv < term.acquired_revision
        lead = asyncio.create_task(sched.lead(term))
        try:

            async def progress() -> tuple[list[str], str]:
                return _catch_up_tasks(), (await admin.pods.get(NS, "only-n1")).spec.node_name

            _, bound_to = await eventually(
                progress,
                lambda st: st[0] == ["catch-up-node"] or bool(st[1]),
                "the new leader waiting for its node view alone (its pod view caught up), or a bind",
            )
            assert not bound_to, f"bound to {bound_to} from a node view older than the lease"
            assert failpoints.hits("reflector/deliver-nodes") >= 1 and not sched.loop_running
            failpoints.disable()
            await eventually(lambda: sched.loop_running, bool, "the loop started after the catch-up")
            await eventually(
                lambda: sched.queue.where(f"{NS}/only-n1"),
                lambda w: w in (["unschedulable"], ["backoff"]),
                "only-n1 found unschedulable (n1 cordoned)",
            )
            assert not (await admin.pods.get(NS, "only-n1")).spec.node_name
        finally:
            sched.stop_leading()
            await asyncio.wait_for(lead, 10)
    finally:
        failpoints.disable()
