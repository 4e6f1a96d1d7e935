"""`chaos.proxy.PartitionProxy` against a local echo server: forwards, black-holes open and new
connections while partitioned (nothing refused, nothing answered), and after `heal` drops the
black-holed connections and forwards new ones."""

from __future__ import annotations

import asyncio

from chaos.proxy import PartitionProxy


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
