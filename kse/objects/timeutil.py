"""Kubernetes timestamps: metav1.Time ("2024-05-01T12:00:00Z") and MicroTime (".123456Z").

Objects carry timestamps as RFC 3339 strings (DESIGN.md). Formats follow upstream
`k8s.io/apimachinery/pkg/apis/meta/v1/time.go` (Time: whole seconds, always UTC "Z") and
`micro_time.go` (MicroTime: exactly six fractional digits, UTC "Z"). Parsing accepts what Go's
time.Parse(RFC3339) accepts: either form, any number of fractional digits (Python keeps six;
nanoseconds are truncated), "Z" or a numeric offset.

Everything that reads "now" takes an optional clock (a callable returning epoch seconds), so
tests and the leader-election code can inject time: client-go's rule is that a candidate trusts
only its own clock.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

__all__ = [
    "Clock",
    "format_micro_time",
    "format_time",
    "now_micro",
    "now_rfc3339",
    "parse_time",
    "to_epoch",
]

Clock = Callable[[], float]

_RFC3339_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})\Z", re.ASCII
)


def _as_utc(moment: datetime | float) -> datetime:
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            raise ValueError("naive datetime: give a timezone (timestamps are UTC instants)")
        return moment.astimezone(UTC)
    return datetime.fromtimestamp(moment, tz=UTC)


# The last whole second formatted from a number, and its text without the zone: the API server
# stamps every create (creationTimestamp) and the scheduler every Event (firstTimestamp, eventTime),
# thousands a second, and the text only changes once a second (strftime was ~3 % of the API
# server's CPU and ~1.5 % of the scheduler's on the e2e benchmark).
_last_second: tuple[int, str] = (0, "1970-01-01T00:00:00")


def _second_text(second: int) -> str:
    """The text "YYYY-MM-DDTHH:MM:SS" (UTC) of a whole second since the epoch."""
    global _last_second
    last = _last_second
    if last[0] == second:
        return last[1]
    text = datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    _last_second = (second, text)
    return text


def format_time(moment: datetime | float) -> str:
    """metav1.Time's JSON form: whole seconds (truncated after rounding to the microsecond, as
    strftime of datetime.fromtimestamp gives), UTC, "Z"."""
    if isinstance(moment, datetime):
        return _as_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")
    second = math.floor(moment)
    if moment - second >= 0.999999:  # rounding to the microsecond may reach the next second
        second = _split(moment)[0]
    return _second_text(second) + "Z"


def format_micro_time(moment: datetime | float) -> str:
    """metav1.MicroTime's JSON form: six fractional digits, UTC, "Z"."""
    if isinstance(moment, datetime):
        return _as_utc(moment).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    second, micro = _split(moment)
    return f"{_second_text(second)}.{micro:06d}Z"


def _split(moment: float) -> tuple[int, int]:
    """(whole second, microseconds) as datetime.fromtimestamp splits a number: the microseconds
    rounded half to even, carrying into the next second (so 0.9999996 is second 1), and below
    zero borrowing from the one before (CPython's _PyTime_DoubleToDenominator)."""
    frac, whole = math.modf(moment)
    second, micro = int(whole), round(frac * 1e6)
    if micro >= 1_000_000:
        return second + 1, micro - 1_000_000
    if micro < 0:
        return second - 1, micro + 1_000_000
    return second, micro


def now_rfc3339(clock: Clock = time.time) -> str:
    """The current time as a Time string (creationTimestamp, lastTransitionTime, ...)."""
    return format_time(clock())


def now_micro(clock: Clock = time.time) -> str:
    """The current time as a MicroTime string (Lease acquireTime/renewTime, Event eventTime)."""
    return format_micro_time(clock())


def parse_time(text: str) -> datetime:
    """Parse a Time or MicroTime string into an aware UTC datetime; ValueError if malformed."""
    m = _RFC3339_RE.match(text)
    if m is None:
        raise ValueError(f'parsing time "{text}": not an RFC 3339 timestamp (want e.g. 2006-01-02T15:04:05Z)')
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    micro = int((m.group(7) or "0")[:6].ljust(6, "0"))
    zone = m.group(8)
    if zone == "Z":
        tz = UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        offset = timedelta(hours=hours, minutes=minutes)
        if hours >= 24 or minutes >= 60:
            raise ValueError(f'parsing time "{text}": time zone offset out of range')
        tz = timezone(sign * offset)
    try:
        parsed = datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError as err:
        raise ValueError(f'parsing time "{text}": {err}') from None
    return parsed.astimezone(UTC)


def to_epoch(text: str) -> float:
    """Epoch seconds of a Time or MicroTime string."""
    return parse_time(text).timestamp()


def epoch_or_none(text: str) -> float | None:
    """`to_epoch`, or None for an empty or unparseable time (an optional timestamp such as a
    pod's status.startTime: the caller decides what a missing one means)."""
    if not text:
        return None
    try:
        return to_epoch(text)
    except ValueError:
        return None
