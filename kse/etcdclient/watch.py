"""One etcd watch that survives broken streams without losing or repeating an event.

The contract (DESIGN.md "Storage"): ordered, unique, atomic per revision, reliable, resumable,
bookmarkable. How each holds:

* **Resume point.** `next_revision` is the lowest revision not yet handed to the consumer. It moves
  only when a revision's events have been parsed into batches (last event's mod_revision + 1) or on a
  progress notification that is known to be ordered (its header revision + 1). A broken stream is
  re-created with `start_revision = next_revision`. It never moves on a response *header* revision
  of an event response: in a catch-up response that header is the store's current revision, far past
  the events it carries (this is how etcd3aio loses events, see DEPENDENCIES.md).
* **Atomic.** Watches ask etcd to fragment (`fragment=True`): a response larger than etcd's
  `--max-request-bytes` arrives in pieces flagged `fragment`, which are buffered and joined before
  anything is yielded, so a stream breaking mid-response yields nothing of it, and only a single
  huge event (not a huge catch-up batch) can approach the client's message-size limit. Whole
  responses hold whole revisions: etcd batches catch-up events by revision (at most 1000 revisions a
  response) and sends a synced watcher one response per txn. Each revision becomes one WatchBatch.
* **Unique and ordered.** Events with a revision below `next_revision` are dropped. etcd should
  never send them; releases before 3.5.22 could, after a member restored a snapshot under a watcher
  that had asked for a future revision.
* **Progress notifications** (`WatchBatch.progress`) are yielded only when they are safe bookmarks:
  - the periodic ones (`progress_notify=True`, interval set by etcd's
    `--experimental-watch-progress-notify-interval`, default 10 min) go through the watcher's own
    event channel and only for a synced watcher, so every event up to their revision precedes them,
    on every 3.5 release;
  - the ones answering `request_progress()` (watch_id -1) were sent on etcd's control channel,
    racing buffered and catch-up events, until etcd 3.5.8 / 3.4.25 (etcd-io/etcd#15220, fixed by
    "Guarantee order of requested progress notifications"). On those members they are dropped and
    `request_progress()` sends nothing; `EtcdClient.progress_request_supported` says which case holds.
    From 3.5.13 etcd answers only when the watcher is synced, so a request can go unanswered: ask again.
  - a notification below what was already delivered (a member lagging behind the one the previous
    stream was on) is dropped: resuming from it would repeat events.
* **Member failure.** A member that dies or restarts breaks the stream (UNAVAILABLE) and the watch
  moves to the next endpoint. Streams also carry etcd's `hasleader` metadata, so a member cut off
  from the quorum (no leader for 3 election timeouts) ends the stream instead of going silent.
* **Compaction.** A resume point that compaction has passed ends the watch with `CompactedError`
  right away (etcd cancels the watch with `compact_revision`); it is never retried or skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING, Any

import grpc

from kse.etcdclient import _proto as pb
from kse.etcdclient.errors import CompactedError, EtcdClosedError, EtcdError, EtcdUnavailableError
from kse.etcdclient.model import KeyValue, WatchBatch, WatchEvent
from kse.etcdclient.retry import transient

if TYPE_CHECKING:
    from kse.etcdclient.client import EtcdClient, _Endpoint

log = logging.getLogger(__name__)

# etcd's require-leader metadata (rpctypes.MetadataRequireLeaderKey / MetadataHasLeader).
_REQUIRE_LEADER = (("hasleader", "true"),)
# WatchResponse.watch_id of a response to a WatchProgressRequest (clientv3.InvalidWatchID).
_PROGRESS_WATCH_ID = -1
# Stream errors after which the watch is re-created; anything else is the caller's problem.
_RETRIABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
    }
)
_BACKOFF_START = 0.05
_BACKOFF_MAX = 0.5


def progress_request_is_ordered(version: str | None) -> bool:
    """Whether an etcd server of `version` answers WatchProgressRequest in order with events.

    Fixed in 3.4.25 and 3.5.8 (etcd-io/etcd#15220); every 3.6+ release has it. Unknown -> False.
    """
    if not version:
        return False
    try:
        major, minor, patch = (int(part) for part in version.split("-")[0].split(".")[:3])
    except ValueError:
        return False
    if (major, minor) == (3, 4):
        return patch >= 25
    if (major, minor) == (3, 5):
        return patch >= 8
    return (major, minor) > (3, 5)


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class Watch:
    """An async iterator of `WatchBatch` over [key, range_end) from `start_revision` on.

    Made by `EtcdClient.watch()`. Close it with `aclose()` or `async with`; closing the client closes
    it too. Iteration ends (StopAsyncIteration) once closed. It raises `CompactedError` if its resume
    point has been compacted, `EtcdUnavailableError` if the client was given a
    `watch_reconnect_timeout` and no endpoint served the watch for that long (by default it keeps
    trying), and `EtcdError` when etcd refuses it. After raising, the watch is closed.

    One consumer task iterates; `request_progress()` and `aclose()` may be called from any task.
    """

    def __init__(
        self,
        client: EtcdClient,
        key: bytes,
        range_end: bytes | None,
        start_revision: int,
        prev_kv: bool,
        progress_notify: bool,
    ) -> None:
        if not isinstance(key, bytes):
            raise TypeError(f"etcd keys are bytes, got {type(key).__name__}")
        if start_revision < 0:
            raise ValueError(f"start_revision must be >= 0, got {start_revision}")
        self._client = client
        self._key = key
        self._range_end = range_end or b""
        self._prev_kv = prev_kv
        self._progress_notify = progress_notify
        # 0 until the first stream resolves "from now" to a concrete revision.
        self._next_rev = start_revision
        self._pending: deque[WatchBatch] = deque()
        self._fragments: list[Any] = []
        self._call: Any = None
        self._endpoint: _Endpoint | None = None
        self._watch_id = 0
        self._progress_ordered = False
        self._want_progress = False
        self._closed = False
        self._opened_once = False
        self._write_lock = asyncio.Lock()
        self.reconnects = 0
        """How many times the stream was re-created after breaking (for metrics and tests)."""

    # ------------------------------------------------------------------ public

    @property
    def next_revision(self) -> int:
        """The resume point: every revision below it has been yielded (0 before the first stream)."""
        return self._next_rev

    @property
    def endpoint(self) -> str | None:
        """The endpoint currently serving this watch (None while reconnecting)."""
        return self._endpoint.url if self._endpoint is not None and self._call is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> WatchBatch:
        pending = self._pending
        while not pending:
            if self._closed:
                raise StopAsyncIteration
            await self._receive()
        if self._closed:
            raise StopAsyncIteration
        return pending.popleft()

    async def request_progress(self) -> None:
        """Ask etcd for a progress notification on this watch (see the module doc for when etcd
        answers). A stream being re-created sends the request once it is up."""
        if self._closed:
            return
        call = self._call
        if call is None:
            self._want_progress = True
        elif self._progress_ordered:
            await self._send_progress(call)

    async def aclose(self) -> None:
        """Stop the watch and end its stream; pending batches are discarded."""
        self.close_nowait()

    def close_nowait(self) -> None:
        """`aclose()` for sync contexts (the client's close, finalizers)."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        self._client._watches.discard(self)
        self._drop_call()

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close_nowait()

    def __repr__(self) -> str:
        return (
            f"<Watch {self._key!r}..{self._range_end!r} next_revision={self._next_rev} "
            f"endpoint={self.endpoint} closed={self._closed}>"
        )

    # ------------------------------------------------------------------ stream

    def _drop_call(self) -> None:
        call, self._call = self._call, None
        self._fragments = []
        if call is not None:
            call.cancel()

    def _fail(self, error: EtcdError) -> EtcdError:
        """Close the watch and hand back `error` for raising."""
        self.close_nowait()
        return error

    async def _receive(self) -> None:
        """Read one response (opening a stream first if there is none) into `_pending`."""
        call = self._call
        if call is None:
            await self._open()
            return
        try:
            resp = await call.read()
        except grpc.aio.AioRpcError as err:
            self._stream_failed(err)
            return
        except asyncio.CancelledError:
            # grpc cancels the whole RPC when a read is cancelled (a timeout around anext(watch)),
            # and a later read of that call raises CancelledError again. Either way the stream is
            # gone: drop it, so the next read re-creates it at next_revision.
            self._drop_call()
            if _being_cancelled():
                raise
            return  # closed under us, or the stream was cancelled by an earlier read: reopen
        if resp is grpc.aio.EOF:
            if not self._closed:
                log.info(
                    "etcd watch %r: %s ended the stream; resuming at %d",
                    self._key,
                    self._url(),
                    self._next_rev,
                )
                self._drop_call()
            return
        self._handle(resp)

    def _url(self) -> str:
        return self._endpoint.url if self._endpoint is not None else "?"

    def _stream_failed(self, err: grpc.aio.AioRpcError) -> None:
        if self._closed:
            return
        code = err.code()
        endpoint = self._endpoint
        self._drop_call()
        if code not in _RETRIABLE:
            raise self._fail(
                EtcdError(
                    f"etcd watch on {self._key!r} failed: {code.name}: {err.details()}",
                    code=code.name,
                    endpoint=endpoint.url if endpoint else None,
                )
            )
        log.info(
            "etcd watch %r: stream to %s broke (%s: %s); resuming at revision %d",
            self._key,
            endpoint.url if endpoint else "?",
            code.name,
            err.details(),
            self._next_rev,
        )
        if endpoint is not None and transient(err):
            self._client._failover(endpoint)

    async def _open(self) -> None:
        """Create the stream and the watcher at `next_revision`, retrying across endpoints."""
        client = self._client
        timeout = client._watch_reconnect_timeout
        give_up = None if timeout is None else time.monotonic() + timeout
        backoff = _BACKOFF_START
        failures = 0
        last_error = ""
        while not self._closed:
            if failures:
                now = time.monotonic()
                if give_up is not None and now >= give_up:
                    raise self._fail(
                        EtcdUnavailableError(
                            f"etcd watch on {self._key!r}: no endpoint served it for {timeout:g} s "
                            f"(last error: {last_error})"
                        )
                    )
                if failures % len(client._endpoints) == 0:
                    # Every endpoint failed once in a row: pause before the next round.
                    pause = backoff if give_up is None else min(backoff, max(0.0, give_up - now))
                    await asyncio.sleep(pause)
                    backoff = min(backoff * 2, _BACKOFF_MAX)
                    if self._closed:
                        return
            endpoint = client._endpoints[client._current]
            try:
                opened = await self._try_open(endpoint)
            except grpc.aio.AioRpcError as err:
                if err.code() not in _RETRIABLE:
                    raise self._fail(
                        EtcdError(
                            f"etcd refused a watch on {self._key!r}: {err.code().name}: {err.details()}",
                            code=err.code().name,
                            endpoint=endpoint.url,
                        )
                    ) from err
                last_error = f"{endpoint.url}: {err.code().name}: {err.details()}"
                opened = False
            except EtcdUnavailableError as err:  # resolving start_revision=0 found no endpoint
                last_error = str(err)
                opened = False
            except EtcdClosedError:
                if self._closed:
                    return
                raise
            except asyncio.CancelledError:
                if _being_cancelled():
                    raise
                if self._closed:
                    return
                if client._is_retired(endpoint):
                    continue  # its channel closed under the attempt (credential swap): use the new one
                raise
            if opened:
                return
            if client._is_retired(endpoint):
                continue  # failed because a credential swap retired its channel: not the member's fault
            failures += 1
            client._failover(endpoint)

    async def _try_open(self, endpoint: _Endpoint) -> bool:
        """One attempt; True when the watcher is created. Raises CompactedError/EtcdError if etcd
        refuses the watch itself, AioRpcError on a transport failure."""
        client = self._client
        if self._next_rev == 0:
            # "From now": pin it to a concrete revision first, so the resume point is never unknown.
            self._next_rev = (await client.get(self._key))[1] + 1
        version = await client._endpoint_version(endpoint)
        call = endpoint.watch(metadata=_REQUIRE_LEADER)
        try:
            await call.write(
                pb.WatchRequest(
                    create_request=pb.WatchCreateRequest(
                        key=self._key,
                        range_end=self._range_end,
                        start_revision=self._next_rev,
                        progress_notify=self._progress_notify,
                        prev_kv=self._prev_kv,
                        fragment=True,
                    )
                )
            )
            resp = await call.read()
        except BaseException:
            call.cancel()
            raise
        if resp is grpc.aio.EOF or not resp.created:
            call.cancel()
            return False
        if resp.canceled:
            call.cancel()
            raise self._fail(
                EtcdError(
                    f"etcd refused a watch on {self._key!r}: {resp.cancel_reason or 'no reason given'}",
                    endpoint=endpoint.url,
                )
            )
        if self._closed:
            call.cancel()
            return True
        self._call = call
        self._endpoint = endpoint
        self._watch_id = resp.watch_id
        self._progress_ordered = progress_request_is_ordered(version)
        if self._opened_once:
            self.reconnects += 1
            log.info("etcd watch %r: resumed at revision %d on %s", self._key, self._next_rev, endpoint.url)
        self._opened_once = True
        if self._want_progress:
            self._want_progress = False
            if self._progress_ordered:
                await self._send_progress(call)
        return True

    async def _send_progress(self, call: Any) -> None:
        async with self._write_lock:
            try:
                await call.write(pb.WatchRequest(progress_request=pb.WatchProgressRequest()))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError) as err:
                # The stream is going away; the reader notices and re-creates it.
                log.debug("etcd watch %r: progress request not sent: %s", self._key, err)

    # ------------------------------------------------------------------ responses

    def _handle(self, resp: Any) -> None:
        if resp.canceled:
            url = self._url()
            if resp.compact_revision:
                raise self._fail(CompactedError(resp.compact_revision, self._next_rev, endpoint=url))
            raise self._fail(
                EtcdError(
                    f"etcd canceled the watch on {self._key!r}: {resp.cancel_reason or 'no reason given'}",
                    endpoint=url,
                )
            )
        events = resp.events
        if resp.fragment:
            self._fragments.extend(events)
            return
        if self._fragments:
            events = [*self._fragments, *events]
            self._fragments = []
        if events:
            self._add_events(events)
        elif not resp.created:
            self._add_progress(resp)

    def _add_progress(self, resp: Any) -> None:
        if resp.watch_id == _PROGRESS_WATCH_ID and not self._progress_ordered:
            return  # may have overtaken events (etcd < 3.5.8): not a safe bookmark
        revision = resp.header.revision
        if revision + 1 < self._next_rev:
            return  # from a member behind what we already delivered
        self._next_rev = revision + 1
        self._pending.append(WatchBatch(revision, (), True))

    def _add_events(self, events: Any) -> None:
        pending = self._pending
        floor = self._next_rev
        batch_rev = 0
        batch: list[WatchEvent] = []
        for ev in events:
            kv = ev.kv
            rev = kv.mod_revision
            if rev < floor:
                continue  # already delivered
            if rev != batch_rev:
                if batch:
                    pending.append(WatchBatch(batch_rev, tuple(batch), False))
                    batch = []
                batch_rev = floor = rev
            prev = ev.prev_kv
            batch.append(
                WatchEvent(
                    "DELETE" if ev.type == pb.EVENT_DELETE else "PUT",
                    KeyValue(kv.key, kv.value, kv.create_revision, rev, kv.version, kv.lease),
                    KeyValue(
                        prev.key,
                        prev.value,
                        prev.create_revision,
                        prev.mod_revision,
                        prev.version,
                        prev.lease,
                    )
                    if prev.mod_revision
                    else None,
                )
            )
        if batch:
            pending.append(WatchBatch(batch_rev, tuple(batch), False))
            self._next_rev = batch_rev + 1
