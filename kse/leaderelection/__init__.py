"""Leader election for the control plane's replicated components (the scheduler, the
controller-manager), in the library as client-go's is: `tools/leaderelection` over a Lease, with
standbys that watch the Lease and fence tokens for the leader's writes.

    client = ClientsetLeaseClient(Clientset(channel_source, user_agent=".../leader-election"))
    elector = LeaderElector(LeaderElectionConfig(identity="scheduler-1"), client, LeaderCallbacks(
        on_started_leading=lead,          # async def lead(term): ... (cancelled when the term ends)
        on_stopped_leading=stop_acting,   # sync, called the moment the term ends
    ))
    await elector.run()                   # elector.is_leader(), elector.fence_token()

Modules: `config` (configuration, callbacks, validation), `lock` (the Lease record and the
`LeaseClient` protocol over the clientset), `elector` (the loop), `clock` (real and
skewed clocks; the tests' doubles are in `tests/fixtures/leaderelection.py`).
"""

from kse.leaderelection.clock import Clock, RealClock, SkewedClock
from kse.leaderelection.config import (
    JITTER_FACTOR,
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionConfigError,
    Strategy,
    default_identity,
)
from kse.leaderelection.elector import LeaderElector, LeaderTerm, jitter
from kse.leaderelection.lock import (
    ClientsetLeaseClient,
    LeaderElectionRecord,
    LeaseClient,
    LeaseLock,
)

__all__ = [
    "JITTER_FACTOR",
    "ClientsetLeaseClient",
    "Clock",
    "LeaderCallbacks",
    "LeaderElectionConfig",
    "LeaderElectionConfigError",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaderTerm",
    "LeaseClient",
    "LeaseLock",
    "RealClock",
    "SkewedClock",
    "Strategy",
    "default_identity",
    "jitter",
]
