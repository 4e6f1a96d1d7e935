"""The OpenAPI documents kube-apiserver serves, generated from kse's API definitions.

Public API (stable; the HTTP routes call it). Every result is computed once and shared: callers
serialize it and must not modify it.

    openapi_v2() -> dict
        The Swagger 2.0 document of `/openapi/v2` (definitions and paths of every served kind).
    openapi_v3_index(base="/openapi/v3") -> dict
        The discovery document of `/openapi/v3`:
        {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=..."}, ...}}.
    openapi_v3(group_version) -> dict | None
        The OpenAPI 3.0 document of one group-version, named by its path under `base`
        ("api/v1", "apis/coordination.k8s.io/v1"); None for a group-version kse does not serve.

Nothing here is written per kind. Schemas come from walking the protobuf descriptors of
`kse.objects.kinds.KINDS` (JSON names are the proto json_names, as `kse.objects.manifest` reads and
writes them); list semantics (`x-kubernetes-list-*`, `x-kubernetes-patch-*`) come from
`listtypes.LISTS`, the table the strategic merge patch and server-side apply use too. Definition
names are upstream's (`io.k8s.api.core.v1.PodSpec`, `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`),
so that kubectl, which looks schemas up by `x-kubernetes-group-version-kind`, finds what it expects:
`kubectl explain` reads the v3 documents, and `kubectl apply` reads the patch extensions of v3 to build
its strategic merge patch and the PATCH operations' `fieldValidation` parameter to decide that the
server validates fields (upstream: k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go).

Shapes follow kube-apiserver's (k8s.io/kube-openapi builder and builder3): in v2 a field of a message
type is a `$ref`; in v3 it is `allOf: [{$ref}]` with `default: {}`, as upstream writes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from kse.objects.kinds import KINDS, Kind
from kse.objects.listtypes import list_meta
from kse.objects.manifest import QUANTITY_MAPS
from proto import kse_pb2 as pb

__all__ = ["GIT_VERSION", "openapi_v2", "openapi_v3", "openapi_v3_index"]

GIT_VERSION = "v1.34.0-kse"

_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_TIME = f"{_META}.Time"
_MICRO_TIME = f"{_META}.MicroTime"
_FIELDS_V1 = f"{_META}.FieldsV1"
_PATCH = f"{_META}.Patch"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_STATUS = f"{_META}.Status"

# Messages of meta/v1 (apimachinery); every other message lives in the package of the first kind
# that reaches it (PodSpec: core/v1, LeaseSpec: coordination/v1).
_META_MESSAGES = frozenset(
    {
        "ObjectMeta",
        "OwnerReference",
        "ListMeta",
        "LabelSelector",
        "LabelSelectorRequirement",
        "ManagedFieldsEntry",
        "Condition",
    }
)
# core/v1 messages that the apps/v1 kinds reach first (their definition stays core's, as upstream).
_CORE_MESSAGES = frozenset({"PodTemplateSpec"})

# Fields whose proto type (a string, a map of strings) stands for an upstream named type: the
# quantity maps are the manifest decoder's (`QUANTITY_MAPS`), the times are these.
_TIMES: dict[tuple[str, str], str] = {
    ("kse.v1.ObjectMeta", "creationTimestamp"): _TIME,
    ("kse.v1.ObjectMeta", "deletionTimestamp"): _TIME,
    ("kse.v1.ManagedFieldsEntry", "time"): _TIME,
    ("kse.v1.PodCondition", "lastProbeTime"): _TIME,
    ("kse.v1.PodCondition", "lastTransitionTime"): _TIME,
    ("kse.v1.PodStatus", "startTime"): _TIME,
    ("kse.v1.Taint", "timeAdded"): _TIME,
    ("kse.v1.NodeCondition", "lastHeartbeatTime"): _TIME,
    ("kse.v1.NodeCondition", "lastTransitionTime"): _TIME,
    ("kse.v1.Event", "firstTimestamp"): _TIME,
    ("kse.v1.Event", "lastTimestamp"): _TIME,
    ("kse.v1.Event", "eventTime"): _MICRO_TIME,
    ("kse.v1.LeaseSpec", "acquireTime"): _MICRO_TIME,
    ("kse.v1.LeaseSpec", "renewTime"): _MICRO_TIME,
}
# A proto message standing for an upstream type that is not a message of ours.
_WELL_KNOWN = {"google.protobuf.Struct": _FIELDS_V1, "google.protobuf.Value": _INT_OR_STRING}
# Where one proto message serves two upstream types (Affinity.podAntiAffinity is PodAntiAffinity).
_RENAMED_FIELDS = {("kse.v1.Affinity", "podAntiAffinity"): "PodAntiAffinity"}

_KIND_DESCRIPTIONS = {
    "Pod": "Pod is a collection of containers that can run on a host; the scheduler places it on a node.",
    "Node": "Node is a worker node; kse's nodes are simulated kubelets (nodesim).",
    "Lease": "Lease is a lease used for leader election (kube-system/kube-scheduler) and fencing.",
    "Event": "Event is a report of an event somewhere in the cluster (core/v1 shape).",
    "PriorityClass": "PriorityClass maps a priority class name to the integer priority of its pods.",
    "Namespace": "Namespace provides a scope for Names.",
    "Service": "Service is a named abstraction of software service; kse stores it (selectors for spreading).",
    "ReplicaSet": "ReplicaSet ensures that a specified number of pod replicas are running at any given time.",
    "Deployment": "Deployment enables declarative updates for Pods and ReplicaSets.",
    "DaemonSet": "DaemonSet represents the configuration of a daemon set: one pod per eligible node.",
    "PodDisruptionBudget": (
        "PodDisruptionBudget is an object to define the max disruption that can be caused to a "
        "collection of pods"
    ),
}
_COMMON_FIELDS = {
    "apiVersion": "APIVersion defines the versioned schema of this representation of an object.",
    "kind": "Kind is a string value representing the REST resource this object represents.",
    "metadata": "Standard object's metadata.",
    "spec": "The desired behavior of the object.",
    "status": "The most recently observed status of the object; written by the system.",
}
_FIXED: dict[str, dict[str, Any]] = {
    _QUANTITY: {
        "description": 'A fixed-point number in Kubernetes quantity notation ("500m", "2Gi", "1.5").',
        "type": "string",
    },
    _TIME: {"description": "An RFC 3339 timestamp (seconds).", "type": "string", "format": "date-time"},
    _MICRO_TIME: {
        "description": "An RFC 3339 timestamp with microseconds.",
        "type": "string",
        "format": "date-time",
    },
    _FIELDS_V1: {
        "description": "The set of fields a manager owns, in the FieldsV1 encoding.",
        "type": "object",
    },
    _PATCH: {"description": "A patch document of one of the PATCH content types.", "type": "object"},
    _INT_OR_STRING: {
        "description": "IntOrString is a type that can hold an int32 or a string.",
        "type": "string",
        "format": "int-or-string",
    },
}

_INTS = {
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_SINT32: "int32",
    FieldDescriptor.TYPE_SFIXED32: "int32",
    FieldDescriptor.TYPE_UINT32: "int32",
    FieldDescriptor.TYPE_FIXED32: "int32",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_SINT64: "int64",
    FieldDescriptor.TYPE_SFIXED64: "int64",
    FieldDescriptor.TYPE_UINT64: "int64",
    FieldDescriptor.TYPE_FIXED64: "int64",
}
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


# ---------------------------------------------------------------- names


def _package(api_version: str) -> str:
    """io.k8s.api.<group>.<version>: the Go package upstream's definition names come from."""
    group, _, version = api_version.rpartition("/")
    return f"io.k8s.api.{group.split('.')[0] if group else 'core'}.{version}"


