"""The `kse apiserver` process: readiness, health, reflection, connection file, signals, flags."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from kse.client.channel import secure_channel
from kse.config import ConnectionFile
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pbg
from tests.fixtures.apiserver import REPO_ROOT, ApiServer, ApiServerFactory, make_pod, watch

pytestmark = pytest.mark.integration


async def test_ready_file_health_and_reflection(apiserver: ApiServer):
    ch = await apiserver.channel("workload")  # any identity may ask for health
    health = health_pb2_grpc.HealthStub(ch)
    for service in ("", "kse.v1.Resources"):
        resp = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(ch)
    responses = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    async for resp in responses:
        services = {s.name for s in resp.list_services_response.service}
        break
    assert {
        "kse.v1.Resources",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= services
    info = json.loads((apiserver.log_path.parent / "ready.json").read_text())
    assert info["address"] == apiserver.address and info["pid"] == apiserver.process.pid


async def test_connection_file_and_sigterm(apiserver_factory: ApiServerFactory, tmp_path):
    conn_path = tmp_path / "conn" / "config.json"
    server = await apiserver_factory("--connection-file", str(conn_path))
    conn = ConnectionFile.load(conn_path)
    assert conn.server == server.address and conn.cert_file == server.pki.admin.cert
    ch = secure_channel(conn_path)
    try:
        stub = pbg.ResourcesStub(ch)
        await stub.Create(pb.WriteRequest(object=make_pod("p")))
        lst = await stub.List(pb.ListRequest(resource="pods"))
        s = watch(stub, resource_version=lst.metadata.resource_version)
        await s.call.initial_metadata()
        t0 = time.monotonic()
        code = await server.stop()
        assert code == 0 and time.monotonic() - t0 < 5
        # The open watch was ended by the server, telling the client to resume elsewhere/later.
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await s.next_batch(timeout_s=5)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert not (server.log_path.parent / "ready.json").exists()
        assert "stopped" in server.log()
    finally:
        await ch.close()


async def test_max_connection_age_ends_streams_which_resume(apiserver_factory: ApiServerFactory):
    server = await apiserver_factory("--max-connection-age", "1")
    stub = server.stub("admin")
    start = (await stub.List(pb.ListRequest(resource="pods"))).metadata.resource_version
    s = watch(stub, resource_version=start)
    rev = (await stub.Create(pb.WriteRequest(object=make_pod("p")))).pod.metadata.resource_version
    [ev] = await s.events_until(lambda evs: len(evs) >= 1)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await s.events_until(lambda evs: False, timeout_s=10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    # Resuming from the last revision seen continues with exactly the next event.
    resumed = watch(stub, resource_version=ev.resource_version)
    rev2 = (await stub.Create(pb.WriteRequest(object=make_pod("q")))).pod.metadata.resource_version
    [ev2] = await resumed.events_until(lambda evs: len(evs) >= 1)
    assert ev.resource_version == rev and ev2.resource_version == rev2


def test_bad_flags_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "kse", "apiserver", "--listen", "nowhere"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "error:" in proc.stderr and "Traceback" not in proc.stderr


async def test_unreachable_etcd_exits_1(pki, tmp_path):
    from harness.procs.ports import free_port

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kse",
        "apiserver",
        "--etcd-endpoints",
        f"http://127.0.0.1:{free_port()}",
        "--pki-dir",
        str(pki.dir),
        "--listen",
        "127.0.0.1:0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=REPO_ROOT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert b"cannot start: etcd" in out and b"Traceback" not in out


async def test_unexpected_errors_are_internal_and_logged(apiserver: ApiServer):
    """A stored value that does not decode (written behind the server's back) makes a write fail with
    INTERNAL and a logged traceback; the server keeps serving."""
    stub = apiserver.stub("admin")
    created = await stub.Create(pb.WriteRequest(object=make_pod("p")))
    etcd = await apiserver.etcd()
    try:
        await etcd.put(apiserver.key("pods", "default", "p"), b"\xff\xff not a protobuf")
    finally:
        await etcd.close()
    # A resourceVersion the cache does not have makes the server read the object from etcd.
    created.pod.metadata.resource_version = "1"
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await stub.Update(pb.WriteRequest(object=created))
    assert e.value.code() == grpc.StatusCode.INTERNAL
    assert e.value.details().startswith("internal error: ")
    assert "Traceback" in apiserver.log() and "internal error" in apiserver.log()
    health = health_pb2_grpc.HealthStub(await apiserver.channel("admin"))
    assert (
        await health.Check(health_pb2.HealthCheckRequest())
    ).status == health_pb2.HealthCheckResponse.SERVING
    await stub.Create(pb.WriteRequest(object=make_pod("q")))
