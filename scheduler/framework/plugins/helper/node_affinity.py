"""Node affinity matching (upstream component-helpers `scheduling/corev1/nodeaffinity`):
required terms, preferred weighted terms, and a pod's nodeSelector AND required affinity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kse.objects import labels
from proto import kse_pb2 as pb
from scheduler.framework.types import PodInfo

OBJECT_NAME_FIELD = "metadata.name"


class NodeSelector:
    """A required NodeSelector: terms ORed, a term with a parse error never matches
    (component-helpers LazyErrorNodeSelector, via kse.objects.labels.NodeSelectorMatcher)."""

    __slots__ = ("_terms", "errors")

    def __init__(self, selector: pb.NodeSelector, path: str = "") -> None:
        matcher = labels.NodeSelectorMatcher(selector, path)
        self._terms = matcher.terms
        self.errors: list[str] = matcher.errors

    def matches(self, node_name: str, node_labels: Mapping[str, str]) -> bool:
        for term in self._terms:
            ok, errs = term.match(node_labels, node_name)
            if ok and not errs:
                return True
        return False


class PreferredSchedulingTerms:
    """Weighted preferred terms; `score` sums the weights of the terms the node matches. A parse
    error raises SelectorError at construction, as upstream's NewPreferredSchedulingTerms."""

    __slots__ = ("_terms",)

    def __init__(self, terms: Iterable[pb.PreferredSchedulingTerm], path: str = "") -> None:
        self._terms = labels.PreferredSchedulingTerms(terms, path).terms

    def score(self, node_name: str, node_labels: Mapping[str, str]) -> int:
        return sum(weight for term, weight in self._terms if term.match(node_labels, node_name)[0])


class RequiredNodeAffinity:
    """A pod's spec.nodeSelector AND its required node affinity
    (component-helpers nodeaffinity.GetRequiredNodeAffinity); parse errors count as no match."""

    __slots__ = ("_node_selector", "_selector")

    def __init__(self, pod: pb.Pod) -> None:
        inner = labels.RequiredNodeAffinity.from_pod(pod)
        self._selector = inner.selector
        self._node_selector = inner.node_selector.terms if inner.node_selector is not None else None

    def matches(self, node_name: str, node_labels: Mapping[str, str]) -> bool:
        if self._selector is not None and not self._selector.matches(node_labels):
            return False
        if self._node_selector is None:
            return True
        for term in self._node_selector:
            ok, errs = term.match(node_labels, node_name)
            if ok and not errs:
                return True
        return False

    @property
    def matches_every_node(self) -> bool:
        """No nodeSelector and no required node affinity: every node matches."""
        return (self._selector is None or self._selector.empty) and self._node_selector is None

    def matches_node(self, node: pb.Node) -> bool:
        return self.matches(node.metadata.name, node.metadata.labels)


def required_node_affinity(pod_info: PodInfo) -> RequiredNodeAffinity:
    """The pod's RequiredNodeAffinity, parsed once per PodInfo."""
    got = pod_info.derived.get("helper/requiredNodeAffinity")
    if got is None:
        got = pod_info.derived["helper/requiredNodeAffinity"] = RequiredNodeAffinity(pod_info.pod)
    return got  # type: ignore[no-any-return]
