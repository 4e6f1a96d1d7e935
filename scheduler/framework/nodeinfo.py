"""NodeInfo and Snapshot: the node-level aggregates the plugins read.

Mirrors upstream `pkg/scheduler/framework/types.go` (NodeInfo, Resource, HostPortInfo, PodInfo's
CalculateResource) and `pkg/scheduler/backend/cache/snapshot.go` (Snapshot, image states).

Performance notes (the scheduler evaluates one pod against thousands of nodes):
  * Everything derived from a pod (requests, non-zero requests, host ports) is computed once and
    cached on its PodInfo (see types.PodInfo); NodeInfo.add_pod / remove_pod only add numbers.
  * Everything derived from a node that plugins read per cycle (labels, taints, allocatable) is
    computed once in `set_node`.
  * `Snapshot.arrays()` exposes the hot resource fields (and per-node flags: cordoned, hard and
    soft taints, images) as numpy arrays indexed like `node_info_list`, for the batch
    Filter/Score methods of the plugins. The cache keeps them in step with
    `Snapshot.refresh(index)` after it changes a NodeInfo in place, or `rebuild()` after adding
    or removing nodes.
"""

from __future__ import annotations

import builtins
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

import numpy as np
import numpy.typing as npt

from kse.objects.meta import uid_key
from kse.objects.podresources import (
    is_pod_level_requests_set,
    pod_host_ports,
    pod_requests,
    resource_list_units,
)
from proto import kse_pb2 as pb
from scheduler.framework.types import PodInfo

if TYPE_CHECKING:
    from scheduler.framework.interface import NodeInfoLister

# ----------------------------------------------------------------------------- resource names

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

# Upstream pkg/scheduler/util/pod_resources.go: the requests assumed for a container that sets
# none, so that many zero-request pods are not piled onto one node by the scoring plugins.
DEFAULT_MILLI_CPU_REQUEST = 100  # 0.1 core
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # 200 MiB
_DEFAULT_REQUEST_QUANTITIES = {CPU: "100m", MEMORY: "200Mi"}

_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _is_qualified_name(name: str) -> bool:
    prefix, slash, rest = name.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(rest) <= 63 and bool(_QUALIFIED_NAME.match(rest))


def is_prefixed_native_resource(name: str) -> bool:
    return _DEFAULT_NAMESPACE_PREFIX in name


def is_native_resource(name: str) -> bool:
    return "/" not in name or is_prefixed_native_resource(name)


def is_extended_resource_name(name: str) -> bool:
    """Upstream v1helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return _is_qualified_name("requests." + name)


def is_hugepage_resource_name(name: str) -> bool:
    return name.startswith("hugepages-")


def is_scalar_resource_name(name: str) -> bool:
    """Upstream schedutil.IsScalarResourceName: resources tracked in Resource.scalar_resources."""
    return (
        is_extended_resource_name(name)
        or is_hugepage_resource_name(name)
        or is_prefixed_native_resource(name)
        or name.startswith("attachable-volumes-")
    )


# ----------------------------------------------------------------------------- Resource


@dataclass(slots=True)
class Resource:
    """A collection of compute resources (upstream framework.Resource)."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pod_number: int = 0
    scalar_resources: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_list(cls, amounts: dict[str, int]) -> Resource:
        """From an already-parsed resource list (cpu in millicores, others in units)."""
        r = cls()
        r.add(amounts)
        return r

    @classmethod
    def from_quantities(cls, quantities: Mapping[str, str]) -> Resource:
        """From a resource list of quantity strings, e.g. a node's status.allocatable."""
        r = cls()
        r.add(resource_list_units(quantities))
        return r

    def add(self, amounts: dict[str, int]) -> None:
        """Upstream Resource.Add: sums a parsed resource list into this Resource."""
        for name, amount in amounts.items():
            if name == CPU:
                self.milli_cpu += amount
            elif name == MEMORY:
                self.memory += amount
            elif name == PODS:
                self.allowed_pod_number += amount
            elif name == EPHEMERAL_STORAGE:
                self.ephemeral_storage += amount
            elif is_scalar_resource_name(name):
                self.scalar_resources[name] = self.scalar_resources.get(name, 0) + amount

    def add_scaled(self, other: Resource, sign: int) -> None:
        """Add (`sign` 1) or take away (-1) another Resource's cpu, memory, ephemeral storage
        and scalars: what a pod's requests do to its node's (not the pod count)."""
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        if other.scalar_resources:
            scalars = self.scalar_resources
            for name, amount in other.scalar_resources.items():
                scalars[name] = scalars.get(name, 0) + sign * amount

    def clone(self) -> Resource:
        return Resource(
            self.milli_cpu,
            self.memory,
            self.ephemeral_storage,
            self.allowed_pod_number,
            dict(self.scalar_resources),
        )

    def is_zero_request(self) -> bool:
        """No cpu, memory, ephemeral storage and no scalar entry at all (upstream fitsRequest's
        early return: an explicit zero scalar request still counts as an entry)."""
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or self.scalar_resources)


