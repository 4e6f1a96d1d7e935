"""The disruption controller's arithmetic, as pure functions (upstream
pkg/controller/disruption/disruption.go: getExpectedPodCount, getExpectedScale,
buildDisruptedPodMap, countHealthyPods, updatePdbStatus).

* desiredHealthy / expectedPods: an integer minAvailable is taken as it is, over the matching pods'
  count; a percentage minAvailable or any maxUnavailable needs the *scale* of the pods'
  controllers (an owning ReplicaSet's replicas, or the Deployment's when the ReplicaSet belongs
  to one), summed over the distinct controllers. Pods with no controller do not count (upstream
  logs them as unmanaged and goes on); a pod whose controller cannot be found is an error.
  Percentages round up (GetScaledValueFromIntOrPercent(.., true)).
* disruptedPods: an entry stays while its pod exists, is not terminating, and was evicted less
  than `DELETION_TIMEOUT_S` (2 min) ago; the earliest expiry is when to look again.
* currentHealthy: Ready pods that are neither terminating nor in disruptedPods.
* disruptionsAllowed = currentHealthy - desiredHealthy, and 0 when that is negative or when no
  pods are expected (a budget over no pods yet is safe when its first pods appear).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kse.objects.disruption import (
    DISRUPTION_ALLOWED,
    SYNC_FAILED,
    is_pod_ready,
    set_condition,
    update_disruption_allowed_condition,
)
from kse.objects.intstr import IntOrStringError, int_or_string, scaled_value
from kse.objects.timeutil import to_epoch
from proto import kse_pb2 as pb

DELETION_TIMEOUT_S = 120.0  # disruption.go DeletionTimeout: 2 minutes


class BudgetError(Exception):
    """The budget's status cannot be computed (upstream's sync error: the controller writes
    disruptionsAllowed 0 with DisruptionAllowed=False, reason SyncFailed)."""


@dataclass(frozen=True, slots=True)
class Scale:
    """A controller of pods and its desired replica count."""

    uid: str
    replicas: int


# (the pod's controller ownerReference, namespace) -> the controller's scale, None if not found.
ScaleFinder = Callable[[pb.OwnerReference, str], Scale | None]


def controller_of(meta: pb.ObjectMeta) -> pb.OwnerReference | None:
    """metav1.GetControllerOf: the ownerReference with controller=true."""
    for ref in meta.owner_references:
        if ref.controller:
            return ref
    return None


def expected_scale(pods: Sequence[pb.Pod], find: ScaleFinder) -> tuple[int, list[str]]:
    """getExpectedScale: the sum of the scales of the pods' distinct controllers, and the names of
    pods that have none (unmanaged)."""
    scales: dict[str, int] = {}
    unmanaged: list[str] = []
    for pod in pods:
        ref = controller_of(pod.metadata)
        if ref is None:
            unmanaged.append(pod.metadata.name)
            continue
        if ref.uid in scales:
            continue
        found = find(ref, pod.metadata.namespace)
        if found is None:
            raise BudgetError(f'found no controllers for pod "{pod.metadata.name}"')
        scales[found.uid] = found.replicas
    return sum(scales.values()), unmanaged


def expected_pod_count(
    pdb: pb.PodDisruptionBudget, pods: Sequence[pb.Pod], find: ScaleFinder
) -> tuple[int, int, list[str]]:
    """getExpectedPodCount: (expectedPods, desiredHealthy, unmanaged pod names)."""
    spec = pdb.spec
    try:
        max_unavailable = int_or_string(spec.max_unavailable) if spec.HasField("max_unavailable") else None
        min_available = int_or_string(spec.min_available) if spec.HasField("min_available") else None
    except IntOrStringError as e:
        raise BudgetError(str(e)) from None
    try:
        if max_unavailable is not None:
            expected, unmanaged = expected_scale(pods, find)
            unavailable = scaled_value(max_unavailable, expected, round_up=True)
            return expected, max(0, expected - unavailable), unmanaged
        if isinstance(min_available, int):
            return len(pods), min_available, []
        if isinstance(min_available, str):
            expected, unmanaged = expected_scale(pods, find)
            return expected, scaled_value(min_available, expected, round_up=True), unmanaged
    except IntOrStringError as e:
        raise BudgetError(str(e)) from None
    return 0, 0, []


def build_disrupted_pod_map(
    pods: Sequence[pb.Pod], pdb: pb.PodDisruptionBudget, now: float
) -> tuple[dict[str, str], float | None]:
    """buildDisruptedPodMap: the entries still pending, and the earliest time one expires."""
    recorded = pdb.status.disrupted_pods
    result: dict[str, str] = {}
    recheck: float | None = None
    if not recorded:
        return result, recheck
    for pod in pods:
        if pod.metadata.deletion_timestamp:
            continue  # being deleted already: the eviction did its work
        stamp = recorded.get(pod.metadata.name)
        if stamp is None:
            continue
        try:
            expires = to_epoch(stamp) + DELETION_TIMEOUT_S
        except ValueError:
            continue  # a malformed entry is dropped, as an expired one
        if expires < now:
            continue  # expected to be deleted but was not: it counts again
        recheck = expires if recheck is None else min(recheck, expires)
        result[pod.metadata.name] = stamp
    return result, recheck


def count_healthy(pods: Sequence[pb.Pod], disrupted: dict[str, str], now: float) -> int:
    """countHealthyPods: Ready, not terminating, not about to be deleted by an eviction."""
    healthy = 0
    for pod in pods:
        if pod.metadata.deletion_timestamp:
            continue
        stamp = disrupted.get(pod.metadata.name)
        if stamp is not None and to_epoch(stamp) + DELETION_TIMEOUT_S > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def conditions_up_to_date(status: pb.PodDisruptionBudgetStatus) -> bool:
    """pdbhelper.ConditionsAreUpToDate: the DisruptionAllowed condition says what the counts say,
    at the status' observedGeneration."""
    for c in status.conditions:
        if c.type == DISRUPTION_ALLOWED:
            if c.observed_generation != status.observed_generation:
                return False
            return (c.status == "True") == (status.disruptions_allowed > 0)
    return False


