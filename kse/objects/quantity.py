"""Kubernetes resource quantities ("500m", "2Gi", "1e3"), parsed exactly.

Quantities stay strings on the wire and in storage (DESIGN.md); this module is the one place that
reads them. Semantics follow upstream `k8s.io/apimachinery/pkg/api/resource/quantity.go`
(`ParseQuantity`, `MilliValue`, `Value`, `CanonicalizeBytes`) and `suffix.go`:

* grammar: ``<sign>?<digits>[.<digits>]<suffix>`` where the suffix is a binary SI one
  (Ki Mi Gi Ti Pi Ei), a decimal SI one (n u m "" k M G T P E) or a decimal exponent (e3, E-3);
  "1.", ".5", "+1", "-0.5" are accepted, surrounding whitespace is not;
* precision: a parsed value is rounded *up* (away from zero) to a whole nano (1e-9), so every
  quantity is an exact multiple of 1e-9 ("0.1n" is 1n);
* binary-SI values are capped at 2^63-1 in magnitude (upstream caps only that format);
* `milli_value` / `value` round up, away from zero, as `Quantity.ScaledValue` does.

Values are returned as `fractions.Fraction` (exact); the integer helpers work on the nano-integer
form internally, which is what the scheduler's hot path needs. Parsing of strings is memoised: the
scheduler reads the same few strings ("100m", "1Gi") millions of times.
"""

from __future__ import annotations

import enum
import math
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "QUANTITY_REGEX",
    "Format",
    "QuantityError",
    "Quantityish",
    "canonicalize",
    "format_quantity",
    "milli_value",
    "nano_value",
    "parse_quantity",
    "parse_quantity_format",
    "value",
]

# The expression upstream quotes in its error message (splitREString in quantity.go). It is
# deliberately loose; the scanner and the suffix table do the real checking.
QUANTITY_REGEX = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

_ERR_FORMAT = f"quantities must match the regular expression '{QUANTITY_REGEX}'"
_ERR_NUMERIC = "unable to parse numeric part of quantity"
_ERR_SUFFIX = "unable to parse quantity's suffix"

_NANO = 10**9
# 2^63-1: the cap upstream applies to binary-SI amounts (maxAllowed in quantity.go).
_MAX_ALLOWED = 2**63 - 1
# Guard against "1e999999999": upstream keeps such a value symbolic in an inf.Dec; we materialise
# integers, so refuse values with more than this many decimal digits instead of hanging.
_MAX_DIGITS = 4000


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message is upstream's, plus the input."""

    def __init__(self, text: object, reason: str = _ERR_FORMAT) -> None:
        super().__init__(f"{reason} (got {text!r})")
        self.text = text
        self.reason = reason


class Format(enum.StrEnum):
    """How a quantity was written, which decides how it is printed back (upstream's Format)."""

    DECIMAL_SI = "DecimalSI"  # 12M, 500m
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6


Quantityish = str | int | float | Fraction

# suffix -> (base, exponent, format); suffix.go's tables.
_SUFFIXES: dict[str, tuple[int, int, Format]] = {
    "": (10, 0, Format.DECIMAL_SI),
    "n": (10, -9, Format.DECIMAL_SI),
    "u": (10, -6, Format.DECIMAL_SI),
    "m": (10, -3, Format.DECIMAL_SI),
    "k": (10, 3, Format.DECIMAL_SI),
    "M": (10, 6, Format.DECIMAL_SI),
    "G": (10, 9, Format.DECIMAL_SI),
    "T": (10, 12, Format.DECIMAL_SI),
    "P": (10, 15, Format.DECIMAL_SI),
    "E": (10, 18, Format.DECIMAL_SI),
    "Ki": (2, 10, Format.BINARY_SI),
    "Mi": (2, 20, Format.BINARY_SI),
    "Gi": (2, 30, Format.BINARY_SI),
    "Ti": (2, 40, Format.BINARY_SI),
    "Pi": (2, 50, Format.BINARY_SI),
    "Ei": (2, 60, Format.BINARY_SI),
}
_DECIMAL_SUFFIX_BY_EXPONENT = {e: s for s, (b, e, _) in _SUFFIXES.items() if b == 10}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")


