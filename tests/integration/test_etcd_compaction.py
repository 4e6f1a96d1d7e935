"""etcd compaction on a schedule, as kube-apiserver's `--etcd-compaction-interval`: each round
compacts to the revision the previous round saw (nothing at bootstrap), one compaction per round
however many API servers share the etcd, and an API server compacting under a live watch cache keeps
serving while a read at a revision before the compaction point is told "too old". Each test
on an etcd of its own: the shared one must never be compacted."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from apiserver_mock.storage.compactor import COMPACT_REV_KEY, CompactionState, compact_once
from certs.layout import PKI
from kse.etcdclient import CompactedError, EtcdClient
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pbg
from tests.fixtures.apiserver import make_pod, start_apiserver
from tests.fixtures.etcd import EtcdFactory
from tests.fixtures.polling import eventually

pytestmark = pytest.mark.integration


async def _compacted_past(etcd: EtcdClient, revision: int) -> bool:
    try:
        await etcd.range(b"/any", revision=revision)
    except CompactedError:
        return True
    return False


async def test_each_round_compacts_to_what_the_previous_round_saw(etcd_factory: EtcdFactory) -> None:
    cluster = await etcd_factory(1)
    async with await EtcdClient.connect(cluster.endpoints) as etcd:
        for i in range(5):
            await etcd.put(f"/k/{i}".encode(), b"v")
        first = await compact_once(etcd, CompactionState())
        assert first.compacted_to is None and first.version == 1  # bootstrap: recorded only
        assert not await _compacted_past(etcd, 2)
        for i in range(5):
            await etcd.put(f"/k/{i}".encode(), b"w")
        second = await compact_once(etcd, first)
        assert second.compacted_to == first.revision and second.version == 2
        assert await _compacted_past(etcd, first.revision - 1)
        assert not await _compacted_past(etcd, first.revision)
        kv, _ = await etcd.get(COMPACT_REV_KEY)
        assert kv is not None and int(kv.value) == first.revision

        # Another API server that saw an older version loses the compare: it compacts nothing and
        # adopts the key's version, so its next round goes through.
        other = await compact_once(etcd, CompactionState(version=1, revision=first.revision))
        assert other.compacted_to is None and other.version == 2
        again = await compact_once(etcd, other)
        assert again.compacted_to == other.revision


async def test_the_api_server_compacts_on_its_interval_and_keeps_serving(
    etcd_factory: EtcdFactory, pki: PKI, tmp_path: Path
) -> None:
    cluster = await etcd_factory(1)
    server = await start_apiserver(
        cluster, pki, tmp_path / "apiserver", "--etcd-compaction-interval", "500ms"
    )
    try:
        stub = pbg.ResourcesStub(await server.channel("admin"))
        old = await stub.Create(pb.WriteRequest(object=make_pod("p0")))
        old_rv = old.pod.metadata.resource_version
        etcd = await server.etcd()
        try:
            for i in range(1, 20):
                await stub.Create(pb.WriteRequest(object=make_pod(f"p{i}")))
            await eventually(
                lambda: _compacted_past(etcd, int(old_rv)),
                bool,
                "etcd compacted past the first pod",
                within=20,
            )
        finally:
            await etcd.close()
        assert "etcd compacted to revision" in server.log()
        listed = await stub.List(pb.ListRequest(resource="pods", namespace="default"))
        assert len(listed.items) == 20
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await stub.List(pb.ListRequest(resource="pods", namespace="default", resource_version=old_rv))
        assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE, e.value.details()
        assert "too old resource version" in (e.value.details() or "")
    finally:
        await server.stop()


async def test_the_chaos_checker_reads_etcd_history_from_the_compaction_point(
    etcd_factory: EtcdFactory,
) -> None:
    from chaos.etcd_history import read_etcd_history

    cluster = await etcd_factory(1)
    async with await EtcdClient.connect(cluster.endpoints) as etcd:
        for i in range(3):
            await etcd.put(f"/registry/pods/default/p{i}".encode(), b"{}")
        point = await etcd.put(b"/registry/pods/default/p3", b"{}")
        await etcd.put(b"/registry/pods/default/p4", b"{}")
        await etcd.compact(point)
    writes = await read_etcd_history(list(cluster.endpoints), None, "/registry")
    assert [(w.revision, w.name) for w in writes] == [(point, "p3"), (point + 1, "p4")]


async def test_defragmentation_gives_back_what_compaction_freed_and_skips_a_tight_member(
    etcd_factory: EtcdFactory,
) -> None:
    from harness.up.etcd_defrag import defrag_members

    cluster = await etcd_factory(1)
    endpoint = cluster.endpoints[0]
    async with await EtcdClient.connect(cluster.endpoints) as etcd:
        value = b"x" * 64 * 1024
        for round_ in range(4):  # ~16 MB of history for one live key per slot
            for i in range(64):
                rev = await etcd.put(f"/big/{i}".encode(), value + bytes([round_]))
        # Nothing freed yet: the bar is not met, nothing is touched.
        assert await defrag_members([endpoint], None, min_free_bytes=1 << 20) == []
        await etcd.compact(rev)

        async def free() -> int:
            await etcd.put(b"/small", b"tick")
            status = await etcd.status(endpoint)
            return int(status["db_size"]) - int(status["db_size_in_use"])

        # etcd 3.5 counts the freed pages as free once a later write commits (as a live cluster's
        # constant Lease renewals do).
        await eventually(free, lambda n: n > 8 << 20, "the compaction's pages counted as free", within=20)
    done = await defrag_members([endpoint], None, min_free_bytes=1 << 20)
    assert [r.endpoint for r in done] == [endpoint]
    assert done[0].after_bytes < done[0].before_bytes / 2, done
