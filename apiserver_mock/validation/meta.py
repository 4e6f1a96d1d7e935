"""ObjectMeta, labels, annotations and selectors: the validators every kind shares."""

from __future__ import annotations

from collections.abc import Mapping

from apiserver_mock.validation.field import FieldErrors
from kse.objects import names
from kse.objects.kinds import Kind
from proto import kse_pb2 as pb

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def validate_object_meta(errs: FieldErrors, kind: Kind, meta: pb.ObjectMeta, path: str = "metadata") -> None:
    if not meta.name:
        errs.required(f"{path}.name", "name or generateName is required")
    else:
        for msg in names.is_dns1123_subdomain(meta.name):
            errs.invalid(f"{path}.name", meta.name, msg)
    if meta.generate_name:
        # generateName gets a 5-character suffix; the prefix alone need not be a full name.
        for msg in names.is_dns1123_subdomain(meta.generate_name.rstrip("-.") + "x"):
            errs.invalid(f"{path}.generateName", meta.generate_name, msg)
    if kind.namespaced:
        if not meta.namespace:
            errs.required(f"{path}.namespace")
        else:
            for msg in names.is_dns1123_label(meta.namespace):
                errs.invalid(f"{path}.namespace", meta.namespace, msg)
    elif meta.namespace:
        errs.forbidden(f"{path}.namespace", "not allowed on this type")
    if meta.generation < 0:
        errs.invalid(f"{path}.generation", meta.generation, "must be greater than or equal to 0")
    validate_labels(errs, meta.labels, f"{path}.labels")
    validate_annotations(errs, meta.annotations, f"{path}.annotations")
    for i, ref in enumerate(meta.owner_references):
        rp = f"{path}.ownerReferences[{i}]"
        for field_name, value in (
            ("apiVersion", ref.api_version),
            ("kind", ref.kind),
            ("name", ref.name),
            ("uid", ref.uid),
        ):
            if not value:
                errs.required(f"{rp}.{field_name}")
    for i, fin in enumerate(meta.finalizers):
        for msg in names.is_qualified_name(fin):
            errs.invalid(f"{path}.finalizers[{i}]", fin, msg)


def validate_labels(errs: FieldErrors, labels: Mapping[str, str], path: str) -> None:
    for key, value in labels.items():
        for msg in names.is_qualified_name(key):
            errs.invalid(path, key, msg)
        for msg in names.is_valid_label_value(value):
            errs.invalid(path, value, msg)


def validate_annotations(errs: FieldErrors, annotations: Mapping[str, str], path: str) -> None:
    total = 0
    for key, value in annotations.items():
        for msg in names.is_qualified_name(key.lower()):
            errs.invalid(path, key, msg)
        total += len(key.encode()) + len(value.encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT)


def validate_label_selector(errs: FieldErrors, sel: pb.LabelSelector, path: str) -> None:
    for i, req in enumerate(sel.match_expressions):
        rp = f"{path}.matchExpressions[{i}]"
        if req.operator in ("In", "NotIn"):
            if not req.values:
                errs.required(f"{rp}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif req.operator in ("Exists", "DoesNotExist"):
            if req.values:
                errs.forbidden(
                    f"{rp}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
        else:
            errs.enum(f"{rp}.operator", req.operator, LABEL_SELECTOR_OPERATORS, allow_empty=False)
        for msg in names.is_qualified_name(req.key):
            errs.invalid(f"{rp}.key", req.key, msg)
        for j, v in enumerate(req.values):
            for msg in names.is_valid_label_value(v):
                errs.invalid(f"{rp}.values[{j}]", v, msg)
    validate_labels(errs, sel.match_labels, f"{path}.matchLabels")


def validate_node_selector_requirement(errs: FieldErrors, req: pb.NodeSelectorRequirement, path: str) -> None:
    if req.operator in ("In", "NotIn"):
        if not req.values:
            errs.required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
    elif req.operator in ("Exists", "DoesNotExist"):
        if req.values:
            errs.forbidden(
                f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
    elif req.operator in ("Gt", "Lt"):
        if len(req.values) != 1:
            errs.required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'")
        elif not _is_int(req.values[0]):
            errs.invalid(f"{path}.values[0]", req.values[0], "must be an integer")
    else:
        errs.enum(f"{path}.operator", req.operator, NODE_SELECTOR_OPERATORS, allow_empty=False)
    for msg in names.is_qualified_name(req.key):
        errs.invalid(f"{path}.key", req.key, msg)


def validate_node_selector_term(errs: FieldErrors, term: pb.NodeSelectorTerm, path: str) -> None:
    for i, req in enumerate(term.match_expressions):
        validate_node_selector_requirement(errs, req, f"{path}.matchExpressions[{i}]")
    for i, req in enumerate(term.match_fields):
        rp = f"{path}.matchFields[{i}]"
        if req.key != "metadata.name":
            errs.unsupported(f"{rp}.key", req.key, ("metadata.name",))
        if req.operator not in ("In", "NotIn"):
            errs.unsupported(f"{rp}.operator", req.operator, ("In", "NotIn"))
        elif len(req.values) != 1:
            errs.required(
                f"{rp}.values",
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )


def _is_int(text: str) -> bool:
    try:
        int(text, 10)
    except ValueError:
        return False
    return True


def is_int(text: str) -> bool:
    return _is_int(text)
