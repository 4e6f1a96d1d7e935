# ruff: noqa: E501  (the column descriptions are upstream's strings, kept whole)
"""Table columns of the workload kinds, PodDisruptionBudget, Service and Namespace, as
kube-apiserver's printers define them (pkg/printers/internalversion/printers.go:
replicaSetColumnDefinitions, deploymentColumnDefinitions, daemonSetColumnDefinitions,
podDisruptionBudgetColumnDefinitions, serviceColumnDefinitions, namespaceColumnDefinitions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver_mock.http.tables_cells import NONE, STD, Column, Obj, age, get, name

AGE = Column(
    "Age",
    age,
    description="CreationTimestamp is a timestamp representing the server time when this object was created.",
)


def _int(*path: str) -> Callable[[Obj], int]:
    return lambda o: int(get(o, *path) or 0)


def _containers(o: Obj) -> str:
    return ",".join(c.get("name", "") for c in get(o, "spec", "template", "spec", "containers") or [])


def _images(o: Obj) -> str:
    return ",".join(c.get("image", "") for c in get(o, "spec", "template", "spec", "containers") or [])


def _selector_text(sel: Any) -> str:
    """metav1.FormatLabelSelector: "a=b,c in (d)" or <none>."""
    if not sel:
        return NONE
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for req in sel.get("matchExpressions") or []:
        op, key, values = req.get("operator", ""), req.get("key", ""), req.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or NONE


def _selector(o: Obj) -> str:
    return _selector_text(get(o, "spec", "selector"))


def _deployment_ready(o: Obj) -> str:
    return f"{int(get(o, 'status', 'readyReplicas') or 0)}/{int(get(o, 'spec', 'replicas') or 0)}"


def _node_selector(o: Obj) -> str:
    labels = get(o, "spec", "template", "spec", "nodeSelector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or NONE


def _int_or_string(*path: str) -> Callable[[Obj], str]:
    def cell(o: Obj) -> str:
        value = get(o, *path)
        return "N/A" if value is None else str(value)

    return cell


def _service_ports(o: Obj) -> str:
    out = []
    for p in get(o, "spec", "ports") or []:
        text = f"{p.get('port', 0)}"
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        out.append(f"{text}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or NONE


def _external_ip(o: Obj) -> str:
    if get(o, "spec", "type") == "ExternalName":
        return str(get(o, "spec", "externalName") or NONE)
    if get(o, "spec", "type") == "LoadBalancer":
        return "<pending>"
    return NONE


def _service_selector(o: Obj) -> str:
    labels = get(o, "spec", "selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or NONE


WIDE_WORKLOAD = (
    Column("Containers", _containers, priority=1, description="Names of each container in the template."),
    Column("Images", _images, priority=1, description="Images referenced by each container in the template."),
    Column(
        "Selector",
        _selector,
        priority=1,
        description="Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
    ),
)

APPS_COLUMNS: dict[str, tuple[Column, ...]] = {
    "namespaces": (
        Column("Name", name, format="name", description=STD),
        Column(
            "Status",
            lambda o: str(get(o, "status", "phase") or ""),
            description="The status of the namespace",
        ),
        AGE,
    ),
    "services": (
        Column("Name", name, format="name", description=STD),
        Column(
            "Type",
            lambda o: str(get(o, "spec", "type") or "ClusterIP"),
            description="type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.",
        ),
        Column(
            "Cluster-IP",
            lambda o: str(get(o, "spec", "clusterIP") or NONE),
            description="clusterIP is the IP address of the service and is usually assigned randomly.",
        ),
        Column(
            "External-IP",
            _external_ip,
            description="List of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        ),
        Column("Port(s)", _service_ports, description="The list of ports that are exposed by this service."),
        AGE,
        Column(
            "Selector",
            _service_selector,
            priority=1,
            description="Route service traffic to pods with label keys and values matching this selector.",
        ),
    ),
    "replicasets": (
        Column("Name", name, format="name", description=STD),
        Column(
            "Desired",
            _int("spec", "replicas"),
            type="integer",
            description="Replicas is the number of desired replicas.",
        ),
        Column(
            "Current",
            _int("status", "replicas"),
            type="integer",
            description="Replicas is the most recently observed number of replicas.",
        ),
        Column(
            "Ready",
            _int("status", "readyReplicas"),
            type="integer",
            description="The number of ready replicas for this replica set.",
        ),
        AGE,
        *WIDE_WORKLOAD,
    ),
    "deployments": (
        Column("Name", name, format="name", description=STD),
        Column("Ready", _deployment_ready, description="Number of the pod with ready state"),
        Column(
            "Up-to-date",
            _int("status", "updatedReplicas"),
            type="integer",
            description="Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        Column(
            "Available",
            _int("status", "availableReplicas"),
            type="integer",
            description="Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        AGE,
        *WIDE_WORKLOAD,
    ),
    "daemonsets": (
        Column("Name", name, format="name", description=STD),
        Column(
            "Desired",
            _int("status", "desiredNumberScheduled"),
            type="integer",
            description="The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
        ),
        Column(
            "Current",
            _int("status", "currentNumberScheduled"),
            type="integer",
            description="The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        Column(
            "Ready",
            _int("status", "numberReady"),
            type="integer",
            description="numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        ),
        Column(
            "Up-to-date",
            _int("status", "updatedNumberScheduled"),
            type="integer",
            description="The total number of nodes that are running updated daemon pod",
        ),
        Column(
            "Available",
            _int("status", "numberAvailable"),
            type="integer",
            description="The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
        ),
        Column(
            "Node Selector",
            _node_selector,
            description="NodeSelector is a selector which must be true for the pod to fit on a node.",
        ),
        AGE,
        *WIDE_WORKLOAD,
    ),
    "poddisruptionbudgets": (
        Column("Name", name, format="name", description=STD),
        Column(
            "Min Available",
            _int_or_string("spec", "minAvailable"),
            description="The minimum number of pods that must be available simultaneously.",
        ),
        Column(
            "Max Unavailable",
            _int_or_string("spec", "maxUnavailable"),
            description="The maximum number of pods that may be unavailable simultaneously.",
        ),
        Column(
            "Allowed Disruptions",
            _int("status", "disruptionsAllowed"),
            type="integer",
            description="Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ),
}
