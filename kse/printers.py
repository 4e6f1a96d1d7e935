"""How `kse get` prints objects: kubectl's tables, `-o yaml|json|name`. Pure functions, no I/O.

Tables follow kubectl's printers (`pkg/printers/internalversion/printers.go`): the same columns,
the same cell rules (READY is ready/total containers, node STATUS joins Ready and
SchedulingDisabled, ROLES come from `node-role.kubernetes.io/*` labels, "<none>" for empty cells
in wide columns), AGE as kubectl's `duration.HumanDuration`, and a tabwriter layout with three
spaces of padding. YAML keys are sorted as kubectl's (it marshals through JSON maps); JSON keeps
the Kubernetes field order with four-space indent; lists print as a `kind: List`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml
from google.protobuf.message import Message

from kse.objects import manifest, timeutil
from kse.objects.kinds import BY_MESSAGE, Kind
from proto import kse_pb2 as pb

OUTPUT_FORMATS = ("", "wide", "yaml", "json", "name")
NONE = "<none>"
UNKNOWN = "<unknown>"


# ---------------------------------------------------------------- time


def parse_time(value: str) -> datetime | None:
    """An RFC 3339 timestamp (Time or MicroTime), or None when unset or malformed."""
    if not value:
        return None
    try:
        return timeutil.parse_time(value)
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's `duration.HumanDuration` (k8s.io/apimachinery/pkg/util/duration)."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        sec = s % 60
        return f"{minutes}m" if sec == 0 else f"{minutes}m{sec}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def age(timestamp: str, now: datetime) -> str:
    """The AGE cell: time since `timestamp`, "<unknown>" when it is unset or unreadable."""
    t = parse_time(timestamp)
    if t is None:
        return UNKNOWN
    return human_duration((now - t).total_seconds())


# ---------------------------------------------------------------- tables


@dataclass(frozen=True)
class Column:
    name: str
    cell: Callable[[Any, datetime], str]
    wide_only: bool = False


def _pod_ready(pod: pb.Pod, _: datetime) -> str:
    sidecars = sum(1 for c in pod.spec.init_containers if c.restart_policy == "Always")
    total = len(pod.spec.containers) + sidecars
    ready = sum(1 for s in pod.status.container_statuses if s.ready)
    return f"{ready}/{total}"


def _pod_status(pod: pb.Pod, _: datetime) -> str:
    reason = pod.status.phase or "Pending"
    if pod.status.reason:
        reason = pod.status.reason
    for cond in pod.status.conditions:
        if cond.type == "PodScheduled" and cond.reason == "SchedulingGated":
            reason = "SchedulingGated"
    if pod.metadata.deletion_timestamp:
        reason = "Unknown" if pod.status.reason == "NodeLost" else "Terminating"
    return reason


def _pod_restarts(pod: pb.Pod, _: datetime) -> str:
    return str(sum(s.restart_count for s in pod.status.container_statuses))


def _node_status(node: pb.Node, _: datetime) -> str:
    states: list[str] = []
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    if not ready:
        states.append("Unknown")
    else:
        states.append("Ready" if ready[0].status == "True" else "NotReady")
    if node.spec.unschedulable:
        states.append("SchedulingDisabled")
    return ",".join(states)


def _node_roles(node: pb.Node, _: datetime) -> str:
    roles: set[str] = set()
    for key, value in node.metadata.labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key.removeprefix("node-role.kubernetes.io/")
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) if roles else NONE


def _node_address(kind: str) -> Callable[[pb.Node, datetime], str]:
    def cell(node: pb.Node, _: datetime) -> str:
        for a in node.status.addresses:
            if a.type == kind:
                return a.address
        return NONE

    return cell


def _or(value: str, default: str) -> str:
    return value if value else default


def _event_last_seen(ev: pb.Event, now: datetime) -> str:
    ts = ev.last_timestamp or ev.event_time or ev.first_timestamp or ev.metadata.creation_timestamp
    return age(ts, now)


def _event_first_seen(ev: pb.Event, now: datetime) -> str:
    return age(ev.first_timestamp or ev.event_time or ev.metadata.creation_timestamp, now)


def _event_object(ev: pb.Event, _: datetime) -> str:
    return f"{ev.involved_object.kind.lower()}/{ev.involved_object.name}"


def _event_source(ev: pb.Event, _: datetime) -> str:
    component = ev.source.component or ev.reporting_component
    host = ev.source.host or ev.reporting_instance
    if not component and not host:
        return ""
    return f"{component}, {host}" if host else component


def _name(obj: Any, _: datetime) -> str:
    return str(obj.metadata.name)


def _age(obj: Any, now: datetime) -> str:
    return age(obj.metadata.creation_timestamp, now)


# Columns per resource, as kubectl prints them. (Tables are presentation, so this is the one place
# that is written per kind; a kind without a row here prints NAME and AGE.)
COLUMNS: dict[str, tuple[Column, ...]] = {
    "pods": (
        Column("NAME", _name),
        Column("READY", _pod_ready),
        Column("STATUS", _pod_status),
        Column("RESTARTS", _pod_restarts),
        Column("AGE", _age),
        Column("IP", lambda p, _: _or(p.status.pod_ip, NONE), wide_only=True),
        Column("NODE", lambda p, _: _or(p.spec.node_name, NONE), wide_only=True),
        Column("NOMINATED NODE", lambda p, _: _or(p.status.nominated_node_name, NONE), wide_only=True),
    ),
    "nodes": (
        Column("NAME", _name),
        Column("STATUS", _node_status),
        Column("ROLES", _node_roles),
        Column("AGE", _age),
        Column("VERSION", lambda n, _: n.status.node_info.kubelet_version),
        Column("INTERNAL-IP", _node_address("InternalIP"), wide_only=True),
        Column("EXTERNAL-IP", _node_address("ExternalIP"), wide_only=True),
        Column("OS-IMAGE", lambda n, _: _or(n.status.node_info.os_image, UNKNOWN), wide_only=True),
        Column(
            "KERNEL-VERSION", lambda n, _: _or(n.status.node_info.kernel_version, UNKNOWN), wide_only=True
        ),
        Column(
            "CONTAINER-RUNTIME",
            lambda n, _: _or(n.status.node_info.container_runtime_version, UNKNOWN),
            wide_only=True,
        ),
    ),
    "leases": (
        Column("NAME", _name),
        Column("HOLDER", lambda le, _: le.spec.holder_identity),
        Column("AGE", _age),
    ),
    "events": (
        Column("LAST SEEN", _event_last_seen),
        Column("TYPE", lambda e, _: e.type),
        Column("REASON", lambda e, _: e.reason),
        Column("OBJECT", _event_object),
        Column("SUBOBJECT", lambda e, _: e.involved_object.field_path, wide_only=True),
        Column("SOURCE", _event_source, wide_only=True),
        Column("MESSAGE", lambda e, _: e.message.strip()),
        Column("FIRST SEEN", _event_first_seen, wide_only=True),
        Column("COUNT", lambda e, _: str(e.count) if e.count else "", wide_only=True),
        Column("NAME", _name, wide_only=True),
    ),
    "priorityclasses": (
        Column("NAME", _name),
        Column("VALUE", lambda pc, _: str(pc.value)),
        Column("GLOBAL-DEFAULT", lambda pc, _: "true" if pc.global_default else "false"),
        Column("AGE", _age),
        Column("PREEMPTIONPOLICY", lambda pc, _: pc.preemption_policy or "PreemptLowerPriority"),
    ),
}
_DEFAULT_COLUMNS = (Column("NAME", _name), Column("AGE", _age))


def columns_for(kind: Kind, *, wide: bool = False, with_namespace: bool = False) -> list[Column]:
    cols = [c for c in COLUMNS.get(kind.resource, _DEFAULT_COLUMNS) if wide or not c.wide_only]
    if with_namespace and kind.namespaced:
        cols.insert(0, Column("NAMESPACE", lambda o, _: o.metadata.namespace))
    return cols


def table_rows(
    kind: Kind,
    objects: Iterable[Message],
    *,
    now: datetime,
    wide: bool = False,
    with_namespace: bool = False,
) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of a kubectl table for `objects` of one kind."""
    cols = columns_for(kind, wide=wide, with_namespace=with_namespace)
    header = [c.name for c in cols]
    rows = [[_clean(c.cell(obj, now)) for c in cols] for obj in objects]
    return header, rows


