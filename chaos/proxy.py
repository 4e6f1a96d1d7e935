"""A TCP proxy that can cut a link: the nemesis's network partitions, local-process backend.

One `PartitionProxy` sits between one client (a scheduler replica) and the API server. It forwards
bytes both ways (TLS passes through untouched: the client still checks the server's certificate by
its `tls_server_name`). `partition()` turns it into a black hole: open connections stay open but
nothing is forwarded any more (what a dropped network looks like: requests time out, they are not
refused), and new connections are accepted and black-holed too. `heal()` closes the black-holed
connections (their TLS streams lost bytes and cannot resume) so the client reconnects, and forwards
new connections again.

    async with PartitionProxy("127.0.0.1:6443") as proxy:
        ...connect the client to proxy.address...
        proxy.partition(); ...; proxy.heal()
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

__all__ = ["PartitionProxy"]

CHUNK = 65536


class _Link:
    def __init__(self, down: asyncio.StreamWriter) -> None:
        self.down = down
        self.up: asyncio.StreamWriter | None = None
        self.cut = False

    def close(self) -> None:
        for w in (self.down, self.up):
            if w is not None:
                w.close()


class PartitionProxy:
    def __init__(self, upstream: str, *, host: str = "127.0.0.1") -> None:
        up_host, _, up_port = upstream.rpartition(":")
        self.upstream = (up_host, int(up_port))
        self.host = host
        self.partitioned = False
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def __aenter__(self) -> PartitionProxy:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for link in list(self._links):
            link.close()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def partition(self) -> None:
        """Black-hole every open and every new connection."""
        self.partitioned = True
        for link in self._links:
            link.cut = True

    def heal(self) -> None:
        """Drop the black-holed connections (the client reconnects) and forward new ones again."""
        self.partitioned = False
        for link in [lk for lk in self._links if lk.cut]:
            link.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        link = _Link(writer)
        link.cut = self.partitioned
        self._links.add(link)
        try:
            if link.cut:
                await self._drain(reader)  # black hole from the start: never reaches the server
                return
            try:
                up_reader, link.up = await asyncio.open_connection(*self.upstream)
            except OSError:
                return
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._pipe(reader, link.up, link))
                tg.create_task(self._pipe(up_reader, writer, link))
        except (OSError, ExceptionGroup):
            pass
        finally:
            self._links.discard(link)
            link.close()
            self._tasks.discard(task)

    @staticmethod
    async def _drain(reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError):
            while await reader.read(CHUNK):
                pass

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link) -> None:
        try:
            while data := await reader.read(CHUNK):
                if link.cut:
                    continue  # dropped on the floor
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            link.close()
