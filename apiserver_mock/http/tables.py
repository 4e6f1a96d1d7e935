# ruff: noqa: E501  (the column descriptions are upstream's strings, kept whole)
"""meta.k8s.io/v1 Table output, with the columns kube-apiserver prints per kind.

One column table per kind (`COLUMNS`, data: name, type, format, priority, and a cell function over
the object's JSON), as `pkg/printers/internalversion/printers.go` defines them; priority 1 columns
are what `kubectl get -o wide` adds. Rows carry the object as PartialObjectMetadata
(`includeObject=Metadata`, the default), the whole object (`Object`) or nothing (`None`).
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver_mock.http.codec import BadRequest
from apiserver_mock.http.tables_apps import APPS_COLUMNS
from apiserver_mock.http.tables_cells import NONE, STD, Column, Obj, human_duration, since
from apiserver_mock.http.tables_cells import age as _age
from apiserver_mock.http.tables_cells import get as _get
from apiserver_mock.http.tables_cells import name as _name
from apiserver_mock.http.tables_cells import or_none as _or_none

__all__ = ["COLUMNS", "Column", "human_duration", "since", "table"]

# ---------------------------------------------------------------- pods (printPod)


def _pod_ready(o: Obj) -> str:
    containers = _get(o, "spec", "containers") or []
    statuses = _get(o, "status", "containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{len(containers)}"


def _pod_restarts(o: Obj) -> int:
    return sum(int(s.get("restartCount", 0)) for s in _get(o, "status", "containerStatuses") or [])


def _pod_status(o: Obj) -> str:
    reason = _get(o, "status", "reason") or _get(o, "status", "phase") or ""
    for cond in _get(o, "status", "conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    if _get(o, "metadata", "deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _readiness_gates(o: Obj) -> str:
    gates = _get(o, "spec", "readinessGates") or []
    if not gates:
        return NONE
    conds = {c.get("type"): c.get("status") for c in _get(o, "status", "conditions") or []}
    return f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/{len(gates)}"


# ---------------------------------------------------------------- nodes (printNode)


def _node_status(o: Obj) -> str:
    states = []
    for cond in _get(o, "status", "conditions") or []:
        if cond.get("type") == "Ready":
            states.append("Ready" if cond.get("status") == "True" else "NotReady")
    if not states:
        states.append("Unknown")
    if _get(o, "spec", "unschedulable"):
        states.append("SchedulingDisabled")
    return ",".join(states)


def _node_roles(o: Obj) -> str:
    roles = []
    for key, value in (_get(o, "metadata", "labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/"):
            roles.append(key.split("/", 1)[1])
        elif key == "kubernetes.io/role" and value:
            roles.append(value)
    return ",".join(sorted(set(r for r in roles if r))) or NONE


def _address(kind: str) -> Callable[[Obj], str]:
    def cell(o: Obj) -> str:
        for a in _get(o, "status", "addresses") or []:
            if a.get("type") == kind:
                return str(a.get("address", ""))
        return NONE

    return cell


def _node_info(field: str) -> Callable[[Obj], str]:
    return lambda o: str(_get(o, "status", "nodeInfo", field) or "<unknown>")


# ---------------------------------------------------------------- events (printEvent)


def _event_last_seen(o: Obj) -> str:
    ts = o.get("lastTimestamp") or o.get("eventTime") or _get(o, "metadata", "creationTimestamp")
    return since(ts)


def _event_object(o: Obj) -> str:
    ref = o.get("involvedObject") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _event_source(o: Obj) -> str:
    src = o.get("source") or {}
    comp = src.get("component") or o.get("reportingComponent") or ""
    host = src.get("host")
    return f"{comp}, {host}" if host else str(comp)


COLUMNS: dict[str, tuple[Column, ...]] = {
    "pods": (
        Column("Name", _name, format="name", description="Name must be unique within a namespace."),
        Column(
            "Ready",
            _pod_ready,
            description="The aggregate readiness state of this pod for accepting traffic.",
        ),
        Column("Status", _pod_status, description="The aggregate status of the containers in this pod."),
        Column(
            "Restarts",
            _pod_restarts,
            type="string",
            description="The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        Column(
            "Age",
            _age,
            description="CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        Column(
            "IP",
            lambda o: _or_none(_get(o, "status", "podIP")),
            priority=1,
            description="podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        ),
        Column(
            "Node",
            lambda o: _or_none(_get(o, "spec", "nodeName")),
            priority=1,
            description="NodeName is a request to schedule this pod onto a specific node.",
        ),
        Column(
            "Nominated Node",
            lambda o: _or_none(_get(o, "status", "nominatedNodeName")),
            priority=1,
            description="nominatedNodeName is set only when this pod preempts other pods on the node.",
        ),
        Column(
            "Readiness Gates",
            _readiness_gates,
            priority=1,
            description="If specified, all readiness gates will be evaluated for pod readiness.",
        ),
    ),
    "nodes": (
        Column("Name", _name, format="name", description="Name must be unique within a namespace."),
        Column("Status", _node_status, description="The status of the node"),
        Column("Roles", _node_roles, description="The roles of the node"),
        Column(
            "Age",
            _age,
            description="CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        Column("Version", _node_info("kubeletVersion"), description="Kubelet Version reported by the node."),
        Column(
            "Internal-IP",
            _address("InternalIP"),
            priority=1,
            description="List of addresses reachable to the node. Queried from cloud provider, if available.",
        ),
        Column(
            "External-IP",
            _address("ExternalIP"),
            priority=1,
            description="List of addresses reachable to the node. Queried from cloud provider, if available.",
        ),
        Column(
            "OS-Image",
            _node_info("osImage"),
            priority=1,
            description="OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        ),
        Column(
            "Kernel-Version",
            _node_info("kernelVersion"),
            priority=1,
            description="Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        ),
        Column(
            "Container-Runtime",
            _node_info("containerRuntimeVersion"),
            priority=1,
            description="ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        ),
    ),
    "leases": (
        Column("Name", _name, format="name", description="Name must be unique within a namespace."),
        Column(
            "Holder",
            lambda o: str(_get(o, "spec", "holderIdentity") or ""),
            description="holderIdentity contains the identity of the holder of a current lease.",
        ),
        Column(
            "Age",
            _age,
            description="CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
    ),
    "events": (
        Column("Last Seen", _event_last_seen, description="Time when this Event was last observed."),
        Column(
            "Type",
            lambda o: str(o.get("type", "")),
            description="Type of this event (Normal, Warning), new types could be added in the future.",
        ),
        Column(
            "Reason",
            lambda o: str(o.get("reason", "")),
            description="This should be a short, machine understandable string that gives the reason for this event being generated.",
        ),
        Column("Object", _event_object, description="The object that this event is about."),
        Column(
            "Subobject",
            lambda o: str(_get(o, "involvedObject", "fieldPath") or ""),
            priority=1,
            description="The object that this event is about.",
        ),
        Column("Source", _event_source, priority=1, description="The component reporting this event."),
        Column(
            "Message",
            lambda o: str(o.get("message", "")),
            description="A human-readable description of the status of this operation.",
        ),
        Column(
            "First Seen",
            lambda o: since(o.get("firstTimestamp") or o.get("eventTime")),
            priority=1,
            description="The time at which the event was first recorded.",
        ),
        Column(
            "Count",
            lambda o: int(o.get("count", 1) or 1),
            type="integer",
            priority=1,
            description="The number of times this event has occurred.",
        ),
        Column("Name", _name, format="name", priority=1, description=STD),
    ),
    "priorityclasses": (
        Column("Name", _name, format="name", description="Name must be unique within a namespace."),
        Column(
            "Value",
            lambda o: int(o.get("value", 0)),
            type="integer",
            description="value represents the integer value of this priority class.",
        ),
        Column(
            "Global-Default",
            lambda o: bool(o.get("globalDefault", False)),
            type="boolean",
            description="globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
        ),
        Column(
            "Age",
            _age,
            description="CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        Column(
            "PreemptionPolicy",
            lambda o: str(o.get("preemptionPolicy") or "PreemptLowerPriority"),
            description="preemptionPolicy is the Policy for preempting pods with lower priority.",
        ),
    ),
    **APPS_COLUMNS,
}
DEFAULT_COLUMNS = (
    Column("Name", _name, format="name", description=STD),
    Column(
        "Age",
        _age,
        description="CreationTimestamp is a timestamp representing the server time when this object was created.",
    ),
)
INCLUDE_OBJECT = ("None", "Metadata", "Object")


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for a meta.k8s.io Table (kubectl get does)."""
    for media in accept.split(","):
        params = {p.strip().partition("=")[0]: p.strip().partition("=")[2] for p in media.split(";")[1:]}
        if params.get("as") == "Table" and params.get("g", "meta.k8s.io") == "meta.k8s.io":
            return True
    return False


def include_object(value: str) -> str:
    if value == "":
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise BadRequest(
            f'includeObject: Unsupported value: "{value}": supported values: "Metadata", "None", "Object"'
        )
    return value


def _row_object(o: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return o
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata", {}),
    }


def table(
    resource: str, objects: list[Obj], include: str, list_meta: Obj | None = None, *, columns: bool = True
) -> Obj:
    """A Table of `objects` (JSON dicts of one resource)."""
    cols = COLUMNS.get(resource, DEFAULT_COLUMNS)
    rows = []
    for o in objects:
        row: Obj = {"cells": [c.cell(o) for c in cols]}
        obj = _row_object(o, include)
        if obj is not None:
            row["object"] = obj
        rows.append(row)
    out: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {}}
    if columns:
        out["columnDefinitions"] = [c.definition() for c in cols]
    out["rows"] = rows
    return out
