"""`?watch=true`: the watch cache's batches as chunked, newline-delimited WatchEvent JSON.

As kube-apiserver's watch handler (`k8s.io/apiserver/pkg/endpoints/handlers/watch.go`): one JSON
object per line, `{"type": ..., "object": ...}`; BOOKMARKs (only with allowWatchBookmarks) carry an
object of the kind with just `metadata.resourceVersion` (the one ending `sendInitialEvents` is
annotated `k8s.io/initial-events-end: "true"`); a resourceVersion older than the cache's history
is answered 200 with one ERROR event holding a 410 Expired Status, which is what makes client-go's
reflector relist. A stream closed for slowness or shutdown just ends: the client resumes from the
last resourceVersion it saw, exactly as on the gRPC side.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import grpc
from aiohttp import web

from apiserver_mock.errors import Gone
from apiserver_mock.http import tables
from apiserver_mock.http.codec import JSON_CACHE
from apiserver_mock.http.status import http_error
from apiserver_mock.service import ResourcesService
from apiserver_mock.watchcache.watcher import WatchClosed
from apiserver_mock.wire import length_delimited_fields
from certs.identity import Identity
from kse.objects.kinds import Kind
from kse.objects.manifest import to_dict
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

INITIAL_EVENTS_END = "k8s.io/initial-events-end"

Render = Callable[[dict[str, Any]], dict[str, Any]]


def _line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def bookmark_object(kind: Kind, revision: str, initial_end: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": revision}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}


def _events(batch: bytes) -> list[tuple[str, bytes, str]]:
    """(type, serialized Object or b"", resourceVersion) of each WatchEvent in a serialized batch,
    the object's bytes kept exactly as the cache shares them (the JSON cache's key)."""
    out = []
    for _, event in length_delimited_fields(batch):
        event_type, obj_wire, revision = "", b"", ""
        for number, payload in length_delimited_fields(event):
            if number == 1:
                event_type = payload.decode()
            elif number == 2:
                obj_wire = payload
            elif number == 3:
                revision = payload.decode()
        out.append((event_type, obj_wire, revision))
    return out


class LineCache:
    """Serialized batch -> its WatchEvent lines, for batches without a BOOKMARK (whose line depends
    on the watcher), shared by every JSON watcher of the door.

    Watchers with the same filter get the very same batch bytes from the cache (`_dispatch`), so
    the lines are assembled once per event for all of them, as the gRPC side sends one serialized
    batch to all; the object texts inside come from the JSON cache. Bounded: when full it starts
    over."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._lines: dict[bytes, bytes | None] = {}

    def lines(self, batch: bytes) -> bytes | None:
        """The batch's lines, or None when it holds a BOOKMARK (render it per watcher)."""
        try:
            return self._lines[batch]
        except KeyError:
            pass
        parts: list[bytes] | None = []
        for event_type, obj_wire, _ in _events(batch):
            if event_type == "BOOKMARK":
                parts = None
                break
            assert parts is not None
            parts.append(b'{"type":"%s","object":%s}\n' % (event_type.encode(), JSON_CACHE.text(obj_wire)))
        text = None if parts is None else b"".join(parts)
        if len(self._lines) >= self.limit:
            self._lines.clear()
        self._lines[batch] = text
        return text


LINE_CACHE = LineCache()


async def _start(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    return resp


async def serve_watch(
    request: web.Request,
    service: ResourcesService,
    ident: Identity,
    kind: Kind,
    req: pb.WatchRequest,
    table_include: str | None,
) -> web.StreamResponse:
    """Run one watch until the client leaves, timeoutSeconds passes or the cache closes it."""
    if not service.ready.is_set():
        await service.ready.wait()
    peer = request.remote or ""
    try:
        cache, watcher = await service.reads.watch(ident, req, peer)
    except Gone as e:
        resp = await _start(request)
        _, status = http_error(e)
        await resp.write(_line("ERROR", status))
        await resp.write_eof()
        return resp

    def render(obj: dict[str, Any]) -> dict[str, Any]:
        if table_include is None:
            return obj
        return tables.table(
            kind.resource,
            [obj],
            table_include,
            {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
        )

    timer = None
    initial_pending = req.send_initial_events
    try:
        resp = await _start(request)
    except BaseException:
        cache.remove_watcher(watcher)
        raise
    try:
        if req.timeout_seconds > 0:
            timer = asyncio.get_running_loop().call_later(req.timeout_seconds, watcher.finish)
        while True:
            item = await watcher.next()
            if item is None:
                break
            shared = LINE_CACHE.lines(item) if table_include is None else None
            if shared is not None:
                if shared:
                    async with asyncio.timeout(service.send_timeout):
                        await resp.write(shared)
                continue
            lines: list[bytes] = []
            for event_type, obj_wire, revision in _events(item):
                if event_type == "BOOKMARK":
                    initial_end, initial_pending = initial_pending, False
                    if req.allow_watch_bookmarks:
                        lines.append(_line("BOOKMARK", bookmark_object(kind, revision, initial_end)))
                elif table_include is None:  # the object's JSON text, shared with every watcher
                    lines.append(
                        b'{"type":"%s","object":%s}\n' % (event_type.encode(), JSON_CACHE.text(obj_wire))
                    )
                else:
                    lines.append(_line(event_type, render(to_dict(pb.Object.FromString(obj_wire)))))
            if lines:
                async with asyncio.timeout(service.send_timeout):
                    await resp.write(b"".join(lines))
    except WatchClosed as e:
        if e.code == grpc.StatusCode.OUT_OF_RANGE:
            _, status = http_error(Gone(e.message))
            await resp.write(_line("ERROR", status))
        elif e.code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            log.warning("closing slow HTTP watcher %s on %s: %s", peer, kind.resource, e.message)
    except TimeoutError:
        log.warning(
            "closing stalled HTTP watcher %s on %s: no data taken for %gs",
            peer,
            kind.resource,
            service.send_timeout,
        )
        return resp
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    finally:
        if timer is not None:
            timer.cancel()
        cache.remove_watcher(watcher)
    await resp.write_eof()
    return resp
