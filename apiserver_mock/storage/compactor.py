"""etcd compaction on a schedule, as kube-apiserver does it (`--etcd-compaction-interval`, default
5m; k8s.io/apiserver/pkg/storage/etcd3/compact.go).

etcd keeps every revision until it is compacted, so without this its history (and its memory and
database) grows for as long as the cluster runs. Every interval, each API server tries one
transaction on the key `compact_rev_key` (outside any prefix: one per etcd cluster):

    if version(compact_rev_key) == the version it saw last time:
        put compact_rev_key = the revision it saw last time, then compact etcd to that revision
    else:
        read the key's version (another API server compacted; try again next interval)

so however many API servers share an etcd, one compaction happens per interval, and it compacts to
the revision seen one interval earlier: watchers and lists get a whole interval to catch up before
their history goes (past that, they get "too old resource version" and re-list, as upstream).
The first round only records a revision (nothing is compacted at start-up).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from kse.etcdclient import CompactedError, EtcdClient, EtcdError
from kse.etcdclient.model import Compare, Op, RangeResult

__all__ = ["COMPACT_REV_KEY", "CompactionState", "compact_once", "run_compactor"]

log = logging.getLogger(__name__)

COMPACT_REV_KEY = b"compact_rev_key"  # upstream's key, shared by every API server of the etcd


@dataclass(frozen=True)
class CompactionState:
    """What one round saw: the key's version and etcd's revision then (the next round's target)."""

    version: int = 0
    revision: int = 0
    compacted_to: int | None = None  # the revision this round compacted to, if it did


async def compact_once(etcd: EtcdClient, last: CompactionState) -> CompactionState:
    """One round of the schedule (see the module doc). Raises EtcdError when etcd fails; the caller
    keeps `last` and tries again next interval."""
    result = await etcd.txn(
        [Compare.version(COMPACT_REV_KEY) == last.version],
        [Op.put(COMPACT_REV_KEY, str(last.revision).encode())],
        [Op.get(COMPACT_REV_KEY)],
    )
    if not result.succeeded:
        got = result.responses[0]
        version = got.kvs[0].version if isinstance(got, RangeResult) and got.kvs else 0
        return CompactionState(version, result.revision)
    if last.revision == 0:
        return CompactionState(last.version + 1, result.revision)  # bootstrap: record only
    try:
        await etcd.compact(last.revision)
    except CompactedError as e:
        # Compacted further already (by hand, or by etcd's own --auto-compaction): nothing to do.
        log.info("etcd compaction to %d skipped: %s", last.revision, e)
        return CompactionState(last.version + 1, result.revision)
    return CompactionState(last.version + 1, result.revision, compacted_to=last.revision)


async def run_compactor(etcd: EtcdClient, interval_s: float) -> None:
    """Compact every `interval_s` until cancelled; an etcd failure is logged and retried next time."""
    state = CompactionState()
    while True:
        await asyncio.sleep(interval_s)
        try:
            state = await compact_once(etcd, state)
        except EtcdError as e:
            log.warning("etcd compaction failed (next try in %gs): %s", interval_s, e)
            continue
        if state.compacted_to is not None:
            log.info("etcd compacted to revision %d (now at %d)", state.compacted_to, state.revision)
