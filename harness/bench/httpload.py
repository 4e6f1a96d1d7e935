"""The HTTP side of `kse bench apiserver`: binds, watches and lists through the Kubernetes HTTP API.

What a Kubernetes client does, with aiohttp over HTTPS and a client certificate (the same files as
the gRPC side's identity):

* binds as client-go's `pods.Bind` sends them: `POST /api/v1/namespaces/NS/pods/NAME/binding`
  with a v1 Binding JSON body, answered 201 with a Status; `inflight` requests at a time over a pool
  of keep-alive connections (one per request in flight, opened before the window starts, so the
  window measures requests, not TLS handshakes);
* a watch as a reflector runs it: LIST for a resourceVersion, then `?watch=true&resourceVersion=RV`,
  read as chunked newline-delimited WatchEvents;
* a LIST of a namespace as JSON, timed from the request to the last byte of the body (the client's
  own JSON parsing is not in the figure; the answer is parsed afterwards, to check it).

`http_bind_load` has the load-function shape of `harness.bench.common` (module-level, picklable
args), so it runs in this process or in load processes like the gRPC bind load.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from harness.bench.common import LoadResult, StartGate, closed_loop
from kse.config import ConnectionFile

CALL_TIMEOUT = 30.0


@dataclass(frozen=True)
class HttpTarget:
    """Where the HTTP API is and which identity calls it (picklable: it crosses to load processes)."""

    address: str  # HOST:PORT of `kse apiserver --http-listen`
    ca_file: Path
    cert_file: Path
    key_file: Path
    server_name: str = "localhost"  # the serving certificate names localhost, the URL 127.0.0.1

    @classmethod
    def of(cls, http_address: str, conn: ConnectionFile) -> HttpTarget:
        """The HTTP API at `http_address` as the identity of the gRPC connection `conn`."""
        return cls(http_address, conn.ca_file, conn.cert_file, conn.key_file, conn.tls_server_name)

    @property
    def base(self) -> str:
        return f"https://{self.address}"

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        return ctx


def session(
    target: HttpTarget, connections: int, read_timeout: float | None = CALL_TIMEOUT
) -> aiohttp.ClientSession:
    """A client session holding up to `connections` keep-alive connections to `target`."""
    connector = aiohttp.TCPConnector(limit=connections, ssl=target.ssl_context(), keepalive_timeout=60.0)
    return aiohttp.ClientSession(
        base_url=target.base,
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=CALL_TIMEOUT, sock_read=read_timeout),
    )


async def warm_up(http: aiohttp.ClientSession, target: HttpTarget, connections: int) -> None:
    """Open `connections` keep-alive connections (concurrent `/healthz` calls), untimed."""

    async def one() -> None:
        async with http.get("/healthz", server_hostname=target.server_name) as resp:
            await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"GET /healthz on {target.base}: HTTP {resp.status}")

    await asyncio.gather(*(one() for _ in range(connections)))


# ---------------------------------------------------------------------- binds


@dataclass(frozen=True)
class HttpBindLoadArgs:
    target: HttpTarget
    namespace: str
    pods: tuple[str, ...]
    nodes: tuple[str, ...]
    inflight: int


def binding_body(namespace: str, pod: str, node: str) -> bytes:
    """The v1 Binding client-go's `pods.Bind` posts (kubernetes/client-go `typed/core/v1`)."""
    return json.dumps(
        {
            "kind": "Binding",
            "apiVersion": "v1",
            "metadata": {"name": pod, "namespace": namespace},
            "target": {"kind": "Node", "apiVersion": "v1", "name": node},
        },
        separators=(",", ":"),
    ).encode()


async def http_bind_load(args: HttpBindLoadArgs, start: StartGate) -> LoadResult:
    """Bind every pod in `args.pods` over HTTP, `inflight` requests at a time, round-robin over the
    nodes. Only 201 answers count; anything else is counted by its HTTP code (or exception)."""
    result = LoadResult()
    target = args.target
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    requests = [
        (
            f"/api/v1/namespaces/{args.namespace}/pods/{name}/binding",
            binding_body(args.namespace, name, args.nodes[i % len(args.nodes)]),
        )
        for i, name in enumerate(args.pods)
    ]
    async with session(target, args.inflight) as http:
        await warm_up(http, target, args.inflight)
        await start()

        async def bind(i: int) -> None:
            path, body = requests[i]
            t = time.perf_counter()
            try:
                async with http.post(
                    path, data=body, headers=headers, server_hostname=target.server_name
                ) as r:
                    await r.read()
                    status = r.status
            except Exception as e:
                result.failed += 1
                result.errors[type(e).__name__] += 1
                return
            if status != 201:
                result.failed += 1
                result.errors[f"HTTP {status}"] += 1
                return
            result.ok += 1
            result.latencies.append(time.perf_counter() - t)

        await closed_loop(args.inflight, bind, result, count=len(requests))
    return result


# ---------------------------------------------------------------------- watch


class HttpPodWatcher:
    """One HTTP watch on a namespace's pods, on its own connection (as each scheduler replica has
    its own): `open()` lists for a resourceVersion and starts the watch from it; `batches()` yields
    (receive time, names of ADDED pods) per chunk read."""

    def __init__(self, target: HttpTarget, namespace: str) -> None:
        self.target = target
        self.namespace = namespace
        self._http: aiohttp.ClientSession | None = None
        self._resp: aiohttp.ClientResponse | None = None

    async def open(self) -> None:
        http = self._http = session(self.target, 1, read_timeout=None)
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        name = self.target.server_name
        async with http.get(path, server_hostname=name) as resp:
            if resp.status != 200:
                raise RuntimeError(f"LIST {path}: HTTP {resp.status}: {await resp.text()}")
            rv = (await resp.json())["metadata"]["resourceVersion"]
        self._resp = await http.get(
            path, params={"watch": "true", "resourceVersion": rv}, server_hostname=name
        )
        if self._resp.status != 200:
            raise RuntimeError(f"WATCH {path}: HTTP {self._resp.status}: {await self._resp.text()}")

    async def batches(self) -> AsyncIterator[tuple[float, list[str]]]:
        assert self._resp is not None, "open() first"
        pending = b""
        async for chunk in self._resp.content.iter_any():
            now = time.perf_counter()
            *lines, pending = (pending + chunk).split(b"\n")
            names = []
            for line in lines:
                event = json.loads(line)
                if event.get("type") == "ADDED":
                    names.append(event["object"]["metadata"]["name"])
                elif event.get("type") == "ERROR":
                    raise RuntimeError(f"watch ERROR event: {event.get('object')}")
            yield now, names

    async def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
        if self._http is not None:
            await self._http.close()


# ---------------------------------------------------------------------- list


async def list_timings(target: HttpTarget, namespace: str, repeats: int) -> tuple[list[float], int]:
    """`repeats` LISTs of `namespace`'s pods, one after another on one keep-alive connection:
    (seconds each, from the request to the body's last byte; the item count of the last one)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    times: list[float] = []
    items = 0
    async with session(target, 1, read_timeout=120.0) as http:
        await warm_up(http, target, 1)
        for _ in range(repeats):
            t = time.perf_counter()
            async with http.get(path, server_hostname=target.server_name) as resp:
                body = await resp.read()
                elapsed = time.perf_counter() - t
                if resp.status != 200:
                    raise RuntimeError(f"LIST {path}: HTTP {resp.status}: {body[:500]!r}")
            times.append(elapsed)
            items = len(json.loads(body)["items"])
    return times, items
