"""Events expire (`--event-ttl`, as kube-apiserver's): etcd deletes them through a shared lease, the
watch delivers the deletion, and nothing else is given a lease."""

from __future__ import annotations

import asyncio

import pytest

from kse.client.clientset import Clientset
from kse.client.errors import NotFoundError
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.polling import eventually

pytestmark = pytest.mark.integration

NS = "default"


def event(name: str) -> pb.Event:
    return pb.Event(
        metadata=pb.ObjectMeta(name=name, namespace=NS),
        involved_object=pb.ObjectReference(kind="Pod", name="p", namespace=NS),
        reason="Scheduled",
        message="Successfully assigned default/p to node-1",
        type="Normal",
    )


async def _gone(cs: Clientset, name: str) -> bool:
    try:
        await cs.events.get(NS, name)
    except NotFoundError:
        return True
    return False


async def _lease_of(etcd, server: ApiServer, resource: str, name: str) -> int:
    kv, _ = await etcd.get(server.key(resource, NS, name))
    assert kv is not None, name
    return int(kv.lease)


async def test_events_written_together_share_one_lease_and_pods_get_none(apiserver_factory) -> None:
    # A 20 s TTL has a 1 s reuse window (5 %): events written within it share the lease.
    server: ApiServer = await apiserver_factory("--event-ttl", "20s")
    cs = Clientset(await server.channel("admin"), qps=0, burst=0)
    etcd = await server.etcd()
    try:
        await asyncio.gather(*(cs.events.create(event(f"e{i}")) for i in range(5)))
        await cs.pods.create(
            pb.Pod(
                metadata=pb.ObjectMeta(name="p", namespace=NS),
                spec=pb.PodSpec(containers=[pb.Container(name="c", image="nginx")]),
            )
        )
        leases = {await _lease_of(etcd, server, "events", f"e{i}") for i in range(5)}
        assert len(leases) == 1 and 0 not in leases
        assert await _lease_of(etcd, server, "pods", "p") == 0
    finally:
        await etcd.close()


async def test_events_expire_and_the_watch_sees_them_go(apiserver_factory) -> None:
    server: ApiServer = await apiserver_factory("--event-ttl", "2s")
    cs = Clientset(await server.channel("admin"), qps=0, burst=0)
    async with cs.events.watch(NS) as watch:
        names = [(await cs.events.create(event(f"e{i}"))).metadata.name for i in range(3)]
        for name in names:
            await eventually(lambda n=name: _gone(cs, n), bool, f"event {name} expired", within=30)
        deleted: set[str] = set()
        while len(deleted) < 3:
            batch = await asyncio.wait_for(watch.next_batch(), 30)
            assert batch is not None
            deleted |= {ev.object.metadata.name for ev in batch if ev.type == "DELETED" and ev.object}
        assert deleted == set(names)


async def test_an_event_ttl_of_zero_keeps_events(apiserver_factory) -> None:
    server: ApiServer = await apiserver_factory("--event-ttl", "0")
    cs = Clientset(await server.channel("admin"), qps=0, burst=0)
    await cs.events.create(event("kept"))
    etcd = await server.etcd()
    try:
        kv, _ = await etcd.get(server.key("events", NS, "kept"))
        assert kv is not None and kv.lease == 0
    finally:
        await etcd.close()
