"""pods/binding calls in flight at once, sent as one BindBatch call.

Why: on this machine a unary gRPC call costs the API server ~270 us of CPU before any of its own
work (measured in `kse bench apiserver`'s notes in the README), about half of a bind. A scheduler
binds from many binding cycles at once (upstream runs each in its own goroutine); sending the binds
queued while an earlier call is in flight as one call pays that cost once per batch, and lets the
API server commit them in one etcd txn (`apiserver_mock.storage.groupcommit`).

What each caller sees is what a Bind call would have given it: its own bound pod or its own typed
error (Conflict, NotFound, FencedOff, ...), because the server decides, fences and audits every
binding on its own. No bind waits for a batch to fill: a bind is sent at once while fewer than
`max_inflight` calls are in flight, and only binds that arrive while all are busy wait, for the
next call. A failure of the whole call (the server unreachable, a deadline, the call shed by the
overload gate after its retries) fails each of its binds with that error, as it would have failed
each Bind. A server without BindBatch (UNIMPLEMENTED: an older API server during an upgrade) is
remembered, and the binds go one Bind call each from then on.

Rate limiting and request metrics are per bind, not per call: each bind takes its token from the
clientset's limiter before it joins a batch, so `--kube-api-qps` bounds binds per second exactly
as it bounds upstream's (scheduler_perf and the README's figures depend on that), and each bind is
one `create pods/binding` request in the clientset's metrics (rest_client_requests_total), with its
own code and its batch call's latency.

The sender tasks end by themselves once nothing is queued, so a batcher has nothing to close.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from kse.client.errors import ApiError, error_for_code
from kse.tasks import TaskSet
from proto import kse_pb2 as pb

if TYPE_CHECKING:
    from kse.client.clientset import Clientset

log = logging.getLogger(__name__)

# The most binds in one call (the server accepts up to 1000; 100 keeps one call's latency small).
MAX_BATCH = 100
DEFAULT_MAX_INFLIGHT = 2

_CODES = {c.value[0]: c for c in grpc.StatusCode}


@dataclass(slots=True)
class _Queued:
    request: pb.BindRequest
    future: asyncio.Future[pb.Object]


class BindBatcher:
    """Coalesces one clientset's concurrent binds into BindBatch calls (module doc)."""

    def __init__(
        self, clientset: Clientset, *, max_batch: int = MAX_BATCH, max_inflight: int = DEFAULT_MAX_INFLIGHT
    ) -> None:
        if max_batch < 1 or max_inflight < 1:
            raise ValueError("max_batch and max_inflight must be >= 1")
        self._clientset = clientset
        self.max_batch = max_batch
        self.max_inflight = max_inflight
        self._queue: deque[_Queued] = deque()
        self._senders = 0
        self._tasks = TaskSet("bind-batch", logger=log)
        self.unsupported = False
        """The server answered BindBatch with UNIMPLEMENTED: every bind goes as its own Bind."""
        self.calls = 0
        self.binds = 0

    async def bind(self, request: pb.BindRequest) -> pb.Object:
        """Bind as one Bind call would (the caller has taken its rate-limiter token)."""
        if self.unsupported:
            return await self._single(request)
        future: asyncio.Future[pb.Object] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(request, future))
        if self._senders < self.max_inflight:
            self._senders += 1
            self._tasks.spawn(self._send_loop(), name="bind-batch")
        return await future

    async def _single(self, request: pb.BindRequest) -> pb.Object:
        out: pb.Object = await self._clientset._unary(
            "create", "pods/binding", "Bind", request, idempotent=False, limited=False
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
        self.calls += 1
        self.binds += len(batch)
        request = pb.BindBatchRequest(binds=[item.request for item in batch])
        metrics = self._clientset.metrics
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            response: pb.BindBatchResponse = await self._clientset._unary(
                "create",
                "pods/binding",
                "BindBatch",
                request,
                idempotent=False,
                limited=False,
                observed=False,
            )
        except ApiError as e:
            if e.code == grpc.StatusCode.UNIMPLEMENTED:
                log.info("the API server has no BindBatch; binding one pod per call from now on")
                self.unsupported = True
                await asyncio.gather(*(self._settle_single(item) for item in batch))
                return
            elapsed = loop.time() - start
            for item in batch:
                metrics.observe("create", "pods/binding", e.code_name, elapsed)
                _fail(item, error_for_code(e.code, e.message, revision=e.revision))
            return
        except asyncio.CancelledError:
            for item in batch:
                item.future.cancel()
            raise
        except Exception as e:  # not an answer from the server: each bind fails with it
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(e)
            return
        results = response.results
        if len(results) != len(batch):
            message = f"BindBatch answered {len(results)} results for {len(batch)} bindings"
            for item in batch:
                _fail(item, ApiError(message))
            return
        elapsed = loop.time() - start
        for item, result in zip(batch, results, strict=True):
            if result.code == 0:
                metrics.observe("create", "pods/binding", "OK", elapsed)
                if not item.future.done():
                    item.future.set_result(result.object)
            else:
                code = _CODES.get(result.code, grpc.StatusCode.UNKNOWN)
                metrics.observe("create", "pods/binding", code.name, elapsed)
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
