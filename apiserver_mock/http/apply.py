"""Server-side apply (`application/apply-patch+yaml`) and the managedFields of ordinary writes.

Public API (stable; the HTTP routes call it). Objects are Kubernetes JSON dicts; nothing passed in
is modified; `now` is an RFC 3339 time in seconds (`2026-01-02T03:04:05Z`).

    server_side_apply(live: dict | None, applied: dict, manager: str, force: bool, now: str,
                      *, subresource: str = "") -> dict
        The object after `manager` applies `applied` to `live` (None: the object does not exist
        yet), with metadata.managedFields updated. Raises ApplyConflict (HTTP 409) when another
        manager owns a field this apply changes and `force` is false, ApplyError (a ValueError,
        HTTP 400/422) for an applied configuration that cannot be applied.
    record_update(old: dict | None, new: dict, manager: str, now: str,
                  *, subresource: str = "") -> dict
        `new` with managedFields as upstream records a non-apply write (create, update, patch)
        by `manager`: an `Update` entry owning the fields it added or changed; other managers
        lose the fields it changed or removed.
    parse_applied(body: bytes) -> dict
        The applied configuration of an apply request body (YAML or JSON); ApplyError if it is
        not one object.
    ApplyConflict.status() -> dict
        The metav1.Status kube-apiserver answers with the conflicts (409, reason Conflict).

Semantics are sigs.k8s.io/structured-merge-diff's (merge/update.go), simplified to what kse can
honour:

* managers are told apart by (manager, operation, subresource), as upstream does; an object that
  has no managedFields yet is owned whole by `before-first-apply` (Update) at its first apply, and
  ordinary updates of such an object record nothing (upstream tracks from a create or an apply);
* an apply owns exactly the fields it sets (leaves and list items: `apply_set`); a field another
  manager owns and this apply sets to a *different* value is a conflict; the same value is shared
  ownership; `force` takes the field over;
* the applied configuration merges into the object (maps by key, `listType=map` lists by their
  keys, sets by value, atomic lists and scalars replaced; `null` unsets a field it owns); a field
  the manager applied before and no longer sends is removed, unless another manager owns it too;
* the main resource ignores `status` and the status subresource only takes `status`, as upstream's
  reset fields for pods and nodes do;
* for the manager `kubectl` only, as upstream: conflicts on fields the object's client-side apply
  annotation (last-applied-configuration) still describes truthfully are taken over without
  `force` (moving from client-side to server-side apply), and that annotation, when present, is
  rewritten to the applied configuration;
* more than ten Update managers: the oldest fold into `ancient-changes` (capmanagers.go).

Not done (said plainly): no conversion between versions (kse serves one version per kind); a live
list holding two items with one key keeps the first (upstream tolerates such duplicates more
carefully); a list item the applier stops sending goes whole when the applier alone owned the item
itself, even if another manager owns a field inside it (upstream's prune reads the same way; not
checked against structured-merge-diff itself).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from apiserver_mock.http.fieldpath import (
    MISSING,
    Path,
    all_paths,
    apply_set,
    changed_paths,
    copy_json,
    delete_path,
    from_fields_v1,
    item_element,
    path_string,
    to_fields_v1,
    values_by_path,
)
from kse.objects.kinds import BY_KIND
from kse.objects.listtypes import ListMeta, Schema, field_schema, kind_schema

__all__ = [
    "ApplyConflict",
    "ApplyError",
    "Conflict",
    "ManagerKey",
    "parse_applied",
    "record_update",
    "server_side_apply",
]

APPLY = "Apply"
UPDATE = "Update"
BEFORE_FIRST_APPLY = "before-first-apply"
ANCIENT_CHANGES = "ancient-changes"
MAX_UPDATE_MANAGERS = 10  # upstream's DefaultMaxUpdateManagers
KUBECTL = "kubectl"  # the manager whose applies upstream reconciles with client-side apply
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class ApplyError(ValueError):
    """An apply (or a write's managedFields) that cannot be honoured; the message names the field."""


@dataclass(frozen=True)
class ManagerKey:
    """Who owns fields: one managedFields entry's identity."""

    manager: str
    operation: str
    subresource: str = ""


@dataclass(frozen=True)
class Conflict:
    """Another manager owns a field this apply changes."""

    manager: ManagerKey
    api_version: str
    time: str
    path: Path

    @property
    def field(self) -> str:
        """The field as upstream prints it: .spec.containers[name="web"].image."""
        return path_string(self.path)

    def manager_text(self) -> str:
        """Upstream's printManager: "mgr", with subresource and "using v1 at <time>" for updates."""
        text = f'"{self.manager.manager}"'
        if self.manager.subresource:
            text += f' with subresource "{self.manager.subresource}"'
        if self.manager.operation == UPDATE:
            text += f" using {self.api_version}" + (f" at {self.time}" if self.time else "")
        return text


class ApplyConflict(Exception):
    """The apply changes fields other managers own (HTTP 409, reason Conflict).

    `message` is upstream's (k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager/internal/
    conflict.go), and `causes()` the Status details' causes, one per conflicting field.
    """

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        self.message = _conflict_message(conflicts)
        super().__init__(self.message)

    def causes(self) -> list[dict[str, str]]:
        """metav1.StatusCause entries: type FieldManagerConflict, the manager, the field."""
        return [
            {"type": "FieldManagerConflict", "message": f"conflict with {c.manager_text()}", "field": c.field}
            for c in self.conflicts
        ]

    def status(self) -> dict[str, Any]:
        """The whole 409 body, as errors.NewApplyConflict builds it (no name or kind in details)."""
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": "Conflict",
            "details": {"causes": self.causes()},
            "code": 409,
        }


