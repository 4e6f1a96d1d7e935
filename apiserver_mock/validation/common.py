"""Validators of shared value types: quantities, resource lists, timestamps, enums of conditions."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from apiserver_mock.validation.field import FieldErrors
from kse.objects import names
from kse.objects.quantity import QuantityError, parse_quantity
from kse.objects.timeutil import parse_time

CONDITION_STATUSES = ("True", "False", "Unknown")


def quantity(errs: FieldErrors, path: str, text: str) -> Fraction | None:
    """Parse a quantity, recording an error (and returning None) when malformed or negative."""
    try:
        q = parse_quantity(text)
    except QuantityError as e:
        errs.invalid(path, text, e.reason)
        return None
    if q < 0:
        errs.invalid(path, text, "must be greater than or equal to 0")
        return None
    return q


def resource_list(errs: FieldErrors, path: str, resources: Mapping[str, str]) -> dict[str, Fraction]:
    """Validate a ResourceList (names and quantities); return the parsed quantities that are valid."""
    parsed: dict[str, Fraction] = {}
    for name, text in resources.items():
        for msg in names.is_qualified_name(name):
            errs.invalid(f"{path}[{name}]", name, msg)
        q = quantity(errs, f"{path}[{name}]", text)
        if q is not None:
            parsed[name] = q
    return parsed


def requirements(errs: FieldErrors, path: str, req: object) -> None:
    """ResourceRequirements: valid quantities, and every request <= its limit."""
    limits = resource_list(errs, f"{path}.limits", req.limits)  # type: ignore[attr-defined]
    requests = resource_list(errs, f"{path}.requests", req.requests)  # type: ignore[attr-defined]
    for name, q in requests.items():
        limit = limits.get(name)
        if limit is not None and q > limit:
            errs.invalid(
                f"{path}.requests[{name}]",
                req.requests[name],  # type: ignore[attr-defined]
                f"must be less than or equal to {name} limit of {req.limits[name]}",  # type: ignore[attr-defined]
            )


def timestamp(errs: FieldErrors, path: str, text: str) -> None:
    """An RFC 3339 time (Kubernetes Time / MicroTime JSON); empty means unset."""
    if not text:
        return
    try:
        parse_time(text)
    except ValueError:
        errs.invalid(path, text, "must be an RFC 3339 timestamp (e.g. 2006-01-02T15:04:05Z)")
