"""The worker loop every queue-driven controller runs (upstream's `processNextWorkItem`).

N workers take keys from the controller's queue and call its sync. A sync that raises is retried
with the queue's backoff (`add_rate_limited`); one that succeeds resets it (`forget`). A write
refused as fenced means another replica holds the lease: the context's `on_fenced` tells the
manager, which ends the term (and so cancels these workers); it is not retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from controllers.base import ControllerContext
from controllers.workqueue import QueueShutDown, RateLimitingQueue
from kse.client.errors import FencedError

log = logging.getLogger(__name__)


async def run_workers(
    name: str,
    queue: RateLimitingQueue[str],
    sync: Callable[[str], Awaitable[None]],
    workers: int,
    ctx: ControllerContext,
    observe: Callable[[str, float, bool], None] | None = None,
) -> None:
    """Run `workers` workers until cancelled; the queue is shut down on the way out."""

    async def worker() -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            start = loop.time()
            ok = False
            try:
                await sync(key)
                ok = True
                queue.forget(key)
            except FencedError as e:
                log.warning("%s: a write for %s was refused as fenced: %s", name, key, e)
                ctx.on_fenced(ctx.fence())
            except Exception as e:
                log.info("%s: error syncing %s (retry %d): %s", name, key, queue.num_requeues(key), e)
                log.debug("%s: sync %s failed", name, key, exc_info=e)
                queue.add_rate_limited(key)
            finally:
                queue.done(key)
                if observe is not None:
                    observe(name, loop.time() - start, ok)

    try:
        async with asyncio.TaskGroup() as tg:
            for i in range(max(1, workers)):
                tg.create_task(worker(), name=f"{name}-worker-{i}")
    finally:
        queue.shut_down()
