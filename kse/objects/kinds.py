"""The served kinds and the one table that maps between their names.

Every generic piece of kse (storage keys, the API server's registries, the CLI, manifests) looks a
kind up here instead of switching on it, so adding a kind is one row plus one oneof field in
`proto/kse.proto`.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from proto import kse_pb2 as pb


@dataclass(frozen=True)
class Kind:
    """One served kind: its Kubernetes names and its place in the `Object` oneof."""

    resource: str  # plural resource name, as in URLs and RBAC: "pods"
    kind: str  # "Pod"
    api_version: str  # "v1", "coordination.k8s.io/v1"
    namespaced: bool
    field: str  # the `Object.kind` oneof field holding it: "pod"
    message: type[Message]
    short_names: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        """The API group ("" for core), as RBAC and error messages name it."""
        return self.api_version.rpartition("/")[0]


KINDS: tuple[Kind, ...] = (
    Kind("pods", "Pod", "v1", True, "pod", pb.Pod, ("po", "pod")),
    Kind("nodes", "Node", "v1", False, "node", pb.Node, ("no", "node")),
    Kind("leases", "Lease", "coordination.k8s.io/v1", True, "lease", pb.Lease, ("lease",)),
    Kind("events", "Event", "v1", True, "event", pb.Event, ("ev", "event")),
    Kind(
        "priorityclasses",
        "PriorityClass",
        "scheduling.k8s.io/v1",
        False,
        "priority_class",
        pb.PriorityClass,
        ("pc", "priorityclass"),
    ),
    Kind("namespaces", "Namespace", "v1", False, "namespace", pb.Namespace, ("ns", "namespace")),
    Kind("services", "Service", "v1", True, "service", pb.Service, ("svc", "service")),
    Kind("replicasets", "ReplicaSet", "apps/v1", True, "replica_set", pb.ReplicaSet, ("rs", "replicaset")),
    Kind("deployments", "Deployment", "apps/v1", True, "deployment", pb.Deployment, ("deploy", "deployment")),
    Kind("daemonsets", "DaemonSet", "apps/v1", True, "daemon_set", pb.DaemonSet, ("ds", "daemonset")),
    Kind(
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        "policy/v1",
        True,
        "pod_disruption_budget",
        pb.PodDisruptionBudget,
        ("pdb", "poddisruptionbudget"),
    ),
)

BY_RESOURCE: dict[str, Kind] = {k.resource: k for k in KINDS}
BY_KIND: dict[str, Kind] = {k.kind: k for k in KINDS}
BY_FIELD: dict[str, Kind] = {k.field: k for k in KINDS}
BY_MESSAGE: dict[str, Kind] = {k.message.DESCRIPTOR.full_name: k for k in KINDS}


class UnknownKindError(LookupError):
    """A resource or kind name that kse does not serve."""


def lookup_resource(name: str) -> Kind:
    """Find a kind by plural, singular, kind or short name, as kubectl accepts them."""
    lowered = name.lower()
    for k in KINDS:
        if lowered in (k.resource, k.kind.lower(), *k.short_names):
            return k
    served = ", ".join(k.resource for k in KINDS)
    raise UnknownKindError(f'the server does not serve resource "{name}" (served: {served})')


def kind_of(obj: pb.Object) -> Kind:
    """The kind held by an `Object` wrapper."""
    field = obj.WhichOneof("kind")
    if field is None:
        raise UnknownKindError("object is empty: no kind is set")
    return BY_FIELD[field]


def unwrap(obj: pb.Object) -> Message:
    """The typed message (Pod, Node, ...) inside an `Object` wrapper (a reference, not a copy)."""
    return getattr(obj, kind_of(obj).field)  # type: ignore[no-any-return]


def wrap(msg: Message) -> pb.Object:
    """An `Object` wrapper around a copy of a typed message."""
    kind = BY_MESSAGE.get(msg.DESCRIPTOR.full_name)
    if kind is None:
        raise UnknownKindError(f"{msg.DESCRIPTOR.full_name} is not a served kind")
    out = pb.Object()
    getattr(out, kind.field).CopyFrom(msg)
    return out
