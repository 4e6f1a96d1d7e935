"""Taints and tolerations (upstream `plugins/helper/taint.go`, k8s.io/api core/v1
toleration.go and component-helpers `scheduling/corev1`), with the Gt/Lt operators."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from proto import kse_pb2 as pb
from scheduler.framework.nodeinfo import Taint
from scheduler.framework.plugins.helper.selectors import GT, LT
from scheduler.framework.types import PodInfo

_DECIMAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

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
