"""API errors: one exception type carrying the gRPC status code and a Kubernetes-shaped message.

The messages follow `k8s.io/apimachinery/pkg/api/errors` so an engineer reading a failure sees what
kube-apiserver would have said (`pods "web" not found`, `Operation cannot be fulfilled on ...`).
"""

from __future__ import annotations

import grpc

from kse.objects.kinds import Kind


class APIError(Exception):
    """An error for the client. `code` is the gRPC status; `str(e)` is the message sent."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0])


class NotFound(APIError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(APIError):
    code = grpc.StatusCode.ALREADY_EXISTS


class Conflict(APIError):
    code = grpc.StatusCode.ABORTED


class Invalid(APIError):
    """A request or object that fails validation. `field_errors` holds the rendered field errors
    (`spec.containers[0].image: Required value`) when the message was built from them (`invalid`),
    so the HTTP front door can list them as metav1.Status `details.causes`; `kind` and `name` name
    the object then."""

    code = grpc.StatusCode.INVALID_ARGUMENT

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


class Forbidden(APIError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(APIError):
    code = grpc.StatusCode.UNAUTHENTICATED


class Gone(APIError):
    """The requested revision is no longer available (Kubernetes' 410 Gone / "Expired")."""

    code = grpc.StatusCode.OUT_OF_RANGE


class Unavailable(APIError):
    code = grpc.StatusCode.UNAVAILABLE


class FencedOff(APIError):
    """A write from a leader whose fencing token no longer matches the Lease."""

    code = grpc.StatusCode.FAILED_PRECONDITION


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
