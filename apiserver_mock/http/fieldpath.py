"""Field paths and field sets of objects, in upstream's managedFields encoding (FieldsV1).

Server-side apply records which manager owns which fields as a set of paths, as
sigs.k8s.io/structured-merge-diff's fieldpath package does:

* a path is a tuple of elements: `f:<name>` (a struct field or a map key), `k:<json>` (an item of
  a `listType=map` list, by its key fields: `k:{"name":"web"}`), `v:<json>` (an item of a
  `listType=set` list: `v:"a"`). Atomic lists and scalars are leaves; so are empty maps;
* FieldsV1 is the set as a trie of those elements, where `"."` marks a path that is itself in the
  set and also has members below it (`"k:{\"name\":\"web\"}": {".": {}, "f:image": {}}`);
* a path prints as upstream's `.spec.containers[name="web"].image` in conflict messages.

Which lists are maps or sets comes from `listtypes.LISTS`, the schema from the protos
(`listtypes.field_schema`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from kse.objects.listtypes import ListMeta, MapOf, Schema, field_schema

__all__ = [
    "MISSING",
    "Path",
    "all_paths",
    "apply_set",
    "changed_paths",
    "copy_json",
    "delete_path",
    "from_fields_v1",
    "get_path",
    "item_element",
    "path_string",
    "to_fields_v1",
    "values_by_path",
]

Path = tuple[str, ...]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

# Server-set metadata never owned by a manager (upstream fieldmanager's stripped fields).
STRIPPED: frozenset[Path] = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata", "f:name"),
        ("f:metadata", "f:namespace"),
        ("f:metadata", "f:uid"),
        ("f:metadata", "f:resourceVersion"),
        ("f:metadata", "f:generation"),
        ("f:metadata", "f:creationTimestamp"),
        ("f:metadata", "f:deletionTimestamp"),
        ("f:metadata", "f:managedFields"),
        ("f:metadata", "f:selfLink"),
    }
)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _is_keyed(meta: ListMeta | None) -> bool:
    return meta is not None and meta.list_type in ("map", "set")


def item_element(item: Any, meta: ListMeta) -> str | None:
    """The path element of one item of a map or set list (None: not addressable, e.g. no keys)."""
    if meta.list_type == "set":
        return "v:" + _compact(item)
    if not isinstance(item, dict):
        return None
    keys = {k: item[k] for k in sorted(meta.map_keys) if k in item}
    return "k:" + _compact(keys) if keys else None


def _items(items: list[Any], meta: ListMeta) -> dict[str, Any] | None:
    """Items by their path element, or None when some item has no element (treat the list as atomic)."""
    out: dict[str, Any] = {}
    for item in items:
        element = item_element(item, meta)
        if element is None:
            return None
        out.setdefault(element, item)
    return out


# ---------------------------------------------------------------- sets of an object


def _stripped(paths: set[Path]) -> set[Path]:
    return {p for p in paths if not any(p[: len(s)] == s for s in STRIPPED)}


def apply_set(obj: dict[str, Any], schema: Schema) -> set[Path]:
    """Every field `obj` sets, as an applier owns them: leaves, plus each map/set list item."""
    out: set[Path] = set()
    _subtree(obj, schema, None, (), out, dot_maps=False)
    return _stripped(out)


def _subtree(
    value: Any, schema: Schema, meta: ListMeta | None, path: Path, out: set[Path], dot_maps: bool
) -> None:
    """Add the paths under `value`. `dot_maps` also adds each map field itself (what an Update that
    creates the map owns: upstream's `"f:labels": {".": {}, ...}`)."""
    if isinstance(value, dict) and value:
        if dot_maps and isinstance(schema, MapOf) and path:
            out.add(path)
        for key, child in value.items():
            sub, sub_meta = field_schema(schema, key)
            _subtree(child, sub, sub_meta, (*path, f"f:{key}"), out, dot_maps)
        return
    if isinstance(value, list) and value and _is_keyed(meta):
        assert meta is not None
        items = _items(value, meta)
        if items is not None:
            for element, item in items.items():
                out.add((*path, element))
                if isinstance(item, dict):
                    for key, child in item.items():
                        sub, sub_meta = field_schema(schema, key)
                        _subtree(child, sub, sub_meta, (*path, element, f"f:{key}"), out, dot_maps)
            return
    if path:
        out.add(path)


def all_paths(obj: Any, schema: Schema) -> set[Path]:
    """Every path `obj` has: fields, maps, list items and leaves (to forget owned fields it lost)."""
    return set(values_by_path(obj, schema))


def values_by_path(obj: Any, schema: Schema) -> dict[Path, Any]:
    """Every path of `obj` with the value there, in one walk (cheaper than one get_path each)."""
    out: dict[Path, Any] = {}
    _nodes(obj, schema, None, (), out)
    return out


def _nodes(value: Any, schema: Schema, meta: ListMeta | None, path: Path, out: dict[Path, Any]) -> None:
    if path:
        out[path] = value
    if isinstance(value, dict):
        for key, child in value.items():
            sub, sub_meta = field_schema(schema, key)
            _nodes(child, sub, sub_meta, (*path, f"f:{key}"), out)
    elif isinstance(value, list) and _is_keyed(meta):
        assert meta is not None
        for element, item in (_items(value, meta) or {}).items():
            _nodes(item, schema, None, (*path, element), out)


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars): several times faster than deepcopy."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def changed_paths(old: Any, new: Any, schema: Schema) -> tuple[set[Path], set[Path]]:
    """(added or modified, removed) paths from `old` to `new`: what an Update takes over and drops."""
    changed: set[Path] = set()
    removed: set[Path] = set()
    _diff(old, new, schema, None, (), changed, removed)
    return _stripped(changed), _stripped(removed)


