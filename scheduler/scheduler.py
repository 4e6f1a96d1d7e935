"""The Scheduler: one kube-scheduler replica's informers, cache, queue, frameworks and the loop
(upstream ``pkg/scheduler/scheduler.go`` and ``schedule_one.go``).

    pop ──> framework of the pod's profile ──> update snapshot ──> schedule_pod ──> assume
        ──> Reserve ──> Permit ──┬──> [binding cycle, a task]: WaitOnPermit ──> PreBind ──> Bind
                                 │        ──> finish_binding, Scheduled event ──> PostBind
        (any failure) ───────────┴──> Unreserve (reverse order), forget, handle_scheduling_failure

The scheduling cycle is serial: one pod at a time against a snapshot no other cycle changes. It is
synchronous unless extenders are configured; then it awaits their HTTP calls (Filter, Prioritize,
and Preempt in the PostFilter), still one pod at a time, and the snapshot stays as the cycle found
it while informers go on filling the cache. An interested binder extender binds instead of the Bind
plugins (``_bind``). The binding cycle talks to the API server, so it runs as a task in a TaskGroup the
scheduler owns, and the loop goes on with the next pod: the assumed pod is already counted in the
cache. At most ``max_binds_in_flight`` binding cycles run at once; the loop waits for a free slot
before it pops the next pod (backpressure instead of an unbounded pile of binds). A pod waiting at
Permit gives its slot back while it waits, so waiting pods can never stall the loop.

A failed attempt (``handle_scheduling_failure``, upstream handleSchedulingFailure):

* ``scheduler_schedule_attempts_total{result="unschedulable"|"error"}``;
* the pod goes back to the queue with the plugins that rejected it (only their events can move
  it back), unless the informer says it is gone, bound, or replaced by a new pod of that name;
* a ``FailedScheduling`` Warning event with the FitError message
  ("0/20 nodes are available: 3 Insufficient cpu, ...") and the condition
  ``PodScheduled=False, reason=Unschedulable`` (``SchedulerError`` for errors) with the same
  message, both written off the loop.

A bind the API server refuses because the pod is already bound, was deleted or was replaced
(ABORTED / NOT_FOUND) is not retried blindly: the scheduler first waits (briefly) for its pod
informer to reach the revision of that answer, so the failure handling sees the truth and drops
the pod instead of requeueing it.

Leader election (``kse.leaderelection``) gates only the loop. Every replica keeps warm
informers, cache and queue from the start (``run(leader_elected=True)``); the elector calls
``lead(term)`` when a term begins and ``stop_leading()`` the moment it ends, then cancels ``lead``.

* Catching up. Before its first pop a new leader waits for its pod informer to reach the revision
  at which it acquired the lease (``LeaderTerm.acquired_revision``). Fencing makes every write of the
  previous leader commit before that revision (a write commits only while the Lease is unchanged
  since the fence was checked, and the acquisition changed it), so the new leader never schedules
  on a view that misses one of its predecessor's binds: no pod bound twice (the bind's own
  precondition covers that), and no node over-committed by two leaders' decisions. Its node
  informer is brought up to that revision too: a standby's node watch may be down and backing off,
  and a leader that schedules from it places pods on nodes cordoned since.
* Stopping. ``stop_leading()`` is synchronous: the loop pops nothing more, at once, and the binding
  cycles in flight are cancelled; a bind that already left is covered by fencing. The loop also
  checks ``is_leader()`` (the elector's own-clock check) after each pop and the binder before each
  bind, so a leader woken from a pause past its renew deadline sends nothing even before the
  elector has noticed; fencing is what makes a late write harmless, this only spares it. When ``lead``
  ends, the term's state is forgotten: assumed pods (their binds' outcome is the informer's to
  tell), pods in flight or waiting at Permit (requeued), and events and conditions not yet written.
  A replica that goes back to standby is a clean standby.
* Fenced writes. Every write (bind, pod status, event) carries the token of the term under which it
  was decided. A write the API server refuses as fenced (FAILED_PRECONDITION) proves the term is
  over: the scheduler stops leading at once, tells ``on_fenced`` (the elector's ``step_down``),
  and never retries it.
* Handing over. ``finish_leading(grace)`` is the graceful end before a release: nothing more is
  popped, but the binding cycles in flight finish and the queued writes go out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from kse.client.clientset import Clientset
from kse.client.errors import ApiError, ConflictError, FencedError, NotFoundError
from kse.client.informer import Informer, InformerFactory
from kse.gctuning import freeze_now, keep_old_objects_frozen
from kse.leaderelection import LeaderTerm
from kse.objects.meta import object_key
from kse.tasks import TaskSet
from proto import kse_pb2 as pb
from scheduler.algorithm import (
    AlgorithmState,
    NoNodesAvailableError,
    ScheduleResult,
    SchedulingError,
    diagnosis_statuses,
    schedule_pod,
    schedule_pod_with_extenders,
)
from scheduler.apis.config import KubeSchedulerConfiguration
from scheduler.binder import Binder, FencedHook, FenceSource, LeaderCheck, NotLeaderError
from scheduler.cache.cache import CLEANUP_ASSUMED_PERIOD, DEFAULT_ASSUMED_POD_TTL, Cache, CacheError
from scheduler.eventhandlers import POD_FIELD_SELECTOR, EventHandlers
from scheduler.events import (
    ACTION_BINDING,
    ACTION_SCHEDULING,
    NORMAL,
    REASON_FAILED_SCHEDULING,
    REASON_SCHEDULED,
    WARNING,
    EventRecorder,
    scheduled_message,
    truncate_message,
)
from scheduler.extender.http import (
    ExtenderError,
    HTTPExtender,
    apply_ignored_resources,
    build_extenders,
    close_all,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import PluginFactory
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.preemption.evaluator import last_outcomes
from scheduler.framework.runtime import MAX_PERMIT_TIMEOUT, Framework
from scheduler.framework.types import Code, Diagnosis, FitError, PodInfo, QueuedPodInfo, Status
from scheduler.metrics import SchedulerMetrics, attempts_label
from scheduler.preemption_executor import APIPreemptionExecutor
from scheduler.profile import new_profiles
from scheduler.queue.nominator import NominatingInfo
from scheduler.queue.scheduling_queue import (
    DEFAULT_POD_INITIAL_BACKOFF,
    DEFAULT_POD_MAX_BACKOFF,
    EVENT_ASSIGNED_POD_DELETE,
    PriorityQueue,
    QueueError,
)
from scheduler.status import REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE, PodStatusUpdater, unschedulable

log = logging.getLogger(__name__)

# Binding cycles past Permit at once. By Little's law the binds in flight are throughput x bind
# latency: ~5 at 500 pods/s and 10 ms, so 64 leaves a wide margin while keeping the API server's
# queue, and with it each attempt's latency, short (measured: same throughput as 512, p50 attempt
# latency 62 ms instead of 166+ ms). Pods waiting at Permit do not hold a slot.
DEFAULT_MAX_BINDS_IN_FLIGHT = 64
# How long a refused bind waits for the informer to catch up with the refusal's revision.
BIND_CONFLICT_SYNC_TIMEOUT = 5.0
# A new leader still catching up with the lease's revision says so this often.
CATCH_UP_WARN_AFTER = 5.0
_REJECTED = (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)
# Upstream clearNominatedNode: what a failed attempt does to the nomination unless PostFilter said
# otherwise.
CLEAR_NOMINATED = NominatingInfo("")


@dataclass
class SchedulerOptions:
    """What the command line adds to the KubeSchedulerConfiguration."""

    identity: str = ""
    assumed_pod_ttl: float = DEFAULT_ASSUMED_POD_TTL
    permit_wait_timeout: float = MAX_PERMIT_TIMEOUT
    max_binds_in_flight: int = DEFAULT_MAX_BINDS_IN_FLIGHT
    seed: int | None = None
    # Freeze the synced caches out of CPython's full collections (kse.gctuning); the
    # `kse scheduler` process turns it on (--gc-freeze), a scheduler embedded elsewhere does not.
    gc_freeze: bool = False


@dataclass
class _Failure:
    """Why an attempt failed: a status code, the message for the event and the condition, and
    the plugins whose events may help."""

    code: Code
    message: str
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    # The error an Error status carried (`Status.err`), e.g. the client's error of a failed bind.
    err: BaseException | None = None
    # What becomes of the pod's nominatedNodeName (upstream NominatingInfo): None keeps it
    # (ModeNoop), a NominatingInfo sets it ("" clears it).
    nominating: NominatingInfo | None = None

    @property
    def rejected(self) -> bool:
        return self.code in _REJECTED

    @classmethod
    def of_fit_error(cls, err: FitError, code: Code = Code.UNSCHEDULABLE) -> _Failure:
        d = err.diagnosis
        return cls(code, str(err), set(d.unschedulable_plugins), set(d.pending_plugins))

    @classmethod
    def of_status(cls, pod: pb.Pod, node_name: str, status: Status) -> _Failure:
        """A rejection at Reserve / Permit / WaitOnPermit is a FitError on that one node
        (upstream builds FitError{NumAllNodes: 1}); anything else an error."""
        if not status.is_rejected():
            message = status.message() or "unknown error"
            return cls(Code.ERROR, message, err=status.err, nominating=CLEAR_NOMINATED)
        diagnosis = Diagnosis(node_to_status={node_name: status})
        diagnosis.add_plugin_status(status)
        failure = cls.of_fit_error(FitError(pod, 1, diagnosis), status.code)
        failure.nominating = CLEAR_NOMINATED
        return failure


class _Slot:
    """One binding slot of a binding cycle: released at most once, re-acquirable."""

    __slots__ = ("_held", "_sem")

    def __init__(self, sem: asyncio.Semaphore) -> None:
        self._sem = sem
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._sem.release()

    async def acquire(self) -> None:
        if not self._held:
            await self._sem.acquire()
            self._held = True


class Scheduler:
    """One scheduler replica (see the module doc). `await run()` until `stop()` or cancelled."""

    def __init__(
        self,
        cfg: KubeSchedulerConfiguration,
        clientset: Clientset,
        *,
        event_clientset: Clientset | None = None,
        options: SchedulerOptions | None = None,
        metrics: SchedulerMetrics | None = None,
        fence: FenceSource | None = None,
        on_fenced: FencedHook | None = None,
        clock: Callable[[], float] = time.monotonic,
        registry: Mapping[str, PluginFactory] | None = None,
    ) -> None:
        self.options = opts = options or SchedulerOptions()
        self.metrics = metrics or SchedulerMetrics()
        self.clientset = clientset
        self._clock = clock
        self.cache = Cache(ttl=opts.assumed_pod_ttl, clock=clock)
        self.snapshot = Snapshot()
        # Told when a write is refused as fenced (after the scheduler stopped leading by itself).
        self.on_fenced = on_fenced
        self.is_leader: LeaderCheck | None = None
        self.binder = Binder(clientset, fence, on_fenced=self._write_fenced)
        # Informers and the recorder come first: plugins may use them (their handle's
        # shared_informer_factory() / event_recorder(), as upstream's Handle).
        self.informers = InformerFactory(clientset)
        self.recorder = EventRecorder(
            event_clientset or clientset, instance=opts.identity, fence=fence, on_fenced=self._write_fenced
        )
        # Extenders in call order (ignorable ones last); their ignored resources go to Fit's args.
        self.extenders: list[HTTPExtender] = build_extenders(cfg.extenders)
        apply_ignored_resources(cfg)
        self.profiles: dict[str, Framework] = new_profiles(
            cfg,
            registry=registry,
            snapshot=self.snapshot,
            binder=self.binder,
            max_permit_timeout=opts.permit_wait_timeout,
            informer_factory=self.informers,
            event_recorder=self.recorder,
        )
        if not self.profiles:
            raise ValueError("the configuration has no profiles")
        for fwk in self.profiles.values():
            fwk.set_extenders(self.extenders)  # preemption reads them through its handle
        first = next(iter(self.profiles.values()))
        self.queue = PriorityQueue(
            first.queue_sort_func(),  # validation made it the same for every profile
            clock=clock,
            pod_initial_backoff=float(cfg.pod_initial_backoff_seconds or DEFAULT_POD_INITIAL_BACKOFF),
            pod_max_backoff=float(cfg.pod_max_backoff_seconds or DEFAULT_POD_MAX_BACKOFF),
            queueing_hints_per_profile={name: f.queueing_hints() for name, f in self.profiles.items()},
            pre_enqueue_per_profile={name: f.pre_enqueue_functions() for name, f in self.profiles.items()},
            on_incoming=self.metrics.incoming,
        )
        self.alg = AlgorithmState(percentage_of_nodes_to_score=cfg.percentage_of_nodes_to_score or 0)
        if opts.seed is not None:
            self.alg.rng.seed(opts.seed)

        self.pod_informer: Informer[pb.Pod] = self.informers.informer(
            "pods", field_selector=POD_FIELD_SELECTOR
        )
        self.node_informer: Informer[pb.Node] = self.informers.informer("nodes")
        # PodDisruptionBudgets, for PDB-aware preemption (upstream's PdbLister).
        self.pdb_informer: Informer[pb.PodDisruptionBudget] = self.informers.informer("poddisruptionbudgets")
        self.handlers = EventHandlers(
            cache=self.cache, queue=self.queue, profiles=self.profiles, metrics=self.metrics
        )
        self.handlers.register(self.pod_informer, self.node_informer)

        self.status = PodStatusUpdater(
            clientset, lookup=self._lookup_pod, fence=fence, on_fenced=self._write_fenced
        )
        self._fence = fence
        # Preemption: the queue's nominator, and the API side of victim deletion, for every profile.
        self.queue.nominator.pod_lookup = self._lookup_pod
        self.preemption = APIPreemptionExecutor(
            clientset,
            pod_lookup=self._lookup_pod,
            pdbs=self.pdb_informer.store.list,
            waiting_pods=first.waiting_pods,
            recorder=self.recorder,
            spawner=self._spawn_term_task,
            activator=self.queue.activate,
            fence=fence,
            on_fenced=self._write_fenced,
        )
        for fwk in self.profiles.values():
            fwk.set_pod_nominator(self.queue.nominator)
            fwk.set_preemption_executor(self.preemption)
        self.metrics.watch_queue(self.queue)
        self.metrics.watch_cache(self.cache)

        self._bind_slots = asyncio.Semaphore(max(1, opts.max_binds_in_flight))
        self._bindings: asyncio.TaskGroup | None = None
        self._binding_tasks: set[asyncio.Task[None]] = set()
        self._binds_in_flight = 0
        self.synced = asyncio.Event()
        self._stopping = asyncio.Event()
        self._leader_elected = False
        # The current lead(): its task, the loop task, and whether the term is over / draining.
        self._lead_task: asyncio.Task[Any] | None = None
        self._popper: asyncio.Task[None] | None = None
        self._term_over = False
        self._draining = False
        self.terms = 0
        self.loop_running = False
        self.loop_error: BaseException | None = None
        self.attempts = 0

    # ================================================================ lifetime

    def set_fence(self, fence: FenceSource | None) -> None:
        """The fence token source of every write (leader election: the elector's `fence_token`)."""
        self._fence = fence
        self.binder.set_fence(fence)
        self.recorder.set_fence(fence)
        self.status.set_fence(fence)
        self.preemption.set_fence(fence)

    def set_leader_check(self, is_leader: LeaderCheck | None) -> None:
        """Checked before every pop and every bind (leader election: the elector's `is_leader`,
        which reads our own clock): once it fails, the term is over for the scheduler."""
        self.is_leader = is_leader
        self.binder.is_leader = is_leader

    async def run(self, *, leader_elected: bool = False) -> None:
        """What every replica runs, leader or not: informers (the cache and queue fill up), event
        and status writers, queue flushes, assumed-pod expiry. Without leader election the loop
        (`lead()`) starts once the informers have synced; with it (`leader_elected`), the elector
        runs `lead(term)` for each term. Returns after `stop()` once in-flight binding cycles are
        done; cancelling it cancels everything."""
        self._leader_elected = leader_elected
        async with asyncio.TaskGroup() as tg:
            background = [
                tg.create_task(self.informers.run(), name="informers"),
                tg.create_task(self.recorder.run(), name="event-recorder"),
                tg.create_task(self.status.run(), name="pod-status"),
            ]
            syncing = tg.create_task(self.informers.wait_for_sync(), name="informer-sync")
            stopping = tg.create_task(self._stopping.wait(), name="stop-before-sync")
            await asyncio.wait({syncing, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not syncing.done():  # stopped before the informers synced: nothing to schedule
                syncing.cancel()
                for task in background:
                    task.cancel()
                return
            syncing.result()
            self.synced.set()
            log.info(
                "informers synced: %d nodes, %d pods in the cache, %s",
                len(self.node_informer.store),
                self.cache.pod_count(),
                self.queue.pending_pods(),
            )
            background += [
                tg.create_task(self.queue.run(), name="queue-flush"),
                tg.create_task(self._cleanup_assumed_pods(), name="assumed-pod-expiry"),
            ]
            if self.options.gc_freeze:
                log.info("caches synced: %d objects frozen out of full collections", freeze_now())
                background.append(tg.create_task(keep_old_objects_frozen(), name="gc-freeze"))
            try:
                if leader_elected:
                    await self._stopping.wait()
                else:
                    await self.lead()
            finally:
                # Let the writes of the last attempts out before the writers stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2.0):
                        await self.recorder.wait_idle()
                        await self.status.wait_idle()
                for task in background:
                    task.cancel()
                await close_all(self.extenders)

    def stop(self) -> None:
        """Stop popping pods; `run()` returns once the binding cycles in flight are done."""
        self._stopping.set()
        self._draining = True
        if self._popper is not None:
            self._popper.cancel()
        self.queue.close()

    @property
    def leading(self) -> bool:
        """True while `lead()` runs a term that has not ended (catching up or scheduling)."""
        return self._lead_task is not None and not self._term_over

    async def lead(self, term: LeaderTerm | None = None) -> None:
        """Schedule for one term of leadership (`on_started_leading`; see the module doc), or,
        with no term, until `stop()` (no leader election).

        Waits for the informers to sync and (with a term) for the pod informer to reach the
        revision the lease was acquired at, then runs the loop until the term ends
        (`stop_leading()`, or the elector cancels this), then forgets the term's state. A loop
        drained by `finish_leading` or `stop()` does not end the term: `lead` then waits to be
        cancelled with it (an elected loop returning early would leave the lease held by a
        replica that does not schedule).
        A crash of the loop is raised (the elector then gives up the lease)."""
        if self._lead_task is not None:
            raise RuntimeError("the scheduler is already leading")
        self._lead_task = asyncio.current_task()
        self._term_over = False
        self.terms += 1
        try:
            await self.synced.wait()
            if term is not None:
                await self._catch_up(term)
            if not (self._term_over or self._draining):
                try:
                    async with asyncio.TaskGroup() as bindings:
                        self._bindings = bindings
                        self.loop_running = True
                        self._popper = bindings.create_task(self._pop_loop(), name="scheduling-loop")
                except BaseExceptionGroup:
                    if self.loop_error is not None:
                        raise self.loop_error from None
                    raise
            if term is not None and not self._term_over:
                await asyncio.get_running_loop().create_future()  # until the term ends
        finally:
            self._bindings = None
            self._popper = None
            self.loop_running = False
            self._term_over = True
            self._end_of_term(discard_writes=term is not None)
            self._lead_task = None

    async def _catch_up(self, term: LeaderTerm) -> None:
        """Wait for the pod and node informers to reach the revision the term's lease was acquired
        at. The pods: then the informer has delivered every bind (and status write) of the previous
        leader, all of which committed before that revision (see the module doc). The nodes: a
        replica that was not leading may have a node watch that is down and backing off (after an
        API server restart, say); scheduling from it would place pods on nodes cordoned or tainted
        long ago, the failure `no_bind_to_cordoned` caught (a replica led with its node view at 347
        while the lease was at 383, and bound three pods to nodes cordoned at 389 and 398 before its
        node watch came back). Both informers advance with events and bookmarks, so on an idle
        cluster this costs up to a bookmark interval, waited for in parallel; it is never cut
        short: safety over liveness."""
        target = term.acquired_revision
        if target <= 0:
            return
        t0 = self._clock()
        behind = {"pod": self.pod_informer, "node": self.node_informer}
        async with TaskSet("catch-up", logger=log, failure_level=logging.DEBUG) as tasks:
            waiting = {
                tasks.spawn(informer.wait_for_revision(target), name=f"catch-up-{kind}"): kind
                for kind, informer in behind.items()
            }
            pending = set(waiting)
            while pending:
                done, pending = await asyncio.wait(pending, timeout=CATCH_UP_WARN_AFTER)
                for task in done:
                    task.result()
                if pending:
                    log.warning(
                        "leading, but informers are behind the lease's revision %d (%.0fs): %s; "
                        "not scheduling yet",
                        target,
                        self._clock() - t0,
                        ", ".join(
                            f"{waiting[t]}s at {behind[waiting[t]].last_synced_resource_version}"
                            for t in sorted(pending, key=lambda t: waiting[t])
                        ),
                    )
        log.info(
            "leading (leaseTransitions %d): pod and node informers caught up with revision %d in %.3fs",
            term.lease_transitions,
            target,
            self._clock() - t0,
        )

    def stop_leading(self) -> None:
        """The term is over (the elector's `on_stopped_leading`; synchronous): pop nothing more,
        at once, and cancel the binding cycles in flight. `lead()` then forgets the term's state."""
        if self._lead_task is None or self._term_over:
            return
        self._term_over = True
        if self._popper is not None:
            self._popper.cancel()
        for task in list(self._binding_tasks):
            task.cancel()

    async def finish_leading(self, grace: float) -> None:
        """Wind the term down for a handover (before the elector releases the lease): pop nothing
        more, let the binding cycles in flight finish and the queued events and conditions go out,
        within `grace` seconds. What is left then is cancelled when the term ends."""
        self._draining = True
        if self._popper is not None:
            self._popper.cancel()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                while self._binding_tasks:
                    await asyncio.wait(set(self._binding_tasks))
                await self.recorder.wait_idle()
                await self.status.wait_idle()

    def _write_fenced(self, token: pb.FenceToken) -> None:
        """A write made under `token` was refused as fenced: if that is the current term's token,
        the term is over; stop at once (the elector hears it through `on_fenced`)."""
        current = self._fence() if self._fence is not None else None
        if current != token:
            return  # a write of an earlier term: says nothing about this one
        if self.leading:
            log.warning(
                "a write under lease %s/%s (holder %s, leaseTransitions %d) was refused as fenced: "
                "another replica leads; stopping at once",
                token.lease_namespace,
                token.lease_name,
                token.holder_identity,
                token.lease_transitions,
            )
        self.stop_leading()
        if self.on_fenced is not None:
            self.on_fenced(token)

    async def _pop_loop(self) -> None:
        try:
            while await self.schedule_one():
                pass
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.loop_error = e
            log.exception("the scheduling loop crashed")
            raise
        finally:
            self.loop_running = False

    def _end_of_term(self, *, discard_writes: bool) -> None:
        """Forget what the term left behind (every binding cycle has finished; see the module doc)."""
        self._draining = self._stopping.is_set()
        self._binding_tasks.clear()
        # Cycles cancelled before they started never released their slot: start afresh.
        self._bind_slots = asyncio.Semaphore(max(1, self.options.max_binds_in_flight))
        self._binds_in_flight = 0
        self.metrics.goroutines.set(0, "binding")
        waiting = 0
        for fwk in self.profiles.values():
            for wp in list(fwk.waiting_pods):
                wp.reject("", "the scheduler stopped leading")
                fwk.waiting_pods.remove(wp.uid)
                waiting += 1
        for pod in self.queue.in_flight_pods():
            self.queue.done(pod.metadata.uid)
        forgotten: list[pb.Pod] = []
        for info, node_name, assumed in list(self.cache.pods()):
            if assumed:
                try:
                    self.cache.forget_pod(info, node_name)
                except CacheError as e:
                    log.error("scheduler cache ForgetPod failed: %s", e)
                    continue
                forgotten.append(info.pod)
        requeued = 0 if self.queue.closed else self._requeue_missing()
        for pod in forgotten:
            self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)
        dropped = 0
        if discard_writes:
            dropped = self.recorder.discard_pending() + self.status.discard_pending()
        if forgotten or requeued or waiting or dropped:
            log.info(
                "end of term: forgot %d assumed pods, requeued %d pods, released %d waiting at Permit, "
                "dropped %d unwritten events and conditions",
                len(forgotten),
                requeued,
                waiting,
                dropped,
            )

    def _requeue_missing(self) -> int:
        """Queue every pending pod of ours that is in no queue (its attempt was cut short)."""
        n = 0
        for pod in self.pod_informer.store.list():
            if pod.spec.node_name or not self.handlers.responsible_for(pod):
                continue
            if self.queue.where(object_key(pod.metadata.namespace, pod.metadata.name)):
                continue
            self.queue.add(pod)
            n += 1
        return n

    async def _cleanup_assumed_pods(self) -> None:
        """Expire assumed pods never confirmed (see scheduler.cache.cache); their resources are
        free again, which may help unschedulable pods."""
        while True:
            await asyncio.sleep(CLEANUP_ASSUMED_PERIOD)
            for pod_info, _node in self.cache.cleanup_assumed_pods():
                self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod_info.pod, None)

    # ================================================================ one pod

    async def schedule_one(self) -> bool:
        """One scheduling attempt (upstream ScheduleOne); False once the queue is closed."""
        await self._bind_slots.acquire()
        handed_over = False
        try:
            qpi = await self.queue.pop()
            if qpi is None:
                return False
            if self.is_leader is not None and not self.is_leader():
                # Our own clock says the term is over (e.g. we were paused past the renew deadline)
                # though the elector has not ended it yet: act no more. The end of the term requeues
                # the pod just popped.
                log.warning("no longer the leader by our own clock; stopping")
                self.stop_leading()
                return False
            self.attempts += 1
            handed_over = await self._attempt(qpi)
        finally:
            if not handed_over:
                self._bind_slots.release()
        # Neither pop() nor acquire() suspends while there is work, so without this the loop
        # would keep the event loop to itself while the queue is non-empty: the binds it just
        # started, the informers and the event writers would all wait for the queue to drain.
        # Upstream runs ScheduleOne on its own goroutine; here the cycle yields once per pod.
        await asyncio.sleep(0)
        return True

    async def _attempt(self, qpi: QueuedPodInfo) -> bool:
        """The scheduling cycle of one popped pod; True if a binding cycle took over (and with it
        the binding slot)."""
        pod = qpi.pod
        uid = qpi.pod.metadata.uid  # the queue tracks pods in flight by UID
        fwk = self.profiles.get(pod.spec.scheduler_name)
        if fwk is None:
            log.error('profile not found for scheduler name "%s"', pod.spec.scheduler_name)
            self.queue.done(uid)
            return False
        if self._skip_pod_schedule(fwk, pod):
            self.queue.done(uid)
            return False
        start = self._clock()
        state = CycleState()
        try:
            result, failure = await self._scheduling_cycle(state, fwk, qpi, start)
        except Exception as e:  # a bug must cost one attempt, not the loop
            log.exception("scheduling cycle of pod %s failed", qpi.key)
            result, failure = None, _Failure(Code.ERROR, f"scheduling cycle failed: {e}")
        if failure is not None or result is None:
            self.handle_scheduling_failure(fwk, qpi, failure or _Failure(Code.ERROR, "no result"), start)
            return False
        assert self._bindings is not None
        self._binds_in_flight += 1
        self.metrics.goroutines.set(self._binds_in_flight, "binding")
        task = self._bindings.create_task(
            self._binding_cycle(state, fwk, qpi, result.suggested_host, start), name=f"bind-{qpi.key}"
        )
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)
        return True

    def _skip_pod_schedule(self, fwk: Framework, pod: pb.Pod) -> bool:
        """Upstream skipPodSchedule: a pod being deleted, or one already assumed (it was
        requeued by an update during its own cycle)."""
        if pod.metadata.deletion_timestamp:
            self.recorder.eventf(
                pod,
                WARNING,
                REASON_FAILED_SCHEDULING,
                ACTION_SCHEDULING,
                f"skip schedule deleting pod: {pod.metadata.namespace}/{pod.metadata.name}",
                component=fwk.profile_name,
            )
            return True
        return self.cache.is_assumed_pod(pod)

    async def _scheduling_cycle(
        self, state: CycleState, fwk: Framework, qpi: QueuedPodInfo, start: float
    ) -> tuple[ScheduleResult | None, _Failure | None]:
        """Upstream schedulingCycle: the algorithm, assume, Reserve, Permit."""
        pod_info = qpi.pod_info
        pod = pod_info.pod
        t0 = time.perf_counter()
        try:
            self.cache.update_snapshot(self.snapshot)
        except CacheError as e:
            return None, _Failure(Code.ERROR, str(e))
        self.metrics.snapshot_update_duration.observe(time.perf_counter() - t0)
        try:
            if self.extenders:  # HTTP calls: the cycle awaits them (the snapshot stays as it is)
                result = await schedule_pod_with_extenders(
                    fwk, state, pod_info, self.snapshot, self.alg, self.extenders,
                    on_prioritizing=self._prioritizing_extenders,
                )  # fmt: skip
            else:
                result = schedule_pod(fwk, state, pod_info, self.snapshot, self.alg)
        except NoNodesAvailableError as e:
            self.metrics.scheduling_algorithm_duration.observe(self._clock() - start)
            return None, _Failure(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(e), nominating=CLEAR_NOMINATED)
        except FitError as e:
            self.metrics.scheduling_algorithm_duration.observe(self._clock() - start)
            nominating: NominatingInfo | None = None
            if fwk.has_post_filter_plugins():
                names = [ni.name for ni in self.snapshot.node_info_list]
                statuses = diagnosis_statuses(e.diagnosis, names)
                if self.extenders:  # preemption asks their preemptVerb over HTTP
                    res, s = await fwk.run_post_filter_plugins_async(state, pod_info, statuses)
                else:
                    res, s = fwk.run_post_filter_plugins(state, pod_info, statuses)
                e.diagnosis.post_filter_msg = s.message() if s is not None else ""
                if s is not None and s.code == Code.ERROR:
                    log.error("PostFilter for pod %s failed: %s", qpi.key, s.message())
                if res is not None:
                    nominating = NominatingInfo(res.nominated_node_name)
                self._preemption_metrics(fwk, res.nominated_node_name if res is not None else "")
            failure = _Failure.of_fit_error(e)
            failure.nominating = nominating
            return None, failure
        except SchedulingError as e:
            self.metrics.scheduling_algorithm_duration.observe(self._clock() - start)
            return None, _Failure(Code.ERROR, str(e), nominating=CLEAR_NOMINATED)
        self.metrics.scheduling_algorithm_duration.observe(self._clock() - start)

        host = result.suggested_host
        try:
            self.cache.assume_pod(pod_info, host)
        except CacheError as e:
            log.error("scheduler cache AssumePod failed: %s", e)
            return None, _Failure(Code.ERROR, str(e), nominating=CLEAR_NOMINATED)
        # Assumed: it no longer needs a place held for it (upstream assume()).
        self.queue.nominator.delete_nominated_pod_if_exists(pod)

        s = fwk.run_reserve_plugins_reserve(state, pod_info, host)
        if s is not None and not s.is_success():
            self._undo_assume(fwk, state, pod_info, host)
            return None, _Failure.of_status(pod, host, s)

        s = fwk.run_permit_plugins(state, pod_info, host)
        if s is not None and not s.is_success() and s.code != Code.WAIT:
            self._undo_assume(fwk, state, pod_info, host)
            return None, _Failure.of_status(pod, host, s)
        return result, None

    def _undo_assume(self, fwk: Framework, state: CycleState, pod_info: PodInfo, host: str) -> bool:
        """Unreserve (reverse order) and forget; True if the cache forgot the pod."""
        fwk.run_reserve_plugins_unreserve(state, pod_info, host)
        try:
            self.cache.forget_pod(pod_info, host)
        except CacheError as e:
            log.error("scheduler cache ForgetPod failed: %s", e)
            return False
        return True

    # ================================================================ binding cycle

    async def _binding_cycle(
        self, state: CycleState, fwk: Framework, qpi: QueuedPodInfo, host: str, start: float
    ) -> None:
        slot = _Slot(self._bind_slots)  # handed over by the loop, held
        try:
            failure = await self._bind_steps(state, fwk, qpi, host, start, slot)
            if failure is not None:
                await self._handle_binding_cycle_error(state, fwk, qpi, host, failure, start)
        except Exception as e:
            log.exception("binding cycle of pod %s failed", qpi.key)
            failure = _Failure(Code.ERROR, f"binding cycle failed: {e}", nominating=CLEAR_NOMINATED)
            await self._handle_binding_cycle_error(state, fwk, qpi, host, failure, start)
        finally:
            self._binds_in_flight -= 1
            self.metrics.goroutines.set(self._binds_in_flight, "binding")
            slot.release()

    async def _bind_steps(
        self, state: CycleState, fwk: Framework, qpi: QueuedPodInfo, host: str, start: float, slot: _Slot
    ) -> _Failure | None:
        """Upstream bindingCycle: WaitOnPermit, PreBind, Bind, PostBind. None on success."""
        pod_info = qpi.pod_info
        pod = pod_info.pod
        if fwk.will_wait_on_permit(pod):
            # A pod parked at Permit (e.g. until its gang is complete) must not hold a binding
            # slot: enough of them would stall the loop, and with it the pods they wait for.
            slot.release()
            t0 = self._clock()
            s = await fwk.wait_on_permit(pod_info)
            ok = s is None or s.is_success()
            self.metrics.permit_wait_duration.observe(self._clock() - t0, "success" if ok else "failure")
            if not ok:
                assert s is not None
                return _Failure.of_status(pod, host, s)
            await slot.acquire()
        # Past Permit nothing can make the pod "unschedulable" any more: failures from here on
        # are retried after backoff. The queue can drop the in-flight events now (upstream).
        self.queue.done(pod.metadata.uid)

        s = await fwk.run_pre_bind_plugins(state, pod_info, host)
        if s is not None and not s.is_success():
            if s.is_rejected():
                return _Failure.of_status(pod, host, s)
            return _Failure(Code.ERROR, s.message(), err=s.err, nominating=CLEAR_NOMINATED)
        try:
            s = await self._bind(fwk, state, pod_info, host)
        finally:
            self.cache.finish_binding(pod_info)
        if s is not None and not s.is_success():
            return _Failure(
                Code.ERROR,
                s.message() or "bind was skipped by every Bind plugin",
                err=s.err,
                nominating=CLEAR_NOMINATED,
            )
        self.recorder.eventf(
            pod,
            NORMAL,
            REASON_SCHEDULED,
            ACTION_BINDING,
            scheduled_message(pod, host),
            component=fwk.profile_name,
        )
        now = self._clock()
        self.metrics.pod_scheduled(fwk.profile_name, now - start)
        self.metrics.pod_scheduling_attempts.observe(qpi.attempts)
        if qpi.initial_attempt_timestamp is not None:
            self.metrics.pod_scheduling_sli_duration.observe(
                now - qpi.initial_attempt_timestamp, attempts_label(qpi.attempts)
            )
        log.debug("bound pod %s to %s", qpi.key, host)
        await fwk.run_post_bind_plugins(state, pod_info, host)
        return None

    async def _bind(self, fwk: Framework, state: CycleState, pod_info: PodInfo, host: str) -> Status | None:
        """Upstream bind: an interested binder extender binds instead of the Bind plugins (one
        that fails and is ignorable is skipped). An extender's bind carries no fence token (its
        API call is the extender's own), so the leader check is made before it is asked."""
        pod = pod_info.pod
        for extender in self.extenders:
            if not extender.is_binder() or not extender.is_interested(pod):
                continue
            if self.is_leader is not None and not self.is_leader():
                err = NotLeaderError(
                    f"not binding pod {pod.metadata.namespace}/{pod.metadata.name}: no longer the leader"
                )
                return Status(Code.ERROR, [str(err)], err=err)
            try:
                await extender.bind(pod, host)
            except ExtenderError as e:
                if extender.is_ignorable():
                    log.info(
                        "Skipping extender %s in bind as it returned error and has ignorable flag set: %s",
                        extender.name(),
                        e,
                    )
                    continue
                return Status(Code.ERROR, [str(e)], err=e)
            return None
        return await fwk.run_bind_plugins(state, pod_info, host)

    def _prioritizing_extenders(self, delta: int) -> None:
        self.metrics.goroutines.add(delta, "prioritizing_extender")

    async def _handle_binding_cycle_error(
        self,
        state: CycleState,
        fwk: Framework,
        qpi: QueuedPodInfo,
        host: str,
        failure: _Failure,
        start: float,
    ) -> None:
        """Upstream handleBindingCycleError: undo the assume, then the usual failure handling."""
        pod = qpi.pod
        forgot = self._undo_assume(fwk, state, qpi.pod_info, host)
        err = failure.err  # upstream: the *Status handleBindingCycleError gets
        if isinstance(err, FencedError | NotLeaderError):
            # Refused, or not sent, because the term is over: stop leading (a fenced refusal did so
            # already); no retry, no event or condition (they would be refused too). The end of the
            # term requeues the pod.
            self.metrics.pod_schedule_error(fwk.profile_name, self._clock() - start)
            self.queue.done(pod.metadata.uid)
            self.stop_leading()
            return
        if isinstance(err, ConflictError | NotFoundError):
            # Already bound, deleted or replaced: let the informer catch up with that answer so
            # the failure handling sees it (and does not requeue the pod).
            await self._sync_pods_to(err)
        if forgot and not failure.rejected:
            # The resources it held are free: a PodDelete for the others.
            self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)
        self.handle_scheduling_failure(fwk, qpi, failure, start)
        if forgot and failure.rejected:
            # After the pod itself is requeued, or the event would requeue it too (upstream defers).
            uid = pod.metadata.uid
            self.queue.move_all_to_active_or_backoff(
                EVENT_ASSIGNED_POD_DELETE, pod, None, pre_check=lambda p: p.metadata.uid != uid
            )

    async def _sync_pods_to(self, err: ApiError) -> None:
        if not err.revision.isdigit():
            return
        try:
            async with asyncio.timeout(BIND_CONFLICT_SYNC_TIMEOUT):
                await self.pod_informer.wait_for_revision(err.revision)
        except TimeoutError:
            log.warning("pod informer did not reach revision %s in time", err.revision)

    # ================================================================ failures

    def handle_scheduling_failure(
        self, fwk: Framework, qpi: QueuedPodInfo, failure: _Failure, start: float
    ) -> None:
        """Upstream handleSchedulingFailure: metrics, requeue (unless gone or bound), the
        FailedScheduling event and the PodScheduled=False condition."""
        pod = qpi.pod
        uid = qpi.pod.metadata.uid  # the queue tracks pods in flight by UID
        elapsed = self._clock() - start
        if failure.rejected:
            reason = REASON_UNSCHEDULABLE
            self.metrics.pod_unschedulable(fwk.profile_name, elapsed)
            log.debug("unable to schedule pod %s: %s", qpi.key, failure.message)
        else:
            reason = REASON_SCHEDULER_ERROR
            self.metrics.pod_schedule_error(fwk.profile_name, elapsed)
            log.warning("error scheduling pod %s; retrying: %s", qpi.key, failure.message)
        qpi.unschedulable_plugins = set(failure.unschedulable_plugins)
        qpi.pending_plugins = set(failure.pending_plugins)

        cached = self._lookup_pod(pod.metadata.namespace, pod.metadata.name)
        requeued = False
        if cached is None:
            log.info("pod %s doesn't exist in informer cache; not requeued", qpi.key)
            self.queue.done(uid)
        elif cached.spec.node_name:
            log.info("pod %s has been assigned to node %s; not requeued", qpi.key, cached.spec.node_name)
            self.queue.done(uid)
        elif cached.metadata.uid != pod.metadata.uid:
            log.info("pod %s was replaced by a new pod of that name; not requeued", qpi.key)
            self.queue.done(uid)
        else:
            qpi.pod_info = PodInfo(cached)
            try:
                self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
            except QueueError as e:
                log.error("requeueing pod %s: %s", qpi.key, e)
            # Hold the nominated node now, before the pod update with the field comes back
            # (upstream AddNominatedPod in handleSchedulingFailure).
            self.queue.nominator.add_nominated_pod(qpi.pod_info, failure.nominating)
            pod = cached
            requeued = True

        self.recorder.eventf(
            pod,
            WARNING,
            REASON_FAILED_SCHEDULING,
            ACTION_SCHEDULING,
            truncate_message(failure.message),
            component=fwk.profile_name,
        )
        if requeued:  # a pod that is gone or bound keeps its status
            nominated = failure.nominating.nominated_node_name if failure.nominating is not None else None
            self.status.submit(pod, unschedulable(failure.message, reason), nominated)

    # ================================================================ helpers

    def _preemption_metrics(self, fwk: Framework, nominated: str) -> None:
        """scheduler_preemption_attempts_total and scheduler_preemption_victims (upstream counts
        them in DefaultPreemption's PostFilter and prepareCandidate)."""
        names = fwk.list_plugins().get("postFilter", [])
        for _, outcome in last_outcomes(fwk.plugins_map, names):
            self.metrics.preemption_attempts.inc()
            if nominated and outcome.chosen is not None and outcome.chosen.name == nominated:
                self.metrics.preemption_victims.observe(len(outcome.chosen.victims))

    def _spawn_term_task(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run `coro` as a task of the current term (preemption's API calls), which ends with
        the term like a binding cycle; outside a term it is dropped."""
        if self._bindings is None or self._term_over:
            coro.close()
            log.info("not leading: %s dropped", name)
            return
        task = self._bindings.create_task(coro, name=name)
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    def _lookup_pod(self, namespace: str, name: str) -> pb.Pod | None:
        return self.pod_informer.store.get_by(namespace, name)

    def healthy(self) -> tuple[bool, str]:
        """For /healthz: the loop has not crashed, and without leader election it runs (or has
        not started yet: informers still syncing). A standby is healthy without a loop."""
        if self.loop_error is not None:
            return False, f"scheduling loop crashed: {self.loop_error!r}"
        if self._leader_elected:
            return True, "ok"
        if self.synced.is_set() and not self.loop_running and not self._draining:
            return False, "scheduling loop is not running"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """For /readyz: every informer has synced."""
        if not self.synced.is_set():
            return False, "informers not synced"
        return True, "ok"

    def debug_state(self) -> dict[str, Any]:
        return {
            "leading": self.leading,
            "terms": self.terms,
            "attempts": self.attempts,
            "binds_in_flight": self._binds_in_flight,
            "pending": self.queue.pending_pods(),
            "cache": self.cache.sizes(),
            "events": {
                "created": self.recorder.created,
                "updated": self.recorder.updated,
                "dropped": self.recorder.dropped,
            },
        }
