"""The security matrix (tests/fixtures/security_matrix.py) against one live API server, over both doors.

Every row of the table is sent as every identity over gRPC and over HTTPS. A denied cell must come
back PERMISSION_DENIED (gRPC) or 403 Forbidden (HTTPS) with upstream's message; an allowed cell
must succeed. Then node isolation spelled out, and the TLS refusals on both doors: no certificate,
one from a foreign CA, an expired one, a not-yet-valid one, and serverAuth-only certificates offered
as client certificates (each checked for the reason the server's TLS stack gives).

One server serves the whole module (per xdist worker) to keep this suite to seconds. Rows never
depend on each other's effects: each runs on an object of its own (`prepare`), and the few that
must share one (a node's own Node or Lease, named by the rule) run in phases (`phase`).
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import grpc.aio
import pytest

from certs.layout import PKI, CertPaths
from certs.pki import issue_leaf, load_ca, write_pair
from kse.objects.kinds import BY_KIND, BY_RESOURCE, Kind
from kse.objects.manifest import decode_object, to_dict
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pbg
from tests.fixtures.apiserver import ApiServer, launch_apiserver
from tests.fixtures.kube import HTTP, client_context, http_client
from tests.fixtures.pki import expired_client, issue_client
from tests.fixtures.polling import until
from tests.fixtures.security_matrix import IDENTITIES, MATRIX_NODES, ROWS, Row, identity_of

pytestmark = pytest.mark.integration

CONCURRENCY = 8  # requests in flight per test: enough to overlap round trips, not to flood 2 cores
CALL_TIMEOUT_S = 10.0
# Every row runs on an object of its own (see `prepare`), so an allowed request succeeds outright.
SUCCESS = frozenset({"OK", "200 Success", "201 Success"})


# ---------------------------------------------------------------- the server and its objects


@pytest.fixture(scope="module")
def server(etcd: Any, pki: PKI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """One API server for the module (each row brings its own objects). grpc core logs why it
    refuses a handshake at INFO, which the TLS tests read; the variable is read at the child's start."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GRPC_VERBOSITY", "INFO")
        srv = launch_apiserver(etcd, pki, tmp_path_factory.mktemp("secmx"))
    try:
        yield srv
    finally:
        srv.terminate()


