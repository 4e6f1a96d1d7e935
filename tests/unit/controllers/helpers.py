"""Builders for the controllers' unit tests (our own data, shaped like upstream's test helpers)."""

from __future__ import annotations

from kse.objects.intstr import set_int_or_string
from kse.objects.timeutil import format_time
from proto import kse_pb2 as pb

# 2016-05-20 00:00 / 01:00 / 02:00 UTC, as upstream's sync_test timestamps.
OLDER, OLD, NEW = 1463702400.0, 1463706000.0, 1463709600.0


def deployment(
    replicas: int, *, surge: int | str = 0, unavailable: int | str = 0, strategy: str = "RollingUpdate"
) -> pb.Deployment:
    d = pb.Deployment()
    d.metadata.name, d.metadata.namespace, d.metadata.uid = "foo", "default", "d-uid"
    d.metadata.generation = 1
    d.spec.replicas = replicas
    d.spec.strategy.type = strategy
    if strategy == "RollingUpdate":
        set_int_or_string(d.spec.strategy.rolling_update.max_surge, surge)
        set_int_or_string(d.spec.strategy.rolling_update.max_unavailable, unavailable)
    d.spec.selector.match_labels["foo"] = "bar"
    d.spec.template.metadata.labels["foo"] = "bar"
    return d


def replica_set(name: str, replicas: int, created: float = NEW, *, available: int = 0) -> pb.ReplicaSet:
    rs = pb.ReplicaSet()
    rs.metadata.name, rs.metadata.namespace, rs.metadata.uid = name, "default", f"{name}-uid"
    rs.metadata.creation_timestamp = format_time(created)
    rs.spec.replicas = replicas
    rs.status.available_replicas = available
    return rs


def pod(
    name: str,
    *,
    node: str = "node-1",
    phase: str = "Running",
    ready: bool = True,
    ready_since: float | None = None,
    created: float = NEW,
    restarts: int = 0,
    uid: str = "",
    cost: str | None = None,
) -> pb.Pod:
    p = pb.Pod()
    p.metadata.name, p.metadata.namespace, p.metadata.uid = name, "default", uid or f"{name}-uid"
    p.metadata.creation_timestamp = format_time(created)
    if cost is not None:
        p.metadata.annotations["controller.kubernetes.io/pod-deletion-cost"] = cost
    p.spec.node_name = node
    p.status.phase = phase
    cond = p.status.conditions.add()
    cond.type, cond.status = "Ready", "True" if ready else "False"
    if ready_since is not None:
        cond.last_transition_time = format_time(ready_since)
    if restarts:
        p.status.container_statuses.add(name="c", restart_count=restarts)
    return p
