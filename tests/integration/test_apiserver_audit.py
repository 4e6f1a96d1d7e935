"""The audit log (`--audit-log`, apiserver_mock/audit.py): one `kse.audit.AuditRecord` JSON line per
write request, accepted or refused, in the file before the response is sent."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import grpc
import pytest

from apiserver_mock.systemnamespaces import APISERVER_IDENTITY, SYSTEM_NAMESPACES
from kse.audit import AuditFence, AuditRecord, read_audit_log
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, ApiServerFactory, make_node, make_pod, rpc_error

pytestmark = pytest.mark.integration

LEASE_NS, LEASE_NAME = "kube-system", "kube-scheduler"


@pytest.fixture
async def audited(apiserver_factory: ApiServerFactory, tmp_path: Path) -> tuple[ApiServer, Path]:
    path = tmp_path / "audit" / "audit.jsonl"  # the directory is created by the server
    return await apiserver_factory("--audit-log", str(path)), path


def lease_obj(holder: str, transitions: int, renew: str, rv: str = "") -> pb.Object:
    lease = pb.Lease(metadata=pb.ObjectMeta(name=LEASE_NAME, namespace=LEASE_NS, resource_version=rv))
    lease.spec.holder_identity = holder
    lease.spec.lease_transitions = transitions
    lease.spec.lease_duration_seconds = 15
    lease.spec.renew_time = renew
    return pb.Object(lease=lease)


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


APISERVER_USER = APISERVER_IDENTITY.user


class Log:
    """The audit file, read incrementally: `new()` is what was appended since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen = 0

    def new(self) -> list[AuditRecord]:
        """(The API server's own writes, its system namespaces, are left out.)"""
        records = (
            [r for r in read_audit_log(self.path) if r.user != APISERVER_USER] if self.path.exists() else []
        )
        out, self.seen = records[self.seen :], len(records)
        return out

    def one(self) -> AuditRecord:
        """The single record the last call appended: it is there as soon as the response is."""
        new = self.new()
        assert len(new) == 1, new
        return new[0]


