"""Durations, one definition for every kse process: Go's syntax, the flag convention, Go's String().

kube-scheduler and every Kubernetes component take durations as Go's `time.ParseDuration` reads
them ("1h2m3.5s", "300ms", "1.5us", "-5s"; units ns, us/µs/μs, ms, s, m, h) and print them with
`time.Duration.String()` ("1m30s", "15m0s", "500ms"). kse does the same, with one addition for
command-line flags only: a bare number means seconds, so `15`, `15s` and `0.25m` are one value
everywhere. Config files keep Go's strictness (a KubeSchedulerConfiguration's `leaseDuration: 15`
is refused, as a `metav1.Duration` is by Go): they call `parse_go_duration`, not `parse_seconds`.

Why not the `durationpy` package (0.11, the Kubernetes Python client's dependency): it accepts
units Go refuses ("d", "w", "mm", "y"), keeps only microseconds (a `timedelta`), and its formatter
is not Go's ("1s500ms" for Go's "1.5s", "0" for "0s"). Matching Go exactly is ~100 lines here.

The flag convention: a duration flag is declared with `action=DurationFlag` (or `PositiveDuration`),
so a bad value reads the same on every command, naming the flag, with exit code 2 from argparse:

    kse scheduler: error: invalid duration "soon" for --leader-elect-lease-duration: not a duration ...

`non_negative_duration` / `positive_duration` are the same checks as plain `type=` callables for
composite values (and for tests that call them).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `kse health`, a probe run every few seconds, imports this module: keep it light
    from typing import Any

# Nanoseconds per unit, as Go's time package (src/time/format.go, unitMap).
NANOSECOND = 1
MICROSECOND = 1_000
MILLISECOND = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
GO_UNITS: Mapping[str, int] = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "µs": MICROSECOND,  # U+00B5 micro sign
    "μs": MICROSECOND,  # U+03BC Greek mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
# Certificate lifetimes are long: `kse certs --ttl 365d` also takes days and weeks (as go-str2duration).
DAY = 24 * HOUR
WEEK = 7 * DAY
GO_UNITS_WITH_DAYS: Mapping[str, int] = {**GO_UNITS, "d": DAY, "w": WEEK}
_MAX_NS = (1 << 63) - 1  # a Go time.Duration is an int64 of nanoseconds

EXAMPLES = "15, 15s, 1m30s, 500ms"
_NOT_A_DURATION = f"not a duration: give seconds or Go's syntax ({EXAMPLES})"


class DurationError(argparse.ArgumentTypeError, ValueError):
    """A text that is not a duration, or a duration out of a flag's range.

    A ValueError for library callers (the config loader), and an ArgumentTypeError so the checks
    below also work as argparse `type=` callables."""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_go_duration_ns(text: str, *, units: Mapping[str, int] = GO_UNITS) -> int:
    """Nanoseconds from a Go duration string, exactly as Go's `time.ParseDuration` reads it.

    `[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`, or "0" (the only unitless value). Errors say why in Go's words
    ("missing unit", "unknown unit"); an int64 overflow is refused as Go does."""
    s = text
    negative = False
    if s[:1] in ("-", "+"):
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationError(f"invalid duration {_quote(text)}")
    total = 0
    i, n = 0, len(s)
    while i < n:
        start = i
        while i < n and s[i].isascii() and s[i].isdigit():
            i += 1
        whole = s[start:i]
        frac = ""
        if i < n and s[i] == ".":
            i += 1
            fstart = i
            while i < n and s[i].isascii() and s[i].isdigit():
                i += 1
            frac = s[fstart:i]
        if not whole and not frac:
            raise DurationError(f"invalid duration {_quote(text)}")  # no digits ("s", ".s")
        ustart = i
        while i < n and s[i] != "." and not (s[i].isascii() and s[i].isdigit()):
            i += 1
        unit_text = s[ustart:i]
        if not unit_text:
            raise DurationError(f"missing unit in duration {_quote(text)}")
        unit = units.get(unit_text)
        if unit is None:
            raise DurationError(f"unknown unit {_quote(unit_text)} in duration {_quote(text)}")
        value = int(whole or "0") * unit
        if frac:
            value += int(frac) * unit // 10 ** len(frac)  # truncated to whole ns, as Go
        total += value
        if total > _MAX_NS + (1 if negative else 0):
            raise DurationError(f"invalid duration {_quote(text)}")
    return -total if negative else total


def parse_go_duration(text: str, *, units: Mapping[str, int] = GO_UNITS) -> float:
    """Seconds from a Go duration string (strict: no bare numbers but "0"), for config files."""
    return parse_go_duration_ns(text, units=units) / SECOND


def parse_seconds(text: str, *, units: Mapping[str, int] = GO_UNITS) -> float:
    """Seconds from a flag value: a bare number of seconds ("15", "0.5") or a Go duration ("15s")."""
    stripped = text.strip()
    try:
        value = float(stripped)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise DurationError(f"must be a finite number of seconds, got {text!r}")
        return value
    try:
        return parse_go_duration(stripped, units=units)
    except DurationError as e:
        # Go's own reason when the text looked like a duration with a bad unit, else the examples.
        reason = str(e)
        if reason.startswith("unknown unit") and any(c.isdigit() for c in stripped[:1]):
            raise DurationError(f"{reason}; valid units: {', '.join(units)}") from None
        raise DurationError(_NOT_A_DURATION) from None


def non_negative_duration(text: str) -> float:
    """Seconds >= 0 (a bare number or a Go duration): a `type=` callable."""
    value = parse_seconds(text)
    if value < 0:
        raise DurationError(f"must be >= 0, got {text}")
    return value


def positive_duration(text: str) -> float:
    """Seconds > 0 (a bare number or a Go duration): a `type=` callable."""
    value = parse_seconds(text)
    if not value > 0:
        raise DurationError(f"must be > 0, got {text}")
    return value


def format_duration(seconds: float) -> str:
    """Go's `time.Duration.String()`: "0s", "1.5µs", "500ms", "1.5s", "1m30s", "15m0s", "1h0m0s"."""
    return format_duration_ns(round(seconds * SECOND))


