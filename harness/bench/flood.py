"""A flood client of `kse bench overload`: one process sending pod creates (and some LISTs) faster
than the API server can take them, as a misbehaving controller or a bulk job would.

It is a raw gRPC client on purpose: no client-side rate limit and no retry of a shed request, so
what it offers is what reaches the server. With `rate` > 0 it is open-loop: request i is due at
t0 + i / rate whatever the answers do (a late answer does not slow the flood), with at most
`max_outstanding` requests in flight (a due request past that cap is counted `not_sent`, so the
client cannot grow without bound either). With `rate` == 0 it is closed-loop with `max_outstanding`
in flight (the capacity calibration). The names of the pods whose create was acknowledged are
written to `acked_file`, one per line, so the bench can check every acknowledged write is stored.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from google.protobuf import json_format

from harness.bench.common import LoadResult, StartGate, measured_window
from kse.client.channel import secure_channel
from kse.config import ConnectionFile
from proto import kse_pb2 as pb

# Flood pods name a scheduler nobody runs, so the cluster's schedulers leave them Pending.
FLOOD_SCHEDULER = "kse-overload-flood"
CALL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class FloodArgs:
    address: str
    cert: Path
    key: Path
    ca: Path
    namespace: str
    name_prefix: str
    duration: float
    rate: float  # requests per second; 0: closed loop
    max_outstanding: int
    list_every: int  # every Nth request is a LIST of the namespace (limit 500); 0: creates only
    acked_file: Path
    # "grpc", or "http": the Kubernetes HTTP API at `http_address` (POST and GET of pods as JSON,
    # over at most `http_connections` keep-alive HTTP/1.1 connections: what cannot be sent waits)
    door: str = "grpc"
    http_address: str | None = None
    http_connections: int = 64


NAME_DIGITS = 9  # flood pod names are `<prefix>-<i, zero-padded>`: every request the same size
CREATE_METHOD = "/kse.v1.Resources/Create"
LIST_METHOD = "/kse.v1.Resources/List"


def flood_pod_name(prefix: str, i: int) -> str:
    return f"{prefix}-{i:0{NAME_DIGITS}d}"


class NamePatched:
    """Request i of a flood, without building a message per request: `serialize(name)` runs once,
    with a fixed-width placeholder name, and each request patches pod i's name into those bytes.
    The flood must cost its client far less than it costs the server, or on a small machine the
    clients, not the server, set the pace."""

    def __init__(self, serialize: Callable[[str], bytes], prefix: str) -> None:
        placeholder = prefix + "-" + "#" * NAME_DIGITS
        raw = serialize(placeholder)
        if raw.count(placeholder.encode()) != 1:
            raise ValueError("the flood pod's name must appear once in its serialized request")
        self._head, self._tail = raw.split(placeholder.encode())
        self._prefix = (prefix + "-").encode()

    def __call__(self, i: int) -> bytes:
        return self._head + self._prefix + b"%0*d" % (NAME_DIGITS, i) + self._tail


def create_requests(namespace: str, prefix: str) -> NamePatched:
    """The serialized gRPC `WriteRequest` creating flood pod i."""
    return NamePatched(
        lambda name: pb.WriteRequest(object=pb.Object(pod=flood_pod(namespace, name))).SerializeToString(),
        prefix,
    )


def pod_json_creates(namespace: str, prefix: str) -> NamePatched:
    """The JSON body POSTed to create flood pod i over HTTP."""
    return NamePatched(
        lambda name: json_format.MessageToJson(flood_pod(namespace, name), indent=None).encode(), prefix
    )


def flood_pod(namespace: str, name: str) -> pb.Pod:
    pod = pb.Pod(api_version="v1", kind="Pod")
    pod.metadata.name, pod.metadata.namespace = name, namespace
    pod.metadata.labels["kse.io/overload"] = "flood"
    pod.spec.scheduler_name = FLOOD_SCHEDULER
    c = pod.spec.containers.add()
    c.name, c.image = "app", "registry.k8s.io/pause:3.9"
    c.resources.requests["cpu"] = "10m"
    return pod


# HTTP statuses as the gRPC codes the overload report counts (kube-apiserver's mapping, reversed).
_HTTP_CODES = {429: "RESOURCE_EXHAUSTED", 409: "ALREADY_EXISTS", 504: "DEADLINE_EXCEEDED", 503: "UNAVAILABLE"}


def http_code_name(status: int) -> str:
    return _HTTP_CODES.get(status, "INTERNAL" if status >= 500 else f"HTTP_{status}")


class _Pacer:
    """When each request goes: open-loop at `rate` (request i due at t0 + i / rate, a due request
    past `max_outstanding` in flight counted `not_sent`), or closed-loop with `max_outstanding`
    in flight when `rate` is 0. The door's `send(i)` must call `done()` when request i ends."""

    def __init__(self, args: FloodArgs) -> None:
        self.args = args
        self.outstanding = 0
        self._slots = asyncio.Semaphore(args.max_outstanding)  # the closed loop's in-flight cap

    def done(self) -> None:
        self.outstanding -= 1
        if self.args.rate <= 0:
            self._slots.release()

    async def run(self, result: LoadResult, send: Callable[[int], Coroutine[Any, Any, None]]) -> None:
        args = self.args
        async with measured_window(result), asyncio.TaskGroup() as tg:
            start = time.monotonic()
            end = start + args.duration
            i = 0
            while time.monotonic() < end:
                if args.rate > 0:
                    delay = start + i / args.rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    if self.outstanding >= args.max_outstanding:
                        result.errors["not_sent"] += 1
                        i += 1
                        continue
                else:
                    await self._slots.acquire()
                self.outstanding += 1
                tg.create_task(send(i))
                i += 1


