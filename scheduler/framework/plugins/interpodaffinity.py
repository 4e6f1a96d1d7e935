"""InterPodAffinity: required and preferred pod affinity / anti-affinity (upstream
plugins/interpodaffinity: plugin.go, filtering.go, scoring.go; the terms as
framework/types.go AffinityTerm / WeightedAffinityTerm).

Filter (state from PreFilter, computed once per cycle over the snapshot):
  * the incoming pod's required affinity: every term's topology key on the node, and for each
    term some existing pod in the node's domain matching *all* terms; unless no pod anywhere
    matches and the pod matches its own terms (the first pod of a self-affine group);
  * the incoming pod's required anti-affinity: no matching pod in the node's domain of any term;
  * symmetric: no existing pod whose required anti-affinity term matches the incoming pod has the
    node in its domain.
Score: preferred terms of the incoming pod (+/- weight per matching existing pod in the domain),
and of existing pods towards the incoming pod (their preferred terms, and their required
affinity weighted by hardPodAffinityWeight), normalized to [0, 100] by min-max.

Namespaces of a term (upstream getNamespacesFromPodAffinityTerm / mergeAffinityTermNamespaces):
no `namespaces` and no `namespaceSelector` = the pod's own namespace; `namespaceSelector: {}` =
every namespace; a non-empty namespaceSelector needs the labels of Namespace objects, which kse
does not serve yet: an incoming pod using one is refused (UnschedulableAndUnresolvable, saying
so), and an existing pod's term with one matches only through its explicit `namespaces` (its
required anti-affinity, when its label selector matches the incoming pod from another namespace,
refuses the incoming pod the same way: kse cannot tell whether the constraint applies).

matchLabelKeys / mismatchLabelKeys are merged into the labelSelector by the API server when the
pod is created (upstream pkg/registry/core/pod/strategy.go applyMatchLabelKeysAndMismatchLabelKeys;
here kse.objects.podaffinity), so the scheduler reads only the label selector.

Performance (upstream scans every pod in PreFilter and PreScore, on 16 goroutines): the counts
are the same, but kept from cycle to cycle. Each sum (`Aggregate`, keyed by the incoming pod's
terms, or by its namespace and labels for the existing pods' terms) recomputes only the nodes
whose generation changed since the previous cycle; a pod without any affinity, with no pod with
required anti-affinity around, is skipped in O(1). The batch Filter is a mask over the nodes of
the counted topology pairs (`LabelIndex`), and the batch Score adds each scored domain's weight to
its nodes at once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from kse.objects.labels import Selector, SelectorError, optional_label_selector
from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState, StateNotFoundError
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEventWithHint,
    FrameworkHandle,
    NodeScore,
    PreFilterResult,
)
from scheduler.framework.nodeinfo import NodeInfo, Snapshot
from scheduler.framework.plugins.helper.node_index import (
    Aggregate,
    Aggregates,
    LabelIndex,
    current_label_index,
)
from scheduler.framework.plugins.helper.queueing_hints import as_objects
from scheduler.framework.plugins.helper.status import state_read_status
from scheduler.framework.types import (
    ActionType,
    ClusterEvent,
    Code,
    EventResource,
    PodInfo,
    QueueingHint,
    Status,
    as_status,
)

NAME = "InterPodAffinity"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
NAMESPACE_SELECTOR_UNSUPPORTED = (
    "kse does not serve Namespace objects, so it cannot evaluate a non-empty namespaceSelector"
)

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
_DERIVED_KEY = NAME + "/terms"

TopologyPair = tuple[str, str]


# ----------------------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A parsed PodAffinityTerm (upstream fwk.AffinityTerm). `all_namespaces` is a
    `namespaceSelector: {}`; `namespace_selector` is set only for a non-empty one."""

    namespaces: frozenset[str]
    selector: Selector
    topology_key: str
    all_namespaces: bool = False
    namespace_selector: Selector | None = None

    def matches(self, pod: pb.Pod, pod_labels: Mapping[str, str]) -> bool:
        """Upstream AffinityTerm.Matches with no namespace labels known: the pod's namespace must be
        listed (or every namespace selected) and its labels match the selector."""
        if self.all_namespaces or pod.metadata.namespace in self.namespaces:
            return self.selector.matches(pod_labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


@dataclass(frozen=True, slots=True)
class PodTerms:
    """A pod's parsed terms (upstream PodInfo's Required/Preferred(Anti)AffinityTerms). A term
    list that fails to parse is left empty and its error kept in `parse_error`, as upstream."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    parse_error: str = ""

    def all_terms(self) -> Iterable[tuple[str, AffinityTerm]]:
        """(JSON path, term) of every term, for error messages."""
        base = "spec.affinity"
        for i, t in enumerate(self.required_affinity):
            yield f"{base}.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[{i}]", t
        for i, t in enumerate(self.required_anti_affinity):
            yield f"{base}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[{i}]", t
        for i, w in enumerate(self.preferred_affinity):
            yield (
                f"{base}.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm",
                w.term,
            )
        for i, w in enumerate(self.preferred_anti_affinity):
            yield (
                f"{base}.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm",
                w.term,
            )


def new_affinity_term(pod: pb.Pod, term: pb.PodAffinityTerm) -> AffinityTerm:
    """Upstream newAffinityTerm; raises SelectorError on an invalid selector."""
    selector = optional_label_selector(term, "label_selector")
    all_ns, ns_selector = False, None
    if term.HasField("namespace_selector"):
        parsed = optional_label_selector(term, "namespace_selector")
        if parsed.empty:
            all_ns = True
        else:
            ns_selector = parsed
    if not term.namespaces and not term.HasField("namespace_selector"):
        namespaces = frozenset((pod.metadata.namespace,))
    else:
        namespaces = frozenset(term.namespaces)
    return AffinityTerm(namespaces, selector, term.topology_key, all_ns, ns_selector)


def _terms(pod: pb.Pod, terms: Iterable[pb.PodAffinityTerm]) -> tuple[AffinityTerm, ...]:
    return tuple(new_affinity_term(pod, t) for t in terms)


def _weighted(pod: pb.Pod, terms: Iterable[pb.WeightedPodAffinityTerm]) -> tuple[WeightedAffinityTerm, ...]:
    return tuple(WeightedAffinityTerm(new_affinity_term(pod, t.pod_affinity_term), t.weight) for t in terms)


_NO_TERMS = PodTerms()  # frozen: shared by every pod without affinity (the cache holds them all)


def parse_pod_terms(pod: pb.Pod) -> PodTerms:
    """Every affinity term of the pod (upstream PodInfo.Update)."""
    spec = pod.spec
    if not spec.HasField("affinity"):
        return _NO_TERMS
    aff = spec.affinity
    errors: list[str] = []
    out: dict[str, Any] = {}
    parts: list[tuple[str, Callable[[], Any]]] = []
    if aff.HasField("pod_affinity"):
        pa = aff.pod_affinity
        parts += [
            (
                "required_affinity",
                lambda: _terms(pod, pa.required_during_scheduling_ignored_during_execution),
            ),
            (
                "preferred_affinity",
                lambda: _weighted(pod, pa.preferred_during_scheduling_ignored_during_execution),
            ),
        ]
    if aff.HasField("pod_anti_affinity"):
        paa = aff.pod_anti_affinity
        parts += [
            (
                "required_anti_affinity",
                lambda: _terms(pod, paa.required_during_scheduling_ignored_during_execution),
            ),
            (
                "preferred_anti_affinity",
                lambda: _weighted(pod, paa.preferred_during_scheduling_ignored_during_execution),
            ),
        ]
    for attr, build in parts:
        try:
            out[attr] = build()
        except SelectorError as e:
            errors.append(str(e))
    return PodTerms(**out, parse_error="; ".join(errors))


def pod_terms(pod_info: PodInfo) -> PodTerms:
    """The pod's terms, parsed once per PodInfo."""
    got = pod_info.derived.get(_DERIVED_KEY)
    if got is None:
        got = pod_info.derived[_DERIVED_KEY] = parse_pod_terms(pod_info.pod)
    return got  # type: ignore[no-any-return]


def pod_matches_all_terms(terms: Sequence[AffinityTerm], pod: pb.Pod, labels: Mapping[str, str]) -> bool:
    """Upstream podMatchesAllAffinityTerms: false for no terms."""
    if not terms:
        return False
    return all(t.matches(pod, labels) for t in terms)


def pod_matches_any_term(terms: Sequence[AffinityTerm], pod: pb.Pod, labels: Mapping[str, str]) -> bool:
    return any(t.matches(pod, labels) for t in terms)


def _add(counts: dict[TopologyPair, int], labels: Mapping[str, str], key: str, value: int) -> None:
    tv = labels.get(key)
    if tv is not None:
        pair = (key, tv)
        n = counts.get(pair, 0) + value
        if n == 0:
            counts.pop(pair, None)
        else:
            counts[pair] = n


class NodeMemo:
    """Per-node results of a cycle's scan, reused by the next cycles while the node is unchanged.

    Upstream scans every pod of the cluster in each PreFilter (on 16 goroutines). kse keeps,
    per key (the incoming pod's terms, or its namespace and labels), each node's contribution
    together with the NodeInfo's generation, which changes whenever a pod is added to or
    removed from the node: consecutive pods of one workload share their key, so a cycle only
    rescans the nodes that changed since (typically the one the previous pod was bound to).
    The counts are those of the full scan. The last `max_keys` keys are kept.
    """

    def __init__(self, max_keys: int = 16) -> None:
        self._tables: OrderedDict[Hashable, dict[str, tuple[int, Any]]] = OrderedDict()
        self._max_keys = max_keys

    def table(self, key: Hashable) -> dict[str, tuple[int, Any]]:
        got = self._tables.get(key)
        if got is None:
            got = self._tables[key] = {}
            if len(self._tables) > self._max_keys:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return got


# ----------------------------------------------------------------------------- state


@dataclass
class _PreFilterState:
    terms: PodTerms
    pod_info: PodInfo
    # existing pods' required anti-affinity terms matching the incoming pod, per topology pair
    existing_anti_affinity_counts: dict[TopologyPair, int] = field(default_factory=dict)
    # existing pods matching all of the incoming pod's required affinity terms
    affinity_counts: dict[TopologyPair, int] = field(default_factory=dict)
    # existing pods matching one of the incoming pod's required anti-affinity terms
    anti_affinity_counts: dict[TopologyPair, int] = field(default_factory=dict)
    # node name -> Filter verdict, while the counts do not change (the batch filter fills it,
    # the scalar filter of the nodes it rejected reads it)
    verdicts: dict[str, Status | None] = field(default_factory=dict)
    # pass mask over a snapshot's node_info_list (the snapshot's id, the mask), for the batch Filter
    mask: tuple[int, npt.NDArray[np.bool_]] | None = None

    def verdict(self, name: str, labels: Mapping[str, str]) -> Status | None:
        try:
            return self.verdicts[name]
        except KeyError:
            got = self.verdicts[name] = self.passes(labels)
            return got

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.terms,
            self.pod_info,
            dict(self.existing_anti_affinity_counts),
            dict(self.affinity_counts),
            dict(self.anti_affinity_counts),
        )

    def update_with_pod(self, other: PodInfo, node_labels: Mapping[str, str], multiplier: int) -> None:
        """Upstream preFilterState.updateWithPod (preemption and nominated pods)."""
        self.verdicts.clear()
        self.mask = None
        pod, labels = self.pod_info.pod, self.pod_info.labels
        for t in pod_terms(other).required_anti_affinity:
            if t.matches(pod, labels):
                _add(self.existing_anti_affinity_counts, node_labels, t.topology_key, multiplier)
        if pod_matches_all_terms(self.terms.required_affinity, other.pod, other.labels):
            for t in self.terms.required_affinity:
                _add(self.affinity_counts, node_labels, t.topology_key, multiplier)
        for t in self.terms.required_anti_affinity:
            if t.matches(other.pod, other.labels):
                _add(self.anti_affinity_counts, node_labels, t.topology_key, multiplier)

    def pass_mask(self, index: LabelIndex) -> npt.NDArray[np.bool_]:
        """`passes(...) is None` for every node of the index, with array operations over the
        nodes that carry the counted topology pairs."""
        ok = np.ones(index.n, dtype=bool)
        required = self.terms.required_affinity
        if required:
            has_all = np.ones(index.n, dtype=bool)
            pods_exist = np.ones(index.n, dtype=bool)
            for t in required:
                has_all &= index.has_key(t.topology_key)
                exist_t = np.zeros(index.n, dtype=bool)
                for (k, v), n in self.affinity_counts.items():
                    if k == t.topology_key and n > 0:
                        ix = index.nodes_with(k, v)
                        if ix is not None:
                            exist_t[ix] = True
                pods_exist &= exist_t
            self_match = not self.affinity_counts and pod_matches_all_terms(
                required, self.pod_info.pod, self.pod_info.labels
            )
            ok &= has_all & (pods_exist | self_match)
        # anti_affinity_counts holds only pairs of the incoming pod's anti-affinity topology keys
        # (_count_incoming and update_with_pod count per term), as `passes` reads them.
        blocked = index.nodes_of_positive(self.anti_affinity_counts)
        blocked += index.nodes_of_positive(self.existing_anti_affinity_counts)
        if blocked:
            ok[np.concatenate(blocked)] = False
        return ok

    def passes(self, labels: Mapping[str, str]) -> Status | None:
        """Filter for a node with these labels (upstream satisfyPodAffinity, satisfyPodAntiAffinity,
        satisfyExistingPodsAntiAffinity, in that order)."""
        required = self.terms.required_affinity
        if required:
            pods_exist = True
            for t in required:
                tv = labels.get(t.topology_key)
                if tv is None:
                    return _AFFINITY_STATUS  # all topology labels must exist on the node
                if self.affinity_counts.get((t.topology_key, tv), 0) <= 0:
                    pods_exist = False
            # The first pod of a self-affine group: no pod anywhere matches, the pod matches itself.
            if not pods_exist and not (
                not self.affinity_counts
                and pod_matches_all_terms(required, self.pod_info.pod, self.pod_info.labels)
            ):
                return _AFFINITY_STATUS
        counts = self.anti_affinity_counts
        if counts:
            for t in self.terms.required_anti_affinity:
                tv = labels.get(t.topology_key)
                if tv is not None and counts.get((t.topology_key, tv), 0) > 0:
                    return _ANTI_AFFINITY_STATUS
        existing = self.existing_anti_affinity_counts
        if existing:
            # iterate the smaller side: the pairs or the node's labels
            if len(existing) < len(labels):
                if any(labels.get(k) == v and n > 0 for (k, v), n in existing.items()):
                    return _EXISTING_STATUS
            elif any(existing.get(pair, 0) > 0 for pair in labels.items()):
                return _EXISTING_STATUS
        return None


