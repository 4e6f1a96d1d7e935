"""Node templates: turn flags (or a Kubernetes Node manifest) into N concrete, deterministic Nodes.

    fleet = FleetConfig(count=100, zones=("zone-a", "zone-b"), taints=(parse_taint("gpu=true:NoSchedule"),),
                        taint_fraction=0.1, images=parse_images("nginx=150Mi,redis=100Mi"), seed=1)
    specs = expand_fleet(fleet)          # [SimNodeSpec(name, index, node, images, pod_cidr, internal_ip)]

What a node gets, in order of precedence:

* name: `<prefix><index>`; the prefix is `--name-prefix`, else the template's `generateName`
  (scheduler_perf's templates use one), else its `name` + "-", else "nodesim-". Names are decided
  here rather than by the server's generateName so that a restarted simulator finds its nodes again.
* capacity: `--cpu/--memory/--pods/--resource` when given, else the template's capacity, else
  4 CPU, 32Gi, 110 pods (scheduler_perf's node-default). Allocatable is the template's allocatable
  with the given flags applied, or the capacity.
* labels: the template's, then what a kubelet sets: `kubernetes.io/hostname`, `kubernetes.io/os`,
  `kubernetes.io/arch`, and with `zones` the well-known `topology.kubernetes.io/zone` (round-robin
  over the zones by index) and `topology.kubernetes.io/region`.
* taints: the template's on every node; each `--taint` on exactly round(fraction * N) nodes, chosen
  by a seeded sample (so tainted nodes do not line up with zones).
* images: each image of `images` independently with probability `image_fraction`, drawn from a
  generator seeded by (seed, index), so a node's cache does not change when N does.
* network: a pod CIDR per node (from 10.128.0.0/9; a /24, or larger when max pods needs it) and an
  InternalIP (from 10.0.0.0/10), both by index, so pod IPs are unique across the fleet.

Status conditions of the template are ignored: like a kubelet, the simulator posts its own
(Ready, MemoryPressure, DiskPressure, PIDPressure).
"""

from __future__ import annotations

import ipaddress
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kse.objects.manifest import load_manifest_files
from kse.objects.quantity import QuantityError, parse_quantity, value
from nodesim.images import normalize_image
from proto import kse_pb2 as pb

DEFAULT_NAME_PREFIX = "nodesim-"
DEFAULT_CPU = "4"
DEFAULT_MEMORY = "32Gi"
DEFAULT_PODS = "110"
DEFAULT_REGION = "region-1"
DEFAULT_KUBELET_VERSION = "v1.34.0-kse"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

POD_NETWORK = ipaddress.IPv4Network("10.128.0.0/9")
NODE_NETWORK = ipaddress.IPv4Network("10.0.0.0/10")
MIN_POD_CIDR_PREFIX = 24  # at least a /24 per node, as kube-controller-manager's default


class TemplateError(ValueError):
    """A flag value or a node template that cannot be used; the message says which and why."""


# ---------------------------------------------------------------- parsing flags


def parse_taint(text: str) -> pb.Taint:
    """`KEY=VALUE:EFFECT` or `KEY:EFFECT`, as `kubectl taint` writes them."""
    spec, sep, effect = text.rpartition(":")
    if not sep or not spec:
        raise TemplateError(f"taint {text!r}: want KEY=VALUE:EFFECT or KEY:EFFECT")
    if effect not in TAINT_EFFECTS:
        raise TemplateError(f"taint {text!r}: effect must be one of {', '.join(TAINT_EFFECTS)}")
    key, _, val = spec.partition("=")
    if not key:
        raise TemplateError(f"taint {text!r}: empty key")
    return pb.Taint(key=key, value=val, effect=effect)


def parse_size(text: str, what: str = "size") -> int:
    """A byte count as a Kubernetes quantity ("150Mi", "1G", "1048576")."""
    try:
        q = parse_quantity(text)
    except QuantityError as e:
        raise TemplateError(f"{what} {text!r}: {e}") from None
    if q < 0:
        raise TemplateError(f"{what} {text!r}: must not be negative")
    return value(q)


def parse_images(text: str) -> dict[str, int]:
    """`NAME=SIZE,...` (sizes as quantities) -> {normalized name: bytes}."""
    out: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, size = item.rpartition("=")
        if not sep or not name:
            raise TemplateError(f"image {item!r}: want NAME=SIZE (e.g. nginx:1.25=150Mi)")
        out[normalize_image(name)] = parse_size(size, f"image {name} size")
    return out


