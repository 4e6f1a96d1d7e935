"""API errors: one exception type carrying the gRPC status code and a Kubernetes-shaped message.

The messages follow `k8s.io/apimachinery/pkg/api/errors` so an engineer reading a failure sees what
kube-apiserver would have said (`pods "web" not found`, `Operation cannot be fulfilled on ...`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import grpc

from kse import apierrors
from kse.apierrors import StatusReason
from kse.objects.kinds import Kind


class APIError(Exception):
    """An error for the client. `code` is the gRPC status; `str(e)` is the message sent.

    Each subclass names its row of `kse.apierrors` (`class NotFound(APIError, status=...)`), which
    gives its gRPC `code` here and its HTTP status for the Kubernetes door."""

    status: ClassVar[StatusReason] = apierrors.INTERNAL_ERROR
    code: grpc.StatusCode = apierrors.INTERNAL_ERROR.grpc_code

    def __init_subclass__(cls, status: StatusReason | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if status is not None:
            cls.status = status
            cls.code = status.grpc_code

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def http_status(self) -> int:
        """The HTTP status of this error's gRPC code (500 for a code the table does not know)."""
        row = apierrors.by_grpc_code(self.code)
        return row.http_status if row is not None else apierrors.INTERNAL_ERROR.http_status

    @property
    def message(self) -> str:
        return str(self.args[0])


class NotFound(APIError, status=apierrors.NOT_FOUND):
    """The object does not exist (`pods "web" not found`)."""


class AlreadyExists(APIError, status=apierrors.ALREADY_EXISTS):
    """A create of a name that is taken."""


class Conflict(APIError, status=apierrors.CONFLICT):
    """A stale resourceVersion or uid precondition, or a pod that is already bound."""


class Invalid(APIError, status=apierrors.INVALID):
    """A request or object that fails validation; the message names every bad field.
    `field_errors` holds the rendered field errors (`spec.containers[0].image: Required value`) when
    the message was built from them (`invalid`), so the HTTP front door can list them as
    metav1.Status `details.causes`; `kind` and `name` name the object then."""

    def __init__(
        self,
        message: str,
        code: grpc.StatusCode | None = None,
        *,
        field_errors: tuple[str, ...] = (),
        kind: Kind | None = None,
        name: str = "",
    ) -> None:
        super().__init__(message, code)
        self.field_errors = field_errors
        self.kind = kind
        self.name = name


class Forbidden(APIError, status=apierrors.FORBIDDEN):
    """The caller's identity may not do this verb on this resource."""


class Unauthenticated(APIError, status=apierrors.UNAUTHORIZED):
    """No identity could be read from the caller's certificate."""


class Gone(APIError, status=apierrors.EXPIRED):
    """The requested revision is no longer available (Kubernetes' 410 Gone / "Expired")."""


class Unavailable(APIError, status=apierrors.SERVICE_UNAVAILABLE):
    """The server cannot answer now (etcd unreachable, shutting down)."""


class TooManyRequests(APIError, status=apierrors.TOO_MANY_REQUESTS):
    """NewTooManyRequests: the request may succeed later (an eviction the disruption budget does
    not allow now). `causes` are (type, message) pairs, as metav1.StatusCause; `retry_after` the
    seconds a client should wait (0: not said)."""

    def __init__(
        self, message: str, *, causes: tuple[tuple[str, str], ...] = (), retry_after: int = 0
    ) -> None:
        super().__init__(message)
        self.causes = causes
        self.retry_after = retry_after


class FencedOff(APIError, status=apierrors.FENCED):
    """A write from a leader whose fencing token no longer matches the Lease."""


def qualified_kind(kind: Kind) -> str:
    """`Pod`, `Lease.coordination.k8s.io`: how Kubernetes names a kind in Invalid errors."""
    return f"{kind.kind}.{kind.group}" if kind.group else kind.kind


def qualified_resource(kind: Kind, subresource: str = "") -> str:
    """`pods`, `leases.coordination.k8s.io`: how Kubernetes names a resource in most errors."""
    base = f"{kind.resource}.{kind.group}" if kind.group else kind.resource
    return f"{base}/{subresource}" if subresource else base


def not_found(kind: Kind, name: str) -> NotFound:
    return NotFound(f'{qualified_resource(kind)} "{name}" not found')


def already_exists(kind: Kind, name: str) -> AlreadyExists:
    return AlreadyExists(f'{qualified_resource(kind)} "{name}" already exists')


def conflict(kind: Kind, name: str, reason: str) -> Conflict:
    return Conflict(f'Operation cannot be fulfilled on {qualified_resource(kind)} "{name}": {reason}')


MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


def too_old(requested: int, oldest: int) -> Gone:
    return Gone(f"too old resource version: {requested} ({oldest})")


def invalid(kind: Kind, name: str, errors: list[str]) -> Invalid:
    """`Pod "web" is invalid: spec.containers[0].image: Required value` (several: `[a, b]`)."""
    body = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return Invalid(
        f'{qualified_kind(kind)} "{name}" is invalid: {body}',
        field_errors=tuple(errors),
        kind=kind,
        name=name,
    )
