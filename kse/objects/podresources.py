"""What a pod asks of a node: effective requests and limits, and host ports.

The arithmetic is upstream's `k8s.io/component-helpers/resource/helpers.go` (`PodRequests`,
`PodLimits`, `AggregateContainerRequests`), the numbers kube-scheduler's NodeResourcesFit uses:

* app containers are summed;
* init containers run one at a time, so each needs `its own + the sidecars started before it`;
  the pod needs the max of that over the init sequence, or the app-container total (which already
  includes every sidecar: restartable init containers, restartPolicy Always, keep running);
* pod-level `spec.resources` (KEP-2837), when it names a supported resource (cpu, memory,
  hugepages-*), replaces the aggregate for those resources;
* `spec.overhead` is added to requests, and to limits only where a non-zero limit exists.

Like the scheduler, we see pods *after* the API server's defaulting (`SetDefaults_Pod`); since kse
objects may not have been through it, `apply_defaults=True` applies the same rules on the fly
(a container limit without a request is also its request; pod-level requests default from the
containers' aggregate or from pod-level limits; hugepages pod limits default from containers).
Applying them to an already defaulted pod changes nothing. Status-based (in-place resize) and DRA
inputs are not modelled: the API has no `status.containerStatuses[].resources` yet.

Results are `dict[str, int]` in the scheduler's units: cpu in millicores (MilliValue), every other
resource as its integer value (Value: bytes, counts), both rounded up. Sums are exact (integer
nanos) and converted once at the end, as upstream adds Quantities and converts the total.
Pure functions over the proto: the scheduler calls them once per pod and caches the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kse.objects.quantity import nano_value
from proto import kse_pb2 as pb

__all__ = [
    "DEFAULT_BIND_ALL_HOST_IP",
    "HostPort",
    "is_pod_level_requests_set",
    "is_pod_level_resources_set",
    "is_restartable_init_container",
    "is_supported_pod_level_resource",
    "pod_host_ports",
    "pod_limits",
    "pod_requests",
    "resource_list_units",
    "to_units",
]

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
HostPort = tuple[str, str, int]  # (host IP, protocol, host port)

_NANO = 10**9
_MILLI_IN_NANOS = 10**6
_HUGEPAGES_PREFIX = "hugepages-"

Nanos = dict[str, int]


def is_supported_pod_level_resource(name: str) -> bool:
    """cpu, memory and hugepages-* can be set at pod level (IsSupportedPodLevelResource)."""
    return name in ("cpu", "memory") or name.startswith(_HUGEPAGES_PREFIX)


def _is_overcommit_allowed(name: str) -> bool:
    # corev1 helper IsOvercommitAllowed: native resources except hugepages.
    native = "/" not in name or name.startswith("kubernetes.io/")
    return native and not name.startswith(_HUGEPAGES_PREFIX)


def is_restartable_init_container(container: pb.Container) -> bool:
    """An init container with restartPolicy Always is a sidecar: it keeps running."""
    return container.restart_policy == "Always"


def _any_supported(names: Iterable[str]) -> bool:
    return any(is_supported_pod_level_resource(n) for n in names)


def is_pod_level_resources_set(pod: pb.Pod) -> bool:
    """Whether spec.resources requests or limits name a supported pod-level resource."""
    res = pod.spec.resources
    return _any_supported(res.requests) or _any_supported(res.limits)


def is_pod_level_requests_set(pod: pb.Pod) -> bool:
    """Whether spec.resources.requests names a supported pod-level resource."""
    return _any_supported(pod.spec.resources.requests)


def _nanos_of(rl: Mapping[str, str]) -> Nanos:
    return {name: nano_value(q) for name, q in rl.items()}


def _add(into: Nanos, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max_into(into: Nanos, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if name not in into or amount > into[name]:
            into[name] = amount


def _container_requests(c: pb.Container, apply_defaults: bool) -> Nanos:
    reqs = _nanos_of(c.resources.requests)
    if apply_defaults:
        for name, q in c.resources.limits.items():
            if name not in reqs:
                reqs[name] = nano_value(q)
    return reqs


def _container_limits(c: pb.Container, _apply_defaults: bool) -> Nanos:
    return _nanos_of(c.resources.limits)


def _aggregate(pod: pb.Pod, get: Callable[[pb.Container, bool], Nanos], apply_defaults: bool) -> Nanos:
    """Containers summed, then max'ed with the init sequence (aggregateContainerResourcesByFn)."""
    result: Nanos = {}
    for c in pod.spec.containers:
        _add(result, get(c, apply_defaults))
    sidecars: Nanos = {}
    init_peak: Nanos = {}
    for c in pod.spec.init_containers:
        own = get(c, apply_defaults)
        if is_restartable_init_container(c):
            _add(result, own)  # a sidecar keeps running beside the app containers
            _add(sidecars, own)
            during = dict(sidecars)
        else:
            during = dict(own)
            _add(during, sidecars)  # runs alone, next to the sidecars started before it
        _max_into(init_peak, during)
    _max_into(result, init_peak)
    return result