def _status(code: Code, reason: str) -> Status:
    return Status(code, [reason])


_AFFINITY_STATUS = _status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
_ANTI_AFFINITY_STATUS = _status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
_EXISTING_STATUS = _status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)


@dataclass
class _PreScoreState:
    # topology key -> topology value -> score
    topology_score: dict[str, dict[str, int]] = field(default_factory=dict)

    def clone(self) -> _PreScoreState:
        return self

    def score(self, labels: Mapping[str, str]) -> int:
        total = 0
        for key, values in self.topology_score.items():
            tv = labels.get(key)
            if tv is not None:
                total += values.get(tv, 0)
        return total


# ----------------------------------------------------------------------------- the plugin


def _unsupported_namespace_selector(terms: PodTerms) -> str | None:
    for path, t in terms.all_terms():
        if t.namespace_selector is not None:
            return f"{path}.namespaceSelector: {NAMESPACE_SELECTOR_UNSUPPORTED}"
    return None


_Pairs = tuple[tuple[TopologyPair, int], ...]


def _pairs(node_labels: Mapping[str, str], by_key: Mapping[str, int]) -> _Pairs:
    """The node's topology pairs for counts per topology key (keys the node lacks drop out)."""
    return tuple(((k, node_labels[k]), n) for k, n in by_key.items() if n and k in node_labels)


