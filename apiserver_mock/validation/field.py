"""Field errors in Kubernetes' shape (`k8s.io/apimachinery/pkg/util/validation/field`).

Paths are plain strings built by the validators (`spec.containers[0].image`, `requests[cpu]`); an
error renders as `<path>: <Type>[: <value>][: <detail>]`, exactly as `field.Error.Error()` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable


def render_value(value: object) -> str:
    """Go's rendering of a bad value: strings quoted (%q), numbers and bools plain."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


class FieldErrors:
    """An ordered list of rendered field errors; validators append, the caller raises if non-empty."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterable[str]:  # type: ignore[override]
        return iter(self.items)

    def _add(self, path: str, body: str, detail: str = "") -> None:
        self.items.append(f"{path}: {body}: {detail}" if detail else f"{path}: {body}")

    def required(self, path: str, detail: str = "") -> None:
        self._add(path, "Required value", detail)

    def forbidden(self, path: str, detail: str) -> None:
        self._add(path, "Forbidden", detail)

    def invalid(self, path: str, value: object, detail: str) -> None:
        self._add(path, f"Invalid value: {render_value(value)}", detail)

    def unsupported(self, path: str, value: object, supported: Iterable[str]) -> None:
        quoted = ", ".join(json.dumps(s) for s in supported)
        self._add(path, f"Unsupported value: {render_value(value)}", f"supported values: {quoted}")

    def duplicate(self, path: str, value: object) -> None:
        self._add(path, f"Duplicate value: {render_value(value)}")

    def too_long(self, path: str, limit: int) -> None:
        self._add(path, "Too long", f"may not be more than {limit} bytes")

    def not_found(self, path: str, value: object) -> None:
        self._add(path, f"Not found: {render_value(value)}")

    def add_raw(self, message: str) -> None:
        self.items.append(message)

    def extend(self, messages: Iterable[str]) -> None:
        self.items.extend(messages)

    def enum(self, path: str, value: str, supported: tuple[str, ...], *, allow_empty: bool = True) -> None:
        """Check a Kubernetes string enum: empty (when allowed) or one of `supported`."""
        if value in supported or (allow_empty and not value):
            return
        if not value:
            self.required(path)
        else:
            self.unsupported(path, value, supported)
