"""The pieces every Table column is made of: the Column record, kubectl's age format and JSON
path reads (shared by tables.py and tables_apps.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kse.objects.timeutil import to_epoch

Obj = dict[str, Any]
NONE = "<none>"


@dataclass(frozen=True)
class Column:
    name: str
    cell: Callable[[Obj], Any]
    type: str = "string"
    format: str = ""
    priority: int = 0
    description: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def human_duration(seconds: float) -> str:
    """`k8s.io/apimachinery/pkg/util/duration.HumanDuration`: 5s, 3m20s, 5h, 3d4h, 2y."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = s // 3600
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 192:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        y = h // (24 * 365)
        d = (h // 24) % 365
        return f"{y}y{d}d" if d else f"{y}y"
    return f"{h // (24 * 365)}y"


def since(ts: str | None) -> str:
    """translateTimestampSince: the age of an RFC 3339 time, or <unknown>."""
    if not ts:
        return "<unknown>"
    try:
        return human_duration(time.time() - to_epoch(ts))
    except ValueError:
        return "<unknown>"


def get(o: Obj, *path: str) -> Any:
    for p in path:
        if not isinstance(o, dict):
            return None
        o = o.get(p)  # type: ignore[assignment]
    return o


def name(o: Obj) -> str:
    return str(get(o, "metadata", "name") or "")


def age(o: Obj) -> str:
    return since(get(o, "metadata", "creationTimestamp"))


def or_none(value: Any) -> str:
    return str(value) if value else NONE


STD = "Standard object's metadata."
