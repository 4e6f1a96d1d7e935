"""Upstream `plugins/helper/normalize_score.go`."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

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


def default_normalize_scores(
    max_priority: int, reverse: bool, scores: npt.NDArray[np.int64]
) -> Status | None:
    """`default_normalize_score` over an array of scores, in place (the batch engine's
    NormalizeScore: a list of NodeScore objects per cycle costs more than the scoring)."""
    max_count = int(scores.max()) if len(scores) else 0
    if max_count <= 0:
        if reverse:
            scores[:] = max_priority
        return None
    scaled = max_priority * scores // max_count
    scores[:] = max_priority - scaled if reverse else scaled
    return None
