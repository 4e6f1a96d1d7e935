"""The LeaderElector: client-go's `tools/leaderelection` loop, a watch-driven standby, fence tokens.

    standby ──acquire──> leader ──renew every retryPeriod──> ... ──lost / stopped──> (release) ──> done
      ^   (poll: Get every retryPeriod·[1, 2.2);                     │
      │    watch: act when the watched Lease is released or expires) │ rejoin=True
      └──────────────────────────────────────────────────────────────┘

Safety argument (client-go's, leaderelection.go's package doc). A candidate acts only on time read
from its own clock. It never compares the renewTime written in the Lease, which another machine's
clock produced, with its own time: a change of the record only tells it that the holder was alive.
A standby records the local time at which it *observed* each new version of the record, and may take
the lease only once `leaseDurationSeconds` (the holder's declared promise) has passed on its own clock
since then with no further change observed. The holder stops leading once `renewDeadline` has passed,
on its clock, since it *started* its last successful write, and validation keeps renewDeadline <
leaseDuration. The write a standby observed was started by the holder before it was observed, so
the holder stops before any standby may take over: this tolerates any clock offset between machines,
and clock rates differing by up to leaseDuration / renewDeadline. Every write is a compare-and-swap
on resourceVersion, so of several standbys acting on the same version exactly one wins.

Timing alone cannot stop a leader that is paused (GC, SIGSTOP, a slow disk) from acting late. So
every term gets a fence token (lease namespace/name, holder, leaseTransitions) that the leader
attaches to its writes and that the API server checks in the same etcd transaction as the write;
leaseTransitions grows with every term, so a deposed leader's token never matches again.

Where this differs from client-go (each noted at the code):
* the leader's renew deadline runs from the start of its last successful renewal, not from the start
  of the current renew round (which allows retryPeriod plus a round trip more);
* a leader that observes another holder, or a new term, stops at once instead of polling until
  its renew deadline;
* a candidate takes a lease naming its own identity at once only if the record is the term this
  elector itself held; a record naming it from another process (a restart while the old process is
  paused) is treated as anyone else's, and every new term increments leaseTransitions, so two
  processes sharing an identity never share a fence token;
* `on_stopped_leading` is called only when a term ends (client-go calls it whenever Run returns);
* with strategy `watch`, standbys watch the Lease instead of polling (see `_acquire_watch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace

from kse import failpoints
from kse.client.clientset import BOOKMARK, DELETED
from kse.client.errors import ApiError, ConflictError, NotFoundError
from kse.leaderelection.clock import Clock, RealClock
from kse.leaderelection.config import (
    JITTER_FACTOR,
    LeaderCallbacks,
    LeaderElectionConfig,
    Strategy,
)
from kse.leaderelection.lock import LeaderElectionRecord, LeaseClient, LeaseLock, resource_version_of
from kse.objects.timeutil import format_micro_time
from proto import kse_pb2 as pb

__all__ = ["LeaderElector", "LeaderTerm", "jitter"]

log = logging.getLogger(__name__)

# Re-watch backoff when the Lease watch keeps failing (the slow poll covers the gap meanwhile).
WATCH_BACKOFF_INITIAL = 0.05
WATCH_BACKOFF_MAX = 2.0
# A watch that ended sooner than this after connecting counts as a failure (backs off).
MIN_HEALTHY_WATCH_S = 1.0


def jitter(duration: float, max_factor: float, rng: random.Random | None = None) -> float:
    """apimachinery's wait.Jitter: a duration in [duration, duration + max_factor·duration);
    max_factor <= 0 means 1.0."""
    if max_factor <= 0.0:
        max_factor = 1.0
    return duration + (rng or random).random() * max_factor * duration


@dataclass(eq=False)
class LeaderTerm:
    """One term of leadership: from the write that took the lease to the moment it ended.

    `deadline` (local clock) moves forward with every successful renewal; `acquired_revision` is the
    Lease's resourceVersion after the acquiring write: a new leader should bring its informers to at
    least this revision before it acts, so it sees everything its predecessor wrote.
    """

    identity: str
    lease_namespace: str
    lease_name: str
    lease_transitions: int
    acquired_revision: int
    acquire_time: str
    acquired_at: float
    deadline: float
    ended: bool = False
    end_reason: str = ""
    _done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def fence(self) -> pb.FenceToken:
        """The fencing token of this term, for every write the leader makes."""
        return pb.FenceToken(
            lease_namespace=self.lease_namespace,
            lease_name=self.lease_name,
            holder_identity=self.identity,
            lease_transitions=self.lease_transitions,
        )

    async def wait_ended(self) -> None:
        await self._done.wait()


class LeaderElector:
    """One candidate in the election for one Lease (see the module doc).

        elector = LeaderElector(config, ClientsetLeaseClient(le_clientset), LeaderCallbacks(...))
        await elector.run()            # until the term ends (or rejoin=True: until cancelled/stop())

    Read `is_leader()` before acting and attach `fence_token()` to every write.
    """

    def __init__(
        self,
        config: LeaderElectionConfig,
        client: LeaseClient,
        callbacks: LeaderCallbacks | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.callbacks = callbacks or LeaderCallbacks()
        self.lock = LeaseLock(client, config.lease_namespace, config.lease_name, config.identity)
        self._clock: Clock = clock or RealClock()
        self._rng = rng or random.Random()
        # The newest version of the Lease known (from a get, our writes, or the watch), and the record
        # it holds with the local time at which that record was first observed.
        self._lease: pb.Lease | None = None
        self._known = False
        self._known_rv = 0
        self._observed: LeaderElectionRecord | None = None
        self._observed_time = 0.0
        self._observations = 0  # bumped each time a new record is observed
        self._max_transitions_seen: int | None = None
        self._changed = asyncio.Event()
        self._reported_leader = ""
        self._term: LeaderTerm | None = None
        self._last_term: LeaderTerm | None = None
        self._watch_connected = False
        self._leading_task: asyncio.Task[None] | None = None
        self._callback_error: BaseException | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._stopping = False

    # ================================================================ what callers read

    @property
    def identity(self) -> str:
        return self.config.identity

    def is_leader(self) -> bool:
        """True while a term is running and its renew deadline (on our clock) has not passed."""
        term = self._term
        return term is not None and not term.ended and self._clock.now() < term.deadline

    @property
    def term(self) -> LeaderTerm | None:
        """The current term, or None."""
        return self._term

    @property
    def last_term(self) -> LeaderTerm | None:
        """The current term, else the last one that ended, else None."""
        return self._term or self._last_term

    @property
    def acquired_revision(self) -> int | None:
        """The Lease resourceVersion at the acquisition of the current term (None when not leading)."""
        return self._term.acquired_revision if self._term is not None else None

    def get_leader(self) -> str:
        """The holder in the last observed record ("" if none): informational, as client-go's."""
        return self._observed.holder_identity if self._observed is not None else ""

    def observed(self) -> tuple[LeaderElectionRecord | None, float]:
        """The last observed record and the local time (this elector's clock) it was observed at."""
        return self._observed, self._observed_time

    @property
    def watch_connected(self) -> bool:
        return self._watch_connected

    def fence_token(self) -> pb.FenceToken:
        """The fence token to attach to a write. During a term, that term's; after it, still the
        ended term's, which the API server refuses once anyone else holds the lease; before any
        term, one that matches no lease (leaseTransitions -1). Never None: a write made by a
        replica that is not leading must fail, not go out unfenced."""
        term = self._term or self._last_term
        if term is not None:
            return term.fence
        return pb.FenceToken(
            lease_namespace=self.config.lease_namespace,
            lease_name=self.config.lease_name,
            holder_identity=self.config.identity,
            lease_transitions=-1,
        )

    def check(self, max_tolerable_expired: float = 0.0) -> str | None:
        """client-go's healthz Check: an error message if we lead but have not renewed (observed our
        own write) for leaseDuration + max_tolerable_expired: the loop is stuck."""
        if self._term is None:
            return None
        if self._clock.now() - self._observed_time > self.config.lease_duration + max_tolerable_expired:
            return f"failed election to renew leadership on lease {self.lock.describe()}"
        return None

    # ================================================================ lifetime

    def step_down(self, reason: str, *, fence: pb.FenceToken | None = None) -> bool:
        """End the current term at once, as a lost lease ends it: not leader, `on_stopped_leading`,
        the leading task cancelled; then, as after any term, the lease is released if it still
        holds the term (release_on_cancel), and `run()` returns or (rejoin) goes back to standby.

        For a leader that learns from elsewhere that it no longer holds the lease: a write the API
        server refused as fenced (FAILED_PRECONDITION) proves another holder or term. With `fence`,
        only if it is the current term's token: the refusal of a write made under an earlier term
        says nothing about this one. True if a term ended."""
        term = self._term
        if term is None or term.ended:
            return False
        if fence is not None and fence != term.fence:
            return False
        self._end_term(reason)
        return True

    def stop(self) -> None:
        """Stop a running `run()` gracefully: end the term (on_stopped_leading), wait for the
        leading task, release the lease if configured; `run()` then returns normally. A no-op when
        not running."""
        task = self._main_task
        if task is None or task.done() or self._stopping:
            return  # not running, or already stopping
        self._stopping = True
        task.cancel()

    async def run(self, *, rejoin: bool = False) -> None:
        """Take part in the election. Returns when the term ends (client-go's Run), or with
        `rejoin=True` goes back to standby after a term and returns only on `stop()`. Cancelling
        the caller's task works like `stop()` but propagates the cancellation. If
        `on_started_leading` raised, the term ends and run() re-raises that error."""
        if self._main_task is not None:
            raise RuntimeError(f"leader elector {self.identity} is already running")
        self._main_task = asyncio.current_task()
        self._stopping = False
        self._callback_error = None
        try:
            async with asyncio.TaskGroup() as tg:
                watcher = None
                if self.config.strategy == Strategy.WATCH:
                    watcher = tg.create_task(self._watch_loop(), name=f"lease-watch/{self.identity}")
                try:
                    while not self._stopping:
                        term = await self._acquire()
                        await self._lead(term, tg)
                        if self._callback_error is not None or not rejoin:
                            break
                finally:
                    if watcher is not None:
                        watcher.cancel()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not (self._stopping and task is not None and task.uncancel() == 0):
                raise
        finally:
            self._watch_connected = False
            self._main_task = None
            self._stopping = False
        if self._callback_error is not None:
            raise self._callback_error

    # ================================================================ observing the Lease

    def _observe(self, lease: pb.Lease | None, revision: int | None = None) -> None:
        """Take in a version of the Lease (None: it does not exist, as of `revision`).

        Versions older than the newest known are ignored (a watch event can trail a get). When the
        record differs from the last observed one, the local time is recorded (client-go compares
        the raw record the same way); a version with the same record (a label edit) does not reset
        the observation time.
        """
        rv = resource_version_of(lease) if revision is None else revision
        if self._known:
            same_version = rv == self._known_rv and (lease is None) == (self._lease is None)
            if rv < self._known_rv or same_version:
                return
        first = not self._known
        self._known, self._known_rv, self._lease = True, rv, lease
        record = LeaderElectionRecord.from_spec(lease.spec) if lease is not None else None
        if record == self._observed and not first:
            return
        self._observed = record
        self._observed_time = self._clock.now()
        if record is not None:
            seen = self._max_transitions_seen
            self._max_transitions_seen = max(record.lease_transitions, -1 if seen is None else seen)
        self._observations += 1
        self._changed.set()
        self._maybe_report_transition()
        self._check_term()

    def _maybe_report_transition(self) -> None:
        holder = self.get_leader()
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        log.info("lease %s: new leader %r (observed by %s)", self.lock.describe(), holder, self.identity)
        cb = self.callbacks.on_new_leader
        if cb is not None:
            try:
                cb(holder)
            except Exception:
                log.exception("on_new_leader callback failed")

    def _check_term(self) -> None:
        """A leader that observes the lease gone, held by another, or re-acquired under another
        term stops at once (client-go would keep polling until its renew deadline)."""
        term = self._term
        if term is None or term.ended:
            return
        rec = self._observed
        if rec is None:
            self._end_term(f"lease {self.lock.describe()} was deleted")
        elif rec.holder_identity != term.identity:
            who = f"now held by {rec.holder_identity!r}" if rec.holder_identity else "released"
            self._end_term(f"lease {self.lock.describe()} is {who}")
        elif rec.lease_transitions != term.lease_transitions:
            self._end_term(
                f"lease {self.lock.describe()} was taken under a new term "
                f"(leaseTransitions {rec.lease_transitions}, ours {term.lease_transitions})"
            )

    def _duration_of(self, record: LeaderElectionRecord) -> float:
        """How long the record's holder promised to hold: its leaseDurationSeconds (client-go's
        isLeaseValid uses the record's, not its own configuration), ours if the record has none."""
        if record.lease_duration_seconds > 0:
            return float(record.lease_duration_seconds)
        return self.config.lease_duration

    def _is_own_last_term(self, record: LeaderElectionRecord) -> bool:
        last = self._last_term
        return (
            last is not None
            and record.holder_identity == last.identity
            and record.lease_transitions == last.lease_transitions
        )

    def _takeable_at(self, now: float) -> float:
        """The local time from which a standby may take the lease, by what it has observed."""
        rec = self._observed
        if not self._known or rec is None or not rec.holder_identity or self._is_own_last_term(rec):
            return now
        return self._observed_time + self._duration_of(rec)

    def _lease_valid(self, now: float) -> bool:
        """client-go isLeaseValid: observedTime + leaseDurationSeconds is after now."""
        rec = self._observed
        return rec is not None and self._observed_time + self._duration_of(rec) > now

    # ================================================================ one attempt

    async def _try_acquire_or_renew(self, *, watched: bool = False) -> bool:
        """client-go tryAcquireOrRenew: one attempt to take the lease, or as leader to renew it.

        `watched`: the standby acts on the newest version the watch delivered (a compare-and-swap on
        its resourceVersion, no Get first); on a conflict it falls back to the full attempt.
        """
        cfg, lock, term = self.config, self.lock, self._term
        leading = term is not None and not term.ended
        now = self._clock.now()
        stamp = format_micro_time(self._clock.wall())
        desired = LeaderElectionRecord(
            holder_identity=cfg.identity,
            lease_duration_seconds=cfg.lease_duration_seconds,
            acquire_time=stamp,
            renew_time=stamp,
        )

        # 1. Fast path for the leader (client-go): update optimistically, assuming the version we
        #    know is still the current one.
        if term is not None and leading and self._lease is not None and self._lease_valid(now):
            try:
                lease = await lock.update(
                    self._lease,
                    replace(
                        desired, acquire_time=term.acquire_time, lease_transitions=term.lease_transitions
                    ),
                )
            except ApiError as e:
                log.info(
                    "failed to update lease %s optimistically (%s), falling back to slow path",
                    lock.describe(),
                    e,
                )
                if term.ended:
                    return False
            else:
                self._observe(lease)
                return not term.ended

        # 1b. (watch) A standby acting on the version the watch showed: it judged that very version
        #     takeable, so a compare-and-swap on it is all that is needed.
        elif watched and not leading and self._lease is not None and self._observed is not None:
            if self._takeable_at(now) <= now:
                try:
                    lease = await lock.update(
                        self._lease, replace(desired, lease_transitions=self._observed.lease_transitions + 1)
                    )
                except (ConflictError, NotFoundError) as e:
                    log.debug("lease %s changed under us (%s); re-reading", lock.describe(), e)
                except ApiError as e:
                    log.error("failed to update lease %s: %s", lock.describe(), e)
                    return False
                else:
                    self._observe(lease)
                    return True

        # 2. Obtain or create the record.
        try:
            current = await lock.get()
        except NotFoundError as e:
            if e.revision.isdigit():
                self._observe(None, int(e.revision))
            if term is not None and leading:
                self._end_term(f"lease {lock.describe()} was deleted")
                return False
            # A recreated Lease continues the transition count we knew (client-go starts at 0), so a
            # fence token of an earlier term cannot match again.
            seen = self._max_transitions_seen
            transitions = 0 if seen is None else seen + 1
            try:
                lease = await lock.create(replace(desired, lease_transitions=transitions))
            except ApiError as e2:
                log.error("error initially creating lease %s: %s", lock.describe(), e2)
                return False
            self._observe(lease)
            return True
        except ApiError as e:
            log.error("error retrieving lease %s: %s", lock.describe(), e)
            return False
        self._observe(current)
        if term is not None and term.ended:
            return False  # the record shows another holder or term: _check_term ended ours

        # 3. Record obtained: check identity and time, on the newest version known.
        base, rec = self._lease, self._observed
        if base is None or rec is None:
            return False  # known deleted, in a newer revision than this get: next attempt creates it
        if not leading and self._takeable_at(now) > now:
            log.debug("lease %s is held by %s and has not yet expired", lock.describe(), rec.holder_identity)
            return False

        # 4. Update. As leader keep the term's acquireTime and transitions; a new term counts one more.
        if term is not None and leading:
            desired = replace(
                desired, acquire_time=term.acquire_time, lease_transitions=term.lease_transitions
            )
        else:
            desired = replace(desired, lease_transitions=rec.lease_transitions + 1)
        try:
            lease = await lock.update(base, desired)
        except ConflictError as e:
            log.info("lease %s changed under us (%s)", lock.describe(), e)  # a lost race
            return False
        except ApiError as e:
            log.error("failed to update lease %s: %s", lock.describe(), e)
            return False
        self._observe(lease)
        return not (term is not None and term.ended)

    async def _attempt(self, *, watched: bool = False) -> LeaderTerm | None:
        """One acquisition attempt, bounded by renewDeadline; the term it starts, if any."""
        start = self._clock.now()
        try:
            async with self._clock.timeout_at(start + self.config.renew_deadline):
                ok = await self._try_acquire_or_renew(watched=watched)
        except TimeoutError:
            log.warning(
                "acquiring lease %s: no answer within %gs", self.lock.describe(), self.config.renew_deadline
            )
            ok = False
        return self._start_term(start) if ok else None

    def _start_term(self, started: float) -> LeaderTerm | None:
        lease, rec = self._lease, self._observed
        if lease is None or rec is None or rec.holder_identity != self.identity:
            return None  # taken again before we could even start (a newer version is known)
        term = LeaderTerm(
            identity=self.identity,
            lease_namespace=self.config.lease_namespace,
            lease_name=self.config.lease_name,
            lease_transitions=rec.lease_transitions,
            acquired_revision=resource_version_of(lease),
            acquire_time=rec.acquire_time,
            acquired_at=started,
            # The term is valid from the moment the acquiring write was *sent*.
            deadline=started + self.config.renew_deadline,
        )
        self._term = term
        log.info(
            "successfully acquired lease %s as %s (leaseTransitions %d, resourceVersion %d)",
            self.lock.describe(),
            self.identity,
            term.lease_transitions,
            term.acquired_revision,
        )
        return term

    # ================================================================ standby

    async def _acquire(self) -> LeaderTerm:
        log.info("attempting to acquire leader lease %s...", self.lock.describe())
        if self.config.strategy == Strategy.POLL:
            return await self._acquire_poll()
        return await self._acquire_watch()

    async def _acquire_poll(self) -> LeaderTerm:
        """client-go acquire(): wait.JitterUntil(tryAcquireOrRenew, retryPeriod, JitterFactor 1.2,
        sliding=true): attempt, then wait retryPeriod·[1, 2.2) from the attempt's end."""
        while True:
            term = await self._attempt()
            if term is not None:
                return term
            await self._clock.sleep_until(self._clock.now() + self._next_wait())

    async def _acquire_watch(self) -> LeaderTerm:
        """The watch strategy. The watch (`_watch_loop`) keeps the observed record current; this
        loop sleeps until the lease becomes takeable by that observation (released: at once;
        held: observedTime + leaseDurationSeconds, on our clock) or until a new observation, then
        attempts with a compare-and-swap on the watched version.

        While the watch is down it polls as client-go does (every retryPeriod·[1, 2.2)). After an
        attempt that failed although the lease looked takeable (an error, a timeout), it does not
        try again before that same jittered wait unless the record changes, so an API server that
        fails every call is not hammered.
        """
        next_poll = self._clock.now()
        failed_at_observation = -1
        while True:
            self._changed.clear()
            now = self._clock.now()
            wake = self._takeable_at(now)
            if not self._watch_connected:
                wake = min(wake, next_poll)
            if failed_at_observation == self._observations:
                wake = max(wake, next_poll)
            if wake > now:
                with contextlib.suppress(TimeoutError):
                    async with self._clock.timeout_at(wake):
                        await self._changed.wait()
                if self._changed.is_set():
                    continue
            watched = self._watch_connected and self._lease is not None
            term = await self._attempt(watched=watched)
            if term is not None:
                return term
            now = self._clock.now()
            next_poll = now + self._next_wait()
            # Failed although what we observe says the lease is takeable (an error, a lost race not
            # yet seen): back off until the record changes. Failed because it is held: wake at
            # its expiry, no backoff.
            if self._takeable_at(now) <= now:
                failed_at_observation = self._observations

    def _next_wait(self) -> float:
        return jitter(self.config.retry_period, JITTER_FACTOR, self._rng)

    async def _watch_loop(self) -> None:
        """Keep the observation current from a watch of the Lease. Every (re)connect starts from the
        current state (an initial ADDED if it exists, then a BOOKMARK), so nothing is missed while
        disconnected; an unchanged record does not reset the observation time."""
        failures = 0
        while True:
            connected = False
            started = self._clock.now()
            try:
                async with self.lock.watch() as events:
                    initial, seen = True, False
                    async for event in events:
                        if event.type == BOOKMARK:
                            if initial:
                                initial = False
                                if not seen and event.resource_version.isdigit():
                                    self._observe(None, int(event.resource_version))
                                self._watch_connected = connected = True
                                self._changed.set()
                                failures = 0
                            continue
                        if event.type == DELETED:
                            rv = event.resource_version
                            self._observe(None, int(rv) if rv.isdigit() else None)
                        elif event.object is not None:
                            seen = True
                            self._observe(event.object)
                if not connected:
                    failures += 1  # ended before it delivered the current state
            except ApiError as e:
                failures += 1
                log.info("watch of lease %s ended: %s", self.lock.describe(), e)
            except Exception:
                failures += 1
                log.exception("watch of lease %s failed", self.lock.describe())
            finally:
                if self._watch_connected:
                    self._watch_connected = False
                    self._changed.set()
            if connected and self._clock.now() - started >= MIN_HEALTHY_WATCH_S:
                # A stream that delivered the current state and then ran a while was ended by a
                # channel swap (certificate rotation) or the server's max connection age: re-watch at
                # once, as client-go's reflector does; only a "very short watch" backs off
                # (k8s.io/client-go/tools/cache/reflector.go, handleWatch / errorStopRequested).
                failures = 0
            if failures:
                delay = min(WATCH_BACKOFF_MAX, WATCH_BACKOFF_INITIAL * 2 ** (failures - 1))
                await self._clock.sleep_until(self._clock.now() + jitter(delay, 1.0, self._rng))

    # ================================================================ leader

    async def _lead(self, term: LeaderTerm, tg: asyncio.TaskGroup) -> None:
        """Run the term: on_started_leading (called here, at once; an awaitable it returns runs as a
        task) and the renew loop, until the term ends; then wait for both to finish (the guarded
        work has stopped) and release if configured."""
        cb = self.callbacks.on_started_leading
        if cb is not None:
            try:
                result = cb(term)
            except Exception as e:
                self._leading_failed(e)
            else:
                if inspect.isawaitable(result):
                    self._leading_task = tg.create_task(
                        self._run_leading(result), name=f"leading/{self.identity}"
                    )
        renew = tg.create_task(self._renew_loop(term), name=f"lease-renew/{self.identity}")
        try:
            await term.wait_ended()
        finally:
            self._end_term("leader election stopped")
            renew.cancel()
            tasks = [t for t in (renew, self._leading_task) if t is not None]
            await asyncio.wait(tasks)
            self._leading_task = None
            if self.config.release_on_cancel:
                await self._release(term)

    async def _run_leading(self, work: Awaitable[object]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._leading_failed(e)

    def _leading_failed(self, e: Exception) -> None:
        log.error("on_started_leading failed; giving up the lease", exc_info=e)
        self._callback_error = e
        self._end_term(f"on_started_leading failed: {e!r}")

    async def _renew_loop(self, term: LeaderTerm) -> None:
        """client-go renew(): wait.Until(round, retryPeriod), each round wait.PollImmediateUntil(
        retryPeriod, tryAcquireOrRenew) bounded by the renew deadline. The first round runs at once.

        The deadline runs from the start of the last successful write (client-go: from the start
        of the round, i.e. retryPeriod plus a round trip later), so a leader never acts longer than
        renewDeadline after it last proved its hold."""
        cfg, clock = self.config, self._clock
        while True:
            while True:
                start = clock.now()
                if start >= term.deadline:
                    self._end_term(
                        f"failed to renew lease {self.lock.describe()}: no successful renewal within "
                        f"renewDeadline {cfg.renew_deadline:g}s"
                    )
                    return
                try:
                    async with clock.timeout_at(term.deadline):
                        if failpoints.ENABLED:
                            await failpoints.inject("elector/renew")
                        ok = await self._try_acquire_or_renew()
                except TimeoutError:
                    ok = False
                if term.ended:
                    return
                if ok:
                    term.deadline = start + cfg.renew_deadline
                    log.debug("successfully renewed lease %s", self.lock.describe())
                    break
                await clock.sleep_until(min(start + cfg.retry_period, term.deadline))
            await clock.sleep_until(clock.now() + cfg.retry_period)

    def _end_term(self, reason: str) -> None:
        """End the current term at once: not leader any more, on_stopped_leading, then the leading
        task is cancelled. Synchronous, so nothing else runs in between."""
        term = self._term
        if term is None or term.ended:
            return
        term.ended = True
        term.end_reason = reason
        self._term = None
        self._last_term = term
        log.info("stopped leading lease %s as %s: %s", self.lock.describe(), self.identity, reason)
        cb = self.callbacks.on_stopped_leading
        if cb is not None:
            try:
                cb()
            except Exception:
                log.exception("on_stopped_leading callback failed")
        term._done.set()
        task = self._leading_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
        self._changed.set()

    async def _release(self, term: LeaderTerm) -> bool:
        """client-go release(): if the Lease still holds our term, write holderIdentity "",
        leaseDurationSeconds 1, acquire/renewTime now, leaseTransitions unchanged, so a standby can
        take it at once. Decided on a fresh read (as newer client-go does); retried on conflict;
        bounded by renewDeadline."""
        lock = self.lock
        try:
            async with self._clock.timeout_at(self._clock.now() + self.config.renew_deadline):
                while True:
                    current = await lock.get()
                    self._observe(current)
                    rec = LeaderElectionRecord.from_spec(current.spec)
                    if (
                        rec.holder_identity != term.identity
                        or rec.lease_transitions != term.lease_transitions
                    ):
                        return False
                    stamp = format_micro_time(self._clock.wall())
                    released = LeaderElectionRecord(
                        holder_identity="",
                        lease_duration_seconds=1,
                        acquire_time=stamp,
                        renew_time=stamp,
                        lease_transitions=rec.lease_transitions,
                    )
                    try:
                        lease = await lock.update(current, released)
                    except ConflictError:
                        continue
                    self._observe(lease)
                    log.info("released lease %s", lock.describe())
                    return True
        except TimeoutError:
            log.error(
                "failed to release lease %s: no answer within %gs",
                lock.describe(),
                self.config.renew_deadline,
            )
        except NotFoundError:
            pass
        except ApiError as e:
            log.error("failed to release lease %s: %s", lock.describe(), e)
        return False