def manifest(resource: str, namespace: str, name: str, node: str = "") -> dict[str, Any]:
    """A valid object of `resource` as the JSON a Kubernetes client sends."""
    kind = BY_RESOURCE[resource]
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    obj: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}
    if resource == "pods":
        obj["spec"] = {
            "containers": [{"name": "c", "image": "nginx"}],
            **({"nodeName": node} if node else {}),
        }
    elif resource == "leases":
        obj["spec"] = {"holderIdentity": name, "leaseDurationSeconds": 15}
    elif resource == "events":
        obj |= {"reason": "Matrix", "type": "Normal", "involvedObject": {"kind": "Node", "name": "node-a"}}
    elif resource == "priorityclasses":
        obj["value"] = 5
    elif resource == "services":
        obj["spec"] = {"selector": {"app": name}, "ports": [{"port": 80}]}
    elif resource == "poddisruptionbudgets":
        obj["spec"] = {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}}
    elif resource in ("replicasets", "deployments", "daemonsets"):
        template = {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
        obj["spec"] = {"selector": {"matchLabels": {"app": name}}, "template": template}
        if resource != "daemonsets":
            obj["spec"]["replicas"] = 0
    return obj


def to_object(obj: dict[str, Any]) -> pb.Object:
    """The JSON form as the gRPC door's message (the same decoder the HTTP door uses)."""
    return decode_object(obj, BY_KIND[obj["kind"]]).obj


# ---------------------------------------------------------------- one request, either door


@dataclass(frozen=True)
class Answer:
    denied: bool
    code: str  # gRPC status name or HTTP status
    message: str


@dataclass(frozen=True)
class Request:
    """A row made concrete: the object's name, and the body a create or update sends."""

    row: Row
    name: str
    body: dict[str, Any] | None

    @property
    def kind(self) -> Kind:
        return BY_RESOURCE[self.row.kind_resource]


async def grpc_send(stub: pbg.ResourcesStub, req: Request) -> Answer:
    row, ns, name = req.row, req.row.namespace, req.name
    res = row.kind_resource
    try:
        if row.verb == "watch":
            return await _grpc_watch(stub, res, ns)
        call: Any
        if row.verb == "get":
            call = stub.Get(pb.GetRequest(resource=res, namespace=ns, name=name), timeout=CALL_TIMEOUT_S)
        elif row.verb == "list":
            call = stub.List(pb.ListRequest(resource=res, namespace=ns), timeout=CALL_TIMEOUT_S)
        elif row.resource == "pods/binding":
            binding = pb.Binding(
                metadata=pb.ObjectMeta(name=name, namespace=ns), target=pb.ObjectReference(name="node-a")
            )
            call = stub.Bind(pb.BindRequest(binding=binding), timeout=CALL_TIMEOUT_S)
        elif row.resource == "pods/eviction":
            call = stub.Evict(pb.EvictRequest(namespace=ns, name=name), timeout=CALL_TIMEOUT_S)
        elif row.verb == "delete":
            call = stub.Delete(
                pb.DeleteRequest(resource=res, namespace=ns, name=name), timeout=CALL_TIMEOUT_S
            )
        else:
            assert req.body is not None
            write = pb.WriteRequest(object=to_object(req.body))
            method = {"create": stub.Create, "update": stub.UpdateStatus if row.subresource else stub.Update}
            call = method[row.verb](write, timeout=CALL_TIMEOUT_S)
        await call
    except grpc.aio.AioRpcError as e:
        return Answer(e.code() == grpc.StatusCode.PERMISSION_DENIED, e.code().name, e.details() or "")
    return Answer(False, "OK", "")


async def _grpc_watch(stub: pbg.ResourcesStub, resource: str, ns: str) -> Answer:
    """Start a watch: its initial metadata comes once it is authorized and registered."""
    call = stub.Watch(pb.WatchRequest(resource=resource, namespace=ns, resource_version="0"))
    await asyncio.wait_for(call.initial_metadata(), CALL_TIMEOUT_S)
    if call.done():
        code = await call.code()
        if code != grpc.StatusCode.OK:
            details = await call.details()
            return Answer(code == grpc.StatusCode.PERMISSION_DENIED, code.name, details or "")
    call.cancel()
    return Answer(False, "OK", "")


def http_path(kind: Kind, ns: str, name: str = "", sub: str = "") -> str:
    base = "/api/v1" if kind.api_version == "v1" else f"/apis/{kind.api_version}"
    parts = [base, *(["namespaces", ns] if ns else []), kind.resource, *([name] if name else []), sub]
    return "/" + "/".join(p.strip("/") for p in parts if p)


async def http_send(http: HTTP, req: Request) -> Answer:
    row, kind, ns, name = req.row, req.kind, req.row.namespace, req.name
    if row.verb == "watch":
        resp = await http.stream(http_path(kind, ns) + "?watch=1")
        try:
            body = await resp.json() if resp.status != 200 else {}
        finally:
            resp.close()
        return _http_answer(resp.status, body)
    if row.verb == "get":
        code, body, _ = await http.call("GET", http_path(kind, ns, name))
    elif row.verb == "list":
        code, body, _ = await http.call("GET", http_path(kind, ns))
    elif row.resource == "pods/binding":
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"name": "node-a"},
        }
        code, body, _ = await http.call("POST", http_path(kind, ns, name, "binding"), binding)
    elif row.resource == "pods/eviction":
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
        }
        code, body, _ = await http.call("POST", http_path(kind, ns, name, "eviction"), eviction)
    elif row.verb == "create":
        code, body, _ = await http.call("POST", http_path(kind, ns), req.body)
    elif row.verb == "update":
        code, body, _ = await http.call("PUT", http_path(kind, ns, name, row.subresource), req.body)
    else:
        code, body, _ = await http.call("DELETE", http_path(kind, ns, name))
    return _http_answer(code, body)


def _http_answer(code: int, body: Any) -> Answer:
    """The code as "403 Forbidden" (HTTP status and the Status' reason), "200 Success" for success."""
    status = body if isinstance(body, dict) else {}
    reason = "Success" if code < 300 else str(status.get("reason", ""))
    message = str(status.get("message", "")) if code >= 300 else ""
    return Answer(code == 403, f"{code} {reason}", message)


def forbidden_message(req: Request, user: str) -> str:
    """kube-apiserver's Forbidden text (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/
    errors.go): the object is named only when the URL names it, so not for a create."""
    kind, row = req.kind, req.row
    qualified = f"{kind.resource}.{kind.group}" if kind.group else kind.resource
    named = row.verb not in ("list", "watch") and not (row.verb == "create" and not row.subresource)
    subject = f'{qualified} "{req.name}"' if named else qualified
    where = f'in the namespace "{row.namespace}"' if row.namespace else "at the cluster scope"
    return (
        f'{subject} is forbidden: User "{user}" cannot {row.verb} resource "{row.resource}" '
        f'in API group "{kind.group}" {where}'
    )


# ---------------------------------------------------------------- the matrix


