"""The one Kubernetes protobuf body kse reads: a DeleteOptions, as client-go's typed clients send it.

kubectl's typed clientset (kubectl drain --disable-eviction, kubectl delete of built-in kinds in
recent versions) sends `Content-Type: application/vnd.kubernetes.protobuf`. The body is upstream's
envelope (staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go): the magic
"k8s\\x00", then a runtime.Unknown {1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3:
contentEncoding, 4: contentType}, whose `raw` is the meta/v1 DeleteOptions message
(staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto: 1 gracePeriodSeconds, 2
preconditions {1 uid, 2 resourceVersion}, 3 orphanDependents, 4 propagationPolicy, 5 dryRun).

Decoded here into the JSON shape the handlers already check, so nothing else learns protobuf.
"""

from __future__ import annotations

from typing import Any

PROTOBUF_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf DeleteOptions."""


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, varint value or length-delimited bytes), in order; other wire types refused."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise ProtobufError("truncated field")
            out.append((number, data[i : i + size]))
            i += size
        else:
            raise ProtobufError(f"unexpected wire type {wire} of field {number}")
    return out


def _text(value: int | bytes, field: str) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError(f"{field}: expected a string")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise ProtobufError(f"{field}: not UTF-8") from None


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def decode_delete_options(body: bytes) -> dict[str, Any]:
    """The DeleteOptions of a protobuf body, as its JSON object (only the fields that were set)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    raw = b""
    kind = ""
    for number, value in _fields(body[len(MAGIC) :]):
        if number == 1 and isinstance(value, bytes):
            kind = next((_text(v, "kind") for n, v in _fields(value) if n == 2), "")
        elif number == 2 and isinstance(value, bytes):
            raw = value
    if kind and kind != "DeleteOptions":
        raise ProtobufError(f"expected a DeleteOptions, got {kind}")
    opts: dict[str, Any] = {}
    for number, value in _fields(raw):
        if number == 1 and isinstance(value, int):
            opts["gracePeriodSeconds"] = _signed(value)
        elif number == 2 and isinstance(value, bytes):
            pre: dict[str, str] = {}
            for n, v in _fields(value):
                if n == 1:
                    pre["uid"] = _text(v, "preconditions.uid")
                elif n == 2:
                    pre["resourceVersion"] = _text(v, "preconditions.resourceVersion")
            opts["preconditions"] = pre
        elif number == 3 and isinstance(value, int):
            opts["orphanDependents"] = bool(value)
        elif number == 4:
            opts["propagationPolicy"] = _text(value, "propagationPolicy")
        elif number == 5:
            opts.setdefault("dryRun", []).append(_text(value, "dryRun"))
    return opts
