"""Failpoints in a real API server, and the checks they prove: a watch event the server drops or
delivers twice is caught by `watch_integrity` (and a run without the failpoint passes it), and a
server killed after etcd committed a write but before it answered loses nothing it acknowledged,
while the unacknowledged write is found by reading etcd.

The fault is armed through `--failpoints-file` + SIGUSR2 after start-up, so the API server's own
start-up writes (its system namespaces) do not use up the failpoint's count.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import grpc
import pytest

from chaos.checker.invariants import watch_integrity
from chaos.history import History, WatchDeliveryRecord, WatchRecorder
from kse.audit import read_audit_log
from kse.client.clientset import Clientset
from kse.client.informer import InformerFactory
from kse.records import read_jsonl
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, make_pod, rpc_error, start_apiserver
from tests.fixtures.polling import until

pytestmark = pytest.mark.integration

N_PODS = 8


def arm(server: ApiServer, spec_file: Path, spec: str) -> None:
    spec_file.write_text(spec)
    server.process.send_signal(signal.SIGUSR2)


async def armed(server: ApiServer, spec: str) -> None:
    """Wait until the server logged that the failpoint is on."""
    await until(
        lambda: f"failpoints enabled: {spec.split('=')[0]}" in server.log(), "the failpoint armed", 10
    )


async def run_watched_writes(server: ApiServer, tmp_path: Path, spec_file: Path, spec: str | None) -> History:
    """An informer records what it gets while N_PODS pods are created; the History of both."""
    watch_file = tmp_path / "watch-test.jsonl"
    cs = Clientset(await server.channel("admin"), qps=0, burst=0)
    recorder = WatchRecorder(watch_file, "test")
    factory = InformerFactory(cs, history=recorder)
    pods = factory.informer_for(cs.pods)
    async with factory.running():
        await factory.wait_for_sync()
        if spec is not None:
            arm(server, spec_file, spec)
            await armed(server, spec)
        last = ""
        for i in range(N_PODS):
            created = await cs.pods.create(make_pod(f"p{i}").pod)
            last = created.metadata.resource_version
        # Everything up to the last write is delivered (a dropped event leaves a hole, not a lag).
        await until(lambda: int(pods.last_synced_resource_version or 0) >= int(last), "the last write", 15)
    recorder.close()
    audit = [r for r in read_audit_log(tmp_path / "audit.jsonl") if r.resource == "pods"]
    watch = list(read_jsonl(watch_file, WatchDeliveryRecord.from_json))
    return History(audit=audit, watch=watch)


async def start(etcd: Any, pki: Any, tmp_path: Path) -> tuple[ApiServer, Path]:
    spec_file = tmp_path / "failpoints"
    spec_file.write_text("")
    server = await start_apiserver(
        etcd, pki, tmp_path / "apiserver", "--audit-log", str(tmp_path / "audit.jsonl"),
        "--failpoints-file", str(spec_file),
    )  # fmt: skip
    return server, spec_file


@pytest.mark.parametrize(
    ("spec", "violation"),
    [
        (None, None),
        ("watchcache/dispatch=3*off->1*drop", "lost"),
        ("watchcache/dispatch=3*off->1*duplicate", "duplicated"),
    ],
    ids=["control", "dropped-event", "duplicated-event"],
)
async def test_watch_integrity_catches_a_dropped_or_duplicated_event(
    etcd: Any, pki: Any, tmp_path: Path, spec: str | None, violation: str | None
) -> None:
    server, spec_file = await start(etcd, pki, tmp_path)
    try:
        history = await run_watched_writes(server, tmp_path, spec_file, spec)
    finally:
        await server.stop()
    result = watch_integrity(history)
    if violation is None:
        assert result.passed, result.detail
        assert result.counts["lost"] == 0 and result.counts["duplicated"] == 0
    else:
        assert not result.passed, result.detail
        assert result.counts[violation] == 1, result.counts


async def test_a_crash_between_commit_and_reply_loses_nothing_acknowledged(
    etcd: Any, pki: Any, tmp_path: Path
) -> None:
    server, spec_file = await start(etcd, pki, tmp_path)
    acked: list[str] = []
    try:
        cs = Clientset(await server.channel("admin"), qps=0, burst=0)
        for i in range(3):
            acked.append((await cs.pods.create(make_pod(f"acked-{i}").pod)).metadata.uid)
        arm(server, spec_file, "storage/after-commit=1*crash")
        await armed(server, "storage/after-commit=1*crash")
        stub = server.stub("admin")
        err = await rpc_error(stub.Create(pb.WriteRequest(object=make_pod("in-doubt"))))
        assert err.code() == grpc.StatusCode.UNAVAILABLE  # the server died before it answered
        await until(lambda: server.process.poll() is not None, "the API server to exit", 10)
        assert server.process.returncode == 137
    finally:
        await server.stop()
    # A new server over the same etcd prefix: every acknowledged write is there, and so is the
    # write whose outcome the client could not know (etcd had committed it); the audit log has no
    # record of it, which is why the chaos checks resolve such outcomes from etcd, not the log.
    again = await start_apiserver(etcd, pki, tmp_path / "apiserver-2", prefix=server.prefix)
    try:
        cs = Clientset(await again.channel("admin"), qps=0, burst=0)
        present = {p.metadata.name: p.metadata.uid for p in (await cs.pods.list("default")).items}
        assert set(acked) <= set(present.values())
        assert "in-doubt" in present
        logged = {r.name for r in read_audit_log(tmp_path / "audit.jsonl") if r.resource == "pods"}
        assert "in-doubt" not in logged and {f"acked-{i}" for i in range(3)} <= logged
    finally:
        await again.stop()