async def prepare(admin: pbg.ResourcesStub, row: Row, column: str, door: str) -> Request:
    """The concrete request, on an object of its own where the answer does not hang on the name.

    A pod row gets a fresh pod bound as the row says; an event, priority class or kube-system
    lease row a fresh object (or, for a create, a fresh name). A row whose answer is about the name
    (a node's own Node or Lease) uses that name, and the object is put back first if an earlier
    row deleted it. An update sends the stored object with one annotation added, as a client does.
    """
    suffix = f"{column}-{door}-{uuid.uuid4().hex[:6]}"
    name = row.name
    if row.pod_on is not None:
        name = f"pod-{suffix}"
        await _create(admin, manifest("pods", row.namespace, name, row.pod_on))
    elif name in MATRIX_NODES:
        if row.verb == "create":
            await _delete(admin, row.kind_resource, row.namespace, name)
        else:
            await _create(admin, manifest(row.kind_resource, row.namespace, name), exist_ok=True)
    elif row.verb == "create":
        name = f"{name or 'new-pod'}-{suffix}"
    elif name:
        name = f"{name}-{suffix}"
        await _create(admin, manifest(row.kind_resource, row.namespace, name))
    body = None
    if row.verb == "create" and not row.subresource:
        body = manifest(row.kind_resource, row.namespace, name)
    elif row.verb == "update":
        stored = await admin.Get(
            pb.GetRequest(resource=row.kind_resource, namespace=row.namespace, name=name),
            timeout=CALL_TIMEOUT_S,
        )
        body = to_dict(stored)
        body["metadata"].pop("resourceVersion", None)
        body["metadata"].setdefault("annotations", {})["matrix"] = suffix
    return Request(row, name, body)


async def _create(admin: pbg.ResourcesStub, obj: dict[str, Any], *, exist_ok: bool = False) -> None:
    try:
        await admin.Create(pb.WriteRequest(object=to_object(obj)), timeout=CALL_TIMEOUT_S)
    except grpc.aio.AioRpcError as e:
        if not (exist_ok and e.code() == grpc.StatusCode.ALREADY_EXISTS):
            raise


async def _delete(admin: pbg.ResourcesStub, resource: str, namespace: str, name: str) -> None:
    try:
        await admin.Delete(
            pb.DeleteRequest(resource=resource, namespace=namespace, name=name), timeout=CALL_TIMEOUT_S
        )
    except grpc.aio.AioRpcError as e:
        if e.code() != grpc.StatusCode.NOT_FOUND:
            raise


def phase(row: Row) -> int:
    """When a row runs: the deletes, then the creates of a node's own Node or Lease come after the
    rows that read or update the same object, so that none of them finds it missing or present."""
    if row.name in MATRIX_NODES and row.verb in ("delete", "create"):
        return 1 if row.verb == "delete" else 2
    return 0


@pytest.mark.parametrize("door", ["grpc", "https"])
@pytest.mark.parametrize("column", list(IDENTITIES))
async def test_matrix(server: ApiServer, column: str, door: str) -> None:
    user = identity_of(column).user
    admin = pbg.ResourcesStub(server.raw_channel("admin"))
    limit = asyncio.Semaphore(CONCURRENCY)
    try:
        async with http_client(server, IDENTITIES[column]) as http:
            stub = pbg.ResourcesStub(server.raw_channel(IDENTITIES[column]))

            async def one(row: Row) -> str | None:
                async with limit:
                    req = await prepare(admin, row, column, door)
                    answer = await (grpc_send(stub, req) if door == "grpc" else http_send(http, req))
                want = row.cells()[column]
                label = f"{row.label()} as {column} over {door}"
                if want and answer.code not in SUCCESS:
                    return f"{label}: expected allowed, got {answer.code}: {answer.message}"
                if not want and answer.code not in ("PERMISSION_DENIED", "403 Forbidden"):
                    return f"{label}: expected denied, got {answer.code}: {answer.message}"
                expected = forbidden_message(req, user)
                if not want and not (
                    answer.message == expected or answer.message.startswith(expected + ": ")
                ):
                    return f"{label}: denial message {answer.message!r}, expected {expected!r}"
                return None

            failures: list[str] = []
            for step in (0, 1, 2):
                answers = await asyncio.gather(*(one(r) for r in ROWS if phase(r) == step))
                failures += [f for f in answers if f]
    finally:
        await server.close_channels()
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------- node isolation, spelled out


@pytest.mark.parametrize("door", ["grpc", "https"])
async def test_node_cannot_touch_another_nodes_objects(server: ApiServer, door: str) -> None:
    """`system:node:node-a` writes its own Node and Lease, never node-b's (each denial says why)."""
    admin = pbg.ResourcesStub(server.raw_channel("admin"))
    try:
        async with http_client(server, IDENTITIES["node-a"]) as http:
            stub = pbg.ResourcesStub(server.raw_channel(IDENTITIES["node-a"]))
            for resource, ns in (("nodes", ""), ("nodes/status", ""), ("leases", "kube-node-lease")):
                for node, allowed in (("node-a", True), ("node-b", False)):
                    row = Row("update", resource, ns, "", name=node)
                    req = await prepare(admin, row, "node-a", door)
                    answer = await (grpc_send(stub, req) if door == "grpc" else http_send(http, req))
                    assert (answer.code in SUCCESS) == allowed and answer.denied != allowed, (
                        row.label(),
                        answer,
                    )
                    if not allowed:
                        assert answer.message.endswith(
                            "no relationship found between node 'node-a' and this object"
                        ), answer
    finally:
        await server.close_channels()


