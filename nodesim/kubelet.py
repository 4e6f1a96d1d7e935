"""One simulated kubelet: what it knows and what it would write, with no I/O of its own.

The simulator (`nodesim.simulator`) owns the API calls, the timers and the rate limits for all
nodes; a `SimNode` holds one node's state and builds the objects to write:

* `node_status(now)`: the full `.status` the kubelet posts (capacity, allocatable, conditions with
  Ready, addresses, images, nodeInfo), written with the status subresource;
* `new_lease(now)` / `renew(now)`: the node's heartbeat Lease in `kube-node-lease` (name and holder
  the node name, leaseDurationSeconds 40, renewTime a MicroTime), as the kubelet's node lease
  controller keeps it;
* `running_status(pod, ip, now)`: the status of a pod whose containers have started: phase Running,
  the PodScheduled/Initialized/ContainersReady/Ready (and PodReadyToStartContainers) conditions,
  hostIP, podIP, startTime and one ready containerStatus per container.

Pod IPs come from the node's pod CIDR (`PodIPAllocator`): unique per node, hence across a fleet whose
CIDRs do not overlap; released when the pod is deleted.
"""

from __future__ import annotations

import heapq
import ipaddress
from dataclasses import dataclass, field

from kse.objects.meta import object_key
from kse.objects.timeutil import format_micro_time, format_time
from nodesim.images import ImageCache, pod_images
from nodesim.template import SimNodeSpec
from proto import kse_pb2 as pb

NODE_LEASE_NAMESPACE = "kube-node-lease"
DEFAULT_LEASE_DURATION_S = 40

# Pod condition types, in the order the kubelet lists them.
POD_READY_TO_START = "PodReadyToStartContainers"
POD_CONDITIONS = (POD_READY_TO_START, "Initialized", "Ready", "ContainersReady", "PodScheduled")

TERMINAL_PHASES = ("Succeeded", "Failed")


class PodIPAllocator:
    """Addresses of one pod CIDR, lowest free first; the network, the gateway (.1) and the broadcast
    address are never handed out."""

    def __init__(self, cidr: ipaddress.IPv4Network) -> None:
        self.cidr = cidr
        self._base = int(cidr.network_address)
        self._first = 2
        self._last = cidr.num_addresses - 2
        self._next = self._first  # never handed out at or above this
        self._free: list[int] = []  # released offsets below _next
        self._used: set[int] = set()

    @property
    def capacity(self) -> int:
        return max(0, self._last - self._first + 1)

    def __len__(self) -> int:
        return len(self._used)

    def allocate(self) -> str | None:
        """The lowest free address, or None when the CIDR is exhausted."""
        while self._free:
            off = heapq.heappop(self._free)
            if off not in self._used:
                self._used.add(off)
                return self._addr(off)
        while self._next <= self._last:
            off = self._next
            self._next += 1
            if off not in self._used:
                self._used.add(off)
                return self._addr(off)
        return None

    def claim(self, ip: str) -> bool:
        """Mark `ip` used (a pod found running after a restart); False if outside the CIDR or taken."""
        off = self._offset(ip)
        if off is None or off in self._used:
            return False
        self._used.add(off)
        return True

    def release(self, ip: str) -> None:
        off = self._offset(ip)
        if off is not None and off in self._used:
            self._used.discard(off)
            if off < self._next:
                heapq.heappush(self._free, off)

    def _addr(self, off: int) -> str:
        return str(ipaddress.IPv4Address(self._base + off))

    def _offset(self, ip: str) -> int | None:
        try:
            addr = ipaddress.IPv4Address(ip)
        except ValueError:
            return None
        if addr not in self.cidr:
            return None
        off = int(addr) - self._base
        return off if self._first <= off <= self._last else None


# Pod states in the simulator's bookkeeping.
PULLING = "Pulling"  # images being pulled; a start is scheduled
STARTING = "Starting"  # the Running status is being written
RUNNING = "Running"  # Running written (or found running)
TERMINAL = "Terminal"  # Succeeded/Failed: nothing to do
TERMINATING = "Terminating"  # deletionTimestamp set: containers stopping, then the pod is deleted


@dataclass
class PodRecord:
    """One pod bound to a simulated node, as the simulator tracks it."""

    namespace: str
    name: str
    uid: str
    state: str
    observed_at: float  # wall clock, when the kubelet first saw the pod bound (its startTime)
    start_at: float = 0.0  # loop time the containers may start (images pulled)
    ip: str = ""
    images: tuple[str, ...] = ()
    finalizing: bool = False
    # The registry pull model (`nodesim.pullmodel`): images still awaited, and the earliest start
    # (manifest checks of present images with pull policy Always).
    waiting: set[str] = field(default_factory=set)
    not_before: float = 0.0
    stop_at: float | None = None  # loop time the containers have stopped (terminating pods)

    @property
    def key(self) -> str:
        return object_key(self.namespace, self.name)


@dataclass
class NodeStats:
    lease_renewals: int = 0
    lease_failures: int = 0
    status_writes: int = 0
    pods_started: int = 0


