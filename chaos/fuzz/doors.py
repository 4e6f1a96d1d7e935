"""Sending one fuzz request through the API server's gRPC door or its HTTP door, with a deadline.

An `Answer` is what came back: the gRPC code or HTTP status, the message or body head, and whether
the deadline passed (a hang) or the transport failed. Judging it is `chaos.fuzz.oracle`'s job.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import grpc
import grpc.aio
from google.protobuf.message import Message

from chaos.fuzz.requests import SERVICE, Request
from kse.client.channel import secure_channel
from kse.config import ConnectionFile
from proto import kse_pb2 as pb

WATCH_READ_SECONDS = 3.0  # how long a watch stream is read before the client hangs up


@dataclass
class Answer:
    code: str  # gRPC code name ("OK", "INVALID_ARGUMENT"), or the HTTP status as text ("422")
    detail: str = ""  # the error message / body head
    hang: bool = False  # the per-request deadline passed with no answer
    transport: bool = False  # the connection failed (the server may be gone)
    elapsed: float = 0.0

    def record(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "detail": self.detail[:2048],
            "hang": self.hang,
            "transport": self.transport,
            "elapsed_s": round(self.elapsed, 3),
        }


_RESPONSES: dict[str, type[Message]] = {
    "Get": pb.Object,
    "List": pb.ObjectList,
    "Watch": pb.WatchEventBatch,
    "Create": pb.Object,
    "Update": pb.Object,
    "UpdateStatus": pb.Object,
    "Delete": pb.Object,
    "Bind": pb.Object,
    "BindBatch": pb.BindBatchResponse,
    "CreateBatch": pb.CreateBatchResponse,
    "Evict": pb.Object,
}


_INTERNAL_CODES = {c.value[0]: c.name for c in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)}


class GrpcDoor:
    """One channel per identity; every method called generically, raw bytes in and out."""

    def __init__(self, conns: dict[str, ConnectionFile], deadline: float) -> None:
        self.deadline = deadline
        opts = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
        self.channels = {ident: secure_channel(conn, options=opts) for ident, conn in conns.items()}

    async def close(self) -> None:
        for ch in self.channels.values():
            await ch.close()

    async def send(self, req: Request) -> Answer:
        channel = self.channels[req.identity]
        payload = req.raw if req.raw is not None else req.message.SerializeToString()  # type: ignore[union-attr]
        path = SERVICE + req.method
        start = time.monotonic()
        try:
            if req.method == "Watch":
                await self._watch(channel, path, payload)
            else:
                call = channel.unary_unary(path)
                data = await call(payload, timeout=self.deadline)
                if req.method in _RESPONSES:
                    answer = _RESPONSES[req.method].FromString(data)  # the answer must decode
                    if isinstance(answer, pb.BindBatchResponse | pb.CreateBatchResponse):
                        # Each item's own answer is judged as its unary call's would be.
                        for result in answer.results:
                            if result.code in _INTERNAL_CODES:
                                code_name = _INTERNAL_CODES[result.code]
                                detail = f"in a {req.method} result: {result.message}"
                                return Answer(code_name, detail, elapsed=time.monotonic() - start)
            return Answer("OK", elapsed=time.monotonic() - start)
        except grpc.aio.AioRpcError as e:
            code = e.code()
            elapsed = time.monotonic() - start
            hang = code == grpc.StatusCode.DEADLINE_EXCEEDED and elapsed >= self.deadline * 0.95
            transport = code == grpc.StatusCode.UNAVAILABLE
            return Answer(code.name, e.details() or "", hang=hang, transport=transport, elapsed=elapsed)

    async def _watch(self, channel: grpc.aio.Channel, path: str, payload: bytes) -> None:
        """Read a watch stream for up to WATCH_READ_SECONDS; a stream still open then is fine (a
        watch is long-running), but its first answer (headers or an error) must come in time."""
        call = channel.unary_stream(path)(payload, timeout=self.deadline)
        try:
            async with asyncio.timeout(WATCH_READ_SECONDS):
                async for data in call:
                    pb.WatchEventBatch.FromString(data)
        except TimeoutError:
            pass
        finally:
            call.cancel()


class HttpDoor:
    """One aiohttp session per identity (its client certificate), over HTTPS."""

    def __init__(self, address: str, conns: dict[str, ConnectionFile], deadline: float) -> None:
        self.address = address
        self.deadline = deadline
        self.contexts: dict[str, ssl.SSLContext] = {}
        self.sessions: dict[str, aiohttp.ClientSession] = {}
        for ident, conn in conns.items():
            ctx = ssl.create_default_context(cafile=str(conn.ca_file))
            ctx.load_cert_chain(str(conn.cert_file), str(conn.key_file))
            self.contexts[ident] = ctx
            self.sessions[ident] = aiohttp.ClientSession(
                base_url=f"https://{address}",
                connector=aiohttp.TCPConnector(ssl=ctx, limit=8),
                timeout=aiohttp.ClientTimeout(total=deadline),
                skip_auto_headers=("Content-Type",),
            )
        self.server_name = next(iter(conns.values())).tls_server_name

    async def close(self) -> None:
        for s in self.sessions.values():
            await s.close()

    async def send(self, req: Request) -> Answer:
        start = time.monotonic()
        try:
            if req.truncate:
                return await self._truncated(req, start)
            session = self.sessions[req.identity]
            async with session.request(
                req.method,
                req.path,
                params=req.query,
                headers=req.headers,
                data=req.body if req.body or req.method in ("POST", "PUT", "PATCH") else None,
                server_hostname=self.server_name,
            ) as resp:
                if req.query.get("watch") in ("true", "1") and resp.status == 200:
                    head = await self._read_watch(resp)
                else:
                    head = (await resp.read())[:4096]
                return Answer(
                    str(resp.status), head.decode("utf-8", "replace"), elapsed=time.monotonic() - start
                )
        except TimeoutError:
            return Answer("timeout", hang=True, elapsed=time.monotonic() - start)
        except (aiohttp.ClientError, OSError) as e:
            return Answer(
                "transport", f"{type(e).__name__}: {e}", transport=True, elapsed=time.monotonic() - start
            )

    async def _read_watch(self, resp: aiohttp.ClientResponse) -> bytes:
        head = b""
        try:
            async with asyncio.timeout(WATCH_READ_SECONDS):
                async for chunk in resp.content.iter_any():
                    if len(head) < 4096:
                        head += chunk
        except TimeoutError:
            pass
        return head[:4096]

    async def _truncated(self, req: Request, start: float) -> Answer:
        """A request whose body stops short of its Content-Length, then the client goes away."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                *self._host_port(), ssl=self.contexts[req.identity], server_hostname=self.server_name
            ),
            self.deadline,
        )
        try:
            cut = req.body[: len(req.body) // 2]
            head = (
                f"{req.method} {req.path} HTTP/1.1\r\nHost: {self.address}\r\n"
                f"Content-Type: {req.headers.get('Content-Type', 'application/json')}\r\n"
                f"Content-Length: {len(req.body) + 10}\r\n\r\n"
            ).encode()
            writer.write(head + cut)
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
            try:
                data = await asyncio.wait_for(reader.read(4096), 2.0)
            except TimeoutError:
                data = b""  # the server waits for the rest of the body: fine, we hang up
            status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "no-answer"
            return Answer(status, data[:1024].decode("utf-8", "replace"), elapsed=time.monotonic() - start)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass

    def _host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host, int(port)