class _Tally:
    """What one flood process saw: its `LoadResult`, the pods whose create was acknowledged, and
    the first message of each error code; `write()` leaves the last two beside `acked_file`."""

    def __init__(self, args: FloodArgs) -> None:
        self.args = args
        self.result = LoadResult()
        self.result.errors = Counter()
        self.acked: list[int] = []  # the indexes of the pods whose create was acknowledged
        self.samples: dict[str, str] = {}

    def is_list(self, i: int) -> bool:
        every = self.args.list_every
        return bool(every) and i % every == every - 1

    def ok(self, i: int, started: float) -> None:
        self.result.ok += 1
        self.result.latencies.append(time.perf_counter() - started)
        if not self.is_list(i):
            self.acked.append(i)

    def failed(self, code: str, detail: str) -> None:
        self.result.failed += 1
        self.result.errors[code] += 1
        self.samples.setdefault(code, detail)

    def write(self) -> LoadResult:
        args = self.args
        args.acked_file.write_text("".join(f"{flood_pod_name(args.name_prefix, i)}\n" for i in self.acked))
        args.acked_file.with_suffix(".errors.json").write_text(json.dumps(self.samples))
        return self.result


async def flood(args: FloodArgs, gate: StartGate) -> LoadResult:
    if args.door == "http":
        return await _flood_http(args, gate)
    tally = _Tally(args)
    conn = ConnectionFile.for_identity(args.address, args.cert, args.key, args.ca)
    creates = create_requests(args.namespace, args.name_prefix)
    list_request = pb.ListRequest(resource="pods", namespace=args.namespace, limit=500).SerializeToString()
    async with secure_channel(conn) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        # Bytes in, bytes out: no protobuf built or parsed per request (only success matters).
        create = channel.unary_unary(CREATE_METHOD)
        list_pods = channel.unary_unary(LIST_METHOD)
        pacer = _Pacer(args)

        async def one(i: int) -> None:
            started = time.perf_counter()
            try:
                if tally.is_list(i):
                    await list_pods(list_request, timeout=CALL_TIMEOUT_S)
                else:
                    await create(creates(i), timeout=CALL_TIMEOUT_S)
            except grpc.aio.AioRpcError as e:
                tally.failed(e.code().name, e.details() or "")
            else:
                tally.ok(i, started)
            finally:
                pacer.done()

        await gate()
        await pacer.run(tally.result, one)
    return tally.write()


async def _flood_http(args: FloodArgs, gate: StartGate) -> LoadResult:
    """`flood` through the Kubernetes HTTP API: the same pacing, requests and counting."""
    import aiohttp

    from harness.bench.httpload import HttpTarget, session, warm_up

    if args.http_address is None:
        raise ValueError("an HTTP flood needs the API server's http_address")
    tally = _Tally(args)
    target = HttpTarget(args.http_address, args.ca, args.cert, args.key)
    creates = pod_json_creates(args.namespace, args.name_prefix)
    pods_url = f"/api/v1/namespaces/{args.namespace}/pods"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    async with session(target, args.http_connections) as http:
        await warm_up(http, target, args.http_connections)
        pacer = _Pacer(args)

        async def one(i: int) -> None:
            started = time.perf_counter()
            try:
                async with asyncio.timeout(CALL_TIMEOUT_S):
                    if tally.is_list(i):
                        call = http.get(pods_url, params={"limit": "500"}, server_hostname=target.server_name)
                    else:
                        call = http.post(
                            pods_url, data=creates(i), headers=headers, server_hostname=target.server_name
                        )
                    async with call as resp:
                        body = await resp.read()
                        status = resp.status
            except TimeoutError:
                tally.failed("DEADLINE_EXCEEDED", f"no answer within {CALL_TIMEOUT_S:g} s")
            except aiohttp.ClientError as e:
                tally.failed("UNAVAILABLE", f"{type(e).__name__}: {e}")
            else:
                if status < 300:
                    tally.ok(i, started)
                else:
                    tally.failed(http_code_name(status), body[:300].decode(errors="replace"))
            finally:
                pacer.done()

        await gate()
        await pacer.run(tally.result, one)
    return tally.write()
