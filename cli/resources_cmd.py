"""`kse apply`, `kse get`, `kse delete`: kubectl's everyday verbs against the kse API server.

    kse apply -f pod.yaml     # create, or update if it exists: "pod/nginx created|configured|unchanged"
    kse get pods -o wide      # tables as kubectl prints them; -o yaml|json|name; -w to watch
    kse delete pod nginx      # or: kse delete -f pod.yaml

Every command takes `--config PATH` (the connection file; else $KSE_CONFIG, else
~/.kse/config.json). Errors print the server's message the way kubectl does
(`Error from server (NotFound): pods "x" not found`) and exit 1; never a traceback.

`apply` without kubectl's last-applied annotation: the manifest is merged onto the live object
(maps merge key by key, lists of the same length merge item by item, anything else is replaced;
`status` and server-managed metadata are left alone). If nothing changes the object is
"unchanged" and no write is sent; a conflicting concurrent write is retried from a fresh read.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from google.protobuf import json_format
from google.protobuf.message import Message

from kse import printers
from kse.client.clientset import BOOKMARK, DELETED, Clientset, RetryPolicy, WatchEvent, key_of
from kse.client.errors import ApiError, ConflictError, NotFoundError, UnavailableError
from kse.client.reflector import Reflector
from kse.durations import PositiveDuration
from kse.objects.kinds import KINDS, Kind, UnknownKindError, kind_of, lookup_resource, unwrap
from kse.objects.manifest import ManifestError, load_manifests

CLI_USER_AGENT = "kse-cli/0.1"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
APPLY_CONFLICT_RETRIES = 5
# Metadata the server owns: never taken from a manifest on update.
SERVER_METADATA = ("uid", "resource_version", "creation_timestamp", "generation", "deletion_timestamp")


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


def register(subparsers: Any) -> None:
    served = ", ".join(k.resource for k in KINDS)

    p = subparsers.add_parser("apply", help="create or update objects from manifests, as kubectl apply")
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="a manifest file, a directory of them, or - for stdin (repeatable)",
    )
    p.add_argument("-R", "--recursive", action="store_true", help="descend into directories given with -f")
    p.add_argument("-n", "--namespace", default="", help="namespace for objects that name none")
    _common(p)
    p.set_defaults(func=cmd_apply)

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

    p = subparsers.add_parser("delete", help="delete objects by name or from manifests, as kubectl delete")
    p.add_argument("resource", nargs="?", help=f"resource type: {served}")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="FILE",
        help="delete the objects named in these manifests",
    )
    p.add_argument("-R", "--recursive", action="store_true", help="descend into directories given with -f")
    p.add_argument("-n", "--namespace", default="", help="namespace (default: default)")
    p.add_argument("--ignore-not-found", action="store_true", help="treat a missing object as deleted")
    _common(p)
    p.set_defaults(func=cmd_delete)


# ---------------------------------------------------------------- plumbing


@dataclass
class Out:
    """Where a command writes; an error flips the exit code to 1."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    failed: bool = False

    def line(self, text: str) -> None:
        self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()

    def write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def error(self, text: str) -> None:
        self.failed = True
        self.stderr.write(text.rstrip("\n") + "\n")
        self.stderr.flush()

    def note(self, text: str) -> None:
        self.stderr.write(text.rstrip("\n") + "\n")
        self.stderr.flush()


def error_text(err: ApiError) -> str:
    """kubectl's wording for a server error."""
    if isinstance(err, UnavailableError):
        return f"Unable to connect to the server: {err.message}"
    return err.kubectl_message()


def _run(args: argparse.Namespace, body: Callable[[Clientset, Out], Awaitable[None]]) -> int:
    """Connect, run `body`, close; map every expected failure to a message and exit code 1."""
    out = Out()
    try:
        asyncio.run(_with_clientset(args, body, out))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except ApiError as e:
        out.error(error_text(e))
    except _CommandError as e:
        out.error(f"error: {e}")
    return 1 if out.failed else 0


class _CommandError(Exception):
    """A usage or local error, printed as kubectl does: `error: ...`."""


async def _with_clientset(
    args: argparse.Namespace, body: Callable[[Clientset, Out], Awaitable[None]], out: Out
) -> None:
    from kse.client.channel import channel_source_from_connection
    from kse.config import ConfigError, ConnectionFile, resolve

    try:
        conn = ConnectionFile.load(resolve(args.config))
        # Follows the credential files, so a long `kse get -w` survives a rotation (its watch
        # resumes on the new channel from the last revision printed).
        channel = channel_source_from_connection(conn, options=[("grpc.primary_user_agent", CLI_USER_AGENT)])
    except ConfigError as e:
        raise _CommandError(str(e)) from None
    except OSError as e:
        raise _CommandError(f"cannot read client credentials: {e}") from None
    timeout = float(args.request_timeout)
    cs = Clientset(
        channel,
        qps=0,  # one person at a terminal: no client-side throttling
        burst=0,
        user_agent=CLI_USER_AGENT,
        timeout=timeout,
        retry=RetryPolicy(deadline=min(timeout, 5.0)),
    )
    try:
        await body(cs, out)
    finally:
        await channel.close(grace=None)


