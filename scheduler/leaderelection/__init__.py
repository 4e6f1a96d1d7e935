"""Leader election for scheduler replicas: client-go's `tools/leaderelection` over a Lease, with
standbys that watch the Lease and fence tokens for the leader's writes.

    client = ClientsetLeaseClient(Clientset(channel_source, user_agent=".../leader-election"))
    elector = LeaderElector(LeaderElectionConfig(identity="scheduler-1"), client, LeaderCallbacks(
        on_started_leading=lead,          # async def lead(term): ... (cancelled when the term ends)
        on_stopped_leading=stop_acting,   # sync, called the moment the term ends
    ))
    await elector.run()                   # elector.is_leader(), elector.fence_token()

Modules: `config` (configuration, callbacks, validation), `lock` (the Lease record and the
`LeaseClient` protocol, over the clientset or in memory), `elector` (the loop), `clock` (real,
manual and skewed clocks).
"""

from scheduler.leaderelection.clock import Clock, FakeClock, RealClock, SkewedClock
from scheduler.leaderelection.config import (
    JITTER_FACTOR,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionConfigError,
    Strategy,
    default_identity,
)
from scheduler.leaderelection.elector import LeaderElector, LeaderTerm, jitter
from scheduler.leaderelection.lock import (
    ClientsetLeaseClient,
    InMemoryLeaseStore,
    LeaderElectionRecord,
    LeaseClient,
    LeaseLock,
    MemoryLeaseClient,
)

__all__ = [
    "JITTER_FACTOR",
    "ClientsetLeaseClient",
    "Clock",
    "FakeClock",
    "InMemoryLeaseStore",
    "LeaderCallbacks",
    "LeaderElectionConfig",
    "LeaderElectionConfigError",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaderTerm",
    "LeaseClient",
    "LeaseLock",
    "MemoryLeaseClient",
    "RealClock",
    "SkewedClock",
    "Strategy",
    "default_identity",
    "jitter",
]
