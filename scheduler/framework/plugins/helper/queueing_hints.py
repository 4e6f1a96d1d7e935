"""What queueing hints share (upstream `pkg/scheduler/util` As)."""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")


def as_objects(cls: type[_T], old: object, new: object) -> tuple[_T | None, _T | None]:
    """Upstream util.As: the (old, new) objects of an event as `cls`; None stays None.
    Raises TypeError for anything else (a hint that raises is treated as Queue)."""
    for obj in (old, new):
        if obj is not None and not isinstance(obj, cls):
            raise TypeError(f"expected {cls.__name__}, got {type(obj).__name__}")
    return old, new  # type: ignore[return-value]