def _describe(kind: Kind, name: str) -> str:
    """kubectl's `pod/nginx` / `priorityclass.scheduling.k8s.io/high` object label."""
    return printers.resource_name(kind, name)


def _quoted(kind: Kind, name: str) -> str:
    """kubectl delete's `pod "nginx"` form."""
    prefix = kind.kind.lower() + (f".{kind.group}" if kind.group else "")
    return f'{prefix} "{name}"'


# ---------------------------------------------------------------- manifests

_SEPARATOR = re.compile(r"^---")


def split_documents(text: str) -> list[tuple[int, str]]:
    """Split a YAML stream into (number, text) documents the way kubectl's YAML reader does: at
    lines that start with `---` followed by nothing but spaces or a comment. Numbers are 1-based
    and count empty documents, as YAML does; only documents with content are returned."""
    chunks: list[str] = []
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if _SEPARATOR.match(line):
            rest = line[3:].strip()
            if not rest or rest.startswith("#"):
                chunks.append("".join(current))
                current = []
                continue
        current.append(line)
    chunks.append("".join(current))
    # Text before the first `---` is a document only if it has content.
    first = 1 if _has_content(chunks[0]) else 0
    numbered = [(i + first, chunk) for i, chunk in enumerate(chunks)]
    return [(n, doc) for n, doc in numbered if _has_content(doc)]


def _has_content(doc: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in doc.splitlines())


@dataclass
class ManifestObject:
    source: str
    obj: Message  # the typed message (pb.Pod, ...)
    kind: Kind


