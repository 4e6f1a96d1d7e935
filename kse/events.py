"""An event recorder for the control plane's components (the scheduler's ``Scheduled`` /
``FailedScheduling``, the controller-manager's ``SuccessfulCreate`` / ``ScalingReplicaSet``), written
asynchronously and aggregated like client-go's event broadcaster (`tools/record`).

What upstream does, and what this keeps:

* Recording never blocks the scheduler: ``eventf`` queues the event and returns; writers drain
  the queue in the background. When more than ``max_queued`` events wait, new ones are dropped
  (client-go's broadcaster drops too, with a log line) rather than slowing scheduling down.
* Repeats are aggregated (client-go's EventCorrelator / EventLogger): an event equal to one
  already written — same object, type, reason, message and source — is not created again; the
  stored event's ``count`` goes up by one and ``lastTimestamp`` moves (an update of the stored
  Event). A pod that fails to schedule every 10 s for an hour is one Event with count 360, not 360
  Events. If the stored event is gone or changed (NOT_FOUND, ABORTED) a fresh one is created.
  Events of the same key are written by the same writer, in order.
* Object names are ``<pod>.<hex nanoseconds>`` as client-go makes them.
* Events carry both the core/v1 fields (source, first/lastTimestamp, count) and the events/v1
  ones (eventTime, action, reportingController/Instance), since upstream's scheduler records
  through events/v1 and ``kubectl describe`` reads either.

Fencing: an event carries the fence token current when it was *recorded* (the term under which
the scheduler decided), not when it is written, so an event of an ended term can never go out under
the next one; the API server refuses it once the lease moved on. ``discard_pending`` drops what is
still queued when a term ends. A write refused as fenced calls ``on_fenced(token)``.

Not modelled: client-go's spam filter (a token bucket per object, 25 events then one per 5 min)
and the "combined from similar events" aggregation of messages that differ; the scheduler's
messages for one pod rarely differ.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import Message

from kse.client.clientset import Clientset
from kse.client.errors import ApiError, ConflictError, FencedError, NotFoundError
from kse.objects.timeutil import format_micro_time, format_time
from proto import kse_pb2 as pb

FenceSource = Callable[[], pb.FenceToken | None]
FencedHook = Callable[[pb.FenceToken], None]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"

# Upstream validation.NoteLengthLimit: an event's message is cut to this many bytes.
NOTE_LENGTH_LIMIT = 1024
MAX_QUEUED_EVENTS = 1000
AGGREGATION_CACHE_SIZE = 4096
# Writers draining the queue, each one write at a time. One Create call per Event: 4, as each
# call costs the API server as much as the write. When the clientset batches creates (CreateBatch,
# kse.client.batcher), writers are only coroutines whose creates share calls, so more of them keep
# up with a scheduler binding 700 pods/s (4 dropped about half its Scheduled Events there).
UNBATCHED_WRITERS = 4
BATCHED_WRITERS = 64


def truncate_message(message: str, limit: int = NOTE_LENGTH_LIMIT) -> str:
    """Upstream truncateMessage: cut to `limit` with a " ..." suffix."""
    if len(message) <= limit:
        return message
    suffix = " ..."
    return message[: limit - len(suffix)] + suffix


@dataclass(frozen=True, slots=True)
class _Key:
    namespace: str
    name: str
    uid: str
    type: str
    reason: str
    message: str
    component: str


@dataclass(slots=True)
class _Pending:
    key: _Key
    pod_resource_version: str  # the involved object's resourceVersion
    action: str
    at: float
    fence: pb.FenceToken | None = None
    kind: str = "Pod"
    api_version: str = "v1"


class EventRecorder:
    """Records events about objects (pods by default) through `clientset.events` (see the module
    doc). Run `run()` as a task for the writers; `eventf` may be called before it starts (events
    wait in the queue)."""

    def __init__(
        self,
        clientset: Clientset,
        *,
        instance: str = "",
        clock: Callable[[], float] = time.time,
        max_queued: int = MAX_QUEUED_EVENTS,
        writers: int | None = None,
        cache_size: int = AGGREGATION_CACHE_SIZE,
        fence: FenceSource | None = None,
        on_fenced: FencedHook | None = None,
    ) -> None:
        self._cs = clientset
        self._instance = instance
        self._clock = clock
        self._max_queued = max_queued
        if writers is None:
            writers = BATCHED_WRITERS if clientset.batch_creates else UNBATCHED_WRITERS
        self.writers = max(1, writers)
        self._queues: list[asyncio.Queue[_Pending]] = [asyncio.Queue() for _ in range(self.writers)]
        self._queued = 0
        self._cache: OrderedDict[_Key, pb.Event] = OrderedDict()
        self._cache_size = cache_size
        self._fence = fence
        self.on_fenced = on_fenced
        self._idle = asyncio.Event()
        self._idle.set()
        self.dropped = 0
        self.created = 0
        self.updated = 0
        self.failed = 0
        self.fenced = 0
        self.discarded = 0

    def set_fence(self, fence: FenceSource | None) -> None:
        self._fence = fence

    def eventf(
        self,
        pod: Message,
        event_type: str,
        reason: str,
        action: str,
        message: str,
        *,
        component: str,
        kind: str = "Pod",
        api_version: str = "v1",
    ) -> None:
        """Queue an event about `pod` (or any object with metadata: give its `kind` and
        `api_version`); never blocks, drops when the queue is full."""
        if self._queued >= self._max_queued:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event queue full (%d): dropped %d events so far", self._max_queued, self.dropped)
            return
        meta: pb.ObjectMeta = pod.metadata  # type: ignore[attr-defined]
        key = _Key(meta.namespace, meta.name, meta.uid, event_type, reason, message, component)
        self._queued += 1
        self._idle.clear()
        fence = self._fence() if self._fence is not None else None
        self._queues[hash(key) % len(self._queues)].put_nowait(
            _Pending(key, meta.resource_version, action, self._clock(), fence, kind, api_version)
        )

    def discard_pending(self) -> int:
        """Drop every event still queued (a term ended: what it decided is no longer ours to
        report); events being written finish. Returns how many were dropped."""
        n = 0
        for q in self._queues:
            while not q.empty():
                q.get_nowait()
                n += 1
        self._queued -= n
        self.discarded += n
        if self._queued == 0:
            self._idle.set()
        return n

    async def run(self) -> None:
        """The writers, until cancelled."""
        async with asyncio.TaskGroup() as tg:
            for i, q in enumerate(self._queues):
                tg.create_task(self._writer(q), name=f"event-writer-{i}")

    async def wait_idle(self) -> None:
        """Until every queued event has been written (or failed)."""
        await self._idle.wait()

    async def _writer(self, q: asyncio.Queue[_Pending]) -> None:
        while True:
            item = await q.get()
            try:
                await self._write(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failed += 1
                log.exception(
                    "writing event %s for pod %s/%s", item.key.reason, item.key.namespace, item.key.name
                )
            finally:
                self._queued -= 1
                if self._queued == 0:
                    self._idle.set()

    async def _write(self, item: _Pending) -> None:
        try:
            await self._write_fenced(item)
        except FencedError as e:
            self.fenced += 1
            key = item.key
            log.info("event %s of %s/%s refused: %s", key.reason, key.namespace, key.name, e.message)
            if item.fence is not None and self.on_fenced is not None:
                self.on_fenced(item.fence)

    async def _write_fenced(self, item: _Pending) -> None:
        key = item.key
        fence = item.fence
        seen = self._cache.get(key)
        if seen is not None:
            update = pb.Event()
            update.CopyFrom(seen)
            update.count = seen.count + 1
            update.last_timestamp = format_time(item.at)
            try:
                stored = await self._cs.events.update(update, fence=fence)
            except (NotFoundError, ConflictError):
                self._cache.pop(key, None)  # deleted or changed by someone else: start afresh
            except FencedError:
                raise
            except ApiError as e:
                self.failed += 1
                log.warning("updating event %s of %s/%s: %s", key.reason, key.namespace, key.name, e.message)
                return
            else:
                self.updated += 1
                self._remember(key, stored)
                return
        event = self._new_event(item)
        try:
            stored = await self._cs.events.create(event, fence=fence)
        except FencedError:
            raise
        except ApiError as e:
            self.failed += 1
            log.warning("creating event %s of %s/%s: %s", key.reason, key.namespace, key.name, e.message)
            return
        self.created += 1
        self._remember(key, stored)

    def _remember(self, key: _Key, event: pb.Event) -> None:
        self._cache[key] = event
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _new_event(self, item: _Pending) -> pb.Event:
        key = item.key
        ts = format_time(item.at)
        return pb.Event(
            api_version="v1",
            kind="Event",
            metadata=pb.ObjectMeta(name=f"{key.name}.{time.time_ns():x}", namespace=key.namespace),
            involved_object=pb.ObjectReference(
                kind=item.kind,
                api_version=item.api_version,
                namespace=key.namespace,
                name=key.name,
                uid=key.uid,
                resource_version=item.pod_resource_version,
            ),
            reason=key.reason,
            message=key.message,
            source=pb.EventSource(component=key.component),
            first_timestamp=ts,
            last_timestamp=ts,
            count=1,
            type=key.type,
            event_time=format_micro_time(item.at),
            action=item.action,
            reporting_component=key.component,
            reporting_instance=self._instance or key.component,
        )
