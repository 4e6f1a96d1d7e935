"""Node, Lease, Event and PriorityClass validation (small enough to share one module)."""

from __future__ import annotations

from apiserver_mock.validation import common
from apiserver_mock.validation.field import FieldErrors
from apiserver_mock.validation.pod import TAINT_EFFECTS
from kse.objects import names
from proto import kse_pb2 as pb

NODE_PHASES = ("Pending", "Running", "Terminated")
NODE_ADDRESS_TYPES = ("Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS")
EVENT_TYPES = ("Normal", "Warning")
LEASE_STRATEGIES = ("OldestEmulationVersion",)
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


def validate_node(errs: FieldErrors, node: pb.Node) -> None:
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(node.spec.taints):
        tp = f"spec.taints[{i}]"
        if not taint.key:
            errs.required(f"{tp}.key")
        else:
            for msg in names.is_qualified_name(taint.key):
                errs.invalid(f"{tp}.key", taint.key, msg)
        for msg in names.is_valid_label_value(taint.value):
            errs.invalid(f"{tp}.value", taint.value, msg)
        errs.enum(f"{tp}.effect", taint.effect, TAINT_EFFECTS, allow_empty=False)
        common.timestamp(errs, f"{tp}.timeAdded", taint.time_added)
        if (taint.key, taint.effect) in seen:
            errs.duplicate(tp, f"{taint.key}:{taint.effect}")
        seen.add((taint.key, taint.effect))
    validate_node_status(errs, node.status, "status")


def validate_node_status(errs: FieldErrors, status: pb.NodeStatus, path: str) -> None:
    common.resource_list(errs, f"{path}.capacity", status.capacity)
    common.resource_list(errs, f"{path}.allocatable", status.allocatable)
    errs.enum(f"{path}.phase", status.phase, NODE_PHASES)
    for i, cond in enumerate(status.conditions):
        cp = f"{path}.conditions[{i}]"
        if not cond.type:
            errs.required(f"{cp}.type")
        errs.enum(f"{cp}.status", cond.status, common.CONDITION_STATUSES, allow_empty=False)
        common.timestamp(errs, f"{cp}.lastHeartbeatTime", cond.last_heartbeat_time)
        common.timestamp(errs, f"{cp}.lastTransitionTime", cond.last_transition_time)
    for i, addr in enumerate(status.addresses):
        errs.enum(f"{path}.addresses[{i}].type", addr.type, NODE_ADDRESS_TYPES, allow_empty=False)
    for i, image in enumerate(status.images):
        if image.size_bytes < 0:
            errs.invalid(
                f"{path}.images[{i}].sizeBytes", image.size_bytes, "must be greater than or equal to 0"
            )


def validate_lease(errs: FieldErrors, lease: pb.Lease) -> None:
    spec = lease.spec
    if spec.HasField("lease_duration_seconds") and spec.lease_duration_seconds <= 0:
        errs.invalid("spec.leaseDurationSeconds", spec.lease_duration_seconds, "must be greater than 0")
    if spec.HasField("lease_transitions") and spec.lease_transitions < 0:
        errs.invalid("spec.leaseTransitions", spec.lease_transitions, "must be greater than or equal to 0")
    common.timestamp(errs, "spec.acquireTime", spec.acquire_time)
    common.timestamp(errs, "spec.renewTime", spec.renew_time)
    errs.enum("spec.strategy", spec.strategy, LEASE_STRATEGIES)
    if spec.preferred_holder and not spec.strategy:
        errs.forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined")


def validate_event(errs: FieldErrors, event: pb.Event) -> None:
    errs.enum("type", event.type, EVENT_TYPES)
    if event.count < 0:
        errs.invalid("count", event.count, "must be greater than or equal to 0")
    ref = event.involved_object
    if ref.namespace and event.metadata.namespace and ref.namespace != event.metadata.namespace:
        errs.invalid("involvedObject.namespace", ref.namespace, "does not match event.namespace")
    for attr, json_name in (
        ("first_timestamp", "firstTimestamp"),
        ("last_timestamp", "lastTimestamp"),
        ("event_time", "eventTime"),
    ):
        common.timestamp(errs, json_name, getattr(event, attr))
    if len(event.reason) > 128:
        errs.too_long("reason", 128)
    if len(event.action) > 128:
        errs.too_long("action", 128)


def validate_priority_class(errs: FieldErrors, pc: pb.PriorityClass) -> None:
    name = pc.metadata.name
    if name.startswith("system-"):
        known = SYSTEM_PRIORITY_CLASSES.get(name)
        if known is None or known != pc.value:
            errs.forbidden(
                "metadata.name",
                "priority class names with 'system-' prefix are reserved for system use only",
            )
    elif pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.forbidden(
            "value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
        )
    errs.enum("preemptionPolicy", pc.preemption_policy, PREEMPTION_POLICIES)


def validate_priority_class_update(errs: FieldErrors, new: pb.PriorityClass, old: pb.PriorityClass) -> None:
    if new.value != old.value:
        errs.forbidden("value", "may not be changed in an update.")
    if new.preemption_policy != old.preemption_policy:
        errs.invalid("preemptionPolicy", new.preemption_policy, "field is immutable")