def _conflict_message(conflicts: list[Conflict]) -> str:
    if len(conflicts) == 1:
        c = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {c.manager_text()}: {c.field}"
    by_manager: dict[str, list[str]] = {}
    for c in conflicts:
        by_manager.setdefault(c.manager_text(), []).append(c.field)
    lines = []
    for manager in sorted(by_manager):
        lines.append(f"conflicts with {manager}:")
        lines.extend(f"- {field}" for field in by_manager[manager])
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


# ---------------------------------------------------------------- managedFields in and out


@dataclass
class _Entry:
    key: ManagerKey
    api_version: str
    time: str
    fields: set[Path]


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def _read_entries(obj: dict[str, Any] | None) -> list[_Entry]:
    raw = _meta(obj).get("managedFields") or []
    if not isinstance(raw, list):
        raise ApplyError("metadata.managedFields: must be a list")
    entries: list[_Entry] = []
    for i, item in enumerate(raw):
        where = f"metadata.managedFields[{i}]"
        if not isinstance(item, dict):
            raise ApplyError(f"{where}: must be an object")
        if item.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise ApplyError(f'{where}.fieldsType: Unsupported value: "{item.get("fieldsType")}": "FieldsV1"')
        try:
            fields = from_fields_v1(item.get("fieldsV1") or {}, f"{where}.fieldsV1")
        except ValueError as err:
            raise ApplyError(str(err)) from None
        operation = item.get("operation", "")
        if operation not in (APPLY, UPDATE):
            raise ApplyError(f'{where}.operation: Unsupported value: "{operation}": "Apply", "Update"')
        key = ManagerKey(str(item.get("manager", "")), operation, str(item.get("subresource", "")))
        entries.append(_Entry(key, str(item.get("apiVersion", "")), str(item.get("time", "")), fields))
    return entries


def _write_entries(obj: dict[str, Any], entries: list[_Entry]) -> None:
    """Store the non-empty entries, ordered as upstream sorts them (operation, time, manager)."""
    kept = [e for e in entries if e.fields]
    kept.sort(key=lambda e: (e.key.operation, e.time, e.key.manager, e.api_version, e.key.subresource))
    out = []
    for e in kept:
        entry: dict[str, Any] = {
            "manager": e.key.manager,
            "operation": e.key.operation,
            "apiVersion": e.api_version,
        }
        if e.time:
            entry["time"] = e.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = to_fields_v1(e.fields)
        if e.key.subresource:
            entry["subresource"] = e.key.subresource
        out.append(entry)
    meta = obj.setdefault("metadata", {})
    if out:
        meta["managedFields"] = out
    else:
        meta.pop("managedFields", None)


def _prune(entries: list[_Entry], obj: dict[str, Any]) -> None:
    """Forget owned paths the object no longer has."""
    present = all_paths(obj, kind_schema(str(obj.get("kind") or "")))
    for e in entries:
        e.fields &= present


# ---------------------------------------------------------------- apply


