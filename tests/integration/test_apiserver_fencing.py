"""Leader fencing (apiserver_mock/fencing.py): a write carrying a FenceToken lands only while the
named Lease has the token's holder and leaseTransitions, checked in the write's own etcd transaction.

Real etcd and a real `kse apiserver` process, except `test_store_*`, which drive the Store and the
Fencer against etcd directly to hit the renewal-retry path deterministically.
"""

from __future__ import annotations

import asyncio
import re
import uuid

import grpc
import pytest

from apiserver_mock.errors import FencedOff, Invalid
from apiserver_mock.fencing import Fencer, violated
from apiserver_mock.storage import Store
from apiserver_mock.watchcache.cache import WatchCache
from certs.identity import Identity
from kse.etcdclient import EtcdClient
from kse.objects.kinds import BY_FIELD
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, ApiServerFactory, make_pod, rpc_error

pytestmark = pytest.mark.integration

LEASE_NS, LEASE_NAME = "kube-system", "kube-scheduler"
SCHEDULER_USER = "system:kube-scheduler"


def token(holder: str, transitions: int) -> pb.FenceToken:
    return pb.FenceToken(
        lease_namespace=LEASE_NS, lease_name=LEASE_NAME, holder_identity=holder, lease_transitions=transitions
    )


def lease_obj(
    holder: str, transitions: int, rv: str = "", renew: str = "2026-01-01T00:00:00.000000Z"
) -> pb.Object:
    lease = pb.Lease(metadata=pb.ObjectMeta(name=LEASE_NAME, namespace=LEASE_NS, resource_version=rv))
    lease.spec.holder_identity = holder
    lease.spec.lease_transitions = transitions
    lease.spec.lease_duration_seconds = 15
    lease.spec.renew_time = renew
    return pb.Object(lease=lease)


async def set_lease(
    stub, holder: str, transitions: int, renew: str = "2026-01-01T00:00:00.000000Z"
) -> pb.Lease:
    """Create the Lease, or overwrite it (CAS on the current resourceVersion)."""
    try:
        cur = (await stub.Get(pb.GetRequest(resource="leases", namespace=LEASE_NS, name=LEASE_NAME))).lease
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND
        return (await stub.Create(pb.WriteRequest(object=lease_obj(holder, transitions, renew=renew)))).lease
    obj = lease_obj(holder, transitions, cur.metadata.resource_version, renew)
    return (await stub.Update(pb.WriteRequest(object=obj))).lease


def bind_req(name: str, node: str, fence: pb.FenceToken | None = None) -> pb.BindRequest:
    req = pb.BindRequest(
        binding=pb.Binding(
            metadata=pb.ObjectMeta(name=name, namespace="default"),
            target=pb.ObjectReference(kind="Node", name=node),
        )
    )
    if fence is not None:
        req.fence.CopyFrom(fence)
    return req


def event_obj(name: str, rv: str = "", count: int = 1) -> pb.Object:
    ev = pb.Event(metadata=pb.ObjectMeta(name=name, namespace="default", resource_version=rv))
    ev.reason, ev.type, ev.message, ev.count = "Scheduled", "Normal", "bound", count
    ev.involved_object.kind, ev.involved_object.name, ev.involved_object.namespace = "Pod", "p", "default"
    return pb.Object(event=ev)


async def stored(
    server: ApiServer, resource: str, name: str, ns: str = "default"
) -> tuple[bytes, int] | None:
    """(value, mod_revision) of an object as etcd holds it, read directly."""
    client = await server.etcd()
    try:
        kv, _ = await client.get(server.key(resource, ns, name))
    finally:
        await client.close()
    return (kv.value, kv.mod_revision) if kv is not None else None


# ---------------------------------------------------------------- the current token lands


