"""format_time and format_micro_time remember the last whole second they formatted: the text must
still be exactly strftime's for every instant, whatever was formatted before it."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from kse.objects.timeutil import format_micro_time, format_time


def _reference(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_every_instant_is_formatted_as_strftime_would_whatever_came_before() -> None:
    rng = random.Random(7)
    base = 1_765_000_000.0
    moments = [base + 0.999, base + 1.0, base + 1.0, base + 0.5, -0.5, 0.0, 59.999999, 60.0]
    moments += [base + rng.uniform(-3, 3) for _ in range(500)]
    for moment in moments:
        assert format_time(moment) == _reference(moment), moment
    assert format_time(7) == "1970-01-01T00:00:07Z"  # an int is a number of seconds too


def _micro_reference(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_every_instant_is_formatted_as_micro_time_as_strftime_would() -> None:
    """Rounding to the microsecond as fromtimestamp does: half to even, carrying into the next
    second, and below zero borrowing from the one before."""
    rng = random.Random(11)
    base = 1_765_000_000.0
    moments = [base + 0.9999996, base + 0.9999994, base + 1.0, -0.5, -1e-7, -0.9999996, 0.0, 59.9999995]
    moments += [0.0000005, 0.0000015, 0.0000025, 1.0000005, -0.0000005]  # exact-ish halves
    moments += [base + 0.999999, base + 0.9999989, 5.9999992, -0.0000004, -0.0000006, -2.9999996]
    moments += [base + rng.uniform(-3, 3) for _ in range(500)]
    moments += [rng.uniform(-1e9, 4e9) for _ in range(500)]
    for moment in moments:
        assert format_micro_time(moment) == _micro_reference(moment), moment
        assert format_time(moment) == _reference(moment), moment
    assert format_micro_time(7) == "1970-01-01T00:00:07.000000Z"


def test_an_aware_datetime_is_formatted_in_utc() -> None:
    from datetime import timedelta, timezone

    moment = datetime(2026, 12, 7, 6, 0, 1, 999_999, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(moment) == "2026-12-07T04:00:01Z"
    assert format_micro_time(moment) == "2026-12-07T04:00:01.999999Z"