@dataclass(frozen=True, slots=True)
class Sync:
    """One sync's outcome: the status to write (None: already right), when to look again (an epoch
    time; None: only on the next event), and the pods found unmanaged."""

    status: pb.PodDisruptionBudgetStatus | None
    recheck_at: float | None
    unmanaged: tuple[str, ...] = ()


def sync_budget(
    pdb: pb.PodDisruptionBudget, pods: Sequence[pb.Pod], find: ScaleFinder, now: float, stamp: str
) -> Sync:
    """trySync + updatePdbStatus for one budget over its matching `pods` (BudgetError when the
    expected count cannot be computed). `stamp` is `now` as a Time, for condition transitions."""
    expected, desired, unmanaged = expected_pod_count(pdb, pods, find)
    disrupted, recheck = build_disrupted_pod_map(pods, pdb, now)
    healthy = count_healthy(pods, disrupted, now)
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    st = pdb.status
    if (
        st.current_healthy == healthy
        and st.desired_healthy == desired
        and st.expected_pods == expected
        and st.disruptions_allowed == allowed
        and dict(st.disrupted_pods) == disrupted
        and st.observed_generation == pdb.metadata.generation
        and conditions_up_to_date(st)
    ):
        return Sync(None, recheck, tuple(unmanaged))
    new = pb.PodDisruptionBudgetStatus(
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=expected,
        disruptions_allowed=allowed,
        disrupted_pods=disrupted,
        observed_generation=pdb.metadata.generation,
        conditions=list(st.conditions),
    )
    update_disruption_allowed_condition(new, stamp)
    return Sync(new, recheck, tuple(unmanaged))


def failed_status(pdb: pb.PodDisruptionBudget, why: str, stamp: str) -> pb.PodDisruptionBudgetStatus:
    """failSafe: no disruptions allowed, DisruptionAllowed=False with reason SyncFailed and the
    error as message (observedGeneration left as it was)."""
    new = pb.PodDisruptionBudgetStatus()
    new.CopyFrom(pdb.status)
    new.disruptions_allowed = 0
    cond = pb.Condition(
        type=DISRUPTION_ALLOWED,
        status="False",
        reason=SYNC_FAILED,
        message=why,
        observed_generation=new.observed_generation,
    )
    conds = set_condition(new.conditions, cond, stamp)
    del new.conditions[:]
    new.conditions.extend(conds)
    return new
