"""The scheduler_perf workloads `kse bench throughput --workload` runs in process, shaped as
upstream's test/integration/scheduler_perf/config/performance-config.yaml and its templates:

* `basic` (SchedulingBasic): pod-default.yaml on node-default.yaml, one namespace.
* `pod-anti-affinity` (SchedulingPodAntiAffinity, upstream floor 60 pods/s at 5000 nodes, 1000
  init + 1000 measured pods): pod-with-pod-anti-affinity.yaml, labels color=green, required
  anti-affinity to color=green on kubernetes.io/hostname over namespaces sched-0 and sched-1.
* `pod-affinity` (SchedulingPodAffinity, floor 35 at 5000 nodes, 5000 + 5000 pods): every node
  in zone1; pod-with-pod-affinity.yaml, labels color=blue, required affinity to color=blue on
  topology.kubernetes.io/zone over both namespaces.
* `preferred-pod-affinity` (SchedulingPreferredPodAffinity, floor 90 at 5000 nodes, 5000 + 5000
  pods): pod-with-preferred-pod-affinity.yaml, labels color=red, preferred (weight 1) affinity
  to color=red on kubernetes.io/hostname over both namespaces.

Init pods are created in sched-0 and measured pods in sched-1, as upstream; `basic` keeps one
namespace ("default"), as before. Nodes always carry a unique kubernetes.io/hostname label.
"""

from __future__ import annotations

from collections.abc import Callable

from kse.objects.synthetic import make_nodes, make_pods
from proto import kse_pb2 as pb

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
NAMESPACES = ("sched-1", "sched-0")

FLOORS = {"pod-anti-affinity": 60.0, "pod-affinity": 35.0, "preferred-pod-affinity": 90.0}


def _term(color: str, key: str) -> pb.PodAffinityTerm:
    t = pb.PodAffinityTerm(topology_key=key, namespaces=list(NAMESPACES))
    t.label_selector.match_labels["color"] = color
    return t


def _anti(pod: pb.Pod) -> None:
    pod.metadata.labels.update({"color": "green", "name": "test"})
    terms = pod.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    terms.append(_term("green", HOSTNAME))


def _affinity(pod: pb.Pod) -> None:
    pod.metadata.labels.update({"color": "blue", "name": "test"})
    terms = pod.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution
    terms.append(_term("blue", ZONE))


def _preferred(pod: pb.Pod) -> None:
    pod.metadata.labels.update({"color": "red", "name": "test"})
    terms = pod.spec.affinity.pod_affinity.preferred_during_scheduling_ignored_during_execution
    terms.add(weight=1, pod_affinity_term=_term("red", HOSTNAME))


_SHAPES: dict[str, Callable[[pb.Pod], None] | None] = {
    "basic": None,
    "pod-anti-affinity": _anti,
    "pod-affinity": _affinity,
    "preferred-pod-affinity": _preferred,
}
WORKLOADS = tuple(_SHAPES)


def workload_nodes(workload: str, count: int) -> list[pb.Node]:
    nodes = make_nodes(count)
    if workload == "pod-affinity":
        for n in nodes:
            n.metadata.labels[ZONE] = "zone1"  # labelNodePrepareStrategy: all nodes in zone1
    return nodes


def workload_pods(workload: str, prefix: str, count: int, measured: bool) -> list[pb.Pod]:
    shape = _SHAPES[workload]
    if shape is None:
        return make_pods(prefix, count)
    pods = make_pods(prefix, count, namespace="sched-1" if measured else "sched-0")
    for p in pods:
        shape(p)
    return pods
