"""Typed API errors: one class per gRPC status the API server uses (DESIGN.md, "API conventions").

Like client-go's `apierrors.IsNotFound(err)` and friends, but as exception classes: catch
`NotFoundError`, `ConflictError`, ... Every error keeps the gRPC code, the server's message (which
already names the object, as Kubernetes' does: `pods "x" not found`) and the revision from the
`x-kse-revision` trailing metadata when the server sent one. `reason` is the Kubernetes
`metav1.StatusReason` that kubectl prints: `Error from server (NotFound): pods "x" not found`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from kse import apierrors
from kse.apierrors import StatusReason

REVISION_METADATA_KEY = "x-kse-revision"
RETRY_AFTER_METADATA_KEY = "retry-after"


class ApiError(Exception):
    """An error answer from the API server (or from the transport, for `UnavailableError`).

    Each subclass names its row of `kse.apierrors` (`class NotFoundError(ApiError, status=...)`),
    which gives its `code` and `reason`; the base class is what an unknown code becomes."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    reason: str = apierrors.INTERNAL_ERROR.reason

    def __init_subclass__(cls, status: StatusReason | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if status is not None:
            cls.code = status.grpc_code
            cls.reason = status.reason

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None, revision: str = "") -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.revision = revision

    @property
    def code_name(self) -> str:
        """The gRPC code as its upper-case name ("NOT_FOUND"), as metrics label it."""
        return self.code.name

    def kubectl_message(self) -> str:
        """The line kubectl would print for this error."""
        return f"Error from server ({self.reason}): {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code.name})"


class NotFoundError(ApiError, status=apierrors.NOT_FOUND):
    """NOT_FOUND: the object does not exist."""


class AlreadyExistsError(ApiError, status=apierrors.ALREADY_EXISTS):
    """ALREADY_EXISTS: a create of a name that is taken."""


class ConflictError(ApiError, status=apierrors.CONFLICT):
    """ABORTED: a stale resourceVersion or uid precondition, or a pod that is already bound."""


class InvalidError(ApiError, status=apierrors.INVALID):
    """INVALID_ARGUMENT: the object failed validation; the message names the fields."""


class ForbiddenError(ApiError, status=apierrors.FORBIDDEN):
    """PERMISSION_DENIED: this identity may not do that (Kubernetes' RBAC message)."""


class UnauthorizedError(ApiError, status=apierrors.UNAUTHORIZED):
    """UNAUTHENTICATED: the server read no identity from this client's certificate."""


class GoneError(ApiError, status=apierrors.EXPIRED):
    """OUT_OF_RANGE: a watch or list from a revision older than the server keeps ("410 Gone")."""


class FencedError(ApiError, status=apierrors.FENCED):
    """FAILED_PRECONDITION: a write carrying a fence token for a lease this writer no longer holds."""


class TooManyRequestsError(ApiError, status=apierrors.TOO_MANY_REQUESTS):
    """RESOURCE_EXHAUSTED: the server shed the request, or closed a watcher that fell behind.

    `retry_after` > 0 (seconds, from the `retry-after` trailer) says the server's overload gate
    refused the request before running it, so any verb may be sent again after that long."""

    retry_after: float = 0.0


class DeadlineExceededError(ApiError, status=apierrors.TIMEOUT):
    """DEADLINE_EXCEEDED: the call's deadline passed before an answer came."""


class UnavailableError(ApiError, status=apierrors.SERVICE_UNAVAILABLE):
    """The server could not be reached, or the call's channel was closed under it (a swap)."""


class InternalError(ApiError, status=apierrors.INTERNAL_ERROR):
    """INTERNAL: the server failed on its side."""


_CLASSES: tuple[type[ApiError], ...] = (
    NotFoundError,
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    ForbiddenError,
    UnauthorizedError,
    GoneError,
    FencedError,
    TooManyRequestsError,
    DeadlineExceededError,
    UnavailableError,
    InternalError,
)
_BY_REASON: dict[str, type[ApiError]] = {cls.reason: cls for cls in _CLASSES}
# Every row of the table has its class; a code maps to the class of its row. A call cancelled by
# the transport (its channel closed, the server went away mid-call) is, to the caller, the same as
# an unreachable server: the table's CANCELLED entry; the instance keeps the CANCELLED code.
_BY_CODE: dict[grpc.StatusCode, type[ApiError]] = {
    code: _BY_REASON[row.reason]
    for code in grpc.StatusCode
    if (row := apierrors.by_grpc_code(code)) is not None
}


def revision_from_metadata(metadata: object) -> str:
    """The `x-kse-revision` value from (trailing) metadata, or ""."""
    if not metadata:
        return ""
    try:
        for key, value in metadata:  # type: ignore[attr-defined]
            if key == REVISION_METADATA_KEY:
                return value.decode() if isinstance(value, bytes) else str(value)
    except (TypeError, ValueError):
        return ""
    return ""


def retry_after_from_metadata(metadata: object) -> float:
    """The `retry-after` seconds a shed request's trailing metadata carries, or 0."""
    if not metadata:
        return 0.0
    try:
        for key, value in metadata:  # type: ignore[attr-defined]
            if key == RETRY_AFTER_METADATA_KEY:
                seconds = float(value.decode() if isinstance(value, bytes) else value)
                return seconds if 0 < seconds < 3600 else 0.0
    except (TypeError, ValueError):
        return 0.0
    return 0.0


def error_for_code(code: grpc.StatusCode, message: str, *, revision: str = "") -> ApiError:
    """The typed error for a gRPC status."""
    cls = _BY_CODE.get(code, ApiError)
    return cls(message, code=code, revision=revision)


def from_rpc_error(err: grpc.aio.AioRpcError) -> ApiError:
    """Translate a gRPC error into the typed error (the original is kept as `__cause__` by callers)."""
    message = err.details() or err.code().name
    try:
        trailing = err.trailing_metadata()
    except Exception:  # pragma: no cover - defensive: metadata access must never mask the error
        trailing = None
    error = error_for_code(err.code(), message, revision=revision_from_metadata(trailing))
    if isinstance(error, TooManyRequestsError):
        error.retry_after = retry_after_from_metadata(trailing)
    return error


def channel_closed_error() -> UnavailableError:
    """What a call sees when its channel was closed under it (a certificate-rotation swap)."""
    return UnavailableError("the client channel was closed during the call", code=grpc.StatusCode.CANCELLED)


def is_refused_stream(err: ApiError) -> bool:
    """True for an UNAVAILABLE that is the server's HTTP/2 REFUSED_STREAM (RST_STREAM code 7): the
    server took no part of the call (its per-connection stream limit was reached), so any verb may
    be sent again (RFC 9113 section 8.7)."""
    return err.code == grpc.StatusCode.UNAVAILABLE and "RST_STREAM with error code 7" in err.message


def is_channel_close(exc: BaseException) -> bool:
    """True when `exc` is grpc.aio's CancelledError from a closed channel, not a cancellation of us.

    `await channel.close()` surfaces inside in-flight calls as `asyncio.CancelledError`. Python 3.11
    lets us tell it apart from a real cancellation of the calling task: only the latter has a
    pending `cancel()` request on the task (`Task.cancelling() > 0`).
    """
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0
