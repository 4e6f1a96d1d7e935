"""`harness.proxy.PartitionProxy` against a local echo server: forwards, black-holes open and new
connections while partitioned (nothing refused, nothing answered), and after `heal` drops the
black-holed connections and forwards new ones; delays and loses segments without breaking or
reordering the stream."""

from __future__ import annotations

import asyncio

import pytest

from harness.proxy import RTO_S, PartitionProxy


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def _roundtrip(
    r: asyncio.StreamReader, w: asyncio.StreamWriter, msg: bytes, within: float = 1.0
) -> bytes:
    w.write(msg)
    await w.drain()
    async with asyncio.timeout(within):
        return await r.readexactly(len(msg))


async def test_partition_and_heal() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, PartitionProxy(f"127.0.0.1:{port}") as proxy:
        host, _, pport = proxy.address.rpartition(":")
        r1, w1 = await asyncio.open_connection(host, int(pport))
        assert await _roundtrip(r1, w1, b"hello") == b"hello"

        proxy.partition()
        try:
            await _roundtrip(r1, w1, b"lost", within=0.3)
            raise AssertionError("a partitioned link answered")
        except TimeoutError:
            pass
        r2, w2 = await asyncio.open_connection(host, int(pport))  # accepted, never answered
        try:
            await _roundtrip(r2, w2, b"new", within=0.3)
            raise AssertionError("a new connection got through the partition")
        except TimeoutError:
            pass

        proxy.heal()
        async with asyncio.timeout(1.0):
            assert await r1.read() == b""  # the black-holed connections are dropped
            assert await r2.read() == b""
        r3, w3 = await asyncio.open_connection(host, int(pport))
        assert await _roundtrip(r3, w3, b"back") == b"back"
        for w in (w1, w2, w3):
            w.close()


async def _through_proxy(proxy: PartitionProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, _, port = proxy.address.rpartition(":")
    return await asyncio.open_connection(host, int(port))


async def test_delay_holds_every_byte_back_in_order_without_serialising() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    async with server, PartitionProxy(f"127.0.0.1:{port}") as proxy:
        r, w = await _through_proxy(proxy)
        assert await _roundtrip(r, w, b"warm") == b"warm"
        proxy.partition("delay", delay=0.15)
        assert proxy.mode == "delay"
        t = loop.time()
        assert await _roundtrip(r, w, b"slow", within=5.0) == b"slow"
        assert loop.time() - t >= 0.3  # held back on the way there and on the way back
        # Twenty messages written at once come back in order, delayed, not 20 x 0.3 s apart.
        msgs = [f"m{i:02d};".encode() for i in range(20)]
        t = loop.time()
        for m in msgs:
            w.write(m)
            await w.drain()
        async with asyncio.timeout(5.0):
            got = await r.readexactly(sum(map(len, msgs)))
        assert got == b"".join(msgs)
        assert 0.3 <= loop.time() - t < 20 * 0.3
        proxy.heal()  # the stream was never broken: it goes on
        assert proxy.mode is None
        assert await _roundtrip(r, w, b"healed", within=5.0) == b"healed"
        w.close()


async def test_loss_retransmits_late_and_keeps_the_stream_intact() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    async with server, PartitionProxy(f"127.0.0.1:{port}", seed=1) as proxy:
        r, w = await _through_proxy(proxy)
        proxy.partition("loss", loss=1.0)  # every segment lost once: each waits a retransmission
        t = loop.time()
        assert await _roundtrip(r, w, b"lossy", within=10.0) == b"lossy"
        assert loop.time() - t >= 2 * RTO_S
        for i in range(5):
            w.write(f"seq{i};".encode())
            await w.drain()
        async with asyncio.timeout(30.0):
            assert await r.readexactly(25) == b"seq0;seq1;seq2;seq3;seq4;"  # nothing overtook
        proxy.heal()
        assert await _roundtrip(r, w, b"fine", within=5.0) == b"fine"
        w.close()


def test_a_bad_partition_is_refused() -> None:
    proxy = PartitionProxy("127.0.0.1:1")
    for mode, kwargs in (("jitter", {}), ("delay", {"delay": 0.0}), ("loss", {"loss": 1.5})):
        with pytest.raises(ValueError, match=r"partition|delay|loss"):
            proxy.partition(mode, **kwargs)
    assert proxy.mode is None