def _gvk(kind: Kind, name: str | None = None) -> dict[str, str]:
    group, _, version = kind.api_version.rpartition("/")
    return {"group": group, "kind": name or kind.kind, "version": version}


def gv_path(kind: Kind) -> str:
    """The group-version's path, as /openapi/v3 names it: "api/v1", "apis/coordination.k8s.io/v1"."""
    return "api/v1" if kind.api_version == "v1" else f"apis/{kind.api_version}"


@cache
def _names() -> dict[str, str]:
    """Every reachable proto message (full name) -> its upstream definition name."""
    out: dict[str, str] = {}

    def visit(desc: Descriptor, package: str, name: str) -> None:
        if desc.full_name in out or desc.full_name in _WELL_KNOWN:
            return
        if desc.name in _META_MESSAGES:
            out[desc.full_name] = f"{_META}.{desc.name}"
        elif desc.name in _CORE_MESSAGES:
            out[desc.full_name] = f"io.k8s.api.core.v1.{desc.name}"
        else:
            out[desc.full_name] = f"{package}.{name}"
        for fd in desc.fields:
            sub = fd.message_type
            if sub is not None and not sub.GetOptions().map_entry:
                visit(sub, package, sub.name)

    for kind in KINDS:
        visit(kind.message.DESCRIPTOR, _package(kind.api_version), kind.kind)
    return out


