"""Go's integer arithmetic, as the plugins' scores depend on it (Go's `/` truncates toward zero;
`math.Round` rounds halves away from zero)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's `/` on int64."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def round_ratio(num: int, den: int) -> int:
    """Go's int64(math.Round(float64(num) / float64(den))) for num >= 0, den > 0: the nearest
    integer, halves away from zero. Exact in integers (the quotient of small integers is never
    within float error of a half unless it is one)."""
    return (2 * num + den) // (2 * den)


def go_round(x: float) -> int:
    """Go's math.Round: the nearest integer, halves away from zero (exact, unlike x + 0.5)."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return t


def go_round_array(x: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """`go_round` over an array, element for element the same (the same float operations)."""
    t = np.trunc(x)
    away = np.abs(x - t) >= 0.5
    return (t + np.where(away, np.sign(x), 0.0)).astype(np.int64)
