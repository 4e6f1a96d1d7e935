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

* `mixed-base-pod` (MixedSchedulingBasePod, affinity/performance-config.yaml, floor 140 at 5000
  nodes, 2000 init pods of each of five kinds + 5000 measured): every node in zone1; the init
  pods are pod-default, pod-with-pod-affinity, pod-with-pod-anti-affinity,
  pod-with-preferred-pod-affinity and pod-with-preferred-pod-anti-affinity (labels
  color=yellow, preferred weight-1 anti-affinity to color=yellow on kubernetes.io/hostname), all
  in sched-0; the measured pods are pod-default.
* `preemption-async` (PreemptionAsync, default_preemption/performance-config.yaml, floor 570 at
  5000 nodes, 20000 init + 5000 measured pods): init pods are pod-low-priority.yaml (900m CPU,
  500Mi, priority 0: four fill a node to 3.6 of 4 CPU), measured pods pod-default; meanwhile a
  pod-high-priority.yaml pod (priority 10000, 3970m CPU, 500Mi) is created every 200 ms of the
  measured phase (the churn op), and can only run by preempting (`CHURN_INTERVAL`).

Init pods are created in sched-0 and measured pods in sched-1, as upstream; `basic` keeps one
namespace ("default"), as before (so do the measured pods of `mixed-base-pod` and
`preemption-async`, which upstream creates in a namespace of their own). Nodes always carry a
unique kubernetes.io/hostname label.
"""

from __future__ import annotations

from collections.abc import Callable

from kse.objects.synthetic import make_nodes, make_pods
from proto import kse_pb2 as pb

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
NAMESPACES = ("sched-1", "sched-0")

FLOORS = {
    "basic": 680.0,
    "pod-anti-affinity": 60.0,
    "pod-affinity": 35.0,
    "preferred-pod-affinity": 90.0,
    "mixed-base-pod": 140.0,
    "preemption-async": 570.0,
}
# Upstream's (init pods, measured pods) of the 5000-node workload with the floor, where the
# bench's defaults (1000, 10000) differ: pass them as --init-pods / --pods.
UPSTREAM_COUNTS = {
    "basic": (1000, 10000),
    "mixed-base-pod": (2000, 5000),
    "preemption-async": (20000, 5000),
}
# PreemptionAsync's churn: one high-priority pod per interval (seconds) of the measured phase.
CHURN_INTERVAL = 0.2
HIGH_PRIORITY = 10000


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


def _preferred_anti(pod: pb.Pod) -> None:
    pod.metadata.labels.update({"color": "yellow", "name": "test"})
    terms = pod.spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution
    terms.add(weight=1, pod_affinity_term=_term("yellow", HOSTNAME))


def _requests(pod: pb.Pod, cpu: str, memory: str) -> None:
    res = pod.spec.containers[0].resources
    res.requests.clear()
    res.requests.update({"cpu": cpu, "memory": memory})
    res.limits.update({"cpu": cpu, "memory": memory})


def _low_priority(pod: pb.Pod) -> None:
    _requests(pod, "900m", "500Mi")  # pod-low-priority.yaml (no priority: 0)


def _high_priority(pod: pb.Pod) -> None:
    _requests(pod, "3970m", "500Mi")  # default_preemption/templates/pod-high-priority.yaml
    pod.spec.priority = HIGH_PRIORITY


_SHAPES: dict[str, Callable[[pb.Pod], None] | None] = {
    "basic": None,
    "pod-anti-affinity": _anti,
    "pod-affinity": _affinity,
    "preferred-pod-affinity": _preferred,
    "mixed-base-pod": None,
    "preemption-async": None,
}
WORKLOADS = tuple(_SHAPES)
_Shape = Callable[[pb.Pod], None] | None
_MIXED_INIT: tuple[_Shape, ...] = (None, _affinity, _anti, _preferred, _preferred_anti)


def workload_nodes(workload: str, count: int) -> list[pb.Node]:
    nodes = make_nodes(count)
    if workload in ("pod-affinity", "mixed-base-pod"):
        for n in nodes:
            n.metadata.labels[ZONE] = "zone1"  # labelNodePrepareStrategy: all nodes in zone1
    return nodes


def churn_pods(prefix: str, count: int) -> list[pb.Pod]:
    """PreemptionAsync's churn pods (pod-high-priority.yaml)."""
    pods = make_pods(prefix, count)
    for p in pods:
        _high_priority(p)
    return pods


def workload_pods(workload: str, prefix: str, count: int, measured: bool) -> list[pb.Pod]:
    """The init pods (`measured` False) or measured pods of a workload. For `mixed-base-pod`
    `count` init pods of each of its five kinds, one kind after the other (upstream's five
    createPods ops)."""
    if workload == "mixed-base-pod":
        if measured:
            return make_pods(prefix, count)
        kinds = []
        for k, shape in enumerate(_MIXED_INIT):
            pods = make_pods(f"{prefix}-{k}", count, namespace="sched-0")
            for p in pods:
                if shape is not None:
                    shape(p)
            kinds.append(pods)
        return [p for group in kinds for p in group]
    if workload == "preemption-async":
        pods = make_pods(prefix, count)
        if not measured:
            for p in pods:
                _low_priority(p)
        return pods
    shape = _SHAPES[workload]
    if shape is None:
        return make_pods(prefix, count)
    pods = make_pods(prefix, count, namespace="sched-1" if measured else "sched-0")
    for p in pods:
        shape(p)
    return pods
