"""Quantity parsing and printing, checked against upstream's own tables (quantity_test.go)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kse.objects import quantity as q
from kse.objects.quantity import (
    QUANTITY_REGEX,
    Format,
    QuantityError,
    canonicalize,
    format_quantity,
    milli_value,
    nano_value,
    parse_quantity,
    parse_quantity_format,
    value,
)

DSI, BSI, DEX = Format.DECIMAL_SI, Format.BINARY_SI, Format.DECIMAL_EXPONENT
MAX = 2**63 - 1


def dec(mantissa: int, exponent: int) -> Fraction:
    return Fraction(mantissa) * Fraction(10) ** exponent


# (input, exact value, format): TestQuantityParse's table.
PARSE_TABLE = [
    ("0", dec(0, 0), DSI),
    ("0n", dec(0, 0), DSI),
    ("0u", dec(0, 0), DSI),
    ("0m", dec(0, 0), DSI),
    ("0Ki", dec(0, 0), BSI),
    ("0k", dec(0, 0), DSI),
    ("0Mi", dec(0, 0), BSI),
    ("0M", dec(0, 0), DSI),
    ("0Gi", dec(0, 0), BSI),
    ("0G", dec(0, 0), DSI),
    ("0Ti", dec(0, 0), BSI),
    ("0T", dec(0, 0), DSI),
    ("1", dec(1, 0), DSI),
    ("1Ki", dec(1024, 0), BSI),
    ("8Ki", dec(8 * 1024, 0), BSI),
    ("7Mi", dec(7 * 1024**2, 0), BSI),
    ("6Gi", dec(6 * 1024**3, 0), BSI),
    ("5Ti", dec(5 * 1024**4, 0), BSI),
    ("4Pi", dec(4 * 1024**5, 0), BSI),
    ("3Ei", dec(3 * 1024**6, 0), BSI),
    ("10Ti", dec(10 * 1024**4, 0), BSI),
    ("100Ti", dec(100 * 1024**4, 0), BSI),
    ("5n", dec(5, -9), DSI),
    ("4u", dec(4, -6), DSI),
    ("3m", dec(3, -3), DSI),
    ("9", dec(9, 0), DSI),
    ("8k", dec(8, 3), DSI),
    ("50k", dec(5, 4), DSI),
    ("7M", dec(7, 6), DSI),
    ("6G", dec(6, 9), DSI),
    ("5T", dec(5, 12), DSI),
    ("40T", dec(4, 13), DSI),
    ("300T", dec(3, 14), DSI),
    ("2P", dec(2, 15), DSI),
    ("1E", dec(1, 18), DSI),
    ("1E-3", dec(1, -3), DEX),
    ("1e3", dec(1, 3), DEX),
    ("1E6", dec(1, 6), DEX),
    ("1e9", dec(1, 9), DEX),
    ("1E12", dec(1, 12), DEX),
    ("1e15", dec(1, 15), DEX),
    ("1E18", dec(1, 18), DEX),
    ("1e14", dec(1, 14), DEX),
    ("1e13", dec(1, 13), DEX),
    ("100.035k", dec(100035, 0), DSI),
    ("0.001", dec(1, -3), DSI),
    ("0.0005k", dec(5, -1), DSI),
    ("0.005", dec(5, -3), DSI),
    ("0.05", dec(5, -2), DSI),
    ("0.5", dec(5, -1), DSI),
    ("0.00050k", dec(5, -1), DSI),
    ("0.00500", dec(5, -3), DSI),
    ("0.05000", dec(5, -2), DSI),
    ("0.50000", dec(5, -1), DSI),
    ("0.5e0", dec(5, -1), DEX),
    ("0.5e-1", dec(5, -2), DEX),
    ("0.5e-2", dec(5, -3), DEX),
    ("10.035M", dec(10035, 3), DSI),
    ("1.2e3", dec(12, 2), DEX),
    ("1.3E+6", dec(13, 5), DEX),
    ("1.40e9", dec(14, 8), DEX),
    ("1.53E12", dec(153, 10), DEX),
    ("1.6e15", dec(16, 14), DEX),
    ("1.7E18", dec(17, 17), DEX),
    ("9.01", dec(901, -2), DSI),
    ("8.1k", dec(81, 2), DSI),
    ("7.123456M", dec(7123456, 0), DSI),
    ("6.987654321G", dec(6987654321, 0), DSI),
    ("5.444T", dec(5444, 9), DSI),
    ("40.1T", dec(401, 11), DSI),
    ("300.2T", dec(3002, 11), DSI),
    ("2.5P", dec(25, 14), DSI),
    ("1.01E", dec(101, 16), DSI),
    # Things that saturate or round up to a whole nano.
    ("3.001n", dec(4, -9), DSI),
    ("1.1E-9", dec(2, -9), DEX),
    ("0.0000000001", dec(1, -9), DSI),
    ("0.0000000005", dec(1, -9), DSI),
    ("0.00000000050", dec(1, -9), DSI),
    ("0.5e-9", dec(1, -9), DEX),
    ("0.9n", dec(1, -9), DSI),
    ("0.00000012345", dec(124, -9), DSI),
    ("0.00000012354", dec(124, -9), DSI),
    ("9Ei", Fraction(MAX), BSI),
    ("9223372036854775807Ki", Fraction(MAX), BSI),
    ("12E", dec(12, 18), DSI),
    # Fractional binary.
    ("100.035Ki", dec(10243584, -2), BSI),
    ("0.5Mi", Fraction(512 * 1024), BSI),
    ("0.05Gi", dec(536870912, -1), BSI),
    ("0.025Ti", dec(274877906944, -1), BSI),
    # "Things written by trolls".
    ("0.000000000001Ki", dec(2, -9), DSI),
    (".001", dec(1, -3), DSI),
    (".0001k", dec(100, -3), DSI),
    ("1.", dec(1, 0), DSI),
    ("1.G", dec(1, 9), DSI),
]

INVALID = [
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    " 1",
    "1 ",
    "",
    "1e",
    "K",
]


@pytest.mark.parametrize(("text", "expected", "fmt"), PARSE_TABLE)
def test_parse_table(text: str, expected: Fraction, fmt: Format) -> None:
    assert parse_quantity_format(text) == (expected, fmt)
    assert parse_quantity("+" + text) == expected
    assert parse_quantity("-" + text) == -expected
    assert parse_quantity_format("-" + text)[1] == fmt


@pytest.mark.parametrize("text", INVALID)
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert isinstance(info.value, ValueError)
    assert repr(text) in str(info.value)


def test_error_messages_are_upstreams() -> None:
    with pytest.raises(QuantityError, match="quantities must match the regular expression") as info:
        parse_quantity("abc")
    assert QUANTITY_REGEX in str(info.value)
    with pytest.raises(QuantityError, match="unable to parse quantity's suffix"):
        parse_quantity("1Qi".replace("Q", "k"))  # "ki" is not a suffix; "Ki" is
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity("1e999999999")


def test_sign_only_and_dot_are_zero_as_upstream() -> None:
    # parseQuantityString returns "0" for these; ParseQuantity accepts them.
    for text in ("+", "-", ".", "+.", "00", "-0"):
        assert parse_quantity(text) == 0


# (value, format, canonical, alternate spelling that canonicalises to it): TestQuantityString.
STRING_TABLE = [
    (dec(1024**3, 0), BSI, "1Gi", "1024Mi"),
    (dec(300 * 1024**2, 0), BSI, "300Mi", "307200Ki"),
    (dec(6 * 1024, 0), BSI, "6Ki", ""),
    (dec(1001 * 1024**3, 0), BSI, "1001Gi", "1025024Mi"),
    (dec(1024**4, 0), BSI, "1Ti", "1024Gi"),
    (dec(5, 0), BSI, "5", "5000m"),
    (dec(500, -3), BSI, "500m", "0.5"),
    (dec(1, 9), DSI, "1G", "1000M"),
    (dec(1000, 6), DSI, "1G", "0.001T"),
    (dec(1000000, 3), DSI, "1G", ""),
    (dec(1000000000, 0), DSI, "1G", ""),
    (dec(1, -3), DSI, "1m", "1000u"),
    (dec(80, -3), DSI, "80m", ""),
    (dec(1080, -3), DSI, "1080m", "1.08"),
    (dec(108, -2), DSI, "1080m", "1080000000n"),
    (dec(10800, -4), DSI, "1080m", ""),
    (dec(300, 6), DSI, "300M", ""),
    (dec(1, 12), DSI, "1T", ""),
    (dec(1234567, 6), DSI, "1234567M", ""),
    (dec(1234567, -3), BSI, "1234567m", ""),
    (dec(3, 3), DSI, "3k", ""),
    (dec(1025, 0), BSI, "1025", ""),
    (dec(0, 0), DSI, "0", ""),
    (dec(0, 0), BSI, "0", ""),
    (dec(1, 9), DEX, "1e9", ".001e12"),
    (dec(1, -3), DEX, "1e-3", "0.001e0"),
    (dec(1, -9), DEX, "1e-9", "1000e-12"),
    (dec(80, -3), DEX, "80e-3", ""),
    (dec(300, 6), DEX, "300e6", ""),
    (dec(1, 12), DEX, "1e12", ""),
    (dec(1, 3), DEX, "1e3", ""),
    (dec(3, 3), DEX, "3e3", ""),
    (dec(3, 3), DSI, "3k", ""),
    (dec(0, 0), DEX, "0", "00"),
    (dec(1, -9), DSI, "1n", ""),
    (dec(80, -9), DSI, "80n", ""),
    (dec(1080, -9), DSI, "1080n", ""),
    (dec(108, -8), DSI, "1080n", ""),
    (dec(10800, -10), DSI, "1080n", ""),
    (dec(1, -6), DSI, "1u", ""),
    (dec(80, -6), DSI, "80u", ""),
    (dec(1080, -6), DSI, "1080u", ""),
]


@pytest.mark.parametrize(("amount", "fmt", "expected", "alternate"), STRING_TABLE)
def test_canonical_strings(amount: Fraction, fmt: Format, expected: str, alternate: str) -> None:
    assert format_quantity(amount, fmt) == expected
    assert canonicalize(expected) == expected
    assert parse_quantity(expected) == amount
    if alternate:
        assert canonicalize(alternate) == expected
    if amount:
        assert format_quantity(-amount, fmt) == "-" + expected


def test_canonical_examples_from_the_docs() -> None:
    assert canonicalize("1.5") == "1500m"
    assert canonicalize("1.5Gi") == "1536Mi"
    assert canonicalize("0.1") == "100m"
    assert canonicalize("1000") == "1k"
    # Upstream prints 1e21 in decimal SI without a suffix (its table stops at E); we keep "E".
    assert canonicalize("1000E") == "1000E"


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        ("1", 1000, 1),
        ("100m", 100, 1),
        ("0.5", 500, 1),
        ("1.5", 1500, 2),
        ("1n", 1, 1),
        ("1500001n", 2, 1),
        ("2Gi", 2 * 1024**3 * 1000, 2 * 1024**3),
        ("128974848", 128974848000, 128974848),
        ("129e6", 129000000000, 129000000),
        ("123Mi", 123 * 1024**2 * 1000, 123 * 1024**2),
        ("1.5n", 1, 1),
        ("-1.5", -1500, -2),  # away from zero, as negativeScaleInt64
        ("-0.1m", -1, -1),
        ("0", 0, 0),
    ],
)
def test_milli_value_and_value_round_up(text: str, milli: int, whole: int) -> None:
    assert milli_value(text) == milli
    assert value(text) == whole
    assert milli_value(parse_quantity(text)) == milli
    assert value(parse_quantity(text)) == whole


def test_numbers_from_unquoted_yaml() -> None:
    # `example.com/dongle: 3`, `cpu: 0.5`: numbers read as the JSON number text Kubernetes sees.
    assert parse_quantity(3) == 3
    assert parse_quantity(0.5) == Fraction(1, 2)
    assert parse_quantity(0.1) == Fraction(1, 10)  # not the binary float
    assert parse_quantity(1.5e9) == 1500000000
    assert milli_value(0.5) == 500
    assert value(3) == 3
    assert nano_value(0.25) == 250_000_000
    with pytest.raises(QuantityError):
        parse_quantity(float("nan"))
    with pytest.raises(QuantityError):
        parse_quantity(True)


def test_fractions_are_rounded_up_to_a_nano() -> None:
    assert milli_value(Fraction(1, 3)) == 334
    assert format_quantity(Fraction(1, 3)) == "333333334n"


def test_parsing_is_memoised() -> None:
    q._parse_str.cache_clear()
    q._milli_of_str.cache_clear()
    for _ in range(100):
        milli_value("250m")
        parse_quantity("250m")
    assert q._parse_str.cache_info().misses == 1
    assert q._milli_of_str.cache_info().hits == 99


# ---------------------------------------------------------------- properties

nano_amounts = st.integers(min_value=-(10**27), max_value=10**27).map(lambda n: Fraction(n, 10**9))
formats = st.sampled_from([DSI, BSI, DEX])


@settings(deadline=None)  # CI shares two cores with other suites
@given(nano_amounts, formats)
def test_format_then_parse_is_identity(amount: Fraction, fmt: Format) -> None:
    text = format_quantity(amount, fmt)
    assert parse_quantity(text) == amount


@settings(deadline=None)  # CI shares two cores with other suites
@given(nano_amounts, formats)
def test_canonical_form_is_a_fixed_point(amount: Fraction, fmt: Format) -> None:
    text = format_quantity(amount, fmt)
    if fmt is BSI and not text[-2:].endswith("i"):
        # A binary-SI value that is no whole multiple of 1024 prints without a suffix ("625000",
        # as upstream's CanonicalizeBytes); read back, a bare number is decimal SI ("625k").
        assert canonicalize(text) == format_quantity(amount, DSI)
        return
    assert canonicalize(text) == text


def test_a_binary_si_value_without_a_binary_suffix_reads_back_as_decimal_si() -> None:
    assert format_quantity(Fraction(625000), BSI) == "625000"
    assert canonicalize("625000") == "625k"


@settings(deadline=None)  # CI shares two cores with other suites
@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(
        ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "e-3"]
    ),
)
def test_any_spelling_canonicalises_to_the_same_value(mantissa: int, suffix: str) -> None:
    text = f"{mantissa}{suffix}"
    amount = parse_quantity(text)
    assert parse_quantity(canonicalize(text)) == amount


@settings(deadline=None)  # CI shares two cores with other suites
@given(st.integers(min_value=1, max_value=2**32), st.sampled_from([1, 1024, 1024**2, 1024**3]))
def test_binary_canonical_uses_the_largest_suffix(n: int, unit: int) -> None:
    text = format_quantity(n * unit, BSI)
    if n * unit >= 1024:
        assert text[-2:] in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei") or int(text) % 1024 != 0
    assert parse_quantity(text) == n * unit


@settings(deadline=None)  # CI shares two cores with other suites
@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=0, max_value=9))
def test_decimal_strings_parse_exactly(whole: int, frac_digits: int) -> None:
    text = f"{whole}.{str(whole)[:frac_digits] or '0'}"
    expected = Fraction(text)
    assert parse_quantity(text) == expected
    assert milli_value(text) == -((-expected * 1000).__floor__())


_SUFFIX_VALUE = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


@settings(deadline=None)  # CI shares two cores with other suites
@given(
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", max_size=12),
    st.one_of(st.none(), st.text("0123456789", max_size=12)),
    st.one_of(st.sampled_from(sorted(_SUFFIX_VALUE)), st.integers(-30, 30).map(lambda e: f"e{e}")),
)
def test_parse_matches_a_reference_model(sign: str, whole: str, frac: str | None, suffix: str) -> None:
    """Exact decimal value times the suffix, rounded up (away from zero) to a nano; binary capped."""
    text = sign + whole + ("" if frac is None else "." + frac) + suffix
    if not text:
        with pytest.raises(QuantityError):
            parse_quantity(text)
        return
    mantissa = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    multiplier = _SUFFIX_VALUE[suffix] if suffix in _SUFFIX_VALUE else Fraction(10) ** int(suffix[1:])
    exact = mantissa * multiplier
    nanos = -((-exact * 10**9).__floor__())  # ceil of the magnitude
    if suffix.endswith("i"):
        nanos = min(nanos, MAX * 10**9)
    expected = Fraction(nanos, 10**9) * (-1 if sign == "-" else 1)
    assert parse_quantity(text) == expected


def test_a_parsed_quantity_is_the_same_whether_or_not_it_was_parsed_before() -> None:
    # parse_quantity caches per string; the cached value must be the exact one, every time.
    for text in ("100m", "500Mi", "1.5Gi", "0.1", "-2k", "1e3"):
        first, again = parse_quantity(text), parse_quantity(text)
        assert first == again == Fraction(nano_value(text), 10**9)
    with pytest.raises(QuantityError):
        parse_quantity("1.5.5")
    with pytest.raises(QuantityError):  # an error is not cached as a value either
        parse_quantity("1.5.5")