def _manifest_files(spec: str, recursive: bool) -> list[tuple[str, str]]:
    """(source label, text) for every manifest a `-f` value names."""
    if spec == "-":
        return [("STDIN", sys.stdin.read())]
    path = Path(spec)
    if path.is_dir():
        pattern = "**/*" if recursive else "*"
        files = sorted(p for p in path.glob(pattern) if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        return [(str(p), p.read_text()) for p in files]
    if not path.exists():
        raise _CommandError(f'the path "{spec}" does not exist')
    return [(str(path), path.read_text())]


def read_manifests(specs: Iterable[str], recursive: bool, out: Out) -> list[ManifestObject]:
    """Every object in the given files; a document that cannot be loaded (an unsupported kind, bad
    YAML) is reported and skipped, and the rest still load."""
    objects: list[ManifestObject] = []
    for spec in specs:
        try:
            files = _manifest_files(spec, recursive)
        except OSError as e:
            out.error(f"error: {e}")
            continue
        for source, text in files:
            # One document at a time, so that one bad document (an unsupported kind) is reported
            # and the others still apply, as kubectl does.
            for number, doc in split_documents(text):
                try:
                    loaded = load_manifests(doc, source)
                except ManifestError as e:
                    out.error(f"error: {_renumber(e, source, number)}")
                    continue
                for wrapped in loaded:
                    objects.append(ManifestObject(source, unwrap(wrapped), kind_of(wrapped)))
    return objects


def _renumber(err: ManifestError, source: str, number: int) -> str:
    """The loader numbered the document within the piece it was given; put the file's number back."""
    text = str(err)
    prefix = f"{source}: document {err.document}: "
    if err.document is not None and text.startswith(prefix):
        return f"{source}: document {number}: {text[len(prefix) :]}"
    return text


def _namespace_for(m: ManifestObject, flag_ns: str) -> str:
    if not m.kind.namespaced:
        return ""
    own = m.obj.metadata.namespace  # type: ignore[attr-defined]
    if own and flag_ns and own != flag_ns:
        raise _CommandError(
            f'the namespace from the provided object "{own}" does not match the namespace "{flag_ns}". '
            f"You must pass '--namespace={own}' to perform this operation."
        )
    return str(own or flag_ns or "default")


# ---------------------------------------------------------------- apply


def merge_onto(live: Message, manifest: Message) -> Message:
    """The live object with the manifest's fields laid over it (see the module doc)."""
    base = json_format.MessageToDict(live, preserving_proto_field_name=True)
    patch = json_format.MessageToDict(manifest, preserving_proto_field_name=True)
    for key in ("status", "api_version", "kind"):
        patch.pop(key, None)
    meta = patch.get("metadata", {})
    for key in SERVER_METADATA:
        meta.pop(key, None)
    merged = _merge(base, patch)
    out = type(live)()
    json_format.ParseDict(merged, out)
    return out


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(patch, list) and len(base) == len(patch):
        return [_merge(b, p) for b, p in zip(base, patch, strict=True)]
    return patch


async def _apply_one(cs: Clientset, m: ManifestObject, flag_ns: str, out: Out) -> None:
    client = cs.resource(m.kind)
    obj = m.obj
    meta = obj.metadata  # type: ignore[attr-defined]
    name = meta.name
    if not name:
        out.error(
            f'error: error when retrieving current configuration of "{m.source}": '
            f"resource name may not be empty"
        )
        return
    try:
        ns = _namespace_for(m, flag_ns)
    except _CommandError as e:
        out.error(f"error: {e}")
        return
    if m.kind.namespaced:
        meta.namespace = ns
    label = _describe(m.kind, name)
    try:
        for _attempt in range(APPLY_CONFLICT_RETRIES):
            try:
                live = await client.get_in(ns, name)
            except NotFoundError:
                try:
                    await client.create(obj)
                except ApiError as e:
                    out.error(_from_server(e, "creating", m.source))
                    return
                out.line(f"{label} created")
                return
            desired = merge_onto(live, obj)
            if desired == live:
                out.line(f"{label} unchanged")
                return
            desired.metadata.resource_version = live.metadata.resource_version  # type: ignore[attr-defined]
            try:
                await client.update(desired)
            except ConflictError:
                continue  # someone wrote in between: merge onto the new state
            except ApiError as e:
                out.error(_from_server(e, "applying patch", m.source))
                return
            out.line(f"{label} configured")
            return
        out.error(
            f"error: {label}: the object keeps changing; gave up after {APPLY_CONFLICT_RETRIES} conflicts"
        )
    except ApiError as e:
        out.error(_from_server(e, "retrieving current configuration of", m.source))


def _from_server(err: ApiError, doing: str, source: str) -> str:
    if isinstance(err, UnavailableError):
        return error_text(err)
    return f'Error from server ({err.reason}): error when {doing} "{source}": {err.message}'


def cmd_apply(args: argparse.Namespace) -> int:
    async def body(cs: Clientset, out: Out) -> None:
        objects = read_manifests(args.filename, args.recursive, out)
        if not objects and not out.failed:
            raise _CommandError("no objects passed to apply")
        for m in objects:
            await _apply_one(cs, m, args.namespace, out)

    return _run(args, body)


# ---------------------------------------------------------------- get


def _lookup(resource: str) -> Kind:
    try:
        return lookup_resource(resource)
    except UnknownKindError:
        raise _CommandError(f'the server doesn\'t have a resource type "{resource}"') from None


def cmd_get(args: argparse.Namespace) -> int:
    async def body(cs: Clientset, out: Out) -> None:
        kind = _lookup(args.resource)
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

    return _run(args, body)


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


def _rv(obj: Message) -> str:
    return str(obj.metadata.resource_version)  # type: ignore[attr-defined]


async def _watch(
    cs: Clientset, kind: Kind, ns: str, args: argparse.Namespace, out: Out, with_ns: bool
) -> None:
    field_selector = args.field_selector
    if args.names:
        if len(args.names) > 1:
            raise _CommandError(
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


# ---------------------------------------------------------------- delete


def cmd_delete(args: argparse.Namespace) -> int:
    async def body(cs: Clientset, out: Out) -> None:
        targets: list[tuple[Kind, str, str, str]] = []  # kind, namespace, name, source
        if args.filename:
            if args.resource or args.names:
                raise _CommandError(
                    "there is no need to specify a resource type as a separate argument "
                    "when passing arguments in resource/name form or with -f"
                )
            for m in read_manifests(args.filename, args.recursive, out):
                try:
                    ns = _namespace_for(m, args.namespace)
                except _CommandError as e:
                    out.error(f"error: {e}")
                    continue
                targets.append((m.kind, ns, m.obj.metadata.name, m.source))  # type: ignore[attr-defined]
        else:
            if not args.resource:
                raise _CommandError("you must provide one or more resources by argument or filename")
            resource, slash, first = args.resource.partition("/")
            kind = _lookup(resource)
            names = ([first] if slash else []) + list(args.names)
            if not names:
                raise _CommandError(f'resource(s) were provided, but no name was specified for "{resource}"')
            ns = (args.namespace or "default") if kind.namespaced else ""
            targets.extend((kind, ns, name, "") for name in names)
        for kind, ns, name, source in targets:
            try:
                await cs.resource(kind).delete_in(ns, name)
            except NotFoundError as e:
                if not args.ignore_not_found:
                    out.error(_from_server(e, "deleting", source) if source else error_text(e))
                continue
            except ApiError as e:
                out.error(_from_server(e, "deleting", source) if source else error_text(e))
                continue
            out.line(f"{_quoted(kind, name)} deleted")

    return _run(args, body)