async def test_writes_with_the_current_token_land(apiserver: ApiServer):
    admin, sched = apiserver.stub("admin"), apiserver.stub("scheduler-1")
    await set_lease(sched, "scheduler-1_a", 1)
    good = token("scheduler-1_a", 1)
    for name in ("p", "q", "r"):
        await admin.Create(pb.WriteRequest(object=make_pod(name)))

    bound = (await sched.Bind(bind_req("p", "node-a", good))).pod
    assert bound.spec.node_name == "node-a"
    status = pb.Pod(metadata=pb.ObjectMeta(name="q", namespace="default"))
    status.status.phase = "Pending"
    status.status.conditions.add(type="PodScheduled", status="False", reason="Unschedulable")
    updated = (await sched.UpdateStatus(pb.WriteRequest(object=pb.Object(pod=status), fence=good))).pod
    assert updated.status.conditions[0].reason == "Unschedulable"
    ev = (await sched.Create(pb.WriteRequest(object=event_obj("e1"), fence=good))).event
    ev2 = event_obj("e1", ev.metadata.resource_version, count=2)
    assert (await sched.Update(pb.WriteRequest(object=ev2, fence=good))).event.count == 2
    await sched.Delete(pb.DeleteRequest(resource="pods", namespace="default", name="r", fence=good))
    assert await stored(apiserver, "pods", "r") is None
    # An empty token is no token: not fenced (and not required without --require-fence-for).
    await admin.Create(pb.WriteRequest(object=make_pod("s")))
    await sched.Bind(bind_req("s", "node-a", pb.FenceToken()))


# ---------------------------------------------------------------- a deposed leader is fenced off


async def test_old_token_after_takeover_is_refused_and_nothing_reaches_etcd(apiserver: ApiServer):
    admin, old_leader = apiserver.stub("admin"), apiserver.stub("scheduler-1")
    new_leader = apiserver.stub("scheduler-2")
    await set_lease(old_leader, "scheduler-1_a", 4)
    stale = token("scheduler-1_a", 4)
    for name in ("p", "q", "r"):
        await admin.Create(pb.WriteRequest(object=make_pod(name)))
    ev = (await old_leader.Create(pb.WriteRequest(object=event_obj("e1"), fence=stale))).event
    # Another identity takes the lease: holder changes, leaseTransitions + 1.
    await set_lease(new_leader, "scheduler-2_b", 5)
    before = {n: await stored(apiserver, "pods", n) for n in ("p", "q", "r")}
    before_ev = await stored(apiserver, "events", "e1")

    status = pb.Pod(metadata=pb.ObjectMeta(name="q", namespace="default"))
    status.status.phase = "Pending"
    writes = {
        "bind": old_leader.Bind(bind_req("p", "node-a", stale)),
        "update_status": old_leader.UpdateStatus(pb.WriteRequest(object=pb.Object(pod=status), fence=stale)),
        "create event": old_leader.Create(pb.WriteRequest(object=event_obj("e2"), fence=stale)),
        "update event": old_leader.Update(
            pb.WriteRequest(object=event_obj("e1", ev.metadata.resource_version, 2), fence=stale)
        ),
        "delete": old_leader.Delete(
            pb.DeleteRequest(resource="pods", namespace="default", name="r", fence=stale)
        ),
        "evict": admin.Evict(pb.EvictRequest(namespace="default", name="r", fence=stale)),
    }
    for label, call in writes.items():
        e = await rpc_error(call)
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, (label, e)
        # The message names the lease, the token's holder/transitions and the current ones.
        assert f"lease {LEASE_NS}/{LEASE_NAME}" in e.details(), e.details()
        assert '"scheduler-1_a", leaseTransitions 4' in e.details(), e.details()
        assert 'held by "scheduler-2_b" with leaseTransitions 5' in e.details(), e.details()

    for name, was in before.items():
        assert await stored(apiserver, "pods", name) == was, name
    assert await stored(apiserver, "events", "e1") == before_ev
    assert await stored(apiserver, "events", "e2") is None

    # The new leader's token works for the same writes.
    fresh = token("scheduler-2_b", 5)
    assert (await new_leader.Bind(bind_req("p", "node-b", fresh))).pod.spec.node_name == "node-b"