def _effective_pod_level(pod: pb.Pod, apply_defaults: bool) -> tuple[Nanos, Nanos]:
    """Pod-level (requests, limits) after SetDefaults_Pod's pod-level rules, if asked for."""
    res = pod.spec.resources
    reqs = _nanos_of(res.requests)
    lims = _nanos_of(res.limits)
    if not apply_defaults or (not reqs and not lims):
        return reqs, lims
    # defaultHugePagePodLimits: container hugepages limits become the pod limit, unless the pod
    # already sets a hugepages request or limit for that size.
    ctr_lims = _aggregate(pod, _container_limits, True)
    for name, amount in ctr_lims.items():
        if name.startswith(_HUGEPAGES_PREFIX) and name not in reqs and name not in lims:
            lims[name] = amount
    # defaultPodRequests (only when pod-level limits exist): overcommittable resources take the
    # containers' aggregate, then anything still missing takes the pod-level limit.
    if lims:
        ctr_reqs = _aggregate(pod, _container_requests, True)
        for name, amount in ctr_reqs.items():
            if name not in reqs and is_supported_pod_level_resource(name) and _is_overcommit_allowed(name):
                reqs[name] = amount
        for name, amount in lims.items():
            if name not in reqs and is_supported_pod_level_resource(name):
                reqs[name] = amount
    return reqs, lims


def to_units(name: str, nanos: int) -> int:
    """Scheduler units for an amount in nanos: millicores for cpu, the value rounded up otherwise."""
    unit = _MILLI_IN_NANOS if name == "cpu" else _NANO
    whole = -(-abs(nanos) // unit)
    return -whole if nanos < 0 else whole


def resource_list_units(rl: Mapping[str, str]) -> dict[str, int]:
    """A resource list (node allocatable/capacity, a container's requests) in scheduler units."""
    return {name: to_units(name, nano_value(q)) for name, q in rl.items()}


def pod_requests(
    pod: pb.Pod, *, exclude_overhead: bool = False, apply_defaults: bool = True
) -> dict[str, int]:
    """The pod's effective requests as PodRequests computes them, in scheduler units.

    Raises QuantityError if the pod carries a malformed quantity (validation should prevent it).
    """
    total = _aggregate(pod, _container_requests, apply_defaults)
    pod_reqs, _ = _effective_pod_level(pod, apply_defaults)
    if _any_supported(pod_reqs):
        for name, amount in pod_reqs.items():
            if is_supported_pod_level_resource(name):
                total[name] = amount
    if not exclude_overhead:
        _add(total, _nanos_of(pod.spec.overhead))
    return {name: to_units(name, amount) for name, amount in total.items()}


def pod_limits(pod: pb.Pod, *, exclude_overhead: bool = False, apply_defaults: bool = True) -> dict[str, int]:
    """The pod's effective limits as PodLimits computes them, in scheduler units.

    Overhead is added only to resources that have a non-zero limit (no limit means unbounded).
    """
    total = _aggregate(pod, _container_limits, apply_defaults)
    pod_reqs, pod_lims = _effective_pod_level(pod, apply_defaults)
    if _any_supported(pod_reqs) or _any_supported(pod_lims):
        for name, amount in pod_lims.items():
            if is_supported_pod_level_resource(name):
                total[name] = amount
    if not exclude_overhead:
        for name, amount in _nanos_of(pod.spec.overhead).items():
            if total.get(name, 0) != 0:
                total[name] += amount
    return {name: to_units(name, amount) for name, amount in total.items()}


def pod_host_ports(pod: pb.Pod) -> list[HostPort]:
    """The (hostIP, protocol, hostPort) triples the pod claims on its node, as NodePorts reads them.

    Ports of app containers and of sidecars (restartable init containers, kubernetes#132040) with
    hostPort > 0; the IP defaults to 0.0.0.0 and the protocol to TCP (HostPortInfo's sanitize).
    With hostNetwork, a port without hostPort claims its containerPort (SetDefaults_Pod).
    """
    host_network = pod.spec.host_network
    out: list[HostPort] = []
    containers = list(pod.spec.containers)
    containers.extend(c for c in pod.spec.init_containers if is_restartable_init_container(c))
    for c in containers:
        for port in c.ports:
            host_port = port.host_port
            if host_port == 0 and host_network:
                host_port = port.container_port
            if host_port <= 0:
                continue
            out.append((port.host_ip or DEFAULT_BIND_ALL_HOST_IP, port.protocol or "TCP", host_port))
    return out
