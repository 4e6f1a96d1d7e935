"""Record every RPC that failed as a client saw it: a grpc.aio client interceptor (`--rpc-error-log`).

The chaos checker needs the client's view of failures ("no failed RPC caused by a rotation"): the
API server's audit log only sees requests that reached it, not handshakes refused, connections
reset or deadlines that ran out on the way. So each client process (scheduler replica, nodesim,
workload) may append one `kse.records.RpcErrorRecord` JSON line per failed call:

    interceptors = rpc_error_interceptors(Path("run/rpc-errors-scheduler-1.jsonl"))
    source = channel_source_from_connection(conn, interceptors=interceptors)   # every channel it builds

What counts as failed: a unary call or a server stream (a watch) that ended with any status but OK,
application codes included (ABORTED, NOT_FOUND, ...: the checker filters those by
`kse.records.APPLICATION_CODES`), except

* CANCELLED that we caused ourselves: the call was cancelled locally (its task was cancelled, the
  stream was closed by its reader, or its channel was closed under it by a credential swap or at
  shutdown). grpc marks those calls "locally cancelled"; they are our decision, not a failure.
* a watch stream the API server ended because its connection reached max connection age
  (UNAVAILABLE "max connection age" / GOAWAY after the stream had started): that is how the server
  makes long-lived connections re-handshake with rotated credentials (DEPENDENCIES.md, "grpcio
  TLS"), and the reflector resumes the watch from the last revision it delivered. A watch that
  could not even start (no connection, refused handshake) is recorded.

Cost: the interceptor adds grpc.aio's interceptor machinery to each call (one extra task) and one
done-callback that reads the finished call's status synchronously; nothing is written unless the
call failed. Measured per unary call: see `tests/unit/test_rpc_errors.py` and the README. It is only
installed when `--rpc-error-log` is given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

log = logging.getLogger(__name__)

RPC_ERRORS_PREFIX = "rpc-errors-"

# How grpc words a stream ended by the server's max connection age (GOAWAY then the grace period).
_CONNECTION_AGE_MARKERS = ("max connection age", "max_age", "goaway", "GOAWAY")

Recorder = Callable[[str, object, str], None]

# The status code of a call's int code. Public API: each `grpc.StatusCode` member carries its
# numeric code (the gRPC wire value) as `.value[0]`; grpc's own table of this is private.
STATUS_CODE_BY_INT: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}


def client_name_for(path: Path | str) -> str:
    """The `client` of the records in `path`: the stem after `rpc-errors-` for a file named
    `rpc-errors-<name>.jsonl` (how `kse up` names them), else the whole stem."""
    stem = Path(path).stem
    if stem.startswith(RPC_ERRORS_PREFIX) and len(stem) > len(RPC_ERRORS_PREFIX):
        return stem[len(RPC_ERRORS_PREFIX) :]
    return stem


def _method_name(method: object) -> str:
    """'/kse.v1.Resources/Bind' (grpc passes bytes) -> 'kse.v1.Resources/Bind'."""
    text = method.decode() if isinstance(method, bytes) else str(method)
    return text.lstrip("/")


def _connection_aged(details: str) -> bool:
    return any(marker in details for marker in _CONNECTION_AGE_MARKERS)


def _status_of(call: Any) -> tuple[grpc.StatusCode, str, bool] | None:
    """(code, details, locally cancelled) of a finished grpc.aio call, read without awaiting.

    The one place kse reads grpc internals, isolated here on purpose: grpc.aio offers the status
    only as coroutines (`code()`, `details()`), but a done callback is synchronous and must stay
    cheap, and awaiting them would cost a task per call that nobody owns. So this reads the
    finished call's `_cython_call` (its `is_ok()`, `is_locally_cancelled()` and `_status`).
    `tests/unit/test_rpc_errors.py` checks it on real calls (OK, failed, locally cancelled), so a
    grpc release that changes these fails a test instead of silently losing records. None if this
    grpc does not expose them."""
    cython_call = getattr(call, "_cython_call", None)
    if cython_call is None:
        return None
    try:
        if cython_call.is_ok():
            return grpc.StatusCode.OK, "", False
        local = bool(cython_call.is_locally_cancelled())
        status = cython_call._status
        if status is None:
            return grpc.StatusCode.CANCELLED, "", local
        return STATUS_CODE_BY_INT[status.code()], status.details() or "", local
    except (AttributeError, KeyError):
        return None


class RpcErrorTracker:
    """Judges finished calls and calls `record(method, code, detail)` for every failed unary call
    and server stream (see the module doc for what is left out). `interceptors()` are what a channel
    takes; one tracker can serve every channel of a process, its counters say what it saw."""

    def __init__(self, record: Recorder) -> None:
        self._record = record
        self.recorded = 0
        self.ignored_local_cancels = 0
        self.ignored_stream_ends = 0
        self.unreadable = 0  # finished calls whose status this grpc did not let us read

    def interceptors(self) -> list[grpc.aio.ClientInterceptor]:
        """One interceptor per call arity: grpc.aio files each interceptor under the first arity
        it implements, so one object cannot serve both."""
        return [_UnaryUnaryInterceptor(self), _UnaryStreamInterceptor(self)]

    def finished(self, call: Any, method: object, *, stream: bool) -> None:
        """A call's done callback: judge it from its final status."""
        status = _status_of(call)
        if status is None:  # pragma: no cover - only on a grpc whose internals changed (tested)
            if self.unreadable == 0:
                log.error(
                    "this grpc (%s) does not expose a finished call's status to a done callback: "
                    "failed RPCs are not recorded (kse.client.rpc_errors._status_of)",
                    grpc.__version__,
                )
            self.unreadable += 1
            return
        code, details, local = status
        self._judge(method, code, details, local, stream=stream)

    def _judge(
        self, method: object, code: grpc.StatusCode, details: str, local: bool, *, stream: bool
    ) -> None:
        if code == grpc.StatusCode.OK:
            return
        if code == grpc.StatusCode.CANCELLED and local:
            self.ignored_local_cancels += 1
            return
        if (
            stream
            and code == grpc.StatusCode.UNAVAILABLE
            and any(m in details for m in _CONNECTION_AGE_MARKERS)
        ):
            self.ignored_stream_ends += 1
            return
        self.recorded += 1
        try:
            self._record(_method_name(method), code, details)
        except Exception as e:  # never let the error log break a call's completion
            log.error("cannot record a failed RPC (%s %s): %r", _method_name(method), code.name, e)