@dataclass(frozen=True, slots=True)
class PodResource:
    """What one pod adds to a node (upstream fwk.PodResource): its requests, and cpu/memory with
    the non-zero defaults applied."""

    resource: Resource
    non0_cpu: int
    non0_mem: int


@dataclass(frozen=True, slots=True)
class ImageStateSummary:
    """An image on a node: its size and on how many nodes of the cluster it is."""

    size: int
    num_nodes: int


# ----------------------------------------------------------------------------- per-pod derivation


def pod_requests_of(pod: pb.Pod) -> dict[str, int]:
    """The pod's effective requests, upstream resourcehelper.PodRequests (containers summed,
    init containers as a max, sidecars, pod-level resources, overhead)."""
    return pod_requests(pod)


def _with_default_requests(pod: pb.Pod, names: Iterable[str]) -> pb.Pod:
    """A copy of the pod in which every (init) container that sets no request for one of `names`
    requests the non-zero default: upstream's PodResourcesOptions.NonMissingContainerRequests."""
    copy = pb.Pod()
    copy.CopyFrom(pod)
    for container in itertools.chain(copy.spec.init_containers, copy.spec.containers):
        requests, limits = container.resources.requests, container.resources.limits
        for name in names:
            # A limit without a request is the request after API defaulting (pod_requests
            # applies that rule), so such a container is not missing the request.
            if name not in requests and name not in limits:
                requests[name] = _DEFAULT_REQUEST_QUANTITIES[name]
    return copy


def _missing_requests(pod: pb.Pod, names: Iterable[str]) -> bool:
    """Whether some (init) container sets neither a request nor a limit for one of `names`."""
    for container in itertools.chain(pod.spec.init_containers, pod.spec.containers):
        requests, limits = container.resources.requests, container.resources.limits
        for name in names:
            if name not in requests and name not in limits:
                return True
    return False


def non_zero_pod_requests_of(pod: pb.Pod, requests: dict[str, int] | None = None) -> dict[str, int]:
    """Requests with the non-zero cpu/memory defaults for containers that set none, as the
    scoring plugins compute them (upstream resourceAllocationScorer.calculatePodResourceRequest
    with useRequested=false). `requests`, the pod's plain requests if already known, is returned
    as is when no container misses a default (the common case: no copy of the pod then)."""
    if not _missing_requests(pod, (CPU, MEMORY)):
        return requests if requests is not None else pod_requests_of(pod)
    return pod_requests_of(_with_default_requests(pod, (CPU, MEMORY)))


