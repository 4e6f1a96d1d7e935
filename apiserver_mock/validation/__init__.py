"""Validation of every served kind, with Kubernetes' error messages.

One entry per kind in two small tables (object validators, update validators), looked up by the
kind's `Object` oneof field; the registry calls `validate_object` / `validate_update` and raises
`errors.invalid(...)` on a non-empty result. Validation always runs on the complete object that
would be stored, before any etcd write, so nothing half-valid is ever persisted.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.message import Message

from apiserver_mock.validation.field import FieldErrors
from apiserver_mock.validation.meta import validate_object_meta
from apiserver_mock.validation.others import (
    validate_event,
    validate_lease,
    validate_node,
    validate_priority_class,
    validate_priority_class_update,
)
from apiserver_mock.validation.pod import validate_binding, validate_pod, validate_pod_spec_update
from apiserver_mock.validation.size import MAX_OBJECT_BYTES, check_size
from apiserver_mock.validation.workloads import (
    validate_daemon_set,
    validate_deployment,
    validate_namespace,
    validate_pod_disruption_budget,
    validate_replica_set,
    validate_selector_unchanged,
    validate_service,
)
from kse.objects.kinds import Kind

__all__ = [
    "MAX_OBJECT_BYTES",
    "FieldErrors",
    "validate_binding",
    "validate_object",
    "validate_update",
]

ObjectValidator = Callable[[FieldErrors, Message], None]
UpdateValidator = Callable[[FieldErrors, Message, Message], None]

OBJECT_VALIDATORS: dict[str, ObjectValidator] = {
    "pod": validate_pod,  # type: ignore[dict-item]
    "node": validate_node,  # type: ignore[dict-item]
    "lease": validate_lease,  # type: ignore[dict-item]
    "event": validate_event,  # type: ignore[dict-item]
    "priority_class": validate_priority_class,  # type: ignore[dict-item]
    "namespace": validate_namespace,  # type: ignore[dict-item]
    "service": validate_service,  # type: ignore[dict-item]
    "replica_set": validate_replica_set,  # type: ignore[dict-item]
    "deployment": validate_deployment,  # type: ignore[dict-item]
    "daemon_set": validate_daemon_set,  # type: ignore[dict-item]
    "pod_disruption_budget": validate_pod_disruption_budget,  # type: ignore[dict-item]
}

UPDATE_VALIDATORS: dict[str, UpdateValidator] = {
    "pod": lambda errs, new, old: validate_pod_spec_update(errs, new.spec, old.spec),  # type: ignore[attr-defined]
    "priority_class": validate_priority_class_update,  # type: ignore[dict-item]
    "replica_set": validate_selector_unchanged,
    "deployment": validate_selector_unchanged,
    "daemon_set": validate_selector_unchanged,
}


def validate_object(kind: Kind, msg: Message) -> FieldErrors:
    """Every rule for a complete object of `kind` (its typed message, defaults already applied)."""
    errs = FieldErrors()
    check_size(errs, msg)
    api_version, kind_name = msg.api_version, msg.kind  # type: ignore[attr-defined]
    if api_version and api_version != kind.api_version:
        errs.invalid("apiVersion", api_version, f"must be {kind.api_version}")
    if kind_name and kind_name != kind.kind:
        errs.invalid("kind", kind_name, f"must be {kind.kind}")
    validate_object_meta(errs, kind, msg.metadata)  # type: ignore[attr-defined]
    OBJECT_VALIDATORS[kind.field](errs, msg)
    return errs


def validate_update(kind: Kind, new: Message, old: Message) -> FieldErrors:
    """Rules comparing the new object with the stored one (immutable fields), plus `validate_object`."""
    errs = validate_object(kind, new)
    new_meta, old_meta = new.metadata, old.metadata  # type: ignore[attr-defined]
    if new_meta.uid != old_meta.uid:
        errs.invalid("metadata.uid", new_meta.uid, "field is immutable")
    check = UPDATE_VALIDATORS.get(kind.field)
    if check is not None:
        check(errs, new, old)
    return errs