# ---------------------------------------------------------------- schemas


class _Schemas:
    """Definitions for one document flavour: v2 (`$ref` fields) or v3 (`allOf` fields)."""

    def __init__(self, ref_prefix: str, v3: bool) -> None:
        self.ref_prefix = ref_prefix
        self.v3 = v3
        self.definitions: dict[str, dict[str, Any]] = {}

    def ref(self, name: str) -> dict[str, Any]:
        """A field's reference to a named schema."""
        target = self.plain_ref(name)
        return {"allOf": [target], "default": {}} if self.v3 else target

    def plain_ref(self, name: str) -> dict[str, Any]:
        """A bare `$ref` (v3 request and response bodies use it bare)."""
        return {"$ref": self.ref_prefix + name}

    def build(self) -> dict[str, dict[str, Any]]:
        for name, schema in _FIXED.items():
            self.definitions[name] = dict(schema)
        self.definitions[_STATUS] = self._status()
        self._message(pb.ListMeta.DESCRIPTOR, f"{_META}.ListMeta")
        for kind in KINDS:
            self._message(kind.message.DESCRIPTOR, _names()[kind.message.DESCRIPTOR.full_name])
            top = self.definitions[_names()[kind.message.DESCRIPTOR.full_name]]
            top["description"] = _KIND_DESCRIPTIONS.get(kind.kind, f"{kind.kind} is a kind kse serves.")
            top["x-kubernetes-group-version-kind"] = [_gvk(kind)]
            self.definitions[_list_name(kind)] = self._list(kind)
        return dict(sorted(self.definitions.items()))

    def _message(self, desc: Descriptor, name: str) -> None:
        if name in self.definitions:
            return
        props: dict[str, Any] = {}
        schema: dict[str, Any] = {"type": "object", "properties": props}
        self.definitions[name] = schema
        for fd in desc.fields:
            props[fd.json_name] = self._field(desc, fd)
            if fd.json_name in _COMMON_FIELDS and desc.full_name in _kind_messages():
                props[fd.json_name]["description"] = _COMMON_FIELDS[fd.json_name]

    def _field(self, desc: Descriptor, fd: FieldDescriptor) -> dict[str, Any]:
        key = (desc.full_name, fd.json_name)
        sub = fd.message_type
        if sub is not None and sub.GetOptions().map_entry:
            value = sub.fields_by_name["value"]
            item = self.ref(_QUANTITY) if key in QUANTITY_MAPS else self._single(desc, value, key)
            return {"type": "object", "additionalProperties": item}
        if key in _TIMES:
            return self.ref(_TIMES[key])
        single = self._single(desc, fd, key)
        if not fd.is_repeated:
            return single
        return {"type": "array", "items": single, **_list_extensions(desc.full_name, fd.json_name)}

    def _single(self, desc: Descriptor, fd: FieldDescriptor, key: tuple[str, str]) -> dict[str, Any]:
        sub = fd.message_type
        if sub is not None:
            if sub.full_name in _WELL_KNOWN:
                return self.ref(_WELL_KNOWN[sub.full_name])
            name = _names()[sub.full_name]
            if key in _RENAMED_FIELDS:
                name = f"{name.rpartition('.')[0]}.{_RENAMED_FIELDS[key]}"
            self._message(sub, name)
            return self.ref(name)
        if fd.type in _INTS:
            return {"type": "integer", "format": _INTS[fd.type]}
        if fd.type == FieldDescriptor.TYPE_BOOL:
            return {"type": "boolean"}
        if fd.type == FieldDescriptor.TYPE_DOUBLE:
            return {"type": "number", "format": "double"}
        if fd.type == FieldDescriptor.TYPE_FLOAT:
            return {"type": "number", "format": "float"}
        if fd.type == FieldDescriptor.TYPE_BYTES:
            return {"type": "string", "format": "byte"}
        return {"type": "string"}

    def _list(self, kind: Kind) -> dict[str, Any]:
        item = self.ref(_names()[kind.message.DESCRIPTOR.full_name])
        return {
            "description": f"{kind.kind}List is a list of {kind.kind} objects.",
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string", "description": _COMMON_FIELDS["apiVersion"]},
                "items": {"type": "array", "items": item, "description": f"The {kind.resource}."},
                "kind": {"type": "string", "description": _COMMON_FIELDS["kind"]},
                "metadata": {**self.ref(f"{_META}.ListMeta"), "description": "Standard list metadata."},
            },
            "x-kubernetes-group-version-kind": [_gvk(kind, f"{kind.kind}List")],
        }

    def _status(self) -> dict[str, Any]:
        return {
            "description": "Status is the return value of calls that do not return other objects.",
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "code": {"type": "integer", "format": "int32"},
                "details": {"type": "object"},
                "kind": {"type": "string"},
                "message": {"type": "string"},
                "metadata": self.ref(f"{_META}.ListMeta"),
                "reason": {"type": "string"},
                "status": {"type": "string"},
            },
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Status", "version": "v1"}],
        }


