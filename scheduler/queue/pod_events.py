"""Pod-derived inputs to the scheduling queue: which events a pod update is, and cross-topology
matching for assigned-pod events.

Defaults for the queue's injectable hooks. The framework may pass its own (e.g. one that shares
the plugins' parsed requests); these follow upstream closely enough to be the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kse.objects.labels import Operator, SelectorError, new_requirement, optional_label_selector
from kse.objects.podresources import pod_requests
from kse.objects.quantity import QuantityError
from proto import kse_pb2 as pb
from scheduler.framework.types import ActionType, ClusterEvent, EventResource, QueuedPodInfo

POD_TOPOLOGY_SPREAD = "PodTopologySpread"

# ---------------------------------------------------------------- pod update -> events


def pod_scheduling_properties_change(new: pb.Pod, old: pb.Pod) -> list[ClusterEvent]:
    """The events a pod update amounts to, as upstream ``framework.PodSchedulingPropertiesChange``.

    Resource is AssignedPod when the new pod has a node, UnscheduledPod otherwise. Each specific
    change (labels, request scale-down, scheduling gates all removed, tolerations) is one event;
    when none applies, a generic ``Update`` event is returned so that plugins registered for any
    pod update still hear about it. (Upstream also reports ResourceClaim status changes; kse has
    no DRA.)
    """
    resource = EventResource.ASSIGNED_POD if new.spec.node_name else EventResource.UNSCHEDULED_POD
    actions: list[ActionType] = []
    if dict(new.metadata.labels) != dict(old.metadata.labels):
        actions.append(ActionType.UPDATE_POD_LABEL)
    if _scaled_down(new, old):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    if not new.spec.scheduling_gates and old.spec.scheduling_gates:
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    # API validation only allows adding tolerations, so a length change is any change.
    if len(new.spec.tolerations) != len(old.spec.tolerations):
        actions.append(ActionType.UPDATE_POD_TOLERATIONS)
    if not actions:
        actions.append(ActionType.UPDATE)
    return [ClusterEvent(resource, a) for a in actions]


def _scaled_down(new: pb.Pod, old: pb.Pod) -> bool:
    """Any resource request removed or lowered (upstream ``extractPodScaleDown``), on the
    effective requests ``kse.objects.podresources.pod_requests`` computes (as PodRequests)."""
    try:
        new_req, old_req = pod_requests(new), pod_requests(old)
    except QuantityError:
        return False  # the API server rejects malformed quantities before the queue sees them
    for name, old_value in old_req.items():
        new_value = new_req.get(name)
        if new_value is None or old_value > new_value:
            return True
    return False


# ---------------------------------------------------------------- assigned pods


NamespaceLabels = Callable[[str], Mapping[str, str] | None]


def rejected_by_cross_topology_term(
    pinfo: QueuedPodInfo, assigned: pb.Pod, namespace_labels: NamespaceLabels | None = None
) -> bool:
    """Whether an assigned pod's add/update may help ``pinfo`` (upstream
    ``getUnschedulablePodsWithCrossTopologyTerm``): it was rejected by PodTopologySpread and is in
    the same namespace, or one of its required pod-affinity terms matches the assigned pod.

    A term with a non-empty namespaceSelector needs the namespace's labels; without a
    ``namespace_labels`` lookup it is taken to match (moving a pod too eagerly is safe, the
    queueing hints still decide).
    """
    pod = pinfo.pod
    if POD_TOPOLOGY_SPREAD in pinfo.unschedulable_plugins and assigned.metadata.namespace == (
        pod.metadata.namespace
    ):
        return True
    affinity = pod.spec.affinity
    if not affinity.HasField("pod_affinity"):
        return False
    for term in affinity.pod_affinity.required_during_scheduling_ignored_during_execution:
        if _term_matches(term, pod, assigned, namespace_labels):
            return True
    return False


def _term_matches(
    term: pb.PodAffinityTerm, owner: pb.Pod, candidate: pb.Pod, namespace_labels: NamespaceLabels | None
) -> bool:
    """Upstream ``AffinityTerm.Matches``: the candidate's namespace is one the term selects and
    its labels match the term's selector, with matchLabelKeys/mismatchLabelKeys folded in from
    the owner's labels as upstream does when it builds the term. A term that cannot be parsed
    counts as a match: the rejecting plugins' queueing hints still decide."""
    try:
        if not _namespace_selected(term, owner, candidate.metadata.namespace, namespace_labels):
            return False
        owner_labels = owner.metadata.labels
        extra = [
            new_requirement(k, Operator.IN, [owner_labels[k]])
            for k in term.match_label_keys
            if k in owner_labels
        ] + [
            new_requirement(k, Operator.NOT_IN, [owner_labels[k]])
            for k in term.mismatch_label_keys
            if k in owner_labels
        ]
        labels = candidate.metadata.labels
        return optional_label_selector(term).matches(labels) and all(r.matches(labels) for r in extra)
    except SelectorError:
        return True


def _namespace_selected(
    term: pb.PodAffinityTerm, owner: pb.Pod, ns: str, namespace_labels: NamespaceLabels | None
) -> bool:
    if ns in term.namespaces:
        return True
    if term.HasField("namespace_selector"):
        sel = term.namespace_selector
        if not sel.match_labels and not sel.match_expressions:
            return True  # {} selects every namespace
        labels = namespace_labels(ns) if namespace_labels else None
        return labels is None or optional_label_selector(term, "namespace_selector").matches(labels)
    # No namespaces and no selector: the owner's own namespace.
    return not term.namespaces and ns == owner.metadata.namespace
