"""Strategic merge patch (`application/strategic-merge-patch+json`) for the served kinds.

Public API (stable; the HTTP routes call it):

    apply_patch(original: dict, patch: dict, kind: str | Kind) -> dict
        The object `original` (Kubernetes JSON, as `manifest.to_dict` writes it) with `patch`
        applied, as kube-apiserver applies a strategic merge patch to kind `kind` ("Pod", ...,
        or its `kse.objects.kinds.Kind`). `apply_strategic_merge_patch` is the same function.
        Neither argument is modified. Raises PatchError (a ValueError) with a message for a patch
        that does not apply; the route answers 400 (malformed) or 422 as upstream does.

Semantics are upstream's k8s.io/apimachinery/pkg/util/strategicpatch/patch.go (mergeMap,
mergeSlice, mergePatchIntoOriginal), applied on the server side (MergeParallelList and
IgnoreUnmatchedNulls both on):

* maps merge key by key; `null` deletes a key;
* a list merges by its merge key (containers by name, conditions by type, ports by containerPort,
  env by name, ownerReferences by uid) or, for a list of scalars with the merge strategy
  (finalizers), as a deduplicated union; every other list is replaced whole (tolerations and taints
  have no strategy upstream). Which is which comes from `listtypes.LISTS`, nothing else;
* directives: `$patch: replace | delete | merge` in a map, `{"$patch": "delete", <key>: ...}` and
  `{"$patch": "replace"}` as list items, `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
  `$setElementOrder/<field>` (the order kubectl asks the merged list to have).

A field the kind does not have is merged as free-form JSON (maps merge, lists are replaced), not
refused: the HTTP layer decodes the result with the request's fieldValidation, which is where
upstream reports unknown fields too.
"""

from __future__ import annotations

from typing import Any

from apiserver_mock.http.fieldpath import copy_json
from kse.objects.kinds import Kind
from kse.objects.listtypes import ListMeta, Schema, field_schema, kind_schema

__all__ = ["PatchError", "apply_patch", "apply_strategic_merge_patch"]

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
SET_ELEMENT_ORDER = "$setElementOrder/"


class PatchError(ValueError):
    """A strategic merge patch that cannot be applied; the message says why (and where)."""


# ---------------------------------------------------------------- entry point


def apply_patch(original: dict[str, Any], patch: dict[str, Any], kind: str | Kind) -> dict[str, Any]:
    """`original` with the strategic merge `patch` applied, for kind `kind` (see the module doc)."""
    schema = kind_schema(kind)
    if schema is None:
        raise PatchError(f'strategic merge patch is not supported for kind "{kind}"')
    if not isinstance(patch, dict):
        raise PatchError(f"the patch must be a JSON object, got {_type_name(patch)}")
    if not isinstance(original, dict):
        raise PatchError(f"the object must be a JSON object, got {_type_name(original)}")
    try:
        merged = _merge_map(copy_json(original), copy_json(patch), schema, "")
    except RecursionError:
        raise PatchError("the patch is nested too deeply") from None
    return merged if merged is not None else {}


apply_strategic_merge_patch = apply_patch


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), "number")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ---------------------------------------------------------------- maps


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], schema: Schema, path: str
) -> dict[str, Any] | None:
    """Merge `patch` into `original` (both owned: mutated); None means "delete this map"."""
    if DIRECTIVE in patch:
        directive = patch.pop(DIRECTIVE)
        if directive == "replace":
            return _merge_map({}, patch, schema, path)  # the patch, cleaned of directives
        if directive == "delete":
            return None
        if directive != "merge":
            where = path or "the patch"
            raise PatchError(f"{where}: bad $patch value {directive!r} (replace, delete, merge)")
    _retain_keys(original, patch, path)
    _set_element_orders(original, patch, schema, path)
    for key, value in patch.items():
        is_delete_list = key.startswith(DELETE_FROM_PRIMITIVE_LIST)
        if is_delete_list:
            key = key[len(DELETE_FROM_PRIMITIVE_LIST) :]
            if key not in original:
                continue
            if not isinstance(value, list):
                raise PatchError(f"{_join(path, DELETE_FROM_PRIMITIVE_LIST + key)}: must be a list")
        elif key.startswith("$"):
            raise PatchError(f"{_join(path, key)}: unknown patch directive")
        where = _join(path, key)
        if value is None:
            original.pop(key, None)
            continue
        sub, meta = field_schema(schema, key)
        if key not in original or type(original[key]) is not type(value):
            if not is_delete_list:
                original[key] = _fresh(value, sub, meta, where)
            continue
        current: Any = original[key]
        if isinstance(value, dict):
            merged = _merge_map(current, value, sub, where)
            if merged is None:
                del original[key]
            else:
                original[key] = merged
        elif isinstance(value, list):
            original[key] = _merge_list(current, value, sub, meta, is_delete_list, where)
        else:
            original[key] = value
    return original


