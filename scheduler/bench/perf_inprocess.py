"""`kse bench scheduler-perf` in process: scheduler_perf's ops against the real scheduler code.

The same harness as `kse bench throughput` (scheduler.bench.throughput: the default profile's
Framework, the scheduling queue with its queueing hints, the scheduler cache and its snapshot,
one attempt at a time with the binding cycle inline), with a cluster the ops talk to
(`kse.schedperf.executor.Cluster`): nodes go straight into the cache (and wake the unschedulable
pods a node add may help), pods into the queue, a bind confirms the assumed pod in the cache (as
the informer's event would) and is reported to the throughput collector at once. The scheduling
loop is a task of its own; it yields to the event loop after every attempt, so the 1 s throughput
ticker, churn and steady-state ops run between attempts as they would beside upstream's
scheduler goroutine.

Objects the in-process scheduler has no informer for (Services, PDBs, ... from createAny or
churn) are kept in a dict and otherwise ignored. Attempt latency (pop to bound, or to the failed
attempt's end) is measured around each attempt, scheduled attempts only in `attempt_ms`, as the
scheduler's scheduling_attempt_duration_seconds{result="scheduled"} histogram would.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

from kse.gctuning import freeze_now, keep_old_objects_frozen
from kse.objects.kinds import kind_of, unwrap
from kse.objects.meta import uid_key
from kse.schedperf.metrics import upstream_percentile
from kse.tasks import TaskSet
from proto import kse_pb2 as pb
from scheduler.algorithm import AlgorithmState
from scheduler.bench.preemption import CachePreemptionExecutor
from scheduler.bench.throughput import CacheBinder, Loop
from scheduler.eventhandlers import EVENT_NODE_ADD
from scheduler.profile import load_scheduler_config, new_framework
from scheduler.queue.scheduling_queue import UNSCHEDULABLE_Q, PriorityQueue

IDLE_WAIT = 0.05  # the loop's wait for work when the queue is empty (backoff flush cadence)
BACKOFF_FLUSH_INTERVAL = 1.0  # the scheduling queue's flushBackoffQCompleted period, as upstream


class _Binder(CacheBinder):
    def __init__(self, on_bound: Callable[[pb.Pod], None]) -> None:
        super().__init__([])
        self._on_bound = on_bound

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        await super().bind(pod, node_name)
        self._on_bound(pod)


class InProcessCluster:
    """The in-process scheduler as a `Cluster`; `async with` runs its scheduling loop."""

    def __init__(
        self, seed: int = 0, batch: bool = True, scheduler_config: str | None = None, gc_freeze: bool = False
    ) -> None:
        # gc_freeze: as `kse scheduler --gc-freeze`: the caches frozen out of full collections
        # when collection starts, then every 10 s (kse.gctuning).
        self.gc_freeze = gc_freeze
        self.on_scheduled: Callable[[pb.Pod], None] | None = None
        self.binder = _Binder(self._bound)
        profile = load_scheduler_config(scheduler_config).profiles[0]
        self.fwk = new_framework(profile, snapshot=self.binder.snapshot, binder=self.binder.bind, batch=batch)
        self.queue = PriorityQueue(
            self.fwk.queue_sort_func(),
            queueing_hints=self.fwk.queueing_hints(),
            pre_enqueue=self.fwk.pre_enqueue_functions(),
        )
        self.preemption = _ClusterPreemption(self)
        self.fwk.set_pod_nominator(self.queue.nominator)
        self.fwk.set_preemption_executor(self.preemption)
        self.loop = Loop(
            self.fwk, self.binder, self.queue, AlgorithmState(rng=random.Random(seed)), self.preemption
        )
        self.pods: dict[str, dict[str, pb.Pod]] = {}  # namespace -> name -> pod (pending or bound)
        self.bound: dict[str, set[str]] = {}  # namespace -> names bound
        self.attempted: dict[str, set[str]] = {}  # namespace -> names that failed an attempt
        self.others: dict[tuple[str, str, str], pb.Object] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._owner = TaskSet("scheduler-perf-loop")
        self._latencies: list[float] | None = None
        self.attempts = 0

    async def __aenter__(self) -> InProcessCluster:
        self._task = self._owner.spawn(self._run(), name="scheduling-loop")
        if self.gc_freeze:
            self._owner.spawn(keep_old_objects_frozen(), name="gc-freeze")
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._stop_loop()
        finally:
            await self.preemption.aclose()
            await self._owner.aclose()  # the gc-freeze task

    async def _stop_loop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    # ------------------------------------------------------------ the scheduling loop

    async def _run(self) -> None:
        clock = time.perf_counter
        next_flush = clock() + BACKOFF_FLUSH_INTERVAL
        while True:
            if clock() >= next_flush:  # the scheduler's queue flushes backoffQ every second
                self.queue.flush_backoff_completed()
                next_flush = clock() + BACKOFF_FLUSH_INTERVAL
            qpi = self.queue.try_pop()
            if qpi is None:
                self._wake.clear()
                try:
                    # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
                    # that arrives as its inner wait completes, and the loop would never stop
                    async with asyncio.timeout(IDLE_WAIT):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                self.queue.flush_backoff_completed()
                self.queue.flush_unschedulable_pods_leftover()
                continue
            pod = qpi.pod_info.pod
            t0 = clock()
            ok = await self.loop.schedule_one(qpi)
            self.attempts += 1
            if ok:
                if self._latencies is not None:
                    self._latencies.append(clock() - t0)
            else:
                self.attempted.setdefault(pod.metadata.namespace, set()).add(pod.metadata.name)
            await asyncio.sleep(0)  # let the ticker, churn and pod creators run between attempts

    def _bound(self, pod: pb.Pod) -> None:
        self.bound.setdefault(pod.metadata.namespace, set()).add(pod.metadata.name)
        self.queue.assigned_pod_added(pod)
        if self.on_scheduled is not None:
            self.on_scheduled(pod)

    def _kick(self) -> None:
        self._wake.set()

    # ------------------------------------------------------------ Cluster

    async def create_nodes(self, nodes: list[pb.Node]) -> None:
        for node in nodes:
            self.binder.cache.add_node(node)
            self.queue.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node)
            if len(nodes) > 1000:
                await asyncio.sleep(0)
        self._kick()

    async def create_namespace(self, namespace: pb.Namespace) -> None:
        self.pods.setdefault(namespace.metadata.name, {})

    async def create_pods(self, pods: list[pb.Pod]) -> None:
        for pod in pods:
            ns = self.pods.setdefault(pod.metadata.namespace, {})
            if pod.metadata.name in ns:
                raise ValueError(f'pods "{pod.metadata.name}" already exists in {pod.metadata.namespace}')
            if not pod.spec.scheduler_name:
                pod.spec.scheduler_name = "default-scheduler"  # the API server's SetDefaults
            if not pod.metadata.uid:
                pod.metadata.uid = f"{pod.metadata.namespace}/{pod.metadata.name}"
            ns[pod.metadata.name] = pod
            if pod.spec.node_name:
                self.binder.cache.add_pod(pod)
                self._bound(pod)
            else:
                self.queue.add(pod)
                if UNSCHEDULABLE_Q in self.queue.where(f"{pod.metadata.namespace}/{pod.metadata.name}"):
                    # held at PreEnqueue (a scheduling gate): upstream's scheduler records that as
                    # PodScheduled=False/SchedulingGated, which counts as attempted for a barrier
                    self.attempted.setdefault(pod.metadata.namespace, set()).add(pod.metadata.name)
        self._kick()

    async def create_object(self, obj: pb.Object) -> None:
        which = obj.WhichOneof("kind")
        if which == "pod":
            await self.create_pods([obj.pod])
        elif which == "node":
            await self.create_nodes([obj.node])
        else:
            meta = unwrap(obj).metadata
            self.others[(kind_of(obj).kind, meta.namespace, meta.name)] = obj

    async def delete_object(self, obj: pb.Object) -> None:
        which = obj.WhichOneof("kind")
        meta = unwrap(obj).metadata
        if which == "pod":
            await self.delete_pod(meta.namespace, meta.name)
        elif which == "node":
            info = self.binder.cache.node_info(meta.name)
            if info is not None:
                self.binder.cache.remove_node(obj.node)
        else:
            self.others.pop((kind_of(obj).kind, meta.namespace, meta.name), None)

    def pod_names(self, namespace: str, selector: dict[str, str]) -> list[str]:
        pods = self.pods.get(namespace, {})
        return [n for n, p in pods.items() if all(p.metadata.labels.get(k) == v for k, v in selector.items())]

    async def delete_pod(self, namespace: str, name: str) -> None:
        pod = self.pods.get(namespace, {}).pop(name, None)
        if pod is None:
            return
        self.attempted.get(namespace, set()).discard(name)
        if name in self.bound.get(namespace, set()):
            self.bound[namespace].discard(name)
            self.binder.cache.remove_pod(pod)
            self.binder.pod_infos.pop(uid_key(pod), None)
            self.queue.assigned_pod_deleted(pod)
            self._kick()
        else:
            self.queue.delete(pod)

    def _count(self, names: set[str], namespace: str, selector: dict[str, str]) -> int:
        if not selector:
            return len(names)
        pods = self.pods.get(namespace, {})
        return sum(
            1
            for n in names
            if n in pods and all(pods[n].metadata.labels.get(k) == v for k, v in selector.items())
        )

    def scheduled_count(self, namespace: str, selector: dict[str, str]) -> int:
        return self._count(self.bound.get(namespace, set()), namespace, selector)

    def attempted_count(self, namespace: str, selector: dict[str, str]) -> int:
        names = self.bound.get(namespace, set()) | self.attempted.get(namespace, set())
        return self._count(names, namespace, selector)

    async def attempts_start(self) -> None:
        if self.gc_freeze:
            freeze_now()  # what the measured ops find loaded is frozen, as after an informer sync
        self._latencies = []

    async def attempts_stop(self) -> dict[str, float | None]:
        lat = sorted(self._latencies or [])
        self._latencies = None
        if not lat:
            return {"p50": None, "p99": None}
        return {
            "p50": round(upstream_percentile(lat, 50) * 1000.0, 3),
            "p99": round(upstream_percentile(lat, 99) * 1000.0, 3),
        }

    async def settle(self) -> None:
        self._kick()

    def cpu_seconds(self) -> float | None:
        return time.process_time()  # this process is the scheduler (and the ops' driver)


class _ClusterPreemption(CachePreemptionExecutor):
    """Preemption's API side over the in-process cluster: a victim is deleted as the deletePods
    op deletes a pod (cache, queue events, the collector's counts)."""

    def __init__(self, cluster: InProcessCluster) -> None:
        super().__init__(cluster.binder.cache, cluster.queue)
        self._cluster = cluster

    def get_pod(self, namespace: str, name: str) -> pb.Pod | None:
        return self._cluster.pods.get(namespace, {}).get(name)

    async def preempt_pod(self, node_name: str, preemptor: pb.Pod, victim: pb.Pod, plugin: str) -> None:
        ns, name = victim.metadata.namespace, victim.metadata.name
        if self.get_pod(ns, name) is None:
            return  # already gone
        await self._cluster.delete_pod(ns, name)
        self.victims += 1


# Registered plugins the in-process runner cannot run (none since preemption's victims are
# deleted through `_ClusterPreemption`).
IN_PROCESS_UNSUPPORTED: frozenset[str] = frozenset()


def registered_plugins(*, e2e: bool = False) -> list[str]:
    """The plugins the runner can run (what `PLUGIN_NEEDS` is checked against)."""
    from scheduler.framework.plugins.registry import REGISTRY

    return [p for p in REGISTRY if e2e or p not in IN_PROCESS_UNSUPPORTED]
