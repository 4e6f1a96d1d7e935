"""Defaulting of the workload kinds, Service and Namespace, as kube-apiserver's SetDefaults_*
functions run on every decoded request (pkg/apis/apps/v1/defaults.go, pkg/apis/core/v1/defaults.go).

Defaults run on create and on update, so a client that omits a defaulted field on update gets the
default back rather than a validation error, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.message import Message

from kse.objects.intstr import set_int_or_string
from proto import kse_pb2 as pb

DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def default_pod_template(template: pb.PodTemplateSpec) -> None:
    spec = template.spec
    if not spec.restart_policy:
        spec.restart_policy = "Always"
    if not spec.scheduler_name:
        spec.scheduler_name = DEFAULT_SCHEDULER
    if not spec.HasField("termination_grace_period_seconds"):
        spec.termination_grace_period_seconds = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS


def default_replica_set(rs: pb.ReplicaSet) -> None:
    if not rs.spec.HasField("replicas"):
        rs.spec.replicas = 1
    default_pod_template(rs.spec.template)


def default_deployment(d: pb.Deployment) -> None:
    spec = d.spec
    if not spec.HasField("replicas"):
        spec.replicas = 1
    if not spec.strategy.type:
        spec.strategy.type = "RollingUpdate"
    if spec.strategy.type == "RollingUpdate":
        ru = spec.strategy.rolling_update
        if not ru.HasField("max_unavailable"):
            set_int_or_string(ru.max_unavailable, "25%")
        if not ru.HasField("max_surge"):
            set_int_or_string(ru.max_surge, "25%")
    if not spec.HasField("revision_history_limit"):
        spec.revision_history_limit = 10
    if not spec.HasField("progress_deadline_seconds"):
        spec.progress_deadline_seconds = 600
    default_pod_template(spec.template)


def default_daemon_set(ds: pb.DaemonSet) -> None:
    spec = ds.spec
    if not spec.update_strategy.type:
        spec.update_strategy.type = "RollingUpdate"
    if spec.update_strategy.type == "RollingUpdate":
        ru = spec.update_strategy.rolling_update
        if not ru.HasField("max_unavailable"):
            set_int_or_string(ru.max_unavailable, 1)
        if not ru.HasField("max_surge"):
            set_int_or_string(ru.max_surge, 0)
    if not spec.HasField("revision_history_limit"):
        spec.revision_history_limit = 10
    default_pod_template(spec.template)


def default_service(svc: pb.Service) -> None:
    spec = svc.spec
    if not spec.type:
        spec.type = "ClusterIP"
    if not spec.session_affinity:
        spec.session_affinity = "None"
    if spec.type in ("ClusterIP", "NodePort", "LoadBalancer") and not spec.internal_traffic_policy:
        spec.internal_traffic_policy = "Cluster"
    for port in spec.ports:
        if not port.protocol:
            port.protocol = "TCP"
        if port.target_port.WhichOneof("kind") is None:
            set_int_or_string(port.target_port, port.port)


def default_namespace(ns: pb.Namespace) -> None:
    # The immutable name label (KEP-2161) that namespaceSelector terms match on.
    ns.metadata.labels[NAMESPACE_NAME_LABEL] = ns.metadata.name
    if not ns.spec.finalizers:
        ns.spec.finalizers.append("kubernetes")
    if not ns.status.phase:
        ns.status.phase = "Active"


DEFAULTERS: dict[str, Callable[[Message], None]] = {
    "replica_set": default_replica_set,  # type: ignore[dict-item]
    "deployment": default_deployment,  # type: ignore[dict-item]
    "daemon_set": default_daemon_set,  # type: ignore[dict-item]
    "service": default_service,  # type: ignore[dict-item]
    "namespace": default_namespace,  # type: ignore[dict-item]
}
