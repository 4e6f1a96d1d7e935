"""Which pods a ReplicaSet deletes first when it scales down: upstream's `ActivePodsWithRanks`
ordering (`pkg/controller/controller_utils.go`, Less), with the PodDeletionCost and
LogarithmicScaleDown behaviours that are on by default.

A pod sorts earlier (is deleted sooner) when, comparing in this order and stopping at the first
difference:

1. it is not scheduled (no nodeName) and the other is;
2. its phase is earlier in Pending < Unknown < Running;
3. it is not ready and the other is;
4. its `controller.kubernetes.io/pod-deletion-cost` is lower;
5. its rank is higher: more pods of the same owner family share its node;
6. both ready: it became ready more recently (on a log2 scale of age; same bucket: lower UID);
7. its containers have restarted more (the max over containers);
8. it was created more recently (log2 scale as in 6; an empty timestamp first).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence

from controllers.podutil import creation_time, is_pod_active, is_pod_ready, pod_ready_time
from proto import kse_pb2 as pb

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def deletion_cost(pod: pb.Pod) -> int:
    """The pod-deletion-cost annotation (an int32; anything unparsable counts as 0, as upstream
    treats a value the API server would have refused)."""
    text = pod.metadata.annotations.get(POD_DELETION_COST, "")
    try:
        value = int(text, 10)
    except ValueError:
        return 0
    return value if -(2**31) <= value < 2**31 else 0


def _log_rank(t: float, now: float) -> int:
    d = now - t
    return int(math.log2(d * 1e9)) if d > 0 else -1  # upstream takes log2 of a Duration (ns)


def _after_or_zero(t1: float | None, t2: float | None) -> bool:
    """afterOrZero: an unset time sorts first, then the later one."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _by_time(t1: float | None, t2: float | None, pi: pb.Pod, pj: pb.Pod, now: float) -> bool:
    if t1 is None or t2 is None or now <= 0:
        return _after_or_zero(t1, t2)
    diff = _log_rank(t1, now) - _log_rank(t2, now)
    if diff == 0:
        return pi.metadata.uid < pj.metadata.uid
    return diff < 0


def _max_restarts(pod: pb.Pod) -> int:
    return max((c.restart_count for c in pod.status.container_statuses), default=0)


def less(pi: pb.Pod, pj: pb.Pod, rank_i: int, rank_j: int, now: float) -> bool:
    """Whether pod i should be deleted before pod j (ActivePodsWithRanks.Less)."""
    ni, nj = pi.spec.node_name, pj.spec.node_name
    if ni != nj and (not ni or not nj):
        return not ni
    oi, oj = _PHASE_ORDINAL.get(pi.status.phase, -1), _PHASE_ORDINAL.get(pj.status.phase, -1)
    if oi != oj:
        return oi < oj
    ri, rj = is_pod_ready(pi), is_pod_ready(pj)
    if ri != rj:
        return not ri
    ci, cj = deletion_cost(pi), deletion_cost(pj)
    if ci != cj:
        return ci < cj
    if rank_i != rank_j:
        return rank_i > rank_j
    if ri and rj:
        ti, tj = pod_ready_time(pi), pod_ready_time(pj)
        if ti != tj:
            return _by_time(ti, tj, pi, pj, now)
    mi, mj = _max_restarts(pi), _max_restarts(pj)
    if mi != mj:
        return mi > mj
    ti, tj = creation_time(pi.metadata), creation_time(pj.metadata)
    if ti != tj:
        return _by_time(ti, tj, pi, pj, now)
    return False


def rank_by_related_pods_on_node(pods: Sequence[pb.Pod], related: Sequence[pb.Pod]) -> list[int]:
    """getPodsRankedByRelatedPodsOnSameNode: each pod's rank is how many active related pods
    (this ReplicaSet's and its siblings under the same owner) run on its node."""
    on_node = Counter(p.spec.node_name for p in related if is_pod_active(p))
    return [on_node[p.spec.node_name] for p in pods]


def sort_for_deletion(pods: Sequence[pb.Pod], ranks: Sequence[int], now: float) -> list[pb.Pod]:
    """`pods` ordered deletion-first (a stable sort, as upstream's sort.Sort is not: ties keep
    their input order here)."""
    indexed = list(zip(pods, ranks, strict=True))

    def cmp(a: tuple[pb.Pod, int], b: tuple[pb.Pod, int]) -> int:
        if less(a[0], b[0], a[1], b[1], now):
            return -1
        if less(b[0], a[0], b[1], a[1], now):
            return 1
        return 0

    return [p for p, _ in sorted(indexed, key=functools.cmp_to_key(cmp))]


def pods_to_delete(pods: Sequence[pb.Pod], related: Sequence[pb.Pod], diff: int, now: float) -> list[pb.Pod]:
    """getPodsToDelete: the `diff` pods to delete first."""
    if diff >= len(pods):
        return list(pods)
    ranks = rank_by_related_pods_on_node(pods, related)
    return sort_for_deletion(pods, ranks, now)[:diff]
