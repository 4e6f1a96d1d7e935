"""Taints and tolerations as the controllers and the API server need them (the scheduler has its
own, cached, copy in `scheduler/framework/plugins/helper/taints.py`, which kse may not import).

Upstream: k8s.io/api core/v1 toleration.go (ToleratesTaint), pkg/apis/core/v1/helper
(GetMatchingTolerations), pkg/util/tolerations, and the well-known taint keys of
k8s.io/api core/v1 well_known_taints.go.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from proto import kse_pb2 as pb

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"

# well_known_taints.go
TAINT_NODE_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NODE_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_NODE_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_NODE_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
TAINT_NODE_PID_PRESSURE = "node.kubernetes.io/pid-pressure"

_DECIMAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")


def _int64(text: str) -> int | None:
    return int(text) if _DECIMAL_INTEGER.match(text) else None


def tolerates(tol: pb.Toleration, taint: pb.Taint) -> bool:
    """Toleration.ToleratesTaint: effect ("" = every effect), key ("" with Exists = every key),
    then Equal (the default), Exists, or the numeric Gt / Lt (a value that does not parse
    tolerates nothing)."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    op = tol.operator or "Equal"
    if op == "Equal":
        return tol.value == taint.value
    if op == "Exists":
        return True
    if op in ("Gt", "Lt"):
        want, have = _int64(tol.value), _int64(taint.value)
        if want is None or have is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def tolerated(tolerations: Iterable[pb.Toleration], taint: pb.Taint) -> bool:
    """Whether any of `tolerations` tolerates `taint` (TolerationsTolerateTaint)."""
    return any(tolerates(t, taint) for t in tolerations)


def untolerated(
    taints: Iterable[pb.Taint], tolerations: Sequence[pb.Toleration], effects: tuple[str, ...]
) -> pb.Taint | None:
    """The first taint with one of `effects` that no toleration tolerates (FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint.effect in effects and not tolerated(tolerations, taint):
            return taint
    return None


def matching_tolerations(
    taints: Sequence[pb.Taint], tolerations: Sequence[pb.Toleration]
) -> tuple[bool, list[pb.Toleration]]:
    """GetMatchingTolerations: (every taint tolerated, the tolerations used: for each taint the
    first toleration that tolerates it)."""
    used: list[pb.Toleration] = []
    for taint in taints:
        for tol in tolerations:
            if tolerates(tol, taint):
                used.append(tol)
                break
        else:
            return False, []
    return True, used


def min_toleration_seconds(tolerations: Sequence[pb.Toleration]) -> float | None:
    """taint_eviction.go getMinTolerationTime, in seconds: 0 for no tolerations (evict now), None
    when every toleration tolerates forever (no tolerationSeconds), else the smallest
    tolerationSeconds (a value <= 0 means now)."""
    if not tolerations:
        return 0.0
    least: int | None = None
    for t in tolerations:
        if t.HasField("toleration_seconds"):
            if t.toleration_seconds <= 0:
                return 0.0
            least = t.toleration_seconds if least is None else min(least, t.toleration_seconds)
    return None if least is None else float(least)


def taint_key(t: pb.Taint) -> tuple[str, str]:
    """Taints are identified by key and effect (MatchTaint)."""
    return t.key, t.effect


def has_taint(taints: Iterable[pb.Taint], key: str, effect: str) -> bool:
    return any(t.key == key and t.effect == effect for t in taints)


def add_or_update_toleration(spec: pb.PodSpec, tol: pb.Toleration) -> bool:
    """pkg/util/tolerations AddOrUpdateTolerationInPodSpec: a toleration with the same key,
    operator, value and effect is replaced (if it differs), else `tol` is appended. True if the
    spec changed."""
    for existing in spec.tolerations:
        if (existing.key, existing.operator or "Equal", existing.value, existing.effect) == (
            tol.key,
            tol.operator or "Equal",
            tol.value,
            tol.effect,
        ):
            if existing == tol:
                return False
            existing.CopyFrom(tol)
            return True
    spec.tolerations.append(tol)
    return True
