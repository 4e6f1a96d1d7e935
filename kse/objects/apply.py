"""kubectl's client-side apply: the last-applied-configuration annotation and the three-way merge.

`kubectl apply` (k8s.io/kubectl/pkg/cmd/apply/patcher.go) stores each manifest it applies, as
JSON, in the object's `kubectl.kubernetes.io/last-applied-configuration` annotation
(k8s.io/kubectl/pkg/util/apply.go, GetModifiedConfiguration). On the next apply it builds a
strategic merge patch from three versions (strategicpatch.CreateThreeWayMergePatch):

- *original*: the previous manifest (the annotation on the live object),
- *modified*: the new manifest (carrying its own annotation),
- *current*: the live object,

and the server applies that patch to the live object. The result, which `three_way_merge`
computes directly, is:

- a field in *modified* is set to its value there (objects and maps recurse key by key);
- a field in *original* but no longer in *modified* is removed: the user deleted it from the
  manifest (so removing `spec.schedulingGates` ungates the pod);
- a field only in *current* (defaulted by the server, set by a controller or by hand) is kept.

Lists are replaced as a whole unless their Go field carries `patchStrategy:"merge"` (see
`MERGE_KEYS`, taken from the struct tags of k8s.io/api/core/v1/types.go and metav1.ObjectMeta):
then items are matched by their merge key (`name` for containers and scheduling gates), each
matched item merges recursively, items removed from the manifest since the last apply are removed,
and items only the server has are kept. Lists of scalars with the merge strategy (`finalizers`)
merge as sets. The order of the result is upstream's (strategicpatch's `mergeSortedSlice` with
`$setElementOrder`): the manifest's items in the manifest's order, with the server-only items
slotted in where they stood in the live list.

kse's gRPC API has no PATCH: the caller sends the merged object as one Update with the live
resourceVersion as precondition, which stores what the patch would have produced.

Everything here is pure: dicts in, dicts out, keyed by JSON (camelCase) names, walking the
protobuf descriptor of the kind beside them to know each field's type.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from kse.objects.listtypes import LISTS

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# (message full name, JSON field name) -> merge key of a list merged by key; None: a list of
# scalars merged as a set. Every other list is atomic (replaced whole), as upstream: tolerations,
# taints, command, args, node selector terms, ... carry no patch strategy in k8s.io/api. Derived
# from the one table of list semantics (`kse.objects.listtypes`) that the server's strategic merge
# patch, server-side apply and OpenAPI documents read too.
MERGE_KEYS: dict[tuple[str, str], str | None] = {
    key: (meta.patch_merge_key if meta.list_type == "map" else None)
    for key, meta in LISTS.items()
    if meta.merges
}

# Metadata the server owns: never taken from a manifest, never removed because a manifest that
# once carried it (`kse get -o yaml > f`) no longer does.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp")

_SET = object()  # a scalar list merged as a set: the item is its own key
_ATOMIC = object()  # a list replaced whole


class ApplyError(ValueError):
    """A last-applied annotation that cannot be read; the message says so."""


def last_applied_json(manifest: dict[str, Any]) -> str:
    """The annotation's value for a manifest: its JSON without the annotation itself.

    As kubectl writes it: compact, keys sorted (Go's encoding/json sorts map keys), the trailing
    newline of json.Encoder, and `metadata.annotations` always present, `{}` when the manifest has
    none (GetModifiedConfiguration starts from an empty map when there is none).
    """
    clean = copy.deepcopy(manifest)
    meta = clean.setdefault("metadata", {})
    annotations = meta.get("annotations")
    meta["annotations"] = dict(annotations) if isinstance(annotations, dict) else {}
    meta["annotations"].pop(LAST_APPLIED, None)
    return json.dumps(clean, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def with_last_applied(manifest: dict[str, Any]) -> dict[str, Any]:
    """A copy of the manifest carrying its own last-applied annotation (what apply sends)."""
    out = copy.deepcopy(manifest)
    value = last_applied_json(manifest)
    meta = out.setdefault("metadata", {})
    meta.setdefault("annotations", {})[LAST_APPLIED] = value
    return out


def original_of(current: dict[str, Any]) -> dict[str, Any] | None:
    """The previous manifest from a live object's annotation, or None if it was never applied.

    Raises ApplyError if the annotation is there but is not a JSON object.
    """
    text = current.get("metadata", {}).get("annotations", {}).get(LAST_APPLIED)
    if not text:
        return None
    try:
        original = json.loads(text)
    except ValueError as e:
        raise ApplyError(f"metadata.annotations[{LAST_APPLIED}]: not valid JSON: {e}") from None
    if not isinstance(original, dict):
        raise ApplyError(f"metadata.annotations[{LAST_APPLIED}]: expected a JSON object")
    return original


def _for_merge(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """A manifest without what apply never writes: status (a subresource; Update ignores it),
    apiVersion/kind (the live object's own), server-owned metadata."""
    if manifest is None:
        return None
    out = {k: v for k, v in manifest.items() if k not in ("status", "apiVersion", "kind")}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k not in SERVER_METADATA}
    return out


def three_way_merge(
    original: dict[str, Any] | None,
    modified: dict[str, Any],
    current: dict[str, Any],
    descriptor: Descriptor,
) -> dict[str, Any]:
    """The live object `current` after applying `modified` over `original` (see the module doc).

    `descriptor` is the kind's message (kse.v1.Pod): it says which values are objects, maps and
    lists, and `MERGE_KEYS` which lists merge by key. Inputs are not modified. `status`,
    apiVersion, kind and server-owned metadata are taken from `current` whatever the manifests say.
    """
    return _merge_object(_for_merge(original), _for_merge(modified) or {}, current, descriptor)


# ---------------------------------------------------------------- the walk


@cache
def _fields(desc: Descriptor) -> dict[str, FieldDescriptor]:
    return {f.json_name: f for f in desc.fields}


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def _merge_object(
    original: dict[str, Any] | None,
    modified: dict[str, Any],
    current: dict[str, Any],
    desc: Descriptor | None,
) -> dict[str, Any]:
    """An object (a message): known fields by their type, unknown ones as plain JSON."""
    fields = _fields(desc) if desc is not None else {}
    return _merge_keys(original, modified, current, lambda key: _value_merger(fields.get(key), desc))


def _merge_keys(
    original: dict[str, Any] | None,
    modified: dict[str, Any],
    current: dict[str, Any],
    merger_for: Callable[[str], Callable[[Any, Any, Any], Any]],
) -> dict[str, Any]:
    """Objects and maps alike: set what `modified` has, drop what only `original` had, keep the rest."""
    out = {k: copy.deepcopy(v) for k, v in current.items()}
    for key, value in modified.items():
        if key in current:
            before = original.get(key) if original is not None else None
            out[key] = merger_for(key)(before, value, current[key])
        else:
            out[key] = copy.deepcopy(value)
    if original is not None:
        for key in original:
            if key not in modified:
                out.pop(key, None)
    return out


def _value_merger(fd: FieldDescriptor | None, parent: Descriptor | None) -> Callable[[Any, Any, Any], Any]:
    """How to merge the value of one field: (original, modified, current) -> result."""
    if fd is None:
        return _merge_plain
    if _is_map(fd):
        value_fd = fd.message_type.fields_by_name["value"]

        def merge_map(o: Any, m: Any, c: Any) -> Any:
            if not (isinstance(m, dict) and isinstance(c, dict)):
                return copy.deepcopy(m)
            return _merge_keys(
                o if isinstance(o, dict) else None, m, c, lambda _key: _value_merger(value_fd, None)
            )

        return merge_map
    if fd.is_repeated:
        assert parent is not None
        rule = MERGE_KEYS.get((parent.full_name, fd.json_name), _ATOMIC)
        if rule is _ATOMIC:
            return lambda o, m, c: copy.deepcopy(m)
        key = _SET if rule is None else rule
        item_desc = fd.message_type

        def merge_list(o: Any, m: Any, c: Any) -> Any:
            if not (isinstance(m, list) and isinstance(c, list)):
                return copy.deepcopy(m)
            return _merge_list(o if isinstance(o, list) else None, m, c, key, item_desc)

        return merge_list
    if fd.message_type is not None:
        desc = fd.message_type

        def merge_message(o: Any, m: Any, c: Any) -> Any:
            if not (isinstance(m, dict) and isinstance(c, dict)):
                return copy.deepcopy(m)
            return _merge_object(o if isinstance(o, dict) else None, m, c, desc)

        return merge_message
    return lambda o, m, c: copy.deepcopy(m)


def _merge_plain(original: Any, modified: Any, current: Any) -> Any:
    """A value kse has no type for (a field only a newer manifest knows): objects recurse, the
    rest is replaced, as strategic merge treats a field without patch metadata."""
    if isinstance(modified, dict) and isinstance(current, dict):
        return _merge_object(original if isinstance(original, dict) else None, modified, current, None)
    return copy.deepcopy(modified)


def _item_key(item: Any, key: object) -> Any:
    """The identity of a list item: its merge key's value (a scalar item is its own key)."""
    if key is _SET:
        return json.dumps(item, sort_keys=True) if isinstance(item, dict | list) else (type(item), item)
    if isinstance(item, dict) and key in item:
        return item[key]
    return None


def _merge_list(
    original: list[Any] | None, modified: list[Any], current: list[Any], key: object, desc: Descriptor | None
) -> list[Any]:
    """A list merged by key (see the module doc). If an item of `modified` or `current` lacks the
    key, the list is replaced: there is no identity to merge by (upstream refuses the patch)."""
    m_keys = [_item_key(i, key) for i in modified]
    c_keys = [_item_key(i, key) for i in current]
    if None in m_keys or None in c_keys:
        return copy.deepcopy(modified)
    o_by_key = {_item_key(i, key): i for i in original or []}
    o_by_key.pop(None, None)
    c_by_key = dict(zip(c_keys, current, strict=True))
    in_modified = set(m_keys)

    ours: list[Any] = []  # the manifest's items, merged with the live ones, in manifest order
    for k, item in zip(m_keys, modified, strict=True):
        if k in c_by_key and key is not _SET and isinstance(item, dict) and isinstance(c_by_key[k], dict):
            before = o_by_key.get(k)
            ours.append(_merge_object(before if isinstance(before, dict) else None, item, c_by_key[k], desc))
        else:
            ours.append(copy.deepcopy(item))
    # Items only the server has, unless the previous manifest had them (then the user removed them).
    theirs = [
        copy.deepcopy(i)
        for k, i in zip(c_keys, current, strict=True)
        if k not in in_modified and k not in o_by_key
    ]
    return _interleave(theirs, ours, c_keys, key)


def _interleave(left: Sequence[Any], right: Sequence[Any], server_order: list[Any], key: object) -> list[Any]:
    """Merge two lists, each kept in its own order, placing a `left` item before a `right` one
    when it stood before it in the live list (strategicpatch.mergeSortedSlice's rule)."""
    position = {k: i for i, k in enumerate(server_order)}
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li = position.get(_item_key(left[i], key))
            ri = position.get(_item_key(right[j], key))
            if li is not None and ri is not None and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out
