"""`kse bench throughput`: scheduling throughput as upstream scheduler_perf's SchedulingBasic
(test/integration/scheduler_perf/config/performance-config.yaml): NODES nodes of 4 CPU, 32Gi and
110 pods; INIT_PODS pods scheduled first and not measured; then PODS pods measured; every pod
requests 100m CPU and 500Mi (the pod-default.yaml template).

In-process mode (default) drives the real scheduler code in this process: the scheduling queue
(`scheduler.queue.PriorityQueue`) with the default profile's QueueSort, PreEnqueue and queueing
hints; the default profile's Framework; the scheduler cache (`scheduler.cache.Cache`), whose
snapshot is updated at the start of every cycle; `scheduler.algorithm.schedule_pod`; assume,
Reserve, Permit, PreBind, Bind (DefaultBinder) and PostBind; and a binder that writes to the cache
only (the bind confirms the assumed pod, as the informer's event for the bound pod would). One
attempt at a time, the binding cycle awaited inline: no API server, so nothing to overlap.

The default profile includes DefaultPreemption: a pod that fits nowhere runs PostFilter as in the
scheduler (nominatedNodeName set on the pod and in the queue's nominator), and its victims are
deleted from the cache by `CachePreemptionExecutor` (asynchronously, as the scheduler does);
`preemption-async` injects its high-priority churn pods every `CHURN_INTERVAL` of the measured
phase, and backoffQ is flushed on each tick so that the preemptors come back.

Reported: `pods_per_s` (measured pods over the wall time from the first measured pop to the last
measured bind; churn pods are not counted) and the per-attempt latency (pop to bound)
percentiles; the table also shows the workload's upstream floor (`threshold`).

`--e2e` (etcd, API server, `kse scheduler` process) is `harness.bench.scheduler_e2e`: the CLI
dispatches to it, since the scheduler does not drive clusters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kse.gctuning import FREEZE_INTERVAL_S, freeze_now
from kse.objects.meta import uid_key
from kse.objects.synthetic import THROUGHPUT_JSON_KEYS
from proto import kse_pb2 as pb
from scheduler.algorithm import (
    AlgorithmState,
    NoNodesAvailableError,
    SchedulingError,
    diagnosis_statuses,
    schedule_pod,
)
from scheduler.bench.preemption import CachePreemptionExecutor
from scheduler.bench.workloads import CHURN_INTERVAL, FLOORS, churn_pods, workload_nodes, workload_pods
from scheduler.cache.cache import Cache
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.types import Code, FitError, PodInfo, QueuedPodInfo
from scheduler.profile import load_scheduler_config, new_framework
from scheduler.queue.nominator import NominatingInfo
from scheduler.queue.scheduling_queue import PriorityQueue


@dataclass
class Config:
    nodes: int = 5000
    init_pods: int = 1000
    pods: int = 10000
    seed: int = 0
    batch: bool = True
    workload: str = "basic"  # scheduler.bench.workloads.WORKLOADS
    # As `kse scheduler --gc-freeze` (its default): the loaded caches are frozen out of full
    # collections before the measured phase, and again every FREEZE_INTERVAL_S of it.
    gc_freeze: bool = True


# ------------------------------------------------------------------------------------ workload


class CacheBinder:
    """The scheduler cache (scheduler.cache.Cache) with the Snapshot the cycles read, and a
    binder that writes to the cache only: a bind confirms the assumed pod at once, as the
    informer's Add of the bound pod would (upstream FinishBinding then AddPod)."""

    def __init__(self, nodes: list[pb.Node]) -> None:
        self.cache = Cache(ttl=0)
        for node in nodes:
            self.cache.add_node(node)
        self.snapshot = self.cache.new_snapshot()
        self.pod_infos: dict[str, PodInfo] = {}
        self.bound = 0

    def assume(self, pod_info: PodInfo, node_name: str) -> None:
        # upstream assume(): the pod object is a copy with spec.nodeName set; this benchmark
        # owns its pods, so it sets the field in place and keeps the PodInfo's derived data.
        pod_info.pod.spec.node_name = node_name
        self.cache.assume_pod(pod_info, node_name)
        self.pod_infos[pod_info.uid_key] = pod_info

    def forget(self, pod_info: PodInfo, node_name: str) -> None:
        self.cache.forget_pod(pod_info, node_name)
        self.pod_infos.pop(pod_info.uid_key, None)
        pod_info.pod.spec.node_name = ""

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        self.cache.finish_binding(pod)
        key = uid_key(pod)
        self.cache.add_pod(pod, self.pod_infos.pop(key, None))
        self.bound += 1


