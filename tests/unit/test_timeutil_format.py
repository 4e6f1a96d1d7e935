"""format_time remembers the last whole second it formatted: the text must still be exactly
strftime's for every instant, whatever was formatted before it."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from kse.objects.timeutil import format_time


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


def test_an_aware_datetime_is_formatted_in_utc() -> None:
    from datetime import timedelta, timezone

    moment = datetime(2026, 12, 7, 6, 0, 1, 999_999, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(moment) == "2026-12-07T04:00:01Z"