class _UnaryUnaryInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, tracker: RpcErrorTracker) -> None:
        self._tracker = tracker

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        call = await continuation(client_call_details, request)
        method, finished = client_call_details.method, self._tracker.finished
        call.add_done_callback(lambda c: finished(c, method, stream=False))
        return call


class _UnaryStreamInterceptor(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, tracker: RpcErrorTracker) -> None:
        self._tracker = tracker

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        call = await continuation(client_call_details, request)
        method, finished = client_call_details.method, self._tracker.finished
        call.add_done_callback(lambda c: finished(c, method, stream=True))
        return call


def rpc_error_interceptors(record: Recorder) -> list[grpc.aio.ClientInterceptor]:
    """The interceptors for a channel that report failed calls to `record(method, code, detail)`."""
    return RpcErrorTracker(record).interceptors()


class RpcErrorLog:
    """An `RpcErrorRecorder` on a file plus the interceptor feeding it; close it at exit."""

    def __init__(self, path: Path | str, client: str | None = None) -> None:
        from kse.records import RpcErrorRecorder

        self.path = Path(path)
        self.client = client or client_name_for(self.path)
        self.recorder = RpcErrorRecorder(self.path, self.client)
        self.tracker = RpcErrorTracker(self.recorder)
        self.interceptors = self.tracker.interceptors()

    def close(self) -> None:
        self.recorder.close()

    def __enter__(self) -> RpcErrorLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_rpc_error_log(path: Path | str | None) -> RpcErrorLog | None:
    """`RpcErrorLog(path)`, or None when no path was given (no interceptor: no cost)."""
    return None if path is None else RpcErrorLog(path)