def parse_applied(body: bytes) -> dict[str, Any]:
    """The applied configuration in an `application/apply-patch+yaml` body (YAML; JSON is YAML)."""
    try:
        text = body.decode("utf-8")
        loaded = yaml.safe_load(text) if text.strip() else None
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise ApplyError(f"error decoding YAML: {err}") from None
    if not isinstance(loaded, dict):
        got = "nothing" if loaded is None else type(loaded).__name__
        raise ApplyError(f"the applied configuration must be one YAML or JSON object, got {got}")
    return loaded


def _check_applied(applied: Any, live: dict[str, Any] | None, manager: str) -> Schema:
    if not manager:
        raise ApplyError("fieldManager: Required value: is required for apply requests")
    if not isinstance(applied, dict):
        raise ApplyError("the applied configuration must be an object")
    for field in ("apiVersion", "kind"):
        if not isinstance(applied.get(field), str) or not applied[field]:
            raise ApplyError(f"{field}: Required value: must be set in an applied configuration")
    schema = kind_schema(applied["kind"])
    if schema is None:
        raise ApplyError(f'kind: Unsupported value: "{applied["kind"]}" is not a kind kse serves')
    if "metadata" in applied and not isinstance(applied["metadata"], dict):
        raise ApplyError("metadata: must be an object")
    if (applied.get("metadata") or {}).get("managedFields") is not None:
        raise ApplyError("metadata.managedFields must be nil")
    served = BY_KIND[applied["kind"]].api_version
    if applied["apiVersion"] != served:
        raise ApplyError(
            "Incorrect version specified in apply patch. "
            f"Specified patch version: {applied['apiVersion']}, expected: {served}"
        )
    if live is not None:
        for field in ("apiVersion", "kind"):
            if live.get(field) and live[field] != applied[field]:
                raise ApplyError(f'{field}: Invalid value: "{applied[field]}": the object is a {live[field]}')
    return schema


def _scoped(applied: dict[str, Any], schema: Schema, subresource: str) -> dict[str, Any]:
    """The part of `applied` this endpoint takes (reset fields: status only via /status)."""
    if "status" not in _json_names(schema):
        return applied
    if subresource == "status":
        meta = applied.get("metadata") or {}
        head = {k: v for k, v in meta.items() if k in ("name", "namespace")}
        return {k: applied[k] for k in ("apiVersion", "kind", "status") if k in applied} | {"metadata": head}
    return {k: v for k, v in applied.items() if k != "status"}


def _json_names(schema: Schema) -> set[str]:
    fields = getattr(schema, "fields", ())
    return {fd.json_name for fd in fields}


def _differs(live_value: Any, applied_value: Any) -> bool:
    return live_value is not MISSING and live_value != applied_value


def server_side_apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    manager: str,
    force: bool,
    now: str,
    *,
    subresource: str = "",
) -> dict[str, Any]:
    """`live` after `manager` applies `applied` (see the module doc)."""
    try:
        return _apply(live, applied, manager, force, now, subresource)
    except RecursionError:
        raise ApplyError("the applied configuration is nested too deeply") from None


def _apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    manager: str,
    force: bool,
    now: str,
    subresource: str,
) -> dict[str, Any]:
    schema = _check_applied(applied, live, manager)
    config = _scoped(copy_json(applied), schema, subresource)
    mine = ManagerKey(manager, APPLY, subresource)
    owned = apply_set(config, schema)

    entries = _read_entries(live)
    if live is not None and not entries:
        # skipnonapplied.go: the fields written before the first apply belong to one Update manager.
        existing = changed_paths(MISSING, live, schema)[0]
        entries = [
            _Entry(ManagerKey(BEFORE_FIRST_APPLY, UPDATE), str(live.get("apiVersion", "")), "", existing)
        ]
    previous = next((e.fields for e in entries if e.key == mine), set())
    others = [e for e in entries if e.key != mine]

    conflicts: list[tuple[_Entry, Path]] = []
    if live is not None:
        live_values, config_values = values_by_path(live, schema), values_by_path(config, schema)
        for e in others:
            for path in sorted(owned & e.fields):
                if path[-1][:2] in ("k:", "v:"):
                    continue  # an item both keep is shared, not changed
                if _differs(live_values.get(path, MISSING), config_values.get(path, MISSING)):
                    conflicts.append((e, path))
    if conflicts and not force and manager == KUBECTL and live is not None:
        # lastappliedmanager.go: kubectl moving from client-side to server-side apply may take the
        # fields its last-applied annotation still describes truthfully, without conflicts.
        allowed = _last_applied_fields(live, schema)
        left = [(e, p) for e, p in conflicts if p not in allowed]
        force = not left
        conflicts = conflicts if force else left
    if conflicts and not force:
        raise ApplyConflict([Conflict(e.key, e.api_version, e.time, p) for e, p in conflicts])
    for e, path in conflicts:
        e.fields.discard(path)

    merged = _merge(copy_json(live) if live is not None else {}, config, schema, None)
    assert isinstance(merged, dict)
    _keep_server_metadata(merged, live)
    still_owned = set().union(*(e.fields for e in others)) if others else set()
    for path in sorted(previous - owned - still_owned, key=len):
        delete_path(merged, path)

    entries = [*others, _Entry(mine, str(applied["apiVersion"]), now, owned)]
    _prune(entries, merged)
    _write_entries(merged, entries)
    if manager == KUBECTL:
        _sync_last_applied(merged, applied)
    return merged


