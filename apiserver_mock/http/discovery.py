"""Discovery documents and /version, generated from the kind table (`kse.objects.kinds.KINDS`).

Shapes as `k8s.io/apimachinery/pkg/apis/meta/v1/types.go` (APIVersions, APIGroupList, APIGroup,
APIResourceList) and what kube-apiserver lists for the same resources: one row per kind, plus the
subresources (`routes.SUBRESOURCES`). Aggregated discovery (apidiscovery.k8s.io) is not offered:
these plain documents are answered as `application/json`, and kubectl falls back to them without
a warning.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from apiserver_mock.http.routes import SCALE_RESOURCES, SUBRESOURCES
from kse.objects.kinds import KINDS, Kind

GIT_VERSION = "v1.34.0-kse"
RESOURCE_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# (kind, verbs, group, version) of each subresource; group/version "" = the parent's.
_SUBRESOURCE_ROWS: dict[str, tuple[str, list[str], str, str]] = {
    "binding": ("Binding", ["create"], "", ""),
    "eviction": ("Eviction", ["create"], "policy", "v1"),
    "status": ("", ["get", "patch", "update"], "", ""),
    "scale": ("Scale", ["get", "patch", "update"], "autoscaling", "v1"),
}
# Groups served with no resources of their own (none: policy/v1, whose Eviction pods/eviction
# takes, is listed through PodDisruptionBudget; an empty APIResourceList would make discovery
# clients report the group as failed, and `kubectl drain` would then delete instead of evicting).
EXTRA_GROUP_VERSIONS: tuple[str, ...] = ()


def group_versions() -> list[str]:
    """Every group/version served except the core "v1", in first-seen order."""
    seen = dict.fromkeys(k.api_version for k in KINDS if "/" in k.api_version)
    seen.update(dict.fromkeys(EXTRA_GROUP_VERSIONS))
    return list(seen)


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group(group_version: str) -> dict[str, Any]:
    group, _, version = group_version.partition("/")
    gv = {"groupVersion": group_version, "version": version}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group(gv) for gv in group_versions()]}


def group_document(group: str) -> dict[str, Any] | None:
    for gv in group_versions():
        if gv.partition("/")[0] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **api_group(gv)}
    return None


def _rows(kind: Kind) -> list[dict[str, Any]]:
    singular = kind.kind.lower()
    row: dict[str, Any] = {
        "name": kind.resource,
        "singularName": singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": RESOURCE_VERBS,
    }
    short = [s for s in kind.short_names if s != singular]
    if short:
        row["shortNames"] = short
    rows = [row]
    subs = SUBRESOURCES.get(kind.resource, ()) + (("scale",) if kind.resource in SCALE_RESOURCES else ())
    for sub in subs:
        sub_kind, verbs, group, version = _SUBRESOURCE_ROWS[sub]
        entry: dict[str, Any] = {
            "name": f"{kind.resource}/{sub}",
            "singularName": "",
            "namespaced": kind.namespaced,
            "kind": sub_kind or kind.kind,
            "verbs": verbs,
        }
        if group:
            entry["group"], entry["version"] = group, version
        rows.append(entry)
    return rows


def resource_list(group_version: str) -> dict[str, Any] | None:
    """The APIResourceList of one group/version ("v1" for core); None when not served."""
    if group_version != "v1" and group_version not in group_versions():
        return None
    resources = [r for k in KINDS if k.api_version == group_version for r in _rows(k)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def version_info() -> dict[str, str]:
    """/version: what `kubectl version` prints for the server (version.Info)."""
    major, minor = GIT_VERSION.lstrip("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": GIT_VERSION,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{sys.platform}/{platform.machine()}",
    }
