"""The `scale` subresource of deployments and replicasets over HTTP (autoscaling/v1 Scale), what
`kubectl scale` and the HorizontalPodAutoscaler use: GET, PUT and PATCH at
`.../deployments/NAME/scale`.

A Scale is a view of its object: `spec.replicas` is the object's, `status.replicas` its
status', `status.selector` its label selector as a string (upstream's
`pkg/registry/apps/deployment/storage/storage.go` ScaleREST). Writing one reads the object, sets
`spec.replicas` and updates it with the read resourceVersion as precondition (or the Scale's own,
when the client sent one), through the same registry call as any update: validation,
authorization (as an update of the object itself), fencing and storage are not repeated here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf.message import Message

from apiserver_mock.errors import Conflict, invalid
from apiserver_mock.http import codec, patch
from apiserver_mock.http.codec import BadRequest
from apiserver_mock.http.routes import SCALE_RESOURCES, Target
from apiserver_mock.http.status import UnsupportedMediaType
from certs.identity import Identity
from kse.objects.kinds import Kind
from kse.objects.labels import label_selector_as_selector
from proto import kse_pb2 as pb

__all__ = ["SCALE_RESOURCES", "ScaleHandlers", "scale_of"]

PATCH_ATTEMPTS = 5  # as the object patcher: a conflicting update is retried on a fresh read
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def _decoded(kind: Kind, data: bytes) -> tuple[dict[str, Any], Any]:
    obj = pb.Object()
    obj.ParseFromString(data)
    return codec.object_json(data), getattr(obj, kind.field)


def scale_of(kind: Kind, data: bytes) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a stored object (a serialized `Object`)."""
    doc, msg = _decoded(kind, data)
    meta = doc.get("metadata", {})
    scale_meta = {
        k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
    }
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": int(msg.spec.replicas)},
        "status": {
            "replicas": int(msg.status.replicas),
            "selector": str(label_selector_as_selector(msg.spec.selector)),
        },
    }


def replicas_from(kind: Kind, t: Target, scale: Any) -> tuple[int, str]:
    """(spec.replicas, metadata.resourceVersion) of a Scale body; Invalid naming the field."""
    if not isinstance(scale, dict):
        raise BadRequest("the body of a scale request must be a JSON object (an autoscaling/v1 Scale)")
    meta = scale.get("metadata") or {}
    if not isinstance(meta, dict):
        raise BadRequest("metadata: expected an object")
    name = meta.get("name", t.name)
    if name and name != t.name:
        raise BadRequest(f"the name of the object ({name}) does not match the name on the URL ({t.name})")
    spec = scale.get("spec") or {}
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise invalid(kind, t.name, [f"spec.replicas: Invalid value: {replicas!r}: must be an integer"])
    if not 0 <= replicas < 2**31:
        raise invalid(
            kind, t.name, [f"spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"]
        )
    rv = meta.get("resourceVersion", "")
    return replicas, rv if isinstance(rv, str) else ""


def apply_patch(content_type: str, current: dict[str, Any], body: Any) -> Any:
    """A patch of a Scale (a strategic merge of a Scale is its JSON merge: it has no lists);
    UnsupportedMediaType for another content type."""
    if content_type in (MERGE_PATCH, STRATEGIC_PATCH):
        return patch.merge_patch(current, body)
    if content_type == JSON_PATCH:
        return patch.json_patch(current, body)
    raise UnsupportedMediaType(
        f"the body of a scale patch must be one of {MERGE_PATCH}, {JSON_PATCH}, {STRATEGIC_PATCH}; "
        f"got {content_type!r}"
    )


def with_replicas(kind: Kind, data: bytes, replicas: int, resource_version: str) -> pb.WriteRequest:
    """The Update of the object read as `data` with `spec.replicas` set."""
    _, msg = _decoded(kind, data)
    msg.spec.replicas = replicas
    if resource_version:
        msg.metadata.resource_version = resource_version
    req = pb.WriteRequest()
    getattr(req.object, kind.field).CopyFrom(msg)
    return req


Call = Callable[[str, Identity, Message], Awaitable[tuple[bytes, int]]]


class ScaleHandlers:
    """GET / PUT / PATCH of `<resource>/NAME/scale`."""

    def __init__(self, call: Call) -> None:
        self.call = call

    async def _read(self, ident: Identity, t: Target) -> bytes:
        data, _ = await self.call(
            "Get", ident, pb.GetRequest(resource=t.kind.resource, namespace=t.namespace, name=t.name)
        )
        return data

    async def get(self, ident: Identity, t: Target) -> dict[str, Any]:
        return scale_of(t.kind, await self._read(ident, t))

    async def _write(
        self, ident: Identity, t: Target, data: bytes, replicas: int, rv: str, fence: pb.FenceToken | None
    ) -> dict[str, Any]:
        req = with_replicas(t.kind, data, replicas, rv)
        if fence is not None:
            req.fence.CopyFrom(fence)
        written, _ = await self.call("Update", ident, req)
        return scale_of(t.kind, written)

    async def update(
        self, ident: Identity, t: Target, body: bytes, fence: pb.FenceToken | None
    ) -> dict[str, Any]:
        replicas, rv = replicas_from(t.kind, t, codec.decode_json(body))
        return await self._write(ident, t, await self._read(ident, t), replicas, rv, fence)

    async def patch(
        self, ident: Identity, t: Target, content_type: str, body: bytes, fence: pb.FenceToken | None
    ) -> dict[str, Any]:
        doc = codec.decode_json(body)
        for attempt in range(PATCH_ATTEMPTS):
            data = await self._read(ident, t)
            current = scale_of(t.kind, data)
            replicas, rv = replicas_from(t.kind, t, apply_patch(content_type, current, doc))
            pinned = rv != current["metadata"].get("resourceVersion", "")
            try:
                return await self._write(ident, t, data, replicas, rv, fence)
            except Conflict:
                if pinned or attempt == PATCH_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
