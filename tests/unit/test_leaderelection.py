"""Leader election (kse/leaderelection) on a fake clock and an in-memory Lease store.

Deterministic: time is a `FakeClock` moved by the test, the store (`InMemoryLeaseStore`) has the
API server's semantics (a global revision counter, compare-and-swap on resourceVersion, watches),
and faults are injected per candidate. Several cases re-express client-go's
`tools/leaderelection/leaderelection_test.go` (TestTryAcquireOrRenew: "acquire from no object",
"acquire from unled object", "acquire from led, unacked object", "don't acquire from led, acked
object", "acquire from led object with the lease duration seconds"); the rest check kse's rules:
expiry judged from the local observation time only, the stricter renew deadline, stopping at once,
fence tokens that change every term, and the watch strategy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kse.client.errors import UnavailableError
from kse.leaderelection import (
    JITTER_FACTOR,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionConfigError,
    LeaderElectionRecord,
    LeaderElector,
    LeaderTerm,
    SkewedClock,
    Strategy,
    jitter,
)
from kse.leaderelection.clock import Clock
from kse.objects.timeutil import format_micro_time
from proto import kse_pb2 as pb
from tests.fixtures.leaderelection import FakeClock, InMemoryLeaseStore

NS, NAME = "kube-system", "kube-scheduler"
LEASE, RENEW, RETRY = 15.0, 10.0, 2.0


# ---------------------------------------------------------------- harness


@dataclass
class Recorder:
    """Callback calls of every elector, in order: (time, identity, what, detail)."""

    clock: Clock
    calls: list[tuple[float, str, str, Any]] = field(default_factory=list)

    def callbacks(self, name: str, *, leading: Callable[[LeaderTerm], Any] | None = None) -> LeaderCallbacks:
        def started(term: LeaderTerm) -> Any:
            self.calls.append((self.clock.now(), name, "started", term.lease_transitions))
            return leading(term) if leading is not None else None

        return LeaderCallbacks(
            on_started_leading=started,
            on_stopped_leading=lambda: self.calls.append((self.clock.now(), name, "stopped", None)),
            on_new_leader=lambda who: self.calls.append((self.clock.now(), name, "new_leader", who)),
        )

    def of(self, name: str, what: str) -> list[tuple[float, Any]]:
        return [(t, d) for t, n, w, d in self.calls if n == name and w == what]


class Cluster:
    """One fake clock, one store, electors built against them."""

    def __init__(self, strategy: Strategy = Strategy.WATCH) -> None:
        self.clock = FakeClock()
        self.store = InMemoryLeaseStore()
        self.rec = Recorder(self.clock)
        self.strategy = strategy
        self.electors: list[LeaderElector] = []
        # (clock time, client, verb) of every write that landed.
        self.write_times: list[tuple[float, str, str]] = []
        store_write = self.store._store

        def timed_store(lease: pb.Lease, by: str, verb: str, uid: str = "") -> pb.Lease:
            self.write_times.append((self.clock.now(), by, verb))
            return store_write(lease, by, verb, uid)

        self.store._store = timed_store  # type: ignore[method-assign]

    def elector(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        strategy: Strategy | None = None,
        seed: int = 0,
        leading: Callable[[LeaderTerm], Any] | None = None,
        **cfg: Any,
    ) -> LeaderElector:
        cfg.setdefault("lease_duration", LEASE)
        cfg.setdefault("renew_deadline", RENEW)
        cfg.setdefault("retry_period", RETRY)
        config = LeaderElectionConfig(identity=name, strategy=strategy or self.strategy, **cfg)
        e = LeaderElector(
            config,
            self.store.client(name),
            self.rec.callbacks(name, leading=leading),
            clock=clock or self.clock,
            rng=random.Random(seed),
        )
        self.electors.append(e)
        return e

    def client(self, e: LeaderElector) -> Any:
        return e.lock.client

    def leaders(self) -> list[str]:
        return [e.identity for e in self.electors if e.is_leader()]

    def lease(self) -> pb.Lease:
        lease = self.store.lease(NS, NAME)
        assert lease is not None
        return lease

    def put(
        self, holder: str, *, renew: datetime | None = None, transitions: int = 0, seconds: int = 15
    ) -> pb.Lease:
        stamp = format_micro_time(renew or datetime(2020, 1, 1, tzinfo=UTC))
        rec = LeaderElectionRecord(holder, seconds, stamp, stamp, transitions)
        return self.store.put(pb.Lease(metadata=pb.ObjectMeta(namespace=NS, name=NAME), spec=rec.to_spec()))

    async def advance_checking(self, seconds: float) -> None:
        """Advance `seconds`, stopping at every pending deadline (the only instants at which anything
        can change); at each, at most one elector may believe it leads."""
        clock = self.clock
        end = clock.now() + seconds
        while True:
            await clock.settle()
            assert len(self.leaders()) <= 1, f"two leaders at {clock.now()}: {self.leaders()}"
            deadline = clock.next_deadline()
            if deadline is None or deadline > end:
                break
            clock.set(max(deadline, clock.now()))
        clock.set(end)
        await clock.settle()
        assert len(self.leaders()) <= 1, f"two leaders at {clock.now()}: {self.leaders()}"


@contextlib.asynccontextmanager
async def running(
    cluster: Cluster, *electors: LeaderElector, rejoin: bool = False
) -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks = [asyncio.create_task(e.run(rejoin=rejoin), name=f"run/{e.identity}") for e in electors]
    try:
        await cluster.clock.settle()
        yield tasks
    finally:
        for e in electors:
            e.stop()
        await cluster.clock.settle()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def hang_forever() -> Callable[[str], Any]:
    async def fault(verb: str) -> None:
        await asyncio.Event().wait()

    return fault


def fail_with(exc: BaseException) -> Callable[[str], Any]:
    async def fault(verb: str) -> None:
        raise exc

    return fault


# ---------------------------------------------------------------- configuration


def test_defaults_are_kube_schedulers() -> None:
    cfg = LeaderElectionConfig()
    cfg.validate()
    assert (cfg.lease_namespace, cfg.lease_name) == ("kube-system", "kube-scheduler")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)
    assert cfg.release_on_cancel and cfg.strategy is Strategy.WATCH
    host, _, uid = cfg.identity.rpartition("_")
    assert host and len(uid) == 36
    assert LeaderElectionConfig().identity != cfg.identity  # unique per process start


@pytest.mark.parametrize(
    ("kwargs", "flag", "text"),
    [
        (
            {"lease_duration": 10.0},
            "--leader-elect-lease-duration",
            "must be greater than --leader-elect-renew-deadline",
        ),
        (
            {"lease_duration": 9.0},
            "--leader-elect-lease-duration",
            "must be greater than --leader-elect-renew-deadline",
        ),
        ({"retry_period": 10 / 1.2}, "--leader-elect-renew-deadline", "JitterFactor 1.2"),
        ({"lease_duration": 0.0}, "--leader-elect-lease-duration", "must be greater than zero"),
        ({"renew_deadline": -1.0}, "--leader-elect-renew-deadline", "must be greater than zero"),
        ({"retry_period": 0.0}, "--leader-elect-retry-period", "must be greater than zero"),
        ({"retry_period": float("nan")}, "--leader-elect-retry-period", "must be greater than zero"),
        ({"identity": ""}, "--identity", "identity is empty"),
        ({"lease_name": ""}, "--leader-elect-resource-name", "required"),
        ({"lease_namespace": ""}, "--leader-elect-resource-namespace", "required"),
        ({"strategy": "gossip"}, "--leader-elect-strategy", "poll, watch"),
    ],
)
def test_validation_names_the_flag(kwargs: dict[str, Any], flag: str, text: str) -> None:
    """Upstream NewLeaderElector's rules: leaseDuration > renewDeadline > JitterFactor·retryPeriod,
    all > 0; plus a non-empty identity and lease name."""
    with pytest.raises(LeaderElectionConfigError) as info:
        LeaderElectionConfig(**{"identity": "a", **kwargs}).validate()
    assert any(flag in e and text in e for e in info.value.errors), info.value.errors
    assert isinstance(info.value, ValueError)


def test_validation_reports_every_problem_and_elector_refuses_bad_config() -> None:
    bad = LeaderElectionConfig(identity="", lease_duration=1.0, renew_deadline=2.0, retry_period=2.0)
    with pytest.raises(LeaderElectionConfigError) as info:
        bad.validate()
    assert len(info.value.errors) == 3  # lease <= renew, renew <= 1.2·retry, identity
    with pytest.raises(LeaderElectionConfigError):
        LeaderElector(bad, InMemoryLeaseStore().client())
    # The boundary itself: renewDeadline must be strictly greater than 1.2·retryPeriod.
    LeaderElectionConfig(identity="a", lease_duration=2.0, renew_deadline=1.5, retry_period=0.3).validate()


def test_from_component_config_and_whole_seconds_on_the_wire() -> None:
    from scheduler.apis.config.types import Duration, LeaderElectionConfiguration

    le = LeaderElectionConfiguration(
        leader_elect=True, lease_duration=Duration(4.5), renew_deadline=Duration(3.0),
        retry_period=Duration(1.0), resource_namespace="ns", resource_name="sched",
    )  # fmt: skip
    cfg = LeaderElectionConfig.from_component_config(le, identity="s1", strategy="poll")
    assert (cfg.lease_namespace, cfg.lease_name, cfg.identity, cfg.strategy) == (
        "ns",
        "sched",
        "s1",
        Strategy.POLL,
    )
    # leaseDurationSeconds is whole seconds: rounded up, never a shorter promise than acted upon.
    assert cfg.lease_duration_seconds == 5
    assert LeaderElectionConfig(lease_duration=2.0).lease_duration_seconds == 2
    assert (
        LeaderElectionConfig(lease_duration=0.2, renew_deadline=0.1, retry_period=0.05).lease_duration_seconds
        == 1
    )


# ---------------------------------------------------------------- jitter and clocks


class _FixedRandom(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def test_jitter_is_apimachinery_wait_jitter() -> None:
    assert jitter(2.0, 1.2, _FixedRandom(0.0)) == 2.0
    assert jitter(2.0, 1.2, _FixedRandom(0.5)) == pytest.approx(3.2)
    assert jitter(2.0, 1.2, _FixedRandom(0.999999)) < 2.0 * (1 + 1.2)
    assert jitter(2.0, 0.0, _FixedRandom(0.5)) == 3.0  # maxFactor <= 0 means 1.0
    rng = random.Random(7)
    samples = [jitter(2.0, JITTER_FACTOR, rng) for _ in range(2000)]
    assert all(2.0 <= s < 4.4 for s in samples)
    assert min(samples) < 2.1 and max(samples) > 4.3  # the whole range is used


async def test_fake_clock_sleepers_and_timeouts() -> None:
    clock = FakeClock(start=0.0)
    woke: list[float] = []

    async def sleeper(at: float) -> None:
        await clock.sleep_until(at)
        woke.append(clock.now())

    tasks = [asyncio.create_task(sleeper(t)) for t in (3.0, 1.0, 2.0)]
    await clock.settle()
    assert clock.pending() == 3 and clock.next_deadline() == 1.0
    await clock.advance(2.5)
    assert woke == [1.0, 2.0] and clock.now() == 2.5
    with pytest.raises(TimeoutError):
        async with clock.timeout_at(2.0):  # already past: fires at once
            await asyncio.Event().wait()
    await clock.advance(1.0)
    await asyncio.gather(*tasks)
    assert woke == [1.0, 2.0, 3.0]


async def test_fake_clock_timeout_fires_when_advanced() -> None:
    clock = FakeClock(start=0.0)
    outcome: list[str] = []

    async def bounded() -> None:
        try:
            async with clock.timeout_at(5.0):
                await asyncio.Event().wait()
        except TimeoutError:
            outcome.append(f"timeout at {clock.now()}")

    task = asyncio.create_task(bounded())
    await clock.advance(4.9)
    assert outcome == []
    await clock.advance(0.1)
    assert outcome == ["timeout at 5.0"]
    await task
    with pytest.raises(ValueError, match="does not go back"):
        clock.set(1.0)
    nap = asyncio.create_task(clock.sleep(2.0))  # the ratelimit/nodesim clock shape too
    await clock.advance(2.0)
    assert nap.done()


async def test_skewed_clock_offset_and_rate() -> None:
    base = FakeClock(start=100.0, wall_start=datetime(2025, 1, 1, tzinfo=UTC))
    fast = SkewedClock(base, offset=3600.0, rate=2.0)
    assert fast.now() == 100.0  # the offset moves the wall clock only (Go's monotonic reading)
    assert fast.wall() == datetime(2025, 1, 1, 1, tzinfo=UTC)
    await base.advance(10.0)
    assert fast.now() == pytest.approx(120.0)
    assert fast.wall() == datetime(2025, 1, 1, 1, 0, 20, tzinfo=UTC)
    woke: list[float] = []

    async def sleep() -> None:
        await fast.sleep_until(130.0)  # 10 s of the fast clock = 5 s of base
        woke.append(base.now())

    task = asyncio.create_task(sleep())
    await base.advance(5.0)
    await task
    assert woke == [115.0]
    fast.set_skew(rate=0.5)
    now = fast.now()
    await base.advance(4.0)
    assert fast.now() == pytest.approx(now + 2.0)
    with pytest.raises(ValueError):
        SkewedClock(base, rate=0.0)


# ---------------------------------------------------------------- acquiring (client-go's table)


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_acquire_from_no_object(strategy: Strategy) -> None:
    c = Cluster(strategy)
    a = c.elector("a")
    async with running(c, a):
        assert a.is_leader()
        lease = c.lease()
        assert lease.spec.holder_identity == "a" and lease.spec.lease_transitions == 0
        assert lease.spec.lease_duration_seconds == 15
        term = a.term
        assert term is not None
        # The create was the acquisition: its revision is the acquired one.
        assert c.store.writes[0][1] == "create"
        assert term.acquired_revision == int(c.store.writes[0][2].metadata.resource_version)
        assert a.acquired_revision == term.acquired_revision
        assert a.fence_token() == pb.FenceToken(
            lease_namespace=NS, lease_name=NAME, holder_identity="a", lease_transitions=0
        )
        assert c.rec.of("a", "new_leader") == [(c.clock.now(), "a")]


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_acquire_from_unled_object(strategy: Strategy) -> None:
    """A Lease with no holder (released) is taken at once, counting one more transition."""
    c = Cluster(strategy)
    c.put("", transitions=4)
    a = c.elector("a")
    async with running(c, a):
        assert a.is_leader()
        assert c.lease().spec.lease_transitions == 5
        assert a.fence_token().lease_transitions == 5


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_dont_acquire_from_led_acked_object_until_observed_expired(strategy: Strategy) -> None:
    """A Lease held by another is taken only after leaseDuration has passed since *we observed* its
    last change: its renewTime, written long ago by another clock, is never compared with ours."""
    c = Cluster(strategy)
    c.put("x", renew=datetime(2001, 1, 1, tzinfo=UTC), transitions=2)
    b = c.elector("b")
    async with running(c, b):
        t0 = c.clock.now()
        _, observed_at = b.observed()
        assert observed_at == t0
        await c.clock.advance(LEASE - 0.25)
        assert not b.is_leader()
        await c.clock.advance(LEASE * (1 + JITTER_FACTOR))
        assert b.is_leader()
        term = b.term
        assert term is not None and term.lease_transitions == 3
        assert term.acquired_at >= t0 + LEASE
        if strategy is Strategy.WATCH:
            assert term.acquired_at == t0 + LEASE  # acts at the very moment of expiry


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_a_lease_observed_changing_is_not_expired_whatever_its_renew_time(strategy: Strategy) -> None:
    c = Cluster(strategy)
    c.put("x", renew=datetime(2001, 1, 1, tzinfo=UTC))
    b = c.elector("b")
    async with running(c, b):
        await c.clock.advance(10.0)
        # x "renews", with a renewTime still decades in the past (its clock is wrong): a change.
        c.put("x", renew=datetime(2001, 1, 1, 0, 0, 1, tzinfo=UTC))
        changed_at = c.clock.now()
        await c.clock.advance(LEASE - 1.0)  # 24 s since b first saw the lease, 14 s since the change
        assert not b.is_leader()
        await c.clock.advance(1.0 + RETRY * (1 + JITTER_FACTOR))
        term = b.term
        assert term is not None and term.acquired_at >= changed_at + LEASE


async def test_acquire_from_led_object_with_its_own_lease_duration_seconds() -> None:
    """client-go's isLeaseValid uses the record's leaseDurationSeconds (the holder's promise)."""
    c = Cluster(Strategy.WATCH)
    c.put("x", seconds=3)
    b = c.elector("b")
    async with running(c, b):
        await c.clock.advance(2.75)
        assert not b.is_leader()
        await c.clock.advance(0.25)
        assert b.is_leader()


async def test_a_record_without_duration_uses_ours() -> None:
    c = Cluster(Strategy.WATCH)
    lease = pb.Lease(metadata=pb.ObjectMeta(namespace=NS, name=NAME), spec=pb.LeaseSpec(holder_identity="x"))
    c.store.put(lease)
    b = c.elector("b")
    async with running(c, b):
        await c.clock.advance(LEASE - 0.25)
        assert not b.is_leader()
        await c.clock.advance(0.25)
        assert b.is_leader()


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_clock_skew_between_candidates_does_not_matter(strategy: Strategy) -> None:
    """The holder's clock is an hour behind (and runs 20 % fast), the standby's an hour ahead: the
    standby neither takes over while the holder renews nor waits longer than leaseDuration (on its
    own clock) once the holder is gone. Rates differing by less than leaseDuration/renewDeadline are
    tolerated, as client-go documents."""
    c = Cluster(strategy)
    a = c.elector("a", clock=SkewedClock(c.clock, offset=-3600.0, rate=1.2))
    b = c.elector("b", clock=SkewedClock(c.clock, offset=+3600.0, rate=1.0))
    async with running(c, a):
        async with running(c, b):
            await c.advance_checking(60.0)
            assert c.leaders() == ["a"]
            assert c.lease().spec.renew_time.startswith("2024-12-31T23:")  # written on a's clock
            c.client(a).fault = hang_forever()  # a can no longer write
            await c.advance_checking(LEASE + RETRY * (1 + JITTER_FACTOR) + 1.0)
            assert c.leaders() == ["b"]
            b_term = b.term
            assert b_term is not None and b_term.lease_transitions == 1


# ---------------------------------------------------------------- races


async def test_two_standbys_act_on_the_same_version_exactly_one_wins() -> None:
    """Both observed the same held record at the same moment and wake at the same instant
    (observedTime + leaseDuration): both compare-and-swap on that version; one wins, the other
    gets a conflict, re-reads, and sees the winner."""
    c = Cluster(Strategy.WATCH)
    c.put("x", transitions=7)
    b1, b2 = c.elector("b1", seed=1), c.elector("b2", seed=2)
    async with running(c, b1, b2):
        writes_before = len(c.store.writes)
        await c.clock.advance(LEASE)
        assert len(c.leaders()) == 1
        winner = c.leaders()[0]
        loser = b2 if winner == "b1" else b1
        assert c.lease().spec.holder_identity == winner
        assert c.lease().spec.lease_transitions == 8
        takeovers = [w for w in c.store.writes[writes_before:] if w[2].spec.lease_transitions == 8]
        assert takeovers[0][0] == winner
        assert {w[0] for w in takeovers} == {winner}  # the loser never wrote
        assert "update" in c.client(loser).calls and loser.get_leader() == winner
        await c.advance_checking(3 * LEASE)
        assert c.leaders() == [winner]


async def test_concurrent_creates_exactly_one_wins() -> None:
    c = Cluster(Strategy.POLL)
    electors = [c.elector(f"s{i}", seed=i) for i in range(3)]
    async with running(c, *electors):
        assert len(c.leaders()) == 1
        creates = [w for w in c.store.writes if w[1] == "create"]
        assert len(creates) == 1
        await c.advance_checking(3 * LEASE)
        assert len(c.leaders()) == 1


# ---------------------------------------------------------------- release and takeover


async def test_release_on_cancel_and_immediate_takeover_with_watch() -> None:
    c = Cluster(Strategy.WATCH)
    a = c.elector("a", retry_period=4.0)  # a poll would come 4-8.8 s later
    b = c.elector("b", retry_period=4.0)
    async with running(c, a) as (ta,):
        async with running(c, b):
            await c.clock.advance(5.0)
            assert c.leaders() == ["a"]
            a.stop()
            await c.clock.settle()
            assert ta.done() and ta.exception() is None
            released_at = c.clock.now()
            term = b.term
            assert term is not None and term.acquired_at == released_at  # same instant: no polling
            assert term.lease_transitions == 1
            # The release as client-go writes it: no holder, 1 s, transitions kept.
            releases = [w[2].spec for w in c.store.writes if w[0] == "a" and not w[2].spec.holder_identity]
            assert len(releases) == 1
            assert releases[0].lease_duration_seconds == 1 and releases[0].lease_transitions == 0
            assert c.rec.of("a", "stopped") == [(released_at, None)]


async def test_release_then_poll_takeover_waits_for_the_next_poll() -> None:
    c = Cluster(Strategy.POLL)
    a, b = c.elector("a"), c.elector("b")
    async with running(c, a):
        async with running(c, b):
            a.stop()
            await c.clock.settle()
            released_at = c.clock.now()
            assert not b.is_leader()
            await c.clock.advance(RETRY * (1 + JITTER_FACTOR))
            term = b.term
            assert term is not None and released_at + RETRY <= term.acquired_at < released_at + RETRY * 2.2


async def test_no_release_when_configured_off() -> None:
    c = Cluster(Strategy.WATCH)
    a = c.elector("a", release_on_cancel=False)
    b = c.elector("b")
    async with running(c, a):
        async with running(c, b):
            a.stop()
            await c.clock.settle()
            assert c.lease().spec.holder_identity == "a"
            await c.clock.advance(LEASE - 0.25)
            assert c.leaders() == []
            await c.clock.advance(0.25)
            assert c.leaders() == ["b"]


async def test_cancelling_run_releases_and_propagates() -> None:
    c = Cluster(Strategy.WATCH)
    a = c.elector("a")
    task = asyncio.create_task(a.run())
    await c.clock.settle()
    assert a.is_leader()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert c.lease().spec.holder_identity == ""
    assert not a.is_leader() and c.rec.of("a", "stopped")


# ---------------------------------------------------------------- losing the lease


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_renew_deadline_passed_stops_leading(strategy: Strategy) -> None:
    """The leader stops once renewDeadline has passed since the start of its last successful
    renewal, before any standby may take over (leaseDuration after it observed that renewal)."""
    c = Cluster(strategy)
    a, b = c.elector("a"), c.elector("b")
    async with running(c, a):
        async with running(c, b):
            await c.clock.advance(9.0)
            last_write = max(t for t, n, _ in c.write_times if n == "a")
            c.client(a).fault = hang_forever()
            await c.clock.advance(RENEW - 0.5)
            assert a.is_leader() == (c.clock.now() < last_write + RENEW)
            await c.advance_checking(1.0)
            assert not a.is_leader()
            (stopped_at, _), *_ = c.rec.of("a", "stopped")
            assert stopped_at <= last_write + RENEW
            await c.advance_checking(LEASE + RETRY * 2.2)
            assert c.leaders() == ["b"]
            b_term = b.term
            assert b_term is not None and b_term.acquired_at >= last_write + LEASE


async def test_a_renewal_that_errors_is_retried_within_the_deadline() -> None:
    c = Cluster(Strategy.POLL)
    a = c.elector("a")
    async with running(c, a):
        failures = 0

        async def flaky(verb: str) -> None:
            nonlocal failures
            if verb == "update" and failures < 3:
                failures += 1
                raise UnavailableError("connection reset")

        c.client(a).fault = flaky
        await c.clock.advance(3 * RETRY + 0.5)
        assert a.is_leader() and failures == 3
        assert not c.rec.of("a", "stopped")


@pytest.mark.parametrize("strategy", list(Strategy))
async def test_leader_that_observes_another_holder_stops_at_once(strategy: Strategy) -> None:
    c = Cluster(strategy)
    stopped_before_cancel: list[bool] = []

    async def lead(term: LeaderTerm) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped_before_cancel.append(bool(c.rec.of("a", "stopped")))
            raise

    a = c.elector("a", leading=lead)
    async with running(c, a):
        await c.clock.advance(1.0)
        c.put("intruder", transitions=9)
        intruded_at = c.clock.now()
        if strategy is Strategy.WATCH:
            await c.clock.settle()  # no time passes: the watch event alone ends the term
        else:
            await c.clock.advance(RETRY)  # the next renewal sees it (not the renew deadline)
        assert not a.is_leader()
        (stopped_at, _), *_ = c.rec.of("a", "stopped")
        assert stopped_at == intruded_at if strategy is Strategy.WATCH else stopped_at <= intruded_at + RETRY
        assert stopped_before_cancel == [True]  # on_stopped_leading first, then the work is cancelled
        last = a.last_term
        assert last is not None and "intruder" in last.end_reason
        # Not released: it is not ours.
        assert c.lease().spec.holder_identity == "intruder"


async def test_lease_deleted_while_leading_stops_and_recreation_continues_transitions() -> None:
    c = Cluster(Strategy.WATCH)
    a = c.elector("a")
    b = c.elector("b")
    async with running(c, a, rejoin=False):
        async with running(c, b):
            await c.clock.advance(1.0)
            leader = c.leaders()[0]
            c.store.delete(NS, NAME)
            await c.clock.settle()
            assert leader not in c.leaders()
            await c.clock.advance(RETRY * 2.2)
            lease = c.lease()
            assert lease.spec.lease_transitions == 1  # not 0 again: an old fence token cannot match
            assert c.leaders() == [lease.spec.holder_identity]


# ---------------------------------------------------------------- terms, transitions, fence tokens


async def test_transitions_count_every_term_and_fence_tokens_differ() -> None:
    c = Cluster(Strategy.WATCH)
    a, b = c.elector("a"), c.elector("b")
    tokens: list[pb.FenceToken] = []
    async with running(c, a, b, rejoin=True):
        for _ in range(4):
            await c.clock.advance(1.0)
            (leader,) = [e for e in (a, b) if e.is_leader()]
            tokens.append(leader.fence_token())
            # End the term by making the leader lose: someone else writes a release record.
            lease = c.lease()
            c.put("", transitions=lease.spec.lease_transitions)
            await c.clock.settle()
    transitions = [t.lease_transitions for t in tokens]
    assert transitions == sorted(set(transitions)), transitions
    assert len({(t.holder_identity, t.lease_transitions) for t in tokens}) == 4


async def test_fence_token_before_any_term_matches_nothing_and_after_stays_the_old_terms() -> None:
    c = Cluster(Strategy.WATCH)
    c.put("x")
    b = c.elector("b")
    assert b.fence_token().lease_transitions == -1
    async with running(c, b):
        await c.clock.advance(LEASE)
        token = b.fence_token()
        assert token.lease_transitions == 1
        c.put("y", transitions=2)
        await c.clock.settle()
        assert not b.is_leader()
        assert b.fence_token() == token  # refused by the API server, never None (unfenced)


async def test_own_identity_from_another_process_is_not_taken_at_once() -> None:
    """A record naming us that is not a term this elector held (a restarted replica reusing its
    identity while the old process may only be paused) is waited out like anyone's."""
    c = Cluster(Strategy.WATCH)
    c.put("a", transitions=5)
    a = c.elector("a")
    async with running(c, a):
        await c.clock.advance(LEASE - 0.25)
        assert not a.is_leader()
        await c.clock.advance(0.25)
        assert a.is_leader()
        assert a.fence_token().lease_transitions == 6


async def test_own_lapsed_term_is_retaken_at_once_as_a_new_term() -> None:
    c = Cluster(Strategy.POLL)
    a = c.elector("a", release_on_cancel=False)
    async with running(c, a, rejoin=True):
        c.client(a).fault = hang_forever()
        await c.clock.advance(RENEW + 0.1)
        assert not a.is_leader()
        c.client(a).fault = None
        await c.clock.advance(RENEW + RETRY * 2.2)  # the hung attempt times out, then a retries
        assert a.is_leader()
        assert a.fence_token().lease_transitions == 1


async def test_async_on_started_leading_runs_for_the_term_and_is_cancelled() -> None:
    c = Cluster(Strategy.WATCH)
    ticks: list[float] = []

    async def lead(term: LeaderTerm) -> None:
        while True:
            ticks.append(c.clock.now())
            await c.clock.sleep_until(c.clock.now() + 1.0)

    a = c.elector("a", leading=lead)
    async with running(c, a):
        await c.clock.advance(3.0)
        assert len(ticks) == 4
        c.put("y", transitions=3)
        await c.clock.settle()
        await c.clock.advance(3.0)
        assert len(ticks) == 4  # cancelled with the term


async def test_on_started_leading_error_ends_the_term_and_run_raises() -> None:
    c = Cluster(Strategy.WATCH)

    async def lead(term: LeaderTerm) -> None:
        raise RuntimeError("boom")

    a = c.elector("a", leading=lead)
    task = asyncio.create_task(a.run())
    await c.clock.settle()
    with pytest.raises(RuntimeError, match="boom"):
        await task
    assert c.rec.of("a", "stopped") and c.lease().spec.holder_identity == ""


async def test_run_returns_after_the_term_unless_rejoining() -> None:
    c = Cluster(Strategy.WATCH)
    a = c.elector("a")
    task = asyncio.create_task(a.run())
    await c.clock.settle()
    c.put("z", transitions=1)
    await c.clock.settle()
    assert task.done() and task.exception() is None  # client-go's Run: one term, then return

    b = c.elector("b")
    async with running(c, b, rejoin=True) as (tb,):
        with pytest.raises(RuntimeError, match="already running"):
            await b.run()
        await c.clock.advance(LEASE)
        assert b.is_leader()
        c.put("z", transitions=3)
        await c.clock.settle()
        assert not b.is_leader() and not tb.done()  # back to standby
        await c.clock.advance(LEASE)
        term = b.term
        assert term is not None and term.lease_transitions == 4


async def test_step_down_ends_only_the_term_its_fence_names() -> None:
    """A write refused as fenced ends the term at once, but only if it was made under this term:
    a refusal of an earlier term's write says nothing about the current one."""
    c = Cluster(Strategy.WATCH)
    a = c.elector("a")
    async with running(c, a, rejoin=True) as (task,):
        await c.clock.advance(1.0)
        assert a.is_leader()
        first = a.fence_token()
        # Someone else took the lease; our watch has not told us yet (we pretend it is slow).
        assert a.step_down("a write was fenced", fence=first)
        assert not a.is_leader() and c.rec.of("a", "stopped")
        assert a.last_term is not None and a.last_term.end_reason == "a write was fenced"
        assert not task.done()  # rejoin: back to standby
        assert not a.step_down("again", fence=first)  # no term to end
        await c.clock.advance(RETRY * 2.2)
        assert a.is_leader()  # the lease was still ours (released, then retaken): a new term
        second = a.fence_token()
        assert second.lease_transitions == first.lease_transitions + 1
        assert not a.step_down("a late refusal of the first term's write", fence=first)
        assert a.is_leader()
        assert a.step_down("no token: unconditional")
        assert not a.is_leader()


async def test_healthz_check() -> None:
    c = Cluster(Strategy.POLL)
    a = c.elector("a")
    assert a.check() is None
    async with running(c, a):
        assert a.check() is None
        c.client(a).fault = fail_with(UnavailableError("down"))
        await c.clock.advance(RENEW - 1)
        assert a.check(0.0) is None  # still leading, renewed 9 s ago
        # A stuck loop (the term never ends): simulate by moving time without letting it run.
        c.clock.set(c.clock.now() + LEASE)
        assert a.check(0.0) is not None and "kube-system/kube-scheduler" in (a.check(0.0) or "")


# ---------------------------------------------------------------- polling and the watch


async def test_poll_retries_are_jittered_within_retry_period_times_2_2() -> None:
    c = Cluster(Strategy.POLL)
    c.put("x")
    b = c.elector("b", seed=3)
    times: list[float] = []

    async def note(verb: str) -> None:
        if verb == "get":
            times.append(c.clock.now())

    c.client(b).fault = note
    async with running(c, b):
        # Keep x alive by renewing its record, so b keeps polling.
        for i in range(60):
            await c.clock.advance(1.0)
            c.put("x", renew=datetime(2020, 1, 1, tzinfo=UTC) + timedelta(seconds=i + 1))
    gaps = [b_ - a_ for a_, b_ in itertools.pairwise(times)]
    assert len(gaps) > 15
    assert all(RETRY <= g <= RETRY * (1 + JITTER_FACTOR) for g in gaps), gaps
    assert max(gaps) - min(gaps) > 0.5  # jittered, not periodic
    assert not b.is_leader()


async def test_watching_standby_does_not_poll_while_the_watch_is_up() -> None:
    c = Cluster(Strategy.WATCH)
    a, b = c.elector("a"), c.elector("b")
    async with running(c, a):
        async with running(c, b):
            calls_before = list(c.client(b).calls)
            await c.advance_checking(60.0)
            assert c.client(b).calls == calls_before  # the watch told it everything
            assert b.watch_connected and c.leaders() == ["a"]


async def test_watch_down_falls_back_to_polling() -> None:
    c = Cluster(Strategy.WATCH)
    a, b = c.elector("a"), c.elector("b")
    c.client(b).watch_available = False
    async with running(c, a):
        async with running(c, b):
            assert not b.watch_connected
            gets_before = c.client(b).calls.count("get")
            await c.advance_checking(20.0)
            gets = c.client(b).calls.count("get") - gets_before
            assert 20 / (RETRY * 2.2) - 1 <= gets <= 20 / RETRY + 1
            # The leader vanishes without releasing: the polling standby still takes over.
            c.client(a).fault = hang_forever()
            # a's last renewal can precede the hang by a retry period, and b sees it at its next
            # poll, up to retryPeriod·2.2 later: then a full lease, then the poll that takes it.
            await c.advance_checking(RETRY + RETRY * 2.2 + LEASE + RETRY * 2.2)
            assert c.leaders() == ["b"]


async def test_watch_reconnects_without_resetting_the_observation() -> None:
    c = Cluster(Strategy.WATCH)
    c.put("x")
    b = c.elector("b")
    async with running(c, b):
        _, first_seen = b.observed()
        await c.clock.advance(5.0)
        c.store.break_watches()  # a watch that ran 5 s: ended by a channel swap or max connection age
        await c.clock.settle()
        # re-watched at once, no backoff (client-go's reflector); same record, same observation
        assert b.watch_connected
        assert b.observed()[1] == first_seen
        c.store.break_watches()  # at once again: a "very short watch" backs off
        await c.clock.settle()
        assert not b.watch_connected
        await c.clock.advance(1.0)
        assert b.watch_connected
        assert b.observed()[1] == first_seen
        await c.clock.advance(LEASE - 6.0)
        assert b.is_leader()
        term = b.term
        assert term is not None and term.acquired_at <= first_seen + LEASE + RETRY * 2.2


async def test_stale_watch_event_does_not_roll_back_the_observation() -> None:
    c = Cluster(Strategy.WATCH)
    old = c.put("x", transitions=1)
    c.put("y", transitions=2)
    b = c.elector("b")
    async with running(c, b):
        record, seen_at = b.observed()
        assert record is not None and record.holder_identity == "y"
        b._observe(old)  # an event trailing a newer read
        assert b.observed() == (record, seen_at)


# ---------------------------------------------------------------- many candidates, faults, one leader


@pytest.mark.parametrize("seed", range(6))
async def test_random_faults_never_two_leaders_and_terms_grow(seed: int) -> None:
    """Three candidates (both strategies mixed, skewed clocks) under random hangs, errors, broken
    watches and restarts: at every instant at most one believes it leads, and each new term's
    fence token has a higher leaseTransitions than every earlier one."""
    rng = random.Random(seed)
    c = Cluster()
    electors = [
        c.elector(
            f"s{i}",
            strategy=rng.choice(list(Strategy)),
            clock=SkewedClock(c.clock, offset=rng.uniform(-100, 100), rate=rng.uniform(0.95, 1.05)),
            seed=seed * 10 + i,
        )
        for i in range(3)
    ]
    seen_terms: dict[tuple[str, int], float] = {}
    async with running(c, *electors, rejoin=True):
        for _ in range(120):
            victim = rng.choice(electors)
            action = rng.random()
            client = c.client(victim)
            if action < 0.1:
                client.fault = hang_forever()
            elif action < 0.2:
                client.fault = fail_with(UnavailableError("injected"))
            elif action < 0.5:
                client.fault = None
            elif action < 0.55:
                c.store.break_watches()
            await c.advance_checking(rng.uniform(0.2, 3.0))
            for e in electors:
                term = e.term
                if term is not None and (term.identity, term.lease_transitions) not in seen_terms:
                    assert all(t < term.lease_transitions for _, t in seen_terms), (seen_terms, term)
                    seen_terms[(term.identity, term.lease_transitions)] = c.clock.now()
        for e in electors:
            c.client(e).fault = None
        await c.advance_checking(2 * LEASE + RENEW)
        assert len(c.leaders()) == 1
    assert len(seen_terms) >= 3, seen_terms  # the faults did move the lease around
