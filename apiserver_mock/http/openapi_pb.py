"""/openapi/v2 as protobuf: the form client-go asks for.

client-go's `DiscoveryClient.OpenAPISchema()` (kubectl's v2 fallbacks, `kubectl explain
--output plaintext-openapiv2`, tools built on client-go) requests `/openapi/v2` with
`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and decodes the body as
gnostic's `openapi.v2.Document` message (github.com/google/gnostic-models openapiv2/OpenAPIv2.proto),
failing on JSON. This module writes that message straight from the Swagger 2.0 dict of
`openapi.openapi_v2()`, with a small protobuf wire-format writer: only the messages and fields our
document uses (document, info, paths and operations, parameters, responses, schemas), with
gnostic's field numbers. Vendor extensions travel as gnostic does them: `NamedAny` whose `Any.yaml`
holds the value (JSON text, which is YAML).

Public API (stable; the route calls it):

    openapi_v2_protobuf() -> bytes      the encoded document, computed once
    PROTOBUF_V2                         the Accept value asking for it
    PROTOBUF_V2_CONTENT_TYPE            the Content-Type to answer with
# The Content-Type kube-apiserver answers it with (kube-openapi handler).
PROTOBUF_V2_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from apiserver_mock.http.openapi import openapi_v2

__all__ = ["PROTOBUF_V2", "PROTOBUF_V2_CONTENT_TYPE", "encode_v2", "openapi_v2_protobuf"]

PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
# The Content-Type kube-apiserver answers it with (kube-openapi handler).
PROTOBUF_V2_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


# ---------------------------------------------------------------- the wire format


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _str(number: int, text: str) -> bytes:
    return _bytes_field(number, text.encode()) if text else b""


def _strs(number: int, texts: list[str]) -> bytes:
    return b"".join(_bytes_field(number, t.encode()) for t in texts)


def _bool(number: int, value: bool) -> bytes:
    return _varint(number << 3) + b"\x01" if value else b""


def _msg(number: int, data: bytes) -> bytes:
    return _bytes_field(number, data)


# ---------------------------------------------------------------- gnostic messages


def _extensions(number: int, node: dict[str, Any]) -> bytes:
    """`x-*` keys as repeated NamedAny{name=1, value=Any{yaml=2}}."""
    out = b""
    for key, value in node.items():
        if key.startswith("x-"):
            any_msg = _str(2, json.dumps(value, separators=(",", ":")))
            out += _msg(number, _str(1, key) + _msg(2, any_msg))
    return out


def _schema(s: dict[str, Any]) -> bytes:
    out = _str(1, s.get("$ref", "")) + _str(2, s.get("format", "")) + _str(4, s.get("description", ""))
    out += _strs(19, list(s.get("required", [])))
    if isinstance(s.get("additionalProperties"), dict):
        out += _msg(21, _msg(1, _schema(s["additionalProperties"])))
    if "type" in s:
        out += _msg(22, _strs(1, [s["type"]] if isinstance(s["type"], str) else list(s["type"])))
    if "items" in s:
        out += _msg(23, _msg(1, _schema(s["items"])))
    for part in s.get("allOf", []):
        out += _msg(24, _schema(part))
    if "properties" in s:
        named = b"".join(_msg(1, _str(1, k) + _msg(2, _schema(v))) for k, v in s["properties"].items())
        out += _msg(25, named)
    return out + _extensions(31, s)


def _parameter(p: dict[str, Any]) -> bytes:
    if p.get("in") == "body":
        body = _str(1, p.get("description", "")) + _str(2, p["name"]) + _str(3, "body")
        body += _bool(4, bool(p.get("required"))) + _msg(5, _schema(p.get("schema", {})))
        parameter = _msg(1, body)
    else:
        # Query (3) and path (4) sub-schemas share the numbers of required, in, description, name;
        # type is 6 in the query one (after allow_empty_value) and 5 in the path one.
        common = _bool(1, bool(p.get("required"))) + _str(2, p["in"]) + _str(3, p.get("description", ""))
        common += _str(4, p["name"])
        if p["in"] == "path":
            parameter = _msg(2, _msg(4, common + _str(5, p.get("type", ""))))
        else:
            parameter = _msg(2, _msg(3, common + _str(6, p.get("type", ""))))
    return _msg(1, parameter)  # ParametersItem.parameter


def _operation(op: dict[str, Any]) -> bytes:
    out = _strs(1, op.get("tags", [])) + _str(5, op.get("operationId", ""))
    out += _strs(6, op.get("produces", [])) + _strs(7, op.get("consumes", []))
    out += b"".join(_msg(8, _parameter(p)) for p in op.get("parameters", []))
    codes = b""
    for code, response in op.get("responses", {}).items():
        body = _str(1, response.get("description", ""))
        if "schema" in response:
            body += _msg(2, _msg(1, _schema(response["schema"])))
        codes += _msg(1, _str(1, code) + _msg(2, _msg(1, body)))
    out += _msg(9, codes) + _strs(10, op.get("schemes", []))
    return out + _extensions(13, op)


def encode_v2(doc: dict[str, Any]) -> bytes:
    """A Swagger 2.0 dict (as `openapi.openapi_v2` builds it) as gnostic's openapi.v2.Document."""
    info = doc.get("info", {})
    out = _str(1, doc.get("swagger", "2.0"))
    out += _msg(2, _str(1, info.get("title", "")) + _str(2, info.get("version", "")))
    paths = b""
    for path, item in doc.get("paths", {}).items():
        ops = b"".join(_msg(_METHODS[m], _operation(op)) for m, op in item.items() if m in _METHODS)
        paths += _msg(2, _str(1, path) + _msg(2, ops))
    out += _msg(8, paths)
    definitions = b"".join(
        _msg(1, _str(1, name) + _msg(2, _schema(schema)))
        for name, schema in doc.get("definitions", {}).items()
    )
    return out + _msg(9, definitions)


@cache
def openapi_v2_protobuf() -> bytes:
    """/openapi/v2 as client-go's protobuf (computed once)."""
    return encode_v2(openapi_v2())
