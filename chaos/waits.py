"""The driver's waits: steps of a sequential generator that hold a run until the cluster is in a
state (`chaos.scenario.WaitSpec`), so that the next fault hits what it is meant to hit.

    stable-leader   every replica ready (/readyz: informers synced, a warm candidate), a live
                    replica holding the scheduler Lease, binds by it under its current term in the
                    audit log, and at least one renewal on its regular cycle (renewTime >=
                    acquireTime + 0.9 retryPeriod); then, with `jitter`, a seeded random delay in
                    [0, jitter) after which the same holder must still hold the Lease (else the wait
                    starts over): the next fault lands anywhere in a renew cycle
    new-leader      after a fault on the leader (the nemesis' last replica fault that hit the Lease
                    holder): another identity holds the Lease, and it has bound pods under its term
    recovered       the replica the last fault hit is back: running under a new identity (its
                    supervisor restarted it: "restarted"), or the same process no longer leading
                    ("standby", a deposed leader with --on-lost-lease standby); and ready again
    steady-throughput the Lease holder binds at `rate` pods/s or more over the last `window` s of
                    the audit log (`kse bench failover --settle`: the next fault only once the new
                    leader is back to the workload's pace)

Who leads is read from the Lease through the API (the nemesis' clientset), binds from the audit log
(`chaos.audit_tail`), readiness and a replica's own view of leading from the backend when it offers
them (`ready`, `leading`: the local backend does; otherwise a replica counts as ready once it runs,
and as not leading once another identity holds the Lease). Waits only pace a run: every timing comes
from the history afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from chaos.history import PHASE_END, FaultRecord
from chaos.nemesis import NemesisError
from chaos.scenario import (
    NEW_LEADER,
    RECOVERED,
    RESTARTED,
    STABLE_LEADER,
    STANDBY,
    STEADY_THROUGHPUT,
    WaitSpec,
)

if TYPE_CHECKING:
    from chaos.audit_tail import AuditTail
    from chaos.nemesis import Nemesis
    from proto import kse_pb2 as pb

__all__ = ["POLL_S", "Waits"]

POLL_S = 0.02  # pacing of the probes (the timings come from the history, not from these)


def renewed_for(lease: pb.Lease) -> float:
    """renewTime - acquireTime of the Lease (both the holder's clock); 0 if either is unreadable."""
    from kse.objects.timeutil import to_epoch

    try:
        return to_epoch(lease.spec.renew_time) - to_epoch(lease.spec.acquire_time)
    except ValueError:
        return 0.0


class Waits:
    """Runs `WaitSpec`s for one run, over the run's nemesis (its backend, its Lease reads, its
    seeded random source and the faults it injected) and, when there is one, the audit log tail."""

    def __init__(self, nemesis: Nemesis, tail: AuditTail | None, *, poll_s: float = POLL_S) -> None:
        self.nemesis = nemesis
        self.backend = nemesis.backend
        self.tail = tail
        self.poll_s = poll_s

    async def run(self, spec: WaitSpec) -> str:
        """Wait for `spec`; returns what it found (the leader's replica, the new holder's identity,
        how the replica came back). NemesisError when the state is not reached in time."""
        if spec.wait == STABLE_LEADER:
            return await self.stable_leader(spec)
        if spec.wait == NEW_LEADER:
            return await self.new_leader(spec)
        if spec.wait == RECOVERED:
            return await self.recovered(spec)
        if spec.wait == STEADY_THROUGHPUT:
            return await self.steady_throughput(spec)
        raise NemesisError(f"unknown wait {spec.wait!r}")

    # ------------------------------------------------------------------ probes

    async def _until(self, what: str, within: float, probe: Callable[[], Awaitable[Any]]) -> Any:
        from kse.client.errors import ApiError

        deadline = time.monotonic() + within
        last = ""
        while True:
            try:
                value = await probe()
            except ApiError as e:  # an API server restarting: try again until the deadline
                value, last = None, str(e)
            if value:
                return value
            if time.monotonic() >= deadline:
                raise NemesisError(
                    f"timed out after {within:g}s waiting for {what}; {await self._describe()}"
                    + (f" (last API error: {last})" if last else "")
                )
            await asyncio.sleep(self.poll_s)

    async def _describe(self) -> str:
        b = self.backend
        states = [f"{r} pid {await b.pid(r)} {await b.identity(r)}" for r in await b.replicas()]
        return f"replicas: {', '.join(states)}"

    async def _is_ready(self, replica: str) -> bool:
        probe = getattr(self.backend, "ready", None)
        if probe is None:  # a backend that cannot tell: ready once it runs under an identity
            return bool(await self.backend.identity(replica))
        return bool(await probe(replica))

    def _paused(self, replica: str) -> bool:
        """A replica the nemesis holds stopped right now (its window open)."""
        stops = [f for f in self.nemesis.injected if f.target == replica and f.fault == "stop"]
        return bool(stops) and stops[-1].detail.get("phase") != PHASE_END

    async def _binds(self, holder: str, transitions: int) -> bool:
        return self.tail is None or self.tail.count(holder, transitions) >= 1

    def _last_replica_fault(self) -> FaultRecord:
        """The last fault the nemesis injected into a replica (its first record: the one with the
        replica's identity, pid and, if it led, the Lease's transitions)."""
        for f in reversed(self.nemesis.injected):
            d = f.detail
            if "identity" in d and "pid" in d and d.get("phase") != PHASE_END and "part_of" not in d:
                return f
        raise NemesisError("no fault has hit a scheduler replica yet: nothing to wait for")

    # ------------------------------------------------------------------ the waits

    async def stable_leader(self, spec: WaitSpec) -> str:
        n = self.nemesis
        found: list[tuple[str, str]] = []

        async def probe() -> bool:
            for r in await self.backend.replicas():
                if not await self._is_ready(r):
                    return False
            lease = await n.lease()
            if lease is None or not lease.spec.holder_identity:
                return False
            holder = lease.spec.holder_identity
            leader = await n.replica_with_identity(holder)
            if leader is None or not await self._binds(holder, lease.spec.lease_transitions):
                return False
            if renewed_for(lease) < 0.9 * n.retry_period:
                return False  # not yet renewing on its regular cycle (only the acquisition's writes)
            found[:] = [(leader, holder)]
            return True

        while True:
            await self._until("a stable leader that binds pods", spec.within, probe)
            leader, holder = found[0]
            if spec.jitter <= 0:
                return leader
            await asyncio.sleep(n.rng.uniform(0.0, spec.jitter))
            lease = await n.lease()  # the same leader, just before the fault that follows
            if lease is not None and lease.spec.holder_identity == holder and await self._is_ready(leader):
                return leader

    async def new_leader(self, spec: WaitSpec) -> str:
        n = self.nemesis
        fault = self._last_replica_fault()
        old = str(fault.detail["identity"])
        found: list[tuple[str, int]] = []

        async def holder() -> bool:
            lease = await n.lease()
            if lease is None or not lease.spec.holder_identity or lease.spec.holder_identity == old:
                return False
            if await n.replica_with_identity(lease.spec.holder_identity) is None:
                return False
            found[:] = [(lease.spec.holder_identity, lease.spec.lease_transitions)]
            return True

        await self._until(f"a leader other than {old}", spec.within, holder)
        identity, term = found[0]

        async def binds() -> bool:
            return await self._binds(identity, term)

        await self._until(f"binds by the new leader {identity}", spec.within, binds)
        return identity

    async def recovered(self, spec: WaitSpec) -> str:
        b = self.backend
        fault = self._last_replica_fault()
        replica, old = fault.target, str(fault.detail["identity"])

        async def back() -> str:
            identity = await b.identity(replica)
            if identity and identity != old and spec.expect in (None, RESTARTED):
                return RESTARTED if await self._is_ready(replica) else ""
            if identity == old and spec.expect in (None, STANDBY) and not self._paused(replica):
                if await self._leading(replica, identity) is False and await self._is_ready(replica):
                    return STANDBY
            return ""

        how = spec.expect or "restarted or standby"
        what = f"{replica} to come back ({how}) after the {fault.fault}"
        return str(await self._until(what, spec.within, back))

    async def steady_throughput(self, spec: WaitSpec) -> str:
        """The Lease holder binds at `spec.rate` pods/s or more over the last `spec.window` s (read
        from the audit log); returns its identity. Without an audit log there is nothing to count
        and the wait passes at once."""
        n = self.nemesis
        found: list[str] = []
        tail = self.tail

        async def steady() -> bool:
            lease = await n.lease()
            if lease is None or not lease.spec.holder_identity:
                return False
            holder = lease.spec.holder_identity
            if tail is not None and tail.rate(holder, spec.window, time.time()) < spec.rate:
                return False
            found[:] = [holder]
            return True

        what = f"the leader to bind {spec.rate:g} pods/s over {spec.window:g}s"
        await self._until(what, spec.within, steady)
        return found[0]

    async def _leading(self, replica: str, identity: str) -> bool | None:
        probe = getattr(self.backend, "leading", None)
        if probe is not None:
            return await probe(replica)  # type: ignore[no-any-return]
        lease = await self.nemesis.lease()
        return lease is not None and lease.spec.holder_identity == identity
