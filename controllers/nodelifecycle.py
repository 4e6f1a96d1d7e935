"""nodelifecycle: notices nodes whose kubelet stopped reporting, and taints nodes by their conditions.

Upstream: pkg/controller/nodelifecycle/node_lifecycle_controller.go (monitorNodeHealth,
tryUpdateNodeHealth, doNoScheduleTaintingPass, processTaintBaseEviction) and
pkg/controller/util/node/controller_utils.go (MarkPodsNotReady). What it keeps:

* Health, by the controller's own clock (client-go's safety rule): a node's probe time is the
  moment this controller *observed* a change of its status or a newer renewTime of its Lease in
  `kube-node-lease`; a node seen for the first time counts as just probed, a node that never
  posted a Ready condition as probed at its creation. When `now > probe + grace` (grace:
  `--node-monitor-grace-period`, `--node-startup-grace-period` for a node that never posted
  Ready), its Ready, MemoryPressure, DiskPressure and PIDPressure conditions become Unknown
  (reason NodeStatusUnknown, message "Kubelet stopped posting node status."; a condition never
  posted: NodeStatusNeverUpdated, "Kubelet never posted node status."), written through
  nodes/status with the node's resourceVersion as precondition.
* Taints, one node write per change: NoSchedule taints from conditions as doNoScheduleTaintingPass
  (Ready False -> not-ready, Unknown -> unreachable; MemoryPressure/DiskPressure/PIDPressure/
  NetworkUnavailable True -> their taints; spec.unschedulable -> unschedulable) and the NoExecute
  taint of taint-based eviction (Ready False -> not-ready, Unknown -> unreachable, True -> none);
  new taints get timeAdded. Only these keys are managed; other taints are left alone.
* Pods of a node whose Ready is not True get their Ready condition False (MarkPodsNotReady) and
  the node a "NodeNotReady" event when it stops being Ready.

Not modelled: upstream's per-zone eviction rate limits (--node-eviction-rate,
--secondary-node-eviction-rate) and the "full disruption" mode that stops NoExecute tainting
when every node of a zone is down: here every unreachable node is tainted at once.
Every write carries the term's fence.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from controllers.base import ControllerContext
from controllers.eventsink import NORMAL, record
from controllers.podutil import POD_READY, condition, pod_key, update_condition
from kse.client.errors import ApiError, ConflictError, FencedError, NotFoundError
from kse.objects.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
)
from kse.objects.timeutil import format_time, to_epoch
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
COMPONENT = "node-controller"  # upstream's event source
READY = "Ready"
HEALTH_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
UNKNOWN_REASON = "NodeStatusUnknown"
UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
NEVER_REASON = "NodeStatusNeverUpdated"
NEVER_MESSAGE = "Kubelet never posted node status."

# doNoScheduleTaintingPass's nodeConditionToTaintKeyStatusMap: (condition, status) -> taint key.
CONDITION_TAINTS: dict[tuple[str, str], str] = {
    ("Ready", "False"): TAINT_NODE_NOT_READY,
    ("Ready", "Unknown"): TAINT_NODE_UNREACHABLE,
    ("MemoryPressure", "True"): TAINT_NODE_MEMORY_PRESSURE,
    ("DiskPressure", "True"): TAINT_NODE_DISK_PRESSURE,
    ("NetworkUnavailable", "True"): TAINT_NODE_NETWORK_UNAVAILABLE,
    ("PIDPressure", "True"): TAINT_NODE_PID_PRESSURE,
}
MANAGED_NO_SCHEDULE = frozenset({*CONDITION_TAINTS.values(), TAINT_NODE_UNSCHEDULABLE})
MANAGED_NO_EXECUTE = frozenset({TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE})


def ready_condition(node: pb.Node) -> pb.NodeCondition | None:
    for c in node.status.conditions:
        if c.type == READY:
            return c
    return None


def desired_taints(node: pb.Node) -> set[tuple[str, str]]:
    """The (key, effect) pairs this controller wants on `node`, from its conditions and spec."""
    out: set[tuple[str, str]] = set()
    for c in node.status.conditions:
        key = CONDITION_TAINTS.get((c.type, c.status))
        if key is not None:
            out.add((key, NO_SCHEDULE))
    if node.spec.unschedulable:
        out.add((TAINT_NODE_UNSCHEDULABLE, NO_SCHEDULE))
    ready = ready_condition(node)
    if ready is not None and ready.status == "False":
        out.add((TAINT_NODE_NOT_READY, NO_EXECUTE))
    elif ready is not None and ready.status == "Unknown":
        out.add((TAINT_NODE_UNREACHABLE, NO_EXECUTE))
    return out


def managed(t: pb.Taint) -> bool:
    return (t.effect == NO_SCHEDULE and t.key in MANAGED_NO_SCHEDULE) or (
        t.effect == NO_EXECUTE and t.key in MANAGED_NO_EXECUTE
    )


def reconcile_taints(node: pb.Node, now_wall: float) -> list[pb.Taint] | None:
    """The node's taints with the managed ones brought in line with `desired_taints`, or None
    when they already are (unmanaged taints keep their place and order)."""
    want = desired_taints(node)
    have = {(t.key, t.effect) for t in node.spec.taints if managed(t)}
    if want == have:
        return None
    out = [t for t in node.spec.taints if not managed(t) or (t.key, t.effect) in want]
    for key, effect in sorted(want - have):
        out.append(pb.Taint(key=key, effect=effect, time_added=format_time(now_wall)))
    return out


def mark_unknown(status: pb.NodeStatus, creation_timestamp: str, now_wall: float) -> bool:
    """tryUpdateNodeHealth's update to Unknown of the health conditions; True if anything changed."""
    stamp = format_time(now_wall)
    changed = False
    present = {c.type: c for c in status.conditions}
    for ctype in HEALTH_CONDITIONS:
        c = present.get(ctype)
        if c is None:
            status.conditions.add(
                type=ctype,
                status="Unknown",
                reason=NEVER_REASON,
                message=NEVER_MESSAGE,
                last_heartbeat_time=creation_timestamp,
                last_transition_time=stamp,
            )
            changed = True
        elif c.status != "Unknown":
            c.status = "Unknown"
            c.reason = UNKNOWN_REASON
            c.message = UNKNOWN_MESSAGE
            c.last_transition_time = stamp
            changed = True
    return changed