# ---------------------------------------------------------------- TLS refusals


def _refused_identities(pki: PKI, foreign_pki: PKI, dest: Path) -> dict[str, CertPaths | None]:
    soon = datetime.now(UTC) + timedelta(hours=2)
    return {
        "no client certificate": None,
        "foreign CA": foreign_pki.admin,
        "expired": expired_client(pki, dest / "expired", "kse:admin", ("system:masters",)),
        "not yet valid": issue_client(
            pki, dest / "future", "kse:admin", ("system:masters",), stem="future", now=soon
        ),
        # The API server's own pair: signed by the cluster CA, but for serverAuth only.
        "serving cert as client cert": pki.apiserver,
        # The same wrong usage on an identity that is otherwise all-powerful: only the EKU refuses it.
        "admin cert for serverAuth only": _server_only(
            pki, dest / "server-only", "kse:admin", ("system:masters",)
        ),
    }


def _server_only(pki: PKI, dest: Path, common_name: str, groups: tuple[str, ...]) -> CertPaths:
    dest.mkdir(parents=True, exist_ok=True)
    paths = CertPaths("server-only", dest / "server-only.crt", dest / "server-only.key", pki.ca_bundle)
    pair = issue_leaf(load_ca(pki.dir), common_name, groups, ("localhost",), server=True, client=False)
    write_pair(paths, pair)
    return paths


# Why the server's TLS stack refuses each (grpc core logs it; the client only sees the handshake end).
REFUSALS = {
    "no client certificate": "PEER_DID_NOT_RETURN_A_CERTIFICATE",
    "foreign CA": "unable to get local issuer certificate",
    "expired": "certificate has expired",
    "not yet valid": "certificate is not yet valid",
    "serving cert as client cert": "unsupported certificate purpose",
    "admin cert for serverAuth only": "unsupported certificate purpose",
}


@pytest.fixture(scope="module")
def refused(
    pki: PKI, foreign_pki: PKI, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, CertPaths | None]:
    return _refused_identities(pki, foreign_pki, tmp_path_factory.mktemp("refused"))


async def grpc_refused(server: ApiServer, paths: CertPaths | None) -> str:
    """What a List as `paths` gets: UNAVAILABLE when the handshake is refused."""
    root = server.pki.ca_bundle.read_bytes()
    creds = (
        grpc.ssl_channel_credentials(root)
        if paths is None
        else grpc.ssl_channel_credentials(root, paths.key.read_bytes(), paths.cert.read_bytes())
    )
    channel = grpc.aio.secure_channel(
        server.address, creds, options=[("grpc.ssl_target_name_override", "localhost")]
    )
    try:
        await pbg.ResourcesStub(channel).List(pb.ListRequest(resource="pods"), timeout=CALL_TIMEOUT_S)
    except grpc.aio.AioRpcError as e:
        return e.code().name
    finally:
        await channel.close()
    return "OK"


async def https_refused(server: ApiServer, paths: CertPaths | None) -> str:
    """What a GET as `paths` gets: an HTTP status if the handshake was accepted, else the error."""
    ctx: ssl.SSLContext = client_context(paths, server.pki.ca_bundle)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT_S)) as session:
            async with session.get(
                server.http_url + "/api/v1/pods", ssl=ctx, server_hostname="localhost"
            ) as resp:
                return str(resp.status)
    except (aiohttp.ClientError, ssl.SSLError, ConnectionError) as e:
        return f"refused ({type(e).__name__})"


@pytest.mark.parametrize("case", REFUSALS)
async def test_tls_refusals(server: ApiServer, refused: dict[str, CertPaths | None], case: str) -> None:
    paths = refused[case]
    assert await grpc_refused(server, paths) == "UNAVAILABLE", f"gRPC accepted a client with {case}"
    # ...and for the reason the case is about, not for another flaw of the test's certificate.
    await until(lambda: REFUSALS[case] in server.log(), f"the server to log {REFUSALS[case]!r}")
    answer = await https_refused(server, paths)
    assert answer.startswith("refused"), f"HTTPS accepted a client with {case}: HTTP {answer}"


async def test_tls_control_a_valid_client_is_accepted(server: ApiServer) -> None:
    """The refusals above fail for the certificate, not for the way the test connects."""
    assert await grpc_refused(server, server.pki.admin) == "OK"
    assert await https_refused(server, server.pki.admin) == "200"
