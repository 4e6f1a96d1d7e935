"""Field selectors ("spec.nodeName=n1,status.phase!=Running") and the fields each kind exposes.

Parsing follows upstream `k8s.io/apimachinery/pkg/fields/selector.go`: terms split on unescaped
commas, each term split at the first "!=", "==" or "=" (no whitespace trimming), values unescaped
("\\,", "\\=", "\\\\"); a field an object does not have reads as "". Which fields a kind supports
follows the API server's field-label conversion functions (`pkg/apis/core/v1/conversion.go`) and
the registries' `ToSelectableFields`: an unsupported field is refused with
'field label not supported: <field>', here also naming the kind.

`fields_of(obj)` is called by the watch cache on every event, so it reads the few fields a kind
has directly, with no reflection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kse.objects.kinds import BY_FIELD, BY_KIND, Kind, UnknownKindError, lookup_resource
from proto import kse_pb2 as pb

__all__ = [
    "SUPPORTED_FIELDS",
    "FieldSelector",
    "FieldSelectorError",
    "FieldTerm",
    "escape_value",
    "fields_of",
    "parse_field_selector",
    "supported_fields",
    "unescape_value",
]


class FieldSelectorError(ValueError):
    """A field selector that cannot be parsed, or that names a field the kind does not support."""


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


def _pod_fields(pod: pb.Pod) -> dict[str, str]:
    meta, spec, status = pod.metadata, pod.spec, pod.status
    return {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "spec.nodeName": spec.node_name,
        "spec.restartPolicy": spec.restart_policy,
        "spec.schedulerName": spec.scheduler_name,
        "spec.serviceAccountName": spec.service_account_name,
        "spec.hostNetwork": _bool(spec.host_network),
        "status.phase": status.phase,
        "status.podIP": status.pod_ip,
        "status.nominatedNodeName": status.nominated_node_name,
    }


def _node_fields(node: pb.Node) -> dict[str, str]:
    return {"metadata.name": node.metadata.name, "spec.unschedulable": _bool(node.spec.unschedulable)}


def _lease_fields(lease: pb.Lease) -> dict[str, str]:
    return {"metadata.name": lease.metadata.name, "metadata.namespace": lease.metadata.namespace}


def _event_fields(ev: pb.Event) -> dict[str, str]:
    ref = ev.involved_object
    # As the event registry: "source" is source.component, else the reporting controller.
    source = ev.source.component or ev.reporting_component
    return {
        "metadata.name": ev.metadata.name,
        "metadata.namespace": ev.metadata.namespace,
        "involvedObject.kind": ref.kind,
        "involvedObject.namespace": ref.namespace,
        "involvedObject.name": ref.name,
        "involvedObject.uid": ref.uid,
        "involvedObject.apiVersion": ref.api_version,
        "involvedObject.resourceVersion": ref.resource_version,
        "involvedObject.fieldPath": ref.field_path,
        "reason": ev.reason,
        "reportingComponent": ev.reporting_component,
        "source": source,
        "type": ev.type,
    }


def _priority_class_fields(pc: pb.PriorityClass) -> dict[str, str]:
    # Cluster-scoped: metadata.namespace is accepted by the default conversion and reads as "".
    return {"metadata.name": pc.metadata.name, "metadata.namespace": ""}


# Namespaced kinds whose only selectable fields are their name and namespace (upstream's
# DefaultClusterScopedAttr / ObjectMetaFieldsSet), by `Object` oneof field.
_META_ONLY = ("service", "replica_set", "deployment", "daemon_set", "pod_disruption_budget")


def _namespaced_meta_fields(obj: Any) -> dict[str, str]:
    # The fields every namespaced kind supports (DefaultClusterScopedAttr / ObjectMetaFieldsSet).
    return {"metadata.name": obj.metadata.name, "metadata.namespace": obj.metadata.namespace}


def _namespace_fields(ns: pb.Namespace) -> dict[str, str]:
    return {"metadata.name": ns.metadata.name, "metadata.namespace": "", "status.phase": ns.status.phase}


# Per kind (by its `Object` oneof field): the extractor and the supported field names.
_EXTRACTORS: dict[str, Callable[[Any], dict[str, str]]] = {
    "pod": _pod_fields,
    "node": _node_fields,
    "lease": _lease_fields,
    "event": _event_fields,
    "priority_class": _priority_class_fields,
    "namespace": _namespace_fields,
    **dict.fromkeys(_META_ONLY, _namespaced_meta_fields),
}

SUPPORTED_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": tuple(_pod_fields(pb.Pod())),
    "Node": tuple(_node_fields(pb.Node())),
    "Lease": tuple(_lease_fields(pb.Lease())),
    "Event": tuple(_event_fields(pb.Event())),
    "PriorityClass": tuple(_priority_class_fields(pb.PriorityClass())),
    "Namespace": tuple(_namespace_fields(pb.Namespace())),
    **{kind: ("metadata.name", "metadata.namespace") for kind in (BY_FIELD[f].kind for f in _META_ONLY)},
}


def _event_getter(name: str) -> Callable[[Any], str]:
    def get(ev: Any) -> str:
        return _event_fields(ev)[name]

    return get


# Per kind, one getter per field: FieldSelector.matches_object reads only the fields it tests.
# (test_fields checks these agree with the extractors above.)
_GETTERS: dict[str, dict[str, Callable[[Any], str]]] = {
    "pod": {
        "metadata.name": lambda p: p.metadata.name,
        "metadata.namespace": lambda p: p.metadata.namespace,
        "spec.nodeName": lambda p: p.spec.node_name,
        "spec.restartPolicy": lambda p: p.spec.restart_policy,
        "spec.schedulerName": lambda p: p.spec.scheduler_name,
        "spec.serviceAccountName": lambda p: p.spec.service_account_name,
        "spec.hostNetwork": lambda p: _bool(p.spec.host_network),
        "status.phase": lambda p: p.status.phase,
        "status.podIP": lambda p: p.status.pod_ip,
        "status.nominatedNodeName": lambda p: p.status.nominated_node_name,
    },
    "node": {
        "metadata.name": lambda n: n.metadata.name,
        "spec.unschedulable": lambda n: _bool(n.spec.unschedulable),
    },
    "lease": {
        "metadata.name": lambda x: x.metadata.name,
        "metadata.namespace": lambda x: x.metadata.namespace,
    },
    "event": {name: _event_getter(name) for name in _event_fields(pb.Event())},
    "priority_class": {
        "metadata.name": lambda x: x.metadata.name,
        "metadata.namespace": lambda x: "",
    },
    "namespace": {
        "metadata.name": lambda x: x.metadata.name,
        "metadata.namespace": lambda x: "",
        "status.phase": lambda x: x.status.phase,
    },
    **{
        field: {
            "metadata.name": lambda x: x.metadata.name,
            "metadata.namespace": lambda x: x.metadata.namespace,
        }
        for field in _META_ONLY
    },
}

# Old names the API server still accepts and rewrites (conversion.go: v1 clients' spec.host).
_ALIASES: dict[str, dict[str, str]] = {"Pod": {"spec.host": "spec.nodeName"}}


def fields_of(obj: pb.Object) -> dict[str, str]:
    """The selectable fields of a wrapped object and their values (all strings, "" when unset)."""
    which = obj.WhichOneof("kind")
    if which is None:
        raise UnknownKindError("object is empty: no kind is set")
    return _EXTRACTORS[which](getattr(obj, which))


def _resolve_kind(kind: str | Kind) -> Kind:
    if isinstance(kind, Kind):
        return kind
    found = BY_KIND.get(kind) or BY_FIELD.get(kind)
    return found if found is not None else lookup_resource(kind)


def supported_fields(kind: str | Kind) -> tuple[str, ...]:
    """The field names a kind (Kind, kind name "Pod", or resource "pods") can be selected on."""
    return SUPPORTED_FIELDS[_resolve_kind(kind).kind]


def escape_value(value: str) -> str:
    """Escape "\\", "," and "=" so a value can be put into a selector string (fields.EscapeValue)."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(value: str) -> str:
    """Undo escape_value; a bare "," or "=" or an unknown escape is an error (fields.UnescapeValue)."""
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    in_slash = False
    for ch in value:
        if in_slash:
            if ch not in "\\,=":
                raise FieldSelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            raise FieldSelectorError(f"invalid field selector: unescaped character in value: {ch!r}")
        else:
            out.append(ch)
    if in_slash:
        raise FieldSelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """One term: `field == value` (equal=True) or `field != value`."""

    field: str
    equal: bool
    value: str

    def __str__(self) -> str:
        return f"{self.field}{'=' if self.equal else '!='}{escape_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """An AND of field terms; no terms selects everything."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything."""
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether every term holds; a field missing from `fields` reads as ""."""
        for term in self.terms:
            if (fields.get(term.field, "") == term.value) != term.equal:
                return False
        return True

    def matches_object(self, obj: pb.Object) -> bool:
        """`matches(fields_of(obj))`, reading only the fields the terms name (the watch-cache path)."""
        if not self.terms:
            return True
        which = obj.WhichOneof("kind")
        if which is None:
            raise UnknownKindError("object is empty: no kind is set")
        msg = getattr(obj, which)
        getters = _GETTERS[which]
        for term in self.terms:
            get = getters.get(term.field)
            if ((get(msg) if get is not None else "") == term.value) != term.equal:
                return False
        return True

    def requires_exact_match(self, field: str) -> str | None:
        """The value `field` must equal for a match, if a term pins it (for indexed lookups)."""
        for term in self.terms:
            if term.field == field and term.equal:
                return term.value
        return None

    def __iter__(self) -> Iterator[FieldTerm]:
        return iter(self.terms)

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.terms)


def _split_terms(text: str) -> list[str]:
    """Split on commas not escaped by a backslash (fields.splitTerms)."""
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """(lhs, op, rhs) at the first operator, trying "!=", "==", "=" at each position."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


@lru_cache(maxsize=4096)
def _parse(text: str) -> FieldSelector:
    if not text:
        return FieldSelector()
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise FieldSelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        terms.append(FieldTerm(lhs, op != "!=", unescape_value(rhs)))
    return FieldSelector(tuple(terms))


def parse_field_selector(text: str, kind: str | Kind | None = None) -> FieldSelector:
    """Parse a field selector; with `kind`, refuse fields that kind does not support.

    `kind` may be a Kind, a kind name ("Pod") or a resource name ("pods"). Old aliases are
    rewritten as the API server does ("spec.host" -> "spec.nodeName" for pods).
    """
    selector = _parse(text)
    if kind is None or selector.empty:
        return selector
    k = _resolve_kind(kind)
    supported = SUPPORTED_FIELDS[k.kind]
    aliases = _ALIASES.get(k.kind, {})
    terms: list[FieldTerm] = []
    for term in selector.terms:
        name = aliases.get(term.field, term.field)
        if name not in supported:
            raise FieldSelectorError(
                f"field label not supported: {term.field} (kind {k.kind} supports: {', '.join(supported)})"
            )
        terms.append(term if name == term.field else FieldTerm(name, term.equal, term.value))
    return FieldSelector(tuple(terms))