def format_duration_ns(ns: int) -> str:
    """`format_duration` of a whole number of nanoseconds (src/time/time.go, Duration.String)."""
    if ns == 0:
        return "0s"
    sign, u = ("-" if ns < 0 else ""), abs(ns)

    def frac(v: int, unit: int) -> str:
        whole, rest = divmod(v, unit)
        if not rest:
            return str(whole)
        digits = str(rest).rjust(len(str(unit)) - 1, "0").rstrip("0")
        return f"{whole}.{digits}"

    if u < MICROSECOND:
        return f"{sign}{u}ns"
    if u < MILLISECOND:
        return f"{sign}{frac(u, MICROSECOND)}µs"
    if u < SECOND:
        return f"{sign}{frac(u, MILLISECOND)}ms"
    hours, rest = divmod(u, HOUR)
    minutes, rest = divmod(rest, MINUTE)
    head = f"{hours}h{minutes}m" if hours else (f"{minutes}m" if minutes else "")
    return f"{sign}{head}{frac(rest, SECOND)}s"


# ---------------------------------------------------------------- the flag convention


class DurationFlag(argparse.Action):
    """`add_argument("--x", action=DurationFlag, ...)`: a duration flag, in seconds (a float) >= 0.

    `convert=` swaps the check (any `str -> value` callable raising DurationError, e.g.
    `positive_duration` or a command's own floor); a bad value is one line naming the flag:
    `invalid duration "x" for --flag: REASON`, exit 2, the same on every command. String defaults
    go through the same conversion, as argparse does for `type=`."""

    convert: Callable[[str], Any] = staticmethod(non_negative_duration)

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        convert: Callable[[str], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if convert is not None:
            self.convert = convert
        if isinstance(kwargs.get("default"), str):
            kwargs["default"] = self.convert(kwargs["default"])
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        try:
            value = self.convert(text)
        except DurationError as e:
            parser.error(f"invalid duration {_quote(text)} for {option_string or self.dest}: {e}")
        setattr(namespace, self.dest, value)


class PositiveDuration(DurationFlag):
    """`action=PositiveDuration`: a duration flag in seconds > 0."""

    convert = staticmethod(positive_duration)


def as_timedelta(convert: Callable[[str], float]) -> Callable[[str], timedelta]:
    """A `convert=` that gives a `timedelta` instead of float seconds."""

    def to_timedelta(text: str) -> timedelta:
        return timedelta(seconds=convert(text))

    return to_timedelta
