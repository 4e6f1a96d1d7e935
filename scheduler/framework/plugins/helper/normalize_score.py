"""Upstream `plugins/helper/normalize_score.go`."""

from __future__ import annotations

from scheduler.framework.interface import NodeScore
from scheduler.framework.types import Status


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
