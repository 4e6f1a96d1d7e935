"""Hand-assembled protobuf wire forms for the hot paths (watch fan-out, lists, writes).

Protobuf's encoding of a repeated message field is the concatenation of `tag + length + bytes` per
element, and a parser merges repeated occurrences of a singular message field (the last scalar
wins). So:

* an `Object` wrapper around a stored value is `tag(kind field) + len + value`;
* setting `metadata.resourceVersion` on it needs no decode/encode: append the encoding of
  `{metadata: {resource_version: "N"}}` to the payload (`object_wire`);
* a `WatchEvent` and a `WatchEventBatch` are concatenations of pre-serialized parts, so each event is
  serialized once and its bytes are reused for every watcher (`watch_event`, `frame_event`);
* an `ObjectList` is `ListMeta` plus the cached objects' bytes (`object_list`).

Every form here is checked against the protobuf runtime's own parse in the unit tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kse.objects.kinds import KINDS, Kind
from proto import kse_pb2 as pb

_LEN = 2  # wire type: length-delimited


_SMALL = [bytes((i,)) for i in range(128)]


def varint(n: int) -> bytes:
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(number: int) -> bytes:
    return varint((number << 3) | _LEN)


def field(number: int, payload: bytes) -> bytes:
    """One length-delimited field: tag, length, payload."""
    return tag(number) + varint(len(payload)) + payload


def _metadata_number(kind: Kind) -> int:
    number: int = kind.message.DESCRIPTOR.fields_by_name["metadata"].number
    return number


_OBJECT_TAG: dict[str, bytes] = {
    k.field: tag(pb.Object.DESCRIPTOR.fields_by_name[k.field].number) for k in KINDS
}
_META_NUMBER: dict[str, int] = {k.field: _metadata_number(k) for k in KINDS}
_RV_NUMBER: int = pb.ObjectMeta.DESCRIPTOR.fields_by_name["resource_version"].number


_RV_TAG = tag(_RV_NUMBER)
_META_TAG: dict[str, bytes] = {k.field: tag(_META_NUMBER[k.field]) for k in KINDS}


def rv_patch(kind: Kind, revision: int | str) -> bytes:
    """The encoding of `{metadata: {resource_version: "<revision>"}}` for a message of `kind`."""
    rv = str(revision).encode()
    inner = _RV_TAG + _SMALL[len(rv)] + rv  # a revision has at most 19 digits: one-byte lengths
    return _META_TAG[kind.field] + _SMALL[len(inner)] + inner


def object_wire(kind: Kind, value: bytes, revision: int | str | None = None) -> bytes:
    """The `Object` wrapper around a serialized typed message, optionally with its resourceVersion."""
    payload = value + rv_patch(kind, revision) if revision is not None else value
    return _OBJECT_TAG[kind.field] + varint(len(payload)) + payload


# WatchEvent: type = 1, object = 2, resource_version = 3. WatchEventBatch: events = 1.
ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
_TYPE_FIELD = {t: field(1, t.encode()) for t in (ADDED, MODIFIED, DELETED, BOOKMARK)}
_EVENT_OBJECT_TAG = tag(2)
_EVENTS_TAG = tag(1)


def watch_event(event_type: str, obj_wire: bytes | None, revision: int | str) -> bytes:
    """A serialized `WatchEvent` (obj_wire: a serialized `Object`, or None for a bookmark)."""
    parts = _TYPE_FIELD[event_type]
    if obj_wire is not None:
        parts += _EVENT_OBJECT_TAG + varint(len(obj_wire)) + obj_wire
    return parts + field(3, str(revision).encode())


def frame_event(event: bytes) -> bytes:
    """One element of `WatchEventBatch.events`; a batch is the concatenation of framed events."""
    return _EVENTS_TAG + varint(len(event)) + event


def bookmark_batch(revision: int) -> bytes:
    """A `WatchEventBatch` holding one BOOKMARK at `revision`."""
    return frame_event(watch_event(BOOKMARK, None, revision))


_ITEMS_TAG = tag(2)


def list_item(obj_wire: bytes) -> bytes:
    """One element of `ObjectList.items`."""
    return _ITEMS_TAG + varint(len(obj_wire)) + obj_wire


def object_list(
    revision: int, items: Iterable[bytes], continue_token: str = "", remaining: int | None = None
) -> bytes:
    """A serialized `ObjectList` from serialized `Object`s."""
    meta = pb.ListMeta(resource_version=str(revision))
    setattr(meta, "continue", continue_token)  # a Python keyword, so not a constructor argument
    if remaining is not None:
        meta.remaining_item_count = remaining
    return field(1, meta.SerializeToString()) + b"".join(list_item(i) for i in items)


def length_delimited_fields(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(field number, payload) of each field of a message whose fields are all length-delimited
    (ObjectList, WatchEventBatch, WatchEvent: strings and messages): the inverse of `field`, so
    the HTTP door can reuse an item's exact bytes (as a cache key) without decoding them.
    Raises ValueError on anything else (a varint or fixed-width field, a truncated payload)."""
    view = memoryview(data)
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _read_varint(view, pos)
        if key & 7 != _LEN:
            raise ValueError(f"field {key >> 3} has wire type {key & 7}, not length-delimited")
        size, pos = _read_varint(view, pos)
        if pos + size > end:
            raise ValueError("truncated length-delimited field")
        yield key >> 3, data[pos : pos + size]
        pos += size


def _read_varint(view: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(view):
            raise ValueError("truncated varint")
        b = view[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


_RESULT_CODE_TAG = varint((2 << 3) | 0)  # BatchResult.code: a varint field


def batch_result(obj_wire: bytes, code: int, message: str, revision: int | str) -> bytes:
    """One serialized BatchResult (proto/kse.proto): the written object's wire form, or an error's code
    and message (obj_wire b"", code != 0)."""
    out = field(1, obj_wire) if obj_wire else b""
    if code:
        out += _RESULT_CODE_TAG + varint(code)
    if message:
        out += field(3, message.encode())
    if revision:
        out += field(4, str(revision).encode())
    return out


def batch_response(results: Iterable[bytes]) -> bytes:
    """A serialized BindBatchResponse or CreateBatchResponse (the same wire form: field 1 repeated)
    of serialized BatchResults, in order."""
    return b"".join(field(1, r) for r in results)