async def test_released_or_missing_lease_fences(apiserver: ApiServer):
    admin, sched = apiserver.stub("admin"), apiserver.stub("scheduler-1")
    await admin.Create(pb.WriteRequest(object=make_pod("p")))
    e = await rpc_error(sched.Bind(bind_req("p", "node-a", token("scheduler-1_a", 0))))
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"lease {LEASE_NS}/{LEASE_NAME} does not exist" in e.details()
    await set_lease(sched, "scheduler-1_a", 2)
    await set_lease(sched, "", 2)  # released: holder "" and leaseTransitions kept, as client-go does
    e = await rpc_error(sched.Bind(bind_req("p", "node-a", token("scheduler-1_a", 2))))
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and 'held by ""' in e.details()
    # The elector's token before any term (leaseTransitions -1) never matches.
    await set_lease(sched, "scheduler-1_a", 3)
    e = await rpc_error(sched.Bind(bind_req("p", "node-a", token("scheduler-1_a", -1))))
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (await stored(apiserver, "pods", "p")) is not None
    assert (
        await admin.Get(pb.GetRequest(resource="pods", namespace="default", name="p"))
    ).pod.spec.node_name == ""


async def test_a_token_without_lease_or_holder_is_invalid(apiserver: ApiServer):
    admin = apiserver.stub("admin")
    await admin.Create(pb.WriteRequest(object=make_pod("p")))
    await set_lease(admin, "", 1)  # a released lease: an empty-holder token must not match it
    no_holder = pb.FenceToken(lease_namespace=LEASE_NS, lease_name=LEASE_NAME, lease_transitions=1)
    e = await rpc_error(admin.Bind(bind_req("p", "node-a", no_holder)))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "fence.holderIdentity" in e.details()
    no_lease = pb.FenceToken(holder_identity="x", lease_transitions=1)
    e = await rpc_error(admin.Bind(bind_req("p", "node-a", no_lease)))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "fence.leaseName" in e.details()


async def test_new_leader_first_write_is_not_refused_by_a_lagging_cache(apiserver: ApiServer):
    """The acquisition's response can reach the new leader before the API server's lease cache
    has the new holder; its first write must still land (the refusal is decided on etcd)."""
    admin = apiserver.stub("admin")
    stubs = [apiserver.stub(f"scheduler-{i}") for i in (1, 2, 3)]
    await set_lease(admin, "nobody", 0)
    for i in range(30):
        await admin.Create(pb.WriteRequest(object=make_pod(f"p{i}")))
    for i in range(30):
        stub = stubs[i % 3]
        lease = await set_lease(stub, f"holder-{i}", i + 1)
        out = await stub.Bind(bind_req(f"p{i}", "node-a", token(lease.spec.holder_identity, i + 1)))
        assert out.pod.spec.node_name == "node-a"


# ---------------------------------------------------------------- renewals never fail a legitimate write


async def test_renewals_racing_with_200_fenced_binds_cause_no_failure(apiserver: ApiServer):
    admin, sched = apiserver.stub("admin"), apiserver.stub("scheduler-1")
    n = 200
    await set_lease(sched, "scheduler-1_a", 7)
    good = token("scheduler-1_a", 7)
    await asyncio.gather(*(admin.Create(pb.WriteRequest(object=make_pod(f"p{i}"))) for i in range(n)))
    renewer = apiserver.stub("scheduler-1")
    stop = asyncio.Event()
    renewals = 0

    async def renew() -> None:
        """Renew as fast as the API server allows (the elector does it every retryPeriod): every
        renewal changes the Lease's mod_revision while holder and transitions stay."""
        nonlocal renewals
        while not stop.is_set():
            await set_lease(
                renewer, "scheduler-1_a", 7, renew=f"2026-01-01T00:00:{renewals % 60:02d}.{renewals:06d}Z"
            )
            renewals += 1

    renew_task = asyncio.create_task(renew())
    sem = asyncio.Semaphore(16)

    async def bind(i: int) -> pb.Pod:
        async with sem:
            await asyncio.sleep(0.002 * (i % 5))  # spread the binds over many renewals
            return (await sched.Bind(bind_req(f"p{i}", f"node-{i % 7}", good))).pod

    try:
        results = await asyncio.gather(*(bind(i) for i in range(n)), return_exceptions=True)
    finally:
        stop.set()
        await renew_task
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    assert all(isinstance(r, pb.Pod) and r.spec.node_name for r in results)
    assert renewals >= 3, f"only {renewals} renewals raced with the binds"
    # The race was real: binds whose transaction failed on a renewal were retried (debug log).
    assert apiserver.log().count("renewed (revision") >= 1
    lease = (await admin.Get(pb.GetRequest(resource="leases", namespace=LEASE_NS, name=LEASE_NAME))).lease
    assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("scheduler-1_a", 7)


