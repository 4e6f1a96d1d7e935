"""Many simulated kubelets in one process: registration, heartbeats, node status, and bound pods.

    sim = NodeSimulator(clientset, NodeSimConfig(fleet=FleetConfig(count=100)))
    async with sim.running():            # returns once every node is registered
        ...                              # nodes Ready, leases renewing, bound pods started
    # or: task = tg.create_task(sim.run()); ...; sim.stop(); await task

What one process does for N nodes, and what it costs the API server:

* **Registration**: create each Node (template expanded by `nodesim.template`) and its Lease, with
  bounded concurrency. A node that already exists (a restarted simulator) gets its kubelet labels
  reconciled and its status rewritten; its existing Lease is taken over.
* **Heartbeats** (the kubelet's node lease controller): each node's Lease in `kube-node-lease` is
  renewed every `heartbeat_interval` (10 s), with the last written resourceVersion as precondition.
  Node i renews at phase (i+1)/N of the interval, so N nodes cost a steady N/interval writes a
  second, never a burst. As the kubelet's heartbeat client, these writes go through a client of their
  own (`heartbeat_qps`, default unlimited) so that pod traffic cannot starve them into lease expiry.
  A failed renewal is retried after 200 ms, doubling to 7 s (kubelet's backoff).
* **Node status** (nodeStatusReportFrequency): the full status with the Ready condition's heartbeat
  is written every `node_status_report_interval` (5 min, spread like the leases), and at most every
  `node_status_batch_interval` (1 s) when something changed (images pulled): one write per node per
  batch, never one per pod.
* **Pods**: ONE informer over pods with `spec.nodeName!=` for all nodes (never a watch per node).
  A newly bound pod of ours waits for its image pulls (`nodesim.images`: serial pulls at
  `image_pull_bandwidth`; or, with `registry_bandwidth` set or parallel pulls, the fleet-wide
  `nodesim.pullmodel` with the pull policies of `nodesim.pullpolicy`), then gets its Running
  status (`SimNode.running_status`) through pods/status, with the pod's resourceVersion as
  precondition (on conflict: re-read, check it is still the same pod on the same node, retry).
  Pulled images join the node's `status.images`. A pod
  with a deletionTimestamp (a graceful delete) is stopped: its containers report not ready, and
  after min(deletionGracePeriodSeconds, `termination_delay`) it is deleted with grace 0 and its uid
  as precondition, as a kubelet does once the pod has terminated (`_terminate`); a deleted pod
  leaves the bookkeeping and frees its IP. Pods found already Running
  (a restart) are adopted, not restarted. With `pre_pull_events`, an informer over Events pulls
  what `PrePullImages` events ask of our nodes (`kse.objects.prepull`), for no pod.

* **Node status as the kubelet keeps it**: ONE informer over nodes; when the stored Ready condition
  of a running node of ours is not True (the node lifecycle controller marked it Unknown while
  this process was stopped or cut off), its status is written again at once, as the kubelet's
  status loop does when the stored status differs from its own. Likewise a Running pod whose
  Ready condition was set False (MarkPodsNotReady) gets its Running status written again.
* **Stopped kubelets** (`stop_kubelet(name)` / `start_kubelet(name, kubelet_version=...)`, or the
  `--control-file` re-read on SIGHUP): a stopped node writes nothing (no Lease renewals, no
  status, pods neither started nor finalised), so its Lease goes stale and the node lifecycle
  controller marks it Unknown, as for a SIGSTOPped or killed simulator. Starting it again writes
  its status at once (with the new `nodeInfo.kubeletVersion`, if given: an "upgraded" kubelet),
  renews its Lease and looks at its pods again.

Every deadline (lease renewals, status reports, pod starts) sits in one timer heap served by one
coroutine; API calls run on two bounded worker pools (heartbeats; everything else). All tasks live
in `run()`'s task group: stopping or cancelling it leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kse.client.clientset import Clientset
from kse.client.errors import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
)
from kse.client.informer import Informer
from kse.client.ratelimit import TokenBucketRateLimiter
from kse.objects.meta import object_key
from kse.objects.prepull import REASON_PRE_PULL, parse_pre_pull_message
from kse.tasks import TaskSet
from nodesim.images import normalize_image, pod_images
from nodesim.kubelet import (
    DEFAULT_LEASE_DURATION_S,
    NODE_LEASE_NAMESPACE,
    PULLING,
    RUNNING,
    STARTING,
    TERMINAL,
    TERMINAL_PHASES,
    TERMINATING,
    PodRecord,
    SimNode,
)
from nodesim.pullmodel import PullEngine
from nodesim.pullpolicy import plan_images
from nodesim.template import LABEL_HOSTNAME, LABEL_OS, LABEL_REGION, LABEL_ZONE, FleetConfig, expand_fleet
from nodesim.timers import TimerHeap, WorkerPool
from proto import kse_pb2 as pb

log = logging.getLogger("nodesim")

MiB = 1024 * 1024
BOUND_PODS_SELECTOR = "spec.nodeName!="
RECONCILED_LABELS = ("kubernetes.io/arch", LABEL_HOSTNAME, LABEL_OS, LABEL_REGION, LABEL_ZONE)
# kubelet's node lease controller: retry a failed renewal after 200 ms, doubling up to 7 s.
RENEW_RETRY_INITIAL_S = 0.2
RENEW_RETRY_MAX_S = 7.0
REGISTER_RETRY_MAX_S = 7.0
IP_RETRY_S = 1.0
STATUS_WRITE_ATTEMPTS = 5


@dataclass(frozen=True)
class NodeSimConfig:
    """How the simulated kubelets behave (the fleet itself is `fleet`)."""

    fleet: FleetConfig = field(default_factory=FleetConfig)
    heartbeat_interval: float = 10.0  # kubelet's nodeLeaseRenewInterval (10 s)
    lease_duration_seconds: int = DEFAULT_LEASE_DURATION_S  # kubelet's nodeLeaseDurationSeconds (40)
    node_status_report_interval: float = 300.0  # kubelet's nodeStatusReportFrequency (5 min)
    node_status_batch_interval: float = 1.0  # changed node status is written at most this often
    image_sizes: Mapping[str, int] = field(default_factory=dict)  # known sizes, normalized names
    default_image_size: int = 100 * MiB
    image_pull_bandwidth: float = 100.0 * MiB  # bytes/s per node; 0: pulls are instant
    # The registry pull model (nodesim.pullmodel), on when either is set: a registry shared by all
    # nodes (bytes/s; 0: no shared limit), parallel pulls per node, and the pull policies.
    registry_bandwidth: float = 0.0
    serialize_image_pulls: bool = True  # kubelet's serializeImagePulls (default true)
    always_pull_check_s: float = 0.1  # imagePullPolicy Always on a present image: a manifest check
    pre_pull_events: bool = False  # pull what PrePullImages events ask for (kse.objects.prepull)
    register_concurrency: int = 64
    write_concurrency: int = 64
    heartbeat_concurrency: int = 64
    heartbeat_qps: float = 0.0  # the heartbeat client's limit; 0: none (kubelet's heartbeat client)
    delete_nodes_on_exit: bool = False
    stats_interval: float = 30.0  # log a stats line this often; 0: never
    # A pod being deleted stops after min(its deletionGracePeriodSeconds, this) s (None: the grace
    # period, as containers that only exit when killed), then is deleted with grace 0.
    termination_delay: float | None = None

    def __post_init__(self) -> None:
        if self.heartbeat_interval <= 0:
            raise ValueError(f"heartbeat interval must be > 0, got {self.heartbeat_interval}")
        if self.termination_delay is not None and self.termination_delay < 0:
            raise ValueError(f"termination delay must be >= 0, got {self.termination_delay}")
        if self.lease_duration_seconds <= 0:
            raise ValueError(f"lease duration must be > 0, got {self.lease_duration_seconds}")
        if self.node_status_report_interval <= 0 or self.node_status_batch_interval <= 0:
            raise ValueError("node status intervals must be > 0")
        if min(self.register_concurrency, self.write_concurrency, self.heartbeat_concurrency) < 1:
            raise ValueError("concurrency limits must be >= 1")
        if self.registry_bandwidth < 0 or self.image_pull_bandwidth < 0 or self.always_pull_check_s < 0:
            raise ValueError("bandwidths and the Always check must be >= 0")

    @property
    def registry_model(self) -> bool:
        """Whether pulls go through the fleet-wide registry model instead of per-node arithmetic."""
        return self.registry_bandwidth > 0 or not self.serialize_image_pulls

    def sizes(self) -> dict[str, int]:
        """Every image size known: the given ones and those of the initial caches."""
        out = dict(self.fleet.images)
        out.update(self.image_sizes)
        return out


@dataclass
class SimStats:
    """Counters over the whole fleet, for logs, tests and benchmarks."""

    nodes_registered: int = 0
    lease_renewals: int = 0
    lease_failures: int = 0
    lease_lateness_max_s: float = 0.0  # since the last stats line: renewal completed vs. due
    node_status_writes: int = 0
    node_status_failures: int = 0
    pods_started: int = 0
    pods_adopted: int = 0
    pods_deleted: int = 0
    pods_finalized: int = 0
    pod_status_conflicts: int = 0
    pod_start_failures: int = 0
    images_pulled: int = 0
    bytes_pulled: int = 0
    pre_pull_requests: int = 0
    pods_waiting_never_pull: int = 0  # pods whose image is absent with imagePullPolicy Never

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class NodeSimulator:
    """N simulated kubelets over one clientset (see the module doc)."""

    def __init__(
        self,
        clientset: Clientset,
        config: NodeSimConfig | None = None,
        *,
        heartbeat_clientset: Clientset | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config or NodeSimConfig()
        self.cs = clientset
        hb_qps = self.config.heartbeat_qps
        self.hb = heartbeat_clientset or Clientset(
            clientset.channel_source,
            rate_limiter=TokenBucketRateLimiter(hb_qps, max(1, int(hb_qps))),
            user_agent=f"{clientset.user_agent}/heartbeat",
            timeout=clientset.timeout,
            metrics=clientset.metrics,
        )
        self._wall = wall
        self._sizes = self.config.sizes()
        specs = expand_fleet(self.config.fleet)
        self.nodes: dict[str, SimNode] = {
            s.name: SimNode(s, lease_duration_seconds=self.config.lease_duration_seconds) for s in specs
        }
        self._order = list(self.nodes.values())
        self.stats = SimStats()
        self.informer: Informer[pb.Pod] = Informer(
            clientset.pods, field_selector=BOUND_PODS_SELECTOR, name="nodesim-pods"
        )
        self.node_informer: Informer[pb.Node] = Informer(clientset.nodes, name="nodesim-nodes")
        self._timers: TimerHeap[Callable[[], None]] = TimerHeap(lambda fn: fn())
        self._writes = WorkerPool(self.config.write_concurrency, name="nodesim-writes")
        self._beats = WorkerPool(self.config.heartbeat_concurrency, name="nodesim-heartbeats")
        self._pulling: set[SimNode] = set()
        self._engine: PullEngine | None = None
        if self.config.registry_model:
            self._engine = PullEngine(
                self.config.image_pull_bandwidth,
                self.config.registry_bandwidth,
                serialize=self.config.serialize_image_pulls,
            )
        self._engine_gen = 0
        self.events_informer: Informer[pb.Event] | None = None
        if self.config.pre_pull_events:
            self.events_informer = Informer(clientset.events, name="nodesim-prepull-events")
        self._status_inflight: set[str] = set()
        self._last_status_write: dict[str, float] = {}
        self._registered: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._stopping = False
        self._running = False
        self._forbidden_logged: set[str] = set()

    # ------------------------------------------------------------------ lifetime

    def _events(self) -> tuple[asyncio.Event, asyncio.Event]:
        if self._registered is None or self._stop is None:
            self._registered, self._stop = asyncio.Event(), asyncio.Event()
            if self._stopping:
                self._stop.set()
        return self._registered, self._stop

    @property
    def registered(self) -> bool:
        return self._registered is not None and self._registered.is_set()

    async def wait_registered(self) -> None:
        """Until every node is registered (bound it with `asyncio.timeout`)."""
        await self._events()[0].wait()

    def stop(self) -> None:
        """Ask `run()` to finish: stop every loop, then (optionally) delete the nodes."""
        self._stopping = True
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> None:
        """Register the nodes, then simulate them until `stop()` (or cancellation)."""
        if self._running:
            raise RuntimeError("the node simulator is already running")
        self._running = True
        registered, stop = self._events()
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(self._timers.run(), name="nodesim-timers"),
                    tg.create_task(self._writes.run(), name="nodesim-writes"),
                    tg.create_task(self._beats.run(), name="nodesim-heartbeats"),
                ]
                tasks.append(tg.create_task(self._start(tg, tasks, registered), name="nodesim-start"))
                await stop.wait()
                log.info("stopping %d simulated nodes", len(self.nodes))
                for t in tasks:
                    t.cancel()
        except BaseExceptionGroup as eg:
            raise _single(eg) from None
        finally:
            self._running = False
        if self.config.delete_nodes_on_exit:
            await self._delete_all()

    async def _start(
        self, tg: asyncio.TaskGroup, tasks: list[asyncio.Task[Any]], registered: asyncio.Event
    ) -> None:
        t0 = time.monotonic()
        await self._register_all()
        log.info("registered %d nodes in %.2fs", len(self.nodes), time.monotonic() - t0)
        self._schedule_periodic()
        self.informer.add_event_handler(self._on_add, self._on_update, self._on_delete)
        tasks.append(tg.create_task(self.informer.run(), name="nodesim-pod-informer"))
        self.node_informer.add_event_handler(self._on_node, lambda old, new: self._on_node(new), None)
        tasks.append(tg.create_task(self.node_informer.run(), name="nodesim-node-informer"))
        if self.events_informer is not None:
            self.events_informer.add_event_handler(self._on_event, lambda _old, new: self._on_event(new))
            tasks.append(tg.create_task(self.events_informer.run(), name="nodesim-prepull-events"))
        tasks.append(tg.create_task(self._flush_loop(), name="nodesim-status-flush"))
        if self.config.stats_interval > 0:
            tasks.append(tg.create_task(self._stats_loop(), name="nodesim-stats"))
        registered.set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[NodeSimulator]:
        """Run for the duration of the block, entered once every node is registered. Leaving it
        stops the simulator and waits for it; a crash of the simulator is raised here."""
        # The block reads the simulator's outcome itself; the set only makes sure that neither
        # task outlives the block, however it is left (a cancellation included).
        async with TaskSet("nodesim", logger=log, failure_level=logging.DEBUG) as tasks:
            task = tasks.spawn(self.run(), name="nodesim")
            try:
                reg = tasks.spawn(self.wait_registered(), name="nodesim-registered")
                await asyncio.wait([task, reg], return_when=asyncio.FIRST_COMPLETED)
                reg.cancel()
                if task.done():
                    task.result()
                    raise RuntimeError("the node simulator stopped before it registered its nodes")
                yield self
            finally:
                self.stop()
                if not task.done():
                    try:
                        await task
                    except asyncio.CancelledError:
                        if not task.cancelled():
                            raise
                elif not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]

    # ------------------------------------------------------------------ registration

    async def _register_all(self) -> None:
        nodes = iter(self._order)

        async def worker() -> None:
            for node in nodes:
                await self._register(node)

        async with asyncio.TaskGroup() as tg:
            for _ in range(min(self.config.register_concurrency, len(self._order))):
                tg.create_task(worker())

    async def _register(self, node: SimNode) -> None:
        failures = 0
        while True:
            try:
                await self._try_register(node)
                node.registered = True
                self.stats.nodes_registered += 1
                return
            except (ForbiddenError, InvalidError):
                raise
            except ApiError as e:
                failures += 1
                delay = min(REGISTER_RETRY_MAX_S, RENEW_RETRY_INITIAL_S * 2**failures)
                log.warning("registering node %s failed (%s: %s); retrying in %.1fs",
                            node.name, e.code_name, e.message, delay)
                await asyncio.sleep(delay)

    async def _try_register(self, node: SimNode) -> None:
        now = self._wall()
        node.registered_at = now
        try:
            created = await self.cs.nodes.create(node.registration(now))
        except AlreadyExistsError:
            created = await self._reconcile_existing(node, now)
        node.uid = created.metadata.uid
        await self._ensure_lease(node)

    async def _reconcile_existing(self, node: SimNode, now: float) -> pb.Node:
        """A node that exists already (a restarted simulator): as the kubelet, bring its default
        labels in line, then post our status."""
        existing = await self.cs.nodes.get(node.name)
        want = node.spec.node.metadata.labels
        labels = existing.metadata.labels
        if any(labels.get(k) != want.get(k) for k in RECONCILED_LABELS if k in want):
            for k in RECONCILED_LABELS:
                if k in want:
                    labels[k] = want[k]
            try:
                existing = await self.cs.nodes.update(existing)
            except ConflictError:
                log.info("node %s changed while reconciling its labels; keeping it as it is", node.name)
        await self.cs.nodes.update_status(node.status_update(now))
        self.stats.node_status_writes += 1
        return existing

    async def _ensure_lease(self, node: SimNode) -> None:
        """Create the node's Lease, or take over the one that exists."""
        now = self._wall()
        try:
            node.lease = await self.hb.leases.create(node.new_lease(now))
            return
        except AlreadyExistsError:
            pass
        node.lease = await self.hb.leases.get(NODE_LEASE_NAMESPACE, node.name)
        node.lease = await self.hb.leases.update(node.renewed_lease(self._wall()))

    def _schedule_periodic(self) -> None:
        """Lease renewals and status reports, node i at phase (i+1)/N of each interval."""
        t0 = asyncio.get_running_loop().time()
        n = max(1, len(self._order))
        hb = self.config.heartbeat_interval
        report = self.config.node_status_report_interval
        for pos, node in enumerate(self._order):
            phase = (pos + 1) / n
            self._push_renew(node, t0 + hb * phase)
            self._timers.push(t0 + report * phase, functools.partial(self._report_due, node))

    # ------------------------------------------------------------------ heartbeats

    def _push_renew(self, node: SimNode, due: float) -> None:
        job = functools.partial(self._renew, node, due, node.beat_epoch)
        self._timers.push(due, functools.partial(self._beats.submit, job))

    async def _renew(self, node: SimNode, due: float, epoch: int = 0) -> None:
        if node.lost or self._stopping or node.stopped or epoch != node.beat_epoch:
            return  # a stopped kubelet's renewals start again (a new epoch) in `start_kubelet`
        loop = asyncio.get_running_loop()
        try:
            try:
                node.lease = await self.hb.leases.update(node.renewed_lease(self._wall()))
            except (ConflictError, NotFoundError):
                # Someone else wrote (or deleted) our Lease: start again from what is there.
                await self._ensure_lease(node)
        except ApiError as e:
            node.heartbeat_failures += 1
            node.stats.lease_failures += 1
            self.stats.lease_failures += 1
            delay = min(RENEW_RETRY_MAX_S, RENEW_RETRY_INITIAL_S * 2 ** (node.heartbeat_failures - 1))
            self._note_forbidden(e)
            log.info("lease renewal of %s failed (%s: %s); retrying in %.1fs",
                     node.name, e.code_name, e.message, delay)
            self._push_renew(node, loop.time() + delay)
            return
        now = loop.time()
        node.heartbeat_failures = 0
        node.stats.lease_renewals += 1
        self.stats.lease_renewals += 1
        self.stats.lease_lateness_max_s = max(self.stats.lease_lateness_max_s, now - due)
        interval = self.config.heartbeat_interval
        nxt = due + interval
        if nxt <= now:  # fell behind by a whole interval: do not catch up in a burst
            nxt = now + interval
        self._push_renew(node, nxt)

    # ------------------------------------------------------------------ node status

    def _report_due(self, node: SimNode) -> None:
        if node.lost or self._stopping:
            return
        if node.stopped:  # keep the cadence; nothing is written while the kubelet is down
            interval = self.config.node_status_report_interval
            self._timers.push(
                asyncio.get_running_loop().time() + interval, functools.partial(self._report_due, node)
            )
            return
        loop_now = asyncio.get_running_loop().time()
        interval = self.config.node_status_report_interval
        last = self._last_status_write.get(node.name, float("-inf"))
        if loop_now - last < interval * 0.999:
            self._timers.push(last + interval, functools.partial(self._report_due, node))
            return
        self._submit_status(node)
        self._timers.push(loop_now + interval, functools.partial(self._report_due, node))

    def _submit_status(self, node: SimNode) -> None:
        if node.name in self._status_inflight:
            node.status_dirty = True  # written once the write in flight is done
            return
        node.status_dirty = False
        self._status_inflight.add(node.name)
        self._writes.submit(functools.partial(self._write_status, node))

    async def _write_status(self, node: SimNode) -> None:
        try:
            if node.lost or self._stopping or node.stopped:
                return
            try:
                await self.cs.nodes.update_status(node.status_update(self._wall()))
            except NotFoundError:
                node.lost = True
                log.warning("node %s was deleted; no longer simulating it", node.name)
                return
            except ApiError as e:
                self.stats.node_status_failures += 1
                self._note_forbidden(e)
                log.info("status of node %s not written (%s: %s)", node.name, e.code_name, e.message)
                node.status_dirty = True
                return
            self.stats.node_status_writes += 1
            node.stats.status_writes += 1
            self._last_status_write[node.name] = asyncio.get_running_loop().time()
        finally:
            self._status_inflight.discard(node.name)

    async def _flush_loop(self) -> None:
        """Every batch interval: finished pulls join the caches, changed nodes get one status write."""
        interval = self.config.node_status_batch_interval
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for node in list(self._pulling):
                pulled = node.cache.settle(now)
                if pulled:
                    self._count_pulled(node, pulled)
                if not node.cache.pulling:
                    self._pulling.discard(node)
            for node in self._order:
                if node.status_dirty and not node.lost and not node.stopped:
                    self._submit_status(node)

    # ------------------------------------------------------------------ pods: informer handlers

    def _on_add(self, pod: pb.Pod) -> None:
        self._observe(pod)

    def _on_update(self, old: pb.Pod, new: pb.Pod) -> None:
        self._observe(new)

    def _on_delete(self, pod: pb.Pod) -> None:
        node = self.nodes.get(pod.spec.node_name)
        if node is None:
            return
        key = object_key(pod.metadata.namespace, pod.metadata.name)
        rec = node.pods.get(key)
        if rec is not None and rec.uid == pod.metadata.uid:
            self._forget(node, rec)
            self.stats.pods_deleted += 1

    def _forget(self, node: SimNode, rec: PodRecord) -> None:
        if node.pods.get(rec.key) is rec:
            del node.pods[rec.key]
        if rec.ip:
            node.ipam.release(rec.ip)
            rec.ip = ""

    def _observe(self, pod: pb.Pod) -> None:
        node = self.nodes.get(pod.spec.node_name)
        if node is None or node.lost or node.stopped:
            return  # not one of ours, or its kubelet is down (`start_kubelet` looks again)
        meta = pod.metadata
        key = object_key(meta.namespace, meta.name)
        rec = node.pods.get(key)
        if rec is not None and rec.uid != meta.uid:
            self._forget(node, rec)  # deleted and recreated under the same name
            rec = None
        if meta.deletion_timestamp:
            if rec is None:
                rec = PodRecord(meta.namespace, meta.name, meta.uid, TERMINAL, self._wall())
                node.pods[key] = rec
            self._terminate(node, rec, pod)
            return
        if rec is not None:
            if rec.state == RUNNING and _not_ready(pod) and pod.status.phase == "Running":
                # Someone (MarkPodsNotReady) set Ready False while the containers run: the
                # kubelet's status manager writes its own status again.
                rec.state = PULLING
                loop_now = asyncio.get_running_loop().time()
                self._timers.push(loop_now, functools.partial(self._start_due, node, rec))
            return  # known: our own status write coming back, or a change we do not act on
        now = self._wall()
        phase = pod.status.phase
        if phase in TERMINAL_PHASES:
            node.pods[key] = PodRecord(meta.namespace, meta.name, meta.uid, TERMINAL, now)
            return
        if phase == "Running" and pod.status.host_ip == node.internal_ip:
            self._adopt(node, pod, key, now)
            return
        loop_now = asyncio.get_running_loop().time()
        images = tuple(pod_images(pod))
        if self._engine is not None:
            self._observe_registry_model(node, pod, key, now, loop_now)
            return
        ready_at, started = node.cache.plan_pull(
            images, loop_now, self._sizes, self.config.default_image_size, self.config.image_pull_bandwidth
        )
        if started:
            self._pulling.add(node)
        rec = PodRecord(meta.namespace, meta.name, meta.uid, PULLING, now, start_at=ready_at, images=images)
        node.pods[key] = rec
        self._timers.push(ready_at, functools.partial(self._start_due, node, rec))

    # ------------------------------------------------------------------ pods: the registry pull model

    def _count_pulled(self, node: SimNode, names: list[str]) -> None:
        self.stats.images_pulled += len(names)
        self.stats.bytes_pulled += sum(node.cache.images.get(n, 0) for n in names)
        node.status_dirty = True

    def _image_size(self, name: str) -> int:
        return self._sizes.get(name, self.config.default_image_size)

    def _observe_registry_model(
        self, node: SimNode, pod: pb.Pod, key: str, now: float, loop_now: float
    ) -> None:
        """A newly bound pod under the registry model: its pull policies decide what is pulled
        (`nodesim.pullpolicy`); it starts once the last awaited image has arrived."""
        assert self._engine is not None
        self._engine_tick()
        meta = pod.metadata
        plan = plan_images(pod, node.cache.images)
        rec = PodRecord(meta.namespace, meta.name, meta.uid, PULLING, now, images=tuple(pod_images(pod)))
        rec.not_before = loop_now + (self.config.always_pull_check_s if plan.always_checks else 0.0)
        for name in plan.to_pull:
            self._engine.request(node.name, name, self._image_size(name), loop_now)
            rec.waiting.add(name)
        if plan.never_missing:
            # As the kubelet: ErrImageNeverPull until the image turns up (another pod's pull, a
            # pre-pull); the pod stays Pending meanwhile.
            self.stats.pods_waiting_never_pull += 1
            log.info("pod %s on %s: image %s is not present with pull policy of Never", key, node.name,
                     ", ".join(plan.never_missing))
            rec.waiting.update(plan.never_missing)
        node.pods[key] = rec
        if rec.waiting:
            self._engine_kick()
        else:
            self._timers.push(rec.not_before, functools.partial(self._start_due, node, rec))

    def _pre_pull(self, node: SimNode, images: list[str]) -> None:
        """Pull `images` on `node` for no pod (a PrePullImages event asked)."""
        loop_now = asyncio.get_running_loop().time()
        if self._engine is not None:
            self._engine_tick()
            for name in images:
                if name not in node.cache.images:
                    self._engine.request(node.name, name, self._image_size(name), loop_now)
            self._engine_kick()
            return
        _, started = node.cache.plan_pull(
            images, loop_now, self._sizes, self.config.default_image_size, self.config.image_pull_bandwidth
        )
        if started:
            self._pulling.add(node)

    def _on_event(self, event: pb.Event) -> None:
        if event.reason != REASON_PRE_PULL:
            return
        parsed = parse_pre_pull_message(event.message)
        if parsed is None:
            return
        node = self.nodes.get(parsed[0])
        if node is None or node.lost:
            return
        self.stats.pre_pull_requests += 1
        self._pre_pull(node, [normalize_image(i) for i in parsed[1]])

    def _engine_kick(self) -> None:
        """Arm one timer for the engine's next completion (earlier timers become stale)."""
        assert self._engine is not None
        due = self._engine.next_completion()
        if due is None:
            return
        self._engine_gen += 1
        gen = self._engine_gen
        self._timers.push(due, functools.partial(self._engine_due, gen))

    def _engine_due(self, gen: int) -> None:
        if gen == self._engine_gen and not self._stopping:
            self._engine_tick()
            self._engine_kick()

    def _engine_tick(self) -> None:
        """Advance the engine to now: finished pulls join their node's cache, and pods no longer
        waiting for anything get their start."""
        assert self._engine is not None
        loop_now = asyncio.get_running_loop().time()
        for pull in self._engine.advance(loop_now):
            node = self.nodes[pull.node]
            node.cache.images[pull.image] = pull.size
            node.status_dirty = True
            self.stats.images_pulled += 1
            self.stats.bytes_pulled += pull.size
            for rec in node.pods.values():
                if rec.state == PULLING and pull.image in rec.waiting:
                    rec.waiting.discard(pull.image)
                    if not rec.waiting:
                        at = max(loop_now, rec.not_before)
                        self._timers.push(at, functools.partial(self._start_due, node, rec))

    def _adopt(self, node: SimNode, pod: pb.Pod, key: str, now: float) -> None:
        """A pod already Running on this node (the simulator restarted): keep it as it is."""
        meta = pod.metadata
        rec = PodRecord(meta.namespace, meta.name, meta.uid, RUNNING, now, images=tuple(pod_images(pod)))
        if pod.status.pod_ip and not pod.spec.host_network and node.ipam.claim(pod.status.pod_ip):
            rec.ip = pod.status.pod_ip
        if node.cache.add(rec.images, self._sizes, self.config.default_image_size):
            node.status_dirty = True
        node.pods[key] = rec
        self.stats.pods_adopted += 1

    # ------------------------------------------------------------------ pods: writes

    def _start_due(self, node: SimNode, rec: PodRecord) -> None:
        if node.pods.get(rec.key) is rec and rec.state == PULLING:
            self._writes.submit(functools.partial(self._start_pod, node, rec))

    async def _start_pod(self, node: SimNode, rec: PodRecord) -> None:
        if node.pods.get(rec.key) is not rec or rec.state != PULLING or self._stopping:
            return
        if node.stopped:
            return  # `start_kubelet` starts it
        loop = asyncio.get_running_loop()
        pulled = node.cache.settle(loop.time())
        if pulled:
            self._count_pulled(node, pulled)
        pod = self.informer.store.get_by(rec.namespace, rec.name)
        if pod is None or pod.metadata.uid != rec.uid:
            return  # deleted meanwhile; the delete handler forgets it
        if pod.spec.host_network:
            ip = node.internal_ip
        else:
            ip = rec.ip or node.ipam.allocate() or ""
            if not ip:
                log.warning("node %s has no free pod IP in %s for %s; retrying", node.name,
                            node.spec.pod_cidr, rec.key)
                self._timers.push(loop.time() + IP_RETRY_S, functools.partial(self._start_due, node, rec))
                return
            rec.ip = ip
        rec.state = STARTING
        for attempt in range(STATUS_WRITE_ATTEMPTS):
            update = pb.Pod(
                metadata=pb.ObjectMeta(
                    name=rec.name, namespace=rec.namespace, resource_version=pod.metadata.resource_version
                ),
                status=node.running_status(pod, ip, self._wall(), rec.observed_at),
            )
            try:
                await self.cs.pods.update_status(update)
            except ConflictError:
                self.stats.pod_status_conflicts += 1
                try:
                    pod = await self.cs.pods.get(rec.namespace, rec.name)
                except NotFoundError:
                    return
                if (
                    pod.metadata.uid != rec.uid
                    or pod.spec.node_name != node.name
                    or pod.metadata.deletion_timestamp
                ):
                    return
                continue
            except NotFoundError:
                return
            except ApiError as e:
                self._note_forbidden(e)
                log.info("starting pod %s on %s failed (%s: %s); attempt %d", rec.key, node.name,
                         e.code_name, e.message, attempt + 1)
                await asyncio.sleep(min(RENEW_RETRY_MAX_S, RENEW_RETRY_INITIAL_S * 2**attempt))
                latest = self.informer.store.get_by(rec.namespace, rec.name)
                if latest is None or latest.metadata.uid != rec.uid:
                    return
                pod = latest
                continue
            if node.pods.get(rec.key) is rec and rec.state == STARTING:  # not terminating meanwhile
                rec.state = RUNNING
            self.stats.pods_started += 1
            node.stats.pods_started += 1
            return
        self.stats.pod_start_failures += 1
        if node.pods.get(rec.key) is rec and rec.state == STARTING:
            rec.state = PULLING
            self._timers.push(loop.time() + IP_RETRY_S, functools.partial(self._start_due, node, rec))

    def _terminate(self, node: SimNode, rec: PodRecord, pod: pb.Pod) -> None:
        """A pod with a deletionTimestamp: the kubelet's side of graceful deletion. Its containers
        stop (pulls and starts are abandoned) after min(deletionGracePeriodSeconds,
        `termination_delay`), counted from when this kubelet first saw the deletion (as the
        kubelet does, trusting its own clock); a second delete that shortens the period moves it
        earlier. Then the pod's status says its containers stopped and the pod is deleted with
        grace 0 and its uid as precondition (the kubelet's final delete)."""
        meta = pod.metadata
        has_grace = meta.HasField("deletion_grace_period_seconds")
        grace = float(meta.deletion_grace_period_seconds) if has_grace else 0.0
        delay = grace if self.config.termination_delay is None else min(grace, self.config.termination_delay)
        loop_now = asyncio.get_running_loop().time()
        if rec.state != TERMINAL:
            rec.state = TERMINATING
        due = loop_now + max(0.0, delay)
        if rec.stop_at is not None and rec.stop_at <= due:
            return  # already stopping at least as soon
        first = rec.stop_at is None
        rec.stop_at = due
        if delay <= 0:  # nothing to wait for (grace 0 never gets here: such a pod is gone at once)
            self._stop_due(rec, due)
            return
        if first and rec.state == TERMINATING:
            self._writes.submit(functools.partial(self._report_stopping, rec))
        self._timers.push(due, functools.partial(self._stop_due, rec, due))

    def _kubelet_down(self, rec: PodRecord) -> bool:
        """Whether the kubelet of the node `rec`'s pod is bound to is stopped (`stop_kubelet`)."""
        pod = self.informer.store.get_by(rec.namespace, rec.name)
        node = self.nodes.get(pod.spec.node_name) if pod is not None else None
        return node is not None and node.stopped

    def _stop_due(self, rec: PodRecord, due: float) -> None:
        if self._kubelet_down(rec):
            return  # a stopped kubelet finalises nothing; `start_kubelet` counts the grace again
        if rec.stop_at == due and not rec.finalizing:
            rec.finalizing = True
            self._writes.submit(functools.partial(self._finalize, rec))

    async def _report_stopping(self, rec: PodRecord) -> None:
        """The terminating pod's containers are no longer ready (one status write; best effort:
        a conflict or a pod already gone is left to the final delete)."""
        pod = self.informer.store.get_by(rec.namespace, rec.name)
        if pod is None or pod.metadata.uid != rec.uid or self._stopping or self._kubelet_down(rec):
            return
        update = pb.Pod(
            metadata=pb.ObjectMeta(
                name=rec.name, namespace=rec.namespace, resource_version=pod.metadata.resource_version
            ),
            status=SimNode.stopped_status(pod, self._wall()),
        )
        try:
            await self.cs.pods.update_status(update)
        except ApiError as e:
            self._note_forbidden(e)
            log.debug("marking pod %s stopped failed (%s: %s)", rec.key, e.code_name, e.message)

    async def _finalize(self, rec: PodRecord) -> None:
        """A pod marked for deletion whose containers have stopped: remove the object (grace 0,
        uid-guarded), as the kubelet's status manager does once the pod is terminated."""
        if self._stopping:
            return
        try:
            await self.cs.pods.delete(rec.namespace, rec.name, uid=rec.uid, grace_period_seconds=0)
            self.stats.pods_finalized += 1
        except NotFoundError:
            pass
        except ConflictError:
            pass  # another pod of that name by now
        except ApiError as e:
            self._note_forbidden(e)
            log.info("finalising pod %s failed (%s: %s); retrying", rec.key, e.code_name, e.message)
            rec.finalizing = False
            rec.stop_at = asyncio.get_running_loop().time() + IP_RETRY_S
            self._timers.push(rec.stop_at, functools.partial(self._stop_due, rec, rec.stop_at))

    # ------------------------------------------------------------------ node status as stored

    def _on_node(self, stored: pb.Node) -> None:
        node = self.nodes.get(stored.metadata.name)
        if node is None or node.lost or node.stopped or not node.registered or self._stopping:
            return
        ready = next((c for c in stored.status.conditions if c.type == "Ready"), None)
        if ready is not None and ready.status != "True":
            self._submit_status(node)

    # ------------------------------------------------------------------ kubelet stop / start

    def stop_kubelet(self, name: str) -> None:
        """Take node `name`'s kubelet down: it stops writing anything (KeyError: not ours)."""
        node = self.nodes[name]
        if node.stopped:
            return
        node.stopped = True
        log.info("kubelet of %s stopped", name)

    def start_kubelet(self, name: str, kubelet_version: str = "") -> None:
        """Bring node `name`'s kubelet back (with a new kubeletVersion, if given): its status is
        written at once, its Lease renewed, its pods looked at again (KeyError: not ours)."""
        node = self.nodes[name]
        changed = bool(kubelet_version) and kubelet_version != node.kubelet_version
        if not node.stopped and not changed:
            return
        if kubelet_version:
            node.kubelet_version = kubelet_version
        was_stopped = node.stopped
        node.stopped = False
        node.registered_at = self._wall()
        log.info("kubelet of %s started%s", name, f" ({kubelet_version})" if kubelet_version else "")
        if not self._running or not node.registered:
            return
        self._submit_status(node)
        if was_stopped:
            node.beat_epoch += 1  # a renewal still queued from before the stop is dropped

            self._push_renew(node, asyncio.get_running_loop().time())
            for rec in node.pods.values():
                if not rec.finalizing:
                    rec.stop_at = None  # a terminating pod's grace period is counted afresh
            for pod in self.informer.store.list():
                if pod.spec.node_name == name:
                    self._observe(pod)
                    seen = node.pods.get(object_key(pod.metadata.namespace, pod.metadata.name))
                    if seen is not None and seen.state == PULLING:
                        self._start_due(node, seen)

    def stopped_kubelets(self) -> list[str]:
        return sorted(n.name for n in self._order if n.stopped)

    def apply_control(self, control: KubeletControl) -> None:
        """Make the set of stopped kubelets (and their versions) what `control` says."""
        unknown = sorted(set(control.stopped) - self.nodes.keys())
        if unknown:
            log.warning("control: no such simulated node(s): %s", ", ".join(unknown))
        for node in self._order:
            version = control.kubelet_versions.get(node.name, "")
            if node.name in control.stopped:
                if version:
                    node.kubelet_version = version
                self.stop_kubelet(node.name)
            else:
                self.start_kubelet(node.name, version)

    # ------------------------------------------------------------------ shutdown and reporting

    async def _delete_all(self) -> None:
        """--delete-nodes-on-exit: remove every Lease and Node this process registered."""
        nodes = iter([n for n in self._order if n.registered])
        denied: set[str] = set()

        async def delete(kind: str, call: Callable[[], Awaitable[object]], name: str) -> None:
            if kind in denied:
                return
            try:
                await call()
            except NotFoundError:
                pass
            except ForbiddenError as e:
                denied.add(kind)
                log.warning("cannot delete %s on exit: %s", kind, e.message)
            except ApiError as e:
                log.warning("deleting %s %s failed (%s: %s)", kind, name, e.code_name, e.message)

        async def worker() -> None:
            for node in nodes:
                lease = functools.partial(self.hb.leases.delete, NODE_LEASE_NAMESPACE, node.name)
                await delete("leases", lease, node.name)
                await delete("nodes", functools.partial(self.cs.nodes.delete, node.name), node.name)

        async with asyncio.TaskGroup() as tg:
            for _ in range(min(self.config.register_concurrency, len(self._order)) or 1):
                tg.create_task(worker())
        log.info("deleted the simulated nodes")

    def _note_forbidden(self, e: ApiError) -> None:
        if isinstance(e, ForbiddenError) and e.message not in self._forbidden_logged:
            self._forbidden_logged.add(e.message)
            log.error("the API server denied a write: %s", e.message)

    def pod_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self._order:
            for rec in node.pods.values():
                counts[rec.state] = counts.get(rec.state, 0) + 1
        return counts

    async def _stats_loop(self) -> None:
        interval = self.config.stats_interval
        last = self.stats.lease_renewals
        while True:
            await asyncio.sleep(interval)
            s = self.stats
            log.info(
                "nodes=%d leases/s=%.1f lease_failures=%d max_lateness=%.3fs status_writes=%d "
                "pods=%s started=%d backlog=heartbeats:%d,writes:%d",
                s.nodes_registered, (s.lease_renewals - last) / interval, s.lease_failures,
                s.lease_lateness_max_s, s.node_status_writes, self.pod_counts(), s.pods_started,
                self._beats.backlog, self._writes.backlog,
            )
            last = s.lease_renewals
            s.lease_lateness_max_s = 0.0