def pod_resource_of(pod_info: PodInfo) -> PodResource:
    """Upstream PodInfo.CalculateResource: requests plus the non-zero cpu/memory. With pod-level
    requests set, the defaults apply only to a resource missing at both levels
    (upstream getNonMissingContainerRequests)."""
    requests = pod_info.requests
    resource = Resource()
    resource.add(requests)
    if is_pod_level_requests_set(pod_info.pod):
        missing = [name for name in (CPU, MEMORY) if name not in requests]
        non0 = pod_requests_of(_with_default_requests(pod_info.pod, missing)) if missing else requests
    else:
        non0 = pod_info.non_zero_requests
    return PodResource(resource, non0.get(CPU, 0), non0.get(MEMORY, 0))


def pod_host_ports_of(pod: pb.Pod) -> tuple[tuple[str, str, int], ...]:
    """Host ports the pod uses while running (containers and sidecars), sanitized
    (upstream schedutil.GetHostPorts)."""
    return tuple(pod_host_ports(pod))


# ----------------------------------------------------------------------------- HostPortInfo

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"


class HostPortInfo(dict[str, set[tuple[str, int]]]):
    """Used host ports of a node: hostIP -> {(protocol, port)} (upstream fwk.HostPortInfo)."""

    @staticmethod
    def _sanitize(ip: str, protocol: str) -> tuple[str, str]:
        return ip or DEFAULT_BIND_ALL_HOST_IP, protocol or DEFAULT_PROTOCOL

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = self._sanitize(ip, protocol)
        self.setdefault(ip, set()).add((protocol, port))

    def remove(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = self._sanitize(ip, protocol)
        ports = self.get(ip)
        if ports is not None:
            ports.discard((protocol, port))
            if not ports:
                del self[ip]

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        """Whether (ip, protocol, port) is already used: 0.0.0.0 conflicts with every IP."""
        if port <= 0:
            return False
        ip, protocol = self._sanitize(ip, protocol)
        pp = (protocol, port)
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            return any(pp in ports for ports in self.values())
        for key in (DEFAULT_BIND_ALL_HOST_IP, ip):
            ports = self.get(key)
            if ports is not None and pp in ports:
                return True
        return False

    def copy(self) -> HostPortInfo:  # type: ignore[override]
        clone = HostPortInfo()
        for ip, ports in self.items():
            clone[ip] = set(ports)
        return clone


# ----------------------------------------------------------------------------- NodeInfo

_generation = itertools.count(1)


def next_generation() -> int:
    """A process-wide increasing number: bumped on every NodeInfo change (upstream
    nextGeneration), so the cache can tell which NodeInfos a snapshot must copy."""
    return next(_generation)


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint, parsed once per node."""

    key: str
    value: str
    effect: str


class NodeInfo:
    """Node-level aggregated information (upstream framework.NodeInfo)."""

    __slots__ = (
        "_pod_index",
        "allocatable",
        "generation",
        "image_states",
        "labels",
        "name",
        "node",
        "non_zero_requested",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "taints",
        "unschedulable",
        "used_ports",
    )

    def __init__(self, *pods: pb.Pod | PodInfo) -> None:
        self.node: pb.Node | None = None
        self.name = ""
        self.labels: dict[str, str] = {}
        self.taints: tuple[Taint, ...] = ()
        self.unschedulable = False
        self.pods: list[PodInfo] = []
        self.pods_with_affinity: list[PodInfo] = []
        self.pods_with_required_anti_affinity: list[PodInfo] = []
        self.used_ports = HostPortInfo()
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.allocatable = Resource()
        self.image_states: dict[str, ImageStateSummary] = {}
        self.generation = next_generation()
        # uid key -> PodInfo; None on a clone until first needed (a snapshot's copy of a node
        # with thousands of pods is made every cycle that node changes, and rarely asked)
        self._pod_index: dict[str, PodInfo] | None = {}
        for pod in pods:
            self.add_pod(pod)

    def __repr__(self) -> str:
        return (
            f"NodeInfo(name={self.name!r}, pods={[p.key for p in self.pods]}, "
            f"requested={self.requested}, allocatable={self.allocatable})"
        )

    # -- node

    def set_node(self, node: pb.Node) -> None:
        """Upstream SetNode: records the node and its allocatable, and caches what plugins read
        on every cycle. Image states are set by the cache/snapshot (they need all nodes)."""
        self.node = node
        self.name = node.metadata.name
        self.labels = dict(node.metadata.labels)
        self.taints = tuple(Taint(t.key, t.value, t.effect) for t in node.spec.taints)
        self.unschedulable = node.spec.unschedulable
        self.allocatable = Resource.from_quantities(node.status.allocatable)
        self.generation = next_generation()

    def remove_node(self) -> None:
        self.node = None
        self.generation = next_generation()

    # -- pods

    def add_pod(self, pod: pb.Pod | PodInfo) -> PodInfo:
        """Upstream AddPodInfo / AddPod. Returns the PodInfo that was added."""
        pod_info = pod if isinstance(pod, PodInfo) else PodInfo(pod)
        self.pods.append(pod_info)
        self._index()[pod_info.uid_key] = pod_info
        if pod_info.has_affinity:
            self.pods_with_affinity.append(pod_info)
        if pod_info.has_required_anti_affinity:
            self.pods_with_required_anti_affinity.append(pod_info)
        self._update(pod_info, 1)
        return pod_info

    def remove_pod(self, pod: pb.Pod | PodInfo) -> PodInfo:
        """Upstream RemovePod: pods are identified by UID (namespace/name when the UID is
        empty). Raises KeyError when the pod is not on this node."""
        key = pod.uid_key if isinstance(pod, PodInfo) else uid_key(pod)
        removed = self._index().pop(key, None)
        if removed is None:
            name = pod.pod.metadata.name if isinstance(pod, PodInfo) else pod.metadata.name
            raise KeyError(f"no corresponding pod {name} in pods of node {self.name}")
        _remove(self.pods, removed)
        if removed.has_affinity:
            _remove(self.pods_with_affinity, removed)
        if removed.has_required_anti_affinity:
            _remove(self.pods_with_required_anti_affinity, removed)
        self._update(removed, -1)
        return removed

    def _update(self, pod_info: PodInfo, sign: int) -> None:
        res = pod_info.resource
        self.requested.add_scaled(res.resource, sign)
        self.non_zero_requested.milli_cpu += sign * res.non0_cpu
        self.non_zero_requested.memory += sign * res.non0_mem
        for ip, protocol, port in pod_info.host_ports:
            if sign > 0:
                self.used_ports.add(ip, protocol, port)
            else:
                self.used_ports.remove(ip, protocol, port)
        self.generation = next_generation()

    def has_pod(self, pod: pb.Pod | PodInfo) -> bool:
        key = pod.uid_key if isinstance(pod, PodInfo) else uid_key(pod)
        return key in self._index()

    def _index(self) -> dict[str, PodInfo]:
        index = self._pod_index
        if index is None:
            index = self._pod_index = {p.uid_key: p for p in self.pods}
        return index

    # -- copies

    def clone(self) -> NodeInfo:
        """A copy that can be changed without affecting this one (upstream Snapshot()). Pods are
        shared (PodInfos are immutable); the node, labels and taints are shared too."""
        c = NodeInfo.__new__(NodeInfo)
        c.node = self.node
        c.name = self.name
        c.labels = self.labels
        c.taints = self.taints
        c.unschedulable = self.unschedulable
        c.pods = list(self.pods)
        c.pods_with_affinity = list(self.pods_with_affinity)
        c.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        c.used_ports = self.used_ports.copy()
        c.requested = self.requested.clone()
        c.non_zero_requested = self.non_zero_requested.clone()
        c.allocatable = self.allocatable.clone()
        c.image_states = dict(self.image_states)
        c.generation = self.generation
        c._pod_index = None  # built from `pods` if the copy is ever asked
        return c


def _remove(pods: list[PodInfo], removed: PodInfo) -> None:
    """Take `removed` (by identity) out of `pods`, in place, keeping the order (upstream swaps
    the last element into the hole; the order kept makes iteration deterministic). The pod
    removed is most often among the last added (an assumed pod confirmed by its informer
    event), so look there first; else find it at C speed by id (PodInfo's dataclass `==` would
    compare fields)."""
    n = len(pods)
    for i in range(n - 1, max(n - 33, -1), -1):
        if pods[i] is removed:
            del pods[i]
            return
    del pods[list(map(id, pods)).index(id(removed))]


# ----------------------------------------------------------------------------- image states


def image_existence_map(nodes: Iterable[pb.Node]) -> dict[str, set[str]]:
    """Image name -> names of the nodes that have it (upstream createImageExistenceMap)."""
    existence: dict[str, set[str]] = {}
    for node in nodes:
        for image in node.status.images:
            for name in image.names:
                existence.setdefault(name, set()).add(node.metadata.name)
    return existence


def node_image_states(node: pb.Node, existence: dict[str, set[str]]) -> dict[str, ImageStateSummary]:
    """The image states of one node (upstream getNodeImageStates): every name of every image,
    with the number of nodes that have that name."""
    states: dict[str, ImageStateSummary] = {}
    for image in node.status.images:
        for name in image.names:
            states[name] = ImageStateSummary(image.size_bytes, len(existence.get(name, ())))
    return states


# ----------------------------------------------------------------------------- Snapshot


_HARD_TAINT_EFFECTS = ("NoSchedule", "NoExecute")
_SOFT_TAINT_EFFECT = "PreferNoSchedule"


class ResourceArrays:
    """The hot per-node fields of a snapshot as numpy arrays, indexed like
    `Snapshot.node_info_list`: allocatable / requested / non-zero requested resources and the
    pod count, plus flags that let batch filters and scorers skip most nodes (cordoned, has
    NoSchedule/NoExecute taints, has PreferNoSchedule taints, has images). Scalar (extended)
    resources get their arrays on first use."""

    __slots__ = (
        "_node_infos",
        "_scalars",
        "alloc_ephemeral_storage",
        "alloc_memory",
        "alloc_milli_cpu",
        "allowed_pod_number",
        "generation",
        "hard_taints",
        "has_images",
        "nz_memory",
        "nz_milli_cpu",
        "pod_count",
        "req_ephemeral_storage",
        "req_memory",
        "req_milli_cpu",
        "soft_taints",
        "unschedulable",
    )

    def __init__(self, node_infos: Sequence[NodeInfo]) -> None:
        n = len(node_infos)
        self._node_infos = node_infos
        arr = np.empty((10, n), dtype=np.int64)
        flags = np.zeros((4, n), dtype=bool)
        for i, ni in enumerate(node_infos):
            a, r, z = ni.allocatable, ni.requested, ni.non_zero_requested
            arr[:, i] = (
                a.milli_cpu,
                a.memory,
                a.ephemeral_storage,
                a.allowed_pod_number,
                r.milli_cpu,
                r.memory,
                r.ephemeral_storage,
                z.milli_cpu,
                z.memory,
                len(ni.pods),
            )
            flags[:, i] = _node_flags(ni)
        (
            self.alloc_milli_cpu,
            self.alloc_memory,
            self.alloc_ephemeral_storage,
            self.allowed_pod_number,
            self.req_milli_cpu,
            self.req_memory,
            self.req_ephemeral_storage,
            self.nz_milli_cpu,
            self.nz_memory,
            self.pod_count,
        ) = (arr[k].copy() for k in range(10))
        self.unschedulable, self.hard_taints, self.soft_taints, self.has_images = (
            flags[k].copy() for k in range(4)
        )
        # Each NodeInfo's generation: which nodes changed since a cycle (`Aggregate` in
        # InterPodAffinity) without looking at every NodeInfo.
        self.generation = np.fromiter((ni.generation for ni in node_infos), dtype=np.int64, count=n)
        self._scalars: dict[
            str, tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.int64]]
        ] = {}

    def scalar(self, name: str) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(present, allocatable, requested) of a scalar resource; `present` tells whether the
        node's allocatable lists the resource at all (0 where absent)."""
        got = self._scalars.get(name)
        if got is None:
            infos = self._node_infos
            present = np.fromiter((name in ni.allocatable.scalar_resources for ni in infos), bool, len(infos))
            alloc = np.fromiter(
                (ni.allocatable.scalar_resources.get(name, 0) for ni in infos), np.int64, len(infos)
            )
            req = np.fromiter(
                (ni.requested.scalar_resources.get(name, 0) for ni in infos), np.int64, len(infos)
            )
            got = self._scalars[name] = (present, alloc, req)
        return got

    def refresh(self, index: int) -> None:
        """Re-read row `index` from its NodeInfo (after the cache changed it in place)."""
        ni = self._node_infos[index]
        a, r, z = ni.allocatable, ni.requested, ni.non_zero_requested
        self.alloc_milli_cpu[index] = a.milli_cpu
        self.alloc_memory[index] = a.memory
        self.alloc_ephemeral_storage[index] = a.ephemeral_storage
        self.allowed_pod_number[index] = a.allowed_pod_number
        self.req_milli_cpu[index] = r.milli_cpu
        self.req_memory[index] = r.memory
        self.req_ephemeral_storage[index] = r.ephemeral_storage
        self.nz_milli_cpu[index] = z.milli_cpu
        self.nz_memory[index] = z.memory
        self.pod_count[index] = len(ni.pods)
        self.generation[index] = ni.generation
        (
            self.unschedulable[index],
            self.hard_taints[index],
            self.soft_taints[index],
            self.has_images[index],
        ) = _node_flags(ni)
        for name, (present, alloc, req) in self._scalars.items():
            present[index] = name in a.scalar_resources
            alloc[index] = a.scalar_resources.get(name, 0)
            req[index] = r.scalar_resources.get(name, 0)


def _node_flags(ni: NodeInfo) -> tuple[bool, bool, bool, bool]:
    return (
        ni.unschedulable,
        any(t.effect in _HARD_TAINT_EFFECTS for t in ni.taints),
        any(t.effect == _SOFT_TAINT_EFFECT for t in ni.taints),
        bool(ni.image_states),
    )


class Snapshot:
    """A consistent view of the cluster for one scheduling cycle (upstream cache.Snapshot):
    the NodeInfos of all nodes in a fixed order, by name, the nodes with (anti-)affinity pods,
    and which nodes have which image. It is both the SharedLister and the NodeInfoLister plugins
    see through the FrameworkHandle.

    The cache owns it and updates it between cycles: replace or change NodeInfos in place, then
    call `refresh(index)` for changed rows (or `rebuild()` after adding/removing nodes).
    """

    def __init__(
        self,
        node_infos: Sequence[NodeInfo] = (),
        image_existence: dict[str, set[str]] | None = None,
        generation: int = 0,
    ) -> None:
        self.node_info_list: list[NodeInfo] = list(node_infos)
        self.image_existence_map: dict[str, set[str]] = image_existence if image_existence is not None else {}
        self.generation = generation
        self.node_info_map: dict[str, NodeInfo] = {}
        self.have_pods_with_affinity_node_info_list: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity_node_info_list: list[NodeInfo] = []
        self._index: dict[str, int] = {}
        self._arrays: ResourceArrays | None = None
        self.rebuild()

    @classmethod
    def from_objects(cls, pods: Iterable[pb.Pod], nodes: Sequence[pb.Node]) -> Snapshot:
        """Build a snapshot from pods and nodes (upstream cache.NewSnapshot): pods count on the
        node named in spec.nodeName; pods on nodes not in `nodes` are left out, as the cache does."""
        existence = image_existence_map(nodes)
        infos: dict[str, NodeInfo] = {}
        for node in nodes:
            ni = NodeInfo()
            ni.set_node(node)
            ni.image_states = node_image_states(node, existence)
            infos[node.metadata.name] = ni
        for pod in pods:
            ni_for_pod = infos.get(pod.spec.node_name)
            if ni_for_pod is not None:
                ni_for_pod.add_pod(pod)
        return cls(list(infos.values()), existence)

    def rebuild(self) -> None:
        """Recompute the name index, the affinity lists and drop the arrays."""
        self.node_info_map = {ni.name: ni for ni in self.node_info_list}
        self._index = {ni.name: i for i, ni in enumerate(self.node_info_list)}
        self.have_pods_with_affinity_node_info_list = [
            ni for ni in self.node_info_list if ni.pods_with_affinity
        ]
        self.have_pods_with_required_anti_affinity_node_info_list = [
            ni for ni in self.node_info_list if ni.pods_with_required_anti_affinity
        ]
        self._arrays = None

    def refresh(self, index: int) -> None:
        """The NodeInfo at `index` changed (pods added/removed, node updated): update the
        arrays and the affinity lists."""
        if self._arrays is not None:
            self._arrays.refresh(index)
        ni = self.node_info_list[index]
        for lst, has in (
            (self.have_pods_with_affinity_node_info_list, bool(ni.pods_with_affinity)),
            (
                self.have_pods_with_required_anti_affinity_node_info_list,
                bool(ni.pods_with_required_anti_affinity),
            ),
        ):
            listed = ni in lst  # NodeInfo has no __eq__: identity, at C speed
            if has and not listed:
                lst.append(ni)
            elif listed and not has:
                lst[:] = [x for x in lst if x is not ni]

    def arrays(self) -> ResourceArrays:
        if self._arrays is None:
            self._arrays = ResourceArrays(self.node_info_list)
        return self._arrays

    def index_of(self, node_name: str) -> int:
        return self._index[node_name]

    # -- SharedLister / NodeInfoLister

    def node_infos(self) -> NodeInfoLister:
        return self

    def list(self) -> builtins.list[NodeInfo]:
        return self.node_info_list

    def have_pods_with_affinity_list(self) -> builtins.list[NodeInfo]:
        return self.have_pods_with_affinity_node_info_list

    def have_pods_with_required_anti_affinity_list(self) -> builtins.list[NodeInfo]:
        return self.have_pods_with_required_anti_affinity_node_info_list

    def get(self, node_name: str) -> NodeInfo:
        ni = self.node_info_map.get(node_name)
        if ni is None or ni.node is None:
            raise KeyError(f'nodeinfo not found for node name "{node_name}"')
        return ni

    def num_nodes(self) -> int:
        return len(self.node_info_list)


class NodeInfoView(Sequence[NodeInfo]):
    """A read-only sequence of the NodeInfos at `indices` of a snapshot, without copying them
    out (the nodes PreScore plugins receive)."""

    __slots__ = ("_indices", "_infos")

    def __init__(self, infos: Sequence[NodeInfo], indices: Sequence[int]) -> None:
        self._infos = infos
        self._indices = indices

    def indices_into(self, infos: Sequence[NodeInfo]) -> Sequence[int] | None:
        """The indices of these nodes in `infos` when the view is over that very list (a
        plugin that keeps arrays over the snapshot reads them there), else None."""
        return self._indices if infos is self._infos else None

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[NodeInfo]: ...

    def __getitem__(self, i: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        if isinstance(i, slice):
            return [self._infos[j] for j in self._indices[i]]
        return self._infos[self._indices[i]]

    def __iter__(self) -> Iterator[NodeInfo]:
        infos = self._infos
        return (infos[j] for j in self._indices)
