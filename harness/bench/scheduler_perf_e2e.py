"""`kse bench scheduler-perf --e2e`: scheduler_perf's ops against the real processes.

Per workload, a fresh cluster as upstream starts one per workload (a new etcd, API server and
scheduler): etcd (one member, fsync on), a `kse apiserver`, and a `kse scheduler
--leader-elect=false` (scheduler_perf's client QPS 5000), all started by the same pieces as `kse
bench throughput --e2e` (harness.bench.scheduler_e2e). This process is the test driver, as
upstream's: it creates objects through the API as admin (64 creates in flight), and one pod
informer over all namespaces is its view: a pod becomes scheduled when an event shows it with a
nodeName it did not have (upstream's throughputCollector), attempted when its PodScheduled
condition is False (upstream's waitUntilPodsAttempted).

Attempt latency comes from the scheduler's own scheduler_scheduling_attempt_duration_seconds
{result="scheduled"} histogram, scraped when a collection starts and ends (the window's delta,
Prometheus' histogram_quantile).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from certs.pki import init_pki
from harness.bench.common import progress, work_dir
from harness.bench.scheduler_e2e import API_PREFIX, SchedulerProcess, _delta_samples, create_all
from harness.procs.apiserver import ApiServerProcess
from harness.procs.etcd import start_cluster
from harness.procs.launcher import Launcher
from harness.procs.proctable import process_cpu_seconds
from kse.client.channel import secure_channel
from kse.client.clientset import Clientset
from kse.client.informer import Informer
from kse.objects.kinds import kind_of, unwrap
from kse.scrape import Samples, histogram_quantile
from kse.tasks import TaskSet
from proto import kse_pb2 as pb

ATTEMPT_METRIC = "scheduler_scheduling_attempt_duration_seconds"


def _matches(pod: pb.Pod, selector: dict[str, str]) -> bool:
    return all(pod.metadata.labels.get(k) == v for k, v in selector.items())


def _attempted(pod: pb.Pod) -> bool:
    """PodScheduled=False (the scheduler tried), or held by a scheduling gate: upstream's API
    server marks a gated pod PodScheduled=False/SchedulingGated when it is created
    (pkg/registry/core/pod/strategy.go), which kse's does not, so the gate is read directly."""
    if not pod.spec.node_name and len(pod.spec.scheduling_gates) > 0:
        return True
    return any(c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions)


