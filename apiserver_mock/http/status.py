"""Errors as metav1.Status, with kube-apiserver's HTTP codes, reasons and details.

The mapping is the one table of `kse.apierrors` (reason, gRPC code, HTTP status), from which the API
server's exception classes (`apiserver_mock.errors`) take their gRPC codes too. Shapes follow
`k8s.io/apimachinery/pkg/api/errors/errors.go` (NewNotFound, NewConflict, NewInvalid, ...):
`details` names the resource and object; an Invalid error lists one `cause` per field error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import grpc

from apiserver_mock.errors import APIError, Invalid
from apiserver_mock.errors import TooManyRequests as BudgetTooManyRequests
from apiserver_mock.service import error_status
from kse import apierrors
from kse.objects.kinds import Kind

log = logging.getLogger(__name__)

# field.ErrorType strings (as FieldErrors renders them) -> metav1.CauseType.
_CAUSE_TYPES: tuple[tuple[str, str], ...] = (
    ("Required value", "FieldValueRequired"),
    ("Forbidden", "FieldValueForbidden"),
    ("Invalid value", "FieldValueInvalid"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Not found", "FieldValueNotFound"),
    ("Internal error", "InternalError"),
)
TOO_LARGE_RV = "Too large resource version"


class HTTPError(APIError):
    """An error only the HTTP door has (no gRPC counterpart): it carries its code and reason."""

    http_code = 500
    reason = "InternalError"
    retry_after: int | None = None


class UnsupportedMediaType(HTTPError):
    http_code, reason = 415, "UnsupportedMediaType"


class EntityTooLarge(HTTPError):
    http_code, reason = 413, "RequestEntityTooLarge"


class MethodNotAllowed(HTTPError):
    http_code, reason = 405, "MethodNotAllowed"


class TooManyRequests(HTTPError):
    http_code, reason = 429, "TooManyRequests"
    retry_after = 1


@dataclass(frozen=True)
class Subject:
    """What the request was about, for `details` (empty where unknown)."""

    kind: Kind | None = None
    name: str = ""
    subresource: str = ""


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def success_body(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    body["code"] = code
    return body


def cause_of(rendered: str) -> dict[str, str]:
    """`spec.containers[0].image: Required value` -> a metav1.StatusCause."""
    path, sep, body = rendered.partition(": ")
    if not sep:
        return {"reason": "FieldValueInvalid", "message": rendered, "field": ""}
    for prefix, reason in _CAUSE_TYPES:
        if body.startswith(prefix):
            return {"reason": reason, "message": body, "field": path}
    return {"reason": "FieldValueInvalid", "message": body, "field": path}


def _details(subject: Subject) -> dict[str, Any]:
    kind = subject.kind
    if kind is None:
        return {}
    out: dict[str, Any] = {}
    if subject.name:
        out["name"] = subject.name
    if kind.group:
        out["group"] = kind.group
    out["kind"] = f"{kind.resource}/{subject.subresource}" if subject.subresource else kind.resource
    return out


def http_error(
    e: BaseException, subject: Subject = Subject(), what: str = "HTTP"
) -> tuple[int, dict[str, Any]]:
    """The HTTP code and metav1.Status body for an exception raised while serving a request."""
    if isinstance(e, HTTPError):
        extra = {"retryAfterSeconds": e.retry_after} if e.retry_after else None
        return e.http_code, status_body(e.http_code, e.reason, e.message, extra)
    grpc_code, message = error_status(e, what)
    row = apierrors.by_grpc_code(grpc_code) or apierrors.INTERNAL_ERROR
    if row is apierrors.INVALID:
        row = apierrors.BAD_REQUEST  # 422 Invalid only when the error names its fields (below)
    code, reason = row.http_status, row.http_reason
    details = _details(subject)
    if isinstance(e, Invalid) and e.field_errors:
        code, reason = 422, "Invalid"
        details = {"name": e.name or subject.name}
        kind = e.kind or subject.kind
        if kind is not None:
            if kind.group:
                details["group"] = kind.group
            details["kind"] = kind.kind
        details["causes"] = [cause_of(f) for f in e.field_errors]
    elif isinstance(e, BudgetTooManyRequests):
        # NewTooManyRequests + the eviction's DisruptionBudget cause (details has no name/kind).
        details = {"causes": [{"reason": t, "message": m} for t, m in e.causes]} if e.causes else {}
        if e.retry_after:
            details["retryAfterSeconds"] = e.retry_after
    elif grpc_code == grpc.StatusCode.UNAVAILABLE and message.startswith(TOO_LARGE_RV):
        # storage.NewTooLargeResourceVersionError: a 504 Timeout that clients retry after 1 s.
        code, reason = 504, "Timeout"
        details = {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": TOO_LARGE_RV}],
            "retryAfterSeconds": 1,
        }
    elif not isinstance(e, APIError) and code == 500:
        details = {}
    if code == 404 and subject.kind is not None and not subject.name:
        details = {}
    return code, status_body(code, reason, message, details)
