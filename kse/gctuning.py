"""Keeping CPython's full collections off the hot paths of the API server and the scheduler.

The API server's watch cache holds a few objects per stored object (~128k GC-tracked objects at
20k pods), so a full (generation 2) collection, which CPython starts once enough objects have
survived into the old generation, walks all of them: measured 29-89 ms pauses, which set the
watch p99 at 500 writes/s (README, "what sets the watch p99 tail"). The scheduler's informers,
cache and snapshot are the same kind of heap: at 5000 nodes and 20000 pods, the two full
collections of an eight-second PreemptionAsync measured phase took 0.74-0.89 s in all, 0.05-0.12 s
with the caches frozen (README, "Garbage collection and the scheduler"). Those objects are freed
by reference counting when the caches drop them; the collector only ever finds cycles among them
by accident.

So, as Instagram's web servers do: after the caches load, and then every `FREEZE_INTERVAL_S`,
`gc.freeze()` moves every surviving object into the permanent generation, which collections do not
walk (freeze is O(1): it splices lists). Reference counting still frees frozen objects. What
freezing could keep alive is cyclic garbage that happened to be in the old generation at a freeze;
every `FULL_INTERVAL_S` the permanent generation is unfrozen and collected once (one pause every
ten minutes instead of one every few seconds under load).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger(__name__)

FREEZE_INTERVAL_S = 10.0
FULL_INTERVAL_S = 600.0


def freeze_now() -> int:
    """Collect the young generations, then freeze what survives; the number now frozen."""
    gc.collect(1)
    gc.freeze()
    return gc.get_freeze_count()


def full_collection() -> tuple[int, float]:
    """Unfreeze, collect everything once, freeze again: (objects collected, seconds it took)."""
    start = time.perf_counter()
    gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found, time.perf_counter() - start


async def keep_old_objects_frozen(
    freeze_interval: float = FREEZE_INTERVAL_S, full_interval: float = FULL_INTERVAL_S
) -> None:
    """Until cancelled: freeze every `freeze_interval`, collect fully every `full_interval`."""
    last_full = time.monotonic()
    while True:
        await asyncio.sleep(freeze_interval)
        if time.monotonic() - last_full >= full_interval:
            found, took = full_collection()
            last_full = time.monotonic()
            log.info("full collection: %d unreachable objects, %.0f ms", found, took * 1000)
        else:
            freeze_now()
