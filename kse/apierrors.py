"""The one table of API error kinds: Kubernetes' status reason, the gRPC code, the HTTP status.

The API server raises errors of these kinds (`apiserver_mock.errors`) and the client turns the
codes it receives back into typed exceptions (`kse.client.errors`); both derive their classes from
this table, so the mapping is written once. The HTTP front door answers with the `http_status`
column in a `metav1.Status`, as kube-apiserver does (k8s.io/apimachinery/pkg/api/errors/errors.go:
NewNotFound -> 404, NewConflict -> 409, NewInvalid -> 422, NewResourceExpired -> 410, ...).

Two rows are kse's own: `Fenced` (a write from a leader that lost its Lease; Kubernetes has no
fencing: it answers 409 like every other failed precondition) and the gRPC CANCELLED code, which
the client reads as `ServiceUnavailable` (a call whose channel closed under it).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

__all__ = [
    "ALREADY_EXISTS",
    "BAD_REQUEST",
    "CONFLICT",
    "EXPIRED",
    "FENCED",
    "FORBIDDEN",
    "INTERNAL_ERROR",
    "INVALID",
    "NOT_FOUND",
    "REASONS",
    "SERVICE_UNAVAILABLE",
    "TIMEOUT",
    "TOO_MANY_REQUESTS",
    "UNAUTHORIZED",
    "StatusReason",
    "by_grpc_code",
    "by_reason",
]


@dataclass(frozen=True, slots=True)
class StatusReason:
    """One kind of API error: `reason` as metav1.StatusReason spells it (kubectl prints it:
    `Error from server (NotFound): ...`), the gRPC status kse's own door answers with, and the
    HTTP status of the Kubernetes door."""

    reason: str
    grpc_code: grpc.StatusCode
    http_status: int
    # The reason the HTTP door writes into metav1.Status, where it differs from `reason` (a reason
    # only kse has is spelled as the Kubernetes one whose handling fits it).
    http_reason_override: str = ""

    @property
    def http_reason(self) -> str:
        return self.http_reason_override or self.reason


# Each row, with the apimachinery constructor that makes the same error (api/errors/errors.go).
# NewNotFound: `pods "web" not found`.
NOT_FOUND = StatusReason("NotFound", grpc.StatusCode.NOT_FOUND, 404)
# NewAlreadyExists: a create of a name that is taken.
ALREADY_EXISTS = StatusReason("AlreadyExists", grpc.StatusCode.ALREADY_EXISTS, 409)
# NewConflict: a stale resourceVersion or uid precondition, or a pod that is already bound.
CONFLICT = StatusReason("Conflict", grpc.StatusCode.ABORTED, 409)
# NewInvalid: 422 Unprocessable Entity, every bad field listed.
INVALID = StatusReason("Invalid", grpc.StatusCode.INVALID_ARGUMENT, 422)
# NewBadRequest: a body that does not decode, a malformed selector or patch. Over gRPC it shares
# INVALID_ARGUMENT with Invalid; over HTTP, Invalid (422) is an error that names its fields.
BAD_REQUEST = StatusReason("BadRequest", grpc.StatusCode.INVALID_ARGUMENT, 400)
# NewForbidden: the authorizer said no.
FORBIDDEN = StatusReason("Forbidden", grpc.StatusCode.PERMISSION_DENIED, 403)
# NewUnauthorized: no identity (over gRPC with mTLS, the handshake usually fails first).
UNAUTHORIZED = StatusReason("Unauthorized", grpc.StatusCode.UNAUTHENTICATED, 401)
# NewResourceExpired: a watch or list from a revision older than the server keeps ("410 Gone").
EXPIRED = StatusReason("Expired", grpc.StatusCode.OUT_OF_RANGE, 410)
# kse's own: a write under a fence token for a Lease the writer no longer holds. Over HTTP it is a
# 409 Conflict ("the state changed under you"), as a failed precondition is in Kubernetes.
FENCED = StatusReason("Fenced", grpc.StatusCode.FAILED_PRECONDITION, 409, "Conflict")
# NewTooManyRequests: load shed, or a watcher that fell too far behind.
TOO_MANY_REQUESTS = StatusReason("TooManyRequests", grpc.StatusCode.RESOURCE_EXHAUSTED, 429)
# NewTimeoutError: the call's deadline passed.
TIMEOUT = StatusReason("Timeout", grpc.StatusCode.DEADLINE_EXCEEDED, 504)
# NewServiceUnavailable: the server cannot answer now.
SERVICE_UNAVAILABLE = StatusReason("ServiceUnavailable", grpc.StatusCode.UNAVAILABLE, 503)
# NewInternalError.
INTERNAL_ERROR = StatusReason("InternalError", grpc.StatusCode.INTERNAL, 500)

REASONS: tuple[StatusReason, ...] = (
    NOT_FOUND,
    ALREADY_EXISTS,
    CONFLICT,
    INVALID,
    FORBIDDEN,
    UNAUTHORIZED,
    EXPIRED,
    FENCED,
    TOO_MANY_REQUESTS,
    TIMEOUT,
    SERVICE_UNAVAILABLE,
    INTERNAL_ERROR,
)
_BY_REASON = {r.reason: r for r in (*REASONS, BAD_REQUEST)}
_BY_GRPC_CODE = {r.grpc_code: r for r in REASONS}
_BY_GRPC_CODE[grpc.StatusCode.CANCELLED] = SERVICE_UNAVAILABLE  # a call cut by the transport
assert len(_BY_REASON) - 1 == len(_BY_GRPC_CODE) - 1 == len(REASONS), "one row per reason and per code"


def by_reason(reason: str) -> StatusReason | None:
    """The row of a metav1.StatusReason ("NotFound"), or None."""
    return _BY_REASON.get(reason)


def by_grpc_code(code: grpc.StatusCode) -> StatusReason | None:
    """The row a gRPC status code answers for, or None (UNKNOWN, UNIMPLEMENTED, ...)."""
    return _BY_GRPC_CODE.get(code)
