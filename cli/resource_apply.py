"""`kse apply` and `kse create`: kubectl's client-side apply and create.

`apply` (`kse.objects.apply` has the merge): the manifest is stored in the
`kubectl.kubernetes.io/last-applied-configuration` annotation on create and update, and an update
is the three-way merge of that previous manifest, the new one and the live object, so a field
removed from the manifest is removed from the object while fields set by others stay. The merged
object is sent as one Update with the read resourceVersion as precondition; a conflicting
concurrent write is retried from a fresh read. If nothing changes the object is "unchanged" and no
write is sent. `create` is one Create per object (AlreadyExists is an error); the server names an
object that has only `metadata.generateName`.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from cli.resource_io import CommandError, Out, describe, from_server, run
from cli.resource_manifests import ManifestObject, namespace_for, read_manifests
from kse.client.clientset import Clientset
from kse.client.errors import ApiError, ConflictError, NotFoundError
from kse.objects.apply import (
    LAST_APPLIED,
    ApplyError,
    last_applied_json,
    original_of,
    three_way_merge,
    with_last_applied,
)
from kse.objects.kinds import Kind
from kse.objects.manifest import to_dict

APPLY_CONFLICT_RETRIES = 5


def _as_message(data: dict[str, Any], kind: Kind) -> Message:
    out = kind.message()
    json_format.ParseDict(data, out, ignore_unknown_fields=True)
    return out


def _manifest_with_namespace(m: ManifestObject, ns: str) -> dict[str, Any]:
    """The manifest as applied: with the namespace it lands in, as kubectl's builder sets it
    (so the last-applied annotation names it too)."""
    manifest = copy.deepcopy(m.fields)
    if m.kind.namespaced:
        manifest.setdefault("metadata", {})["namespace"] = ns
    return manifest


async def _apply_one(cs: Clientset, m: ManifestObject, flag_ns: str, out: Out) -> None:
    """Create the object with its annotation, or Update it to the three-way merge (kubectl's
    apply.go / patcher.go flow, with one Update in place of the PATCH)."""
    client = cs.resource(m.kind)
    meta = m.obj.metadata  # type: ignore[attr-defined]
    name = meta.name
    if not name:
        out.error(
            f'error: error when retrieving current configuration of "{m.source}": '
            f"resource name may not be empty"
        )
        return
    try:
        ns = namespace_for(m, flag_ns)
    except CommandError as e:
        out.error(f"error: {e}")
        return
    modified = with_last_applied(_manifest_with_namespace(m, ns))
    label = describe(m.kind, name)
    try:
        for attempt in range(APPLY_CONFLICT_RETRIES):
            try:
                live = await client.get_in(ns, name)
            except NotFoundError:
                try:
                    await client.create(_as_message(modified, m.kind))
                except ApiError as e:
                    out.error(from_server(e, "creating", m.source))
                    return
                out.line(f"{label} created")
                return
            current = to_dict(live)
            try:
                original = original_of(current)
            except ApplyError as e:
                out.error(f'error: error when applying patch to "{m.source}": {label}: {e}')
                return
            if original is None and attempt == 0:
                # kubectl's warningNoLastAppliedConfigAnnotation, naming the group resource as it does.
                resource = m.kind.resource + (f".{m.kind.group}" if m.kind.group else "")
                out.note(
                    f"Warning: resource {resource}/{name} is missing the {LAST_APPLIED} annotation "
                    "which is required by kse apply. kse apply should only be used on resources created "
                    "declaratively by either kse create --save-config or kse apply. The missing annotation "
                    "will be patched automatically."
                )
            desired = _as_message(
                three_way_merge(original, modified, current, m.kind.message.DESCRIPTOR), m.kind
            )
            if desired == live:
                out.line(f"{label} unchanged")
                return
            desired.metadata.resource_version = live.metadata.resource_version  # type: ignore[attr-defined]
            try:
                await client.update(desired)
            except ConflictError:
                continue  # someone wrote in between: merge onto the new state
            except ApiError as e:
                out.error(from_server(e, "applying patch", m.source))
                return
            out.line(f"{label} configured")
            return
        out.error(
            f"error: {label}: the object keeps changing; gave up after {APPLY_CONFLICT_RETRIES} conflicts"
        )
    except ApiError as e:
        out.error(from_server(e, "retrieving current configuration of", m.source))


def cmd_apply(args: argparse.Namespace) -> int:
    async def body(cs: Clientset, out: Out) -> None:
        objects = read_manifests(args.filename, args.recursive, out, args.validate)
        if not objects and not out.failed:
            raise CommandError("no objects passed to apply")
        for m in objects:
            await _apply_one(cs, m, args.namespace, out)

    return run(args, body)


async def _create_one(cs: Clientset, m: ManifestObject, flag_ns: str, save_config: bool, out: Out) -> None:
    """kubectl create: one Create; the server names the object if the manifest has generateName."""
    try:
        ns = namespace_for(m, flag_ns)
    except CommandError as e:
        out.error(f"error: {e}")
        return
    obj = m.obj
    if m.kind.namespaced:
        obj.metadata.namespace = ns  # type: ignore[attr-defined]
    if save_config:
        obj.metadata.annotations[LAST_APPLIED] = last_applied_json(_manifest_with_namespace(m, ns))  # type: ignore[attr-defined]
    try:
        created = await cs.resource(m.kind).create(obj)
    except ApiError as e:
        out.error(from_server(e, "creating", m.source))
        return
    out.line(f"{describe(m.kind, created.metadata.name)} created")  # type: ignore[attr-defined]


def cmd_create(args: argparse.Namespace) -> int:
    async def body(cs: Clientset, out: Out) -> None:
        objects = read_manifests(args.filename, args.recursive, out, args.validate)
        if not objects and not out.failed:
            raise CommandError("no objects passed to create")
        for m in objects:
            await _create_one(cs, m, args.namespace, args.save_config, out)

    return run(args, body)
