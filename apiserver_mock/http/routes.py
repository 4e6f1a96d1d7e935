"""Kubernetes URL paths -> what they name.

    /api/v1/RESOURCE[/NAME[/SUB]]                                   cluster-scoped, or all namespaces
    /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]]                     namespaced
    /apis/GROUP/VERSION/...                                         the same under a named group

as `k8s.io/apiserver/pkg/endpoints/request/requestinfo.go` splits them. The resource must be served
at that group/version (`kse.objects.kinds`), else 404 as kube-apiserver answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from apiserver_mock.errors import NotFound
from kse.objects.kinds import BY_RESOURCE, Kind

# Subresources served, per resource (everything else under a name is 404).
SUBRESOURCES: dict[str, tuple[str, ...]] = {
    "pods": ("binding", "status", "eviction"),
    "nodes": ("status",),
    "namespaces": ("status",),
    "services": ("status",),
    "replicasets": ("status",),
    "deployments": ("status",),
    "daemonsets": ("status",),
    "poddisruptionbudgets": ("status",),
}
# The scale subresource (autoscaling/v1 Scale, `apiserver_mock.http.scale`). Served over HTTP only
# and authorized as the get / update of the object itself, so it is not a row of SUBRESOURCES.
SCALE_RESOURCES: tuple[str, ...] = ("deployments", "replicasets")


@dataclass(frozen=True)
class Target:
    """A resource request: `namespace` "" means cluster-scoped, or every namespace for a list."""

    kind: Kind
    namespace: str = ""
    name: str = ""
    subresource: str = ""


def not_found(path: str) -> NotFound:
    return NotFound(f"the server could not find the requested resource (path {path})")


def parse(path: str) -> Target | None:
    """The resource a path names; None when it is not a resource path (discovery, health...)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
        group_version, rest = "v1", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    namespace = ""
    # /api/v1/namespaces/NAME/status is the Namespace's own subresource, not a resource in NAME.
    namespace_subresource = (
        group_version == "v1"
        and len(rest) == 3
        and rest[0] == "namespaces"
        and rest[2] in SUBRESOURCES["namespaces"]
    )
    if rest[0] == "namespaces" and len(rest) >= 3 and not namespace_subresource:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], "", ""
    if len(rest) >= 2:
        name = rest[1]
    if len(rest) == 3:
        sub = rest[2]
    kind = BY_RESOURCE.get(resource)
    if (
        len(rest) > 3
        or kind is None
        or kind.api_version != group_version
        or (namespace and not kind.namespaced)
        or (
            sub
            and sub not in SUBRESOURCES.get(resource, ())
            and not (sub == "scale" and resource in SCALE_RESOURCES)
        )
    ):
        raise not_found(path)
    return Target(kind, namespace, name, sub)
