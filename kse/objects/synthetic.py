"""Synthetic nodes and pods shaped as upstream scheduler_perf's defaults (node-default.yaml,
pod-default.yaml), shared by the in-process throughput bench (scheduler) and the end-to-end one
(harness), which must not import each other.
"""

from __future__ import annotations

from proto import kse_pb2 as pb

NODE_ALLOCATABLE = {"cpu": "4", "memory": "32Gi", "pods": "110"}
POD_REQUESTS = {"cpu": "100m", "memory": "500Mi"}
POD_IMAGE = "registry.k8s.io/pause:3.10"

# `kse bench throughput --json`: one object with these keys, in-process and end to end alike.
THROUGHPUT_JSON_KEYS = ("mode", "nodes", "pods", "pods_per_s", "attempt_ms_p50", "attempt_ms_p99")


def make_nodes(count: int) -> list[pb.Node]:
    """scheduler_perf's node-default.yaml: capacity 4 CPU / 32Gi / 110 pods, Ready (the API
    server defaults allocatable to capacity)."""
    nodes = []
    for i in range(count):
        node = pb.Node(api_version="v1", kind="Node")
        node.metadata.name = f"scheduler-perf-{i:05d}"
        node.metadata.uid = f"node-uid-{i}"
        node.metadata.labels["kubernetes.io/hostname"] = node.metadata.name
        node.status.capacity.update(NODE_ALLOCATABLE)
        node.status.allocatable.update(NODE_ALLOCATABLE)
        node.status.conditions.add(type="Ready", status="True")
        node.status.phase = "Running"
        nodes.append(node)
    return nodes


def make_pods(prefix: str, count: int, namespace: str = "default") -> list[pb.Pod]:
    """scheduler_perf's pod-default.yaml: one pause container requesting 100m / 500Mi."""
    template = pb.Pod(api_version="v1", kind="Pod")
    template.metadata.namespace = namespace
    c = template.spec.containers.add(name="pause", image=POD_IMAGE)
    c.resources.requests.update(POD_REQUESTS)
    template.spec.scheduler_name = "default-scheduler"
    pods = []
    for i in range(count):
        pod = pb.Pod()
        pod.CopyFrom(template)
        pod.metadata.name = f"{prefix}-{i}"
        pod.metadata.uid = f"{prefix}-uid-{i}"
        pods.append(pod)
    return pods