# ------------------------------------------------------------------------------------ loop


class Loop:
    """One scheduling attempt at a time, as upstream ScheduleOne: pop, schedule, assume,
    Reserve, Permit, then the binding cycle (awaited inline: the binder is in memory)."""

    def __init__(
        self,
        fwk: Framework,
        cache: CacheBinder,
        queue: PriorityQueue,
        alg: AlgorithmState,
        preemption: CachePreemptionExecutor | None = None,
    ) -> None:
        self.fwk = fwk
        self.cache = cache
        self.queue = queue
        self.alg = alg
        self.preemption = preemption
        self.unschedulable = 0
        self.errors = 0
        self.nominations = 0
        # The churn of the measured phase: pods to inject, one per CHURN_INTERVAL.
        self.churn: list[pb.Pod] = []
        # kse.gctuning's freeze, every this many seconds of `drain` (None: never), as the
        # scheduler's gc-freeze task: this loop never yields to a timer of its own.
        self.freeze_interval: float | None = None

    def add(self, pod: pb.Pod) -> None:
        if self.preemption is not None:
            self.preemption.track(pod)
        self.queue.add(pod)

    async def schedule_one(self, qpi: QueuedPodInfo) -> bool:
        fwk, cache, queue = self.fwk, self.cache, self.queue
        pod_info = qpi.pod_info
        state = CycleState()
        snapshot = cache.snapshot
        cache.cache.update_snapshot(snapshot)  # upstream schedulePod starts with UpdateSnapshot
        try:
            result = schedule_pod(fwk, state, pod_info, snapshot, self.alg)
        except FitError as e:
            self.unschedulable += 1
            qpi.unschedulable_plugins = set(e.diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(e.diagnosis.pending_plugins)
            nominating = self._post_filter(state, pod_info, snapshot, e)
            queue.add_unschedulable_if_not_present(qpi)
            queue.nominator.add_nominated_pod(qpi.pod_info, nominating)
            return False
        except (NoNodesAvailableError, SchedulingError):
            self.errors += 1
            queue.add_unschedulable_if_not_present(qpi)
            return False
        host = result.suggested_host
        cache.assume(pod_info, host)
        queue.nominator.delete_nominated_pod_if_exists(pod_info.pod)
        s = fwk.run_reserve_plugins_reserve(state, pod_info, host)
        if s is None or s.code == Code.SUCCESS:
            s = fwk.run_permit_plugins(state, pod_info, host)
        if s is not None and s.code not in (Code.SUCCESS, Code.WAIT):
            return self._fail(qpi, state, host)
        # binding cycle
        s = await fwk.wait_on_permit(pod_info)
        if s is not None and s.code != Code.SUCCESS:
            return self._fail(qpi, state, host)
        queue.done(pod_info.pod.metadata.uid)
        s = await fwk.run_pre_bind_plugins(state, pod_info, host)
        if s is None or s.code == Code.SUCCESS:
            s = await fwk.run_bind_plugins(state, pod_info, host)
        if s is not None and s.code != Code.SUCCESS:
            self.errors += 1
            fwk.run_reserve_plugins_unreserve(state, pod_info, host)
            cache.forget(pod_info, host)
            queue.add(pod_info.pod)
            return False
        await fwk.run_post_bind_plugins(state, pod_info, host)
        return True

    def _post_filter(
        self, state: CycleState, pod_info: PodInfo, snapshot: Any, e: FitError
    ) -> NominatingInfo | None:
        """PostFilter as the scheduler runs it; the nomination is written to the pod at once
        (the bench owns its pods: the pods/status write and its informer event in one)."""
        if not self.fwk.has_post_filter_plugins():
            return None
        names = [ni.name for ni in snapshot.node_info_list]
        res, _ = self.fwk.run_post_filter_plugins(state, pod_info, diagnosis_statuses(e.diagnosis, names))
        if res is None:
            return None
        pod_info.pod.status.nominated_node_name = res.nominated_node_name
        if res.nominated_node_name:
            self.nominations += 1
        return NominatingInfo(res.nominated_node_name)

    def _fail(self, qpi: QueuedPodInfo, state: CycleState, host: str) -> bool:
        self.errors += 1
        self.fwk.run_reserve_plugins_unreserve(state, qpi.pod_info, host)
        self.cache.forget(qpi.pod_info, host)
        self.queue.add_unschedulable_if_not_present(qpi)
        return False

    async def drain(self, count: int, latencies: list[float] | None = None, prefix: str = "") -> int:
        """Schedule until `count` pods whose name starts with `prefix` are bound or the queue has
        nothing to pop (nor preemption left to finish). Churn pods are injected meanwhile."""
        bound = 0
        clock = time.perf_counter
        next_churn = clock() + CHURN_INTERVAL
        next_freeze = clock() + (self.freeze_interval or 0.0)
        while bound < count:
            if self.freeze_interval is not None and clock() >= next_freeze:
                freeze_now()
                next_freeze = clock() + self.freeze_interval
            if self.churn and clock() >= next_churn:
                self.add(self.churn.pop())
                self.queue.flush_backoff_completed()
                next_churn += CHURN_INTERVAL
            qpi = self.queue.try_pop()
            if qpi is None:
                if self.preemption is not None and self.preemption.tasks:
                    await asyncio.wait(set(self.preemption.tasks))  # victims being deleted
                    self.queue.flush_backoff_completed()
                    continue
                break
            t0 = clock()
            if await self.schedule_one(qpi):
                if qpi.pod.metadata.name.startswith(prefix):
                    bound += 1
                    if latencies is not None:
                        latencies.append(clock() - t0)
            elif self.preemption is not None and self.preemption.tasks:
                await asyncio.sleep(0)  # let the victims' deletion run, as the scheduler's tasks do
        return bound


def _setup(cfg: Config, clock: Callable[[], float] = time.monotonic) -> Loop:
    """The loop over a fresh cache and queue; `clock` is the queue's (backoff), for tests."""
    cache = CacheBinder(workload_nodes(cfg.workload, cfg.nodes))
    profile = load_scheduler_config().profiles[0]
    fwk = new_framework(profile, snapshot=cache.snapshot, binder=cache.bind, batch=cfg.batch)
    queue = PriorityQueue(
        fwk.queue_sort_func(),
        clock=clock,
        queueing_hints=fwk.queueing_hints(),
        pre_enqueue=fwk.pre_enqueue_functions(),
    )
    alg = AlgorithmState(rng=random.Random(cfg.seed))
    preemption = CachePreemptionExecutor(cache.cache, queue)
    fwk.set_pod_nominator(queue.nominator)
    fwk.set_preemption_executor(preemption)
    return Loop(fwk, cache, queue, alg, preemption)


async def run_in_process(cfg: Config) -> dict[str, Any]:
    loop = _setup(cfg)
    init = workload_pods(cfg.workload, "init-pod", cfg.init_pods, measured=False)
    for pod in init:
        loop.add(pod)
    init_bound = await loop.drain(len(init))
    measured = workload_pods(cfg.workload, "pod", cfg.pods, measured=True)
    for pod in measured:
        loop.add(pod)
    if cfg.workload == "preemption-async":
        # Enough churn pods for the measured phase at any plausible rate (one per interval:
        # 10 pods/s of measured throughput or more).
        loop.churn = churn_pods("high-priority", max(10, cfg.pods // 20))[::-1]
    if cfg.gc_freeze:
        freeze_now()  # the scheduler's freeze once its informers synced
        loop.freeze_interval = FREEZE_INTERVAL_S
    latencies: list[float] = []
    t0, c0 = time.perf_counter(), time.process_time()
    bound = await loop.drain(cfg.pods, latencies, prefix="pod-")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    if loop.preemption is not None:
        await loop.preemption.aclose()
    lat = np.array(latencies) * 1000.0 if latencies else np.zeros(1)
    return {
        "mode": "in-process",
        "nodes": cfg.nodes,
        "pods": cfg.pods,
        "pods_per_s": round(bound / elapsed, 1) if elapsed > 0 else 0.0,
        "attempt_ms_p50": round(float(np.percentile(lat, 50)), 3),
        "attempt_ms_p99": round(float(np.percentile(lat, 99)), 3),
        "init_pods": cfg.init_pods,
        "init_bound": init_bound,
        "bound": bound,
        "unschedulable_attempts": loop.unschedulable,
        "error_attempts": loop.errors,
        "elapsed_s": round(elapsed, 3),
        # CPU seconds of this process for the measured pods: on a busy machine, pods/cpu_s
        # is what the scheduler would reach with a core of its own.
        "cpu_s": round(cpu, 3),
        "pods_per_cpu_s": round(bound / cpu, 1) if cpu > 0 else 0.0,
        "batch": cfg.batch,
        "gc_freeze": cfg.gc_freeze,
        "workload": cfg.workload,
        "floor": FLOORS.get(cfg.workload),
        "nominations": loop.nominations,
        "victims": loop.preemption.victims if loop.preemption is not None else 0,
    }


# ------------------------------------------------------------------------------------ CLI

JSON_KEYS = THROUGHPUT_JSON_KEYS


def print_report(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps({k: result[k] for k in JSON_KEYS}))
        return
    rows = [
        ("mode", result["mode"]),
        ("workload", result.get("workload", "basic")),
        ("nodes", result["nodes"]),
        ("init pods", result.get("init_pods", "")),
        ("measured pods", result["pods"]),
        ("bound", result.get("bound", "")),
        ("pods/s", f"{result['pods_per_s']:.1f}"),
        ("attempt p50", f"{result['attempt_ms_p50']:.3f} ms"),
        ("attempt p99", f"{result['attempt_ms_p99']:.3f} ms"),
        ("pods/cpu-s", f"{result.get('pods_per_cpu_s', 0.0):.1f}"),
    ]
    if result.get("floor") is not None:
        ok = "meets" if result["pods_per_s"] >= result["floor"] else "BELOW"
        rows.append(("upstream floor", f"{result['floor']:.0f} pods/s ({ok})"))
    if result.get("nominations"):
        rows.append(("preemptions", f"{result['nominations']} nominated, {result['victims']} victims"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def main(args: argparse.Namespace) -> int:
    nodes = args.nodes if isinstance(args.nodes, list) else [args.nodes]
    cfg = Config(
        nodes=nodes[0],
        init_pods=args.init_pods,
        pods=args.pods,
        seed=args.seed,
        batch=not args.scalar,
        workload=getattr(args, "workload", "basic"),
        gc_freeze=getattr(args, "gc_freeze", True),
    )
    if len(nodes) > 1:
        from scheduler.bench.sweep import main_sweep

        return main_sweep(cfg, nodes, args.json, getattr(args, "png", "kse-throughput-nodes.png"))
    print(
        f"kse bench throughput: {cfg.workload}, {cfg.nodes} nodes, {cfg.init_pods} init pods, "
        f"{cfg.pods} measured pods ...",
        file=sys.stderr,
    )
    try:
        result = asyncio.run(run_in_process(cfg))
    except KeyboardInterrupt:
        print("kse bench throughput: interrupted", file=sys.stderr)
        return 130
    print_report(result, args.json)
    return 0