@cache
def _kind_messages() -> frozenset[str]:
    return frozenset(k.message.DESCRIPTOR.full_name for k in KINDS)


def _list_name(kind: Kind) -> str:
    return f"{_names()[kind.message.DESCRIPTOR.full_name]}List"


def _list_extensions(message: str, field: str) -> dict[str, Any]:
    meta = list_meta(message, field)
    out: dict[str, Any] = {}
    if meta.patch_merge_key is not None:
        out["x-kubernetes-patch-merge-key"] = meta.patch_merge_key
    if meta.patch_strategy is not None:
        out["x-kubernetes-patch-strategy"] = meta.patch_strategy
    if meta.map_keys:
        out["x-kubernetes-list-map-keys"] = list(meta.map_keys)
    out["x-kubernetes-list-type"] = meta.list_type
    return out


# ---------------------------------------------------------------- paths


def _op_id(verb: str, kind: Kind, scope: str, suffix: str = "") -> str:
    group, _, version = kind.api_version.rpartition("/")
    words = [w.capitalize() for w in (group.split(".")[0] if group else "core").split("-")]
    return f"{verb}{''.join(words)}{version.capitalize()}{scope}{kind.kind}{suffix}"


def _operations(kind: Kind) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path, method, operation) for every endpoint of `kind`: the collection, the object, /status."""
    prefix = "/api/v1" if kind.api_version == "v1" else f"/apis/{kind.api_version}"
    scope = "Namespaced" if kind.namespaced else ""
    collection = (
        f"{prefix}/namespaces/{{namespace}}/{kind.resource}"
        if kind.namespaced
        else f"{prefix}/{kind.resource}"
    )
    item = f"{collection}/{{name}}"
    this, listed = _names()[kind.message.DESCRIPTOR.full_name], _list_name(kind)
    yield collection, "get", _op("list", kind, _op_id("list", kind, scope), listed, collection)
    yield collection, "post", _op("post", kind, _op_id("create", kind, scope), this, collection, body=this)
    yield (
        collection,
        "delete",
        _op("deletecollection", kind, _op_id("delete", kind, "Collection" + scope), _STATUS, collection),
    )
    yield item, "get", _op("get", kind, _op_id("read", kind, scope), this, item)
    yield item, "put", _op("put", kind, _op_id("replace", kind, scope), this, item, body=this)
    yield item, "patch", _op("patch", kind, _op_id("patch", kind, scope), this, item, body=_PATCH)
    yield item, "delete", _op("delete", kind, _op_id("delete", kind, scope), _STATUS, item)
    if "status" in kind.message.DESCRIPTOR.fields_by_name:
        status = f"{item}/status"
        yield status, "get", _op("get", kind, _op_id("read", kind, scope, "Status"), this, status)
        yield (
            status,
            "put",
            _op("put", kind, _op_id("replace", kind, scope, "Status"), this, status, body=this),
        )
        yield (
            status,
            "patch",
            _op("patch", kind, _op_id("patch", kind, scope, "Status"), this, status, body=_PATCH),
        )
    if kind.namespaced:
        every = f"{prefix}/{kind.resource}"
        yield every, "get", _op("list", kind, _op_id("list", kind, "", "ForAllNamespaces"), listed, every)


def _op(
    action: str, kind: Kind, op_id: str, response: str, path: str, body: str | None = None
) -> dict[str, Any]:
    """One operation, flavour-neutral: `_v2_op` / `_v3_op` turn it into each document's shape."""
    params = [
        {"name": p, "in": "path", "required": True, "type": "string"}
        for p in ("namespace", "name")
        if f"{{{p}}}" in path
    ]
    writes = action in ("post", "put", "patch")
    if writes:
        params += [
            {
                "name": "dryRun",
                "in": "query",
                "type": "string",
                "description": "All: validate, do not persist.",
            },
            {"name": "fieldManager", "in": "query", "type": "string", "description": "The writer's name."},
            {
                "name": "fieldValidation",
                "in": "query",
                "type": "string",
                "description": "Unknown or duplicate fields: Ignore, Warn (default) or Strict.",
            },
        ]
    if action == "patch":
        params.append(
            {
                "name": "force",
                "in": "query",
                "type": "boolean",
                "description": "Apply: take over conflicting fields.",
            }
        )
    if action in ("list", "deletecollection"):
        for name in ("labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch", "continue"):
            params.append({"name": name, "in": "query", "type": "string"})
        params.append({"name": "limit", "in": "query", "type": "integer"})
    if action == "list":
        params += [
            {"name": "watch", "in": "query", "type": "boolean"},
            {"name": "timeoutSeconds", "in": "query", "type": "integer"},
        ]
    return {
        "operationId": op_id,
        "action": action,
        "gvk": _gvk(kind),
        "tag": gv_path(kind).replace("/", "_").replace(".", "_"),
        "params": params,
        "body": body,
        "response": response,
    }