async def test_records_for_accepted_and_refused_writes(audited: tuple[ApiServer, Path]):
    server, path = audited
    admin, sched, workload = server.stub("admin"), server.stub("scheduler-1"), server.stub("workload")
    log = Log(path)
    t0 = time.time()

    # -- accepted writes: revision == the object's resourceVersion, uid of the stored object
    pod = (await admin.Create(pb.WriteRequest(object=make_pod("p")))).pod
    r = log.one()
    assert (r.verb, r.resource, r.subresource, r.namespace, r.name, r.code) == (
        "create", "pods", "", "default", "p", "OK",
    )  # fmt: skip
    assert (r.user, r.groups) == ("kse:admin", ("system:masters",))
    assert r.revision == int(pod.metadata.resource_version) and r.uid == pod.metadata.uid
    assert r.fence is None and r.message == "" and t0 <= r.ts <= time.time()

    lease = (
        await sched.Create(pb.WriteRequest(object=lease_obj("sched-a", 3, "2026-01-01T00:00:01.000000Z")))
    ).lease
    r = log.one()
    assert (r.verb, r.resource, r.namespace, r.name, r.user) == (
        "create", "leases", LEASE_NS, LEASE_NAME, "system:kube-scheduler",
    )  # fmt: skip
    assert (r.lease_holder, r.lease_transitions, r.lease_renew_time) == (
        "sched-a",
        3,
        "2026-01-01T00:00:01.000000Z",
    )
    assert r.extra == {"lease_duration_seconds": 15} and r.revision == int(lease.metadata.resource_version)
    renewed = lease_obj("sched-a", 3, "2026-01-01T00:00:03.000000Z", lease.metadata.resource_version)
    lease = (await sched.Update(pb.WriteRequest(object=renewed))).lease
    r = log.one()
    assert (r.verb, r.lease_holder, r.lease_transitions) == ("update", "sched-a", 3)
    assert r.lease_renew_time == "2026-01-01T00:00:03.000000Z" and r.revision == int(
        lease.metadata.resource_version
    )

    fence = pb.FenceToken(
        lease_namespace=LEASE_NS, lease_name=LEASE_NAME, holder_identity="sched-a", lease_transitions=3
    )
    bound = (await sched.Bind(bind_req("p", "node-a", fence))).pod
    r = log.one()
    assert (r.verb, r.resource, r.subresource, r.node, r.code) == ("bind", "pods", "binding", "node-a", "OK")
    assert r.fence == AuditFence(f"{LEASE_NS}/{LEASE_NAME}", "sched-a", 3)
    assert r.uid == pod.metadata.uid and r.revision == int(bound.metadata.resource_version)
    assert r.lease_holder is None  # lease fields are for Lease writes only

    status = pb.Pod()
    status.CopyFrom(bound)
    status.status.phase = "Running"
    node_a = server.stub("node-node-a")
    running = (await node_a.UpdateStatus(pb.WriteRequest(object=pb.Object(pod=status)))).pod
    r = log.one()
    assert (r.verb, r.subresource, r.user, r.extra) == (
        "update_status",
        "status",
        "system:node:node-a",
        {"phase": "Running"},
    )
    assert r.revision == int(running.metadata.resource_version)

    # -- refused writes: code and message, no revision
    e = await rpc_error(workload.Bind(bind_req("p", "node-b")))
    r = log.one()
    assert (r.verb, r.code, r.user, r.node) == ("bind", "PERMISSION_DENIED", "kse:workload", "node-b")
    assert r.revision is None and r.message == e.details()

    bad = make_pod("bad")
    del bad.pod.spec.containers[:]
    await rpc_error(admin.Create(pb.WriteRequest(object=bad)))
    r = log.one()
    assert (r.verb, r.name, r.code, r.uid) == ("create", "bad", "INVALID_ARGUMENT", "")
    assert "spec.containers" in r.message

    await rpc_error(admin.Create(pb.WriteRequest(object=make_pod("p"))))
    r = log.one()
    # A refused create never stored a uid: none is recorded (not the one generated for it).
    assert (r.code, r.uid, r.revision) == ("ALREADY_EXISTS", "", None)

    stale = make_pod("p")
    stale.pod.metadata.resource_version = pod.metadata.resource_version
    await rpc_error(admin.Update(pb.WriteRequest(object=stale)))
    assert log.one().code == "ABORTED"

    takeover = lease_obj("sched-b", 4, "2026-01-01T00:00:05.000000Z", lease.metadata.resource_version)
    await server.stub("scheduler-2").Update(pb.WriteRequest(object=takeover))
    assert log.one().lease_holder == "sched-b"
    await admin.Create(pb.WriteRequest(object=make_pod("q")))
    log.one()
    e = await rpc_error(sched.Bind(bind_req("q", "node-a", fence)))
    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
    r = log.one()
    assert (r.verb, r.code, r.revision) == ("bind", "FAILED_PRECONDITION", None)
    assert r.fence == AuditFence(f"{LEASE_NS}/{LEASE_NAME}", "sched-a", 3) and "sched-b" in r.message

    # -- deletes: the deleting revision and the deleted object's uid
    now = pb.DeleteRequest(resource="pods", namespace="default", name="p", grace_period_seconds=0)
    deleted = (await admin.Delete(now)).pod
    r = log.one()
    assert (r.verb, r.code, r.uid) == ("delete", "OK", pod.metadata.uid)
    assert r.revision == int(deleted.metadata.resource_version)
    q = (await admin.Evict(pb.EvictRequest(namespace="default", name="q"))).pod
    r = log.one()
    assert (r.verb, r.subresource, r.name, r.revision) == (
        "evict",
        "eviction",
        "q",
        int(q.metadata.resource_version),
    )
    await rpc_error(admin.Delete(pb.DeleteRequest(resource="pods", name="gone")))
    r = log.one()
    assert (r.verb, r.namespace, r.code) == ("delete", "default", "NOT_FOUND")
    await admin.Delete(pb.DeleteRequest(resource="leases", namespace=LEASE_NS, name=LEASE_NAME))
    r = log.one()
    assert (r.resource, r.verb, r.code, r.lease_holder) == ("leases", "delete", "OK", None)

    # -- a cluster-scoped object: no namespace, and the record still reads back
    node = (await admin.Create(pb.WriteRequest(object=make_node("n1")))).node
    r = log.one()
    assert (r.resource, r.namespace, r.name, r.uid) == ("nodes", "", "n1", node.metadata.uid)

    # -- reads are not audited
    await admin.List(pb.ListRequest(resource="pods"))
    await rpc_error(admin.Get(pb.GetRequest(resource="pods", namespace="default", name="p")))
    assert log.new() == []

    # -- the file is JSON lines, each round-tripping through the record type
    lines = path.read_text().splitlines()
    assert len(lines) == len(list(read_audit_log(path))) == 17 + len(SYSTEM_NAMESPACES)
    for line in lines:
        data = json.loads(line)
        assert AuditRecord.from_json(line).to_json() == json.dumps(data, sort_keys=True)


