"""`kse delete`: by name, by label or field selector, `--all` (in a namespace or `-A`), or the
objects named in manifests; flag combinations checked as kubectl checks them."""

from __future__ import annotations

import argparse
import asyncio
import time

from cli.resource_io import CommandError, Out, error_text, from_server, lookup, quoted, run
from cli.resource_manifests import namespace_for, read_manifests
from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError
from kse.objects.kinds import Kind


def _delete_usage_error(args: argparse.Namespace) -> str | None:
    """kubectl delete's checks of the flag combinations (delete.go Validate, the resource builder)."""
    selecting = bool(args.selector or args.field_selector or args.all)
    if args.all and args.selector:
        return "cannot set --all and --selector at the same time"
    if args.all and args.field_selector:
        return "cannot set --all and --field-selector at the same time"
    if args.filename:
        if args.resource or args.names:
            return (
                "there is no need to specify a resource type as a separate argument "
                "when passing arguments in resource/name form or with -f"
            )
        if selecting:
            return "-f cannot be combined with --selector, --field-selector or --all"
        return None
    if args.now and args.grace_period != -1:
        return "--now and --grace-period cannot be specified together"
    if not args.resource:
        return "you must provide one or more resources by argument or filename"
    has_names = bool(args.names) or "/" in args.resource
    if selecting and has_names:
        return "name cannot be provided when a selector is specified"
    if args.all_namespaces and has_names:
        return "a resource cannot be retrieved by name across all namespaces"
    return None


async def _delete_targets(
    cs: Clientset, args: argparse.Namespace, out: Out
) -> list[tuple[Kind, str, str, str]]:
    """(kind, namespace, name, source) of every object the command names or selects."""
    targets: list[tuple[Kind, str, str, str]] = []
    if args.filename:
        for m in read_manifests(args.filename, args.recursive, out):
            try:
                ns = namespace_for(m, args.namespace)
            except CommandError as e:
                out.error(f"error: {e}")
                continue
            targets.append((m.kind, ns, m.obj.metadata.name, m.source))  # type: ignore[attr-defined]
        return targets
    resource, slash, first = args.resource.partition("/")
    kind = lookup(resource)
    if args.selector or args.field_selector or args.all:
        ns = "" if (args.all_namespaces or not kind.namespaced) else (args.namespace or "default")
        page = await cs.resource(kind).list_all(
            ns, label_selector=args.selector, field_selector=args.field_selector
        )
        for obj in page.items:
            meta = obj.metadata  # type: ignore[attr-defined]
            targets.append((kind, meta.namespace if kind.namespaced else "", meta.name, ""))
        return targets
    names = ([first] if slash else []) + list(args.names)
    if not names:
        raise CommandError(f'resource(s) were provided, but no name was specified for "{resource}"')
    ns = (args.namespace or "default") if kind.namespaced else ""
    targets.extend((kind, ns, name, "") for name in names)
    return targets


FORCE_WARNING = (
    "Warning: Immediate deletion does not wait for confirmation that the running resource has been "
    "terminated. The resource may continue to run on the cluster indefinitely."
)
WAIT_POLL_S = 0.2


def grace_period(args: argparse.Namespace) -> int | None:
    """DeleteOptions.gracePeriodSeconds as kubectl delete's Complete derives it: --now is 1;
    --grace-period=0 without --force is 1 (no accidental force deletion); --force alone is 0;
    a negative value (the default -1) leaves it unset (the object's own period)."""
    grace: int = 1 if args.now else args.grace_period
    if grace == 0 and not args.force:
        grace = 1
    if args.force and grace < 0:
        grace = 0
    return grace if grace >= 0 else None


async def _wait_gone(cs: Clientset, kind: Kind, ns: str, name: str, uid: str, within: float) -> bool:
    """Until the object (that incarnation: `uid`) is gone, as kubectl delete's --wait; False when
    `within` s (> 0) passed first."""
    deadline = time.monotonic() + within if within > 0 else None
    client = cs.resource(kind)
    while True:
        try:
            obj = await client.get_in(ns, name)
        except NotFoundError:
            return True
        if obj.metadata.uid != uid:  # type: ignore[attr-defined]
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        await asyncio.sleep(WAIT_POLL_S)


def cmd_delete(args: argparse.Namespace) -> int:
    async def body(cs: Clientset, out: Out) -> None:
        problem = _delete_usage_error(args)
        if problem:
            raise CommandError(problem)
        selecting = bool(args.selector or args.field_selector or args.all)
        # As kubectl: --ignore-not-found defaults to true when objects are selected, since one that
        # vanished between the list and the delete is what was asked for anyway.
        ignore_not_found = selecting if args.ignore_not_found is None else args.ignore_not_found
        targets = await _delete_targets(cs, args, out)
        if selecting and not targets:
            out.line("No resources found")
            return
        grace = grace_period(args)
        if args.force:
            out.note(FORCE_WARNING)
        pending: list[tuple[Kind, str, str, str]] = []
        for kind, ns, name, source in targets:
            try:
                deleted = await cs.resource(kind).delete_in(ns, name, grace_period_seconds=grace)
            except NotFoundError as e:
                if not ignore_not_found:
                    out.error(from_server(e, "deleting", source) if source else error_text(e))
                continue
            except ApiError as e:
                out.error(from_server(e, "deleting", source) if source else error_text(e))
                continue
            out.line(f"{quoted(kind, name)} deleted")
            if deleted.metadata.deletion_timestamp and args.wait:  # type: ignore[attr-defined]
                pending.append((kind, ns, name, deleted.metadata.uid))  # type: ignore[attr-defined]
        # As kubectl: a graceful delete is waited for (the pod Terminating until its kubelet ends it).
        for kind, ns, name, uid in pending:
            if not await _wait_gone(cs, kind, ns, name, uid, args.timeout):
                out.error(f"error: timed out waiting for the condition on {kind.resource}/{name}")

    return run(args, body)
