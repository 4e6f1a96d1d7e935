"""Running one workload's ops against a cluster, as upstream's WorkloadExecutor does
(test/integration/scheduler_perf/executor.go), over the `Cluster` protocol so the same
interpreter drives the in-process scheduler (scheduler.bench) and the real processes (harness).

What each op does here, as upstream:

* createNodes: Count nodes from nodeTemplatePath (or the default node, named `node-<op>-...`),
  each with `kubernetes.io/hostname`; then at most one strategy over them in creation order:
  labelNodePrepareStrategy (labelValues round-robin), uniqueNodeLabelStrategy (a unique value
  per node), nodeAllocatableStrategy (status.allocatable set; csiNodeAllocatable and
  migratedPlugins are refused: kse has no CSINode).
* createNamespaces: `<prefix>-<i>` from namespaceTemplatePath.
* createPods: in `namespace`, else `namespace-<opIndex>` (created on first use); podTemplatePath,
  else the test case's defaultPodTemplatePath, else the default pod. collectMetrics starts a
  throughput collector on that namespace before creating and stops it once all are scheduled;
  skipWaitToCompletion records the count for a later barrier; steadyState creates Count pods and
  replaces each pod that gets scheduled by a new one until the duration is over; otherwise the op
  waits until Count pods of the namespace are scheduled (10 minutes at most, as upstream).
* createAny: Count objects (default 1) from templatePath with `.Index`/`.Count`/templateParams,
  in `namespace` (must be empty for cluster-scoped kinds).
* createPodGroups: refused (kse has no PodGroup kind; gang scheduling does not exist yet).
* churn: in the background, every intervalMilliseconds (default 500): `create` mode creates one
  object per template until `number` (0: unlimited); `recreate` keeps a ring of `number` slots
  per template, creating into an empty slot and deleting a filled one.
* barrier: waits until the pods recorded for the namespaces (all when none are given) are
  scheduled (stageRequirement Scheduled) or attempted at least once (Attempted).
* sleep, deletePods (all at once, or deletePodsPerSecond; skipWaitToCompletion runs it in the
  background), startCollectingMetrics / stopCollectingMetrics (over `namespaces` and
  `labelSelector`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kse.objects.kinds import kind_of, unwrap
from kse.schedperf.config import Op, Params, TestCase, Workload
from kse.schedperf.decode import ConfigError
from kse.schedperf.metrics import ThroughputCollector
from kse.schedperf.objects import HOSTNAME_LABEL, Renderer, name_object
from proto import kse_pb2 as pb

WAIT_TIMEOUT = 600.0  # upstream: 10 minutes for pods to get scheduled
POLL = 0.05


class WorkloadError(RuntimeError):
    """A workload that failed while running (the message names the op)."""


class Cluster(Protocol):
    """What the interpreter needs from a cluster. Scheduled/attempted counts are the cluster's
    current view (an informer or the in-process cache); `on_scheduled` is called with every pod the
    moment it is seen to become scheduled (upstream's informer handler: nodeName "" -> set)."""

    on_scheduled: Callable[[pb.Pod], None] | None

    async def create_nodes(self, nodes: list[pb.Node]) -> None: ...

    async def create_namespace(self, namespace: pb.Namespace) -> None: ...

    async def create_pods(self, pods: list[pb.Pod]) -> None: ...

    async def create_object(self, obj: pb.Object) -> None: ...

    async def delete_object(self, obj: pb.Object) -> None: ...

    def pod_names(self, namespace: str, selector: dict[str, str]) -> list[str]: ...

    async def delete_pod(self, namespace: str, name: str) -> None: ...

    def scheduled_count(self, namespace: str, selector: dict[str, str]) -> int: ...

    def attempted_count(self, namespace: str, selector: dict[str, str]) -> int: ...

    async def attempts_start(self) -> None: ...

    async def attempts_stop(self) -> dict[str, float | None]: ...

    async def settle(self) -> None: ...

    def cpu_seconds(self) -> float | None:
        """CPU seconds the scheduler has used so far (None if unknown): pods per CPU second is
        what the scheduler would reach with a core of its own, on a machine others share."""
        ...


@dataclass
class Collection:
    """One metrics collection of a workload (one SchedulingThroughput data item upstream)."""

    name: str
    throughput: dict[str, float] | None
    attempt_ms: dict[str, float | None]
    scheduled: int
    elapsed_s: float
    cpu_s: float | None = None


@dataclass
class WorkloadRun:
    collections: list[Collection] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Executor:
    def __init__(
        self, cluster: Cluster, case: TestCase, workload: Workload, renderer: Renderer | None = None
    ) -> None:
        self.cluster = cluster
        self.case = case
        self.workload = workload
        self.renderer = renderer or Renderer()
        self.pods_per_namespace: dict[str, int] = {}
        self.namespaces: set[str] = set()
        self.next_node = 0
        self.counter = 0
        self.collector: ThroughputCollector | None = None
        self.collector_task: asyncio.Task[None] | None = None
        self.collector_name = ""
        self.collector_t0 = 0.0
        self.collector_cpu0: float | None = None
        self.run_result = WorkloadRun()
        self.background: set[asyncio.Task[None]] = set()
        self.steady: tuple[str, asyncio.Queue[str]] | None = None
        cluster.on_scheduled = self._scheduled

    def _scheduled(self, pod: pb.Pod) -> None:
        if self.collector is not None:
            self.collector.observe(pod.metadata.namespace, dict(pod.metadata.labels))
        if self.steady is not None and pod.metadata.namespace == self.steady[0]:
            self.steady[1].put_nowait(pod.metadata.name)

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    # ------------------------------------------------------------ driving

    async def run(self) -> WorkloadRun:
        ops, params = self.workload.ops(self.case)
        try:
            for op in ops:
                try:
                    await self.run_op(op)
                except ConfigError as e:
                    raise WorkloadError(f"op {op.index} ({op.opcode}): {e}") from None
                except TimeoutError:
                    raise WorkloadError(f"op {op.index} ({op.opcode}): timed out") from None
            self._check_unused(params)
        finally:
            await self._stop_background()
        self.run_result.warnings.extend(self.renderer.warnings)
        return self.run_result

    @staticmethod
    def _check_unused(params: Params) -> None:
        unused = params.unused()
        if unused:
            raise WorkloadError(
                f"the parameters {unused} are defined on workload {params.where}, but unused. "
                "Please make sure there are no typos"
            )

    async def _stop_background(self) -> None:
        """Cancel churn, background deletes and a collector left running, and wait for them."""
        tasks = [*self.background, *([self.collector_task] if self.collector_task else [])]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self.background.clear()
        self.collector_task = None

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.run_result.warnings.append(f"background op failed: {task.exception()}")

    async def run_op(self, op: Op) -> None:
        handler = getattr(self, f"_op_{op.opcode}")
        await handler(op)

    # ------------------------------------------------------------ namespaces

    async def _ensure_namespace(self, name: str) -> None:
        if name in self.namespaces:
            return
        ns = pb.Namespace(api_version="v1", kind="Namespace")
        ns.metadata.name = name
        await self.cluster.create_namespace(ns)
        self.namespaces.add(name)
        self.pods_per_namespace.setdefault(name, 0)

    async def _op_createNamespaces(self, op: Op) -> None:
        template = self.renderer.namespace(op["NamespaceTemplatePath"])
        for i in range(op["Count"]):
            name = f"{op['Prefix']}-{i}"
            if name in self.namespaces:
                continue
            ns = pb.Namespace()
            ns.CopyFrom(template)
            ns.metadata.name = name
            await self.cluster.create_namespace(ns)
            self.namespaces.add(name)
            self.pods_per_namespace.setdefault(name, 0)

    # ------------------------------------------------------------ nodes

    async def _op_createNodes(self, op: Op) -> None:
        count = op["Count"]
        prefix = f"node-{op.index}-"
        nodes = []
        for i in range(count):
            node = self.renderer.node(op["NodeTemplatePath"], i, count, op["TemplateParams"], prefix)
            name_object(node, self.next_node + i, prefix)
            node.metadata.labels[HOSTNAME_LABEL] = node.metadata.name
            nodes.append(node)
        self._apply_strategy(op, nodes)
        self.next_node += count
        await self.cluster.create_nodes(nodes)

    @staticmethod
    def _apply_strategy(op: Op, nodes: list[pb.Node]) -> None:
        # upstream getNodePreparer: the first set of NodeAllocatable, LabelNodePrepare, UniqueNodeLabel
        if (s := op["NodeAllocatableStrategy"]) is not None:
            if s.get("CsiNodeAllocatable") or s.get("MigratedPlugins"):
                raise ConfigError(
                    "nodeAllocatableStrategy: csiNodeAllocatable and migratedPlugins need CSINode, "
                    "which kse does not model"
                )
            for node in nodes:
                node.status.allocatable.update(s.get("NodeAllocatable", {}))
        elif (s := op["LabelNodePrepareStrategy"]) is not None:
            values = s["LabelValues"]
            for i, node in enumerate(nodes):
                node.metadata.labels[s["LabelKey"]] = values[i % len(values)]
        elif (s := op["UniqueNodeLabelStrategy"]) is not None:
            for node in nodes:
                node.metadata.labels[s["LabelKey"]] = str(uuid.uuid4())

    # ------------------------------------------------------------ pods

    def _pods(self, op: Op, namespace: str, count: int, offset: int = 0) -> list[pb.Pod]:
        path = op["PodTemplatePath"] or self.case.default_pod_template_path
        batch = max(1, op.get("SignatureBatchSize", 1) or 1)
        pods = []
        for i in range(count):
            pod = self.renderer.pod(path, offset + i, count, op.get("TemplateParams") or {})
            name_object(pod, self._next(), "pod-")
            pod.metadata.namespace = namespace
            if not pod.metadata.uid:
                pod.metadata.uid = f"{namespace}-{pod.metadata.name}"
            if op.get("SignatureBatchSizeParam") or op.get("SignatureBatchSize", 1) > 1:
                pod.metadata.labels["signature"] = f"signature-label-{(offset + i) // batch}"
            pods.append(pod)
        return pods

    async def _op_createPods(self, op: Op) -> None:
        namespace = op["Namespace"] if op["Namespace"] is not None else f"namespace-{op.index}"
        await self._ensure_namespace(namespace)
        if op["CollectMetrics"]:
            await self._start_collecting(f"{self.case.name}/{self.workload.name}", [namespace], {})
        if op["SteadyState"]:
            await self._steady_state(op, namespace)
        else:
            await self.cluster.create_pods(self._pods(op, namespace, op["Count"]))
            if op["SkipWaitToCompletion"]:
                self.pods_per_namespace[namespace] = self.pods_per_namespace.get(namespace, 0) + op["Count"]
            else:
                # upstream waitUntilPodsScheduledInNamespace: all scheduled pods of the namespace count
                count = op["Count"]
                await self._wait(
                    lambda: self.cluster.scheduled_count(namespace, {}) >= count,
                    f"{count} pods of namespace {namespace} scheduled",
                    lambda: f"{self.cluster.scheduled_count(namespace, {})} scheduled",
                )
        if op["CollectMetrics"]:
            await self._stop_collecting()

    async def _steady_state(self, op: Op, namespace: str) -> None:
        """upstream createPodsSteadily: Count pods; each pod seen scheduled is deleted and a new
        one created, until Duration has passed."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        self.steady = (namespace, queue)
        scheduled = 0
        try:
            await self.cluster.create_pods(self._pods(op, namespace, op["Count"]))
            deadline = time.monotonic() + op["Duration"]
            while (left := deadline - time.monotonic()) > 0:
                try:
                    async with asyncio.timeout(left):  # not wait_for (3.11 can swallow a cancel)
                        name = await queue.get()
                except TimeoutError:
                    break
                scheduled += 1
                await self.cluster.delete_pod(namespace, name)
                await self.cluster.create_pods(self._pods(op, namespace, 1))
        finally:
            self.steady = None
        if scheduled == 0:
            raise WorkloadError(
                "no pod at all got scheduled, either because of a problem or because the test "
                "interval was too small"
            )

    async def _op_deletePods(self, op: Op) -> None:
        namespace, selector, rate = op["Namespace"], op["LabelSelector"], op["DeletePodsPerSecond"]
        names = self.cluster.pod_names(namespace, selector)

        async def delete() -> None:
            if rate > 0:
                start = time.monotonic()
                for i, name in enumerate(names):
                    delay = start + (i + 1) / rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    await self.cluster.delete_pod(namespace, name)
            else:
                for name in names:
                    await self.cluster.delete_pod(namespace, name)

        if op["SkipWaitToCompletion"]:
            self._spawn(delete())
        else:
            await delete()

    async def _op_createPodSets(self, op: Op) -> None:  # unrolled by Workload.ops; never reached
        raise ConfigError("createPodSets must be unrolled before running")

    async def _op_createPodGroups(self, op: Op) -> None:
        raise ConfigError(
            "createPodGroups is refused: kse has no PodGroup kind (gang scheduling does not exist yet)"
        )

    # ------------------------------------------------------------ any objects, churn

    async def _create_any(self, obj: pb.Object, namespace: str, path: str) -> None:
        kind = kind_of(obj)
        msg = unwrap(obj)
        if namespace and not kind.namespaced:
            raise ConfigError(f"namespace {namespace!r} set for {path}, but {kind.kind} is cluster-scoped")
        if not namespace and kind.namespaced:
            raise ConfigError(f"namespace not set for {path}, but {kind.kind} is namespaced")
        if namespace:
            await self._ensure_namespace(namespace)
            msg.metadata.namespace = namespace
        name_object(msg, self._next(), f"{kind.kind.lower()}-")
        if obj.WhichOneof("kind") == "node":
            msg.metadata.labels[HOSTNAME_LABEL] = msg.metadata.name
        await self.cluster.create_object(obj)

    async def _op_createAny(self, op: Op) -> None:
        count = 1 if op["Count"] is None else op["Count"]
        for i in range(count):
            obj = self.renderer.any(op["TemplatePath"], i, count, op["TemplateParams"])
            await self._create_any(obj, op["Namespace"], op["TemplatePath"])

    async def _op_churn(self, op: Op) -> None:
        namespace = op["Namespace"] if op["Namespace"] is not None else f"namespace-{op.index}"
        await self._ensure_namespace(namespace)
        # upstream reads churn templates without text/template (getUnstructuredFromFile)
        templates = [self.renderer.any(p, 0, 1, {}) for p in op["TemplatePaths"]]
        interval = (op["IntervalMilliseconds"] or 500) / 1000.0
        number = op["Number"]

        def fresh(t: pb.Object) -> pb.Object:
            obj = pb.Object()
            obj.CopyFrom(t)
            msg = unwrap(obj)
            kind = kind_of(obj)
            if kind.namespaced:
                msg.metadata.namespace = namespace
            msg.metadata.name = ""
            name_object(msg, self._next(), f"{kind.kind.lower()}-")
            if not msg.metadata.uid:
                msg.metadata.uid = f"churn-{msg.metadata.namespace}-{msg.metadata.name}"
            if obj.WhichOneof("kind") == "node":
                msg.metadata.labels[HOSTNAME_LABEL] = msg.metadata.name
            return obj

        async def create_mode() -> None:
            count, limit = 0, number or math.inf
            start = time.monotonic()
            while count < limit:
                await asyncio.sleep(max(0.0, start + (count + 1) * interval - time.monotonic()))
                for t in templates:
                    try:
                        await self.cluster.create_object(fresh(t))
                    except Exception:  # upstream ignores a failed churn create
                        pass
                count += 1

        async def recreate_mode() -> None:
            slots: list[list[pb.Object | None]] = [[None] * number for _ in templates]
            count = 0
            start = time.monotonic()
            while True:
                await asyncio.sleep(max(0.0, start + (count + 1) * interval - time.monotonic()))
                for i, t in enumerate(templates):
                    held = slots[i][count % number]
                    if held is not None:
                        await self.cluster.delete_object(held)
                        slots[i][count % number] = None
                    else:
                        obj = fresh(t)
                        try:
                            await self.cluster.create_object(obj)
                            slots[i][count % number] = obj
                        except Exception:
                            pass
                count += 1

        self._spawn(create_mode() if op["Mode"] == "create" else recreate_mode())

    # ------------------------------------------------------------ barrier, sleep

    async def _op_barrier(self, op: Op) -> None:
        namespaces = list(op["Namespaces"]) or sorted(self.pods_per_namespace)
        for ns in op["Namespaces"]:
            if ns not in self.pods_per_namespace:
                raise ConfigError(f"unknown namespace {ns}")
        selector = op["LabelSelector"]
        attempted = op["StageRequirement"] == "Attempted"
        for ns in namespaces:
            want = self.pods_per_namespace[ns]

            def count(ns: str = ns) -> int:
                if attempted:
                    return self.cluster.attempted_count(ns, selector)
                return self.cluster.scheduled_count(ns, selector)

            stage = "attempted" if attempted else "scheduled"
            await self._wait(
                lambda want=want, count=count: count() >= want,  # type: ignore[misc]
                f"{want} pods of namespace {ns} {stage}",
                lambda count=count: f"{count()} so far",  # type: ignore[misc]
            )
        if not attempted:
            if op["Namespaces"]:
                for ns in op["Namespaces"]:
                    self.pods_per_namespace.pop(ns, None)
            else:
                self.pods_per_namespace.clear()

    async def _op_sleep(self, op: Op) -> None:
        await asyncio.sleep(op["Duration"])

    # ------------------------------------------------------------ metrics

    async def _start_collecting(self, name: str, namespaces: list[str], selector: dict[str, str]) -> None:
        if self.collector is not None:
            raise ConfigError(
                "metrics collection is overlapping. Probably second collector was started before "
                "stopping a previous one"
            )
        self.collector = ThroughputCollector(namespaces, selector)
        self.collector_name = name
        self.collector_t0 = time.monotonic()
        self.collector_cpu0 = self.cluster.cpu_seconds()
        await self.cluster.attempts_start()
        self.collector_task = asyncio.ensure_future(self.collector.run())

    async def _stop_collecting(self) -> None:
        if self.collector is None:
            raise ConfigError("missing startCollectingMetrics operation before stopping")
        if self.collector_task is not None:
            self.collector_task.cancel()
            try:
                await self.collector_task
            except asyncio.CancelledError:
                pass
        c = self.collector
        cpu0, cpu1 = self.collector_cpu0, self.cluster.cpu_seconds()
        self.run_result.collections.append(
            Collection(
                name=self.collector_name,
                throughput=c.summary(),
                attempt_ms=await self.cluster.attempts_stop(),
                scheduled=c.scheduled,
                elapsed_s=time.monotonic() - self.collector_t0,
                cpu_s=cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
            )
        )
        self.collector = None
        self.collector_task = None

    async def _op_startCollectingMetrics(self, op: Op) -> None:
        name = f"{self.case.name}/{self.workload.name}"
        if op["Name"]:
            name += f"/{op['Name']}"
        await self._start_collecting(name, op["Namespaces"], op["LabelSelector"])

    async def _op_stopCollectingMetrics(self, op: Op) -> None:
        await self._stop_collecting()

    # ------------------------------------------------------------ waiting

    async def _wait(self, done: Callable[[], bool], what: str, status: Callable[[], str]) -> None:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while not done():
            if time.monotonic() > deadline:
                raise WorkloadError(f"timed out after {WAIT_TIMEOUT:.0f} s waiting for {what} ({status()})")
            await self.cluster.settle()
            if not done():
                await asyncio.sleep(POLL)
