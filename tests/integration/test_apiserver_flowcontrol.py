"""Overload on a real API server: priority and fairness keeps Lease traffic moving while a flood of
workload creates is queued and shed with RESOURCE_EXHAUSTED + retry-after; kse's client honours it;
nothing acknowledged is lost; and with fairness off the same flood refuses the Lease update too."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from kse.audit import read_audit_log
from kse.client.clientset import Clientset
from kse.client.errors import TooManyRequestsError, from_rpc_error
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pbg
from tests.fixtures.apiserver import ApiServer, ApiServerFactory, make_pod, stored_keys
from tests.fixtures.kube import http_client
from tests.fixtures.polling import until

pytestmark = pytest.mark.integration

# Two seats in all: one for the workloads' level (global-default), one for leader election; no
# stream cap, so the flood reaches the gate whole.
TINY = ("--max-requests-inflight", "1", "--max-mutating-requests-inflight", "1")
NO_STREAM_CAP = ("--http2-max-streams-per-connection", "0")
FLOOD_INFLIGHT = 600  # > the level's queues (6 queues x 50 in the flow's hand) + its seat


class Flood:
    """Workload creates kept `FLOOD_INFLIGHT` deep on one connection until stopped."""

    def __init__(self, stub: pbg.ResourcesStub) -> None:
        self.stub = stub
        self.codes: collections.Counter[str] = collections.Counter()
        self.acked: list[str] = []
        self.retry_after: set[str] = set()
        self.messages: set[str] = set()
        self.stop = asyncio.Event()
        self._next = 0

    async def _worker(self) -> None:
        while not self.stop.is_set():
            name = f"flood-{self._next}"
            self._next += 1
            try:
                await self.stub.Create(pb.WriteRequest(object=make_pod(name)), timeout=60)
            except grpc.aio.AioRpcError as e:
                self.codes[e.code().name] += 1
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    self.messages.add(e.details() or "")
                    self.retry_after.update(v for k, v in e.trailing_metadata() or () if k == "retry-after")
            else:
                self.codes["OK"] += 1
                self.acked.append(name)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for _ in range(FLOOD_INFLIGHT):
                tg.create_task(self._worker())


async def _during_flood(server: ApiServer, body: Callable[[Flood], Awaitable[None]]) -> Flood:
    flood = Flood(pbg.ResourcesStub(await server.channel("workload")))
    task = asyncio.create_task(flood.run())
    try:
        await until(lambda: flood.codes["RESOURCE_EXHAUSTED"] > 0 or task.done(), "the flood to be shed")
        await body(flood)
    finally:
        flood.stop.set()
        await task
    return flood


def _lease(name: str) -> pb.WriteRequest:
    lease = pb.Lease(metadata=pb.ObjectMeta(name=name, namespace="kube-system"))
    lease.spec.holder_identity = "probe"
    return pb.WriteRequest(object=pb.Object(lease=lease))


async def test_the_flood_is_shed_with_retry_after_while_lease_updates_all_pass(
    apiserver_factory: ApiServerFactory,
) -> None:
    server = await apiserver_factory(*TINY, *NO_STREAM_CAP)
    sched = pbg.ResourcesStub(await server.channel("scheduler-1"))
    created = (await sched.Create(_lease("probe"))).lease
    lease_errors: list[str] = []

    async def renew_twenty_times(flood: Flood) -> None:
        current = created
        for i in range(20):
            current.spec.renew_time = f"2026-12-02T00:00:{i:02d}.000000Z"
            try:
                obj = await sched.Update(pb.WriteRequest(object=pb.Object(lease=current)), timeout=10)
                current = obj.lease
            except grpc.aio.AioRpcError as e:
                lease_errors.append(e.code().name)

    flood = await _during_flood(server, renew_twenty_times)
    assert lease_errors == []
    assert flood.codes["RESOURCE_EXHAUSTED"] > 0 and flood.codes["OK"] > 0
    assert set(flood.codes) <= {"OK", "RESOURCE_EXHAUSTED"}, flood.codes
    assert flood.retry_after == {"1"}
    assert flood.messages == {"Too many requests, please try again later."}
    # Every acknowledged create is in etcd (read directly), and no refused one is.
    keys = {k.decode().rsplit("/", 1)[-1] for k in await stored_keys(server, "pods")}
    assert set(flood.acked) == keys


async def test_kse_client_sends_a_shed_request_again_after_retry_after(
    apiserver_factory: ApiServerFactory,
) -> None:
    server = await apiserver_factory(*TINY, *NO_STREAM_CAP)
    # The flood's own identity, so its requests share the flood's full queues.
    cs = Clientset(await server.channel("workload"), qps=0, burst=1)
    created: list[pb.Pod] = []

    def shed() -> int:
        return cs.metrics.count(verb="create", code="RESOURCE_EXHAUSTED")

    async def create_through_the_client(flood: Flood) -> None:
        for i in range(100):
            task = asyncio.create_task(cs.pods.create(make_pod(f"patient-{i}").pod))
            await until(lambda t=task: t.done() or shed() > 0, "the create to end or be shed")
            if shed() > 0:
                break
            created.append(task.result())  # it found a place in a queue: try another
        else:
            raise AssertionError("100 creates during the flood, none shed")
        flood.stop.set()  # the flood ends: the client's next attempt gets in
        created.append(await task)

    await _during_flood(server, create_through_the_client)
    # The shed create was not an error for the caller: the client waited and sent it again.
    assert created[-1].metadata.name.startswith("patient-")
    assert shed() >= 1 and cs.metrics.count(verb="create", code="OK") == len(created)


async def test_a_shed_answer_carries_its_retry_after_to_the_typed_error(
    apiserver_factory: ApiServerFactory,
) -> None:
    server = await apiserver_factory(*TINY, *NO_STREAM_CAP)
    stub = pbg.ResourcesStub(await server.channel("workload"))

    async def raw_create(flood: Flood) -> None:
        for i in range(200):
            try:
                await stub.Create(pb.WriteRequest(object=make_pod(f"raw-{i}")))
            except grpc.aio.AioRpcError as e:
                err = from_rpc_error(e)
                assert isinstance(err, TooManyRequestsError) and err.retry_after == 1.0
                return
        raise AssertionError("200 creates during the flood, none shed")

    await _during_flood(server, raw_create)


async def test_without_priority_and_fairness_the_flood_refuses_the_lease_update(
    apiserver_factory: ApiServerFactory,
) -> None:
    # Every commit takes 300 ms, so the flood's admitted creates hold the five mutating seats
    # continuously and the outcome does not hang on how fast this machine answers (on a loaded CI
    # machine, fast commits left gaps the Lease update kept slipping through for 200 tries).
    server = await apiserver_factory(
        "--enable-priority-and-fairness=false",
        "--max-requests-inflight",
        "5",
        "--max-mutating-requests-inflight",
        "5",
        *NO_STREAM_CAP,
        "--failpoints",
        "storage/before-commit=delay(300)",
    )
    sched = pbg.ResourcesStub(await server.channel("scheduler-1"))
    current = (await sched.Create(_lease("probe"), timeout=30)).lease
    refused: list[str] = []

    async def renew_until_refused(flood: Flood) -> None:
        nonlocal current
        for i in range(50):
            current.spec.renew_time = f"2026-12-02T00:00:{i % 60:02d}.000000Z"
            try:
                request = pb.WriteRequest(object=pb.Object(lease=current))
                current = (await sched.Update(request, timeout=30)).lease
            except grpc.aio.AioRpcError as e:
                refused.append(e.code().name)
                return

    await _during_flood(server, renew_until_refused)
    assert refused == ["RESOURCE_EXHAUSTED"]


async def test_over_http_a_shed_request_is_429_with_retry_after(apiserver_factory: ApiServerFactory) -> None:
    server = await apiserver_factory(*TINY, *NO_STREAM_CAP)
    answers: list[tuple[int, Any, Any]] = []

    async def post_until_shed(flood: Flood) -> None:
        async with http_client(server, "workload") as http:
            for i in range(200):
                code, body, headers = await http.call(
                    "POST",
                    "/api/v1/namespaces/default/pods",
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": f"h-{i}"},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                    },
                )
                if code == 429:
                    answers.append((code, body, headers))
                    return
                assert code == 201, body

    await _during_flood(server, post_until_shed)
    assert answers, "200 HTTP creates during the flood, none shed"
    _, body, headers = answers[0]
    assert headers["Retry-After"] == "1"
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 1
    assert body["message"] == "Too many requests, please try again later."


async def test_over_http_a_write_is_shed_before_its_body_is_read(
    apiserver_factory: ApiServerFactory, tmp_path: Path
) -> None:
    """As upstream's filter chain: priority and fairness sees a write from its URL, before the body
    is decoded, so a flood costs the server no decoding of what it sheds. A body that cannot be
    decoded shows the order: under the flood it is answered 429 (shed first), not only 400."""
    audit = tmp_path / "audit.jsonl"
    server = await apiserver_factory(*TINY, *NO_STREAM_CAP, "--audit-log", str(audit))
    codes: collections.Counter[int] = collections.Counter()

    async def post_garbage_until_shed(flood: Flood) -> None:
        async with http_client(server, "workload") as http:
            for _ in range(200):
                code, body, _ = await http.call("POST", "/api/v1/namespaces/default/pods", raw=b"{not json")
                codes[code] += 1
                if code == 429:
                    return
                assert code == 400, body

    await _during_flood(server, post_garbage_until_shed)
    assert codes[429] == 1, f"200 undecodable creates during the flood, none shed: {dict(codes)}"
    # The refusal is audited like any refused write (kind, namespace, user; the name is in the body).
    early = [
        r
        for r in read_audit_log(audit)
        if r.code == "RESOURCE_EXHAUSTED" and r.verb == "create" and r.resource == "pods" and not r.name
    ]
    assert early and all(r.namespace == "default" for r in early), "the early refusal left no audit record"