@dataclass
class NodeHealth:
    """nodeHealthData: what was last observed of a node, and when (the controller's clock)."""

    probe_timestamp: float
    status: bytes
    lease_renew: str = ""
    resource_version: str = ""  # of the node whose status `status` is: same version, same status


class NodeLifecycleController:
    """See the module doc."""

    name: ClassVar[str] = "nodelifecycle"

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.ctx = ctx
        self.cs = ctx.clientset
        self.options = ctx.options
        self._clock = clock
        self._wall = wall
        self.nodes = ctx.informers.informer_for(ctx.clientset.nodes)
        self.leases = ctx.informers.informer_for(ctx.clientset.leases)
        self.pods = ctx.informers.informer_for(ctx.clientset.pods)
        self.health: dict[str, NodeHealth] = {}
        self.pods_on_node: dict[str, set[str]] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.nodes.add_event_handler(
            lambda n: self._queue(n.metadata.name),
            lambda o, n: self._queue(n.metadata.name),
            lambda n: self.health.pop(n.metadata.name, None),
        )

    # -- handlers

    def _queue(self, name: str) -> None:
        self._dirty.add(name)
        self._wake.set()

    def _pod_added(self, pod: pb.Pod) -> None:
        if pod.spec.node_name:
            self.pods_on_node.setdefault(pod.spec.node_name, set()).add(pod_key(pod))

    def _pod_updated(self, old: pb.Pod, new: pb.Pod) -> None:
        if old.spec.node_name != new.spec.node_name:
            self._pod_deleted(old)
        self._pod_added(new)

    def _pod_deleted(self, pod: pb.Pod) -> None:
        keys = self.pods_on_node.get(pod.spec.node_name)
        if keys is not None:
            keys.discard(pod_key(pod))
            if not keys:
                del self.pods_on_node[pod.spec.node_name]

    # -- the loop

    async def run(self) -> None:
        period = self.options.node_monitor_period_s
        next_pass = self._clock()
        while True:
            if self._clock() >= next_pass:
                await self.monitor_node_health()
                next_pass = self._clock() + period
            else:
                for name in sorted(self._dirty):
                    self._dirty.discard(name)
                    node = self.nodes.store.get(name)
                    if node is None:
                        continue
                    try:
                        await self._write_taints(node)
                    except FencedError:
                        self.ctx.on_fenced(self.ctx.fence())  # another replica leads: the term ends
                    except ApiError as e:
                        log.info("node %s: taints not written: %s; retried next pass", name, e.message)
            self._wake.clear()
            delay = next_pass - self._clock()
            if delay > 0 and not self._dirty:
                try:
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                except TimeoutError:
                    pass

    async def monitor_node_health(self) -> None:
        """One pass over every node: health, conditions, taints, pods."""
        self._dirty.clear()
        for node in sorted(self.nodes.store.list(), key=lambda n: n.metadata.name):
            try:
                await self._monitor(node)
            except FencedError:
                self.ctx.on_fenced(self.ctx.fence())  # another replica leads: the term ends
                return
            except ApiError as e:
                log.info("node %s: %s (%s); retried next pass", node.metadata.name, e.message, e.code_name)

    def _lease_of(self, name: str) -> pb.Lease | None:
        lease: pb.Lease | None = self.leases.store.get_by(NODE_LEASE_NAMESPACE, name)
        return lease

    def try_update_node_health(self, node: pb.Node, now: float) -> tuple[pb.NodeStatus | None, float]:
        """(the status to write when the node's health went Unknown, else None; the grace used).
        Updates the remembered probe time from what is observed now."""
        name = node.metadata.name
        saved = self.health.get(name)
        rv = node.metadata.resource_version
        same = saved is not None and saved.resource_version == rv and bool(rv)
        fingerprint = (
            saved.status if same and saved is not None else node.status.SerializeToString(deterministic=True)
        )
        ready = ready_condition(node)
        grace = self.options.node_monitor_grace_period_s
        if ready is None:
            grace = self.options.node_startup_grace_period_s
        if saved is None:
            probe = now
            if ready is None and node.metadata.creation_timestamp:
                try:  # a node that never posted Ready counts as probed when it was created
                    age = max(0.0, self._wall() - to_epoch(node.metadata.creation_timestamp))
                    probe = now - age
                except ValueError:
                    pass
            saved = self.health[name] = NodeHealth(probe, fingerprint)
        elif saved.status != fingerprint:
            saved.probe_timestamp = now
            saved.status = fingerprint
        saved.resource_version = rv
        lease = self._lease_of(name)
        if lease is not None and lease.spec.renew_time and lease.spec.renew_time > saved.lease_renew:
            # MicroTime strings of one format compare in time order.
            saved.probe_timestamp = now
            saved.lease_renew = lease.spec.renew_time
        if now <= saved.probe_timestamp + grace:
            return None, grace
        status = pb.NodeStatus()
        status.CopyFrom(node.status)
        if not mark_unknown(status, node.metadata.creation_timestamp, self._wall()):
            return None, grace
        return status, grace

    async def _monitor(self, node: pb.Node) -> None:
        name = node.metadata.name
        before = ready_condition(node)
        was_ready = before is not None and before.status == "True"
        status, grace = self.try_update_node_health(node, self._clock())
        if status is not None:
            log.info("node %s: no heartbeat for %.0fs; marking its conditions Unknown", name, grace)
            update = pb.Node(
                metadata=pb.ObjectMeta(name=name, resource_version=node.metadata.resource_version),
                status=status,
            )
            try:
                node = await self.cs.nodes.update_status(update, fence=self.ctx.fence())
            except ConflictError:
                return  # the kubelet (or someone) wrote meanwhile: look again next pass
            except NotFoundError:
                return
            saved = self.health[name]
            saved.status = node.status.SerializeToString(deterministic=True)
            saved.resource_version = node.metadata.resource_version
        after = ready_condition(node)
        if after is not None and after.status != "True":
            if was_ready:  # RecordNodeStatusChange
                message = f"Node {name} status is now: NodeNotReady"
                record(self.ctx, node, NORMAL, "NodeNotReady", message, component=COMPONENT)
            await self.mark_pods_not_ready(name)
        await self._write_taints(node)

    async def _write_taints(self, node: pb.Node) -> None:
        taints = reconcile_taints(node, self._wall())
        if taints is None:
            return
        update = pb.Node()
        update.CopyFrom(node)
        del update.spec.taints[:]
        update.spec.taints.extend(taints)
        try:
            await self.cs.nodes.update(update, fence=self.ctx.fence())
        except (ConflictError, NotFoundError):
            self._queue(node.metadata.name)  # the informer brings the newer node; try again then

    async def mark_pods_not_ready(self, node_name: str) -> None:
        """MarkPodsNotReady: the Ready condition of every pod on the node goes False."""
        for key in sorted(self.pods_on_node.get(node_name, ())):
            pod = self.pods.store.get(key)
            if pod is None or pod.spec.node_name != node_name:
                continue
            ready = condition(pod.status, POD_READY)
            if ready is None or ready.status != "True":
                continue
            status = pb.PodStatus()
            status.CopyFrom(pod.status)
            update_condition(status, pb.PodCondition(type=POD_READY, status="False"))
            update = pb.Pod(
                metadata=pb.ObjectMeta(
                    name=pod.metadata.name,
                    namespace=pod.metadata.namespace,
                    resource_version=pod.metadata.resource_version,
                ),
                status=status,
            )
            try:
                await self.cs.pods.update_status(update, fence=self.ctx.fence())
            except (ConflictError, NotFoundError):
                continue  # changed or gone: the next pass looks again