def _clean(cell: str) -> str:
    # A cell is one line; tabs would break the layout.
    return " ".join(str(cell).replace("\t", " ").splitlines())


class TableWriter:
    """kubectl's tabwriter (padding 3): columns as wide as their widest cell so far; the last
    column is not padded. Widths only grow, so the rows a watch prints later stay aligned."""

    PADDING = 3

    def __init__(self) -> None:
        self.widths: list[int] = []

    def render(self, rows: Sequence[Sequence[str]]) -> str:
        for row in rows:
            for i, cell in enumerate(row[:-1]):
                if i >= len(self.widths):
                    self.widths.append(0)
                self.widths[i] = max(self.widths[i], len(cell))
        lines = []
        for row in rows:
            parts = [cell.ljust(self.widths[i] + self.PADDING) for i, cell in enumerate(row[:-1])]
            parts.append(row[-1] if row else "")
            lines.append("".join(parts).rstrip())
        return "".join(line + "\n" for line in lines)


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return TableWriter().render([list(header), *rows])


# ---------------------------------------------------------------- yaml, json, name


def kind_for(obj: Message) -> Kind:
    return BY_MESSAGE[obj.DESCRIPTOR.full_name]


def object_dict(obj: Message) -> dict[str, Any]:
    """The Kubernetes JSON shape of an object (`kse.objects.manifest.to_dict`): apiVersion and kind
    filled in, camelCase fields, unset fields left out, 64-bit integers as numbers."""
    return manifest.to_dict(obj)


def resource_name(kind: Kind, name: str) -> str:
    """kubectl's `-o name` form: "pod/nginx", "lease.coordination.k8s.io/x"."""
    prefix = kind.kind.lower() + (f".{kind.group}" if kind.group else "")
    return f"{prefix}/{name}"


def list_dict(objects: Iterable[Message]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "items": [object_dict(o) for o in objects],
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }


def to_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, allow_unicode=True)


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=4, ensure_ascii=False) + "\n"


def format_objects(
    kind: Kind,
    objects: Sequence[Message],
    output: str,
    *,
    now: datetime | None = None,
    with_namespace: bool = False,
    single: bool = False,
) -> str:
    """Everything `kse get` prints for `objects` (one kind) in `output` format.

    `single` is a get by name: yaml/json print the object itself instead of a List.
    """
    if output not in OUTPUT_FORMATS:
        raise ValueError(
            f"unable to match a printer suitable for the output format {output!r}, "
            f"allowed formats are: {','.join(f for f in OUTPUT_FORMATS if f)}"
        )
    if output == "name":
        return "".join(resource_name(kind, o.metadata.name) + "\n" for o in objects)  # type: ignore[attr-defined]
    if output in ("yaml", "json"):
        data = object_dict(objects[0]) if single and len(objects) == 1 else list_dict(objects)
        return to_yaml(data) if output == "yaml" else to_json(data)
    header, rows = table_rows(
        kind, objects, now=now or datetime.now(UTC), wide=output == "wide", with_namespace=with_namespace
    )
    return render_table(header, rows)
