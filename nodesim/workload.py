"""The workload generator: create pods from a template at a rate, in bursts, or to a total.

    summary = await Workload(clientset, WorkloadConfig(rate=50, total=1000)).run()
    summary.created, summary.failed, summary.achieved_rate

Pacing is on an **absolute schedule**, as an open-loop load generator must be: pod k is due at
`t0 + k / rate` (or, in burst mode, `t0 + (k // burst) * burst_interval`), whatever the time the
earlier creates took. A slow create, or the `concurrency` limit of creates in flight, delays what is
due after it, and the generator then catches up; it never drifts (`max_lag_s` says how far behind
it fell). With neither a rate nor a burst, pods are created as fast as `concurrency` allows.

The run ends at `total` pods, after `duration` seconds (no pod due at or after t0 + duration is
created), or at `stop()` (SIGTERM / SIGINT in `kse workload`). Stopping never leaves a create
half-done: no new create starts, the ones in flight finish (their outcome is counted), and only
those still unanswered after `stop_grace` seconds are cancelled and reported as `CANCELLED`
(outcome unknown: they may have landed).

Churn (`delete_after`): an informer over the run's own pods (label `kse.io/workload-run=<run id>`)
sees each pod become Running, and the pod is deleted `delete_after` seconds later. After the
creates, the run waits up to `drain_timeout` for those deletions (unless stopped).

Every pod carries the run label, so a checker can find exactly the pods of one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError
from kse.client.informer import Informer
from kse.objects.manifest import load_manifest_files, load_manifests
from kse.tasks import TaskSet
from nodesim.timers import TimerHeap
from proto import kse_pb2 as pb

log = logging.getLogger("workload")

RUN_LABEL = "kse.io/workload-run"
CANCELLED = "CANCELLED"

# scheduler_perf's config/templates/pod-default.yaml: one pause container, 100m CPU and 500Mi.
DEFAULT_POD_TEMPLATE = """\
apiVersion: v1
kind: Pod
metadata:
  generateName: pod-
spec:
  containers:
  - image: registry.k8s.io/pause:3.10
    name: pause
    ports:
    - containerPort: 80
    resources:
      limits:
        cpu: 100m
        memory: 500Mi
      requests:
        cpu: 100m
        memory: 500Mi
