"""IntOrString fields (maxSurge, maxUnavailable, minAvailable, targetPort), held as
`google.protobuf.Value` so their JSON is exactly Kubernetes' (a number or a string).

`scaled_value` is apimachinery's `intstr.GetScaledValueFromIntOrPercent`: deployments, daemon sets
and disruption budgets all resolve "25%" against a total through it, rounding as each caller asks
(upstream: k8s.io/apimachinery/pkg/util/intstr/intstr.go).
"""

from __future__ import annotations

import math

from google.protobuf import struct_pb2


class IntOrStringError(ValueError):
    """A value that is neither an integer nor a percentage such as "25%"."""


def set_int_or_string(target: struct_pb2.Value, value: int | str) -> None:
    """Write `value` into a Value field: a number for an int, a string otherwise."""
    if isinstance(value, int):
        target.number_value = value
    else:
        target.string_value = value


def int_or_string(value: struct_pb2.Value) -> int | str | None:
    """The field as Kubernetes sees it: an int, a string, or None when unset."""
    which = value.WhichOneof("kind")
    if which == "number_value":
        n = value.number_value
        if n != int(n):
            raise IntOrStringError(f"{n} is not an integer")
        return int(n)
    if which == "string_value":
        return value.string_value
    if which is None or which == "null_value":
        return None
    raise IntOrStringError(f"must be an integer or a percentage, not a {which.removesuffix('_value')}")


def is_percent(value: int | str) -> bool:
    return isinstance(value, str) and value.endswith("%")


def parse_percent(text: str) -> int:
    """The integer in "25%"; IntOrStringError for anything else."""
    if not text.endswith("%") or not text[:-1].isdigit():
        raise IntOrStringError(f'a string value must be a percentage such as "25%", not "{text}"')
    return int(text[:-1])


def scaled_value(value: int | str, total: int, *, round_up: bool) -> int:
    """An int as it is; a percentage of `total`, rounded up or down (GetScaledValueFromIntOrPercent)."""
    if isinstance(value, int):
        return value
    percent = parse_percent(value)
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)
