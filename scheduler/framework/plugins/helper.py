"""Helpers shared by the plugins (upstream `pkg/scheduler/framework/plugins/helper`, plus the
scheduling helpers of component-helpers: node affinity and taint/toleration matching).

Selectors are compiled once per pod (and cached on its PodInfo) with kse.objects.labels, so a
Filter call for one node is a few dict lookups. Semantics are upstream's, including its integer
arithmetic (Go's `/` truncates toward zero; `go_div` does the same).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kse.objects import labels
from kse.objects.labels import Selector, label_selector_as_selector, selector_from_set
from proto import kse_pb2 as pb
from scheduler.framework.interface import NodeScore
from scheduler.framework.nodeinfo import Taint
from scheduler.framework.types import PodInfo, Status

_T = TypeVar("_T")

# ----------------------------------------------------------------------------- arithmetic


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's `/` on int64."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def round_ratio(num: int, den: int) -> int:
    """Go's int64(math.Round(float64(num) / float64(den))) for num >= 0, den > 0: the nearest
    integer, halves away from zero. Exact in integers (the quotient of small integers is never
    within float error of a half unless it is one)."""
    return (2 * num + den) // (2 * den)


def default_normalize_score(max_priority: int, reverse: bool, scores: list[NodeScore]) -> Status | None:
    """Scales scores from [0, max(scores)] to [0, max_priority], reversed if asked
    (upstream helper.DefaultNormalizeScore). Scores are assumed non-negative."""
    max_count = max((s.score for s in scores), default=0)
    if max_count <= 0:
        if reverse:
            for s in scores:
                s.score = max_priority
        return None
    for s in scores:
        score = max_priority * s.score // max_count
        s.score = max_priority - score if reverse else score
    return None


@dataclass(frozen=True)
class FunctionShapePoint:
    utilization: int
    score: int


def build_broken_linear_function(shape: Sequence[FunctionShapePoint]) -> Callable[[int], int]:
    """A piecewise linear function through the shape points (upstream helper.BuildBrokenLinearFunction):
    shape[0].score below the first point, shape[-1].score above the last, linear in between
    (with Go's truncating division)."""
    points = tuple(shape)

    def f(p: int) -> int:
        for i, point in enumerate(points):
            if p <= point.utilization:
                if i == 0:
                    return points[0].score
                prev = points[i - 1]
                return prev.score + go_div(
                    (point.score - prev.score) * (p - prev.utilization), point.utilization - prev.utilization
                )
        return points[-1].score

    return f


def pod_priority(pod: pb.Pod) -> int:
    """Upstream corev1helpers.PodPriority: spec.priority, or 0 when unset."""
    return pod.spec.priority if pod.spec.HasField("priority") else 0


def state_read_status(key: str, err: BaseException, prefix: str = "reading") -> Status:
    """The Error status of a plugin that finds no state of its own in CycleState, with upstream's
    wording: fmt.Errorf("<prefix> %q from cycleState: %w", key, err)."""
    return Status.error(f'{prefix} "{key}" from cycleState: {err}')


# ----------------------------------------------------------------------------- label selectors
#
# Selector parsing and matching is kse.objects.labels (apimachinery labels semantics); these
# wrappers only adapt it to the scheduler's hot path: node labels and names come from NodeInfo's
# cached dict, not from the proto map.

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
_DECIMAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def selector_from_proto(selector: pb.LabelSelector | None) -> Selector:
    """metav1.LabelSelectorAsSelector: None matches nothing, an empty selector everything.
    Raises SelectorError (a ValueError) for an invalid selector."""
    return label_selector_as_selector(selector)


def merge_label_set_with_selector(match_labels: Mapping[str, str], selector: Selector) -> Selector:
    """Upstream podtopologyspread mergeLabelSetWithSelector: the set's key=value requirements
    ANDed with the selector's (a nothing-selector stays nothing)."""
    if selector.matches_nothing:
        return selector
    return selector_from_set(match_labels).add(*selector.requirements)


# ----------------------------------------------------------------------------- node affinity

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

    def matches_node(self, node: pb.Node) -> bool:
        return self.matches(node.metadata.name, node.metadata.labels)


def required_node_affinity(pod_info: PodInfo) -> RequiredNodeAffinity:
    """The pod's RequiredNodeAffinity, parsed once per PodInfo."""
    got = pod_info.derived.get("helper/requiredNodeAffinity")
    if got is None:
        got = pod_info.derived["helper/requiredNodeAffinity"] = RequiredNodeAffinity(pod_info.pod)
    return got  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- taints and tolerations

TAINT_EFFECT_NO_SCHEDULE = "NoSchedule"
TAINT_EFFECT_PREFER_NO_SCHEDULE = "PreferNoSchedule"
TAINT_EFFECT_NO_EXECUTE = "NoExecute"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

# Toleration operators Gt/Lt (KEP-5471, feature gate TaintTolerationComparisonOperators) are
# enabled by default (Features.enable_taint_toleration_comparison_operators): kse's API
# documents them and its API server accepts them.
ENABLE_TOLERATION_COMPARISON_OPERATORS = True

_DECIMAL_INTEGER_ERR = "must be a valid decimal integer in canonical form"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    @classmethod
    def from_proto(cls, t: pb.Toleration) -> Toleration:
        return cls(t.key, t.operator, t.value, t.effect)

    def tolerates_checked(
        self, taint: Taint, enable_comparison: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS
    ) -> tuple[bool, str | None]:
        """Upstream Toleration.ToleratesTaint (k8s.io/api core/v1 toleration.go): effect (empty
        = all), key (empty = all, with Exists), then the operator: Equal (default), Exists, or
        the numeric Gt / Lt (taint value > / < toleration value, both canonical decimal int64).
        Returns (tolerated, error message of a Gt/Lt value that does not parse)."""
        if self.effect and self.effect != taint.effect:
            return False, None
        if self.key and self.key != taint.key:
            return False, None
        op = self.operator
        if op in ("", "Equal"):
            return self.value == taint.value, None
        if op == "Exists":
            return True, None
        if op in (GT, LT):
            if not enable_comparison:
                return False, None
            tol, err = _parse_int64(self.value, "toleration")
            if err is not None:
                return False, err
            tnt, err = _parse_int64(taint.value, "taint")
            if err is not None:
                return False, err
            return (tnt > tol if op == GT else tnt < tol), None
        return False, None

    def tolerates(
        self, taint: Taint, enable_comparison: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS
    ) -> bool:
        return self.tolerates_checked(taint, enable_comparison)[0]


def _parse_int64(s: str, what: str) -> tuple[int, str | None]:
    """content.IsDecimalInteger then strconv.ParseInt, with upstream's error texts."""
    if not s:
        return 0, f'failed to parse {what} value "" as int64: must be non-empty'
    if not _DECIMAL_INTEGER.match(s):
        return 0, f'failed to parse {what} value "{s}" as int64: {_DECIMAL_INTEGER_ERR}'
    v = int(s)
    if not _INT64_MIN <= v <= _INT64_MAX:
        return 0, (
            f'failed to parse {what} value "{s}" as int64: '
            f'strconv.ParseInt: parsing "{s}": value out of range'
        )
    return v, None


def pod_tolerations(pod_info: PodInfo) -> tuple[Toleration, ...]:
    """The pod's tolerations, parsed once per PodInfo."""
    got = pod_info.derived.get("helper/tolerations")
    if got is None:
        got = pod_info.derived["helper/tolerations"] = tuple(
            Toleration.from_proto(t) for t in pod_info.pod.spec.tolerations
        )
    return got  # type: ignore[no-any-return]


def tolerations_tolerate_taint_checked(
    tolerations: Iterable[Toleration],
    taint: Taint,
    enable_comparison: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS,
) -> tuple[bool, str | None]:
    """Upstream TolerationsTolerateTaint: whether any toleration tolerates the taint, and when
    none does, the first Gt/Lt parse error met."""
    first_err: str | None = None
    for t in tolerations:
        ok, err = t.tolerates_checked(taint, enable_comparison)
        if ok:
            return True, None
        if first_err is None:
            first_err = err
    return False, first_err


def tolerations_tolerate_taint(
    tolerations: Iterable[Toleration],
    taint: Taint,
    enable_comparison: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS,
) -> bool:
    """Whether any toleration tolerates the taint; a value that does not parse tolerates nothing."""
    return any(t.tolerates(taint, enable_comparison) for t in tolerations)


def do_not_schedule_taints_filter(taint: Taint) -> bool:
    """Taints a pod must tolerate to be scheduled: NoSchedule and NoExecute."""
    return taint.effect in (TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE)


def find_matching_untolerated_taint_checked(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    inclusion: Callable[[Taint], bool],
    enable_comparison: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS,
) -> tuple[Taint | None, str | None]:
    """Upstream FindMatchingUntoleratedTaint (component-helpers scheduling/corev1): the first
    taint passing `inclusion` that no toleration tolerates. A cleanly untolerated taint wins over
    one whose Gt/Lt comparison failed to parse, so the result does not depend on taint order;
    in the latter case the parse error comes along. (None, None) when all are tolerated."""
    first_err_taint: Taint | None = None
    first_err: str | None = None
    for taint in taints:
        if not inclusion(taint):
            continue
        ok, err = tolerations_tolerate_taint_checked(tolerations, taint, enable_comparison)
        if err is not None:
            if first_err is None:
                first_err, first_err_taint = err, taint
            continue
        if not ok:
            return taint, None
    return first_err_taint, first_err


def find_matching_untolerated_taint(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    inclusion: Callable[[Taint], bool],
    enable_comparison: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS,
) -> Taint | None:
    """The untolerated taint of `find_matching_untolerated_taint_checked`, or None."""
    return find_matching_untolerated_taint_checked(taints, tolerations, inclusion, enable_comparison)[0]


def taints_of(node: pb.Node) -> tuple[Taint, ...]:
    return tuple(Taint(t.key, t.value, t.effect) for t in node.spec.taints)


# ----------------------------------------------------------------------------- queueing hints


def as_objects(cls: type[_T], old: object, new: object) -> tuple[_T | None, _T | None]:
    """Upstream util.As: the (old, new) objects of an event as `cls`; None stays None.
    Raises TypeError for anything else (a hint that raises is treated as Queue)."""
    for obj in (old, new):
        if obj is not None and not isinstance(obj, cls):
            raise TypeError(f"expected {cls.__name__}, got {type(obj).__name__}")
    return old, new  # type: ignore[return-value]


# ----------------------------------------------------------------------------- feature gates


@dataclass(frozen=True)
class Features:
    """The feature gates the plugins consult (upstream plugins/feature.Features), fixed to the
    upstream defaults that make sense for kse: queueing hints on; in-place pod resize off (kse's
    API has no pod resize); node inclusion policies, matchLabelKeys and the Gt/Lt toleration
    operators on; sidecar containers on."""

    enable_scheduling_queue_hint: bool = True
    enable_in_place_pod_vertical_scaling: bool = False
    enable_node_inclusion_policy_in_pod_topology_spread: bool = True
    enable_match_label_keys_in_pod_topology_spread: bool = True
    enable_sidecar_containers: bool = True
    enable_taint_toleration_comparison_operators: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS


DEFAULT_FEATURES = Features()


def go_round(x: float) -> int:
    """Go's math.Round: the nearest integer, halves away from zero (exact, unlike x + 0.5)."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return t