def _last_applied_fields(live: dict[str, Any], schema: Schema) -> set[Path]:
    """The fields of the last-applied annotation whose values the live object still has."""
    text = (_meta(live).get("annotations") or {}).get(LAST_APPLIED)
    try:
        last = json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return set()
    if not isinstance(last, dict) or last.get("apiVersion") != live.get("apiVersion"):
        return set()
    live_values, last_values = values_by_path(live, schema), values_by_path(last, schema)
    return {p for p in apply_set(last, schema) if p in live_values and live_values[p] == last_values.get(p)}


def _sync_last_applied(merged: dict[str, Any], applied: dict[str, Any]) -> None:
    """lastappliedupdater.go: kubectl's server-side apply keeps an existing client-side apply
    annotation up to date, so a later client-side apply diffs against what was really applied."""
    annotations = _meta(merged).get("annotations")
    if not isinstance(annotations, dict) or not annotations.get(LAST_APPLIED):
        return
    config = copy_json(applied)
    sent = _meta(config).get("annotations")
    if isinstance(sent, dict):
        sent.pop(LAST_APPLIED, None)
    annotations[LAST_APPLIED] = json.dumps(config, sort_keys=True, separators=(",", ":")) + "\n"


def _keep_server_metadata(merged: dict[str, Any], live: dict[str, Any] | None) -> None:
    """The server's own metadata stays the live object's whatever the configuration says."""
    meta = merged.setdefault("metadata", {})
    live_meta = _meta(live)
    for field in ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp"):
        if field in live_meta:
            meta[field] = live_meta[field]
        else:
            meta.pop(field, None)


def _merge(lhs: Any, rhs: Any, schema: Schema, meta: ListMeta | None) -> Any:
    """The applied value `rhs` merged into the live value `lhs` (structured-merge-diff's merge)."""
    if isinstance(rhs, dict) and isinstance(lhs, dict):
        out = dict(lhs)
        for key, value in rhs.items():
            sub, sub_meta = field_schema(schema, key)
            if value is None:
                out.pop(key, None)
                continue
            merged = _merge(lhs.get(key, MISSING), value, sub, sub_meta)
            out[key] = merged
        return out
    if (
        isinstance(rhs, list)
        and isinstance(lhs, list)
        and meta is not None
        and meta.list_type in ("map", "set")
    ):
        merged_list = _merge_items(lhs, rhs, schema, meta)
        if merged_list is not None:
            return merged_list
    if isinstance(rhs, dict):
        return _merge({}, rhs, schema, meta)
    return copy_json(rhs)