def _incoming_contribution(
    ni: NodeInfo, affinity: Sequence[AffinityTerm], anti: Sequence[AffinityTerm]
) -> tuple[_Pairs, _Pairs]:
    """The node's share of the incoming pod's counts: per topology pair, its pods matching all
    affinity terms, and its pods matching each anti-affinity term."""
    aff: dict[str, int] = {}
    if affinity:
        n = sum(1 for e in ni.pods if pod_matches_all_terms(affinity, e.pod, e.labels))
        for t in affinity:
            aff[t.topology_key] = aff.get(t.topology_key, 0) + n
    anti_by_key: dict[str, int] = {}
    for t in anti:
        n = sum(1 for e in ni.pods if t.matches(e.pod, e.labels))
        anti_by_key[t.topology_key] = anti_by_key.get(t.topology_key, 0) + n
    return _pairs(ni.labels, aff), _pairs(ni.labels, anti_by_key)


def _existing_contribution(ni: NodeInfo, pod: pb.Pod, labels: Mapping[str, str]) -> _Pairs | str:
    """(topology pair, matching terms) of the node's pods' required anti-affinity terms that match
    the incoming pod, or the refusal when a term's namespaceSelector may select it."""
    out: dict[str, int] = {}
    for existing in ni.pods_with_required_anti_affinity:
        for t in pod_terms(existing).required_anti_affinity:
            if t.matches(pod, labels):
                out[t.topology_key] = out.get(t.topology_key, 0) + 1
            elif t.namespace_selector is not None and t.selector.matches(labels):
                return (
                    f"pod {existing.key} has a required anti-affinity term with a "
                    f"namespaceSelector that may select this pod: " + NAMESPACE_SELECTOR_UNSUPPORTED
                )
    return _pairs(ni.labels, out)


