"""BindBatch (many pods/binding in one call) and the clientset that coalesces binds into it: each
binding answered, fenced and audited as its own Bind, and group-committed underneath."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from kse.audit import read_audit_log
from kse.client.clientset import Clientset
from kse.client.errors import ConflictError, FencedError, NotFoundError
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import (
    ApiServer,
    ApiServerFactory,
    make_pod,
    rpc_error,
    stale_scheduler_fence,
    trailing_revision,
)

pytestmark = pytest.mark.integration


def binding(name: str, node: str, *, uid: str = "", fence: pb.FenceToken | None = None) -> pb.BindRequest:
    req = pb.BindRequest(
        binding=pb.Binding(
            metadata=pb.ObjectMeta(name=name, namespace="default", uid=uid),
            target=pb.ObjectReference(kind="Node", name=node),
        )
    )
    if fence is not None:
        req.fence.CopyFrom(fence)
    return req


async def test_each_binding_of_a_batch_gets_its_own_answer_and_audit_record(
    apiserver_factory: ApiServerFactory, tmp_path: Path
) -> None:
    audit = tmp_path / "audit" / "audit.jsonl"
    server = await apiserver_factory("--audit-log", str(audit))
    admin = server.stub("admin")
    for name in ("a", "b", "c", "taken"):
        await admin.Create(pb.WriteRequest(object=make_pod(name)))
    await admin.Bind(binding("taken", "node-x"))
    call = server.stub("scheduler-1").BindBatch(
        pb.BindBatchRequest(
            binds=[
                binding("a", "node-1"),
                binding("missing", "node-1"),
                binding("b", "node-2"),
                binding("taken", "node-2"),
                binding("c", "node-3", uid="not-its-uid"),
            ]
        )
    )
    results = (await call).results
    codes = [grpc.StatusCode.OK if r.code == 0 else next(c for c in grpc.StatusCode if c.value[0] == r.code)
             for r in results]  # fmt: skip
    assert codes == [
        grpc.StatusCode.OK,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.OK,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.ABORTED,
    ]
    assert 'already assigned to node "node-x"' in results[3].message
    assert "UID in precondition: not-its-uid" in results[4].message
    a, b = results[0].object.pod, results[2].object.pod
    assert (a.spec.node_name, b.spec.node_name) == ("node-1", "node-2")
    assert results[0].revision == a.metadata.resource_version
    # Both landed in one etcd transaction: one revision, and the call reports it.
    assert a.metadata.resource_version == b.metadata.resource_version
    assert await trailing_revision(call) == int(a.metadata.resource_version)
    for pod in (a, b):
        get = pb.GetRequest(resource="pods", namespace="default", name=pod.metadata.name)
        assert (await admin.Get(get)).pod == pod
    records = read_audit_log(audit)
    binds = [r for r in records if r.subresource == "binding" and r.user == "system:kube-scheduler"]
    assert sorted((r.name, r.code, r.node) for r in binds) == [
        ("a", "OK", "node-1"),
        ("b", "OK", "node-2"),
        ("c", "ABORTED", "node-3"),
        ("missing", "NOT_FOUND", "node-1"),
        ("taken", "ABORTED", "node-2"),
    ]
    assert {r.revision for r in binds if r.code == "OK"} == {int(a.metadata.resource_version)}


async def test_batch_refusals_name_the_problem(apiserver: ApiServer) -> None:
    stub = apiserver.stub("scheduler-1")
    too_many = pb.BindBatchRequest(binds=[binding(f"p{i}", "n") for i in range(1001)])
    e = await rpc_error(stub.BindBatch(too_many))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "binds: at most 1000" in e.details()
    assert len((await stub.BindBatch(pb.BindBatchRequest())).results) == 0
    # A node may not bind pods: each binding is refused on its own, as its Bind would be.
    await apiserver.stub("admin").Create(pb.WriteRequest(object=make_pod("p")))
    node = apiserver.stub("node-node-a")
    [r] = (await node.BindBatch(pb.BindBatchRequest(binds=[binding("p", "n")]))).results
    assert r.code == grpc.StatusCode.PERMISSION_DENIED.value[0]


async def test_the_clientset_coalesces_concurrent_binds(apiserver: ApiServer) -> None:
    admin = Clientset(await apiserver.channel("admin"), qps=0, burst=1)
    sched = Clientset(await apiserver.channel("scheduler-1"), qps=0, burst=1)
    names = [f"pod-{i}" for i in range(60)]
    for name in names:
        await admin.pods.create(make_pod(name).pod)
    assert sched.bind_batcher is not None
    bound = await asyncio.gather(
        *(sched.pods.bind(binding(n, f"node-{i % 7}").binding) for i, n in enumerate(names))
    )
    assert [p.spec.node_name for p in bound] == [f"node-{i % 7}" for i in range(60)]
    assert sched.bind_batcher.items == 60 and sched.bind_batcher.calls < 60
    # Each bind is one request in the client's metrics, as a Bind call would be.
    assert sched.metrics.count("create", "pods/binding", "OK") == 60
    assert len({p.metadata.resource_version for p in bound}) < 60  # some shared one txn
    # Per-binding errors arrive typed, as from Bind.
    with pytest.raises(ConflictError, match="already assigned"):
        await sched.pods.bind(binding(names[0], "node-9").binding)
    with pytest.raises(NotFoundError):
        await sched.pods.bind(binding("nope", "node-9").binding)
    assert sched.metrics.count("create", "pods/binding", "NOT_FOUND") == 1


async def test_a_stale_fence_refuses_every_binding_of_the_batch(apiserver: ApiServer) -> None:
    admin = Clientset(await apiserver.channel("admin"), qps=0, burst=1)
    stale = await stale_scheduler_fence(admin)
    for i in range(5):
        await admin.pods.create(make_pod(f"z{i}").pod)
    sched = Clientset(await apiserver.channel("scheduler-1"), qps=0, burst=1)
    results = await asyncio.gather(
        *(sched.pods.bind(binding(f"z{i}", "n").binding, fence=stale) for i in range(5)),
        return_exceptions=True,
    )
    assert all(isinstance(r, FencedError) and "fenced" in r.message for r in results), results
    for i in range(5):
        assert not (await admin.pods.get_in("default", f"z{i}")).spec.node_name
