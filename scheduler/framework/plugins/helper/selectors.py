"""Label selectors for the plugins.

Selector parsing and matching is kse.objects.labels (apimachinery labels semantics); these
wrappers only adapt it to the scheduler's hot path: node labels and names come from NodeInfo's
cached dict, not from the proto map."""

from __future__ import annotations

from collections.abc import Mapping

from kse.objects.labels import Selector, label_selector_as_selector, selector_from_set
from proto import kse_pb2 as pb

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"


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
