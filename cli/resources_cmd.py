"""`kse apply`, `kse create`, `kse get`, `kse delete`: kubectl's everyday verbs against the kse API server.

    kse apply -f pod.yaml     # create, or update if it exists: "pod/nginx created|configured|unchanged"
    kse create -f pod.yaml    # create only (AlreadyExists is an error); honours metadata.generateName
    kse get pods -o wide      # tables as kubectl prints them; -o yaml|json|name; -w to watch
    kse delete pod nginx      # or: kse delete -f pod.yaml | -l app=web | --all [-n NS | -A]

Every command takes `--config PATH` (the connection file; else $KSE_CONFIG, else
~/.kse/config.json). Errors print the server's message the way kubectl does
(`Error from server (NotFound): pods "x" not found`) and exit 1; never a traceback.

The verbs live beside this module: `resource_apply` (apply, create), `resource_delete`, `resource_manifests`
(reading `-f`), `resource_io` (connecting, output, error wording); this one registers them all and
implements `get`.

Unknown fields in a manifest (`nodeSelecter:`) follow kubectl's `--validate`: `warn` (kse's
default, the API server's default field validation) prints `Warning: unknown field
"spec.nodeSelecter"` and applies the rest; `strict` (or `true`) refuses the object; `ignore` (or
`false`) drops them silently. kubectl's own default is `strict`.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message

from cli.resource_apply import cmd_apply, cmd_create
from cli.resource_delete import cmd_delete
from cli.resource_io import CommandError, Out, error_text, lookup, run
from cli.resource_manifests import split_documents
from kse import printers
from kse.client.clientset import BOOKMARK, DELETED, Clientset, WatchEvent, key_of
from kse.client.errors import NotFoundError
from kse.client.reflector import Reflector
from kse.durations import DurationFlag, PositiveDuration
from kse.objects.apply import (
    LAST_APPLIED,
)
from kse.objects.kinds import KINDS, Kind

__all__ = ["register", "split_documents"]

# kubectl's --validate values and what each means (pkg/cmd/util/helpers.go, GetValidationDirective).
VALIDATE_VALUES = {
    "strict": "strict",
    "true": "strict",
    "warn": "warn",
    "ignore": "ignore",
    "false": "ignore",
}


# ---------------------------------------------------------------- registration


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="PATH", help="connection file (default: $KSE_CONFIG, ~/.kse/config.json)"
    )
    parser.add_argument(
        "--request-timeout",
        action=PositiveDuration,
        default=30.0,
        metavar="SECONDS",
        help="time limit for each request, retries of reads included (default 30)",
    )


def _validate_mode(text: str) -> str:
    """kubectl's --validate value: strict (or true), warn, ignore (or false)."""
    mode = VALIDATE_VALUES.get(text.lower())
    if mode is None:
        raise argparse.ArgumentTypeError(
            f'invalid - validate option "{text}"; must be one of: strict (or true), warn, ignore (or false)'
        )
    return mode


def _manifest_flags(parser: argparse.ArgumentParser, verb: str, *, required: bool) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=required,
        default=None if required else [],
        metavar="FILE",
        help=f"a manifest file, a directory of them, or - for stdin (repeatable): the objects to {verb}",
    )
    parser.add_argument(
        "-R", "--recursive", action="store_true", help="descend into directories given with -f"
    )


def _validate_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--validate",
        type=_validate_mode,
        nargs="?",
        const="strict",
        default="warn",
        metavar="MODE",
        help="unknown fields in a manifest: warn (default: print a warning, drop them), "
        "strict|true (refuse the object), ignore|false (drop them silently)",
    )


def register(subparsers: Any) -> None:
    served = ", ".join(k.resource for k in KINDS)

    p = subparsers.add_parser("apply", help="create or update objects from manifests, as kubectl apply")
    _manifest_flags(p, "apply", required=True)
    p.add_argument("-n", "--namespace", default="", help="namespace for objects that name none")
    _validate_flag(p)
    _common(p)
    p.set_defaults(func=cmd_apply)

    p = subparsers.add_parser(
        "create", help="create objects from manifests (never update), as kubectl create"
    )
    _manifest_flags(p, "create", required=True)
    p.add_argument("-n", "--namespace", default="", help="namespace for objects that name none")
    _validate_flag(p)
    p.add_argument(
        "--save-config",
        action="store_true",
        help=f"store the manifest in the {LAST_APPLIED} annotation, so a later apply merges from it",
    )
    _common(p)
    p.set_defaults(func=cmd_create)

    p = subparsers.add_parser("get", help=f"list or watch objects, as kubectl get ({served})")
    p.add_argument("resource", help=f"resource type: {served} (or a short name)")
    p.add_argument("names", nargs="*", metavar="NAME")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", default="", help="namespace (default: default)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="list across all namespaces")
    p.add_argument("-l", "--selector", default="", help="label selector, e.g. app=web,tier!=db")
    p.add_argument("--field-selector", default="", help="field selector, e.g. spec.nodeName=node-1")
    p.add_argument(
        "-o", "--output", default="", choices=[f for f in printers.OUTPUT_FORMATS if f], help="output format"
    )
    p.add_argument("-w", "--watch", action="store_true", help="after listing, print changes as they happen")
    _common(p)
    p.set_defaults(func=cmd_get)

    p = subparsers.add_parser(
        "delete", help="delete objects by name, label selector, --all or from manifests, as kubectl delete"
    )
    p.add_argument("resource", nargs="?", help=f"resource type: {served}")
    p.add_argument("names", nargs="*", metavar="NAME")
    _manifest_flags(p, "delete", required=False)
    p.add_argument("-n", "--namespace", default="", help="namespace (default: default)")
    p.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="with -l or --all: across all namespaces (-n is ignored)",
    )
    p.add_argument("-l", "--selector", default="", help="delete the objects matching this label selector")
    p.add_argument("--field-selector", default="", help="delete the objects matching this field selector")
    p.add_argument("--all", action="store_true", help="delete every object of the type in the namespace")
    p.add_argument(
        "--ignore-not-found",
        action="store_true",
        default=None,
        help="treat a missing object as deleted (the default with -l and --all)",
    )
    p.add_argument(
        "--grace-period",
        type=int,
        default=-1,
        help="seconds a pod gets to terminate (negative: its own terminationGracePeriodSeconds; "
        "0 only with --force, else it means 1)",
    )
    p.add_argument("--now", action="store_true", help="signal immediate shutdown (same as --grace-period=1)")
    p.add_argument(
        "--force",
        action="store_true",
        help="remove at once, without waiting for the kubelet (with --grace-period=0: force deletion)",
    )
    p.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for gracefully deleted objects to be gone (default: yes)",
    )
    p.add_argument(
        "--timeout",
        action=DurationFlag,
        default=0.0,
        metavar="DURATION",
        help="with --wait: give up after this long, e.g. 30s (default 0: no limit)",
    )
    _common(p)
    p.set_defaults(func=cmd_delete)


