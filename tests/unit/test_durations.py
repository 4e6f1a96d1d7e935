"""kse.durations: Go's ParseDuration and Duration.String(), and the one duration-flag convention."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest

from kse.durations import (
    DurationError,
    DurationFlag,
    PositiveDuration,
    as_timedelta,
    format_duration,
    format_duration_ns,
    parse_go_duration,
    parse_go_duration_ns,
    parse_seconds,
    positive_duration,
)


# The accepted cases of Go's src/time/time_test.go parseDurationTests, a selection.
@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("5s", 5 * 10**9),
        ("30s", 30 * 10**9),
        ("1478s", 1478 * 10**9),
        ("-5s", -5 * 10**9),
        ("+5s", 5 * 10**9),
        ("-0", 0),
        ("+0", 0),
        ("5.0s", 5 * 10**9),
        ("5.6s", 5 * 10**9 + 600 * 10**6),
        ("5.s", 5 * 10**9),
        (".5s", 500 * 10**6),
        ("1.0s", 10**9),
        ("1.00s", 10**9),
        ("1.004s", 10**9 + 4 * 10**6),
        ("100.00100s", 100 * 10**9 + 10**6),
        ("10ns", 10),
        ("11us", 11_000),
        ("12µs", 12_000),  # U+00B5
        ("12μs", 12_000),  # U+03BC
        ("13ms", 13 * 10**6),
        ("14s", 14 * 10**9),
        ("15m", 15 * 60 * 10**9),
        ("16h", 16 * 3600 * 10**9),
        ("3h30m", (3 * 3600 + 30 * 60) * 10**9),
        ("10.5s4m", (4 * 60 + 10) * 10**9 + 500 * 10**6),
        ("-2m3.4s", -(2 * 60 * 10**9 + 3 * 10**9 + 400 * 10**6)),
        ("1h2m3s4ms5us6ns", 3600 * 10**9 + 2 * 60 * 10**9 + 3 * 10**9 + 4 * 10**6 + 5 * 10**3 + 6),
        ("39h9m14.425s", (39 * 3600 + 9 * 60 + 14) * 10**9 + 425 * 10**6),
        ("52763797000ns", 52763797000),
        ("0.3333333333333333333h", 20 * 60 * 10**9 - 1),  # truncated to whole ns, as Go
        ("9223372036854775807ns", (1 << 63) - 1),
        ("-9223372036854775808ns", -(1 << 63)),
    ],
)
def test_parse_go_duration_matches_go(text: str, ns: int) -> None:
    assert parse_go_duration_ns(text) == ns


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "invalid duration"),
        ("3", "missing unit"),
        ("-", "invalid duration"),
        ("s", "invalid duration"),
        (".", "invalid duration"),
        ("-.", "invalid duration"),
        (".s", "invalid duration"),
        ("+.s", "invalid duration"),
        ("1d", "unknown unit"),  # Go has no days
        ("1s2", "missing unit"),
        ("1h 2m", "unknown unit"),
        ("9223372036854775808ns", "invalid duration"),  # int64 overflow
        ("9223372036854775.808us", "invalid duration"),
    ],
)
def test_parse_go_duration_refuses_what_go_refuses(text: str, why: str) -> None:
    with pytest.raises(DurationError, match=why):
        parse_go_duration(text)
    with pytest.raises(ValueError):  # library callers catch ValueError
        parse_go_duration(text)


def test_days_only_where_asked() -> None:
    from kse.durations import GO_UNITS_WITH_DAYS

    assert parse_go_duration_ns("2w1d", units=GO_UNITS_WITH_DAYS) == 15 * 24 * 3600 * 10**9


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15", 15.0), ("15s", 15.0), ("0.25m", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("0", 0.0), (" 2 ", 2.0)],
)
def test_flag_values_take_bare_seconds_and_go_durations(text: str, seconds: float) -> None:
    assert parse_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "soon", "", "1x"])
def test_flag_values_refuse_garbage(text: str) -> None:
    with pytest.raises(DurationError):
        parse_seconds(text)


# Go's src/time/time_test.go durationTests, a selection, and a few of our own.
@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1100, "1.1µs"),
        (2_200_000, "2.2ms"),
        (3_300_000_000, "3.3s"),
        (4 * 60 * 10**9 + 5 * 10**9, "4m5s"),
        (4 * 60 * 10**9 + 5_001_000_000, "4m5.001s"),
        (5 * 3600 * 10**9 + 6 * 60 * 10**9 + 7_001_000_000, "5h6m7.001s"),
        (8 * 60 * 10**9 + 1, "8m0.000000001s"),
        ((1 << 63) - 1, "2562047h47m16.854775807s"),
        (-(1 << 63), "-2562047h47m16.854775808s"),
        (900 * 10**9, "15m0s"),
        (3600 * 10**9, "1h0m0s"),
    ],
)
def test_format_matches_go(ns: int, text: str) -> None:
    assert format_duration_ns(ns) == text


def test_format_and_parse_round_trip() -> None:
    for seconds in (0.0, 0.5, 1.5, 90.0, 3723.5, -5.0, 1e-6):
        assert parse_go_duration(format_duration(seconds)) == pytest.approx(seconds)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse test")
    p.add_argument("--wait", action=DurationFlag, default=None)
    p.add_argument("--every", action=PositiveDuration, default="10s")  # a string default is converted
    p.add_argument("--ttl", action=DurationFlag, convert=as_timedelta(positive_duration))
    return p


def test_duration_flags_parse_the_same_values() -> None:
    args = _parser().parse_args(["--wait", "15", "--ttl", "1m"])
    assert args.wait == 15.0 and args.every == 10.0 and args.ttl == timedelta(minutes=1)
    assert _parser().parse_args(["--wait=1m30s"]).wait == 90.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--wait", "soon"], 'invalid duration "soon" for --wait: not a duration'),
        (["--wait=-1"], 'invalid duration "-1" for --wait: must be >= 0'),
        (["--every", "0s"], 'invalid duration "0s" for --every: must be > 0'),
        (["--ttl", "2x"], 'invalid duration "2x" for --ttl: unknown unit "x"'),
    ],
)
def test_a_bad_duration_flag_is_one_usage_error_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"kse test: error: {message}" in err and "Traceback" not in err
