"""Manifests as `kse apply | create | delete -f` read them: files, directories, stdin; one
document at a time, so that one bad document is reported and the rest still load; unknown fields
handled as kubectl's `--validate` says."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from cli.resource_io import CommandError, Out
from kse.objects.kinds import Kind, kind_of, unwrap
from kse.objects.manifest import ManifestError, decode_manifests

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


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
    fields: dict[str, Any] = field(default_factory=dict)  # the known fields as written (JSON names)


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
        raise CommandError(f'the path "{spec}" does not exist')
    return [(str(path), path.read_text())]


def read_manifests(
    specs: Iterable[str], recursive: bool, out: Out, validate: str = "ignore"
) -> list[ManifestObject]:
    """Every object in the given files; a document that cannot be loaded (an unsupported kind, bad
    YAML) is reported and skipped, and the rest still load.

    Unknown fields are handled as kubectl's `--validate` says (`validate`): "warn" prints
    `Warning: unknown field "spec.nodeSelecter"` for each, "strict" reports the object as an error
    and skips it, "ignore" says nothing.
    """
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
                    loaded = decode_manifests(doc, source)
                except ManifestError as e:
                    out.error(f"error: {_renumber(e, source, number)}")
                    continue
                for decoded in loaded:
                    m = ManifestObject(source, unwrap(decoded.obj), kind_of(decoded.obj), decoded.fields)
                    if decoded.unknown_fields and not _field_validation(
                        m, decoded.unknown_fields, validate, out
                    ):
                        continue
                    objects.append(m)
    return objects


def _field_validation(m: ManifestObject, unknown: list[str], validate: str, out: Out) -> bool:
    """Report unknown fields as the API server's field validation words them; False: refused."""
    found = ", ".join(f'unknown field "{path}"' for path in unknown)
    if validate == "strict":
        name = m.obj.metadata.name or m.obj.metadata.generate_name  # type: ignore[attr-defined]
        out.error(
            f'error: error validating "{m.source}": {m.kind.kind} "{name}": strict decoding error: {found}; '
            "if you choose to ignore these errors, turn validation off with --validate=false"
        )
        return False
    if validate == "warn":
        for path in unknown:
            out.note(f'Warning: unknown field "{path}"')
    return True


def _renumber(err: ManifestError, source: str, number: int) -> str:
    """The loader numbered the document within the piece it was given; put the file's number back."""
    text = str(err)
    prefix = f"{source}: document {err.document}: "
    if err.document is not None and text.startswith(prefix):
        return f"{source}: document {number}: {text[len(prefix) :]}"
    return text


def namespace_for(m: ManifestObject, flag_ns: str) -> str:
    if not m.kind.namespaced:
        return ""
    own = m.obj.metadata.namespace  # type: ignore[attr-defined]
    if own and flag_ns and own != flag_ns:
        raise CommandError(
            f'the namespace from the provided object "{own}" does not match the namespace "{flag_ns}". '
            f"You must pass '--namespace={own}' to perform this operation."
        )
    return str(own or flag_ns or "default")
