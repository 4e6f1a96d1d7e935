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
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from harness.bench.common import LoadResult, StartGate, measured_window
from kse.client.channel import secure_channel
from kse.config import ConnectionFile
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pb_grpc

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


def flood_pod(namespace: str, name: str) -> pb.Pod:
    pod = pb.Pod(api_version="v1", kind="Pod")
    pod.metadata.name, pod.metadata.namespace = name, namespace
    pod.metadata.labels["kse.io/overload"] = "flood"
    pod.spec.scheduler_name = FLOOD_SCHEDULER
    c = pod.spec.containers.add()
    c.name, c.image = "app", "registry.k8s.io/pause:3.9"
    c.resources.requests["cpu"] = "10m"
    return pod


async def flood(args: FloodArgs, gate: StartGate) -> LoadResult:
    result = LoadResult()
    result.errors = Counter()
    acked: list[str] = []
    samples: dict[str, str] = {}  # the first message of each error code
    conn = ConnectionFile.for_identity(args.address, args.cert, args.key, args.ca)
    async with secure_channel(conn) as channel:
        await asyncio.wait_for(channel.channel_ready(), 30)
        stub = pb_grpc.ResourcesStub(channel)
        outstanding = 0
        slots = asyncio.Semaphore(args.max_outstanding)  # the closed loop's in-flight cap

        async def one(i: int) -> None:
            nonlocal outstanding
            t0 = time.perf_counter()
            try:
                if args.list_every and i % args.list_every == args.list_every - 1:
                    await stub.List(
                        pb.ListRequest(resource="pods", namespace=args.namespace, limit=500),
                        timeout=CALL_TIMEOUT_S,
                    )
                else:
                    name = f"{args.name_prefix}-{i}"
                    await stub.Create(
                        pb.WriteRequest(object=pb.Object(pod=flood_pod(args.namespace, name))),
                        timeout=CALL_TIMEOUT_S,
                    )
                    acked.append(name)
            except grpc.aio.AioRpcError as e:
                result.failed += 1
                code = e.code().name
                result.errors[code] += 1
                samples.setdefault(code, e.details() or "")
            else:
                result.ok += 1
                result.latencies.append(time.perf_counter() - t0)
            finally:
                outstanding -= 1
                if args.rate <= 0:
                    slots.release()

        await gate()
        async with measured_window(result), asyncio.TaskGroup() as tg:
            start = time.monotonic()
            end = start + args.duration
            i = 0
            while time.monotonic() < end:
                if args.rate > 0:
                    delay = start + i / args.rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    if outstanding >= args.max_outstanding:
                        result.errors["not_sent"] += 1
                        i += 1
                        continue
                else:
                    await slots.acquire()
                outstanding += 1
                tg.create_task(one(i))
                i += 1
    args.acked_file.write_text("".join(f"{n}\n" for n in acked))
    args.acked_file.with_suffix(".errors.json").write_text(json.dumps(samples))
    return result
