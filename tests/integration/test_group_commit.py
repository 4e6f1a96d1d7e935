"""Group commit (apiserver_mock/storage/groupcommit.py) against a real etcd: concurrent writes share
txns, and every write is still answered as its own CAS would answer it."""

from __future__ import annotations

import asyncio

import pytest

from apiserver_mock.fencing import Guard
from apiserver_mock.storage import Store, WriteResult
from apiserver_mock.storage.groupcommit import GroupCommitter
from kse.etcdclient import Compare, EtcdClient
from proto import kse_pb2 as pb

pytestmark = pytest.mark.timeout(60)


def grouped_store(etcd_client: EtcdClient, inflight: int = 1) -> tuple[Store, GroupCommitter]:
    committer = GroupCommitter(etcd_client, max_inflight=inflight)
    return Store(etcd_client, group_commit=committer), committer


def keys(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}/k{i:03d}".encode() for i in range(n)]


async def test_concurrent_creates_share_txns_and_all_land(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    store, committer = grouped_store(etcd_client)
    ks = keys(etcd_prefix, 60)
    try:
        results = await asyncio.gather(*(store.create(k, b"v-" + k, grouped=True) for k in ks))
    finally:
        await committer.aclose()
    assert all(r.succeeded for r in results)
    # Fewer txns than writes: with one batch in flight, the writes queued behind it went together.
    assert committer.batched_writes == 60 and committer.batches < 60
    revisions = [r.revision for r in results]
    assert len(set(revisions)) == committer.batches
    for k, r in zip(ks, results, strict=True):
        kv, _ = await etcd_client.get(k)
        assert kv is not None and kv.value == b"v-" + k and kv.mod_revision == r.revision


async def test_a_taken_key_fails_alone_and_the_rest_land(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    store, committer = grouped_store(etcd_client)
    ks = keys(etcd_prefix, 20)
    await etcd_client.put(ks[7], b"theirs")
    try:
        # The first create occupies the one in-flight slot, so the 19 others queue and go as one txn.
        results = await asyncio.gather(*(store.create(k, b"mine", grouped=True) for k in ks))
    finally:
        await committer.aclose()
    taken = results[7]
    assert not taken.succeeded and taken.current is not None and taken.current.value == b"theirs"
    assert all(r.succeeded for i, r in enumerate(results) if i != 7)
    assert len({r.revision for i, r in enumerate(results) if i not in (0, 7)}) == 1  # one retried batch
    kv, _ = await etcd_client.get(ks[7])
    assert kv is not None and kv.value == b"theirs"


async def test_a_stale_update_fails_with_the_current_value(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    ks = keys(etcd_prefix, 10)
    revs = []
    for k in ks:
        revs.append(await etcd_client.put(k, b"v0"))
    moved = await etcd_client.put(ks[3], b"moved")
    store, committer = grouped_store(etcd_client)
    try:
        results = await asyncio.gather(
            *(store.update(k, b"v1", rev, grouped=True) for k, rev in zip(ks, revs, strict=True))
        )
    finally:
        await committer.aclose()
    stale = results[3]
    assert not stale.succeeded and stale.current is not None
    assert (stale.current.value, stale.current.mod_revision) == (b"moved", moved)
    assert [r.succeeded for r in results] == [i != 3 for i in range(10)]


async def test_two_writes_to_one_key_never_share_a_txn(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    """The second CAS on the same revision must see the first's result: exactly one wins."""
    key = etcd_prefix.encode() + b"/same"
    rev = await etcd_client.put(key, b"v0")
    store, committer = grouped_store(etcd_client)
    try:
        results = await asyncio.gather(
            *(store.update(key, f"w{i}".encode(), rev, grouped=True) for i in range(5))
        )
    finally:
        await committer.aclose()
    assert sum(r.succeeded for r in results) == 1
    winner = next(i for i, r in enumerate(results) if r.succeeded)
    kv, _ = await etcd_client.get(key)
    assert kv is not None and kv.value == f"w{winner}".encode()
    assert all(r.current is not None and r.current.value == kv.value for r in results if not r.succeeded)


async def fenced(etcd_client: EtcdClient, etcd_prefix: str) -> tuple[bytes, pb.Lease, Guard]:
    """A Lease held by "a" (transitions 1) in etcd, and the guard a write fenced by it carries."""
    lease = pb.Lease()
    lease.metadata.name = "sched"
    lease.spec.holder_identity = "a"
    lease.spec.lease_transitions = 1
    key = etcd_prefix.encode() + b"/lease"
    rev = await etcd_client.put(key, lease.SerializeToString())
    token = pb.FenceToken(lease_namespace="ns", lease_name="sched", holder_identity="a", lease_transitions=1)
    return key, lease, Guard((Compare.mod_revision(key) == rev,), (key,), token, "ns/sched", rev)


async def test_a_broken_fence_fails_every_write_of_the_batch(
    etcd_client: EtcdClient, etcd_prefix: str
) -> None:
    lease_key, lease, guard = await fenced(etcd_client, etcd_prefix)
    lease.spec.holder_identity = "b"  # another replica took over
    lease.spec.lease_transitions = 2
    await etcd_client.put(lease_key, lease.SerializeToString())
    store, committer = grouped_store(etcd_client)
    ks = keys(etcd_prefix, 8)
    try:
        results: list[WriteResult] = await asyncio.gather(
            *(store.create(k, b"late", guard, grouped=True) for k in ks)
        )
    finally:
        await committer.aclose()
    assert not any(r.succeeded for r in results)
    for r in results:
        assert r.current is None and r.guard_values and r.guard_values[0] is not None
        assert pb.Lease.FromString(r.guard_values[0].value).spec.holder_identity == "b"
    for k in ks:
        assert (await etcd_client.get(k))[0] is None


async def test_a_renewed_fence_is_rederived_and_the_batch_lands(
    etcd_client: EtcdClient, etcd_prefix: str
) -> None:
    """The Lease moved by a renewal (same holder and transitions): no write fails for it."""
    lease_key, lease, guard = await fenced(etcd_client, etcd_prefix)
    lease.spec.renew_time = "2026-12-07T00:00:00Z"
    renewed_rev = await etcd_client.put(lease_key, lease.SerializeToString())
    store, committer = grouped_store(etcd_client)
    ks = keys(etcd_prefix, 8)
    try:
        results = await asyncio.gather(*(store.create(k, b"ok", guard, grouped=True) for k in ks))
    finally:
        await committer.aclose()
    assert all(r.succeeded for r in results)
    assert all(r.guard.lease_revision == renewed_rev for r in results)


async def test_ungrouped_writes_bypass_the_committer(etcd_client: EtcdClient, etcd_prefix: str) -> None:
    store, committer = grouped_store(etcd_client)
    try:
        results = await asyncio.gather(*(store.create(k, b"v") for k in keys(etcd_prefix, 5)))
    finally:
        await committer.aclose()
    assert all(r.succeeded for r in results) and len({r.revision for r in results}) == 5
    assert committer.batches == 0
