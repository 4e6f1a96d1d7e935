"""CreateBatch (many creates in one call) and the clientset that coalesces creates into it: each
create answered, authorized, validated, fenced and audited as its own Create call, and
group-committed underneath."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from kse.audit import read_audit_log
from kse.client.clientset import Clientset
from kse.client.errors import AlreadyExistsError, FencedError, InvalidError
from kse.events import BATCHED_WRITERS, NORMAL, UNBATCHED_WRITERS, EventRecorder
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


def event(name: str) -> pb.Object:
    return pb.Object(
        event=pb.Event(
            metadata=pb.ObjectMeta(name=name, namespace="default"),
            involved_object=pb.ObjectReference(kind="Pod", namespace="default", name="p"),
            reason="Scheduled",
            message="assigned",
            type="Normal",
        )
    )


def status_code(code: int) -> grpc.StatusCode:
    return grpc.StatusCode.OK if code == 0 else next(c for c in grpc.StatusCode if c.value[0] == code)


async def test_each_create_of_a_batch_gets_its_own_answer_and_audit_record(
    apiserver_factory: ApiServerFactory, tmp_path: Path
) -> None:
    audit = tmp_path / "audit" / "audit.jsonl"
    server = await apiserver_factory("--audit-log", str(audit))
    admin = server.stub("admin")
    await admin.Create(pb.WriteRequest(object=make_pod("taken")))
    invalid = make_pod("bad")
    invalid.pod.spec.containers[0].image = ""
    call = admin.CreateBatch(
        pb.CreateBatchRequest(
            creates=[
                pb.WriteRequest(object=make_pod("a")),
                pb.WriteRequest(object=make_pod("taken")),
                pb.WriteRequest(object=invalid),
                pb.WriteRequest(object=event("e1")),
                pb.WriteRequest(object=make_pod("dry"), dry_run=True),
                pb.WriteRequest(object=make_pod("b")),
            ]
        )
    )
    results = (await call).results
    assert [status_code(r.code) for r in results] == [
        grpc.StatusCode.OK,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.OK,
        grpc.StatusCode.OK,
        grpc.StatusCode.OK,
    ]
    assert '"taken" already exists' in results[1].message
    assert "spec.containers[0].image" in results[2].message
    a, e1, b = results[0].object.pod, results[3].object.event, results[5].object.pod
    assert results[0].revision == a.metadata.resource_version and a.metadata.uid
    assert await trailing_revision(call) == max(int(x.metadata.resource_version) for x in (a, e1, b))
    for pod in (a, b):
        get = pb.GetRequest(resource="pods", namespace="default", name=pod.metadata.name)
        assert (await admin.Get(get)).pod == pod
    for missing in ("bad", "dry"):
        e = await rpc_error(admin.Get(pb.GetRequest(resource="pods", namespace="default", name=missing)))
        assert e.code() == grpc.StatusCode.NOT_FOUND
    records = [
        r
        for r in read_audit_log(audit)
        if r.verb == "create" and r.resource in ("pods", "events") and (r.name != "taken" or r.code != "OK")
    ]
    assert sorted((r.resource, r.name, r.code) for r in records) == [
        ("events", "e1", "OK"),
        ("pods", "a", "OK"),
        ("pods", "b", "OK"),
        ("pods", "bad", "INVALID_ARGUMENT"),
        ("pods", "dry", "OK"),
        ("pods", "taken", "ALREADY_EXISTS"),
    ]


async def test_batch_refusals_name_the_problem(apiserver: ApiServer) -> None:
    stub = apiserver.stub("admin")
    too_many = pb.CreateBatchRequest(creates=[pb.WriteRequest(object=event(f"e{i}")) for i in range(1001)])
    e = await rpc_error(stub.CreateBatch(too_many))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "creates: at most 1000" in e.details()
    assert len((await stub.CreateBatch(pb.CreateBatchRequest())).results) == 0
    # The scheduler may create Events but not pods: each create is authorized on its own.
    sched = apiserver.stub("scheduler-1")
    batch = pb.CreateBatchRequest(
        creates=[pb.WriteRequest(object=make_pod("p")), pb.WriteRequest(object=event("ok"))]
    )
    pod, ev = (await sched.CreateBatch(batch)).results
    assert status_code(pod.code) == grpc.StatusCode.PERMISSION_DENIED
    assert status_code(ev.code) == grpc.StatusCode.OK and ev.object.event.metadata.name == "ok"


async def test_the_clientset_coalesces_concurrent_creates_when_asked(apiserver: ApiServer) -> None:
    plain = Clientset(await apiserver.channel("admin"), qps=0, burst=1)
    assert plain.create_batcher("pods") is None  # off by default
    cs = Clientset(await apiserver.channel("admin"), qps=0, burst=1, batch_creates=True)
    names = [f"pod-{i}" for i in range(60)]
    created = await asyncio.gather(*(cs.pods.create(make_pod(n).pod) for n in names))
    assert [p.metadata.name for p in created] == names
    assert all(p.metadata.uid and p.metadata.resource_version for p in created)
    batcher = cs.create_batcher("pods")
    assert batcher is not None and batcher.items == 60 and batcher.calls < 60
    # Each create is one request in the client's metrics, as a Create call would be.
    assert cs.metrics.count("create", "pods", "OK") == 60
    assert len({p.metadata.resource_version for p in created}) < 60  # some shared one txn
    listed = await plain.pods.list("default")
    assert sorted(p.metadata.name for p in listed.items) == sorted(names)
    # Per-create errors arrive typed, as from Create.
    with pytest.raises(AlreadyExistsError):
        await cs.pods.create(make_pod(names[0]).pod)
    bad = make_pod("bad").pod
    bad.spec.containers[0].image = ""
    with pytest.raises(InvalidError, match=r"spec\.containers\[0\]\.image"):
        await cs.pods.create(bad)
    assert cs.metrics.count("create", "pods", "ALREADY_EXISTS") == 1
    # A dry run is never batched (it goes as its own Create call).
    await cs.pods.create(make_pod("dry").pod, dry_run=True)
    assert batcher.items == 62


async def test_one_batch_is_in_flight_unless_a_full_one_waits(apiserver: ApiServer) -> None:
    """Calls arriving while a batch is in flight wait for it and go as the next batch (a second
    sender taking them at once would halve the batches); a second batch goes out early only when
    a full one is waiting."""
    cs = Clientset(await apiserver.channel("admin"), qps=0, burst=1, batch_creates=True)
    batcher = cs.create_batcher("pods")
    assert batcher is not None and batcher.max_inflight == 2
    first = asyncio.create_task(cs.pods.create(make_pod("first").pod))
    while batcher.calls == 0:  # noqa: ASYNC110 (a few loop turns: the sender takes "first" and sends it)
        await asyncio.sleep(0)
    more = await asyncio.gather(*(cs.pods.create(make_pod(f"more-{i}").pod) for i in range(5)))
    await first
    assert [p.metadata.name for p in more] == [f"more-{i}" for i in range(5)]
    assert batcher.peak_inflight == 1 and batcher.items == 6

    batcher.max_batch = 10
    created = await asyncio.gather(*(cs.pods.create(make_pod(f"full-{i}").pod) for i in range(30)))
    assert len(created) == 30 and batcher.items == 36
    assert batcher.peak_inflight == 2  # full batches were waiting


async def test_a_stale_fence_refuses_every_create_of_the_batch(apiserver: ApiServer) -> None:
    admin = Clientset(await apiserver.channel("admin"), qps=0, burst=1)
    stale = await stale_scheduler_fence(admin)
    sched = Clientset(await apiserver.channel("scheduler-1"), qps=0, burst=1, batch_creates=True)
    results = await asyncio.gather(
        *(sched.events.create(event(f"ev{i}").event, fence=stale) for i in range(5)),
        return_exceptions=True,
    )
    assert all(isinstance(r, FencedError) and "fenced" in r.message for r in results), results
    assert not (await admin.events.list("default")).items


async def test_a_batching_event_recorder_writes_a_full_queue_in_few_calls(apiserver: ApiServer) -> None:
    """The scheduler's recorder over a batching clientset: a full queue of Scheduled events (as a
    burst of binds leaves it) is written whole, none dropped, in far fewer calls than events."""
    plain = Clientset(await apiserver.channel("scheduler-1"), qps=0, burst=1)
    assert EventRecorder(plain).writers == UNBATCHED_WRITERS
    cs = Clientset(await apiserver.channel("scheduler-1"), qps=0, burst=1, batch_creates=True)
    recorder = EventRecorder(cs, instance="s1")
    assert recorder.writers == BATCHED_WRITERS
    metas = [pb.ObjectMeta(name=f"p{i}", namespace="default", uid=f"u{i}") for i in range(1000)]
    pods = [pb.Pod(metadata=m) for m in metas]
    for pod in pods:  # exactly the queue's capacity, recorded before any writer ran
        recorder.eventf(pod, NORMAL, "Scheduled", "Binding", "assigned", component="default-scheduler")
    runner = asyncio.create_task(recorder.run())
    try:
        await asyncio.wait_for(recorder.wait_idle(), 60)
    finally:
        runner.cancel()
    assert (recorder.created, recorder.dropped, recorder.failed) == (1000, 0, 0)
    batcher = cs.create_batcher("events")
    assert batcher is not None and batcher.items == 1000 and batcher.calls <= 200
    stored = (await Clientset(await apiserver.channel("admin"), qps=0, burst=1).events.list("default")).items
    assert sorted(e.involved_object.name for e in stored) == sorted(p.metadata.name for p in pods)