def _v2_op(op: dict[str, Any], schemas: _Schemas) -> dict[str, Any]:
    params = list(op["params"])
    consumes = ["*/*"]
    if op["body"] is not None:
        params.insert(0, {"name": "body", "in": "body", "required": True, "schema": schemas.ref(op["body"])})
        if op["action"] == "patch":
            consumes = list(_PATCH_TYPES)
    out = {
        "operationId": op["operationId"],
        "tags": [op["tag"]],
        "consumes": consumes,
        "produces": ["application/json", "application/yaml"],
        "schemes": ["https"],
        "parameters": params,
        "responses": {
            "200": {"description": "OK", "schema": schemas.ref(op["response"])},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": op["action"],
        "x-kubernetes-group-version-kind": op["gvk"],
    }
    return out


def _v3_op(op: dict[str, Any], schemas: _Schemas) -> dict[str, Any]:
    params = [
        {k: v for k, v in p.items() if k != "type"} | {"schema": {"type": p["type"], "uniqueItems": True}}
        for p in op["params"]
    ]
    content = {
        t: {"schema": schemas.plain_ref(op["response"])} for t in ("application/json", "application/yaml")
    }
    out: dict[str, Any] = {
        "operationId": op["operationId"],
        "tags": [op["tag"]],
        "parameters": params,
        "responses": {
            "200": {"description": "OK", "content": content},
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": op["action"],
        "x-kubernetes-group-version-kind": op["gvk"],
    }
    if op["body"] is not None:
        types = _PATCH_TYPES if op["action"] == "patch" else ("*/*",)
        out["requestBody"] = {
            "required": True,
            "content": {t: {"schema": schemas.ref(op["body"])} for t in types},
        }
    return out


def _paths(kinds: list[Kind], shape: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for kind in kinds:
        for path, method, op in _operations(kind):
            paths.setdefault(path, {})[method] = shape(op)
    return dict(sorted(paths.items()))


# ---------------------------------------------------------------- documents


@cache
def openapi_v2() -> dict[str, Any]:
    """The Swagger 2.0 document kube-apiserver serves at /openapi/v2 (see the module doc)."""
    schemas = _Schemas("#/definitions/", v3=False)
    definitions = schemas.build()
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": _paths(list(KINDS), lambda op: _v2_op(op, schemas)),
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
    }


def _reachable(definitions: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    """The definitions `roots` refer to, transitively (one v3 document carries only its own)."""
    prefix = "#/components/schemas/"
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_refs(definitions[name], prefix))
    return {name: definitions[name] for name in sorted(seen)}


def _refs(node: Any, prefix: str) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value[len(prefix) :]
            else:
                yield from _refs(value, prefix)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value, prefix)


@cache
def _v3_documents() -> dict[str, dict[str, Any]]:
    schemas = _Schemas("#/components/schemas/", v3=True)
    definitions = schemas.build()
    by_gv: dict[str, list[Kind]] = {}
    for kind in KINDS:
        by_gv.setdefault(gv_path(kind), []).append(kind)
    docs: dict[str, dict[str, Any]] = {}
    for gv, kinds in by_gv.items():
        paths = _paths(kinds, lambda op: _v3_op(op, schemas))
        roots = [*_refs(paths, "#/components/schemas/"), _STATUS]
        docs[gv] = {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": GIT_VERSION},
            "paths": paths,
            "components": {
                "schemas": _reachable(definitions, roots),
                "securitySchemes": {
                    "BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}
                },
            },
        }
    return docs


def openapi_v3(group_version: str) -> dict[str, Any] | None:
    """The OpenAPI 3.0 document of "api/v1", "apis/<group>/<version>"; None if not served."""
    return _v3_documents().get(group_version.strip("/"))


@cache
def _v3_hashes() -> dict[str, str]:
    """Upstream's `?hash=`: the SHA-512 of the document, upper-case hex (kube-openapi handler3)."""
    out = {}
    for gv, doc in _v3_documents().items():
        data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        out[gv] = hashlib.sha512(data).hexdigest().upper()
    return out


def openapi_v3_index(base: str = "/openapi/v3") -> dict[str, Any]:
    """The /openapi/v3 discovery document; `base` is the path the documents are served under."""
    root = base.rstrip("/")
    return {
        "paths": {
            gv: {"serverRelativeURL": f"{root}/{gv}?hash={digest}"}
            for gv, digest in sorted(_v3_hashes().items())
        }
    }
