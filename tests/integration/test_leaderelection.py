"""Leader election against a real API server process (real etcd, mTLS, per-identity authz).

Three electors run in this test process, each over its own mTLS channel with its own scheduler
identity (`scheduler-1..3` of the PKI, all `system:kube-scheduler`, which may create and update
leases in kube-system). A monitor samples every elector's `is_leader()` every few milliseconds
throughout: never two at once. Timing goals belong to the failover benchmark; the bounds here are
sanity bounds only, chosen so that each one tells the strategies apart (a poll could not meet the
watch bound; a takeover before the lease duration would be a safety bug).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kse.client.clientset import Clientset
from kse.leaderelection import (
    ClientsetLeaseClient,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    LeaderTerm,
    Strategy,
)
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.polling import until

pytestmark = pytest.mark.integration

NS, NAME = "kube-system", "kube-scheduler"
IDENTITIES = ("scheduler-1", "scheduler-2", "scheduler-3")
DEADLINE = 15.0


@dataclass
class Candidate:
    elector: LeaderElector
    task: asyncio.Task[None] | None = None
    events: list[tuple[float, str]] = field(default_factory=list)

    @property
    def identity(self) -> str:
        return self.elector.identity


@dataclass
class Election:
    candidates: list[Candidate]
    admin: Clientset
    violations: list[str] = field(default_factory=list)

    def leaders(self) -> list[Candidate]:
        return [c for c in self.candidates if c.elector.is_leader()]

    def running(self) -> list[Candidate]:
        return [c for c in self.candidates if c.task is not None and not c.task.done()]

    async def lease(self) -> pb.Lease:
        return await self.admin.leases.get(NS, NAME)


def recording(events: list[tuple[float, str]]) -> LeaderCallbacks:
    def started(term: LeaderTerm) -> None:
        events.append((time.monotonic(), "started"))

    def stopped() -> None:
        events.append((time.monotonic(), "stopped"))

    return LeaderCallbacks(on_started_leading=started, on_stopped_leading=stopped)


@contextlib.asynccontextmanager
async def election(apiserver: ApiServer, **cfg: Any) -> AsyncIterator[Election]:
    """Three electors (one per scheduler identity) and an at-most-one-leader monitor."""
    candidates = []
    for identity in IDENTITIES:
        channel = await apiserver.channel(identity)
        client = ClientsetLeaseClient(
            Clientset(channel, user_agent=f"kse-scheduler/{identity}/leader-election")
        )
        events: list[tuple[float, str]] = []
        elector = LeaderElector(LeaderElectionConfig(identity=identity, **cfg), client, recording(events))
        candidates.append(Candidate(elector, events=events))
    admin = Clientset(await apiserver.channel("admin"))
    el = Election(candidates, admin)

    async def monitor() -> None:
        while True:
            leaders = [c.identity for c in el.leaders()]
            if len(leaders) > 1:
                el.violations.append(f"{time.monotonic():.3f}: {leaders}")
            await asyncio.sleep(0.001)

    mon = asyncio.create_task(monitor())
    try:
        for cand in candidates:
            cand.task = asyncio.create_task(cand.elector.run(), name=f"elector/{cand.identity}")
        yield el
        assert not el.violations, f"two leaders at once: {el.violations[:5]}"
    finally:
        mon.cancel()
        for cand in candidates:
            cand.elector.stop()
        await asyncio.gather(*(c.task for c in candidates if c.task is not None), return_exceptions=True)
        with contextlib.suppress(asyncio.CancelledError):
            await mon


def term_of(c: Candidate) -> LeaderTerm:
    term = c.elector.term
    assert term is not None, f"{c.identity} is not leading"
    return term


async def test_watch_three_electors_one_leader_and_takeover_on_release(apiserver: ApiServer) -> None:
    # retryPeriod 3 s: a polling standby could not take over within the 2.5 s bound below, so
    # meeting it shows the watch acted on the release.
    async with election(apiserver, lease_duration=5.0, renew_deadline=4.0, retry_period=3.0) as el:
        await until(lambda: len(el.leaders()) == 1, "a leader")
        await until(lambda: all(c.elector.watch_connected for c in el.running()), "standby watches")
        (first,) = el.leaders()
        first_term = term_of(first)
        lease = await el.lease()
        assert lease.spec.holder_identity == first.identity
        assert lease.spec.lease_duration_seconds == 5
        assert lease.spec.lease_transitions == first_term.lease_transitions == 0
        assert first.elector.fence_token() == pb.FenceToken(
            lease_namespace=NS, lease_name=NAME, holder_identity=first.identity, lease_transitions=0
        )

        for expected_transitions in (1, 2):
            leader = el.leaders()[0]
            released_at = time.monotonic()
            leader.elector.stop()  # releases the lease (release_on_cancel)
            assert leader.task is not None
            await leader.task
            assert leader.events[-1][1] == "stopped"
            took_at = await until(lambda: len(el.leaders()) == 1, "a new leader after the release")
            assert el.leaders()[0] is not leader
            assert took_at - released_at < 2.5, f"takeover took {took_at - released_at:.3f}s"
            (new,) = el.leaders()
            term = term_of(new)
            assert term.lease_transitions == expected_transitions
            lease = await el.lease()
            assert lease.spec.holder_identity == new.identity
            assert lease.spec.lease_transitions == expected_transitions
            # The acquiring write is at least as new as everything before it (the release).
            assert term.acquired_revision > first_term.acquired_revision
            assert int(lease.metadata.resource_version) >= term.acquired_revision


@pytest.mark.parametrize("strategy", [Strategy.POLL, Strategy.WATCH])
async def test_crashed_leader_is_replaced_only_after_the_lease_duration(
    apiserver: ApiServer, strategy: Strategy
) -> None:
    """The leader stops renewing without releasing (a crash): a standby takes over, but not before
    leaseDuration has passed since it observed the last renewal."""
    lease_s, renew_s, retry_s = 2.0, 1.5, 0.3
    async with election(
        apiserver,
        lease_duration=lease_s,
        renew_deadline=renew_s,
        retry_period=retry_s,
        release_on_cancel=False,
        strategy=strategy,
    ) as el:
        await until(lambda: len(el.leaders()) == 1, "a leader")
        await asyncio.sleep(2 * retry_s)  # let it renew a few times
        (leader,) = el.leaders()
        assert leader.task is not None
        leader.task.cancel()  # no release: as if the process died
        crashed_at = time.monotonic()
        await asyncio.gather(leader.task, return_exceptions=True)
        lease = await el.lease()
        assert lease.spec.holder_identity == leader.identity  # still names the dead leader
        # When the dead leader saw its last renewal answered (all electors share this process's
        # monotonic clock, so the times compare): the write had landed by then.
        _, last_renewed = leader.elector.observed()
        took_at = await until(lambda: len(el.leaders()) == 1, "a new leader after the crash")
        (new,) = el.leaders()
        assert new is not leader
        new_term = term_of(new)
        assert new_term.lease_transitions == 1
        # Nobody takes over before leaseDuration has passed since the last renewal (a standby may
        # observe it a little before the leader reads its answer: 0.1 s of slack), nor long after.
        assert new_term.acquired_at >= last_renewed + lease_s - 0.1, new_term.acquired_at - last_renewed
        assert took_at - crashed_at < lease_s + 3 * retry_s * 2.2 + 5.0
        lease = await el.lease()
        assert (lease.spec.holder_identity, lease.spec.lease_transitions) == (new.identity, 1)


async def test_poll_three_electors_one_leader_then_release(apiserver: ApiServer) -> None:
    async with election(
        apiserver, lease_duration=2.0, renew_deadline=1.5, retry_period=0.3, strategy=Strategy.POLL
    ) as el:
        await until(lambda: len(el.leaders()) == 1, "a leader")
        await asyncio.sleep(1.0)
        assert len(el.leaders()) == 1
        (leader,) = el.leaders()
        leader.elector.stop()
        assert leader.task is not None
        await leader.task
        await until(lambda: len(el.leaders()) == 1, "a new leader after the release", within=5.0)
        (new,) = el.leaders()
        assert new is not leader
        lease = await el.lease()
        assert (lease.spec.holder_identity, lease.spec.lease_transitions) == (new.identity, 1)