def _diff(
    old: Any,
    new: Any,
    schema: Schema,
    meta: ListMeta | None,
    path: Path,
    changed: set[Path],
    removed: set[Path],
) -> None:
    if new is MISSING:
        if old is not MISSING and path:
            removed.add(path)
        return
    if old is MISSING:
        if path and (isinstance(schema, MapOf) or path[-1][:2] in ("k:", "v:")):
            changed.add(path)
        _subtree(new, schema, meta, path, changed, dot_maps=True)
        return
    if isinstance(old, dict) and isinstance(new, dict) and (old or new):
        for key in {**old, **new}:
            sub, sub_meta = field_schema(schema, key)
            _diff(
                old.get(key, MISSING),
                new.get(key, MISSING),
                sub,
                sub_meta,
                (*path, f"f:{key}"),
                changed,
                removed,
            )
        return
    if isinstance(old, list) and isinstance(new, list) and _is_keyed(meta):
        assert meta is not None
        old_items, new_items = _items(old, meta), _items(new, meta)
        if old_items is not None and new_items is not None and (old_items or new_items):
            for element in {**old_items, **new_items}:
                _diff(
                    old_items.get(element, MISSING),
                    new_items.get(element, MISSING),
                    schema,
                    None,
                    (*path, element),
                    changed,
                    removed,
                )
            return
    if old != new and path:
        changed.add(path)


# ---------------------------------------------------------------- reading and changing objects


def _child(value: Any, element: str) -> Any:
    if element.startswith("f:"):
        return value.get(element[2:], MISSING) if isinstance(value, dict) else MISSING
    if not isinstance(value, list):
        return MISSING
    if element.startswith("v:"):
        wanted = json.loads(element[2:])
        return next((item for item in value if item == wanted), MISSING)
    if element.startswith("k:"):
        keys = json.loads(element[2:])
        return next(
            (
                item
                for item in value
                if isinstance(item, dict) and all(item.get(k) == v for k, v in keys.items())
            ),
            MISSING,
        )
    return MISSING


def get_path(obj: Any, path: Path) -> Any:
    """The value at `path`, or MISSING."""
    value = obj
    for element in path:
        value = _child(value, element)
        if value is MISSING:
            return MISSING
    return value


def delete_path(obj: Any, path: Path) -> None:
    """Remove the field or list item at `path` (nothing happens if it is not there)."""
    if not path:
        return
    parent = get_path(obj, path[:-1])
    element = path[-1]
    if element.startswith("f:") and isinstance(parent, dict):
        parent.pop(element[2:], None)
    elif isinstance(parent, list):
        item = _child(parent, element)
        if item is not MISSING:
            parent[:] = [i for i in parent if i is not item]


# ---------------------------------------------------------------- FieldsV1 and path strings


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 trie of a set of paths."""
    root: dict[str, Any] = {}
    members = set(paths)
    for path in sorted(members):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    for path in members:
        node = root
        for element in path:
            node = node[element]
        if node:
            node["."] = {}
    return _sorted(root)


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted(node[k]) for k in sorted(node, key=lambda k: (k != ".", k))}


def from_fields_v1(fields: Any, where: str = "fieldsV1") -> set[Path]:
    """The set a FieldsV1 trie holds; ValueError naming `where` for a malformed one."""
    if not isinstance(fields, dict):
        raise ValueError(f"{where}: must be an object")
    out: set[Path] = set()
    _read(fields, (), out, where)
    return out


def _read(node: dict[str, Any], path: Path, out: set[Path], where: str) -> None:
    if not node and path:
        out.add(path)
    for key, child in node.items():
        if key == ".":
            if child != {}:
                raise ValueError(f'{where}: "." must map to an empty object')
            if path:
                out.add(path)
            continue
        if key[:2] not in ("f:", "k:", "v:", "i:") or not isinstance(child, dict):
            raise ValueError(f"{where}: invalid field set element {key!r}")
        if key[:2] in ("k:", "v:"):
            try:
                json.loads(key[2:])
            except ValueError:
                raise ValueError(f"{where}: invalid field set element {key!r}") from None
        _read(child, (*path, key), out, where)


def path_string(path: Path) -> str:
    """Upstream's printed form: .spec.containers[name="web"].image, .metadata.finalizers[="x"]."""
    parts = []
    for element in path:
        kind, body = element[:2], element[2:]
        if kind == "f:":
            parts.append(f".{body}")
        elif kind == "k:":
            keys = json.loads(body)
            parts.append("[" + ",".join(f"{k}={_compact(v)}" for k, v in keys.items()) + "]")
        elif kind == "v:":
            parts.append(f"[={body}]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)
