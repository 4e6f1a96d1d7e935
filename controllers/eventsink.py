"""Events from the node controllers, through the term's recorder (`ctx.events`, kse.events): queued
without blocking, aggregated, fenced with the term's token, as client-go's recorder. Events of
cluster-scoped objects (nodes) land in the `default` namespace, as upstream's recorder puts them.
Without a recorder (a test of one controller) nothing is recorded.
"""

from __future__ import annotations

from controllers.base import ControllerContext
from proto import kse_pb2 as pb

NORMAL = "Normal"
WARNING = "Warning"


def pod_ref(namespace: str, name: str, uid: str = "") -> pb.Pod:
    """A stand-in Pod to record an event about a pod known only by name (it may be gone)."""
    return pb.Pod(metadata=pb.ObjectMeta(namespace=namespace, name=name, uid=uid))


def record(
    ctx: ControllerContext,
    obj: pb.Pod | pb.Node | pb.DaemonSet,
    event_type: str,
    reason: str,
    message: str,
    *,
    component: str,
) -> None:
    """Record an event about `obj` (its kind and apiVersion from its type); never blocks."""
    if ctx.events is None:
        return
    kind, api_version = {
        pb.Pod: ("Pod", "v1"),
        pb.Node: ("Node", "v1"),
        pb.DaemonSet: ("DaemonSet", "apps/v1"),
    }[type(obj)]
    target: pb.Pod | pb.Node | pb.DaemonSet = obj
    if not obj.metadata.namespace and kind == "Node":
        target = pb.Node(
            metadata=pb.ObjectMeta(name=obj.metadata.name, uid=obj.metadata.uid, namespace="default")
        )
    ctx.events.eventf(
        target, event_type, reason, "", message, component=component, kind=kind, api_version=api_version
    )
