"""One thin handler per verb: request -> registry call (through `ResourcesService.call`) -> JSON.

Nothing here validates, authorizes or stores: the registry does, exactly as for gRPC. A handler
only builds the request message from the path, query and body, and renders the answer (an object,
a `<Kind>List`, a Table, or a Status for binding and eviction).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from google.protobuf.message import Message

from apiserver_mock import errors
from apiserver_mock.errors import AlreadyExists, Conflict, Forbidden, NotFound
from apiserver_mock.http import apply, codec, k8sproto, params, patch, strategic_merge, tables
from apiserver_mock.http.codec import BadRequest
from apiserver_mock.http.routes import Target
from apiserver_mock.http.status import MethodNotAllowed, UnsupportedMediaType, success_body
from apiserver_mock.http.watch import serve_watch
from apiserver_mock.service import ResourcesService
from certs.identity import Identity
from kse.objects.fields import escape_value
from kse.objects.kinds import Kind
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
UNKNOWN_FORMAT = (
    "the body of the request was in an unknown format - accepted media types include: "
    f"{MERGE_PATCH}, {JSON_PATCH}, {STRATEGIC_PATCH}, {APPLY_PATCH}"
)
OBJECT_NAME = "kse.object_name"  # request key: the name a POST body gave, for error details
PATCH_ATTEMPTS = 5
CREATED_STATUS = json.dumps(
    success_body(201), separators=(",", ":")
).encode()  # binding, eviction  # kube-apiserver's patcher retries a conflicting update this often


@dataclass
class Reply:
    """What a handler answers: a JSON body, its HTTP code and any Warning headers."""

    body: dict[str, Any]
    code: int = 200
    warnings: list[str] = field(default_factory=list)

    def response(self) -> web.Response:
        resp = web.Response(
            body=json.dumps(self.body, separators=(",", ":")).encode(),
            status=self.code,
            content_type="application/json",
        )
        for w in self.warnings:
            resp.headers.add("Warning", w)
        return resp


def object_reply(data: bytes, code: int = 200, warnings: list[str] | None = None) -> web.Response:
    """A serialized `Object` answered as JSON. Its text comes from the shared cache: the bytes of
    a write's answer are the bytes its watch event will carry, so watchers reuse the conversion."""
    resp = web.Response(body=codec.JSON_CACHE.text(data), status=code, content_type="application/json")
    for w in warnings or ():
        resp.headers.add("Warning", w)
    return resp