def _incoming_score_contribution(ni: NodeInfo, terms: PodTerms) -> tuple[tuple[str, int], ...]:
    """(topology key, summed weight) of the incoming pod's preferred terms over the node's pods
    (upstream processExistingPod, its first two steps). A key with matches is listed even when
    its weights cancel out: upstream then still has a score entry (no Skip)."""
    out: dict[str, int] = {}
    for existing in ni.pods:
        ep, el = existing.pod, existing.labels
        for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for w in weighted:
                if w.term.matches(ep, el):
                    key = w.term.topology_key
                    out[key] = out.get(key, 0) + sign * w.weight
    return tuple(out.items())


def _resolved(ni: NodeInfo, by_key: tuple[tuple[str, int], ...]) -> tuple[tuple[Hashable, int], ...]:
    """Per topology key amounts as the node's (key, value) pairs; keys the node lacks drop out
    (a zero amount stays: a match happened)."""
    node_labels = ni.labels
    return tuple(((k, node_labels[k]), n) for k, n in by_key if k in node_labels)


def _existing_score_contribution(
    ni: NodeInfo, pod: pb.Pod, labels: Mapping[str, str], hard_weight: int
) -> tuple[tuple[str, int], ...]:
    """(topology key, summed weight) of the node's pods' terms towards the incoming pod: their
    required affinity (hardPodAffinityWeight) and preferred terms (processExistingPod's rest)."""
    out: dict[str, int] = {}
    for existing in ni.pods_with_affinity:
        et = pod_terms(existing)
        weighted: list[tuple[AffinityTerm, int]] = []
        if hard_weight > 0:
            weighted += [(t, hard_weight) for t in et.required_affinity]
        weighted += [(w.term, w.weight) for w in et.preferred_affinity]
        weighted += [(w.term, -w.weight) for w in et.preferred_anti_affinity]
        for t, weight in weighted:
            if t.matches(pod, labels):
                out[t.topology_key] = out.get(t.topology_key, 0) + weight
    return tuple(out.items())


