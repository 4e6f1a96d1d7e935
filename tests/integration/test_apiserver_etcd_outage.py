"""The API server through an etcd outage: cache reads keep working, writes and consistent reads say
UNAVAILABLE, and watches carry on afterwards without a gap."""

from __future__ import annotations

import grpc
import pytest

from proto import kse_pb2 as pb
from tests.fixtures.apiserver import make_pod, rpc_error, start_apiserver, summary, watch

pytestmark = pytest.mark.integration


async def test_etcd_restart(etcd_factory, pki, tmp_path):
    cluster = await etcd_factory(members=1)
    server = await start_apiserver(cluster, pki, tmp_path / "api")
    try:
        stub = server.stub("admin")
        first = await stub.Create(pb.WriteRequest(object=make_pod("before")))
        start_rv = first.pod.metadata.resource_version
        s = watch(stub, resource_version=start_rv)
        await s.call.initial_metadata()
        member = cluster.members[0]
        await member.stop()
        # Served from the watch cache while etcd is down.
        cached = await stub.List(pb.ListRequest(resource="pods", resource_version="0"))
        assert [o.pod.metadata.name for o in cached.items] == ["before"]
        # A watch resumed from a past revision is served from the event ring.
        resumed = watch(stub, resource_version=str(int(start_rv) - 1))
        [ev] = await resumed.events_until(lambda ev: len(ev) >= 1, timeout_s=20)
        assert ev.resource_version == start_rv
        e = await rpc_error(stub.Create(pb.WriteRequest(object=make_pod("during")), timeout=20))
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        e = await rpc_error(
            stub.Get(pb.GetRequest(resource="pods", namespace="default", name="before"), timeout=20)
        )
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        await member.restart()
        after = [await stub.Create(pb.WriteRequest(object=make_pod(f"after-{i}"))) for i in range(3)]
        expected = [("ADDED", int(o.pod.metadata.resource_version), o.pod.metadata.name) for o in after]
        assert summary(await s.events_until(lambda ev: len(ev) >= 3, timeout_s=30)) == expected
        assert summary(await resumed.events_until(lambda ev: len(ev) >= 3, timeout_s=30)) == expected
        lst = await stub.List(pb.ListRequest(resource="pods"))
        assert sorted(o.pod.metadata.name for o in lst.items) == ["after-0", "after-1", "after-2", "before"]
    finally:
        await server.stop()
