"""A pod's priority (upstream component-helpers `corev1helpers.PodPriority`)."""

from __future__ import annotations

from proto import kse_pb2 as pb


def pod_priority(pod: pb.Pod) -> int:
    """Upstream corev1helpers.PodPriority: spec.priority, or 0 when unset."""
    return pod.spec.priority if pod.spec.HasField("priority") else 0
