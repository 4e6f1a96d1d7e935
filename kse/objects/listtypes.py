"""How each list field of the served kinds merges: the one table behind patches, apply and OpenAPI.

Kubernetes declares this per Go struct field, twice: the strategic-merge-patch tags
(`patchStrategy:"merge" patchMergeKey:"name"`) and the structured-merge-diff markers
(`+listType=map`, `+listMapKey=name`). Both are copied here from k8s.io/api/core/v1/types.go and
k8s.io/apimachinery/pkg/apis/meta/v1/types.go, for the fields kse's protos carry. Three readers use
this table and nothing else:

* the HTTP door's `strategic_merge` (patchStrategy / patchMergeKey), and kse's own client-side
  apply (`kse.objects.apply`, the same keys for its three-way merge),
* the HTTP door's `apply` (listType / listMapKeys, for the `k:{...}` field-set keys and ownership
  of items),
* the HTTP door's `openapi` (`x-kubernetes-patch-*` and `x-kubernetes-list-*` extensions, which
  kubectl reads to build its own strategic merge patches for `kubectl apply`).

A list field not in the table is atomic with no patch strategy (replaced whole), as upstream treats
an untagged list. A unit test insists that every list field of a served kind is listed, so a field
added to the proto gets a decision here, not a silent default.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, TypeAlias

from google.protobuf.descriptor import Descriptor

from kse.objects.kinds import BY_KIND, Kind

ListTypeName = Literal["atomic", "set", "map"]


@dataclass(frozen=True)
class ListMeta:
    """One list field's merge semantics, as upstream's tags state them."""

    list_type: ListTypeName
    map_keys: tuple[str, ...] = ()  # listType=map: the keys that identify an item
    patch_strategy: str | None = None  # "merge" or "merge,retainKeys"; None = replace
    patch_merge_key: str | None = None  # strategic merge patch's key (maps of items only)

    @property
    def merges(self) -> bool:
        """Whether a strategic merge patch merges this list (else it replaces it)."""
        return self.patch_strategy is not None and "merge" in self.patch_strategy.split(",")


ATOMIC = ListMeta("atomic")


def _by_key(*keys: str, merge_key: str | None = None) -> ListMeta:
    return ListMeta("map", keys, "merge", merge_key or keys[0])


# (proto message full name, JSON field name) -> semantics. Kept in proto order per message.
LISTS: dict[tuple[str, str], ListMeta] = {
    # meta/v1 ObjectMeta
    ("kse.v1.ObjectMeta", "ownerReferences"): _by_key("uid"),
    ("kse.v1.ObjectMeta", "finalizers"): ListMeta("set", (), "merge"),
    ("kse.v1.ObjectMeta", "managedFields"): ATOMIC,
    # meta/v1 LabelSelector
    ("kse.v1.LabelSelector", "matchExpressions"): ATOMIC,
    ("kse.v1.LabelSelectorRequirement", "values"): ATOMIC,
    # core/v1 Container
    ("kse.v1.Container", "command"): ATOMIC,
    ("kse.v1.Container", "args"): ATOMIC,
    # ports: keyed by (containerPort, protocol) for apply, by containerPort for patches.
    ("kse.v1.Container", "ports"): _by_key("containerPort", "protocol"),
    ("kse.v1.Container", "env"): _by_key("name"),
    ("kse.v1.Container", "volumeMounts"): _by_key("mountPath"),  # patchMergeKey mountPath, listMapKey too
    # core/v1 PodSpec
    ("kse.v1.PodSpec", "containers"): _by_key("name"),
    ("kse.v1.PodSpec", "initContainers"): _by_key("name"),
    ("kse.v1.PodSpec", "tolerations"): ATOMIC,  # no patchStrategy upstream: replaced whole
    ("kse.v1.PodSpec", "topologySpreadConstraints"): _by_key("topologyKey", "whenUnsatisfiable"),
    ("kse.v1.PodSpec", "schedulingGates"): _by_key("name"),
    ("kse.v1.PodSpec", "volumes"): _by_key("name"),
    ("kse.v1.PodSpec", "resourceClaims"): _by_key("name"),
    ("kse.v1.ResourceRequirements", "claims"): _by_key("name"),
    ("kse.v1.PersistentVolumeClaimSpec", "accessModes"): ATOMIC,
    ("kse.v1.RBDVolumeSource", "monitors"): ATOMIC,
    # core/v1 affinity
    ("kse.v1.NodeSelector", "nodeSelectorTerms"): ATOMIC,
    ("kse.v1.NodeSelectorTerm", "matchExpressions"): ATOMIC,
    ("kse.v1.NodeSelectorTerm", "matchFields"): ATOMIC,
    ("kse.v1.NodeSelectorRequirement", "values"): ATOMIC,
    ("kse.v1.NodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"): ATOMIC,
    ("kse.v1.PodAffinity", "requiredDuringSchedulingIgnoredDuringExecution"): ATOMIC,
    ("kse.v1.PodAffinity", "preferredDuringSchedulingIgnoredDuringExecution"): ATOMIC,
    ("kse.v1.PodAffinityTerm", "namespaces"): ATOMIC,
    ("kse.v1.PodAffinityTerm", "matchLabelKeys"): ATOMIC,
    ("kse.v1.PodAffinityTerm", "mismatchLabelKeys"): ATOMIC,
    ("kse.v1.TopologySpreadConstraint", "matchLabelKeys"): ATOMIC,
    # core/v1 PodStatus
    ("kse.v1.PodStatus", "conditions"): _by_key("type"),
    ("kse.v1.PodStatus", "containerStatuses"): ATOMIC,
    # core/v1 NodeSpec / NodeStatus
    ("kse.v1.NodeSpec", "taints"): ATOMIC,  # no patchStrategy upstream: replaced whole
    ("kse.v1.NodeStatus", "conditions"): _by_key("type"),
    ("kse.v1.NodeStatus", "addresses"): _by_key("type"),
    ("kse.v1.NodeStatus", "images"): ATOMIC,
    ("kse.v1.ContainerImage", "names"): ATOMIC,
    # core/v1 Namespace and Service
    ("kse.v1.NamespaceSpec", "finalizers"): ATOMIC,
    ("kse.v1.NamespaceStatus", "conditions"): _by_key("type"),
    # ports: keyed by (port, protocol) for apply, by port for patches.
    ("kse.v1.ServiceSpec", "ports"): _by_key("port", "protocol"),
    ("kse.v1.ServiceSpec", "clusterIPs"): ATOMIC,
    ("kse.v1.ServiceSpec", "ipFamilies"): ATOMIC,
    ("kse.v1.ServiceStatus", "conditions"): _by_key("type"),
    # apps/v1 and policy/v1 status conditions
    ("kse.v1.ReplicaSetStatus", "conditions"): _by_key("type"),
    ("kse.v1.DeploymentStatus", "conditions"): _by_key("type"),
    ("kse.v1.DaemonSetStatus", "conditions"): _by_key("type"),
    ("kse.v1.PodDisruptionBudgetStatus", "conditions"): _by_key("type"),
}


def list_meta(message: str, field: str) -> ListMeta:
    """The semantics of list `field` (JSON name) of proto message `message` (full name)."""
    return LISTS.get((message, field), ATOMIC)


# ---------------------------------------------------------------- the schema beside the JSON


@dataclass(frozen=True)
class MapOf:
    """A protobuf map field (labels, nodeSelector, requests): any key, values of one schema."""

    value: Descriptor | None  # None: scalar values


# What a JSON value is, seen from the protos: a message, a map field, or free-form (None: scalars,
# unknown fields, google.protobuf.Struct).
Schema: TypeAlias = Descriptor | MapOf | None


def kind_schema(kind: str | Kind) -> Descriptor | None:
    """The message of a served kind ("Pod" or its Kind), None if kse does not serve it."""
    found = kind if isinstance(kind, Kind) else BY_KIND.get(kind)
    return found.message.DESCRIPTOR if found is not None else None


@lru_cache(maxsize=4096)  # bounded: keys come from request bodies
def field_schema(schema: Schema, key: str) -> tuple[Schema, ListMeta | None]:
    """The schema of JSON key `key` inside `schema`, and its list semantics if it is a list field."""
    if isinstance(schema, MapOf):
        return schema.value, None
    if schema is None:
        return None, None
    fd = next((f for f in schema.fields if f.json_name == key), None)
    if fd is None:
        return None, None
    meta = list_meta(schema.full_name, key) if fd.is_repeated and not _is_map(fd.message_type) else None
    sub = fd.message_type
    if sub is None or sub.full_name.startswith("google.protobuf."):
        return None, meta
    if _is_map(sub):
        return MapOf(sub.fields_by_name["value"].message_type), None
    return sub, meta


def _is_map(desc: Descriptor | None) -> bool:
    return desc is not None and desc.GetOptions().map_entry