async def test_store_retries_a_write_whose_lease_was_renewed(etcd_client: EtcdClient, etcd_prefix: str):
    """The renewal path, deterministically: a guard taken at the Lease's revision R, a renewal to
    R' (holder and transitions unchanged), then the write: it lands, with the guard renewed to R'.
    After a takeover, the same write fails, `violated` says why, and etcd is untouched."""
    prefix = etcd_prefix.encode()
    store = Store(etcd_client)
    leases = WatchCache(BY_FIELD["lease"], etcd_client, prefix)  # not running: every read goes to etcd
    fencer = Fencer(leases, store)
    lease_key = leases.key(LEASE_NS, LEASE_NAME)
    pod_key = prefix + b"/pods/default/p"
    ident = Identity(SCHEDULER_USER)

    def lease_value(holder: str, transitions: int, renew: str) -> bytes:
        return lease_obj(holder, transitions, renew=renew).lease.SerializeToString()

    await etcd_client.put(lease_key, lease_value("a", 3, "t0"))
    await etcd_client.put(pod_key, b"v0")
    kv, _ = await etcd_client.get(pod_key)
    assert kv is not None
    guard = await fencer.guard(ident, token("a", 3), BY_FIELD["pod"], "binding", "p")
    await etcd_client.put(lease_key, lease_value("a", 3, "t1"))  # a renewal
    renewed_rev = (await etcd_client.get(lease_key))[0].mod_revision  # type: ignore[union-attr]
    assert renewed_rev != guard.lease_revision
    res = await store.update(pod_key, b"v1", kv.mod_revision, guard)
    assert res.succeeded and res.guard.lease_revision == renewed_rev

    # The object changed AND the lease was renewed: a failure for the caller, with the renewed guard.
    await etcd_client.put(lease_key, lease_value("a", 3, "t2"))
    res2 = await store.update(pod_key, b"v2", kv.mod_revision, res.guard)
    assert not res2.succeeded and violated(res.guard, res2.guard_values) == ""
    assert res2.guard.lease_revision == (await etcd_client.get(lease_key))[0].mod_revision  # type: ignore[union-attr]

    # A takeover: the write fails and the fence is reported broken.
    await etcd_client.put(lease_key, lease_value("b", 4, "t3"))
    cur, _ = await etcd_client.get(pod_key)
    assert cur is not None
    res3 = await store.update(pod_key, b"stale", cur.mod_revision, res2.guard)
    assert not res3.succeeded
    why = violated(res3.guard, res3.guard_values)
    assert 'held by "b" with leaseTransitions 4' in why and 'holder "a", leaseTransitions 3' in why
    assert (await etcd_client.get(pod_key))[0].value == b"v1"  # type: ignore[union-attr]
    with pytest.raises(FencedOff):
        await fencer.guard(ident, token("a", 3), BY_FIELD["pod"], "binding", "p")
    with pytest.raises(Invalid):
        await fencer.guard(ident, pb.FenceToken(lease_name=LEASE_NAME), BY_FIELD["pod"], "binding", "p")


# ---------------------------------------------------------------- exactly one winner, with fencing


