"""A TCP proxy that can cut, slow or lose a link: the nemesis's network partitions, local backend.

One `PartitionProxy` sits between one client (a scheduler replica) and the API server. It forwards
bytes both ways (TLS passes through untouched: the client still checks the server's certificate by
its `tls_server_name`). Three ways to hurt the link, each until `heal()`:

* `partition()` (mode "blackhole"): open connections stay open but nothing is forwarded any more
  (what a dropped network looks like: requests time out, they are not refused), and new connections
  are accepted and black-holed too. `heal()` closes the black-holed connections (their TLS streams
  lost bytes and cannot resume) so the client reconnects, and forwards new connections again.
* `partition("delay", delay=S)`: every chunk read is forwarded S seconds after it arrived, in
  order, in both directions (a long, fat pipe: latency, not a bandwidth cap).
* `partition("delay-up", delay=S)`: the same, towards the server only; answers come back at once.
  A client then keeps acting on fresh information while everything it sends lands S seconds late:
  a leader whose writes are in flight across its own lease expiry (the zombie leader that fencing
  exists for).
* `partition("loss", loss=P)`: what TCP makes of losing a fraction P of the segments. A proxy above
  TCP cannot drop bytes without corrupting the stream, so each chunk is, with probability P, held
  back for a retransmission timeout (`RTO_S`, doubling for each further loss in a row, up to
  `RTO_MAX_S`, as TCP's backoff), and everything behind it waits (head-of-line blocking).

`heal()` of a delay or loss partition returns to plain forwarding; the streams were never broken.

    async with PartitionProxy("127.0.0.1:6443") as proxy:
        ...connect the client to proxy.address...
        proxy.partition(); ...; proxy.heal()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from types import TracebackType

from kse.tasks import TaskSet

__all__ = ["MODES", "PartitionProxy"]

log = logging.getLogger(__name__)

CHUNK = 65536
MODES = ("blackhole", "delay", "delay-up", "loss")
RTO_S = 0.2  # Linux's minimum TCP retransmission timeout (TCP_RTO_MIN)
RTO_MAX_S = 3.2  # cap of the doubling here (TCP's own cap is 120 s; a run is shorter than that)


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
    def __init__(self, upstream: str, *, host: str = "127.0.0.1", seed: int | None = None) -> None:
        up_host, _, up_port = upstream.rpartition(":")
        self.upstream = (up_host, int(up_port))
        self.host = host
        self.partitioned = False  # black-holed
        self.delay = 0.0  # mode "delay": seconds every chunk is held back
        self.delay_upstream_only = False  # mode "delay-up": only chunks towards the server
        self.loss = 0.0  # mode "loss": the probability a chunk is "lost" (retransmitted late)
        self.rng = random.Random(seed)
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

    @property
    def mode(self) -> str | None:
        """The partition in force: "blackhole", "delay", "loss", or None (forwarding)."""
        if self.partitioned:
            return "blackhole"
        if self.delay:
            return "delay-up" if self.delay_upstream_only else "delay"
        if self.loss:
            return "loss"
        return None

    def partition(self, mode: str = "blackhole", *, delay: float = 0.0, loss: float = 0.0) -> None:
        """Black-hole every open and every new connection; or (mode "delay") hold every chunk back
        `delay` s; or (mode "loss") lose a fraction `loss` of the chunks (module doc)."""
        if mode not in MODES:
            raise ValueError(f"partition mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode in ("delay", "delay-up") and not delay > 0:
            raise ValueError(f"a delay partition needs delay > 0, got {delay!r}")
        if mode == "loss" and not 0 < loss <= 1:
            raise ValueError(f"a loss partition needs 0 < loss <= 1, got {loss!r}")
        self.heal()
        if mode == "blackhole":
            self.partitioned = True
            for link in self._links:
                link.cut = True
        elif mode in ("delay", "delay-up"):
            self.delay = delay
            self.delay_upstream_only = mode == "delay-up"
        else:
            self.loss = loss

    def heal(self) -> None:
        """Forward normally again; black-holed connections are dropped (the client reconnects)."""
        self.delay = self.loss = 0.0
        self.delay_upstream_only = False
        if not self.partitioned:
            return
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
                tg.create_task(self._pipe(reader, link.up, link, upstream=True))
                tg.create_task(self._pipe(up_reader, writer, link, upstream=False))
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

    def _hold(self, losses_in_a_row: int, upstream: bool) -> tuple[float, int]:
        """How long to hold the next chunk back, and the new count of losses in a row."""
        if self.delay and (upstream or not self.delay_upstream_only):
            return self.delay, 0
        if self.loss and self.rng.random() < self.loss:
            return min(RTO_MAX_S, RTO_S * 2**losses_in_a_row), losses_in_a_row + 1
        return 0.0, 0

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link, *, upstream: bool
    ) -> None:
        """Forward one direction. Plain forwarding writes at once; a chunk held back (delay, loss)
        goes through a queue with its release time, so reading goes on meanwhile and the order of
        the bytes is kept (nothing overtakes a held chunk)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender: asyncio.Task[None] | None = None
        senders = TaskSet("proxy-pipe", logger=log)
        release = 0.0  # when the last queued chunk goes out
        losses = 0

        async def send() -> None:
            with contextlib.suppress(OSError):
                while (item := await queue.get()) is not None:
                    at, chunk = item
                    await asyncio.sleep(max(0.0, at - loop.time()))
                    writer.write(chunk)
                    await writer.drain()
            writer.close()

        try:
            while data := await reader.read(CHUNK):
                if link.cut:
                    continue  # dropped on the floor
                hold, losses = self._hold(losses, upstream)
                now = loop.time()
                if not hold and release <= now and queue.empty():
                    writer.write(data)
                    await writer.drain()
                    continue
                release = max(release, now + hold)
                if sender is None or sender.done():
                    sender = senders.spawn(send(), name="proxy-delayed-send")
                queue.put_nowait((release, data))
        except OSError:
            pass  # the sending side went away (a reset): what it sent before still goes through
        finally:
            if sender is not None and not sender.done():
                queue.put_nowait(None)
                with contextlib.suppress(OSError):
                    await sender
            await senders.aclose()  # on cancellation: a sender still holding delayed chunks
            # This direction only: bytes already on their way the other way still arrive, late, as
            # packets in flight do when their sender dies (a zombie's writes land after it exited).
            writer.close()