# ---------------------------------------------------------------- get


def cmd_get(args: argparse.Namespace) -> int:
    async def body(cs: Clientset, out: Out) -> None:
        kind = lookup(args.resource)
        ns = "" if (args.all_namespaces or not kind.namespaced) else (args.namespace or "default")
        with_ns = bool(args.all_namespaces and kind.namespaced)
        client = cs.resource(kind)
        if args.watch:
            await _watch(cs, kind, ns, args, out, with_ns)
            return
        now = datetime.now(UTC)
        if args.names:
            found: list[Message] = []
            for name in args.names:
                try:
                    found.append(await client.get_in(ns, name))
                except NotFoundError as e:
                    out.error(error_text(e))
            if found:
                out.write(
                    printers.format_objects(
                        kind, found, args.output, now=now, with_namespace=with_ns, single=len(args.names) == 1
                    )
                )
            return
        page = await client.list(ns, label_selector=args.selector, field_selector=args.field_selector)
        if not page.items and args.output in ("", "wide"):
            where = f" in {ns} namespace" if ns else ""
            out.note(f"No resources found{where}.")
            return
        out.write(printers.format_objects(kind, page.items, args.output, now=now, with_namespace=with_ns))

    return run(args, body)


class _WatchPrinter:
    """A reflector sink that prints: the first list as a table, then one row per change (a relist
    after falling behind prints what changed meanwhile, deletions included)."""

    def __init__(self, kind: Kind, output: str, with_namespace: bool, out: Out) -> None:
        self.kind = kind
        self.output = output
        self.with_namespace = with_namespace
        self.out = out
        self.table = printers.TableWriter()
        self.seen: dict[str, Message] = {}  # what was printed last, by key

    def _print(self, objects: list[Message]) -> None:
        if not objects:
            return
        if self.output in ("yaml", "json"):
            for obj in objects:
                data = printers.object_dict(obj)
                text = printers.to_yaml(data) if self.output == "yaml" else printers.to_json(data)
                self.out.write(("---\n" if self.output == "yaml" else "") + text)
            return
        if self.output == "name":
            self.out.write(printers.format_objects(self.kind, objects, "name"))
            return
        header, rows = printers.table_rows(
            self.kind,
            objects,
            now=datetime.now(UTC),
            wide=self.output == "wide",
            with_namespace=self.with_namespace,
        )
        first = not self.table.widths
        self.out.write(self.table.render([header, *rows] if first else rows))

    def replace(self, items: list[Message], resource_version: str) -> None:
        new = {key_of(o): o for o in items}
        changed = [o for k, o in new.items() if k not in self.seen or _rv(self.seen[k]) != _rv(o)]
        gone = [o for k, o in self.seen.items() if k not in new]
        self.seen = new
        self._print(changed + gone)

    def apply(self, events: list[WatchEvent[Message]]) -> None:
        objects: list[Message] = []
        for ev in events:
            if ev.type == BOOKMARK or ev.object is None:
                continue
            key = key_of(ev.object)
            if ev.type == DELETED:
                self.seen.pop(key, None)
            else:
                self.seen[key] = ev.object
            objects.append(ev.object)
        self._print(objects)

    def advance(self, resource_version: str) -> None:
        pass

    def rejected(self, events: list[WatchEvent[Message]]) -> None:
        pass  # a duplicate the reflector refused: nothing to print


def _rv(obj: Message) -> str:
    return str(obj.metadata.resource_version)  # type: ignore[attr-defined]


async def _watch(
    cs: Clientset, kind: Kind, ns: str, args: argparse.Namespace, out: Out, with_ns: bool
) -> None:
    field_selector = args.field_selector
    if args.names:
        if len(args.names) > 1:
            raise CommandError(
                "watch is only supported on individual resources and resource collections, "
                f"but {len(args.names)} resources were found"
            )
        name_sel = f"metadata.name={args.names[0]}"
        field_selector = f"{field_selector},{name_sel}" if field_selector else name_sel
    printer = _WatchPrinter(kind, args.output, with_ns, out)
    reflector: Reflector[Message] = Reflector(
        cs.resource(kind), printer, namespace=ns, label_selector=args.selector, field_selector=field_selector
    )
    await reflector.run()  # until Ctrl-C