async def test_sixteen_fenced_binders_exactly_one_wins(apiserver: ApiServer):
    admin = apiserver.stub("admin")
    stubs = [apiserver.stub(f"scheduler-{1 + i % 3}") for i in range(16)]
    await set_lease(admin, "scheduler-1_a", 2)
    good, stale = token("scheduler-1_a", 2), token("scheduler-9_z", 1)
    for round_ in range(20):
        name = f"race-{round_}"
        await admin.Create(pb.WriteRequest(object=make_pod(name)))
        # 12 binders with the current token, 4 with a stale one.
        fences = [stale if i % 4 == 3 else good for i in range(16)]
        results = await asyncio.gather(
            *(s.Bind(bind_req(name, f"node-{i}", fences[i])) for i, s in enumerate(stubs)),
            return_exceptions=True,
        )
        winners = [(i, r) for i, r in enumerate(results) if isinstance(r, pb.Object)]
        assert len(winners) == 1, results
        (wi, winner), node = winners[0], winners[0][1].pod.spec.node_name
        assert fences[wi] is good
        for i, r in enumerate(results):
            if i == wi:
                continue
            assert isinstance(r, grpc.aio.AioRpcError), r
            if fences[i] is stale:
                assert r.code() == grpc.StatusCode.FAILED_PRECONDITION, r
            else:
                assert r.code() == grpc.StatusCode.ABORTED, r
                assert f'already assigned to node "{node}"' in r.details() or "modified" in r.details()
        pod = (await admin.Get(pb.GetRequest(resource="pods", namespace="default", name=name))).pod
        assert (
            pod.spec.node_name == node
            and pod.metadata.resource_version == winner.pod.metadata.resource_version
        )


# ---------------------------------------------------------------- flags


async def test_fencing_off_lets_the_stale_write_through(apiserver_factory: ApiServerFactory):
    server = await apiserver_factory("--fencing", "off")
    admin, sched = server.stub("admin"), server.stub("scheduler-1")
    await set_lease(sched, "scheduler-1_a", 1)
    await set_lease(server.stub("scheduler-2"), "scheduler-2_b", 2)
    await admin.Create(pb.WriteRequest(object=make_pod("p")))
    out = await sched.Bind(bind_req("p", "node-a", token("scheduler-1_a", 1)))
    assert out.pod.spec.node_name == "node-a"
    # Even a token naming no lease at all is ignored.
    await admin.Create(pb.WriteRequest(object=make_pod("q")))
    ghost = pb.FenceToken(lease_namespace="nowhere", lease_name="none", holder_identity="x")
    assert (await sched.Bind(bind_req("q", "node-a", ghost))).pod.spec.node_name == "node-a"
    assert re.search(r"fencing OFF", server.log())


async def test_require_fence_for_refuses_unfenced_scheduler_writes(apiserver_factory: ApiServerFactory):
    server = await apiserver_factory("--require-fence-for", SCHEDULER_USER)
    admin, sched = server.stub("admin"), server.stub("scheduler-1")
    # Its Lease writes need no token: that is how it becomes leader.
    await set_lease(sched, "scheduler-1_a", 1)
    for name in ("p", "q", "r"):
        await admin.Create(pb.WriteRequest(object=make_pod(name)))
    status = pb.Pod(metadata=pb.ObjectMeta(name="q", namespace="default"))
    status.status.phase = "Pending"
    unfenced = {
        "bind": sched.Bind(bind_req("p", "node-a")),
        "update_status": sched.UpdateStatus(pb.WriteRequest(object=pb.Object(pod=status))),
        "create event": sched.Create(pb.WriteRequest(object=event_obj(f"e-{uuid.uuid4().hex[:6]}"))),
        "delete": sched.Delete(pb.DeleteRequest(resource="pods", namespace="default", name="r")),
    }
    for label, call in unfenced.items():
        e = await rpc_error(call)
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, (label, e)
        assert f'User "{SCHEDULER_USER}" must send a fence token' in e.details()
    assert (
        await admin.Get(pb.GetRequest(resource="pods", namespace="default", name="p"))
    ).pod.spec.node_name == ""
    # With the token they land; other users' writes are not affected.
    good = token("scheduler-1_a", 1)
    assert (await sched.Bind(bind_req("p", "node-a", good))).pod.spec.node_name == "node-a"
    await sched.UpdateStatus(pb.WriteRequest(object=pb.Object(pod=status), fence=good))
    assert (await admin.Bind(bind_req("q", "node-b"))).pod.spec.node_name == "node-b"
    await server.stub("workload").Delete(pb.DeleteRequest(resource="pods", namespace="default", name="r"))
