"""Authentication and authorization through the real server: every rule, per identity, both ways."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from certs.layout import CertPaths
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pbg
from tests.fixtures.apiserver import ApiServer, make_node, make_pod, rpc_error

pytestmark = pytest.mark.integration

OK = grpc.StatusCode.OK
DENIED = grpc.StatusCode.PERMISSION_DENIED
Op = Callable[[Any], Awaitable[Any]]


async def setup_world(admin: Any) -> None:
    for node in ("node-a", "node-b"):
        await admin.Create(pb.WriteRequest(object=make_node(node)))
    await admin.Create(pb.WriteRequest(object=make_pod("on-a", node="node-a")))
    await admin.Create(pb.WriteRequest(object=make_pod("on-b", node="node-b")))
    for name in ("unbound", "victim", "victim2"):
        await admin.Create(pb.WriteRequest(object=make_pod(name)))
    await admin.Create(pb.WriteRequest(object=make_pod("del-a", node="node-a")))
    await admin.Create(pb.WriteRequest(object=make_pod("del-b", node="node-b")))
    for ns, name in (
        ("kube-node-lease", "node-a"),
        ("kube-node-lease", "node-b"),
        ("kube-system", "kube-scheduler"),
    ):
        await admin.Create(
            pb.WriteRequest(
                object=pb.Object(
                    lease=pb.Lease(
                        metadata=pb.ObjectMeta(name=name, namespace=ns),
                        spec=pb.LeaseSpec(holder_identity=name),
                    )
                )
            )
        )
    await admin.Create(
        pb.WriteRequest(
            object=pb.Object(
                event=pb.Event(
                    metadata=pb.ObjectMeta(name="ev", namespace="default"), reason="R", type="Normal"
                )
            )
        )
    )
    await admin.Create(
        pb.WriteRequest(
            object=pb.Object(priority_class=pb.PriorityClass(metadata=pb.ObjectMeta(name="pc"), value=5))
        )
    )


# ---------------------------------------------------------------- operations


def get(resource: str, name: str, ns: str = "") -> Op:
    return lambda s: s.Get(pb.GetRequest(resource=resource, namespace=ns, name=name))


def list_(resource: str, ns: str = "") -> Op:
    return lambda s: s.List(pb.ListRequest(resource=resource, namespace=ns))


def watch_(resource: str) -> Op:
    """Start a watch; the server sends initial metadata once it is authorized and registered."""

    async def op(s: Any) -> Any:
        call = s.Watch(pb.WatchRequest(resource=resource, resource_version="0"))
        md = await call.initial_metadata()
        if call.done() and await call.code() != OK:
            raise _StatusError(await call.code(), await call.details())
        call.cancel()
        return md

    return op


class _StatusError(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.status = code
        self.text = details


def create(obj: pb.Object) -> Op:
    return lambda s: s.Create(pb.WriteRequest(object=obj))


async def _current(s_admin: Any, resource: str, ns: str, name: str) -> pb.Object:
    return await s_admin.Get(pb.GetRequest(resource=resource, namespace=ns, name=name))


def update(admin: Any, resource: str, name: str, ns: str = "", *, status: bool = False) -> Op:
    async def op(s: Any) -> Any:
        obj = await _current(admin, resource, ns, name)
        which = obj.WhichOneof("kind")
        getattr(obj, which).metadata.annotations["touched"] = "yes"
        if status:
            getattr(obj, which).status.conditions.add(type="Ready", status="True")
            return await s.UpdateStatus(pb.WriteRequest(object=obj))
        return await s.Update(pb.WriteRequest(object=obj))

    return op


def delete(resource: str, name: str, ns: str = "") -> Op:
    return lambda s: s.Delete(pb.DeleteRequest(resource=resource, namespace=ns, name=name))


def bind(name: str) -> Op:
    return lambda s: s.Bind(
        pb.BindRequest(
            binding=pb.Binding(
                metadata=pb.ObjectMeta(name=name, namespace="default"),
                target=pb.ObjectReference(name="node-a"),
            )
        )
    )


def evict(name: str) -> Op:
    return lambda s: s.Evict(pb.EvictRequest(namespace="default", name=name))


def lease(ns: str, name: str) -> pb.Object:
    return pb.Object(lease=pb.Lease(metadata=pb.ObjectMeta(name=name, namespace=ns)))


def event(name: str, ns: str = "default") -> pb.Object:
    return pb.Object(
        event=pb.Event(metadata=pb.ObjectMeta(name=name, namespace=ns), reason="R", type="Normal")
    )


async def run_table(
    server: ApiServer, identity: str | CertPaths, table: list[tuple[str, Op, grpc.StatusCode]]
) -> None:
    stub = pbg.ResourcesStub(await server.channel(identity))
    failures = []
    for label, op, expected in table:
        try:
            await op(stub)
            code, details = OK, ""
        except grpc.aio.AioRpcError as e:
            code, details = e.code(), e.details()
        except _StatusError as e:
            code, details = e.status, e.text
        if expected == OK and code != OK:
            failures.append(f"{label}: expected OK, got {code.name}: {details}")
        elif expected == DENIED and code != DENIED:
            failures.append(f"{label}: expected PERMISSION_DENIED, got {code.name}: {details}")
        elif expected == DENIED and " is forbidden: User " not in details:
            failures.append(f"{label}: denial message not in Kubernetes' shape: {details}")
    assert not failures, "\n".join(failures)


@pytest.fixture
async def world(apiserver: ApiServer) -> ApiServer:
    await setup_world(apiserver.stub("admin"))
    return apiserver


async def test_admin_may_do_everything(world: ApiServer):
    a = world.stub("admin")
    await run_table(
        world,
        "admin",
        [
            ("create node", create(make_node("n9")), OK),
            ("update node status", update(a, "nodes", "node-b", status=True), OK),
            ("bind", bind("unbound"), OK),
            ("evict", evict("victim"), OK),
            ("delete pc", delete("priorityclasses", "pc"), OK),
            ("create lease anywhere", create(lease("team", "x")), OK),
        ],
    )


async def test_scheduler(world: ApiServer):
    a = world.stub("admin")
    await run_table(
        world,
        "scheduler-1",
        [
            ("get pod", get("pods", "on-a", "default"), OK),
            ("list pods", list_("pods"), OK),
            ("watch pods", watch_("pods"), OK),
            ("list nodes", list_("nodes"), OK),
            ("watch nodes", watch_("nodes"), OK),
            ("get pc", get("priorityclasses", "pc"), OK),
            ("watch pcs", watch_("priorityclasses"), OK),
            ("get lease", get("leases", "kube-scheduler", "kube-system"), OK),
            ("list events", list_("events"), OK),
            ("bind", bind("unbound"), OK),
            ("update pod status", update(a, "pods", "on-a", "default", status=True), OK),
            ("delete pod (preemption)", delete("pods", "victim", "default"), OK),
            ("create event", create(event("sched-ev")), OK),
            ("update event", update(a, "events", "ev", "default"), OK),
            ("create lease kube-system", create(lease("kube-system", "other")), OK),
            ("update lease kube-system", update(a, "leases", "kube-scheduler", "kube-system"), OK),
            ("create lease elsewhere", create(lease("default", "x")), DENIED),
            ("update node-lease", update(a, "leases", "node-a", "kube-node-lease"), DENIED),
            ("create pod", create(make_pod("s1")), DENIED),
            ("update pod", update(a, "pods", "on-a", "default"), DENIED),
            ("update node", update(a, "nodes", "node-a"), DENIED),
            ("update node status", update(a, "nodes", "node-a", status=True), DENIED),
            ("create node", create(make_node("n9")), DENIED),
            ("delete node", delete("nodes", "node-a"), DENIED),
            (
                "create pc",
                create(pb.Object(priority_class=pb.PriorityClass(metadata=pb.ObjectMeta(name="x")))),
                DENIED,
            ),
            ("evict", evict("victim2"), DENIED),
        ],
    )


async def test_node_a(world: ApiServer):
    a = world.stub("admin")
    await run_table(
        world,
        "node-node-a",
        [
            ("get other node", get("nodes", "node-b"), OK),
            ("list nodes", list_("nodes"), OK),
            ("watch nodes", watch_("nodes"), OK),
            ("list pods", list_("pods"), OK),
            ("watch pods", watch_("pods"), OK),
            ("get pod", get("pods", "on-b", "default"), OK),
            ("update own node", update(a, "nodes", "node-a"), OK),
            ("update own node status", update(a, "nodes", "node-a", status=True), OK),
            ("update own pod status", update(a, "pods", "on-a", "default", status=True), OK),
            ("delete own pod", delete("pods", "del-a", "default"), OK),
            ("get own lease", get("leases", "node-a", "kube-node-lease"), OK),
            ("update own lease", update(a, "leases", "node-a", "kube-node-lease"), OK),
            ("create event", create(event("node-ev")), OK),
            ("update other node", update(a, "nodes", "node-b"), DENIED),
            ("update other node status", update(a, "nodes", "node-b", status=True), DENIED),
            ("create other node", create(make_node("node-z")), DENIED),
            ("delete other node", delete("nodes", "node-b"), DENIED),
            ("delete own node", delete("nodes", "node-a"), OK),
            ("update other pod status", update(a, "pods", "on-b", "default", status=True), DENIED),
            ("update unbound pod status", update(a, "pods", "unbound", "default", status=True), DENIED),
            ("delete other pod", delete("pods", "del-b", "default"), DENIED),
            ("update pod spec", update(a, "pods", "on-a", "default"), DENIED),
            ("create pod", create(make_pod("mine", node="node-a")), DENIED),
            ("bind", bind("unbound"), DENIED),
            ("get other lease", get("leases", "node-b", "kube-node-lease"), DENIED),
            ("update other lease", update(a, "leases", "node-b", "kube-node-lease"), DENIED),
            ("create lease elsewhere", create(lease("kube-system", "node-a")), DENIED),
            ("list leases", list_("leases"), DENIED),
            ("update event", update(a, "events", "ev", "default"), DENIED),
            ("list pcs", list_("priorityclasses"), DENIED),
        ],
    )
    # The exact message for a pod not bound to the node.
    stub = pbg.ResourcesStub(await world.channel("node-node-a"))
    e = await rpc_error(update(a, "pods", "on-b", "default", status=True)(stub))
    assert e.details() == (
        'pods "on-b" is forbidden: User "system:node:node-a" cannot update resource "pods/status" in API group "" '  # noqa: E501
        "in the namespace \"default\": no relationship found between node 'node-a' and this object"
    )


async def test_node_may_create_its_own_node_and_lease(apiserver: ApiServer):
    await run_table(
        apiserver,
        "node-node-b",
        [
            ("create own node", create(make_node("node-b")), OK),
            ("create own lease", create(lease("kube-node-lease", "node-b")), OK),
            ("create other lease", create(lease("kube-node-lease", "node-a")), DENIED),
        ],
    )


async def test_nodesim_acts_for_any_node(world: ApiServer):
    a = world.stub("admin")
    await run_table(
        world,
        "nodesim",
        [
            ("create any node", create(make_node("sim-1")), OK),
            ("update node-a status", update(a, "nodes", "node-a", status=True), OK),
            ("update node-b status", update(a, "nodes", "node-b", status=True), OK),
            ("update pod on a", update(a, "pods", "on-a", "default", status=True), OK),
            ("update pod on b", update(a, "pods", "on-b", "default", status=True), OK),
            ("delete bound pod", delete("pods", "del-b", "default"), OK),
            ("create any node lease", create(lease("kube-node-lease", "sim-1")), OK),
            ("update node lease", update(a, "leases", "node-b", "kube-node-lease"), OK),
            ("create event", create(event("sim-ev")), OK),
            ("watch pods", watch_("pods"), OK),
            ("update unbound pod status", update(a, "pods", "unbound", "default", status=True), DENIED),
            ("delete unbound pod", delete("pods", "unbound", "default"), DENIED),
            ("create pod", create(make_pod("x")), DENIED),
            ("bind", bind("unbound"), DENIED),
            ("update scheduler lease", update(a, "leases", "kube-scheduler", "kube-system"), DENIED),
            ("delete any node", delete("nodes", "node-a"), OK),
        ],
    )


async def test_workload(world: ApiServer):
    a = world.stub("admin")
    await run_table(
        world,
        "workload",
        [
            ("create pod", create(make_pod("w1")), OK),
            ("get pod", get("pods", "w1", "default"), OK),
            ("list pods", list_("pods"), OK),
            ("watch pods", watch_("pods"), OK),
            ("delete pod", delete("pods", "w1", "default"), OK),
            ("get node", get("nodes", "node-a"), OK),
            ("list nodes", list_("nodes"), OK),
            ("watch nodes", watch_("nodes"), OK),
            ("update pod", update(a, "pods", "unbound", "default"), DENIED),
            ("update pod status", update(a, "pods", "unbound", "default", status=True), DENIED),
            ("bind", bind("unbound"), DENIED),
            ("evict", evict("unbound"), DENIED),
            ("create node", create(make_node("w")), DENIED),
            ("list leases", list_("leases"), DENIED),
            ("create event", create(event("w")), DENIED),
        ],
    )


async def test_chaos(world: ApiServer):
    a = world.stub("admin")
    await run_table(
        world,
        "chaos",
        [
            ("list pods", list_("pods"), OK),
            ("watch nodes", watch_("nodes"), OK),
            ("list leases", list_("leases"), OK),
            ("get lease", get("leases", "kube-scheduler", "kube-system"), OK),
            ("watch events", watch_("events"), OK),
            ("list pcs", list_("priorityclasses"), OK),
            ("delete pod", delete("pods", "victim", "default"), OK),
            ("create pod", create(make_pod("c")), DENIED),
            ("update lease", update(a, "leases", "kube-scheduler", "kube-system"), DENIED),
            ("delete node", delete("nodes", "node-a"), DENIED),
            ("bind", bind("unbound"), DENIED),
            ("update node status", update(a, "nodes", "node-a", status=True), DENIED),
        ],
    )


async def test_unknown_identity_is_denied_everything(world: ApiServer, pki, tmp_path):
    from tests.fixtures.pki import issue_client

    stranger = issue_client(pki, tmp_path / "stranger", "someone", ("somegroup",))
    await run_table(
        world,
        stranger,
        [
            ("get pod", get("pods", "on-a", "default"), DENIED),
            ("list nodes", list_("nodes"), DENIED),
            ("watch pods", watch_("pods"), DENIED),
            ("create pod", create(make_pod("x")), DENIED),
        ],
    )


# ---------------------------------------------------------------- TLS refusals


async def _handshake_refused(server: ApiServer, credentials: grpc.ChannelCredentials) -> None:
    channel = grpc.aio.secure_channel(
        server.address, credentials, options=[("grpc.ssl_target_name_override", "localhost")]
    )
    try:
        stub = pbg.ResourcesStub(channel)
        e = await rpc_error(stub.List(pb.ListRequest(resource="pods"), timeout=10))
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    finally:
        await channel.close()


async def test_no_client_cert_is_refused(apiserver: ApiServer):
    creds = grpc.ssl_channel_credentials(root_certificates=apiserver.pki.ca_bundle.read_bytes())
    await _handshake_refused(apiserver, creds)


async def test_foreign_ca_client_cert_is_refused(apiserver: ApiServer, foreign_pki):
    foreign = foreign_pki.admin
    creds = grpc.ssl_channel_credentials(
        root_certificates=apiserver.pki.ca_bundle.read_bytes(),
        private_key=foreign.key.read_bytes(),
        certificate_chain=foreign.cert.read_bytes(),
    )
    await _handshake_refused(apiserver, creds)


async def test_expired_client_cert_is_refused(apiserver: ApiServer, expired_client_cert):
    creds = grpc.ssl_channel_credentials(
        root_certificates=apiserver.pki.ca_bundle.read_bytes(),
        private_key=expired_client_cert.key.read_bytes(),
        certificate_chain=expired_client_cert.cert.read_bytes(),
    )
    await _handshake_refused(apiserver, creds)


async def test_server_not_trusted_by_a_foreign_bundle(apiserver: ApiServer, foreign_pki):
    own = apiserver.pki.admin
    creds = grpc.ssl_channel_credentials(
        root_certificates=foreign_pki.ca_bundle.read_bytes(),
        private_key=own.key.read_bytes(),
        certificate_chain=own.cert.read_bytes(),
    )
    await _handshake_refused(apiserver, creds)
    # And the same client with the right bundle works.
    ok = await apiserver.stub("admin").List(pb.ListRequest(resource="pods"))
    assert ok.metadata.resource_version
