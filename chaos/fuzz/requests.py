"""One fuzz request, as a pure function of (seed, index): `make_request(seed, i)`.

Each request gets its own RNG seeded with `"{seed}:{i}"`, so request `i` is the same whatever ran
before it, and a finding is replayed from the seed and its index alone (`kse fuzz apiserver
--seed S --only I`). The mix covers every method of the gRPC Resources service (and raw bytes
through a generic call) and every route of the HTTP door (discovery, /openapi, CRUD of every kind,
subresources, watch, every patch content type, bad Content-Types, truncated bodies).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from chaos.fuzz import protogen, values
from chaos.fuzz.values import NAMESPACE, NODE
from kse.objects.kinds import KINDS, Kind
from proto import kse_pb2 as pb

IDENTITIES = ("admin", "workload", "scheduler", "node", "chaos")
GRPC_METHODS = (
    "Get", "List", "Watch", "Create", "Update", "UpdateStatus", "Delete", "Bind", "BindBatch", "CreateBatch",
    "Evict",
)  # fmt: skip
SERVICE = "/kse.v1.Resources/"
HUGE_CONTINUE = "OTk5OTk5OTk5OTk5OTk5OTk5OTkvZnV6ei9h"  # a continue token whose revision is past int64
PATCH_TYPES = (
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
BAD_CONTENT_TYPES = (
    "text/plain",
    "application/vnd.kubernetes.protobuf",
    "application/xml",
    "",
    "a/b; c",
    "*/*",
)
DISCOVERY = (
    "/api",
    "/api/v1",
    "/apis",
    "/apis/apps",
    "/apis/apps/v1",
    "/apis/policy/v1",
    "/apis/coordination.k8s.io/v1",
    "/apis/bogus/v1",
    "/apis/apps/v9",
    "/version",
    "/openapi/v2",
    "/openapi/v3",
    "/openapi/v3/api/v1",
    "/openapi/v3/apis/apps/v1",
    "/openapi/v3/apis/nope/v1",
    "/healthz",
    "/livez",
    "/readyz",
    "/",
    "/api/v2",
    "/apis/apps/v1/namespaces",
    "/%00",
    "/api/v1/namespaces/fuzz/pods/a/b/c/d",
)


@dataclass
class Request:
    """What to send. `grpc`: `method` and `message` (or `raw` bytes); `http`: method, path, query,
    headers, body, and `truncate` (send fewer body bytes than Content-Length, then close)."""

    index: int
    door: str  # "grpc" | "http"
    op: str  # a short name for by_op counts: "grpc.Create", "http.PATCH.merge", ...
    identity: str
    method: str = ""
    message: Message | None = None
    raw: bytes | None = None
    path: str = ""
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    truncate: bool = False
    note: str = ""  # what was mutated

    def record(self) -> dict[str, Any]:
        """A JSON-able description (bodies cut to 2 KiB; the seed and index replay it exactly)."""
        out: dict[str, Any] = {
            "index": self.index,
            "door": self.door,
            "op": self.op,
            "identity": self.identity,
        }
        if self.door == "grpc":
            out["method"] = self.method
            if self.raw is not None:
                out["raw_hex"] = self.raw[:1024].hex()
                out["raw_len"] = len(self.raw)
            elif self.message is not None:
                text = str(self.message)
                out["message"] = text[:2048]
                out["message_bytes"] = self.message.ByteSize()
        else:
            out.update(method=self.method, path=self.path, query=self.query, headers=self.headers)
            out["body"] = self.body[:2048].decode("utf-8", "replace")
            out["body_len"] = len(self.body)
            out["truncate"] = self.truncate
        if self.note:
            out["note"] = self.note
        return out


def rng_for(seed: int, index: int) -> random.Random:
    return random.Random(f"{seed}:{index}")


def make_request(seed: int, index: int) -> Request:
    rng = rng_for(seed, index)
    identity = rng.choices(IDENTITIES, (5, 2, 2, 2, 1))[0]
    if rng.random() < 0.5:
        return _grpc(rng, index, identity)
    return _http(rng, index, identity)


# ---------------------------------------------------------------------- objects


def _kind(rng: random.Random) -> Kind:
    return rng.choice(KINDS)


def body_object(rng: random.Random, kind: Kind) -> tuple[dict[str, Any], str]:
    """A valid object of `kind` (40 %), or a mutated one."""
    obj = values.valid_object(rng, kind)
    if rng.random() < 0.4:
        return obj, "valid"
    return values.mutate(rng, obj)


def _grpc_object(rng: random.Random, kind: Kind) -> tuple[pb.Object, str]:
    """An `Object` for a write: from a (mutated) JSON object, or mutated through its descriptor."""
    body, note = body_object(rng, kind)
    obj = protogen.object_of(kind, body)
    if obj is None:  # the JSON mutation does not even decode: start from a valid one
        obj = protogen.object_of(kind, values.valid_object(rng, kind)) or pb.Object()
        note = "valid"
    pick = rng.random()
    if pick < 0.3:
        obj = protogen.mutate_message(rng, obj, rng.randint(1, 4))  # type: ignore[assignment]
        note += " + descriptor mutation"
    elif pick < 0.35:
        obj = pb.Object()
        getattr(obj, kind.field).CopyFrom(protogen.random_fill(rng, kind.message()))
        note = "random message"
    elif pick < 0.37:
        obj = pb.Object()
        note = "empty Object"
    return obj, note


def _fence(rng: random.Random) -> pb.FenceToken | None:
    if rng.random() < 0.85:
        return None
    return pb.FenceToken(
        lease_namespace=rng.choice(("kube-system", "", "fuzz", "\x00")),
        lease_name=rng.choice(("kube-scheduler", "nope", "")),
        holder_identity=rng.choice(("fuzz", "", "x" * 300)),
        lease_transitions=rng.choice((0, 1, -1, 2**31 - 1)),
    )


# ---------------------------------------------------------------------- gRPC


def _resource(rng: random.Random) -> str:
    return _kind(rng).resource if rng.random() < 0.9 else rng.choice(("bogus", "", "Pods", "pod", "apps/v1"))


def _grpc_message(rng: random.Random, method: str) -> tuple[Message, str]:
    ns, name, kind = values.namespace(rng), values.name(rng), _kind(rng)
    note = ""
    msg: Message
    if method == "Get":
        msg = pb.GetRequest(resource=_resource(rng), namespace=ns, name=name)
    elif method in ("List", "Watch"):
        common = dict(
            resource=_resource(rng),
            namespace=ns if rng.random() < 0.7 else "",
            label_selector=values.selector(rng, field=False),
            field_selector=values.selector(rng, field=True),
            resource_version=values.resource_version(rng),
        )
        if method == "List":
            msg = pb.ListRequest(
                **common,
                limit=rng.choice((0, 1, 3, -1, 2**62)),
                **{"continue": rng.choice(("", "", "garbage", "eyJydiI6MX0", "\x00", HUGE_CONTINUE))},
            )
        else:
            msg = pb.WatchRequest(
                **common,
                allow_watch_bookmarks=rng.random() < 0.5,
                send_initial_events=rng.random() < 0.3,
                timeout_seconds=rng.choice((1, 1, 0, -5, 2**40)),
            )
    elif method in ("Create", "Update", "UpdateStatus"):
        obj, note = _grpc_object(rng, kind)
        msg = pb.WriteRequest(object=obj, fence=_fence(rng), dry_run=rng.random() < 0.1)
    elif method == "Delete":
        msg = pb.DeleteRequest(
            resource=_resource(rng),
            namespace=ns,
            name=name,
            resource_version=rng.choice(("", "", values.resource_version(rng))),
            uid=rng.choice(("", "", "nope")),
            fence=_fence(rng),
            propagation_policy=rng.choice(("", "", "Orphan", "Foreground", "Background", "Bogus")),
            dry_run=rng.random() < 0.1,
        )
        if rng.random() < 0.3:
            msg.grace_period_seconds = rng.choice((0, 1, -1, 2**62))  # type: ignore[attr-defined]
    elif method == "Bind":
        msg = _bind_request(rng, ns, name)
    elif method == "BindBatch":
        # Mostly a few bindings (of pods that may or may not exist), sometimes none, sometimes past
        # the server's 1000 (refused as a whole), each binding as the Bind fuzzer makes them.
        count = rng.choice((0, 1, 2, 5, 17, 1001)) if rng.random() < 0.95 else 1000
        msg = pb.BindBatchRequest(
            binds=[_bind_request(rng, values.namespace(rng), values.name(rng)) for _ in range(count)]
        )
    elif method == "CreateBatch":
        # A few creates of any kind: the first fuzzed as a Create's object is, the rest valid (so a
        # batch costs the server what a few Create calls do); sometimes none, sometimes past the
        # server's 1000 (refused as a whole before any create runs, so those may be one tiny object).
        count = rng.choice((0, 1, 2, 5, 17, 1001))
        creates = []
        if count > 1000:
            tiny = pb.Object(pod=pb.Pod(metadata=pb.ObjectMeta(namespace=ns, name=name)))
            creates = [pb.WriteRequest(object=tiny)] * count
        else:
            for i in range(count):
                kind = _kind(rng)
                if i == 0:
                    obj, _note = _grpc_object(rng, kind)
                else:
                    obj = protogen.object_of(kind, values.valid_object(rng, kind)) or pb.Object()
                creates.append(pb.WriteRequest(object=obj, fence=_fence(rng), dry_run=rng.random() < 0.1))
        msg = pb.CreateBatchRequest(creates=creates)
    else:  # Evict
        msg = pb.EvictRequest(
            namespace=ns,
            name=name,
            fence=_fence(rng),
            dry_run=rng.random() < 0.2,
            resource_version=rng.choice(("", "", values.resource_version(rng))),
            uid=rng.choice(("", "", "nope")),
        )
        if rng.random() < 0.3:
            msg.grace_period_seconds = rng.choice((0, 5, -3, 2**62))  # type: ignore[attr-defined]
    return msg, note


def _bind_request(rng: random.Random, ns: str, name: str) -> pb.BindRequest:
    binding = pb.Binding(
        metadata=pb.ObjectMeta(name=name, namespace=ns),
        target=pb.ObjectReference(kind=rng.choice(("Node", "", "Pod")), name=rng.choice((NODE, "", "UPPER"))),
    )
    if rng.random() < 0.2:
        binding = protogen.mutate_message(rng, binding)  # type: ignore[assignment]
    return pb.BindRequest(binding=binding, fence=_fence(rng))


def _grpc(rng: random.Random, index: int, identity: str) -> Request:
    method = rng.choice(GRPC_METHODS)
    msg, note = _grpc_message(rng, method)
    if rng.random() < 0.12:
        raw = protogen.raw_payloads(rng, msg.SerializeToString())
        method = rng.choice((*GRPC_METHODS, "Nope")) if rng.random() < 0.9 else method
        return Request(
            index, "grpc", f"grpc.raw.{method}", identity, method=method, raw=raw, note="raw bytes"
        )
    return Request(index, "grpc", f"grpc.{method}", identity, method=method, message=msg, note=note)


# ---------------------------------------------------------------------- HTTP


def _base(kind: Kind, ns: str) -> str:
    root = "/api/v1" if kind.api_version == "v1" else f"/apis/{kind.api_version}"
    if kind.namespaced and ns:
        return f"{root}/namespaces/{ns}/{kind.resource}"
    return f"{root}/{kind.resource}"


def _encode(rng: random.Random, value: Any) -> tuple[bytes, str]:
    """A body: JSON (sometimes truncated, sometimes not JSON at all), and a note."""
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):
        text = "[" * 5000
    pick = rng.random()
    if pick < 0.06:
        return text[: rng.randrange(max(len(text), 1))].encode(), "truncated JSON"
    if pick < 0.09:
        return rng.choice((b"\xff\xfe\x00", b"null", b"[]", b"42", b'"x"', b"{", b"a: [")), "not an object"
    if pick < 0.11:
        return ("[" * 100_000).encode(), "deep JSON"
    return text.encode(), ""


def _query(rng: random.Random, verb: str) -> dict[str, str]:
    q: dict[str, str] = {}
    if verb in ("list", "watch"):
        if rng.random() < 0.5:
            q["labelSelector"] = values.selector(rng, field=False)
        if rng.random() < 0.5:
            q["fieldSelector"] = values.selector(rng, field=True)
        if rng.random() < 0.5:
            q["resourceVersion"] = values.resource_version(rng)
        if rng.random() < 0.2:
            q["resourceVersionMatch"] = rng.choice(("NotOlderThan", "Exact", "Bogus"))
        if verb == "list" and rng.random() < 0.3:
            q["limit"] = rng.choice(("1", "0", "-1", "abc", "99999999999999999999"))
        if verb == "list" and rng.random() < 0.1:
            q["continue"] = rng.choice(("junk", "eyJ9", "%%", HUGE_CONTINUE))
        if verb == "watch":
            q["watch"] = rng.choice(("true", "1"))
            q["timeoutSeconds"] = rng.choice(("1", "1", "0", "-1", "abc", "99999999999999999999"))
            if rng.random() < 0.4:
                q["allowWatchBookmarks"] = rng.choice(("true", "false", "maybe"))
            if rng.random() < 0.2:
                q["sendInitialEvents"] = rng.choice(("true", "x"))
    if verb in ("create", "update", "patch", "delete") and rng.random() < 0.3:
        q["dryRun"] = rng.choice(("All", "", "Bogus"))
    if verb in ("create", "update", "patch") and rng.random() < 0.3:
        q["fieldValidation"] = rng.choice(("Strict", "Warn", "Ignore", "Bogus"))
    if verb == "patch" and rng.random() < 0.5:
        q["fieldManager"] = rng.choice(("fuzz", "", "x" * 200))
        if rng.random() < 0.3:
            q["force"] = rng.choice(("true", "false", "x"))
    if verb == "delete" and rng.random() < 0.3:
        q["gracePeriodSeconds"] = rng.choice(("0", "-1", "abc", "99999999999999999999"))
        q["propagationPolicy"] = rng.choice(("Orphan", "Bogus", "Foreground"))
    return q


def _patch_body(rng: random.Random, ctype: str, kind: Kind) -> Any:
    if ctype == PATCH_TYPES[1]:  # JSON patch: a list of ops, good and bad
        ops: list[Any] = []
        for _ in range(rng.randint(0, 4)):
            op: dict[str, Any] = {
                "op": rng.choice(("add", "remove", "replace", "move", "copy", "test", "bogus")),
                "path": rng.choice(
                    (
                        "/metadata/labels/x",
                        "/spec",
                        "/metadata/name",
                        "/spec/containers/0",
                        "/spec/containers/-",
                        "",
                        "x",
                        "/a~2b",
                        "/metadata/labels/~1",
                    )
                ),
            }
            if rng.random() < 0.7:
                op["value"] = values.bad_value(rng) if rng.random() < 0.5 else {"a": "b"}
            if op["op"] in ("move", "copy"):
                op["from"] = rng.choice(("/metadata/labels", "/nope", ""))
            ops.append(op)
        return ops if rng.random() < 0.9 else values.bad_value(rng)
    obj, _ = body_object(rng, kind)
    if rng.random() < 0.5:  # a partial object with patch directives
        obj = {
            "metadata": {"labels": {"x": rng.choice(("y", None))}},
            "spec": rng.choice((None, {}, {"$patch": "replace"}, {"$retainKeys": ["a"]})),
        }
        if rng.random() < 0.3:
            obj["spec"] = {"containers": [{"name": "app", "$patch": rng.choice(("delete", "bogus"))}]}
    return obj


def _http(rng: random.Random, index: int, identity: str) -> Request:
    r = rng.random()
    if r < 0.08:
        path = rng.choice(DISCOVERY)
        accept = {"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
        method = "GET" if rng.random() < 0.9 else rng.choice(("POST", "DELETE", "PUT"))
        return Request(
            index,
            "http",
            "http.discovery",
            identity,
            method,
            path=path,
            headers=accept if rng.random() < 0.2 else {},
        )
    kind = _kind(rng)
    ns = values.namespace(rng) if kind.namespaced else ""
    base = _base(kind, ns if rng.random() < 0.9 or not kind.namespaced else "")
    name = values.name(rng)
    headers: dict[str, str] = {}
    verb = rng.choices(
        (
            "get",
            "list",
            "watch",
            "create",
            "update",
            "status",
            "patch",
            "delete",
            "deletecollection",
            "bind",
            "evict",
            "truncated",
            "scale",
            "other",
        ),
        (8, 8, 4, 12, 8, 5, 14, 6, 2, 5, 5, 3, 4, 2),
    )[0]
    if rng.random() < 0.2:
        headers["Accept"] = rng.choice(
            (
                "application/json;as=Table;v=v1;g=meta.k8s.io",
                "application/yaml",
                "text/html",
                "application/json",
            )
        )
    if verb not in ("get", "list", "watch") and rng.random() < 0.1:
        headers["X-Kse-Fence"] = rng.choice(
            (
                "kube-system/kube-scheduler,fuzz,0",
                "kube-system/kube-scheduler,fuzz,99999999999",
                "a,b",
                "/,,",
                "x/y,z,-1",
                "kube-system/kube-scheduler,h,1e3",
            )
        )
    note = ""
    if verb == "get":
        return Request(index, "http", "http.get", identity, "GET", path=f"{base}/{name}", headers=headers)
    if verb == "scale":
        return _scale(rng, index, identity, ns, name, headers)
    if verb in ("list", "watch"):
        return Request(
            index,
            "http",
            f"http.{verb}",
            identity,
            "GET",
            path=base,
            query=_query(rng, verb),
            headers=headers,
        )
    if verb in ("create", "update", "status", "truncated"):
        obj, note = body_object(rng, kind)
        body, enc_note = _encode(rng, obj)
        note = ", ".join(n for n in (note, enc_note) if n)
        headers["Content-Type"] = (
            "application/json"
            if rng.random() < 0.85
            else rng.choice(("application/yaml", *BAD_CONTENT_TYPES))
        )
        method, path = "POST", base
        if verb == "update":
            method, path = "PUT", f"{base}/{name}"
        elif verb == "status":
            method, path = rng.choice(("PUT", "PATCH")), f"{base}/{name}/status"
            if method == "PATCH":
                headers["Content-Type"] = rng.choice(PATCH_TYPES[::2])
        q = _query(rng, "create" if method == "POST" else "update")
        return Request(
            index,
            "http",
            f"http.{verb}",
            identity,
            method,
            path=path,
            query=q,
            headers=headers,
            body=body,
            truncate=verb == "truncated",
            note=note,
        )
    if verb == "patch":
        ctype = rng.choice(PATCH_TYPES) if rng.random() < 0.9 else rng.choice(BAD_CONTENT_TYPES)
        headers["Content-Type"] = ctype
        body, note = _encode(rng, _patch_body(rng, ctype, kind))
        short = {
            PATCH_TYPES[0]: "merge",
            PATCH_TYPES[1]: "json",
            PATCH_TYPES[2]: "strategic",
            PATCH_TYPES[3]: "apply",
        }
        op = f"http.PATCH.{short.get(ctype, 'bad-type')}"
        return Request(
            index,
            "http",
            op,
            identity,
            "PATCH",
            path=f"{base}/{name}",
            query=_query(rng, "patch"),
            headers=headers,
            body=body,
            note=note,
        )
    if verb in ("delete", "deletecollection"):
        body = b""
        if rng.random() < 0.3:
            opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
            if rng.random() < 0.5:
                opts["gracePeriodSeconds"] = values.bad_value(rng) if rng.random() < 0.5 else 0
            if rng.random() < 0.5:
                opts["preconditions"] = {
                    "resourceVersion": values.resource_version(rng),
                    "uid": rng.choice(("x", 5)),
                }
            body, note = _encode(rng, opts)
            headers["Content-Type"] = "application/json"
        elif rng.random() < 0.3:
            body, note = _protobuf_delete_options(rng), "protobuf DeleteOptions"
            headers["Content-Type"] = "application/vnd.kubernetes.protobuf"
        path = f"{base}/{name}" if verb == "delete" else base
        q = _query(rng, "delete")
        if verb == "deletecollection":
            q.update(_query(rng, "list"))
        return Request(
            index,
            "http",
            f"http.{verb}",
            identity,
            "DELETE",
            path=path,
            query=q,
            headers=headers,
            body=body,
            note=note,
        )
    if verb in ("bind", "evict"):
        pods = _base(KINDS[0], values.namespace(rng))
        if verb == "bind":
            doc: Any = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"kind": "Node", "name": rng.choice((NODE, "", "UPPER"))},
            }
        else:
            doc = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
            if rng.random() < 0.3:
                doc["deleteOptions"] = {"gracePeriodSeconds": rng.choice((0, -1, "x", 2**70))}
        if rng.random() < 0.5:
            doc, note = values.mutate(rng, doc)
        body, enc_note = _encode(rng, doc)
        headers["Content-Type"] = "application/json" if rng.random() < 0.9 else rng.choice(BAD_CONTENT_TYPES)
        sub = "binding" if verb == "bind" else "eviction"
        return Request(
            index,
            "http",
            f"http.{verb}",
            identity,
            "POST",
            path=f"{pods}/{name}/{sub}",
            headers=headers,
            body=body,
            note=", ".join(n for n in (note, enc_note) if n),
        )
    method = rng.choice(("OPTIONS", "HEAD", "PUT", "POST", "CONNECT", "TRACE"))
    path = rng.choice(
        (f"{base}/{name}/bogus", f"{base}", f"{base}/{name}/binding", f"{base}/{name}/status/x")
    )
    # CONNECT and TRACE requests have no content (RFC 9110 9.3.6, 9.3.8): a body sent with one is
    # not its body but the start of the next request on the connection, which the server's HTTP
    # parser then refuses (400, not a Status) on behalf of an innocent request.
    body = b"" if method in ("CONNECT", "TRACE") else b"{}"
    return Request(index, "http", "http.other", identity, method, path=path, headers=headers, body=body)


def _protobuf_delete_options(rng: random.Random) -> bytes:
    """A Kubernetes protobuf body (the "k8s\\x00" envelope of a runtime.Unknown), good or broken."""
    inner = b"\x08" + bytes([rng.randrange(256)]) if rng.random() < 0.5 else rng.randbytes(rng.randint(0, 24))
    type_meta = b"\x0a\x02v1\x12\x0dDeleteOptions"
    unknown = b"\x0a" + bytes([len(type_meta)]) + type_meta + b"\x12" + bytes([len(inner)]) + inner
    pick = rng.randrange(4)
    if pick == 0:
        return b"k8s\x00" + unknown
    if pick == 1:
        return b"k8s\x00" + unknown[: rng.randrange(len(unknown))]
    if pick == 2:
        return b"k8s\x00" + protogen.raw_payloads(rng, unknown)
    return rng.randbytes(rng.randint(0, 32))


def _scale(
    rng: random.Random, index: int, identity: str, ns: str, name: str, headers: dict[str, str]
) -> Request:
    """deployments|replicasets/NAME/scale: GET, PUT a Scale, or PATCH its spec.replicas."""
    resource = rng.choice(("deployments", "replicasets", "daemonsets"))
    path = f"/apis/apps/v1/namespaces/{ns or NAMESPACE}/{resource}/{name}/scale"
    method = rng.choice(("GET", "PUT", "PATCH", "POST"))
    scale: Any = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": rng.choice((0, 2, -1, 2**31, "3", None))},
    }
    note = ""
    if rng.random() < 0.4:
        scale, note = values.mutate(rng, scale)
    if method == "PATCH":
        headers["Content-Type"] = rng.choice(PATCH_TYPES[:3])
        scale = scale if rng.random() < 0.5 else {"spec": {"replicas": rng.choice((1, -5, "x", 2**40))}}
    else:
        headers["Content-Type"] = "application/json"
    body, enc_note = _encode(rng, scale) if method != "GET" else (b"", "")
    note = ", ".join(n for n in (note, enc_note) if n)
    return Request(
        index,
        "http",
        f"http.scale.{method}",
        identity,
        method,
        path=path,
        headers=headers,
        body=body,
        note=note,
    )
