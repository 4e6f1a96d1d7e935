"""Upstream `plugins/helper/shape_score.go`: piecewise linear score functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler.framework.plugins.helper.gomath import go_div


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