"""


class WorkloadError(ValueError):
    """A workload that cannot run as configured."""


def default_pod_template() -> pb.Pod:
    return load_manifests(DEFAULT_POD_TEMPLATE, "<built-in pod template>")[0].pod


def load_pod_template(path: str) -> pb.Pod:
    objs = load_manifest_files(path)
    if len(objs) != 1 or objs[0].WhichOneof("kind") != "pod":
        kinds = [o.WhichOneof("kind") for o in objs]
        raise WorkloadError(f"pod template {path}: want exactly one Pod, found {kinds}")
    return objs[0].pod


def new_run_id() -> str:
    return secrets.token_hex(3)


# ---------------------------------------------------------------- the pacer


class Clock(Protocol):
    """Where the pacer reads time and sleeps (tests inject a fake one)."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The event loop's monotonic clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class Schedule:
    """When the k-th pod (0-based) is due, as an offset from the start."""

    rate: float = 0.0
    burst: int = 0
    burst_interval: float = 1.0

    def __post_init__(self) -> None:
        if self.rate < 0:
            raise WorkloadError(f"rate must be >= 0, got {self.rate}")
        if self.burst < 0:
            raise WorkloadError(f"burst must be >= 0, got {self.burst}")
        if self.burst and self.burst_interval <= 0:
            raise WorkloadError(f"burst interval must be > 0, got {self.burst_interval}")

    def due(self, k: int) -> float:
        if self.burst:
            return (k // self.burst) * self.burst_interval
        if self.rate:
            return k / self.rate
        return 0.0


# ---------------------------------------------------------------- configuration and summary


@dataclass(frozen=True)
class WorkloadConfig:
    template: pb.Pod = field(default_factory=default_pod_template)
    namespace: str = "default"
    name_prefix: str = ""  # "": <template generateName or "pod-"><run id>-
    rate: float = 0.0
    burst: int = 0
    burst_interval: float = 1.0
    total: int | None = None
    duration: float | None = None
    concurrency: int = 16
    delete_after: float | None = None
    drain_timeout: float = 60.0
    stop_grace: float = 30.0
    run_id: str = field(default_factory=new_run_id)
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise WorkloadError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.total is not None and self.total < 0:
            raise WorkloadError(f"total must be >= 0, got {self.total}")
        if self.duration is not None and self.duration < 0:
            raise WorkloadError(f"duration must be >= 0, got {self.duration}")
        if self.delete_after is not None and self.delete_after < 0:
            raise WorkloadError(f"delete-after must be >= 0, got {self.delete_after}")
        self.schedule()  # validates rate and burst
        if self.total is None and self.duration is None and not (self.rate or self.burst):
            raise WorkloadError("a workload with neither a rate nor bursts needs a total or a duration")

    def schedule(self) -> Schedule:
        return Schedule(self.rate, self.burst, self.burst_interval)

    def prefix(self) -> str:
        if self.name_prefix:
            return self.name_prefix
        meta = self.template.metadata
        base = meta.generate_name or (f"{meta.name}-" if meta.name else "pod-")
        return f"{base}{self.run_id}-"


@dataclass
class WorkloadSummary:
    """What a run did. `failed` counts failed creates by gRPC code name; `duration_s` is from the
    first create due to the last create answered; `achieved_rate` = created / duration_s."""

    run_id: str
    namespace: str
    name_prefix: str
    created: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    attempted: int = 0
    duration_s: float = 0.0
    achieved_rate: float = 0.0
    target_rate: float = 0.0
    max_lag_s: float = 0.0
    stopped_by: str = ""  # "total", "duration", "signal"
    running_seen: int = 0
    deleted: int = 0
    delete_failed: dict[str, int] = field(default_factory=dict)
    pending_deletes: int = 0
    names: list[str] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out.pop("names")
        out["duration_s"] = round(self.duration_s, 6)
        out["achieved_rate"] = round(self.achieved_rate, 3)
        out["max_lag_s"] = round(self.max_lag_s, 6)
        return out


def _code_of(exc: BaseException) -> str:
    return exc.code_name if isinstance(exc, ApiError) else "UNKNOWN"


# ---------------------------------------------------------------- the generator


class Workload:
    """Create (and optionally churn) pods as configured (see the module doc)."""

    def __init__(
        self,
        clientset: Clientset,
        config: WorkloadConfig | None = None,
        *,
        clock: Clock | None = None,
        create: Callable[[pb.Pod], Any] | None = None,
    ) -> None:
        self.cs = clientset
        self.config = config or WorkloadConfig()
        self.clock: Clock = clock or LoopClock()
        # `create` is the call that makes one pod (tests replace it); default: cs.pods.create.
        self._create = create or clientset.pods.create
        self.summary = WorkloadSummary(self.config.run_id, self.config.namespace, self.config.prefix())
        self.summary.target_rate = (
            self.config.rate if not self.config.burst else self.config.burst / self.config.burst_interval
        )
        self._stop: asyncio.Event | None = None
        self._stopping = False
        self._created: set[str] = set()  # names created and not yet deleted
        self._delete_due: set[str] = set()
        self._churn_done: asyncio.Event | None = None
        # Churn deletes, started by the timer heap's callback; _finish_deletes() ends them.
        self._deletes = TaskSet("workload-deletes", logger=log)
        self._informer: Informer[pb.Pod] | None = None
        self._seen: Callable[[pb.Pod], None] | None = None
        self._t0 = 0.0
        self._last_done = 0.0
        self.create_times: list[float] = []  # clock time each create was started (for tests)

    def stop(self) -> None:
        """Stop creating; in-flight creates finish (see the module doc)."""
        self._stopping = True
        if self._stop is not None:
            self._stop.set()

    def pod(self, k: int) -> pb.Pod:
        """The k-th pod of the run, from the template."""
        cfg = self.config
        pod = pb.Pod()
        pod.CopyFrom(cfg.template)
        pod.api_version = pod.api_version or "v1"
        pod.kind = pod.kind or "Pod"
        meta = pod.metadata
        meta.name = f"{self.summary.name_prefix}{k}"
        meta.generate_name = ""
        meta.namespace = cfg.namespace
        meta.uid = ""
        meta.resource_version = ""
        meta.creation_timestamp = ""
        meta.deletion_timestamp = ""
        meta.labels.update(cfg.labels)
        meta.labels[RUN_LABEL] = cfg.run_id
        pod.ClearField("status")
        return pod

    async def run(self) -> WorkloadSummary:
        """Create pods until the total, the duration or `stop()`; returns the summary."""
        self._stop = asyncio.Event()
        if self._stopping:
            self._stop.set()
        if self.config.delete_after is None:
            await self._create_phase()
            return self.summary
        self._churn_done = asyncio.Event()
        self._deletes = TaskSet("workload-deletes", logger=log)  # fresh per run
        deletes: TimerHeap[str] = TimerHeap(self._delete_now, time=self.clock.now)
        informer: Informer[pb.Pod] = Informer(
            self.cs.pods,
            namespace=self.config.namespace,
            label_selector=f"{RUN_LABEL}={self.config.run_id}",
            name=f"workload-{self.config.run_id}",
        )

        def seen(pod: pb.Pod) -> None:
            name = pod.metadata.name
            if pod.status.phase == "Running" and name in self._created and name not in self._delete_due:
                self._delete_due.add(name)
                self.summary.running_seen += 1
                deletes.push(self.clock.now() + (self.config.delete_after or 0.0), name)

        informer.add_event_handler(seen, lambda old, new: seen(new))
        self._informer, self._seen = informer, seen
        async with informer.running(), asyncio.TaskGroup() as tg:
            timers = tg.create_task(deletes.run(), name="workload-deletes")
            try:
                await self._create_phase()
                if not self._stopping and self._created:
                    try:
                        async with asyncio.timeout(self.config.drain_timeout):
                            await self._wait_drained()
                    except TimeoutError:
                        log.warning("%d pods not deleted after %.0fs", len(self._created),
                                    self.config.drain_timeout)
            finally:
                timers.cancel()
                await self._finish_deletes()
        self.summary.pending_deletes = len(self._created)
        return self.summary

    # -- creating

    async def _create_phase(self) -> None:
        assert self._stop is not None
        t0 = self.clock.now()
        self._t0 = t0
        self._last_done = t0
        # The pacer, the stop signal and every create in flight; leaving the phase lets the
        # creates finish within the stop grace and cuts the rest.
        tasks = TaskSet("workload-create", logger=log)
        pacer = tasks.spawn(self._pace(tasks), name="workload-pacer")
        stopper = tasks.spawn(self._stop.wait(), name="workload-stop")
        try:
            await asyncio.wait([pacer, stopper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not pacer.done():
                pacer.cancel()
            if not self.summary.stopped_by:
                self.summary.stopped_by = "signal"
            try:
                with contextlib.suppress(asyncio.CancelledError):
                    await pacer
            finally:
                await tasks.aclose(grace=self.config.stop_grace)
            s = self.summary
            s.duration_s = max(0.0, self._last_done - t0)
            s.achieved_rate = s.created / s.duration_s if s.duration_s > 0 else 0.0

    async def _pace(self, tasks: TaskSet) -> None:
        cfg = self.config
        schedule = cfg.schedule()
        sem = asyncio.Semaphore(cfg.concurrency)
        t0 = self._t0
        k = 0
        while not self._stopping:
            if cfg.total is not None and k >= cfg.total:
                self.summary.stopped_by = "total"
                return
            offset = schedule.due(k)
            if cfg.duration is not None and offset >= cfg.duration:
                self.summary.stopped_by = "duration"
                return
            due = t0 + offset
            wait = due - self.clock.now()
            if wait > 0:
                await self.clock.sleep(wait)
            await sem.acquire()
            if self._stopping:
                sem.release()
                return
            now = self.clock.now()
            self.summary.max_lag_s = max(self.summary.max_lag_s, now - due)
            self.create_times.append(now)
            self.summary.attempted += 1
            tasks.spawn(self._create_one(k, sem), name=f"workload-create-{k}")
            k += 1

    async def _create_one(self, k: int, sem: asyncio.Semaphore) -> None:
        pod = self.pod(k)
        s = self.summary
        try:
            await self._create(pod)
        except asyncio.CancelledError:
            s.failed[CANCELLED] = s.failed.get(CANCELLED, 0) + 1
            raise
        except Exception as e:  # counted by code; the run goes on
            code = _code_of(e)
            s.failed[code] = s.failed.get(code, 0) + 1
            if code == "UNKNOWN":
                log.exception("creating pod %s failed", pod.metadata.name)
            else:
                log.debug("creating pod %s failed: %s", pod.metadata.name, e)
        else:
            s.created += 1
            s.names.append(pod.metadata.name)
            self._created.add(pod.metadata.name)
            if self._informer is not None and self._seen is not None:
                # The watch may have shown it Running before this create's answer arrived.
                known = self._informer.store.get_by(self.config.namespace, pod.metadata.name)
                if known is not None:
                    self._seen(known)
        finally:
            self._last_done = max(self._last_done, self.clock.now())
            sem.release()

    # -- churn

    def _delete_now(self, name: str) -> None:
        if self._deletes.closed:  # a timer that fired as the run ended: nothing deletes any more
            log.debug("not deleting pod %s: the run is over", name)
            return
        self._deletes.spawn(self._delete_one(name), name=f"workload-delete-{name}")

    async def _delete_one(self, name: str) -> None:
        s = self.summary
        try:
            # Grace 0: churn means "this pod is gone now" (its node's resources free at once), as
            # before graceful deletion existed; a graceful delete would hold them for 30 s.
            await self.cs.pods.delete(self.config.namespace, name, grace_period_seconds=0)
        except NotFoundError:
            pass
        except ApiError as e:
            s.delete_failed[e.code_name] = s.delete_failed.get(e.code_name, 0) + 1
            return
        s.deleted += 1
        self._created.discard(name)
        if not self._created and self._churn_done is not None:
            self._churn_done.set()

    async def _finish_deletes(self) -> None:
        """Let the deletes in flight finish (within the stop grace), cancel the rest."""
        await self._deletes.aclose(grace=self.config.stop_grace)

    async def _wait_drained(self) -> None:
        assert self._churn_done is not None and self._stop is not None
        if not self._created:
            return
        async with TaskSet("workload-drain", logger=log) as race:  # the loser is cancelled on exit
            done = race.spawn(self._churn_done.wait(), name="workload-drained")
            stop = race.spawn(self._stop.wait(), name="workload-stop")
            await asyncio.wait([done, stop], return_when=asyncio.FIRST_COMPLETED)


def failed_total(summary: WorkloadSummary) -> int:
    return sum(summary.failed.values())

