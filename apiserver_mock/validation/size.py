"""The object size limit (etcd's request limit, 1.5 MiB), reported against the field that is to blame."""

from __future__ import annotations

from google.protobuf.message import Message

from apiserver_mock.validation.field import FieldErrors

MAX_OBJECT_BYTES = 1536 * 1024  # etcd's default --max-request-bytes


def check_size(errs: FieldErrors, msg: Message) -> int:
    """Record an error naming the largest field when `msg` serializes to more than the limit."""
    size = msg.ByteSize()
    if size > MAX_OBJECT_BYTES:
        path, part = largest_field(msg)
        errs.add_raw(
            f"{path or '<root>'}: Too long: the object is {size} bytes, more than the limit of "
            f"{MAX_OBJECT_BYTES} bytes (this field holds {part} bytes)"
        )
    return size


def largest_field(msg: Message, path: str = "") -> tuple[str, int]:
    """Descend into the biggest part of `msg` until a leaf; return its JSON path and size."""
    best_path, best_size = path, msg.ByteSize()
    cur: Message | None = msg
    while cur is not None:
        child_path, child_size, child = "", -1, None
        for fd, value in cur.ListFields():
            name = f"{best_path}.{fd.json_name}" if best_path else fd.json_name
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                for k, v in value.items():
                    sz = len(str(k)) + (v.ByteSize() if isinstance(v, Message) else len(str(v)))
                    if sz > child_size:
                        child_path, child_size, child = f"{name}[{k}]", sz, None
            elif fd.is_repeated:
                for i, item in enumerate(value):
                    sz = item.ByteSize() if isinstance(item, Message) else len(str(item))
                    if sz > child_size:
                        child_path, child_size = f"{name}[{i}]", sz
                        child = item if isinstance(item, Message) else None
            elif isinstance(value, Message):
                sz = value.ByteSize()
                if sz > child_size:
                    child_path, child_size, child = name, sz, value
            else:
                sz = len(value) if isinstance(value, str | bytes) else 8
                if sz > child_size:
                    child_path, child_size, child = name, sz, None
        if child_size < 0:
            break
        best_path, best_size, cur = child_path, child_size, child
    return best_path, best_size
