"""Calls of one kind in flight at once (pods/binding, or creates of one resource), sent as one
batch call (BindBatch, CreateBatch).

Why: on this machine a unary gRPC call costs the API server ~270 us of CPU before any of its own
work (measured in `kse bench apiserver`'s notes in the README), about half of a bind or a create. A
scheduler binds from many binding cycles at once (upstream runs each in its own goroutine), and its
event recorder and the benchmarks' pod creators create many objects at once; sending the calls
queued while an earlier batch is in flight as one call pays that cost once per batch, and lets the
API server commit them in one etcd txn (`apiserver_mock.storage.groupcommit`).

What each caller sees is what its own unary call would have given it: its own object or its own
typed error (Conflict, AlreadyExists, NotFound, FencedOff, ...), because the server decides,
authorizes, fences and audits every item on its own. No call waits for a batch to fill: a call is
sent at once when no batch is in flight, and calls that arrive while one is wait for the next
batch; a second batch (up to `max_inflight`) goes out early only when a full one is waiting. A
failure of the whole batch (the server unreachable, a deadline, the batch shed by the overload
gate after its retries) fails each of its calls with that error, as it would have failed each
unary call. A server without the batch method (UNIMPLEMENTED: an older API server during an
upgrade) is remembered, and the calls go one unary call each from then on.

Rate limiting and request metrics are per item, not per batch: each caller takes its token from the
clientset's limiter before it joins a batch, so `--kube-api-qps` bounds binds (or creates) per
second exactly as it bounds upstream's (scheduler_perf and the README's figures depend on that),
and each item is one request in the clientset's metrics (rest_client_requests_total, e.g. `create
pods/binding`), with its own code and its batch's latency.

The sender tasks end by themselves once nothing is queued, so a batcher has nothing to close.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
from google.protobuf.message import Message

from kse.client.errors import ApiError, error_for_code
from kse.tasks import TaskSet
from proto import kse_pb2 as pb

if TYPE_CHECKING:
    from kse.client.clientset import Clientset

log = logging.getLogger(__name__)

# The most items in one call (the server accepts up to 1000; 100 keeps one call's latency small).
MAX_BATCH = 100
DEFAULT_MAX_INFLIGHT = 2

_CODES = {c.value[0]: c for c in grpc.StatusCode}


@dataclass(frozen=True, slots=True)
class BatchKind:
    """What a batcher sends: the unary method each item would have been, the batch method and its
    request message's repeated field, and the verb and resource its items count as in metrics."""

    verb: str
    resource: str
    unary_method: str
    batch_method: str
    batch_request: type[Message]
    items_field: str


def bind_kind() -> BatchKind:
    return BatchKind("create", "pods/binding", "Bind", "BindBatch", pb.BindBatchRequest, "binds")


def create_kind(resource: str) -> BatchKind:
    return BatchKind("create", resource, "Create", "CreateBatch", pb.CreateBatchRequest, "creates")


@dataclass(slots=True)
class _Queued:
    request: Message
    future: asyncio.Future[pb.Object]


