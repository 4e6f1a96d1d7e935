"""The gRPC face of the API server: thin handlers that authenticate, call the registry, map errors.

Handlers return serialized bytes (the registry assembles responses from cached wire forms), so the
methods are registered with a pass-through response serializer (`handlers()`), not through the
generated `add_ResourcesServicer_to_server`. Every unary response carries the trailing metadata
`x-kse-revision`. No exception escapes as a traceback: API errors map to their status codes, etcd
trouble to UNAVAILABLE / OUT_OF_RANGE, anything else is logged and answered with INTERNAL.

With an audit log, every write RPC's record is appended before its answer (or error) is sent; a
write that was applied but whose record cannot be written is answered INTERNAL, saying so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

import grpc
import grpc.aio
from google.protobuf.message import DecodeError, Message

from apiserver_mock import wire
from apiserver_mock.audit import WRITE_METHODS, AuditLog, record_for
from apiserver_mock.auth.authn import Authenticator
from apiserver_mock.errors import APIError, TooManyRequests
from apiserver_mock.flowcontrol import FlowControl
from apiserver_mock.flowcontrol.early import EARLY
from apiserver_mock.flowcontrol.filter import Seat
from apiserver_mock.registry import Registry
from apiserver_mock.registry.reads import Reads
from apiserver_mock.watchcache.watcher import WatchClosed
from certs.identity import Identity
from kse import failpoints
from kse.etcdclient import CompactedError, EtcdError, EtcdOutcomeUnknownError, EtcdUnavailableError
from kse.tasks import TaskSet
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

SERVICE = "kse.v1.Resources"
REVISION_TRAILER = "x-kse-revision"
# On a RESOURCE_EXHAUSTED the server shed before running it: seconds after which to retry (as the
# HTTP door's Retry-After header). Only such refusals carry it, so a client retries only those.
RETRY_AFTER_TRAILER = "retry-after"
# The most items one BindBatch or CreateBatch call may carry (kse's clientset sends at most 100).
MAX_BATCH = 1000

Context: TypeAlias = grpc.aio.ServicerContext
Verb = Callable[[Identity, Any], Coroutine[Any, Any, tuple[bytes, int]]]


def _passthrough(response: bytes | Any) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Undecodable:
    """A request body that is not a serialized `message` (truncated, corrupt, bad UTF-8 in a
    string field). gRPC's own deserializer would answer UNKNOWN "Unexpected DecodeError" from
    outside the handler; decoding here lets the handler answer INVALID_ARGUMENT, as
    kube-apiserver answers a body it cannot decode with 400 BadRequest."""

    message: str
    error: str

    def status(self) -> tuple[grpc.StatusCode, str]:
        return grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid {self.message}: {self.error}"


def decoder(message: type[Message]) -> Callable[[bytes], Any]:
    """A request deserializer that returns `Undecodable` instead of raising."""
    name = message.DESCRIPTOR.full_name

    def decode(data: bytes) -> Any:
        try:
            return message.FromString(data)
        except (DecodeError, RecursionError) as e:
            return Undecodable(name, str(e) or type(e).__name__)

    return decode


def error_status(e: BaseException, method: str) -> tuple[grpc.StatusCode, str]:
    """The status and message for an exception raised while serving `method`."""
    if isinstance(e, APIError | AuditFailed):
        return e.code, e.message
    if isinstance(e, CompactedError):
        return (
            grpc.StatusCode.OUT_OF_RANGE,
            f"too old resource version: {e.requested_revision} ({e.compact_revision})",
        )
    if isinstance(e, EtcdOutcomeUnknownError):
        return (
            grpc.StatusCode.UNAVAILABLE,
            f"etcd did not answer; the write may or may not have been applied (re-read before retrying): {e}",
        )
    if isinstance(e, EtcdUnavailableError):
        return grpc.StatusCode.UNAVAILABLE, f"etcd is unavailable: {e}"
    log.error("%s: internal error", method, exc_info=e)
    return grpc.StatusCode.INTERNAL, f"internal error: {type(e).__name__} (see the API server log)"


class AuditFailed(Exception):
    """A write was applied but its audit record could not be written (answered INTERNAL)."""

    code = grpc.StatusCode.INTERNAL

    @property
    def message(self) -> str:
        return str(self.args[0])


CANCELLED_WRITE = "the call was cancelled during the write; it may or may not have been applied"


def _record_late_outcome(
    audit: AuditLog, name: str, ident: Identity, request: Any, task: asyncio.Future[tuple[bytes, int]]
) -> None:
    """The record of a write whose caller went away while it ran (`ResourcesService.call`), once
    the write has ended: accepted with its revision, refused with its code, or CANCELLED only if
    the write itself was cancelled (the server stopping), whose outcome is truly unknown."""
    if task.cancelled():
        _record_refusal(audit, name, ident, request, grpc.StatusCode.CANCELLED, CANCELLED_WRITE)
        return
    exc = task.exception()
    if exc is not None:
        code, message = error_status(exc, f"{SERVICE}/{name}")
        _record_refusal(audit, name, ident, request, code, message)
        return
    data, rev = task.result()
    try:
        audit.write(record_for(name, ident, request, grpc.StatusCode.OK, "", data, rev))
    except Exception as e:
        log.error("%s/%s: audit log write failed (applied at revision %s): %s", SERVICE, name, rev, e)


def _record_refusal(
    audit: AuditLog, name: str, ident: Identity | None, request: Any, code: grpc.StatusCode, message: str
) -> None:
    """Record a write that was not acknowledged; a failure to do so is logged, not raised (the
    client gets the original error either way)."""
    try:
        audit.write(record_for(name, ident, request, code, message))
    except Exception as e:
        log.error("audit log write failed for a refused %s (%s): %s", name, code.name, e)


async def _abort(context: Context, e: Exception, method: str) -> None:
    """End the call with the status of `e`; a shed refusal carries its Retry-After trailer."""
    code, message = error_status(e, method)
    if isinstance(e, TooManyRequests) and e.retry_after:
        await context.abort(code, message, ((RETRY_AFTER_TRAILER, str(e.retry_after)),))
    await context.abort(code, message)


async def _holding(
    gate: FlowControl, seat: Seat, work: Coroutine[Any, Any, tuple[bytes, int]]
) -> tuple[bytes, int]:
    """Run a write and give its seat back when the write ends, not when its caller leaves: a write
    whose caller went away still occupies the server until it is done."""
    try:
        return await work
    finally:
        gate.release(seat)


class ResourcesService:
    def __init__(
        self,
        registry: Registry,
        authn: Authenticator,
        *,
        send_timeout: float = 30.0,
        audit: AuditLog | None = None,
        flowcontrol: FlowControl | None = None,
    ) -> None:
        self.registry = registry
        # The overload gate every unary verb passes (apiserver_mock.flowcontrol); None: no gate.
        self.flowcontrol = flowcontrol
        self.send_timeout = send_timeout
        self.audit = audit
        self.reads = Reads(registry)
        self.authn = authn
        # Set once every watch cache has loaded; calls arriving earlier wait for it.
        self.ready = asyncio.Event()
        self._verbs = self.verbs()
        # Every audited write runs as a task of this set, so one whose caller went away still has
        # an owner while it runs to its end (see `call`); a refused write is no task failure.
        self._writes = TaskSet(
            "apiserver-writes", logger=log, failure_level=logging.DEBUG, expected=(EtcdError,)
        )

    async def finish_writes(self, grace: float) -> None:
        """Let the writes whose callers went away end and record themselves (before the audit log
        closes); those still running after `grace` s are cancelled, and recorded CANCELLED."""
        await self._writes.aclose(grace)

    def handlers(self) -> grpc.GenericRpcHandler:
        deserializers: dict[str, Callable[[bytes], Any]] = {
            "Get": decoder(pb.GetRequest),
            "List": decoder(pb.ListRequest),
            "Create": decoder(pb.WriteRequest),
            "Update": decoder(pb.WriteRequest),
            "UpdateStatus": decoder(pb.WriteRequest),
            "Delete": decoder(pb.DeleteRequest),
            "Bind": decoder(pb.BindRequest),
            "Evict": decoder(pb.EvictRequest),
        }
        methods: dict[str, grpc.RpcMethodHandler] = {
            name: grpc.unary_unary_rpc_method_handler(
                self._unary(name), request_deserializer=deser, response_serializer=_passthrough
            )
            for name, deser in deserializers.items()
        }
        batches = (("Bind", "binds", pb.BindBatchRequest), ("Create", "creates", pb.CreateBatchRequest))
        for name, items_field, message in batches:
            methods[f"{name}Batch"] = grpc.unary_unary_rpc_method_handler(
                self._batch(name, items_field),
                request_deserializer=decoder(message),
                response_serializer=_passthrough,
            )
        methods["Watch"] = grpc.unary_stream_rpc_method_handler(
            self.watch, request_deserializer=decoder(pb.WatchRequest), response_serializer=_passthrough
        )
        return grpc.method_handlers_generic_handler(SERVICE, methods)

    async def _update_status(self, ident: Identity, req: pb.WriteRequest) -> tuple[bytes, int]:
        return await self.registry.update(ident, req, status=True)

    def verbs(self) -> dict[str, Verb]:
        """Every unary verb by its gRPC method name; the HTTP front door calls the same ones."""
        reg = self.registry
        return {
            "Get": reg.get,
            "List": self.reads.list,
            "Create": reg.create,
            "Update": reg.update,
            "UpdateStatus": self._update_status,
            "Delete": reg.delete,
            "Bind": reg.bind,
            "Evict": reg.evict,
        }

    async def call(
        self, name: str, ident: Identity, request: Any, *, gated: bool = True
    ) -> tuple[bytes, int]:
        """Run verb `name` (a gRPC method name) for an authenticated caller, whatever the protocol.

        Waits for the caches, runs the registry verb and, for a write, appends its audit record
        before returning (or re-raising), exactly as the gRPC handler always did: both front doors
        go through here, so neither can skip the audit log. Raises the verb's exception unchanged
        (the caller maps it to its protocol's error); an applied write whose record cannot be
        written raises `AuditFailed`. `gated=False`: the caller already holds the overload gate's
        seat for this work (one item of a batch admitted as a whole).
        """
        verb = self._verbs[name]
        audit = self.audit if name in WRITE_METHODS else None
        if not self.ready.is_set():
            await self.ready.wait()
        notes: dict[str, object] = {}
        if name == "Evict":  # the eviction names the budget it consulted, for the audit record
            verb = partial(self.registry.evict, notes=notes)
        gate = self.flowcontrol if gated else None
        early = EARLY.get()  # a seat the HTTP door took before it read the body
        admitted, seat = early.take(name) if early is not None else (False, None)
        if gate is not None and not admitted:
            seat = await self.admit(name, ident, request)
        if audit is None:
            if gate is None:
                return await verb(ident, request)
            try:
                return await verb(ident, request)
            finally:
                gate.release(seat)
        # A write runs to its end even when its caller goes away (a client deadline, a cancelled
        # call): once its txn may have reached etcd, only its end says whether it was applied, and
        # the audit log must record that outcome, not "CANCELLED", or it would miss writes that
        # are in etcd (kse issue 13). The caller still gets its cancellation at once. Cost: a task
        # and a shield, ~8 us per write (measured in isolation; the audit record itself is ~50 us).
        work = verb(ident, request) if gate is None else _holding(gate, seat, verb(ident, request))
        task = self._writes.spawn(work, name=f"write-{name}")
        try:
            data, rev = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                _record_late_outcome(audit, name, ident, request, task)
            else:
                task.add_done_callback(partial(_record_late_outcome, audit, name, ident, request))
            raise
        except Exception as e:
            code, message = error_status(e, f"{SERVICE}/{name}")
            _record_refusal(audit, name, ident, request, code, message)
            raise
        try:
            audit.write(record_for(name, ident, request, grpc.StatusCode.OK, "", data, rev, notes))
        except Exception as e:
            log.error("%s/%s: audit log write failed after the write was applied: %s", SERVICE, name, e)
            raise AuditFailed(
                f"the write was applied at revision {rev} but its audit record could not be "
                f"written ({e}); re-read the object"
            ) from e
        if failpoints.ENABLED:
            await failpoints.inject("service/before-reply")
        return data, rev

    async def admit(self, name: str, ident: Identity, request: Any) -> Seat:
        """A seat from the gate for verb `name` (None without a gate); a refused write is audited
        before TooManyRequests is raised. `request` needs only what classification reads (kind,
        namespace, a LIST's limit): the HTTP door admits writes with a body-less stand-in
        (`apiserver_mock.flowcontrol.early`)."""
        gate = self.flowcontrol
        if gate is None:
            return None
        try:
            return await gate.admit(ident, name, request)
        except TooManyRequests as e:
            if name in WRITE_METHODS and self.audit is not None:
                code, message = error_status(e, f"{SERVICE}/{name}")
                _record_refusal(self.audit, name, ident, request, code, message)
            raise

    def _unary(self, name: str) -> Callable[[Any, Context], Awaitable[bytes]]:
        authn = self.authn
        method = f"{SERVICE}/{name}"
        audit = self.audit if name in WRITE_METHODS else None
        call = self.call

        async def handler(request: Any, context: Context) -> bytes:
            if isinstance(request, Undecodable):
                await context.abort(*request.status())
            try:
                try:
                    ident = authn.identify(context)
                except Exception as e:
                    # Refused before the verb ran (no client identity): still a refused write.
                    if audit is not None:
                        code, message = error_status(e, method)
                        _record_refusal(audit, name, None, request, code, message)
                    raise
                data, rev = await call(name, ident, request)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                await _abort(context, e, method)
            context.set_trailing_metadata(((REVISION_TRAILER, str(rev)),))
            return data

        handler.__name__ = name
        return handler

    def _batch(self, name: str, items_field: str) -> Callable[[Any, Context], Awaitable[bytes]]:
        """The handler of a batch call (BindBatch, CreateBatch): every item run as its own call of
        verb `name` (`call`: authorization, admission, fencing, audit, each its own answer),
        concurrently, so the store can group-commit them; the batch is admitted by the overload
        gate once. Refused as a whole only before any item ran."""
        method = f"{SERVICE}/{name}Batch"

        async def handler(request: Any, context: Context) -> bytes:
            if isinstance(request, Undecodable):
                await context.abort(*request.status())
                return b""  # abort raises; this line is for the type checker
            items = getattr(request, items_field)
            if len(items) > MAX_BATCH:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{items_field}: at most {MAX_BATCH} items in one {name}Batch call, got {len(items)}",
                )
            gate = self.flowcontrol
            ident: Identity | None = None
            try:
                ident = self.authn.identify(context)
                if not items:
                    return b""
                if not self.ready.is_set():
                    await self.ready.wait()
                seat = await gate.admit(ident, name, items[0]) if gate is not None else None
            except asyncio.CancelledError:
                raise
            except Exception as e:  # refused before any item ran: each is a refused write
                if self.audit is not None:
                    code, message = error_status(e, method)
                    for item in items:
                        _record_refusal(self.audit, name, ident, item, code, message)
                await _abort(context, e, method)
                return b""  # abort raises; this line is for the type checker
            try:
                results = await asyncio.gather(
                    *(self._item_result(name, method, ident, item) for item in items)
                )
            finally:
                if gate is not None:
                    gate.release(seat)
            revision = max(rev for _, rev in results)
            context.set_trailing_metadata(((REVISION_TRAILER, str(revision)),))
            return wire.batch_response(data for data, _ in results)

        handler.__name__ = f"{name}Batch"
        return handler

    async def _item_result(self, name: str, method: str, ident: Identity, request: Any) -> tuple[bytes, int]:
        """One item of a batch: its serialized BatchResult and the revision it reflects."""
        try:
            data, rev = await self.call(name, ident, request, gated=False)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code, message = error_status(e, method)
            return wire.batch_result(b"", code.value[0], message, ""), 0
        return wire.batch_result(data, 0, "", rev), rev

    async def watch(self, request: pb.WatchRequest | Undecodable, context: Context) -> None:
        """Stream the watcher's batches with `context.write` (not a generator), so that a write the
        client does not take within `send_timeout` (its flow-control window stays full) ends the
        stream with RESOURCE_EXHAUSTED instead of holding it open for ever."""
        if isinstance(request, Undecodable):
            await context.abort(*request.status())
            return
        try:
            if not self.ready.is_set():
                await self.ready.wait()
            ident = self.authn.identify(context)
            cache, watcher = await self.reads.watch(ident, request, context.peer())
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code, message = error_status(e, f"{SERVICE}/Watch")
            await context.abort(code, message)
        timer = None
        try:
            # Initial metadata goes out at once (not with the first event): a client that awaits it
            # knows the watch is registered, and from which revision it runs.
            await context.send_initial_metadata(((REVISION_TRAILER, str(watcher.start_revision)),))
            if request.timeout_seconds > 0:
                timer = asyncio.get_running_loop().call_later(request.timeout_seconds, watcher.finish)
            while True:
                item = await watcher.next()
                if item is None:
                    return
                async with asyncio.timeout(self.send_timeout):
                    await context.write(item)
        except WatchClosed as e:
            if e.code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                log.warning("closing slow watcher %s on %s: %s", watcher.peer, request.resource, e.message)
            await context.abort(e.code, e.message)
        except TimeoutError:
            watcher.close(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"watch closed: the client took no data for {self.send_timeout:g}s; "
                f"resume from the last resourceVersion received",
            )
            reason = watcher.error
            assert reason is not None
            log.warning(
                "closing stalled watcher %s on %s: %s", watcher.peer, request.resource, reason.message
            )
            await context.abort(reason.code, reason.message)
        finally:
            if timer is not None:
                timer.cancel()
            cache.remove_watcher(watcher)
