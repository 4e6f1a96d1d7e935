"""argparse value types shared by every kse command-line (`type=` callables).

One definition so every command refuses a bad number with the same words; each raises
`argparse.ArgumentTypeError`, which argparse turns into a usage error naming the flag.
"""

from __future__ import annotations

import argparse
import re


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (NaN refused)."""
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A number >= 0 (NaN refused)."""
    value = _float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {value}")
    return value


_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def positive_duration(text: str) -> float:
    """Seconds > 0, from a Go duration ("90s", "10m", "1h30m", "500ms") or a plain number of seconds."""
    try:
        value = float(text)
    except ValueError:
        parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
        if not text or "".join(n + u for n, u in parts) != text:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 10m, 1h30m)") from None
        value = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text!r}")
    return value