class CallBatcher:
    """Coalesces one clientset's concurrent calls of one kind into batch calls (module doc)."""

    def __init__(
        self,
        clientset: Clientset,
        kind: BatchKind,
        *,
        max_batch: int = MAX_BATCH,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
    ) -> None:
        if max_batch < 1 or max_inflight < 1:
            raise ValueError("max_batch and max_inflight must be >= 1")
        self._clientset = clientset
        self.kind = kind
        self.max_batch = max_batch
        self.max_inflight = max_inflight
        self._queue: deque[_Queued] = deque()
        self._senders = 0
        self._tasks = TaskSet(kind.batch_method, logger=log)
        self.unsupported = False
        """The server answered the batch method with UNIMPLEMENTED: every item goes on its own."""
        self.calls = 0
        self.items = 0
        self.peak_inflight = 0
        """The most batch calls in flight at once so far."""

    async def send(self, request: Message) -> pb.Object:
        """Answer as one unary call would (the caller has taken its rate-limiter token)."""
        if self.unsupported:
            return await self._single(request)
        future: asyncio.Future[pb.Object] = asyncio.get_running_loop().create_future()
        queue = self._queue
        queue.append(_Queued(request, future))
        # One batch in flight at a time, unless a full batch is already waiting behind it: then
        # another joins (up to max_inflight). A second sender taking whatever is queued as soon
        # as it arrives halves the batches, and each call costs the API server ~270 us of CPU
        # and etcd one txn: with two always in flight the e2e benchmark bound ~650 pods/s, with
        # one ~800 (the README's figures).
        if self._senders == 0 or (self._senders < self.max_inflight and len(queue) >= self.max_batch):
            self._senders += 1
            self.peak_inflight = max(self.peak_inflight, self._senders)
            self._tasks.spawn(self._send_loop(), name=self.kind.batch_method)
        return await future

    async def _single(self, request: Message) -> pb.Object:
        kind = self.kind
        out: pb.Object = await self._clientset._unary(
            kind.verb, kind.resource, kind.unary_method, request, idempotent=False, limited=False
        )
        return out

    def _take(self) -> list[_Queued]:
        batch: list[_Queued] = []
        while self._queue and len(batch) < self.max_batch:
            item = self._queue.popleft()
            if not item.future.done():  # a caller that went away before it was sent is not sent
                batch.append(item)
        return batch

    async def _send_loop(self) -> None:
        try:
            while batch := self._take():
                await self._send(batch)
        finally:
            self._senders -= 1

    async def _send(self, batch: list[_Queued]) -> None:
        if self.unsupported:
            await asyncio.gather(*(self._settle_single(item) for item in batch))
            return
        kind = self.kind
        self.calls += 1
        self.items += len(batch)
        request = kind.batch_request(**{kind.items_field: [item.request for item in batch]})
        metrics = self._clientset.metrics
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            response = await self._clientset._unary(
                kind.verb,
                kind.resource,
                kind.batch_method,
                request,
                idempotent=False,
                limited=False,
                observed=False,
            )
        except ApiError as e:
            if e.code == grpc.StatusCode.UNIMPLEMENTED:
                log.info(
                    "the API server has no %s; one %s call per item from now on",
                    kind.batch_method,
                    kind.unary_method,
                )
                self.unsupported = True
                await asyncio.gather(*(self._settle_single(item) for item in batch))
                return
            elapsed = loop.time() - start
            for item in batch:
                metrics.observe(kind.verb, kind.resource, e.code_name, elapsed)
                _fail(item, error_for_code(e.code, e.message, revision=e.revision))
            return
        except asyncio.CancelledError:
            for item in batch:
                item.future.cancel()
            raise
        except Exception as e:  # not an answer from the server: each item fails with it
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(e)
            return
        results = response.results
        if len(results) != len(batch):
            message = f"{kind.batch_method} answered {len(results)} results for {len(batch)} items"
            for item in batch:
                _fail(item, ApiError(message))
            return
        elapsed = loop.time() - start
        for item, result in zip(batch, results, strict=True):
            if result.code == 0:
                metrics.observe(kind.verb, kind.resource, "OK", elapsed)
                if not item.future.done():
                    item.future.set_result(result.object)
            else:
                code = _CODES.get(result.code, grpc.StatusCode.UNKNOWN)
                metrics.observe(kind.verb, kind.resource, code.name, elapsed)
                _fail(item, error_for_code(code, result.message, revision=result.revision))

    async def _settle_single(self, item: _Queued) -> None:
        if item.future.done():
            return
        try:
            out = await self._single(item.request)
        except ApiError as e:
            _fail(item, e)
        else:
            if not item.future.done():
                item.future.set_result(out)


def _fail(item: _Queued, error: ApiError) -> None:
    if not item.future.done():
        item.future.set_exception(error)