class Handlers:
    def __init__(self, service: ResourcesService) -> None:
        self.service = service
        self.call = service.call

    # ------------------------------------------------------------------ reads

    async def get(self, request: web.Request, ident: Identity, t: Target) -> web.StreamResponse:
        q = request.query
        table = (
            tables.include_object(q.get("includeObject", ""))
            if tables.wants_table(request.headers.get("Accept", ""))
            else None
        )
        watching = params.flag(q, "watch")
        if t.name and not watching:
            data, _ = await self.call(
                "Get", ident, pb.GetRequest(resource=t.kind.resource, namespace=t.namespace, name=t.name)
            )
            if table is not None:
                obj = codec.object_json(data)
                return Reply(
                    tables.table(
                        t.kind.resource,
                        [obj],
                        table,
                        {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                    )
                ).response()
            return object_reply(data)
        rv, match = params.resource_version_match(q)
        if watching:
            # A watch on one object's path is a watch on its name, as upstream's handler rewrites it.
            fields = q.get("fieldSelector", "")
            if t.name:
                by_name = f"metadata.name={escape_value(t.name)}"
                fields = f"{fields},{by_name}" if fields else by_name
            wreq = pb.WatchRequest(
                resource=t.kind.resource,
                namespace=t.namespace,
                label_selector=q.get("labelSelector", ""),
                field_selector=fields,
                resource_version=rv,
                allow_watch_bookmarks=params.flag(q, "allowWatchBookmarks"),
                send_initial_events=params.flag(q, "sendInitialEvents"),
                timeout_seconds=params.integer(q, "timeoutSeconds"),
            )
            return await serve_watch(request, self.service, ident, t.kind, wreq, table)
        lreq = pb.ListRequest(
            resource=t.kind.resource,
            namespace=t.namespace,
            label_selector=q.get("labelSelector", ""),
            field_selector=q.get("fieldSelector", ""),
            resource_version=params.list_resource_version(rv, match),
            limit=params.integer(q, "limit"),
        )
        setattr(lreq, "continue", q.get("continue", ""))
        data, _ = await self.call("List", ident, lreq)
        if table is not None:
            lst = codec.list_json(t.kind, data)
            return Reply(tables.table(t.kind.resource, lst["items"], table, lst["metadata"])).response()
        return web.Response(body=codec.list_text(t.kind, data), content_type="application/json")

    # ------------------------------------------------------------------ writes

    def _prepare(self, request: web.Request, t: Target, msg: Message, unknown: list[str]) -> list[str]:
        """Check the body's name and namespace against the URL; apply fieldValidation."""
        meta: pb.ObjectMeta = msg.metadata  # type: ignore[attr-defined]
        if t.kind.namespaced:
            if not meta.namespace:
                meta.namespace = t.namespace
            elif meta.namespace != t.namespace:
                raise BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
        if t.name and meta.name != t.name:
            raise BadRequest(
                f"the name of the object ({meta.name}) does not match the name on the URL ({t.name})"
            )
        mode = codec.field_validation(request.query.get("fieldValidation", ""))
        if unknown and mode == "Strict":
            raise codec.strict_error(unknown)
        return codec.warnings_for(unknown) if mode == "Warn" else []

    async def create(self, request: web.Request, ident: Identity, t: Target, body: bytes) -> web.Response:
        if t.kind.namespaced and not t.namespace:
            raise MethodNotAllowed(f"POST is not supported on {t.kind.resource} across all namespaces")
        raw, msg, unknown = codec.body_object(body, t.kind)
        warnings = self._prepare(request, t, msg, unknown)
        request[OBJECT_NAME] = msg.metadata.name  # type: ignore[attr-defined]  # for error details
        msg = self._managed(request, t, None, raw, msg)
        req = pb.WriteRequest(fence=self._fence(request), dry_run=params.dry_run(request.query))
        getattr(req.object, t.kind.field).CopyFrom(msg)
        data, _ = await self.call("Create", ident, req)
        return object_reply(data, 201, warnings)

    async def update(self, request: web.Request, ident: Identity, t: Target, body: bytes) -> web.Response:
        raw, msg, unknown = codec.body_object(body, t.kind)
        warnings = self._prepare(request, t, msg, unknown)
        try:
            old = codec.object_json((await self._read(ident, t))[0])
        except (NotFound, Forbidden):
            old = None  # the update answers 404 (or authorizes the update) itself
        msg = self._managed(request, t, old, raw, msg)
        data = await self._update(request, ident, t, msg)
        return object_reply(data, 200, warnings)

    async def _update(self, request: web.Request, ident: Identity, t: Target, msg: Message) -> bytes:
        req = pb.WriteRequest(fence=self._fence(request), dry_run=params.dry_run(request.query))
        getattr(req.object, t.kind.field).CopyFrom(msg)
        data, _ = await self.call("UpdateStatus" if t.subresource == "status" else "Update", ident, req)
        return data

    async def _read(self, ident: Identity, t: Target) -> tuple[bytes, int]:
        return await self.call(
            "Get", ident, pb.GetRequest(resource=t.kind.resource, namespace=t.namespace, name=t.name)
        )

    def _managed(
        self, request: web.Request, t: Target, old: dict[str, Any] | None, new: dict[str, Any], msg: Message
    ) -> Message:
        """`msg` with metadata.managedFields as upstream records a non-apply write by the request's
        field manager (`apply.record_update`), keeping the name and namespace `_prepare` settled."""
        manager = field_manager(request, required=False)
        try:
            recorded = apply.record_update(old, new, manager, now_rfc3339(), subresource=t.subresource)
        except apply.ApplyError as e:
            raise BadRequest(str(e)) from None
        out = codec.message_from_dict(recorded, t.kind)
        meta: pb.ObjectMeta = out.metadata  # type: ignore[attr-defined]
        src: pb.ObjectMeta = msg.metadata  # type: ignore[attr-defined]
        meta.name, meta.namespace = src.name, src.namespace
        return out

    @staticmethod
    def _fence(request: web.Request) -> pb.FenceToken | None:
        return params.fence_token(request.headers.get(params.FENCE_HEADER))

    async def bind(self, request: web.Request, ident: Identity, t: Target, body: bytes) -> web.Response:
        binding = codec.binding_from(codec.decode_json(body))
        binding.metadata.namespace = binding.metadata.namespace or t.namespace
        binding.metadata.name = binding.metadata.name or t.name
        if binding.metadata.name != t.name or binding.metadata.namespace != t.namespace:
            raise BadRequest("the name and namespace of the Binding must match the pod's on the URL")
        if params.dry_run(request.query):
            raise BadRequest("dryRun is not supported for pods/binding")
        await self.call("Bind", ident, pb.BindRequest(binding=binding, fence=self._fence(request)))
        return web.Response(body=CREATED_STATUS, status=201, content_type="application/json")

    async def evict(self, request: web.Request, ident: Identity, t: Target, body: bytes) -> web.Response:
        """policy/v1 Eviction: its deleteOptions (grace period, preconditions, dryRun) go to Evict."""
        raw = codec.decode_json(body)
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        if name and name != t.name:
            raise BadRequest(f"name in URL does not match name in Eviction object: {t.name} != {name}")
        opts = raw.get("deleteOptions") if isinstance(raw, dict) else None
        if opts is None:
            opts = {}
        if not isinstance(opts, dict):
            raise BadRequest("deleteOptions: expected a DeleteOptions object")
        _check_delete_options(opts)
        pre = opts.get("preconditions") or {}
        req = pb.EvictRequest(
            namespace=t.namespace,
            name=t.name,
            fence=self._fence(request),
            dry_run=self._delete_dry_run(request, opts),
            resource_version=str(pre.get("resourceVersion") or ""),
            uid=str(pre.get("uid") or ""),
        )
        grace = opts.get("gracePeriodSeconds")
        if grace is not None:
            req.grace_period_seconds = grace
        await self.call("Evict", ident, req)
        return Reply(success_body(201), 201).response()

    async def delete(self, request: web.Request, ident: Identity, t: Target, body: bytes) -> web.Response:
        """DELETE: the deleted object, or for a pod whose deletion is graceful the pod as it is now
        (deletionTimestamp set), both 200 as upstream (kubectl then waits for the pod to go)."""
        opts = self._delete_options(request, body)
        pre = opts.get("preconditions") or {}
        q = request.query
        req = pb.DeleteRequest(
            resource=t.kind.resource,
            namespace=t.namespace,
            name=t.name,
            resource_version=str(pre.get("resourceVersion") or ""),
            uid=str(pre.get("uid") or ""),
            fence=self._fence(request),
            propagation_policy=str(opts.get("propagationPolicy") or q.get("propagationPolicy", "")),
            dry_run=self._delete_dry_run(request, opts),
        )
        grace = _grace_period(request, opts)
        if grace is not None:
            req.grace_period_seconds = grace
        data, _ = await self.call("Delete", ident, req)
        return object_reply(data)

    async def delete_collection(
        self, request: web.Request, ident: Identity, t: Target, body: bytes
    ) -> web.Response:
        """Every object the selectors match, deleted one by one (each authorized and audited)."""
        opts = self._delete_options(request, body)
        q = request.query
        lreq = pb.ListRequest(
            resource=t.kind.resource,
            namespace=t.namespace,
            label_selector=q.get("labelSelector", ""),
            field_selector=q.get("fieldSelector", ""),
        )
        data, _ = await self.call("List", ident, lreq)
        lst = codec.list_json(t.kind, data)
        if self._delete_dry_run(request, opts):
            return Reply(lst).response()
        grace = _grace_period(request, opts)
        deleted = []
        for item in lst["items"]:
            meta = item["metadata"]
            dreq = pb.DeleteRequest(
                resource=t.kind.resource,
                namespace=meta.get("namespace", ""),
                name=meta["name"],
                fence=self._fence(request),
            )
            if grace is not None:
                dreq.grace_period_seconds = grace
            try:
                out, _ = await self.call("Delete", ident, dreq)
            except NotFound:
                continue  # deleted meanwhile: as upstream, not an error for the collection
            deleted.append(codec.object_json(out))
        lst["items"] = deleted
        return Reply(lst).response()

    @staticmethod
    def _delete_options(request: web.Request, body: bytes) -> dict[str, Any]:
        """DeleteOptions from the body and the query, checked (gracePeriodSeconds drives a pod's
        graceful deletion; propagationPolicy is accepted: kse has no garbage collector)."""
        opts: dict[str, Any] = {}
        if body.strip() and request.content_type == k8sproto.PROTOBUF_CONTENT_TYPE:
            # client-go's typed clients (kubectl drain --disable-eviction) send protobuf
            try:
                opts = k8sproto.decode_delete_options(body)
            except k8sproto.ProtobufError as e:
                raise BadRequest(f"the request body is not a protobuf DeleteOptions: {e}") from None
        elif body.strip():
            raw = codec.decode_json(body)
            if not isinstance(raw, dict):
                raise BadRequest("DeleteOptions must be a JSON object")
            opts = raw
        q = request.query
        params.integer(q, "gracePeriodSeconds", minimum=-(2**63))
        params.propagation_policy(q.get("propagationPolicy", ""))
        _check_delete_options(opts)
        return opts

    @staticmethod
    def _delete_dry_run(request: web.Request, opts: dict[str, Any]) -> bool:
        in_body = opts.get("dryRun") or []
        if not isinstance(in_body, list) or any(v != "All" for v in in_body):
            raise BadRequest('dryRun: Unsupported value: supported values: "All"')
        return params.dry_run(request.query) or bool(in_body)

    # ------------------------------------------------------------------ patch

    async def patch(self, request: web.Request, ident: Identity, t: Target, body: bytes) -> web.Response:
        """Read, patch the JSON, update with the read resourceVersion as precondition; on a conflict
        read again and re-apply (unless the patch itself pinned a resourceVersion), as
        kube-apiserver's patcher (`k8s.io/apiserver/pkg/endpoints/handlers/patch.go`)."""
        content_type = request.content_type
        if content_type == APPLY_PATCH:
            return await self._server_side_apply(request, ident, t, body)
        apply_fn = _patcher(content_type, t.kind)
        patch_doc = codec.decode_json(body)
        # A patch pins a resourceVersion only through an object-shaped metadata; any other shape
        # (a list, a string) is the patch function's to refuse, with a 4xx naming it.
        patch_meta = patch_doc.get("metadata") if isinstance(patch_doc, dict) else None
        pinned = isinstance(patch_meta, dict) and bool(patch_meta.get("resourceVersion"))
        mode = codec.field_validation(request.query.get("fieldValidation", ""))
        for attempt in range(PATCH_ATTEMPTS):
            current, _ = await self._read(ident, t)
            doc = codec.object_json(current)
            read_rv = doc["metadata"].get("resourceVersion", "")
            patched = apply_fn(doc, patch_doc, request)
            if not isinstance(patched, dict):
                raise BadRequest("the patched object is not a JSON object")
            meta = patched.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise BadRequest("metadata: the patched object's metadata is not an object")
            if not pinned:
                meta["resourceVersion"] = read_rv
            unknown = codec.unknown_of(patched, t.kind)
            if unknown and mode == "Strict":
                raise codec.strict_error(unknown)
            msg = codec.message_from_dict(patched, t.kind)
            self._prepare_patched(t, msg)
            msg = self._managed(request, t, doc, patched, msg)
            try:
                data = await self._update(request, ident, t, msg)
            except Conflict:
                if pinned or attempt == PATCH_ATTEMPTS - 1:
                    raise
                continue
            return object_reply(data, 200, codec.warnings_for(unknown) if mode == "Warn" else [])
        raise AssertionError("unreachable")  # pragma: no cover

    async def _server_side_apply(
        self, request: web.Request, ident: Identity, t: Target, body: bytes
    ) -> web.Response:
        """`kubectl apply --server-side`: merge the applied configuration into the live object (or
        create it) with field ownership (`apply.server_side_apply`); 409 on a field conflict unless
        `force=true`. Retries on a resourceVersion conflict as a patch does."""
        manager = field_manager(request, required=True)
        force = params.flag(request.query, "force")
        try:
            applied = apply.parse_applied(body)
        except apply.ApplyError as e:
            raise BadRequest(str(e)) from None
        mode = codec.field_validation(request.query.get("fieldValidation", ""))
        unknown = codec.unknown_of(applied, t.kind)
        if unknown and mode == "Strict":
            raise codec.strict_error(unknown)
        warnings = codec.warnings_for(unknown) if mode == "Warn" else []
        for attempt in range(PATCH_ATTEMPTS):
            try:
                live: dict[str, Any] | None = codec.object_json((await self._read(ident, t))[0])
            except NotFound:
                live = None
            try:
                result = apply.server_side_apply(
                    live, applied, manager, force, now_rfc3339(), subresource=t.subresource
                )
            except apply.ApplyConflict as e:
                return Reply(e.status(), 409).response()
            except apply.ApplyError as e:
                raise BadRequest(str(e)) from None
            meta = result.setdefault("metadata", {})
            meta["name"] = t.name
            if t.kind.namespaced:
                meta["namespace"] = t.namespace
            msg = codec.message_from_dict(result, t.kind)
            req = pb.WriteRequest(fence=self._fence(request), dry_run=params.dry_run(request.query))
            if live is None:
                if t.subresource:
                    raise NotFound(f'{t.kind.resource} "{t.name}" not found')
                msg.metadata.resource_version = ""  # type: ignore[attr-defined]
                getattr(req.object, t.kind.field).CopyFrom(msg)
                try:
                    data, _ = await self.call("Create", ident, req)
                except AlreadyExists:
                    continue  # created meanwhile: apply to it
                return object_reply(data, 201, warnings)
            msg.metadata.resource_version = live["metadata"].get("resourceVersion", "")  # type: ignore[attr-defined]
            try:
                data = await self._update(request, ident, t, msg)
            except Conflict:
                if attempt == PATCH_ATTEMPTS - 1:
                    raise
                continue
            return object_reply(data, 200, warnings)
        raise errors.conflict(t.kind, t.name, errors.MODIFIED)

    @staticmethod
    def _prepare_patched(t: Target, msg: Message) -> None:
        meta: pb.ObjectMeta = msg.metadata  # type: ignore[attr-defined]
        if meta.name != t.name or (t.kind.namespaced and meta.namespace != t.namespace):
            raise BadRequest("metadata.name and metadata.namespace cannot be changed by a patch")


def field_manager(request: web.Request, *, required: bool) -> str:
    """The write's field manager: `?fieldManager=`, else (not for apply) the User-Agent's product,
    as upstream's `prefixFromUserAgent` (`kubectl/v1.32.4 (linux/amd64) ...` -> `kubectl`)."""
    manager = request.query.get("fieldManager", "")
    if not manager:
        if required:
            raise BadRequest(
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                "is required for apply patch"
            )
        manager = request.headers.get("User-Agent", "").split("/", 1)[0] or "unknown"
    if len(manager) > 128:
        raise BadRequest(f"fieldManager: Too long: may not be more than 128 bytes, got {len(manager)}")
    return manager


def _strategic(doc: dict[str, Any], p: Any, kind: Kind) -> dict[str, Any]:
    if not isinstance(p, dict):
        raise BadRequest("a strategic merge patch must be a JSON object")
    try:
        return strategic_merge.apply_patch(doc, p, kind)
    except strategic_merge.PatchError as e:
        raise BadRequest(str(e)) from None


def _patcher(content_type: str, kind: Kind) -> Any:
    """The function applying a patch of `content_type` to an object's JSON (415 if not served)."""
    if content_type == MERGE_PATCH:
        return lambda doc, p, request: patch.merge_patch(doc, p)
    if content_type == JSON_PATCH:
        return lambda doc, p, request: patch.json_patch(doc, p)
    if content_type == STRATEGIC_PATCH:
        return lambda doc, p, request: _strategic(doc, p, kind)
    raise UnsupportedMediaType(f"{UNKNOWN_FORMAT}; got {content_type!r}")


def _check_delete_options(opts: dict[str, Any]) -> None:
    """The DeleteOptions fields kse reads, checked before anything runs (BadRequest names the field)."""
    grace = opts.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise BadRequest("gracePeriodSeconds: Invalid value: must be an integer")
    if grace is not None and not -(2**63) <= grace <= params.INT64_MAX:  # DeleteOptions' *int64
        raise BadRequest(f"gracePeriodSeconds: Invalid value: {grace}: out of range (int64)")
    params.propagation_policy(str(opts.get("propagationPolicy") or ""))
    pre = opts.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise BadRequest("preconditions: expected an object with uid and resourceVersion")


def _grace_period(request: web.Request, opts: dict[str, Any]) -> int | None:
    """DeleteOptions.gracePeriodSeconds from the body, else the query; None when neither sets it."""
    grace = opts.get("gracePeriodSeconds")
    if grace is None and request.query.get("gracePeriodSeconds", ""):
        grace = params.integer(request.query, "gracePeriodSeconds", minimum=-(2**63))
    return grace  # type: ignore[no-any-return]
