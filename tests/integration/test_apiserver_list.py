"""List: consistent reads, cache reads, exact revisions, selectors, and limit/continue pagination."""

from __future__ import annotations

import base64

import grpc
import pytest

from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, make_pod, rpc_error, trailing_revision

pytestmark = pytest.mark.integration


def names(lst: pb.ObjectList) -> list[str]:
    return [o.pod.metadata.name for o in lst.items]


async def test_consistent_list_sees_every_acknowledged_write(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    for i in range(30):
        out = await stub.Create(pb.WriteRequest(object=make_pod(f"p{i:02}")))
        call = stub.List(pb.ListRequest(resource="pods"))
        lst = await call
        assert names(lst)[-1] == f"p{i:02}" and len(lst.items) == i + 1
        assert int(lst.metadata.resource_version) >= int(out.pod.metadata.resource_version)
        assert await trailing_revision(call) == int(lst.metadata.resource_version)


async def test_list_at_an_exact_revision(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    revs = [
        int((await stub.Create(pb.WriteRequest(object=make_pod(f"p{i}")))).pod.metadata.resource_version)
        for i in range(4)
    ]
    await stub.Delete(pb.DeleteRequest(resource="pods", namespace="default", name="p0"))
    old = await stub.List(pb.ListRequest(resource="pods", resource_version=str(revs[1])))
    assert names(old) == ["p0", "p1"] and old.metadata.resource_version == str(revs[1])
    assert [o.pod.metadata.resource_version for o in old.items] == [str(revs[0]), str(revs[1])]
    now = await stub.List(pb.ListRequest(resource="pods", resource_version="0"))
    assert names(now) == ["p1", "p2", "p3"]
    e = await rpc_error(stub.List(pb.ListRequest(resource="pods", resource_version="abc")))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_selectors_and_namespaces(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    for ns in ("a", "b"):
        for i in range(3):
            await stub.Create(
                pb.WriteRequest(object=make_pod(f"p{i}", ns, labels={"tier": "web" if i else "db"}))
            )
    await stub.Bind(
        pb.BindRequest(
            binding=pb.Binding(
                metadata=pb.ObjectMeta(name="p1", namespace="b"), target=pb.ObjectReference(name="node-a")
            )
        )
    )
    for rv in ("", "0"):
        lst = await stub.List(pb.ListRequest(resource="pods", namespace="a", resource_version=rv))
        assert {(o.pod.metadata.namespace, o.pod.metadata.name) for o in lst.items} == {
            ("a", "p0"),
            ("a", "p1"),
            ("a", "p2"),
        }
        lst = await stub.List(pb.ListRequest(resource="pods", label_selector="tier=web", resource_version=rv))
        assert len(lst.items) == 4
        lst = await stub.List(
            pb.ListRequest(resource="pods", label_selector="tier in (db),tier!=web", resource_version=rv)
        )
        assert sorted(o.pod.metadata.namespace for o in lst.items) == ["a", "b"]
        lst = await stub.List(
            pb.ListRequest(resource="pods", field_selector="spec.nodeName=node-a", resource_version=rv)
        )
        assert [(o.pod.metadata.namespace, o.pod.metadata.name) for o in lst.items] == [("b", "p1")]
        lst = await stub.List(
            pb.ListRequest(
                resource="pods", field_selector="spec.nodeName=", namespace="b", resource_version=rv
            )
        )
        assert names(lst) == ["p0", "p2"]
    e = await rpc_error(stub.List(pb.ListRequest(resource="pods", field_selector="metadata.uid=x")))
    assert (
        e.code() == grpc.StatusCode.INVALID_ARGUMENT
        and "field label not supported: metadata.uid" in e.details()
    )
    e = await rpc_error(stub.List(pb.ListRequest(resource="pods", label_selector="a=(b")))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_pagination_is_one_snapshot(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    for i in range(25):
        await stub.Create(pb.WriteRequest(object=make_pod(f"p{i:02}", labels={"odd": str(i % 2)})))
    first = await stub.List(pb.ListRequest(resource="pods", limit=10))
    snapshot = first.metadata.resource_version
    assert names(first) == [f"p{i:02}" for i in range(10)]
    assert first.metadata.remaining_item_count == 15
    token = getattr(first.metadata, "continue")
    assert token
    # Writes after the first page do not show in the later pages (they read the first page's revision).
    await stub.Create(pb.WriteRequest(object=make_pod("p99")))
    await stub.Delete(pb.DeleteRequest(resource="pods", namespace="default", name="p15"))
    seen = names(first)
    while token:
        page = await stub.List(pb.ListRequest(resource="pods", limit=10, **{"continue": token}))
        assert page.metadata.resource_version == snapshot
        seen += names(page)
        token = getattr(page.metadata, "continue")
    assert seen == [f"p{i:02}" for i in range(25)]
    # With a selector, pages hold matching objects only.
    token, odd = "", []
    while True:
        page = await stub.List(
            pb.ListRequest(resource="pods", limit=4, label_selector="odd=1", **{"continue": token})
        )
        odd += names(page)
        token = getattr(page.metadata, "continue")
        if not token:
            break
    assert odd == [f"p{i:02}" for i in range(1, 25, 2) if i != 15]
    e = await rpc_error(stub.List(pb.ListRequest(resource="pods", **{"continue": "%%%"})))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    bogus = base64.urlsafe_b64encode(b"x/y").decode()
    e = await rpc_error(stub.List(pb.ListRequest(resource="pods", **{"continue": bogus})))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_continue_after_compaction_is_out_of_range(etcd_factory, pki, tmp_path):
    from tests.fixtures.apiserver import start_apiserver

    cluster = await etcd_factory(members=1)
    server = await start_apiserver(cluster, pki, tmp_path / "api")
    try:
        stub = server.stub("admin")
        for i in range(5):
            await stub.Create(pb.WriteRequest(object=make_pod(f"p{i}")))
        first = await stub.List(pb.ListRequest(resource="pods", limit=2))
        last = await stub.Create(pb.WriteRequest(object=make_pod("later")))
        client = await server.etcd()
        try:
            await client.compact(int(last.pod.metadata.resource_version))
        finally:
            await client.close()
        e = await rpc_error(
            stub.List(
                pb.ListRequest(resource="pods", limit=2, **{"continue": getattr(first.metadata, "continue")})
            )
        )
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE
        assert e.details().startswith("The provided continue parameter is too old")
    finally:
        await server.stop()
