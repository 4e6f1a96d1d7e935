"""Protobuf messages for the gRPC door, built from the descriptors in `proto/kse.proto`.

`random_message` fills random fields of any message type (scalars at their type's extremes,
strings from the bad pool, nested messages a few levels down); `mutate_message` changes a few
fields of a valid message the same way. `raw_payloads` gives the bytes of the raw-bytes calls:
random bytes, truncated and bit-flipped serializations of real requests. All are functions of the
`random.Random` they are given.
"""

from __future__ import annotations

import random
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from chaos.fuzz import values
from kse.objects.kinds import Kind
from kse.objects.manifest import ManifestError, decode_object
from proto import kse_pb2 as pb

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
# google.protobuf.Value and friends hold IntOrString fields: filled through their JSON shape.
_WELL_KNOWN = ("google.protobuf.Value", "google.protobuf.Struct", "google.protobuf.ListValue")


def _scalar(rng: random.Random, fd: FieldDescriptor) -> Any:
    t = fd.type
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return rng.choice((lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)))
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return rng.choice((0.0, -1.0, 1e300 if t == FieldDescriptor.TYPE_DOUBLE else 3e38, float("nan")))
    if t == FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FieldDescriptor.TYPE_STRING:
        if rng.random() < 0.05:
            return values.huge_string(rng)
        return rng.choice((*values.BAD_STRINGS, *values.BAD_ENUMS, *values.NAMES))
    if t == FieldDescriptor.TYPE_BYTES:
        return rng.randbytes(rng.randint(0, 64))
    if t == FieldDescriptor.TYPE_ENUM:
        numbers = [v.number for v in fd.enum_type.values]
        return rng.choice((*numbers, 12345))  # an unknown enum number too (open enums keep it)
    raise TypeError(f"no scalar for field type {t}")


def _fill_well_known(rng: random.Random, msg: Message) -> None:
    name = msg.DESCRIPTOR.full_name
    if name == "google.protobuf.Value":
        pick = rng.randrange(5)
        if pick == 0:
            msg.number_value = rng.choice((-1.0, 0.5, 1e300, 2.0**53 + 1))  # type: ignore[attr-defined]
        elif pick == 1:
            msg.string_value = rng.choice(("50%", "101%", "abc", "", "-5%", "1.5%"))  # type: ignore[attr-defined]
        elif pick == 2:
            msg.bool_value = True  # type: ignore[attr-defined]
        elif pick == 3:
            msg.list_value.values.add().string_value = "x"  # type: ignore[attr-defined]
        # pick 4: left empty (no kind set)


def _set_field(rng: random.Random, msg: Message, fd: FieldDescriptor, depth: int) -> None:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        target = getattr(msg, fd.name)
        value_fd = fd.message_type.fields_by_name["value"]
        for _ in range(rng.choice((1, 2, 3, 200))):
            key = rng.choice((*values.BAD_STRINGS, *values.NAMES, f"k{rng.randrange(10**6)}"))
            if value_fd.message_type is None:
                target[key] = _scalar(rng, value_fd)
            else:
                random_fill(rng, target[key], depth + 1)
        return
    if fd.is_repeated:
        target = getattr(msg, fd.name)
        for _ in range(rng.choice((1, 2, 5))):
            if fd.message_type is None:
                target.append(_scalar(rng, fd))
            else:
                random_fill(rng, target.add(), depth + 1)
        return
    if fd.message_type is not None:
        random_fill(rng, getattr(msg, fd.name), depth + 1)
        return
    setattr(msg, fd.name, _scalar(rng, fd))


def random_fill(rng: random.Random, msg: Message, depth: int = 0, max_depth: int = 5) -> Message:
    """Set a random subset of `msg`'s fields (recursively, up to `max_depth` levels), in place."""
    desc: Descriptor = msg.DESCRIPTOR
    if desc.full_name in _WELL_KNOWN:
        _fill_well_known(rng, msg)
        return msg
    if depth >= max_depth or not desc.fields:
        if desc.fields and rng.random() < 0.3:
            fd = rng.choice([f for f in desc.fields if f.message_type is None] or list(desc.fields))
            if fd.message_type is None:
                _set_field(rng, msg, fd, depth)
        return msg
    for fd in rng.sample(list(desc.fields), k=min(len(desc.fields), rng.randint(1, 4))):
        _set_field(rng, msg, fd, depth)
    return msg


def mutate_message(rng: random.Random, msg: Message, changes: int = 2) -> Message:
    """A copy of `msg` with `changes` random fields (anywhere in its tree) set to random values."""
    out = type(msg)()
    out.CopyFrom(msg)
    for _ in range(changes):
        node: Message = out
        # Walk down a few set message fields, then change one field there.
        for _ in range(rng.randint(0, 4)):
            set_msgs = [
                (fd, v)
                for fd, v in node.ListFields()
                if fd.message_type is not None
                and not fd.is_repeated
                and fd.message_type.full_name not in _WELL_KNOWN
            ]
            if not set_msgs:
                break
            node = rng.choice(set_msgs)[1]
        fields = list(node.DESCRIPTOR.fields)
        if not fields:
            continue
        fd = rng.choice(fields)
        if (not fd.is_repeated and fd.message_type is None) or rng.random() < 0.5:
            node.ClearField(fd.name)
        _set_field(rng, node, fd, 3)
    return out


def object_of(kind: Kind, body: dict[str, Any]) -> pb.Object | None:
    """The protobuf `Object` of a JSON object of `kind`, or None when it does not decode."""
    try:
        return decode_object(body, kind).obj
    except (ManifestError, RecursionError, ValueError, TypeError, OverflowError):
        return None


def raw_payloads(rng: random.Random, valid: bytes) -> bytes:
    """Bytes for a raw call: random, truncated, bit-flipped, or a valid request with junk appended."""
    pick = rng.randrange(6)
    if pick == 0:
        return rng.randbytes(rng.randint(0, 512))
    if pick == 1 and valid:
        return valid[: rng.randrange(len(valid))]
    if pick == 2 and valid:
        data = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if pick == 3:
        return valid + rng.randbytes(rng.randint(1, 32))
    if pick == 4:
        # A length-delimited field claiming more bytes than follow (a truncated nested message).
        return b"\x0a\xff\xff\xff\x0f" + rng.randbytes(16)
    # Deeply nested groups/messages: field 1 (Object.pod) nested in itself, as far as it goes.
    inner = b""
    for _ in range(rng.choice((50, 120, 1000))):
        inner = b"\x0a" + _varint(len(inner)) + inner
    return inner


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
