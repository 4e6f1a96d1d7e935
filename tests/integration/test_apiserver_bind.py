"""Bind (pods/binding) and Evict: one CAS transaction, exactly one winner under contention."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, make_pod, rpc_error, trailing_revision

pytestmark = pytest.mark.integration


def binding(name: str, node: str, *, rv: str = "", uid: str = "", ns: str = "default") -> pb.BindRequest:
    return pb.BindRequest(
        binding=pb.Binding(
            metadata=pb.ObjectMeta(name=name, namespace=ns, resource_version=rv, uid=uid),
            target=pb.ObjectReference(kind="Node", name=node),
        )
    )


async def test_bind_sets_node_and_condition_in_one_revision(apiserver: ApiServer):
    stub = apiserver.stub("scheduler-1")
    admin = apiserver.stub("admin")
    pod = (await admin.Create(pb.WriteRequest(object=make_pod("p")))).pod
    call = stub.Bind(binding("p", "node-a", rv=pod.metadata.resource_version, uid=pod.metadata.uid))
    bound = (await call).pod
    rev = await trailing_revision(call)
    assert bound.spec.node_name == "node-a"
    assert bound.metadata.resource_version == str(rev) and rev == int(pod.metadata.resource_version) + 1
    [cond] = bound.status.conditions
    assert (cond.type, cond.status) == ("PodScheduled", "True") and cond.last_transition_time.endswith("Z")
    stored = (await admin.Get(pb.GetRequest(resource="pods", namespace="default", name="p"))).pod
    assert stored == bound


async def test_bind_refusals(apiserver: ApiServer):
    stub = apiserver.stub("scheduler-1")
    admin = apiserver.stub("admin")
    pod = (await admin.Create(pb.WriteRequest(object=make_pod("p")))).pod
    e = await rpc_error(stub.Bind(binding("p", "")))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "target.name: Required value" in e.details()
    e = await rpc_error(stub.Bind(binding("p", "node-a", rv=str(int(pod.metadata.resource_version) - 1))))
    assert e.code() == grpc.StatusCode.ABORTED and "ResourceVersion in precondition" in e.details()
    e = await rpc_error(stub.Bind(binding("p", "node-a", uid="not-the-uid")))
    assert e.code() == grpc.StatusCode.ABORTED and "UID in precondition: not-the-uid" in e.details()
    e = await rpc_error(stub.Bind(binding("nope", "node-a")))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    await stub.Bind(binding("p", "node-a"))
    e = await rpc_error(stub.Bind(binding("p", "node-b")))
    assert e.code() == grpc.StatusCode.ABORTED
    assert 'pod default/p is already assigned to node "node-a"' in e.details()
    # A stale resourceVersion against a bound pod reports the binding conflict too.
    e = await rpc_error(stub.Bind(binding("p", "node-b", rv=pod.metadata.resource_version)))
    assert e.code() == grpc.StatusCode.ABORTED


async def test_pod_created_with_node_name_is_bound(apiserver: ApiServer):
    admin = apiserver.stub("admin")
    await admin.Create(pb.WriteRequest(object=make_pod("static", node="node-b")))
    e = await rpc_error(apiserver.stub("scheduler-1").Bind(binding("static", "node-a")))
    assert e.code() == grpc.StatusCode.ABORTED and 'already assigned to node "node-b"' in e.details()


async def test_gated_pod_cannot_be_bound(apiserver: ApiServer):
    admin = apiserver.stub("admin")
    await admin.Create(
        pb.WriteRequest(object=make_pod("g", scheduling_gates=[pb.PodSchedulingGate(name="x.io/g")]))
    )
    e = await rpc_error(admin.Bind(binding("g", "node-a")))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "schedulingGates" in e.details()


async def test_sixteen_binders_exactly_one_wins(apiserver: ApiServer):
    admin = apiserver.stub("admin")
    stubs = [apiserver.stub(f"scheduler-{1 + i % 3}") for i in range(16)]
    for round_ in range(20):
        name = f"race-{round_}"
        await admin.Create(pb.WriteRequest(object=make_pod(name)))
        results = await asyncio.gather(
            *(s.Bind(binding(name, f"node-{i}")) for i, s in enumerate(stubs)), return_exceptions=True
        )
        winners = [r for r in results if isinstance(r, pb.Object)]
        losers = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(winners) == 1, results
        assert len(losers) == 15
        node = winners[0].pod.spec.node_name
        for e in losers:
            assert e.code() == grpc.StatusCode.ABORTED, e
            assert f'already assigned to node "{node}"' in e.details() or "modified" in e.details()
        stored = (await admin.Get(pb.GetRequest(resource="pods", namespace="default", name=name))).pod
        assert stored.spec.node_name == node
        assert stored.metadata.resource_version == winners[0].pod.metadata.resource_version


async def test_bind_right_after_create_does_not_need_the_cache(apiserver: ApiServer):
    admin = apiserver.stub("admin")
    for i in range(20):
        await admin.Create(pb.WriteRequest(object=make_pod(f"quick-{i}")))
        out = await admin.Bind(binding(f"quick-{i}", "node-a"))
        assert out.pod.spec.node_name == "node-a"


async def test_evict_deletes_the_pod(apiserver: ApiServer):
    admin = apiserver.stub("admin")
    p = (await admin.Create(pb.WriteRequest(object=make_pod("p")))).pod
    out = await admin.Evict(pb.EvictRequest(namespace="default", name="p"))
    assert out.pod.metadata.uid == p.metadata.uid
    assert int(out.pod.metadata.resource_version) > int(p.metadata.resource_version)
    e = await rpc_error(admin.Get(pb.GetRequest(resource="pods", namespace="default", name="p")))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    e = await rpc_error(admin.Evict(pb.EvictRequest(namespace="default", name="p")))
    assert e.code() == grpc.StatusCode.NOT_FOUND
