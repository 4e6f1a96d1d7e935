"""The HTTPS front door's lifetime: `async with HTTPFrontDoor(service, ...) as door: door.port`.

aiohttp (maintained, asyncio-native) serves in the API server's own event loop, so a handler calls
the registry directly, and watches are plain chunked streaming responses. TLS requires a client
certificate (`tls.ReloadingContext`, the same files as gRPC). Requests are routed by one catch-all
route to `dispatch`, which splits Kubernetes paths itself (`routes`), so every path, served or
not, gets a metav1.Status answer rather than aiohttp's text pages.

Limits, as kube-apiserver's filters: a body over `MAX_BODY_BYTES` is 413; more than
`max_inflight` concurrent non-watch requests are 429 with Retry-After (watches are long-running and
not counted); idle keep-alive connections close after `keepalive_timeout`, so clients re-handshake
with rotated credentials.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp.web_exceptions import HTTPRequestEntityTooLarge

from apiserver_mock.errors import Forbidden
from apiserver_mock.flowcontrol.early import EARLY, EarlyAdmission
from apiserver_mock.http import discovery, openapi, openapi_pb, params, routes
from apiserver_mock.http.authn import CertAuthenticator
from apiserver_mock.http.codec import BadRequest
from apiserver_mock.http.handlers import OBJECT_NAME, Handlers, Reply
from apiserver_mock.http.routes import Target
from apiserver_mock.http.scale import ScaleHandlers
from apiserver_mock.http.status import (
    EntityTooLarge,
    MethodNotAllowed,
    Subject,
    TooManyRequests,
    http_error,
    status_body,
)
from apiserver_mock.http.tls import ReloadingContext
from apiserver_mock.service import ResourcesService
from certs.identity import Identity
from certs.source import FileCredentialSource
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's request body limit (3 MiB)
HEALTH_PATHS = ("/healthz", "/livez", "/readyz")


# Reasons of the statuses aiohttp itself may answer before `dispatch` runs (a CONNECT request, whose
# target aiohttp reads as host:port, matches no route), as kube-apiserver's Status would spell them.
_AIOHTTP_REASONS = {404: "NotFound", 405: "MethodNotAllowed", 413: "RequestEntityTooLarge"}


@web.middleware
async def status_pages(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own error pages (text/plain "404: Not Found") as a metav1.Status, so that every
    error of this door is one a Kubernetes client can read."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        reason = _AIOHTTP_REASONS.get(e.status, "BadRequest" if e.status < 500 else "InternalError")
        message = f"{e.reason}: {request.method} {request.path_qs}"
        return Reply(status_body(e.status, reason, message), e.status).response()


class HTTPFrontDoor:
    def __init__(
        self,
        service: ResourcesService,
        listen: str,
        tls_cert: Path,
        tls_key: Path,
        client_ca: Path,
        *,
        max_inflight: int = 400,
        keepalive_timeout: float = 75.0,
    ) -> None:
        self.service = service
        self.listen = listen
        self.tls = ReloadingContext(FileCredentialSource(tls_cert, tls_key, client_ca))
        self.authn = CertAuthenticator()
        self.handlers = Handlers(service)
        self.scale_handlers = ScaleHandlers(service.call)
        self.max_inflight = max_inflight
        self.keepalive_timeout = keepalive_timeout
        self.inflight = 0
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def address(self) -> str:
        host = self.listen.rpartition(":")[0] or "127.0.0.1"
        return f"{host}:{self.port}"

    async def __aenter__(self) -> HTTPFrontDoor:
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[status_pages])
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        # handler_cancellation: a client that goes away cancels its handler, so an idle watch
        # is removed from the cache at once instead of at its next write.
        runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, keepalive_timeout=self.keepalive_timeout
        )
        await runner.setup()
        self._runner = runner
        host, _, port = self.listen.rpartition(":")
        site = web.TCPSite(
            runner, host or "127.0.0.1", int(port), ssl_context=self.tls.listening, shutdown_timeout=2.0
        )
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            self._runner = None
            raise
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else int(port)
        log.info("HTTPS (Kubernetes API) serving on %s", self.address)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------------ dispatch

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        subject = Subject()
        counted = False
        try:
            if path in HEALTH_PATHS:
                return self._health(path)
            ident = self.authn.identify(request.transport)
            target = routes.parse(path)
            long_running = (
                target is not None and request.method == "GET" and request.query.get("watch") in ("true", "1")
            )
            if not long_running:
                if self.inflight >= self.max_inflight:
                    raise TooManyRequests("Too many requests, please try again later.")
                self.inflight += 1
                counted = True
            if target is None:
                return self._non_resource(request, path, ident)
            subject = Subject(target.kind, target.name, target.subresource)
            return await self._resource(request, ident, target)
        except Exception as e:
            if isinstance(e, RecursionError):  # a body nested deeper than any object (YAML, patches)
                e = BadRequest("the request body is nested too deeply")
            if subject.kind is not None and not subject.name and request.get(OBJECT_NAME):
                subject = Subject(subject.kind, request[OBJECT_NAME], subject.subresource)
            code, body = http_error(e, subject, f"HTTP {request.method} {path}")
            resp = Reply(body, code).response()
            retry_after = (body.get("details") or {}).get("retryAfterSeconds")
            if code == 429 and retry_after:  # as upstream: only when the Status says how long
                resp.headers["Retry-After"] = str(retry_after)
            return resp
        finally:
            if counted:
                self.inflight -= 1

    def _dump_priority_levels(self, ident: Identity, path: str) -> web.Response:
        """kube-apiserver's debug table of the priority levels (`kubectl get --raw ...`), for the
        admin alone as upstream's RBAC grants /debug/* to system:masters."""
        if not ident.in_group("system:masters"):
            raise Forbidden(f'User "{ident.user}" cannot get path "{path}"')
        gate = self.service.flowcontrol
        rows = gate.dump() if gate is not None else []
        if not rows:
            return web.Response(text="priority and fairness is off (no gate, or max-inflight limits only)\n")
        header = list(rows[0])
        lines = [", ".join(header)]
        for row in rows:
            lines.append(", ".join(_cell(row[k]) for k in header))
        return web.Response(text="\n".join(lines) + "\n")

    def _health(self, path: str) -> web.Response:
        if path == "/readyz" and not self.service.ready.is_set():
            return web.Response(status=500, text="[-]watch-caches not loaded\nreadyz check failed\n")
        return web.Response(text="ok")

    def _non_resource(self, request: web.Request, path: str, ident: Identity) -> web.Response:
        if request.method != "GET":
            raise MethodNotAllowed(
                f"the server does not allow this method on the requested resource ({path})"
            )
        parts = [p for p in path.split("/") if p]
        if parts == ["debug", "api_priority_and_fairness", "dump_priority_levels"]:
            return self._dump_priority_levels(ident, path)
        doc = None
        if parts == ["api"]:
            doc = discovery.api_versions(f"{request.host}")
        elif parts == ["api", "v1"]:
            doc = discovery.resource_list("v1")
        elif parts == ["apis"]:
            doc = discovery.api_group_list()
        elif len(parts) == 2 and parts[0] == "apis":
            doc = discovery.group_document(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = discovery.resource_list(f"{parts[1]}/{parts[2]}")
        elif parts == ["version"]:
            doc = discovery.version_info()
        elif parts == ["openapi", "v2"]:
            if openapi_pb.PROTOBUF_V2 in request.headers.get("Accept", ""):  # client-go's OpenAPISchema
                body = openapi_pb.openapi_v2_protobuf()
                return web.Response(body=body, content_type=openapi_pb.PROTOBUF_V2_CONTENT_TYPE)
            doc = openapi.openapi_v2()
        elif parts == ["openapi", "v3"]:
            doc = openapi.openapi_v3_index()
        elif parts[:2] == ["openapi", "v3"]:
            doc = openapi.openapi_v3("/".join(parts[2:]))
        if doc is None:
            raise routes.not_found(path)
        return Reply(doc).response()

    async def _read_body(self, request: web.Request) -> bytes:
        try:
            return await request.read()
        except HTTPRequestEntityTooLarge:
            raise EntityTooLarge(f"Request entity too large: limit is {MAX_BODY_BYTES}") from None

    async def _scale(self, request: web.Request, ident: Identity, t: Target) -> web.Response:
        """deployments/NAME/scale, replicasets/NAME/scale (`apiserver_mock.http.scale`)."""
        h = self.scale_handlers
        fence = params.fence_token(request.headers.get(params.FENCE_HEADER))
        if request.method == "GET":
            return Reply(await h.get(ident, t)).response()
        body = await self._read_body(request)
        if request.method == "PUT":
            return Reply(await h.update(ident, t, body, fence)).response()
        if request.method == "PATCH":
            return Reply(await h.patch(ident, t, request.content_type, body, fence)).response()
        raise MethodNotAllowed(f"{request.method} is not supported on this path ({request.path})")

    async def _resource(self, request: web.Request, ident: Identity, t: Target) -> web.StreamResponse:
        h = self.handlers
        method = request.method
        sub = t.subresource
        if sub == "scale":
            return await self._scale(request, ident, t)
        if method == "GET":
            if sub in ("binding", "eviction"):
                raise MethodNotAllowed(f"GET is not supported on {t.kind.resource}/{sub}")
            return await h.get(request, ident, t)
        early = await self._admit_early(request, ident, t)
        token = EARLY.set(early)
        try:
            return await self._write(request, ident, t)
        finally:
            EARLY.reset(token)
            if early is not None:
                early.release()

    async def _admit_early(self, request: web.Request, ident: Identity, t: Target) -> EarlyAdmission | None:
        """A seat for a write from its URL, before its body is read (`flowcontrol.early`); None
        without a gate, or for a DELETE of a collection (a LIST and many deletes, each admitted)."""
        gate = self.service.flowcontrol
        if gate is None:
            return None
        stand_in = early_stand_in(request.method, t)
        if stand_in is None:
            return None
        name, stub = stand_in
        return EarlyAdmission(gate, name, await self.service.admit(name, ident, stub))

    async def _write(self, request: web.Request, ident: Identity, t: Target) -> web.StreamResponse:
        h = self.handlers
        method = request.method
        sub = t.subresource
        body = await self._read_body(request)
        if method == "POST":
            if sub == "binding":
                return await h.bind(request, ident, t, body)
            if sub == "eviction":
                return await h.evict(request, ident, t, body)
            if not t.name:
                return await h.create(request, ident, t, body)
        elif method == "PUT" and t.name and sub in ("", "status"):
            return await h.update(request, ident, t, body)
        elif method == "PATCH" and t.name and sub in ("", "status"):
            return await h.patch(request, ident, t, body)
        elif method == "DELETE" and not sub:
            if t.name:
                return await h.delete(request, ident, t, body)
            return await h.delete_collection(request, ident, t, body)
        raise MethodNotAllowed(f"{method} is not supported on this path ({request.path})")


def early_stand_in(method: str, t: Target) -> tuple[str, Any] | None:
    """The gRPC method a write on `t` runs and a body-less request naming what classification and
    a refusal's audit record read (kind, namespace, name); None when there is no single verb."""
    meta = pb.ObjectMeta(namespace=t.namespace, name=t.name)
    sub = t.subresource
    if method == "POST" and sub == "binding":
        return "Bind", pb.BindRequest(binding=pb.Binding(metadata=meta))
    if method == "POST" and sub == "eviction":
        return "Evict", pb.EvictRequest(namespace=t.namespace, name=t.name)
    if (method == "POST" and not t.name and not sub) or (
        method in ("PUT", "PATCH") and t.name and sub in ("", "status")
    ):
        name = "Create" if method == "POST" else "UpdateStatus" if sub == "status" else "Update"
        obj = pb.Object(**{t.kind.field: t.kind.message(metadata=meta)})
        return name, pb.WriteRequest(object=obj)
    if method == "DELETE" and t.name and not sub:
        return "Delete", pb.DeleteRequest(resource=t.kind.resource, namespace=t.namespace, name=t.name)
    return None


def _cell(value: object) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in sorted(value.items())) or "0"
    return str(value)