def _fresh(value: Any, schema: Schema, meta: ListMeta | None, path: str) -> Any:
    """A patch value with nothing to merge into: itself, without directives or nulls."""
    if isinstance(value, dict):
        merged = _merge_map({}, value, schema, path)
        return {} if merged is None else merged
    if isinstance(value, list):
        return _merge_list([], value, schema, meta, False, path)
    return value


def _retain_keys(original: dict[str, Any], patch: dict[str, Any], path: str) -> None:
    """`$retainKeys`: drop the original's keys not listed (patch.go applyRetainKeysDirective)."""
    if RETAIN_KEYS not in patch:
        return
    keep = patch.pop(RETAIN_KEYS)
    if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
        raise PatchError(f"{_join(path, RETAIN_KEYS)}: invalid patch format of retainKeys (a list of names)")
    kept = set(keep)
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in kept:
            raise PatchError(
                f"{_join(path, RETAIN_KEYS)}: invalid patch format of retainKeys ({key!r} is not in it)"
            )
    for key in [k for k in original if k not in kept]:
        del original[key]


# ---------------------------------------------------------------- lists


def _merge_list(
    original: list[Any],
    patch: list[Any],
    schema: Schema,
    meta: ListMeta | None,
    is_delete_list: bool,
    path: str,
) -> list[Any]:
    """mergeSlice: merge by key, union of scalars, delete from a primitive list, or replace."""
    if is_delete_list:
        return [item for item in original if item not in patch]
    if meta is None or not meta.merges:
        return [_fresh(item, schema, None, f"{path}[{i}]") for i, item in enumerate(patch)]
    merged, plain, live = _merge_items(original, patch, schema, meta, path)
    return _normalize_order(merged, plain, live, meta.patch_merge_key if _has_maps(merged, plain) else None)


def _has_maps(*lists: list[Any]) -> bool:
    return any(isinstance(item, dict) for items in lists for item in items)


def _merge_items(
    original: list[Any], patch: list[Any], schema: Schema, meta: ListMeta, path: str
) -> tuple[list[Any], list[Any], list[Any]]:
    """The merged items in no particular order, the patch's plain items, and the live order.

    Scalars: a deduplicated union. Maps: `$patch` items applied first, then each patch item merged
    into the live item with the same merge key or appended (mergeSliceWithoutSpecialElements).
    """
    if not _has_maps(original, patch):
        return _dedupe([*original, *patch]), patch, original
    key = meta.patch_merge_key
    if key is None:
        raise PatchError(f"{path}: cannot merge lists without a merge key")
    original, patch = _special_elements(original, patch, key, path)
    live = list(original)
    for i, item in enumerate(patch):
        where = f"{path}[{i}]"
        _require_key(item, key, where)
        match = next((j for j, o in enumerate(original) if _identity(o, key) == item[key]), None)
        if match is None:
            original.append(_fresh(item, schema, None, where))
        else:
            into = _merge_map(original[match], item, schema, where)
            original[match] = {} if into is None else into
    return original, patch, live


def _require_key(item: Any, key: str, path: str) -> None:
    if not isinstance(item, dict):
        raise PatchError(f"{path}: expected an object with merge key {key!r}, got {_type_name(item)}")
    if key not in item:
        raise PatchError(f"{path}: map {item} does not contain declared merge key: {key}")