def _scan(text: str) -> tuple[bool, str, str, str]:
    """Split into (negative, integer digits, fraction digits, suffix), as parseQuantityString.

    Leading zeros of the integer part are dropped; an empty integer part reads as "0" (so ".5",
    "+" and "-" scan; the last two are zero, exactly as upstream).
    """
    end = len(text)
    pos = 0
    negative = False
    if pos < end and text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(text)
    return negative, num, denom, text[suffix_start:]


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, Format]:
    found = _SUFFIXES.get(suffix)
    if found is not None:
        return found
    if len(suffix) > 1 and suffix[0] in "eE":
        body = suffix[1:]
        sign_free = body[1:] if body[0] in "+-" else body
        if sign_free and sign_free.isdigit() and sign_free.isascii():
            exponent = int(body)
            if abs(exponent) <= 2**31 - 1:  # upstream stores it in an int32
                return 10, exponent, Format.DECIMAL_EXPONENT
    raise QuantityError(text, _ERR_SUFFIX)


def _ceil_div(n: int, d: int) -> int:
    """Ceiling of n/d for n >= 0, d > 0."""
    return -(-n // d)


@lru_cache(maxsize=65536)
def _parse_str(text: str) -> tuple[int, Format]:
    """(value in nanos, format) for a quantity string; the memoised core of every entry point."""
    if not text:
        raise QuantityError(text)
    if text == "0":
        return 0, Format.DECIMAL_SI
    negative, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret_suffix(text, suffix)
    digits = num + denom
    if len(digits) > _MAX_DIGITS:
        raise QuantityError(text, _ERR_NUMERIC)
    mantissa = int(digits)
    if base == 10:
        scale = exponent - len(denom) + 9  # value in nanos = mantissa * 10**scale
        if scale >= 0:
            if len(digits) + scale > _MAX_DIGITS:
                raise QuantityError(text, "quantity is too large")
            nanos = mantissa * 10**scale
        elif mantissa == 0:
            nanos = 0
        elif -scale > len(digits) + 1:
            nanos = 1  # non-zero but below one nano: rounds up to 1n (quantity.go, inf.RoundUp)
        else:
            nanos = _ceil_div(mantissa, 10**-scale)
    else:
        nanos = _ceil_div(mantissa * (1 << exponent) * _NANO, 10 ** len(denom))
        if nanos > _MAX_ALLOWED * _NANO:
            nanos = _MAX_ALLOWED * _NANO
        if 0 < nanos < _NANO:
            fmt = Format.DECIMAL_SI  # 0 < x < 1 cannot be printed in binary SI
    return (-nanos if negative else nanos), fmt


def _float_text(number: float) -> str:
    """The JSON text Go writes for a float64 (encoding/json), which Quantity then parses."""
    if math.isnan(number) or math.isinf(number):
        raise QuantityError(number, "quantities must be finite numbers")
    return repr(number)  # shortest round-trip digits, as Go's 'f'/'e' -1 formatting


def _nanos(q: Quantityish) -> int:
    if isinstance(q, str):
        return _parse_str(q)[0]
    if isinstance(q, bool):
        raise QuantityError(q, "a boolean is not a quantity")
    if isinstance(q, int):
        return q * _NANO
    if isinstance(q, float):
        return _parse_str(_float_text(q))[0]
    if isinstance(q, Fraction):
        scaled = q * _NANO
        whole = _ceil_div(abs(scaled.numerator), scaled.denominator)
        return -whole if scaled < 0 else whole
    raise QuantityError(q, f"cannot read a quantity from {type(q).__name__}")


def parse_quantity(text: Quantityish) -> Fraction:
    """The exact value of a quantity (a string, or an unquoted YAML int/float from a manifest).

    Raises QuantityError for anything upstream's ParseQuantity rejects. Numbers are read as
    Kubernetes reads a JSON number in a quantity field: 0.5 is exactly 1/2, 0.1 exactly 1/10.
    """
    if isinstance(text, Fraction):
        return text
    if isinstance(text, str):
        return _fraction_of_str(text)
    return Fraction(_nanos(text), _NANO)


@lru_cache(maxsize=65536)
def _fraction_of_str(text: str) -> Fraction:
    # Fractions are immutable, and a cluster's quantities are a few strings ("100m", "500Mi")
    # written over and over: building the Fraction (a gcd) was ~2 % of the API server's CPU.
    return Fraction(_nanos(text), _NANO)


def parse_quantity_format(text: Quantityish) -> tuple[Fraction, Format]:
    """The value and the format it was written in (binary SI, decimal SI, exponent)."""
    if isinstance(text, str):
        nanos, fmt = _parse_str(text)
        return Fraction(nanos, _NANO), fmt
    if isinstance(text, float) and not isinstance(text, bool):
        nanos, fmt = _parse_str(_float_text(text))
        return Fraction(nanos, _NANO), fmt
    return Fraction(_nanos(text), _NANO), Format.DECIMAL_SI


def _round_away(nanos: int, unit: int) -> int:
    whole = _ceil_div(abs(nanos), unit)
    return -whole if nanos < 0 else whole


@lru_cache(maxsize=65536)
def _milli_of_str(text: str) -> int:
    return _round_away(_parse_str(text)[0], 10**6)


@lru_cache(maxsize=65536)
def _value_of_str(text: str) -> int:
    return _round_away(_parse_str(text)[0], _NANO)


def nano_value(q: Quantityish) -> int:
    """The quantity in nanos (exact for every parsed quantity): the unit for exact sums."""
    return _nanos(q)


def milli_value(q: Quantityish) -> int:
    """ceil(q * 1000), rounding away from zero, as Quantity.MilliValue (cpu in millicores)."""
    if isinstance(q, str):
        return _milli_of_str(q)
    return _round_away(_nanos(q), 10**6)


def value(q: Quantityish) -> int:
    """ceil(q), rounding away from zero, as Quantity.Value (memory in bytes, counts)."""
    if isinstance(q, str):
        return _value_of_str(q)
    return _round_away(_nanos(q), _NANO)


def format_quantity(q: Quantityish, fmt: Format | str = Format.DECIMAL_SI) -> str:
    """The canonical string of a value in a format, as upstream's CanonicalizeBytes.

    Binary SI falls back to decimal SI for |q| < 1024 and for non-integers ("1.5" -> "1500m");
    decimal forms use the largest exponent that is a multiple of 3 and keeps the mantissa whole.
    One deliberate difference: upstream prints decimal-SI values of 1e21 and above without any
    suffix (its suffix table stops at E, so "1000E" would print as "1"); we keep the magnitude
    by staying on "E" ("1000E").
    """
    fmt = Format(fmt)
    nanos = _nanos(q)
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt is Format.BINARY_SI:
        if magnitude < 1024 * _NANO or magnitude % _NANO:
            fmt = Format.DECIMAL_SI
        else:
            whole = magnitude // _NANO
            power = 0
            while power < len(_BINARY_SUFFIXES) - 1 and whole % 1024 == 0:
                whole //= 1024
                power += 1
            return f"{sign}{whole}{_BINARY_SUFFIXES[power]}"
    mantissa, exponent = magnitude, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX_BY_EXPONENT[exponent]}"


def canonicalize(text: Quantityish) -> str:
    """The canonical form Kubernetes prints for a quantity: "1.5Gi" -> "1536Mi", "0.5" -> "500m"."""
    parsed, fmt = parse_quantity_format(text)
    return format_quantity(parsed, fmt)