class InterPodAffinity:
    def __init__(
        self,
        handle: FrameworkHandle | None,
        hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
        ignore_preferred_terms_of_existing_pods: bool = False,
    ) -> None:
        self._handle = handle
        self._memo = NodeMemo()
        # Per existing-anti-affinity key: node name -> why kse cannot tell (namespaceSelector).
        self._refusals: dict[Hashable, dict[str, str]] = {}
        self._aggregates = Aggregates()
        self._index: LabelIndex | None = None
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods

    def name(self) -> str:
        return NAME

    def _lister(self) -> Snapshot:
        assert self._handle is not None, "InterPodAffinity needs a FrameworkHandle"
        return self._handle.snapshot_shared_lister().node_infos()  # type: ignore[return-value]

    # -- events

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Without the preCheck, UpdateNodeTaint is not needed (upstream, queueing hints on).
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
                ),
                self.is_schedulable_after_pod_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Pod, old, new)
        if (modified is not None and not modified.spec.node_name) or (
            original is not None and not original.spec.node_name
        ):
            return QueueingHint.SKIP  # an unscheduled pod changes no domain
        terms = parse_pod_terms(pod)  # raises on a bad selector: the queue treats that as Queue
        affinity, anti = terms.required_affinity, terms.required_anti_affinity
        if original is not None and modified is not None:
            if not pod_matches_all_terms(
                affinity, original, original.metadata.labels
            ) and pod_matches_all_terms(affinity, modified, modified.metadata.labels):
                return QueueingHint.QUEUE
            if pod_matches_any_term(anti, original, original.metadata.labels) and not pod_matches_any_term(
                anti, modified, modified.metadata.labels
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return (
                QueueingHint.QUEUE
                if pod_matches_all_terms(affinity, modified, modified.metadata.labels)
                else QueueingHint.SKIP
            )
        assert original is not None
        if pod_matches_any_term(anti, original, original.metadata.labels):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: pb.Pod, old: object, new: object) -> QueueingHint:
        original, modified = as_objects(pb.Node, old, new)
        if modified is None:
            return QueueingHint.SKIP
        terms = parse_pod_terms(pod)
        new_labels = modified.metadata.labels
        for t in terms.required_affinity:
            if original is None:
                if t.topology_key in new_labels:
                    return QueueingHint.QUEUE  # a node added in a topology of the pod's affinity
                continue
            old_labels = original.metadata.labels
            if t.topology_key in new_labels and old_labels.get(t.topology_key) != new_labels[t.topology_key]:
                return QueueingHint.QUEUE  # the key appeared or its value changed
        for t in terms.required_anti_affinity:
            if original is None:
                return QueueingHint.QUEUE  # any new node may be outside the blocked domains
            old_labels = original.metadata.labels
            if t.topology_key in old_labels and old_labels[t.topology_key] != new_labels.get(t.topology_key):
                return QueueingHint.QUEUE  # the key went away or its value changed
        return QueueingHint.SKIP

    # -- filter

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        terms = pod_terms(pod_info)
        if terms.parse_error:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [f"parsing pod: {terms.parse_error}"])
        unsupported = _unsupported_namespace_selector(terms)
        if unsupported is not None:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [unsupported])
        s = _PreFilterState(terms, pod_info)
        refusal = self._count_existing_anti_affinity(s, pod_info)
        if refusal is not None:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [refusal])
        affinity, anti = terms.required_affinity, terms.required_anti_affinity
        if affinity or anti:
            self._count_incoming(s, nodes)
        if not s.existing_anti_affinity_counts and not affinity and not anti:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_STATE_KEY, s)
        return None, None

    def _count_existing_anti_affinity(self, s: _PreFilterState, pod_info: PodInfo) -> str | None:
        """Existing pods' required anti-affinity terms that match the incoming pod, per topology
        pair (upstream getExistingAntiAffinityCounts); or why kse cannot tell. The sums over the
        snapshot's nodes are kept up to date incrementally (`Aggregate`: only nodes changed since
        the last pod of this namespace and labels are rescanned); the snapshot's list of nodes
        with such pods would not do, as it changes with every such pod bound."""
        lister = self._lister()
        if not lister.have_pods_with_required_anti_affinity_list():
            # No existing pod has a required anti-affinity term (upstream's loop runs over this
            # list): nothing to count or refuse. The aggregate catches up on the nodes changed
            # meanwhile by their generations when such a pod appears.
            return None
        pod, labels = pod_info.pod, pod_info.labels
        key = ("existing", pod.metadata.namespace, frozenset(labels.items()))
        agg = self._aggregate(key)
        all_nodes = lister.list()
        if not agg.tracks(all_nodes):
            self._refusals.pop(key, None)  # every node is scanned afresh
        refusals = self._refusals.setdefault(key, {})
        if len(self._refusals) > len(self._aggregates):
            self._refusals = {k: v for k, v in self._refusals.items() if k in self._aggregates}

        def contribution(ni: NodeInfo) -> _Pairs:
            refusals.pop(ni.name, None)
            if not ni.pods_with_required_anti_affinity:
                return ()
            got = _existing_contribution(ni, pod, labels)
            if isinstance(got, str):
                refusals[ni.name] = got
                return ()
            return got

        agg.update(all_nodes, contribution, lister.arrays().generation)
        if refusals:
            return next(iter(refusals.values()))
        s.existing_anti_affinity_counts = cast(dict[TopologyPair, int], dict(agg.sums))
        return None

    def _aggregate(self, key: Hashable) -> Aggregate:
        """The Aggregate of a key (the last 16 keys are kept)."""
        return self._aggregates.get(key)

    def _nodes_with_pods(self, nodes: Sequence[NodeInfo]) -> Iterable[NodeInfo]:
        """The nodes that have pods: from the snapshot's pod-count array when `nodes` are the
        snapshot's own (the cache keeps the array in step), else by looking."""
        lister = self._lister()
        if nodes is lister.list():
            return map(nodes.__getitem__, np.flatnonzero(lister.arrays().pod_count).tolist())
        return (ni for ni in nodes if ni.pods)

    def _count_incoming(self, s: _PreFilterState, nodes: Sequence[NodeInfo]) -> None:
        """Existing pods matching all the incoming pod's affinity terms, and each of its
        anti-affinity terms, per topology pair (upstream getIncomingAffinityAntiAffinityCounts)."""
        affinity, anti = s.terms.required_affinity, s.terms.required_anti_affinity
        aff_counts, anti_counts = s.affinity_counts, s.anti_affinity_counts
        snapshot_nodes = self._lister().list()
        if nodes is snapshot_nodes:
            # Two sums, one per kind, so each is the counts dict as it is (no re-keying per pair).
            if affinity:
                agg = self._aggregate(("incoming-affinity", affinity))
                agg.update(
                    snapshot_nodes,
                    lambda ni: _incoming_contribution(ni, affinity, ())[0] if ni.pods else (),
                    self._lister().arrays().generation,
                )
                s.affinity_counts = cast(dict[TopologyPair, int], dict(agg.sums))
            if anti:
                agg = self._aggregate(("incoming-anti-affinity", anti))
                agg.update(
                    snapshot_nodes,
                    lambda ni: _incoming_contribution(ni, (), anti)[1] if ni.pods else (),
                    self._lister().arrays().generation,
                )
                s.anti_affinity_counts = cast(dict[TopologyPair, int], dict(agg.sums))
            return
        table = self._memo.table(("incoming", affinity, anti))
        for ni in self._nodes_with_pods(nodes):
            if ni.node is None:
                continue
            got = table.get(ni.name)
            if got is None or got[0] != ni.generation:
                got = table[ni.name] = (ni.generation, _incoming_contribution(ni, affinity, anti))
            aff_pairs, anti_pairs = got[1]
            for pair, n in aff_pairs:
                aff_counts[pair] = aff_counts.get(pair, 0) + n
            for pair, n in anti_pairs:
                anti_counts[pair] = anti_counts.get(pair, 0) + n

    def pre_filter_extensions(self) -> InterPodAffinity:
        return self

    def _update(
        self, state: CycleState, other: PodInfo, node_info: NodeInfo, multiplier: int
    ) -> Status | None:
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_FILTER_STATE_KEY, e)
        assert isinstance(s, _PreFilterState)
        s.update_with_pod(other, node_info.labels, multiplier)
        return None

    def add_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._update(state, pod_to_add, node_info, 1)

    def remove_pod(
        self, state: CycleState, pod_to_schedule: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo
    ) -> Status | None:
        return self._update(state, pod_to_remove, node_info, -1)

    def _filter_state(self, state: CycleState) -> _PreFilterState | Status:
        try:
            s = state.read(PRE_FILTER_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_FILTER_STATE_KEY, e)
        assert isinstance(s, _PreFilterState)
        return s

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        s = self._filter_state(state)
        if isinstance(s, Status):
            return s
        got = s.verdict(node_info.name, node_info.labels)
        return None if got is None else Status(got.code, list(got.reasons))

    def filter_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        s = self._filter_state(state)
        if isinstance(s, Status):
            return np.zeros(len(indices), dtype=bool)  # the scalar filter reports the error
        if s.mask is None or s.mask[0] != id(snapshot):
            s.mask = (id(snapshot), s.pass_mask(self._label_index(snapshot)))
        return s.mask[1][indices]

    def _label_index(self, snapshot: Snapshot) -> LabelIndex:
        self._index = current_label_index(self._index, snapshot)
        return self._index

    # -- score

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]) -> Status | None:
        if not nodes:
            return Status(Code.SKIP)  # no nodes to score
        terms = pod_terms(pod_info)
        has_constraints = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.SKIP)
        if terms.parse_error:
            return as_status(ValueError(f"failed to parse pod: {terms.parse_error}"))
        unsupported = _unsupported_namespace_selector(terms)
        if unsupported is not None:
            return as_status(ValueError(unsupported))
        s = _PreScoreState()
        pod, labels = pod_info.pod, pod_info.labels
        hard_weight = self.hard_pod_affinity_weight
        lister = self._lister()
        with_affinity = lister.have_pods_with_affinity_list()
        if not has_constraints and not with_affinity:
            return Status(Code.SKIP)  # no pod could contribute
        all_nodes = lister.list()
        sums: list[Mapping[Hashable, int]] = []
        if has_constraints:
            # the incoming pod's preferred terms over every pod
            agg = self._aggregate(("score-incoming", terms.preferred_affinity, terms.preferred_anti_affinity))
            agg.update(
                all_nodes,
                lambda ni: _resolved(ni, _incoming_score_contribution(ni, terms)),
                lister.arrays().generation,
            )
            sums.append(agg.sums)

        # existing pods' terms towards the incoming pod (only pods with affinity have any)
        def existing(ni: NodeInfo) -> tuple[tuple[Hashable, int], ...]:
            if not ni.pods_with_affinity:
                return ()
            return _resolved(ni, _existing_score_contribution(ni, pod, labels, hard_weight))

        key = ("score-existing", hard_weight, pod.metadata.namespace, frozenset(labels.items()))
        if len(with_affinity) * 4 > len(all_nodes):
            agg = self._aggregate(key)
            agg.update(all_nodes, existing, lister.arrays().generation)
            sums.append(agg.sums)
        else:
            # few nodes with such pods: sum them (each node's share memoized)
            table = self._memo.table(key)
            few: dict[Hashable, int] = {}
            for ni in with_affinity:
                got = table.get(ni.name)
                if got is None or got[0] != ni.generation:
                    got = table[ni.name] = (ni.generation, existing(ni))
                for pair, n in got[1]:
                    few[pair] = few.get(pair, 0) + n
            sums.append(few)
        topology_score = s.topology_score
        for part in sums:
            for pair_, weight in part.items():
                tk, tv = cast(TopologyPair, pair_)
                values = topology_score.setdefault(tk, {})
                values[tv] = values.get(tv, 0) + weight
        if not s.topology_score:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, s)
        return None

    def _score_state(self, state: CycleState) -> _PreScoreState | Status:
        try:
            s = state.read(PRE_SCORE_STATE_KEY)
        except StateNotFoundError as e:
            return state_read_status(PRE_SCORE_STATE_KEY, e, "failed to read")
        assert isinstance(s, _PreScoreState)
        return s

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        s = self._score_state(state)
        if isinstance(s, Status):
            return 0, s
        return s.score(node_info.labels), None

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        s = self._score_state(state)
        if isinstance(s, Status):
            raise RuntimeError(s.message())  # the engine falls back to the scalar Score
        entries = sum(len(values) for values in s.topology_score.values())
        if entries * 4 < len(indices):
            # few scored domains (e.g. zones): add each domain's score to its nodes at once
            index = self._label_index(snapshot)
            full = np.zeros(index.n, dtype=np.int64)
            for key, values in s.topology_score.items():
                by_value = index.by_pair.get(key, {})
                for tv, weight in values.items():
                    ix = by_value.get(tv)
                    if ix is not None and weight:
                        full[ix] += weight
            return full[indices]
        infos = snapshot.node_info_list
        score = s.score
        return np.fromiter(
            (score(infos[i].labels) for i in indices.tolist()), dtype=np.int64, count=len(indices)
        )

    def normalize_score(self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]) -> Status | None:
        s = self._score_state(state)
        if isinstance(s, Status):
            return s
        if not s.topology_score or not scores:
            return None
        values = [ns.score for ns in scores]
        lo, hi = min(values), max(values)
        diff = hi - lo
        for ns in scores:
            # int64(float64(MaxNodeScore) * (float64(score-min) / float64(max-min))): truncation
            ns.score = int(float(MAX_NODE_SCORE) * (float(ns.score - lo) / float(diff))) if diff > 0 else 0
        return None

    def normalize_scores(
        self,
        state: CycleState,
        pod_info: PodInfo,
        node_infos: Sequence[NodeInfo],
        scores: npt.NDArray[np.int64],
    ) -> Status | None:
        s = self._score_state(state)
        if isinstance(s, Status):
            return s
        if not s.topology_score or not len(scores):
            return None
        lo, hi = int(scores.min()), int(scores.max())
        diff = hi - lo
        if diff <= 0:
            scores[:] = 0
            return None
        f = float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / float(diff))
        scores[:] = np.trunc(f).astype(np.int64)
        return None

    def score_extensions(self) -> InterPodAffinity:
        return self


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle | None) -> InterPodAffinity:
    """Builds the plugin from InterPodAffinityArgs (upstream ValidateInterPodAffinityArgs: ValueError)."""
    args = args or {}
    weight = args.get("hardPodAffinityWeight")
    if weight is None:
        weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise ValueError(f"hardPodAffinityWeight: Invalid value: {weight!r}: must be an integer")
    if not 0 <= weight <= 100:
        raise ValueError(f"hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0, 100]")
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if not isinstance(ignore, bool):
        raise ValueError(f"ignorePreferredTermsOfExistingPods: Invalid value: {ignore!r}: must be a boolean")
    return InterPodAffinity(handle, weight, ignore)