def _special_elements(
    original: list[Any], patch: list[Any], key: str, path: str
) -> tuple[list[Any], list[Any]]:
    """List items carrying `$patch` (patch.go mergeSliceWithSpecialElements)."""
    plain: list[Any] = []
    replace = False
    for i, item in enumerate(patch):
        if not isinstance(item, dict) or DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == "delete":
            _require_key(item, key, f"{path}[{i}]")
            original = [o for o in original if not (isinstance(o, dict) and o.get(key) == item[key])]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError(f"{path}[{i}]: merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"{path}[{i}]: bad $patch value {directive!r} (replace, delete)")
    if replace:
        return [], plain
    return original, plain


def _dedupe(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _identity(item: Any, key: str | None) -> Any:
    return item.get(key) if key is not None and isinstance(item, dict) else item


def _index(order: list[Any], item: Any, key: str | None) -> int:
    ident = _identity(item, key)
    for i, candidate in enumerate(order):
        if _identity(candidate, key) == ident:
            return i
    return -1


def _normalize_order(
    merged: list[Any], patch_order: list[Any], server_order: list[Any], key: str | None
) -> list[Any]:
    """patch.go normalizeElementOrder: patch items in patch order, server-only items in live order,
    interleaved by their places in the live list (mergeSortedSlice)."""
    in_patch = {repr(_identity(p, key)) for p in patch_order}
    patch_items = [m for m in merged if repr(_identity(m, key)) in in_patch]
    server_only = [m for m in merged if repr(_identity(m, key)) not in in_patch]
    patch_items.sort(key=lambda m: _index(patch_order, m, key))
    server_only.sort(key=lambda m: _index(server_order, m, key))
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if i >= len(server_only):
            out.append(patch_items[j])
            j += 1
        elif j >= len(patch_items):
            out.append(server_only[i])
            i += 1
        else:
            li, ri = _index(server_order, server_only[i], key), _index(server_order, patch_items[j], key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch_items[j])
                j += 1
    return out


def _set_element_orders(original: dict[str, Any], patch: dict[str, Any], schema: Schema, path: str) -> None:
    """`$setElementOrder/<field>`: merge that list now and give it the requested order
    (patch.go mergePatchIntoOriginal); the list is then removed from the patch."""
    for directive in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(directive)
        key = directive[len(SET_ELEMENT_ORDER) :]
        where = _join(path, key)
        if not isinstance(order, list):
            raise PatchError(f"{_join(path, directive)}: must be a list")
        sub, meta = field_schema(schema, key)
        patch_list = patch.pop(key, None) if isinstance(patch.get(key), list) else None
        if patch_list is not None:
            _check_order(patch_list, order, meta.patch_merge_key if meta is not None else None, where)
        current = original.get(key) if isinstance(original.get(key), list) else None
        if current is None and patch_list is None:
            continue
        merge_key = meta.patch_merge_key if meta is not None else None
        if current is not None and patch_list is not None and meta is not None and meta.merges:
            # The live order here is the merge's own (live items, then new ones), as upstream's
            # in-place slice gives it: a server-only item stays before the items added after it.
            merged = server_order = _merge_items(current, patch_list, sub, meta, where)[0]
        elif patch_list is not None:
            merged = _merge_list(current or [], patch_list, sub, meta, False, where)
            server_order = current or []
        else:
            merged = server_order = current or []
        if not _has_maps(merged, order):
            merge_key = None
        elif merge_key is not None:
            for i, item in enumerate(order):
                _require_key(item, merge_key, f"{_join(path, directive)}[{i}]")
        original[key] = _normalize_order(merged, order, list(server_order), merge_key)


def _check_order(patch_list: list[Any], order: list[Any], key: str | None, path: str) -> None:
    """The patch's items must appear in `$setElementOrder` in the same relative order
    (patch.go validatePatchWithSetOrderList); deletions and directives are not ordered."""
    items = [i for i in patch_list if not (isinstance(i, dict) and DIRECTIVE in i)]
    j = 0
    for item in items:
        ident = _identity(item, key if isinstance(item, dict) else None)
        while j < len(order) and _identity(order[j], key if isinstance(order[j], dict) else None) != ident:
            j += 1
        if j == len(order):
            raise PatchError(f"{path}: the order in the patch list doesn't match the $setElementOrder list")
        j += 1
