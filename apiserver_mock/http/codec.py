"""JSON <-> protobuf for the HTTP API, on top of the manifest codec (`kse.objects.manifest`).

Out: the registry's serialized `Object` / `ObjectList` bytes become the camelCase JSON kubectl
prints (`to_dict`). In: a JSON body becomes the typed message of the URL's kind, coerced exactly as
a manifest is; unknown fields are reported for `fieldValidation` (Strict refuses them as
kube-apiserver's strict decoder does, Warn returns them as `Warning` headers, Ignore drops them).
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.message import Message

from apiserver_mock import wire
from apiserver_mock.errors import APIError, Invalid
from apiserver_mock.http.jsonenc import object_dict
from kse.objects.kinds import Kind
from kse.objects.manifest import DecodedObject, ManifestError, decode_object, to_dict
from proto import kse_pb2 as pb

FIELD_VALIDATIONS = ("Strict", "Warn", "Ignore")


class BadRequest(APIError):
    """A body that is not JSON, not an object, or has fields of the wrong shape (HTTP 400)."""

    code = Invalid.code


def object_json(data: bytes) -> dict[str, Any]:
    """A serialized `Object` as its Kubernetes JSON (`to_dict`'s, by the faster `jsonenc`)."""
    return object_dict(data)


class JSONCache:
    """Serialized `Object` bytes -> their JSON text, shared by every list and watch of the door.

    The watch cache hands out the same bytes for one object version to every list and watcher
    (`CachedObject.wire`, an event's frame), so converting it once (protobuf -> dict -> JSON, the
    costly part of an HTTP answer: ~30 us a small pod with `jsonenc`, ~80 us with `to_dict`)
    serves all of them. Bounded: when full it starts
    over, as the API server's other caches do."""

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self._texts: dict[bytes, bytes] = {}

    def text(self, obj_wire: bytes) -> bytes:
        cached = self._texts.get(obj_wire)
        if cached is None:
            cached = dumps(object_dict(obj_wire))
            if len(self._texts) >= self.limit:
                self._texts.clear()
            self._texts[obj_wire] = cached
        return cached


JSON_CACHE = JSONCache()


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def list_text(kind: Kind, data: bytes, cache: JSONCache = JSON_CACHE) -> bytes:
    """A serialized `ObjectList` as the JSON text of a `<Kind>List`, item texts from `cache`."""
    meta: dict[str, Any] = {}
    items: list[bytes] = []
    for number, payload in wire.length_delimited_fields(data):
        if number == 1:
            lm = pb.ListMeta.FromString(payload)
            meta["resourceVersion"] = lm.resource_version
            token = getattr(lm, "continue")
            if token:
                meta["continue"] = token
            if lm.HasField("remaining_item_count"):
                meta["remainingItemCount"] = lm.remaining_item_count
        elif number == 2:
            items.append(cache.text(payload))
    head = dumps({"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta})
    return head[:-1] + b',"items":[' + b",".join(items) + b"]}"


def list_json(kind: Kind, data: bytes) -> dict[str, Any]:
    """A serialized `ObjectList` as a `<Kind>List`."""
    lst = pb.ObjectList.FromString(data)
    meta: dict[str, Any] = {"resourceVersion": lst.metadata.resource_version}
    token = getattr(lst.metadata, "continue")
    if token:
        meta["continue"] = token
    if lst.metadata.HasField("remaining_item_count"):
        meta["remainingItemCount"] = lst.metadata.remaining_item_count
    return {
        "kind": f"{kind.kind}List",
        "apiVersion": kind.api_version,
        "metadata": meta,
        "items": [to_dict(o) for o in lst.items],
    }


def decode_json(body: bytes) -> Any:
    if not body.strip():
        raise BadRequest("the request body is empty; expected a JSON object")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"the request body is not valid JSON: {e}") from None
    except RecursionError:
        raise BadRequest("the request body is not valid JSON: nested too deeply") from None


def body_object(body: bytes | Any, kind: Kind) -> tuple[dict[str, Any], Message, list[str]]:
    """(the decoded dict, the typed message, unknown field paths) of a request body for `kind`."""
    raw = decode_json(body) if isinstance(body, bytes) else body
    if not isinstance(raw, dict):
        raise BadRequest(f"the request body must be a JSON object, got {type(raw).__name__}")
    decoded = _decode(raw, kind)
    return raw, getattr(decoded.obj, kind.field), decoded.unknown_fields


def unknown_of(raw: dict[str, Any], kind: Kind) -> list[str]:
    """The JSON paths of `raw` that `kind` has no field for (values of the wrong shape are not
    reported here: decoding the object refuses them)."""
    try:
        return decode_object(raw, kind).unknown_fields
    except ManifestError:
        return []


def message_from_dict(raw: dict[str, Any], kind: Kind) -> Message:
    msg: Message = getattr(_decode(raw, kind).obj, kind.field)
    return msg


def _decode(raw: dict[str, Any], kind: Kind) -> DecodedObject:
    try:
        return decode_object(raw, kind)
    except ManifestError as e:
        detail = str(e).split(": ", 1)[-1]
        raise BadRequest(
            f'{kind.kind} in version "{kind.api_version.rpartition("/")[2]}" cannot be handled as a '
            f"{kind.kind}: {detail}"
        ) from None


_BINDING_META = {
    "name": "name",
    "namespace": "namespace",
    "uid": "uid",
    "resourceVersion": "resource_version",
}
_BINDING_TARGET = {
    "kind": "kind",
    "name": "name",
    "namespace": "namespace",
    "uid": "uid",
    "apiVersion": "api_version",
    "resourceVersion": "resource_version",
    "fieldPath": "field_path",
}


def binding_from(raw: Any) -> pb.Binding:
    """A v1 Binding body (the scheduler's hot path: read directly, not through json_format)."""
    if not isinstance(raw, dict):
        raise BadRequest(f"the request body must be a JSON object (Binding), got {type(raw).__name__}")
    out = pb.Binding(api_version=_string(raw, "apiVersion", "Binding"), kind=_string(raw, "kind", "Binding"))
    for part, names, target in (
        ("metadata", _BINDING_META, out.metadata),
        ("target", _BINDING_TARGET, out.target),
    ):
        section = raw.get(part)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise BadRequest(f"Binding: {part}: expected an object, got {type(section).__name__}")
        for json_name, field in names.items():
            setattr(target, field, _string(section, json_name, f"Binding: {part}"))
    return out


def _string(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value


def field_validation(value: str) -> str:
    """The `fieldValidation` query parameter, checked (default Warn, as kube-apiserver's)."""
    if value == "":
        return "Warn"
    if value not in FIELD_VALIDATIONS:
        raise BadRequest(
            f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Strict", "Warn"'
        )
    return value


def strict_error(unknown: list[str]) -> BadRequest:
    """kube-apiserver's answer to unknown fields under fieldValidation=Strict."""
    listed = ", ".join(f'unknown field "{p}"' for p in unknown)
    return BadRequest(f"strict decoding error: {listed}")


def warnings_for(unknown: list[str]) -> list[str]:
    """`Warning` header values (RFC 7234 299 warnings) for unknown fields under Warn."""
    return [f'299 - "unknown field \\"{p}\\""' for p in unknown]
