"""kse.apierrors: one table of reason, gRPC code and HTTP status, that both error hierarchies use."""

from __future__ import annotations

import grpc
import pytest

from apiserver_mock import errors as server
from kse import apierrors
from kse.client import errors as client

# What each side raises or catches, and the table row between them (class names are contracts).
PAIRS = [
    (server.NotFound, client.NotFoundError, "NotFound", grpc.StatusCode.NOT_FOUND, 404),
    (server.AlreadyExists, client.AlreadyExistsError, "AlreadyExists", grpc.StatusCode.ALREADY_EXISTS, 409),
    (server.Conflict, client.ConflictError, "Conflict", grpc.StatusCode.ABORTED, 409),
    (server.Invalid, client.InvalidError, "Invalid", grpc.StatusCode.INVALID_ARGUMENT, 422),
    (server.Forbidden, client.ForbiddenError, "Forbidden", grpc.StatusCode.PERMISSION_DENIED, 403),
    (server.Unauthenticated, client.UnauthorizedError, "Unauthorized", grpc.StatusCode.UNAUTHENTICATED, 401),
    (server.Gone, client.GoneError, "Expired", grpc.StatusCode.OUT_OF_RANGE, 410),
    (server.Unavailable, client.UnavailableError, "ServiceUnavailable", grpc.StatusCode.UNAVAILABLE, 503),
    (server.FencedOff, client.FencedError, "Fenced", grpc.StatusCode.FAILED_PRECONDITION, 409),
    (server.APIError, client.InternalError, "InternalError", grpc.StatusCode.INTERNAL, 500),
]


@pytest.mark.parametrize(("server_cls", "client_cls", "reason", "code", "http"), PAIRS)
def test_server_and_client_classes_agree_through_the_table(
    server_cls: type[server.APIError],
    client_cls: type[client.ApiError],
    reason: str,
    code: grpc.StatusCode,
    http: int,
) -> None:
    raised = server_cls('pods "x" not found')
    assert raised.code == code and raised.http_status == http and raised.status.reason == reason
    caught = client.error_for_code(raised.code, raised.message, revision="7")
    assert type(caught) is client_cls
    assert caught.reason == reason and caught.code == code and caught.revision == "7"
    assert caught.kubectl_message() == f'Error from server ({reason}): pods "x" not found'


def test_client_only_rows() -> None:
    for code, cls, reason in [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, client.TooManyRequestsError, "TooManyRequests"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, client.DeadlineExceededError, "Timeout"),
        (grpc.StatusCode.CANCELLED, client.UnavailableError, "ServiceUnavailable"),
    ]:
        err = client.error_for_code(code, "m")
        assert type(err) is cls and err.reason == reason and err.code == code  # CANCELLED kept
    unknown = client.error_for_code(grpc.StatusCode.UNIMPLEMENTED, "m")
    assert type(unknown) is client.ApiError and unknown.reason == "InternalError"


def test_table_is_one_row_per_reason_and_code() -> None:
    assert len({r.reason for r in apierrors.REASONS}) == len(apierrors.REASONS)
    assert len({r.grpc_code for r in apierrors.REASONS}) == len(apierrors.REASONS)
    for row in apierrors.REASONS:
        assert apierrors.by_reason(row.reason) is row and apierrors.by_grpc_code(row.grpc_code) is row
    assert apierrors.by_reason("Teapot") is None and apierrors.by_grpc_code(grpc.StatusCode.UNKNOWN) is None


def test_an_explicit_code_overrides_the_class_row() -> None:
    e = server.APIError("shed", grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert e.code == grpc.StatusCode.RESOURCE_EXHAUSTED and e.http_status == 429
    assert server.APIError("odd", grpc.StatusCode.UNKNOWN).http_status == 500