def parse_resources(items: Sequence[str]) -> dict[str, str]:
    """`NAME=QUANTITY` items (extra capacity, e.g. example.com/gpu=2)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, qty = item.partition("=")
        if not sep or not name or not qty:
            raise TemplateError(f"resource {item!r}: want NAME=QUANTITY")
        try:
            parse_quantity(qty)
        except QuantityError as e:
            raise TemplateError(f"resource {item!r}: {e}") from None
        out[name] = qty
    return out


def parse_labels(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise TemplateError(f"label {item!r}: want KEY=VALUE")
        out[key] = val
    return out


def load_node_template(path: str | Path) -> pb.Node:
    """The one Node in a manifest file (YAML or JSON, as kubectl reads it)."""
    objs = load_manifest_files(path)
    nodes = [o.node for o in objs if o.WhichOneof("kind") == "node"]
    if len(nodes) != 1 or len(objs) != 1:
        kinds = [o.WhichOneof("kind") for o in objs]
        raise TemplateError(f"node template {path}: want exactly one Node, found {kinds}")
    return nodes[0]


# ---------------------------------------------------------------- expansion


@dataclass(frozen=True)
class FleetConfig:
    """What nodes to simulate. `None` capacities mean: the template's, else the defaults."""

    count: int = 100
    name_prefix: str | None = None
    first_index: int = 0
    cpu: str | None = None
    memory: str | None = None
    pods: str | None = None
    resources: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    zones: tuple[str, ...] = ()
    region: str = DEFAULT_REGION
    taints: tuple[pb.Taint, ...] = ()
    taint_fraction: float = 1.0
    images: Mapping[str, int] = field(default_factory=dict)
    image_fraction: float = 0.5
    seed: int = 0
    template: pb.Node | None = None
    kubelet_version: str = DEFAULT_KUBELET_VERSION

    def __post_init__(self) -> None:
        if self.count < 0:
            raise TemplateError(f"node count must be >= 0, got {self.count}")
        if self.first_index < 0:
            raise TemplateError(f"first index must be >= 0, got {self.first_index}")
        if not 0.0 <= self.taint_fraction <= 1.0:
            raise TemplateError(f"taint fraction must be in [0, 1], got {self.taint_fraction}")
        if not 0.0 <= self.image_fraction <= 1.0:
            raise TemplateError(f"image fraction must be in [0, 1], got {self.image_fraction}")
        for text, what in ((self.cpu, "cpu"), (self.memory, "memory"), (self.pods, "pods")):
            if text is not None:
                try:
                    parse_quantity(text)
                except QuantityError as e:
                    raise TemplateError(f"--{what} {text!r}: {e}") from None

    def prefix(self) -> str:
        if self.name_prefix is not None:
            return self.name_prefix
        t = self.template
        if t is not None and t.metadata.generate_name:
            return t.metadata.generate_name
        if t is not None and t.metadata.name:
            return t.metadata.name + "-"
        return DEFAULT_NAME_PREFIX


@dataclass
class SimNodeSpec:
    """One node to simulate: the Node to register and what the simulator needs beside it."""

    name: str
    index: int
    node: pb.Node
    images: dict[str, int]  # the initial image cache: normalized name -> bytes
    pod_cidr: ipaddress.IPv4Network
    internal_ip: str

    @property
    def max_pods(self) -> int:
        status = self.node.status
        text = status.allocatable.get("pods") or status.capacity.get("pods") or DEFAULT_PODS
        return value(parse_quantity(text))


def pod_cidr_prefix(max_pods: int) -> int:
    """The prefix length of a node's pod CIDR: a /24, or larger so that `max_pods` fit (network,
    gateway and broadcast addresses are not handed out)."""
    bits = max(32 - MIN_POD_CIDR_PREFIX, math.ceil(math.log2(max(max_pods, 1) + 3)))
    return 32 - bits


def _network_for(index: int, max_pods: int) -> ipaddress.IPv4Network:
    prefix = pod_cidr_prefix(max_pods)
    size = 1 << (32 - prefix)
    base = int(POD_NETWORK.network_address) + index * size
    if base + size > int(POD_NETWORK.broadcast_address) + 1:
        raise TemplateError(f"node index {index}: out of pod addresses in {POD_NETWORK}")
    return ipaddress.IPv4Network((base, prefix))


