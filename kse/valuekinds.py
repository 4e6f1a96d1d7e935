"""How a decoded YAML/JSON value is named in a config error ("want a string, got a number"), the
one wording of the scheduler's KubeSchedulerConfiguration loader and the scheduler_perf reader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def value_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__