def _not_ready(pod: pb.Pod) -> bool:
    return any(c.type == "Ready" and c.status != "True" for c in pod.status.conditions)


@dataclass(frozen=True)
class KubeletControl:
    """The `--control-file` of `kse nodesim`: which kubelets are down, and the kubeletVersion a
    node reports once its kubelet is (re)started.

        {"stopped": ["node-3"], "kubeletVersions": {"node-3": "v1.35.0"}}
    """

    stopped: frozenset[str] = frozenset()
    kubelet_versions: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: object) -> KubeletControl:
        """ValueError naming the field when `data` is not the shape above."""
        if not isinstance(data, dict):
            raise ValueError("control file: must be a JSON object")
        extra = sorted(set(data) - {"stopped", "kubeletVersions"})
        if extra:
            raise ValueError(f"control file: unknown field(s): {', '.join(extra)}")
        stopped = data.get("stopped", [])
        if not isinstance(stopped, list) or not all(isinstance(n, str) and n for n in stopped):
            raise ValueError("control file: stopped: must be a list of node names")
        versions = data.get("kubeletVersions", {})
        if not isinstance(versions, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in versions.items()
        ):
            raise ValueError("control file: kubeletVersions: must map node names to version strings")
        return cls(frozenset(stopped), dict(versions))


def _single(eg: BaseExceptionGroup) -> BaseException:  # type: ignore[type-arg]
    """The one failure of a task group: its only leaf exception, or the first leaf when every leaf
    is the same kind of error (several registration workers all refused the same way); the group
    itself when the failures differ."""
    leaves = _leaves(eg)
    if len({type(e) for e in leaves}) == 1:
        return leaves[0]
    return eg


def _leaves(eg: BaseExceptionGroup) -> list[BaseException]:  # type: ignore[type-arg]
    out: list[BaseException] = []
    for e in eg.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out
