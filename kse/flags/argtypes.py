"""argparse value types shared by every kse command-line (`type=` callables).

One definition so every command refuses a bad number with the same words; each raises
`argparse.ArgumentTypeError`, which argparse turns into a usage error naming the flag. Durations
live in `kse.durations` (re-exported here); declare duration flags with its `DurationFlag` action.
"""

from __future__ import annotations

import argparse

from kse.durations import non_negative_duration, positive_duration

__all__ = [
    "boolean",
    "host_port",
    "non_negative_duration",
    "non_negative_float",
    "non_negative_int",
    "port",
    "positive_duration",
    "positive_float",
    "positive_int",
]


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


def boolean(text: str) -> bool:
    """Go's flag booleans as kube components take them after `=`: true/t/1/yes, false/f/0/no."""
    value = text.strip().lower()
    if value in ("true", "t", "1", "yes"):
        return True
    if value in ("false", "f", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def host_port(text: str) -> str:
    """A HOST:PORT to listen on (port 0 allowed), checked as the health servers parse it."""
    from kse.scrape import parse_address

    try:
        parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text
