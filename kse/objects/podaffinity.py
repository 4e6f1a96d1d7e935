"""matchLabelKeys / mismatchLabelKeys of pod (anti-)affinity terms, merged into the label
selector when a pod is created (upstream pkg/registry/core/pod/strategy.go,
applyMatchLabelKeysAndMismatchLabelKeys, feature MatchLabelKeysInPodAffinity, on by default).

Upstream does this in the API server, once, at create: the stored pod carries the merged
selector, so the scheduler (and any other reader) sees one selector and never re-reads the
keys; later label changes of the pod do not change its terms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from proto import kse_pb2 as pb

__all__ = ["apply_match_label_keys"]


def _apply(term: pb.PodAffinityTerm, labels: Mapping[str, str]) -> None:
    # A nil labelSelector matches nothing: the keys cannot widen it, so it stays nil.
    if not (term.match_label_keys or term.mismatch_label_keys) or not term.HasField("label_selector"):
        return
    for key in term.match_label_keys:
        if key in labels:
            term.label_selector.match_expressions.add(key=key, operator="In", values=[labels[key]])
    for key in term.mismatch_label_keys:
        if key in labels:
            term.label_selector.match_expressions.add(key=key, operator="NotIn", values=[labels[key]])


def _terms(aff: pb.PodAffinity) -> Iterable[pb.PodAffinityTerm]:
    yield from aff.required_during_scheduling_ignored_during_execution
    for w in aff.preferred_during_scheduling_ignored_during_execution:
        yield w.pod_affinity_term


def apply_match_label_keys(pod: pb.Pod) -> None:
    """Add `key In [pod's value]` for every matchLabelKeys key and `key NotIn [value]` for every
    mismatchLabelKeys key the pod has a label for, to each term's labelSelector, in place."""
    if not pod.spec.HasField("affinity"):
        return
    aff = pod.spec.affinity
    labels = pod.metadata.labels
    for field_name in ("pod_affinity", "pod_anti_affinity"):
        if aff.HasField(field_name):
            for term in _terms(getattr(aff, field_name)):
                _apply(term, labels)
