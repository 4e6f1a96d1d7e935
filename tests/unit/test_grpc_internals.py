"""The grpc internals kse reads, each isolated in one function, proven on the installed grpc.

`kse.client.credentials.active_unary_calls` reads grpc.aio's private `_active_calls` (there is no
public way to list a channel's calls) so that a credential swap retires the old channel once its
unary calls are done, without waiting for watches that never end. If a grpc release drops it, the
function returns None and retirement falls back to `close(grace)`: this test makes that a failure
to look at, not a silent slowdown. (`kse.client.rpc_errors._status_of` is tested beside its
interceptor in test_rpc_errors.py.)
"""

from __future__ import annotations

import asyncio

import grpc.aio

from kse.client.credentials import active_unary_calls
from tests.fixtures.polling import until
from tests.unit.test_rpc_errors import echo_server, stream, unary


async def test_active_unary_calls_sees_unary_calls_in_flight_and_not_streams() -> None:
    async with echo_server() as address, grpc.aio.insecure_channel(address) as ch:
        assert active_unary_calls(ch) == []
        watch = stream(ch)(b"hang")
        assert await watch.read() == b"first"
        hanging = unary(ch)(b"hang")
        await until(lambda: len(active_unary_calls(ch) or []) == 1, "the unary call is seen in flight")
        assert active_unary_calls(ch) == [hanging]  # the open stream is left out
        hanging.cancel()
        await _settle(hanging)
        await until(lambda: active_unary_calls(ch) == [], "a finished call is gone")
        watch.cancel()


async def _settle(call: grpc.aio.UnaryUnaryCall) -> None:
    try:
        await call
    except (asyncio.CancelledError, grpc.aio.AioRpcError):
        pass
