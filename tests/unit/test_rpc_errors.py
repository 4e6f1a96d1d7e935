"""The `--rpc-error-log` interceptor against a real in-process gRPC server (no mocks of grpc).

A small generic service answers OK, fails with a chosen code, hangs (to be cancelled), and streams;
each test reads back the JSON lines the interceptor wrote through `RpcErrorRecorder`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from chaos.history import RpcErrorRecord, read_jsonl
from kse.client.rpc_errors import (
    STATUS_CODE_BY_INT,
    RpcErrorLog,
    _status_of,
    client_name_for,
    rpc_error_interceptors,
)
from tests.fixtures.polling import until

SERVICE = "test.Echo"


def _ident(b: bytes) -> bytes:
    return b


class _Echo:
    """Unary `Call` (request b"ok", b"fail:CODE", b"hang") and server stream `Stream` (N messages
    then OK, or b"hang")."""

    async def call(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if request.startswith(b"fail:"):
            await context.abort(grpc.StatusCode[request[5:].decode()], f"failed on purpose: {request!r}")
        if request == b"hang":
            await asyncio.Event().wait()
        return request

    async def stream(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        yield b"first"
        if request == b"hang":
            await asyncio.Event().wait()
        if request.startswith(b"fail:"):
            await context.abort(grpc.StatusCode[request[5:].decode()], "stream failed on purpose")
        yield b"last"


@contextlib.asynccontextmanager
async def echo_server(*options: tuple[str, Any]) -> AsyncIterator[str]:
    server = grpc.aio.server(options=list(options))
    echo = _Echo()
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Call": grpc.unary_unary_rpc_method_handler(echo.call, _ident, _ident),
            "Stream": grpc.unary_stream_rpc_method_handler(echo.stream, _ident, _ident),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


def records(path: Path) -> list[RpcErrorRecord]:
    return list(read_jsonl(path, RpcErrorRecord.from_json)) if path.exists() else []


def unary(channel: grpc.aio.Channel) -> Any:
    return channel.unary_unary(f"/{SERVICE}/Call", request_serializer=_ident, response_deserializer=_ident)


def stream(channel: grpc.aio.Channel) -> Any:
    return channel.unary_stream(f"/{SERVICE}/Stream", request_serializer=_ident, response_deserializer=_ident)


def test_client_name_from_file_name() -> None:
    assert client_name_for("run/rpc-errors-scheduler-2.jsonl") == "scheduler-2"
    assert client_name_for("/x/rpc-errors-workload.jsonl") == "workload"
    assert client_name_for("/x/errors.jsonl") == "errors"
    assert client_name_for("rpc-errors-.jsonl") == "rpc-errors-"


def test_status_codes_by_int_are_grpcs_wire_codes() -> None:
    """The public `grpc.StatusCode` members give every wire code 0..16 (grpc's table is private)."""
    assert sorted(STATUS_CODE_BY_INT) == list(range(17))
    assert STATUS_CODE_BY_INT[0] is grpc.StatusCode.OK
    assert STATUS_CODE_BY_INT[5] is grpc.StatusCode.NOT_FOUND
    assert STATUS_CODE_BY_INT[16] is grpc.StatusCode.UNAUTHENTICATED
    assert all(code.value[0] == n for n, code in STATUS_CODE_BY_INT.items())


async def test_finished_call_status_is_readable_from_a_done_callback() -> None:
    """`_status_of` reads grpc internals (isolated there on purpose): prove this grpc still exposes
    them for an OK call, a failed one and a locally cancelled one, on unary calls and streams."""
    seen: dict[str, tuple[grpc.StatusCode, str, bool] | None] = {}

    def watch(label: str, call: Any) -> Any:
        call.add_done_callback(lambda c: seen.__setitem__(label, _status_of(c)))
        return call

    async with echo_server() as address, grpc.aio.insecure_channel(address) as ch:
        assert await watch("ok", unary(ch)(b"ok")) == b"ok"
        with pytest.raises(grpc.aio.AioRpcError):
            await watch("failed", unary(ch)(b"fail:NOT_FOUND"))
        s = watch("stream-failed", stream(ch)(b"fail:ABORTED"))
        with pytest.raises(grpc.aio.AioRpcError):
            [m async for m in s]
        s = watch("stream-cancelled", stream(ch)(b"hang"))
        assert await s.read() == b"first"
        s.cancel()
        await until(lambda: len(seen) == 4, "every call judged")
    assert seen["ok"] == (grpc.StatusCode.OK, "", False)
    failed = seen["failed"]
    assert failed is not None and failed[0] is grpc.StatusCode.NOT_FOUND and not failed[2]
    assert "failed on purpose" in failed[1]
    stream_failed = seen["stream-failed"]
    assert stream_failed is not None and stream_failed[0] is grpc.StatusCode.ABORTED
    cancelled = seen["stream-cancelled"]
    assert cancelled is not None and cancelled[0] is grpc.StatusCode.CANCELLED and cancelled[2]


async def test_failed_unary_calls_are_recorded_and_ok_ones_not(tmp_path: Path) -> None:
    path = tmp_path / "rpc-errors-sched-a.jsonl"
    async with echo_server() as address:
        with RpcErrorLog(path) as errors:
            async with grpc.aio.insecure_channel(address, interceptors=errors.interceptors) as ch:
                assert await unary(ch)(b"ok") == b"ok"
                for code in ("UNAVAILABLE", "ABORTED", "PERMISSION_DENIED"):
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await unary(ch)(f"fail:{code}".encode())
                    assert e.value.code().name == code
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await unary(ch)(b"hang", timeout=0.05)
                assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                # The interceptor keeps what callers read from the call: its trailing metadata.
                call = unary(ch)(b"ok")
                assert await call == b"ok"
                assert await call.code() == grpc.StatusCode.OK
                assert await call.trailing_metadata() is not None
    got = records(path)
    assert [(r.client, r.method, r.code) for r in got] == [
        ("sched-a", f"{SERVICE}/Call", "UNAVAILABLE"),
        ("sched-a", f"{SERVICE}/Call", "ABORTED"),
        ("sched-a", f"{SERVICE}/Call", "PERMISSION_DENIED"),
        ("sched-a", f"{SERVICE}/Call", "DEADLINE_EXCEEDED"),
    ]
    assert "failed on purpose" in got[0].detail
    assert all(abs(r.ts - time.time()) < 60 for r in got)


async def test_our_own_cancellations_are_not_errors(tmp_path: Path) -> None:
    path = tmp_path / "rpc-errors-x.jsonl"
    async with echo_server() as address:
        with RpcErrorLog(path) as errors:
            ch = grpc.aio.insecure_channel(address, interceptors=errors.interceptors)
            await ch.channel_ready()

            # A task cancelled while its call is in flight.
            async def hang() -> bytes:
                return await unary(ch)(b"hang")  # type: ignore[no-any-return]

            task = asyncio.create_task(hang())
            await asyncio.sleep(0)
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # A stream closed by its reader.
            s = stream(ch)(b"hang")
            assert await s.read() == b"first"
            s.cancel()
            # The channel closed under a unary call and a stream (what a credential swap does).
            hanging = asyncio.create_task(hang())
            s2 = stream(ch)(b"hang")
            assert await s2.read() == b"first"
            await ch.close(grace=None)
            with pytest.raises(asyncio.CancelledError):
                await hanging
            await until(lambda: errors.tracker.ignored_local_cancels >= 4, "4 local cancellations judged")
    assert records(path) == []


async def test_streams_failures_recorded_but_connection_age_ends_are_not(tmp_path: Path) -> None:
    path = tmp_path / "rpc-errors-w.jsonl"
    async with echo_server(
        ("grpc.max_connection_age_ms", 300), ("grpc.max_connection_age_grace_ms", 300)
    ) as address:
        with RpcErrorLog(path) as errors:
            async with grpc.aio.insecure_channel(address, interceptors=errors.interceptors) as ch:
                assert [m async for m in stream(ch)(b"ok")] == [b"first", b"last"]
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    [m async for m in stream(ch)(b"fail:RESOURCE_EXHAUSTED")]
                assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                # A watch-like stream ended by the server's max connection age: the client resumes.
                s = stream(ch)(b"hang")
                assert await s.read() == b"first"
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await asyncio.wait_for(s.read(), 10)
                assert e.value.code() == grpc.StatusCode.UNAVAILABLE
                await until(lambda: errors.tracker.ignored_stream_ends == 1, "the stream end judged")
    assert [(r.method, r.code) for r in records(path)] == [(f"{SERVICE}/Stream", "RESOURCE_EXHAUSTED")]


async def test_refused_connection_is_recorded_for_unary_and_stream(tmp_path: Path) -> None:
    from harness.procs.ports import free_port

    seen: list[tuple[str, str]] = []
    interceptors = rpc_error_interceptors(lambda m, c, d: seen.append((m, getattr(c, "name", str(c)))))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{free_port()}", interceptors=interceptors) as ch:
        with pytest.raises(grpc.aio.AioRpcError):
            await unary(ch)(b"ok", timeout=5)
        with pytest.raises(grpc.aio.AioRpcError):
            await stream(ch)(b"ok", timeout=5).read()
        await until(lambda: len(seen) >= 2, "both failures recorded")
    assert seen == [(f"{SERVICE}/Call", "UNAVAILABLE"), (f"{SERVICE}/Stream", "UNAVAILABLE")]


async def test_interceptor_cost_per_unary_call(tmp_path: Path) -> None:
    """The per-call overhead on a unary call (the bind path), printed for the README: rounds of the
    plain and the intercepted channel interleaved, the best round of each compared (other load on
    the machine only ever adds). The loose bound only catches a pathological regression."""
    n, rounds = 500, 5
    best = {"plain": float("inf"), "intercepted": float("inf")}
    async with echo_server() as address:
        with RpcErrorLog(tmp_path / "rpc-errors-bench.jsonl") as errors:
            channels = {
                "plain": grpc.aio.insecure_channel(address),
                "intercepted": grpc.aio.insecure_channel(address, interceptors=errors.interceptors),
            }
            try:
                for ch in channels.values():
                    for _ in range(100):  # warm up: connection, method handles
                        await unary(ch)(b"ok")
                for _ in range(rounds):
                    for name, ch in channels.items():
                        call = unary(ch)
                        start = time.perf_counter()
                        for _ in range(n):
                            await call(b"ok")
                        best[name] = min(best[name], (time.perf_counter() - start) / n)
            finally:
                for ch in channels.values():
                    await ch.close()
    plain_us, wrapped_us = best["plain"] * 1e6, best["intercepted"] * 1e6
    extra_us = wrapped_us - plain_us
    print(f"\nunary call: {plain_us:.1f} us plain, {wrapped_us:.1f} us intercepted ({extra_us:+.1f} us)")
    assert extra_us < 1000