class E2ECluster:
    """etcd + API server + scheduler process as a `kse.schedperf.executor.Cluster`."""

    def __init__(self, keep: bool = False, scheduler_args: tuple[str, ...] = ()) -> None:
        self.keep = keep
        self.scheduler_args = scheduler_args
        self.on_scheduled: Callable[[pb.Pod], None] | None = None
        self._stack = contextlib.AsyncExitStack()
        self.cs: Clientset | None = None
        self.sched: SchedulerProcess | None = None
        self.informer: Informer[pb.Pod] | None = None
        self._before: Samples = {}
        self.bound: dict[str, set[str]] = {}  # namespace -> names seen with a nodeName
        self.attempted: dict[str, set[str]] = {}  # namespace -> names seen PodScheduled=False
        self.root: Path | None = None

    async def __aenter__(self) -> E2ECluster:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def _start(self) -> None:
        root = self._stack.enter_context(work_dir("kse-bench-sp-", self.keep))
        self.root = root
        data = root / "data"
        launcher = await self._stack.enter_async_context(Launcher(data))
        pki = init_pki(root / "pki", scheduler_replicas=1)
        cluster = await start_cluster(1, data / "etcd", fast=False)
        for member in cluster.members:
            launcher.add(member.managed)
        api = ApiServerProcess(
            etcd_endpoints=cluster.endpoints, prefix=API_PREFIX, pki_dir=pki.dir, data_dir=data
        )
        await launcher.start(api)
        channel = await self._stack.enter_async_context(secure_channel(api.connection("admin")))
        # Pods and nodes are created many at once: those in flight go as CreateBatch calls.
        self.cs = Clientset(channel, qps=0, batch_creates=True)
        self.sched = SchedulerProcess(api, pki.dir, data, self.scheduler_args)
        await launcher.start(self.sched)
        await self.sched.wait_synced()
        progress(f"cluster up under {root} (scheduler metrics at {self.sched.metrics_address})")
        self.informer = Informer(self.cs.pods, name="scheduler-perf-pods")
        self.informer.add_event_handler(
            on_add=lambda pod: self._changed(None, pod),
            on_update=lambda old, new: self._changed(old, new),
            on_delete=self._deleted,
        )
        owner = TaskSet("scheduler-perf-e2e")
        self._stack.push_async_callback(owner.aclose)
        owner.spawn(self.informer.run(), name="scheduler-perf-pods")
        await self.informer.wait_for_sync()

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    def _changed(self, old: pb.Pod | None, new: pb.Pod) -> None:
        ns, name = new.metadata.namespace, new.metadata.name
        if new.spec.node_name:
            self.bound.setdefault(ns, set()).add(name)
        elif _attempted(new):
            self.attempted.setdefault(ns, set()).add(name)
        if (old is None or not old.spec.node_name) and new.spec.node_name and self.on_scheduled is not None:
            self.on_scheduled(new)

    def _deleted(self, pod: Any) -> None:
        if isinstance(pod, pb.Pod):
            self.bound.get(pod.metadata.namespace, set()).discard(pod.metadata.name)
            self.attempted.get(pod.metadata.namespace, set()).discard(pod.metadata.name)

    def _pods(self, namespace: str) -> list[pb.Pod]:
        assert self.informer is not None
        return [p for p in self.informer.store.list() if p.metadata.namespace == namespace]

    # ------------------------------------------------------------ Cluster

    async def create_nodes(self, nodes: list[pb.Node]) -> None:
        assert self.cs is not None
        await create_all(self.cs.nodes, nodes)

    async def create_namespace(self, namespace: pb.Namespace) -> None:
        assert self.cs is not None
        try:
            await self.cs.resource("namespaces").create(namespace)
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise

    async def create_pods(self, pods: list[pb.Pod]) -> None:
        assert self.cs is not None
        await create_all(self.cs.pods, pods)

    async def create_object(self, obj: pb.Object) -> None:
        assert self.cs is not None
        await self.cs.resource(kind_of(obj)).create(unwrap(obj))

    async def delete_object(self, obj: pb.Object) -> None:
        assert self.cs is not None
        meta = unwrap(obj).metadata
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self.cs.resource(kind_of(obj)).delete_in(meta.namespace, meta.name)

    def pod_names(self, namespace: str, selector: dict[str, str]) -> list[str]:
        return [p.metadata.name for p in self._pods(namespace) if _matches(p, selector)]

    async def delete_pod(self, namespace: str, name: str) -> None:
        assert self.cs is not None
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self.cs.pods.delete_in(namespace, name)

    def scheduled_count(self, namespace: str, selector: dict[str, str]) -> int:
        if not selector:
            return len(self.bound.get(namespace, ()))
        return sum(1 for p in self._pods(namespace) if p.spec.node_name and _matches(p, selector))

    def attempted_count(self, namespace: str, selector: dict[str, str]) -> int:
        if not selector:
            return len(self.bound.get(namespace, set()) | self.attempted.get(namespace, set()))
        return sum(
            1 for p in self._pods(namespace) if (p.spec.node_name or _attempted(p)) and _matches(p, selector)
        )

    async def attempts_start(self) -> None:
        assert self.sched is not None
        self._before = await self.sched.scrape()

    async def attempts_stop(self) -> dict[str, float | None]:
        assert self.sched is not None
        win = _delta_samples(await self.sched.scrape(), self._before)

        def ms(q: float) -> float | None:
            v = histogram_quantile(q, win, ATTEMPT_METRIC, result="scheduled")
            return None if math.isnan(v) else round(v * 1000.0, 3)

        return {"p50": ms(0.5), "p99": ms(0.99)}

    async def settle(self) -> None:
        return None

    def cpu_seconds(self) -> float | None:
        return process_cpu_seconds(self.sched.pid) if self.sched is not None and self.sched.pid else None

