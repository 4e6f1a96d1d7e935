"""etcd defragmentation on a schedule for `kse up`, one member at a time.

The API server compacts etcd's history (`apiserver_mock.storage.compactor`), which frees pages
inside each member's database file, but the file keeps its size until the member is defragmented
(etcd's maintenance guide: compact, then defragment). kube-apiserver does not defragment; operators
run `etcdctl defrag`. `kse up` is the operator here: every `interval_s` it looks at each member's
Status and defragments those with at least `min_free_bytes` and half of the file free, one member
at a time (a defragmenting member blocks its own reads and writes while it rewrites the file;
with three members the others serve meanwhile, with one the cluster waits, which is why the bar is
high).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kse.etcdclient import EtcdClient, EtcdError, EtcdTLS

__all__ = ["DefragResult", "defrag_members", "run_defrag"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 1800.0
MIN_FREE_BYTES = 64 * 1024 * 1024
MIN_FREE_RATIO = 0.5


@dataclass(frozen=True)
class DefragResult:
    endpoint: str
    before_bytes: int
    after_bytes: int


async def defrag_members(
    endpoints: Sequence[str],
    tls: EtcdTLS | None,
    *,
    min_free_bytes: int = MIN_FREE_BYTES,
    min_free_ratio: float = MIN_FREE_RATIO,
) -> list[DefragResult]:
    """One pass: defragment, in turn, every member with enough free space; returns what was done.
    A member that fails is logged and skipped (the next pass tries again)."""
    done: list[DefragResult] = []
    async with await EtcdClient.connect(list(endpoints), tls=tls) as etcd:
        for endpoint in endpoints:
            try:
                before = await etcd.status(endpoint)
                size, in_use = int(before["db_size"]), int(before["db_size_in_use"])
                free = size - in_use
                if free < min_free_bytes or free < min_free_ratio * size:
                    continue
                await etcd.defragment(endpoint)
                after = await etcd.status(endpoint)
            except EtcdError as e:
                log.warning("etcd %s not defragmented: %s", endpoint, e)
                continue
            done.append(DefragResult(endpoint, size, int(after["db_size"])))
    return done


async def run_defrag(
    endpoints: Sequence[str],
    tls: EtcdTLS | None,
    say: Callable[[str], None],
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> None:
    """A pass every `interval_s` until cancelled; each defragmentation is said."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            results = await defrag_members(endpoints, tls)
        except (EtcdError, OSError) as e:
            log.warning("etcd defragmentation pass failed: %s", e)
            continue
        for r in results:
            before, after = r.before_bytes / 2**20, r.after_bytes / 2**20
            say(f"etcd {r.endpoint} defragmented: {before:.0f} -> {after:.0f} MiB")