def _merge_items(lhs: list[Any], rhs: list[Any], schema: Schema, meta: ListMeta) -> list[Any] | None:
    """Merge two keyed lists as structured-merge-diff's visitListItems does: live-only items keep
    their places, shared and new items come in the applied list's order. None: some item has no
    key (the list is then replaced)."""
    lkeys = [item_element(i, meta) for i in lhs]
    rkeys = [item_element(i, meta) for i in rhs]
    if None in lkeys or None in rkeys:
        return None
    lmap: dict[str | None, Any] = {}
    for key, item in zip(lkeys, lhs, strict=True):
        lmap.setdefault(key, item)
    rmap: dict[str | None, Any] = {}
    for key, item in zip(rkeys, rhs, strict=True):
        if key in rmap:
            raise ApplyError(f"duplicate entries for key {path_string((str(key),))}")
        rmap[key] = item
    shared = [k for k in rkeys if k in lmap]
    out: list[Any] = []
    merged: set[str | None] = set()

    def take(key: str | None) -> None:
        merged.add(key)
        out.append(_merge(lmap.get(key, MISSING), rmap[key], schema, None))
        if shared and shared[0] == key:
            shared.pop(0)

    li = ri = 0
    while li < len(lkeys) or ri < len(rkeys):
        if li < len(lkeys) and ri < len(rkeys):
            key = lkeys[li]
            if key == rkeys[ri]:
                take(key)
                li, ri = li + 1, ri + 1
                continue
            if key in rmap and shared and shared[0] != key:
                li += 1  # a shared item out of the applied order: it comes when the applied list has it
                continue
        if li < len(lkeys):
            key = lkeys[li]
            if key not in rmap:
                out.append(lhs[li])
                li += 1
                continue
            if key in merged:
                li += 1
                continue
        if ri < len(rkeys):
            take(rkeys[ri])
            ri += 1
            continue
        li += 1  # unreachable: every applied item is merged once ri reaches the end
    return out


# ---------------------------------------------------------------- ordinary writes


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    now: str,
    *,
    subresource: str = "",
) -> dict[str, Any]:
    """`new` with the managedFields of an ordinary write by `manager` (see the module doc).

    The managedFields the client sent win when they differ from the stored ones (a client may
    rewrite them, as upstream allows); `[{}]` clears them all; an empty list or none keeps them.
    """
    try:
        return _update(old, new, manager, now, subresource)
    except RecursionError:
        raise ApplyError("the object is nested too deeply") from None


def _update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, now: str, subresource: str
) -> dict[str, Any]:
    if not isinstance(new, dict):
        raise ApplyError("the object must be a JSON object")
    if not isinstance(new.get("metadata", {}), dict):
        raise ApplyError("metadata: must be an object")
    schema = kind_schema(str(new.get("kind") or (old or {}).get("kind") or ""))
    out = copy_json(new)
    sent = _meta(out).get("managedFields")
    stored = _meta(old).get("managedFields")
    if sent == [{}]:
        out["metadata"].pop("managedFields", None)
        return out
    base = out if sent and sent != stored else old
    entries = _read_entries(base)
    if old is not None and not entries:
        return out  # skipnonapplied.go: an object nobody tracks yet starts being tracked at an apply
    changed, removed = changed_paths(old if old is not None else MISSING, out, schema)
    mine = ManagerKey(manager or "unknown", UPDATE, subresource)
    for e in entries:
        if e.key != mine:
            e.fields = {
                p for p in e.fields if p not in changed and not any(p[: len(r)] == r for r in removed)
            }
    if changed:
        entry = next((e for e in entries if e.key == mine), None)
        if entry is None:
            entry = _Entry(mine, str(out.get("apiVersion", "")), now, set())
            entries.append(entry)
        entry.fields |= changed
        entry.time, entry.api_version = now, str(out.get("apiVersion", "")) or entry.api_version
    _prune(entries, out)
    _cap_updates(entries)
    _write_entries(out, entries)
    return out


def _cap_updates(entries: list[_Entry]) -> None:
    """capmanagers.go: past MAX_UPDATE_MANAGERS Update entries, the oldest are merged into one
    `ancient-changes` entry (the time of the newest merged), so managedFields cannot grow forever."""
    updates = sorted((e for e in entries if e.key.operation == UPDATE), key=lambda e: (e.time, e.key.manager))
    count = len([e for e in updates if e.fields])
    bucket_key = ManagerKey(ANCIENT_CHANGES, UPDATE)
    bucket = next((e for e in entries if e.key == bucket_key), None)
    first: _Entry | None = None
    for entry in updates:
        if count <= MAX_UPDATE_MANAGERS:
            return
        if not entry.fields:
            continue
        if first is None:
            first = entry  # the oldest: it becomes the bucket (or already is)
            continue
        if entry is bucket:
            continue
        if bucket is None:
            bucket = _Entry(bucket_key, first.api_version, first.time, first.fields)
            entries[entries.index(first)] = bucket
        bucket.fields = bucket.fields | entry.fields
        bucket.time = entry.time
        entries.remove(entry)
        count -= 1
