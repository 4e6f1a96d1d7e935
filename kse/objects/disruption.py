"""PodDisruptionBudget helpers shared by the API server's eviction and the disruption controller.

Both sides must agree on what "healthy" means and how the `DisruptionAllowed` condition reads, as
upstream shares them through `k8s.io/api/policy/v1` constants, `podutil.IsPodReady` and
`pkg/apis/policy/helper` `UpdateDisruptionAllowedCondition`.
"""

from __future__ import annotations

from collections.abc import Iterable

from kse.objects.labels import SelectorError, label_selector_as_selector
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb

# policy/v1 constants (k8s.io/api/policy/v1/types.go).
DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
IF_HEALTHY_BUDGET = "IfHealthyBudget"
ALWAYS_ALLOW = "AlwaysAllow"
# The pod condition the eviction API adds (k8s.io/api/core/v1: DisruptionTarget).
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_BY_EVICTION_API = "EvictionByEvictionAPI"


def is_pod_ready(pod: pb.Pod) -> bool:
    """podutil.IsPodReady: the Ready condition is True."""
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def pdb_matches(pdb: pb.PodDisruptionBudget, pod: pb.Pod) -> bool:
    """Whether `pdb` covers `pod`: same namespace and its selector matches the pod's labels. An
    unset selector matches nothing, an empty one everything (policy/v1); a selector that does not
    parse matches nothing (upstream skips such a budget)."""
    if pdb.metadata.namespace != pod.metadata.namespace or not pdb.spec.HasField("selector"):
        return False
    try:
        selector = label_selector_as_selector(pdb.spec.selector)
    except SelectorError:
        return False
    return selector.matches(pod.metadata.labels)


def matching_pdbs(pdbs: Iterable[pb.PodDisruptionBudget], pod: pb.Pod) -> list[pb.PodDisruptionBudget]:
    return [p for p in pdbs if pdb_matches(p, pod)]


def set_condition(
    conditions: Iterable[pb.Condition], new: pb.Condition, now: str | None = None
) -> list[pb.Condition]:
    """apimeta.SetStatusCondition: replace the condition of `new.type` (its lastTransitionTime
    kept unless the status changed), or append it. Returns the new list."""
    out: list[pb.Condition] = []
    found = False
    for c in conditions:
        if c.type != new.type:
            out.append(c)
            continue
        found = True
        merged = pb.Condition()
        merged.CopyFrom(new)
        merged.last_transition_time = (
            c.last_transition_time
            if c.status == new.status and c.last_transition_time
            else (now or now_rfc3339())
        )
        out.append(merged)
    if not found:
        added = pb.Condition()
        added.CopyFrom(new)
        added.last_transition_time = new.last_transition_time or now or now_rfc3339()
        out.append(added)
    return out


def update_disruption_allowed_condition(status: pb.PodDisruptionBudgetStatus, now: str | None = None) -> None:
    """UpdateDisruptionAllowedCondition (pkg/apis/policy/helper): True/SufficientPods while
    disruptions are allowed, else False/InsufficientPods, at the status' observedGeneration."""
    allowed = status.disruptions_allowed > 0
    cond = pb.Condition(
        type=DISRUPTION_ALLOWED,
        status="True" if allowed else "False",
        reason=SUFFICIENT_PODS if allowed else INSUFFICIENT_PODS,
        observed_generation=status.observed_generation,
    )
    conds = set_condition(status.conditions, cond, now)
    del status.conditions[:]
    status.conditions.extend(conds)
