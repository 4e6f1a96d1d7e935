"""Decoding scheduler_perf's config the way upstream's decoder does.

Upstream reads the config with sigs.k8s.io/yaml's UnmarshalStrict into Go structs whose fields
mostly carry no json tags: YAML becomes JSON, then encoding/json matches each key to a field name
*case-insensitively* (an exact match preferred), and strict mode refuses a key that matches no
field ("unknown field"). So `countParam`, `CountParam` and `countparam` are one field, and a typo
is an error. `fields(raw, spec, where)` does that: `spec` maps the Go field name to a converter,
and the result is keyed by the Go name. Every error names where it is (test case, workload, op).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kse.durations import parse_go_duration
from kse.valuekinds import value_kind

Converter = Callable[[Any, str], Any]


class ConfigError(ValueError):
    """A scheduler_perf config (or template) that cannot be used; the message says where and why."""


def fields(raw: Any, spec: Mapping[str, Converter], where: str) -> dict[str, Any]:
    """The keys of mapping `raw` matched to the Go field names of `spec`, converted."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want a mapping, got {value_kind(raw)}")
    by_lower: dict[str, str] = {}
    for go_name in spec:
        by_lower.setdefault(go_name.lower(), go_name)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise ConfigError(f"{where}: key {key!r} is not a string")
        name: str | None = key if key in spec else by_lower.get(key.lower())
        if name is None:
            raise ConfigError(f'{where}: unknown field "{key}" (known: {", ".join(spec)})')
        out[name] = spec[name](value, f"{where}.{key}")
    return out


def to_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: want a string, got {value_kind(value)}")
    return value


def to_int(value: Any, where: str) -> int:
    # encoding/json into an int: a number without a fraction
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: want an integer, got {value_kind(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise ConfigError(f"{where}: want an integer, got {value}")
    return int(value)


def to_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: want a number, got {value_kind(value)}")
    return float(value)


def to_bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: want true or false, got {value_kind(value)}")
    return value


def to_duration(value: Any, where: str) -> float:
    """metav1.Duration: a Go duration string ("10s", "1m30s"), in seconds."""
    if not isinstance(value, str):
        raise ConfigError(f'{where}: want a duration such as "10s", got {value_kind(value)}')
    try:
        return parse_go_duration(value)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None


def to_str_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: want a list of strings, got {value_kind(value)}")
    return [to_str(v, f"{where}[{i}]") for i, v in enumerate(value)]


def to_str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: want a mapping of strings, got {value_kind(value)}")
    return {to_str(k, f"{where} key"): to_str(v, f"{where}.{k}") for k, v in value.items()}


def to_bool_map(value: Any, where: str) -> dict[str, bool]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: want a mapping of names to true/false, got {value_kind(value)}")
    return {to_str(k, f"{where} key"): to_bool(v, f"{where}.{k}") for k, v in value.items()}


def to_any_map(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: want a mapping, got {value_kind(value)}")
    return {to_str(k, f"{where} key"): v for k, v in value.items()}


def optional(conv: Converter) -> Converter:
    """A Go pointer field: null stays None."""

    def f(value: Any, where: str) -> Any:
        return None if value is None else conv(value, where)

    return f