def _internal_ip(index: int) -> str:
    addr = int(NODE_NETWORK.network_address) + 10 + index
    if addr >= int(NODE_NETWORK.broadcast_address):
        raise TemplateError(f"node index {index}: out of node addresses in {NODE_NETWORK}")
    return str(ipaddress.IPv4Address(addr))


def _resolve_capacity(cfg: FleetConfig) -> tuple[dict[str, str], dict[str, str]]:
    t = cfg.template
    capacity: dict[str, str] = dict(t.status.capacity) if t is not None else {}
    allocatable: dict[str, str] = dict(t.status.allocatable) if t is not None else {}
    for name, default in (("cpu", DEFAULT_CPU), ("memory", DEFAULT_MEMORY), ("pods", DEFAULT_PODS)):
        capacity.setdefault(name, default)
    given = {"cpu": cfg.cpu, "memory": cfg.memory, "pods": cfg.pods, **cfg.resources}
    for name, qty in given.items():
        if qty is not None:
            capacity[name] = qty
            if allocatable:
                allocatable[name] = qty
    if not allocatable:
        allocatable = dict(capacity)
    for name, qty in capacity.items():
        allocatable.setdefault(name, qty)
    return capacity, allocatable


def tainted_indices(count: int, fraction: float, seed: int) -> set[int]:
    """Which of `count` nodes (0-based positions) get the flag taints: exactly round(fraction * count)."""
    k = round(fraction * count)
    if k >= count:
        return set(range(count))
    return set(random.Random(f"taints/{seed}").sample(range(count), k))


def image_subset(images: Mapping[str, int], fraction: float, seed: int, index: int) -> dict[str, int]:
    """The initial cache of node `index`: each image with probability `fraction`, seeded by (seed, index)."""
    rng = random.Random(f"images/{seed}/{index}")
    return {name: images[name] for name in sorted(images) if rng.random() < fraction}


def expand_fleet(cfg: FleetConfig) -> list[SimNodeSpec]:
    """The nodes of `cfg`, deterministic in (cfg, seed)."""
    prefix = cfg.prefix()
    capacity, allocatable = _resolve_capacity(cfg)
    max_pods = value(parse_quantity(allocatable.get("pods", DEFAULT_PODS)))
    tainted = tainted_indices(cfg.count, cfg.taint_fraction, cfg.seed) if cfg.taints else set()
    t = cfg.template
    out: list[SimNodeSpec] = []
    for pos in range(cfg.count):
        index = cfg.first_index + pos
        name = f"{prefix}{index}"
        node = pb.Node(api_version="v1", kind="Node")
        if t is not None:
            node.metadata.labels.update(t.metadata.labels)
            node.metadata.annotations.update(t.metadata.annotations)
            node.spec.CopyFrom(t.spec)
            node.status.phase = t.status.phase
        node.metadata.name = name
        labels = node.metadata.labels
        labels.update(cfg.labels)
        labels[LABEL_HOSTNAME] = name
        labels[LABEL_OS] = "linux"
        labels[LABEL_ARCH] = "amd64"
        if cfg.zones:
            labels[LABEL_ZONE] = cfg.zones[pos % len(cfg.zones)]
            labels[LABEL_REGION] = cfg.region
        if pos in tainted:
            node.spec.taints.extend(cfg.taints)
        cidr = _network_for(index, max_pods)
        ip = _internal_ip(index)
        node.spec.pod_cidr = str(cidr)
        node.spec.provider_id = f"kse://nodesim/{name}"
        node.status.capacity.update(capacity)
        node.status.allocatable.update(allocatable)
        node.status.addresses.extend(
            [pb.NodeAddress(type="InternalIP", address=ip), pb.NodeAddress(type="Hostname", address=name)]
        )
        node.status.node_info.CopyFrom(
            pb.NodeSystemInfo(
                machine_id=f"{index:032x}",
                kernel_version="6.1.0-kse",
                os_image="kse nodesim",
                container_runtime_version="kse://1.0.0",
                kubelet_version=cfg.kubelet_version,
                operating_system="linux",
                architecture="amd64",
            )
        )
        images = image_subset(cfg.images, cfg.image_fraction, cfg.seed, index)
        out.append(SimNodeSpec(name, index, node, images, cidr, ip))
    return out