async def test_acknowledged_writes_survive_a_sigkill_in_the_log(audited: tuple[ApiServer, Path]):
    """A SIGKILL right after the answers: every acknowledged bind's record is in the file (written
    before the answer; the page cache keeps it), with the acknowledged revision."""
    server, path = audited
    admin, sched = server.stub("admin"), server.stub("scheduler-1")
    n = 100
    await asyncio.gather(*(admin.Create(pb.WriteRequest(object=make_pod(f"p{i}"))) for i in range(n)))
    results = await asyncio.gather(*(sched.Bind(bind_req(f"p{i}", "node-a")) for i in range(n)))
    acked = {(o.pod.metadata.name, int(o.pod.metadata.resource_version)) for o in results}
    server.process.kill()
    server.process.wait()
    binds = {(r.name, r.revision) for r in read_audit_log(path) if r.verb == "bind" and r.code == "OK"}
    assert acked <= binds and len(binds) == n


async def test_no_audit_log_without_the_flag(apiserver: ApiServer, tmp_path: Path):
    await apiserver.stub("admin").Create(pb.WriteRequest(object=make_pod("p")))
    assert "audit log off" in apiserver.log()


async def test_a_cancelled_write_that_landed_is_recorded_with_its_outcome(audited: tuple[ApiServer, Path]):
    """Creates whose client gives up (deadlines shorter than the write) while the write is in
    flight: whatever reached etcd has an accepted record with its revision, and no write is left
    CANCELLED (outcome unknown), so the log is the history of etcd. Before the fix, writes the
    server saw cancelled were logged CANCELLED although they were in etcd."""
    server, path = audited
    admin = server.stub("admin")
    n = 200

    async def create(i: int) -> None:
        try:
            # Deadlines from 2 to 42 ms: some expire before the server, some during the write.
            await admin.Create(pb.WriteRequest(object=make_pod(f"c{i}")), timeout=0.002 + i * 0.0002)
        except grpc.aio.AioRpcError as e:
            assert e.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED), e

    await admin.Create(pb.WriteRequest(object=make_pod("warm")))  # the channel is up
    await asyncio.gather(*(create(i) for i in range(n)))

    async def state() -> tuple[dict[str, str], dict[str, str], list[AuditRecord]]:
        listed = await admin.List(pb.ListRequest(resource="pods"))
        recs = [r for r in read_audit_log(path) if r.verb == "create" and r.resource == "pods"]
        present = {o.pod.metadata.uid: o.pod.metadata.name for o in listed.items}
        return present, {r.uid: r.name for r in recs if r.code == "OK"}, recs

    # A write whose caller left may still be finishing: poll until the log and etcd agree.
    deadline = time.monotonic() + 10.0
    present, accepted, recs = await state()
    while accepted != present and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        present, accepted, recs = await state()
    assert accepted == present
    assert all(r.revision for r in recs if r.code == "OK")
    assert [r.name for r in recs if r.code == "CANCELLED"] == []
    assert len(present) < n + 1, "no deadline cut a write short: the test proves nothing"
