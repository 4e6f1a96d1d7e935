"""etcd leases for objects that expire (Events: `--event-ttl`), one lease shared by many objects.

Why: kube-apiserver keeps Events for `--event-ttl` (1 h by default) and lets etcd delete them,
by writing each with an etcd lease. Without it, Events (one per scheduled pod, at least) pile up in
etcd and in the watch cache for as long as the cluster runs: the soak measured the API server and
etcd growing all run long, with nothing else unbounded.

A lease per object would cost a LeaseGrant per write and millions of leases, so upstream reuses
one (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/lease_manager.go`), and this follows it: a
lease is granted for the TTL plus a reuse window (5 % of the TTL, at most 60 s) and handed to every
object written during that window, and to at most `max_objects` of them, so each object lives at
least its TTL and at most the TTL plus the window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kse.etcdclient import EtcdClient

__all__ = ["LeaseManager", "reuse_window_s"]

REUSE_FRACTION = 0.05
REUSE_MAX_S = 60
MAX_OBJECTS_PER_LEASE = 1000


def reuse_window_s(ttl_s: int) -> int:
    """How long one lease keeps being handed out, for objects that must live `ttl_s` seconds."""
    return min(int(ttl_s * REUSE_FRACTION), REUSE_MAX_S)


class LeaseManager:
    """Hands out etcd lease IDs for a TTL, granting a new lease only when the last one would not
    cover the TTL, has had its window, or carries `max_objects` objects."""

    def __init__(
        self,
        etcd: EtcdClient,
        *,
        max_objects: int = MAX_OBJECTS_PER_LEASE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._etcd = etcd
        self._max_objects = max_objects
        self._clock = clock
        self._leases: dict[int, tuple[int, float, int]] = {}  # ttl -> (id, expires at, objects)
        self._granting = asyncio.Lock()
        self.granted = 0

    async def lease_for(self, ttl_s: int) -> int:
        """A lease ID under which an object lives at least `ttl_s` seconds (etcd then deletes it)."""
        lease = self._reusable(ttl_s)
        if lease is not None:
            return lease
        async with self._granting:  # concurrent writers share one grant
            lease = self._reusable(ttl_s)
            if lease is not None:
                return lease
            granted_ttl = ttl_s + reuse_window_s(ttl_s)
            start = self._clock()
            lease_id, ttl = await self._etcd.grant_lease(granted_ttl)
            self.granted += 1
            self._leases[ttl_s] = (lease_id, start + ttl, 1)
            return lease_id

    def _reusable(self, ttl_s: int) -> int | None:
        held = self._leases.get(ttl_s)
        if held is None:
            return None
        lease_id, expires, objects = held
        now = self._clock()
        covers = now + ttl_s < expires  # still outlives an object written now by its TTL
        if not covers or objects >= self._max_objects:
            return None
        self._leases[ttl_s] = (lease_id, expires, objects + 1)
        return lease_id
