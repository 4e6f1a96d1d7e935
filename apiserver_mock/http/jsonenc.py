"""Serialized `Object` -> its Kubernetes JSON dict: what `kse.objects.manifest.to_dict` returns,
about three times faster.

Every HTTP answer and watch event is this conversion (once per object version: `codec.JSONCache`
shares the text), so it decides what a cold LIST of thousands of pods costs and how much CPU a busy
watch takes. `to_dict` goes through protobuf's generic `json_format.MessageToDict` (which checks
for well-known types and options at every field and quotes 64-bit integers as strings) and then
walks the result again to turn those strings back into numbers (`_ints_back`). Here one function
per message type is built once from the descriptors, walking `ListFields()` exactly as
`MessageToDict` does (set fields only, in field-number order, under their json_name), with 64-bit
integers left as numbers and `google.protobuf.Struct` (managedFields' fieldsV1) as plain JSON.

Field types beyond what kse's protos use today (floats, bytes, enums, other well-known types) are
not reimplemented: a message type holding one is converted by `json_format` and `_ints_back`'s
rule, so the output never departs from `to_dict` (`tests/unit/test_http_jsonenc.py` compares
them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import json_format, struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from kse.objects.kinds import kind_of
from kse.objects.manifest import to_dict
from proto import kse_pb2 as pb

Convert = Callable[[Any], Any]

_SCALARS = frozenset(
    {
        FieldDescriptor.TYPE_STRING,
        FieldDescriptor.TYPE_BOOL,
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED32,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED32,
        FieldDescriptor.TYPE_SFIXED64,
    }
)
_STRUCT = struct_pb2.Struct.DESCRIPTOR.full_name
_VALUE = struct_pb2.Value.DESCRIPTOR.full_name

_converters: dict[str, Callable[[Message], dict[str, Any]] | None] = {}


def object_dict(obj_wire: bytes) -> dict[str, Any]:
    """The serialized `Object` as the dict `to_dict` makes of it (apiVersion and kind first)."""
    obj = pb.Object.FromString(obj_wire)
    kind = kind_of(obj)
    msg = getattr(obj, kind.field)
    convert = _message_converter(msg.DESCRIPTOR)
    if convert is None:
        return to_dict(obj)
    body = convert(msg)
    body.pop("apiVersion", None)
    body.pop("kind", None)
    return {"apiVersion": kind.api_version, "kind": kind.kind, **body}


def _message_converter(desc: Descriptor) -> Callable[[Message], dict[str, Any]] | None:
    """The converter of one message type (built on first use); None when the type, or one it
    holds, has a field type this module leaves to `json_format`."""
    name = desc.full_name
    if name in _converters:
        return _converters[name]
    if not _supported(desc, set()):
        _converters[name] = None
        return None
    # Per field: its JSON name and converter; None for a scalar that is its own JSON (most
    # fields: strings, integers, bools), which saves a call per field.
    fields: dict[str, tuple[str, Convert | None]] = {}

    def convert(msg: Message) -> dict[str, Any]:
        # ListFields: the set fields in field-number order, as MessageToDict walks them.
        out: dict[str, Any] = {}
        for fd, value in msg.ListFields():
            json_name, field_convert = fields[fd.name]
            out[json_name] = value if field_convert is None else field_convert(value)
        return out

    # Registered before its fields are built, so a recursive type finds itself.
    _converters[name] = convert
    for fd in desc.fields:
        field_convert = _field_converter(fd)
        fields[fd.name] = (fd.json_name, None if field_convert is _identity else field_convert)
    return convert


def _supported(desc: Descriptor, seen: set[str]) -> bool:
    if desc.full_name in (_STRUCT, _VALUE) or desc.full_name in seen:
        return True
    if desc.full_name.startswith("google.protobuf."):
        return False
    seen.add(desc.full_name)
    for fd in desc.fields:
        if fd.message_type is not None:
            if not _supported(fd.message_type, seen):
                return False
        elif fd.type not in _SCALARS:
            return False
    return True


def _identity(value: Any) -> Any:
    return value


def _field_converter(fd: FieldDescriptor) -> Convert:
    """How one field's value (as `ListFields` gives it) becomes JSON."""
    entry = fd.message_type
    if entry is not None and entry.GetOptions().map_entry:
        value_convert = _value_converter(entry.fields_by_name["value"])
        key_fd = entry.fields_by_name["key"]
        if key_fd.type == FieldDescriptor.TYPE_STRING:
            if value_convert is _identity:
                return dict
            return lambda m: {k: value_convert(v) for k, v in m.items()}
        # MessageToDict's key rule: bools as true/false, other keys through str().
        return lambda m: {_map_key(k): value_convert(v) for k, v in m.items()}
    one = _value_converter(fd)
    if fd.is_repeated:
        if one is _identity:
            return list
        return lambda values: [one(v) for v in values]
    return one


def _map_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _value_converter(fd: FieldDescriptor) -> Convert:
    """One (non-repeated) value: a message through its converter, a scalar as itself (64-bit
    integers as numbers, as `to_dict` turns them back)."""
    if fd.message_type is None:
        return _identity
    if fd.message_type.full_name == _STRUCT:
        return _struct
    if fd.message_type.full_name == _VALUE:
        return _value
    convert = _message_converter(fd.message_type)
    assert convert is not None  # _supported checked the whole tree of the outer type
    return convert


def _struct(msg: struct_pb2.Struct) -> dict[str, Any]:
    fields = msg.fields  # keys then lookups: a map's items() is a slow Python-level view
    return {k: _value(fields[k]) for k in fields}


def _value(v: struct_pb2.Value) -> Any:
    which = v.WhichOneof("kind")
    if which == "struct_value":
        return _struct(v.struct_value)
    if which == "string_value":
        return v.string_value
    if which == "bool_value":
        return v.bool_value
    if which == "null_value":
        return None
    if which == "list_value":
        return [_value(x) for x in v.list_value.values]
    if which == "number_value":
        # IntOrString (maxSurge: 1) is an integer in Kubernetes' JSON; json_format would write 1.0.
        n = v.number_value
        return int(n) if n.is_integer() else n
    # An unset Value, which json_format refuses, keeps json_format's own rules.
    return json_format.MessageToDict(v)