@dataclass(eq=False)
class SimNode:
    """The state of one simulated kubelet (see the module doc)."""

    spec: SimNodeSpec
    lease_duration_seconds: int = DEFAULT_LEASE_DURATION_S
    cache: ImageCache = field(init=False)
    ipam: PodIPAllocator = field(init=False)
    pods: dict[str, PodRecord] = field(default_factory=dict)
    lease: pb.Lease | None = None
    uid: str = ""
    registered_at: float = 0.0  # wall clock
    registered: bool = False
    lost: bool = False  # the Node was deleted under us: stop writing for it
    stopped: bool = False  # its kubelet is down (`NodeSimulator.stop_kubelet`): no writes at all
    beat_epoch: int = 0  # bumped when a stopped kubelet starts: older queued renewals are dropped
    kubelet_version: str = ""  # overrides the template's nodeInfo.kubeletVersion ("upgraded")
    status_dirty: bool = False
    heartbeat_failures: int = 0
    stats: NodeStats = field(default_factory=NodeStats)

    def __post_init__(self) -> None:
        self.cache = ImageCache(self.spec.images)
        self.ipam = PodIPAllocator(self.spec.pod_cidr)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def internal_ip(self) -> str:
        return self.spec.internal_ip

    # -- registration and status

    def registration(self, now: float) -> pb.Node:
        """The Node to create: the template's node with its status filled in as of `now`."""
        node = pb.Node()
        node.CopyFrom(self.spec.node)
        node.status.CopyFrom(self.node_status(now))
        return node

    def conditions(self, now: float) -> list[pb.NodeCondition]:
        beat = format_time(now)
        since = format_time(self.registered_at or now)
        rows = (
            ("MemoryPressure", "False", "KubeletHasSufficientMemory",
             "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        )
        return [
            pb.NodeCondition(
                type=t, status=s, reason=r, message=m, last_heartbeat_time=beat, last_transition_time=since
            )
            for t, s, r, m in rows
        ]

    def node_status(self, now: float) -> pb.NodeStatus:
        """The full status the kubelet posts at `now` (wall clock)."""
        base = self.spec.node.status
        status = pb.NodeStatus()
        status.capacity.update(base.capacity)
        status.allocatable.update(base.allocatable)
        status.phase = base.phase
        status.conditions.extend(self.conditions(now))
        status.addresses.extend(base.addresses)
        status.images.extend(self.cache.status_images())
        status.node_info.CopyFrom(base.node_info)
        if self.kubelet_version:
            status.node_info.kubelet_version = self.kubelet_version
        return status

    def status_update(self, now: float) -> pb.Node:
        """What to send to nodes/status: the name and the status (no resourceVersion: the status
        is the kubelet's alone, so the last write wins, as its status patches do)."""
        return pb.Node(metadata=pb.ObjectMeta(name=self.name), status=self.node_status(now))

    # -- the node lease

    def new_lease(self, now: float) -> pb.Lease:
        lease = pb.Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=pb.ObjectMeta(name=self.name, namespace=NODE_LEASE_NAMESPACE),
        )
        if self.uid:
            lease.metadata.owner_references.append(
                pb.OwnerReference(api_version="v1", kind="Node", name=self.name, uid=self.uid)
            )
        lease.spec.holder_identity = self.name
        lease.spec.lease_duration_seconds = self.lease_duration_seconds
        lease.spec.renew_time = format_micro_time(now)
        return lease

    def renewed_lease(self, now: float) -> pb.Lease:
        """The lease to write for a renewal: the last one written (its resourceVersion is the
        precondition) with a new renewTime, holder and duration."""
        lease = pb.Lease()
        if self.lease is not None:
            lease.CopyFrom(self.lease)
        else:
            lease.CopyFrom(self.new_lease(now))
        lease.spec.holder_identity = self.name
        lease.spec.lease_duration_seconds = self.lease_duration_seconds
        lease.spec.renew_time = format_micro_time(now)
        return lease

    # -- pods

    def running_status(self, pod: pb.Pod, ip: str, now: float, started_at: float) -> pb.PodStatus:
        """The status of `pod` once its containers run on this node (wall clock `now`); `started_at`
        is when the kubelet first saw it (startTime)."""
        status = pb.PodStatus()
        status.CopyFrom(pod.status)
        status.phase = "Running"
        status.reason = ""
        status.message = ""
        status.host_ip = self.internal_ip
        status.pod_ip = ip
        status.start_time = status.start_time or format_time(started_at)
        stamp = format_time(now)
        old = {c.type: c for c in pod.status.conditions}
        del status.conditions[:]
        for ctype in POD_CONDITIONS:
            prev = old.get(ctype)
            transition = prev.last_transition_time if prev is not None and prev.status == "True" else stamp
            status.conditions.append(
                pb.PodCondition(type=ctype, status="True", last_transition_time=transition or stamp)
            )
        for ctype, prev in old.items():
            if ctype not in POD_CONDITIONS:
                status.conditions.append(prev)
        del status.container_statuses[:]
        for c in pod.spec.containers:
            status.container_statuses.append(
                pb.ContainerStatus(name=c.name, image=c.image, ready=True, restart_count=0, started=True)
            )
        return status

    @staticmethod
    def stopped_status(pod: pb.Pod, now: float) -> pb.PodStatus:
        """The status of a terminating `pod` once its containers are stopped: phase kept (as the
        kubelet keeps it until the pod is gone), containers not started or ready, the Ready and
        ContainersReady conditions False (no endpoint, no disruption budget counts it)."""
        status = pb.PodStatus()
        status.CopyFrom(pod.status)
        stamp = format_time(now)
        for cond in status.conditions:
            if cond.type in ("Ready", "ContainersReady") and cond.status != "False":
                cond.status = "False"
                cond.reason = "PodCompleted"
                cond.last_transition_time = stamp
        for cs in status.container_statuses:
            cs.ready = False
            cs.started = False
        return status

    def images_of(self, pod: pb.Pod) -> tuple[str, ...]:
        return tuple(pod_images(pod))
