"""The nemesis, local-process backend: faults on the processes of a `kse.up.Cluster`.

Each fault resolves its target when it fires, acts, and appends `FaultRecord`s (chaos.history) to
the run's `faults.jsonl`, stamped with this machine's wall clock just before the signal is sent:

    fault    replica (leader, scheduler-N, random-replica)   apiserver / etcd member
    kill     SIGKILL; the supervisor restarts it              SIGKILL; started again after `duration`
    term     SIGTERM (a leader releases its lease)            SIGTERM; started again after `duration`
    stop     SIGSTOP for `duration` s, then SIGCONT           the same
    restart  SIGTERM, started again at once (ready awaited)  SIGTERM, started again after `duration`
    partition  its link to the API server black-holed for   -
             `duration` s (`chaos.proxy`), then healed

Records: `kill` / `terminate` / `restart` are instants; a `stop` or a `partition` is a window (a
record with detail phase "start", and one with phase "end" at SIGCONT or heal); a process that stays
down for a while gets a `restart` record when it is started again. Faults on replicas carry the
replica's lease identity (and the Lease's transitions if it held the Lease) in `detail`, which the
failover analysis needs.

A partition needs the replica to reach the API server through a `PartitionProxy` (the runner sets
that up before t=0 when a scenario has partitions). The docker backend is not here yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chaos.history import (
    KILL,
    PARTITION,
    PHASE_END,
    PHASE_START,
    RESTART,
    STOP,
    TERMINATE,
    FaultRecord,
    JsonlWriter,
)
from chaos.scenario import FaultSpec

if TYPE_CHECKING:
    from chaos.proxy import PartitionProxy
    from kse.procs.etcd import EtcdProcess
    from kse.up import Cluster, Replica

__all__ = ["FAULT_RECORD_NAMES", "Nemesis", "NemesisError"]

# Scenario fault name -> FaultRecord.fault
FAULT_RECORD_NAMES: dict[str, str] = {
    "kill": KILL,
    "term": TERMINATE,
    "stop": STOP,
    "restart": RESTART,
    "partition": PARTITION,
}


class NemesisError(RuntimeError):
    """A fault could not be injected (no leader to hit, an unknown target)."""


class Nemesis:
    """Injects `FaultSpec`s into a running cluster; one per run (it owns the faults writer)."""

    def __init__(
        self,
        cluster: Cluster,
        faults: JsonlWriter,
        *,
        seed: int = 0,
        default_stop: float = 5.0,
        leader_within: float = 60.0,
        proxies: dict[str, PartitionProxy] | None = None,
        say: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.cluster = cluster
        self.proxies = dict(proxies or {})  # replica name -> the proxy between it and the API server
        self.faults = faults
        self.rng = random.Random(seed)
        self.default_stop = default_stop
        self.leader_within = leader_within
        self.say = say
        self.injected: list[FaultRecord] = []

    def _record(self, ts: float, fault: str, target: str, detail: dict[str, Any]) -> FaultRecord:
        rec = FaultRecord(ts, fault, target, detail)
        self.faults.append(rec)
        self.injected.append(rec)
        return rec

    async def inject(self, spec: FaultSpec) -> None:
        """Inject one fault and see it through (a `stop` returns after its SIGCONT, a process that
        stays down after it is started again)."""
        t = spec.target
        if t == "apiserver":
            await self._apiserver(spec)
        elif t.startswith("etcd"):
            await self._etcd(spec, await self._etcd_member(t))
        else:
            await self._replica(spec, await self._replica_target(t))

    # ------------------------------------------------------------------ targets

    async def _replica_target(self, target: str) -> Replica:
        c = self.cluster
        if target == "leader":
            leader = await c.leader()
            if leader is None:
                try:
                    leader = await c.wait_for_leader(self.leader_within)
                except TimeoutError as e:
                    raise NemesisError(f"no leader to hit: {e}") from e
            return leader
        if target == "random-replica":
            return self.rng.choice(sorted(c.replicas, key=lambda r: r.name))
        try:
            return c.replica(target)
        except KeyError as e:
            raise NemesisError(str(e)) from e

    async def _etcd_member(self, target: str) -> EtcdProcess:
        c = self.cluster
        if c.etcd is None:
            raise NemesisError("the cluster has no etcd")
        if target == "etcd":
            return self.rng.choice(c.etcd.members)
        if target == "etcd-leader":
            try:
                return await c.etcd.leader()
            except Exception as e:
                raise NemesisError(f"no etcd leader: {e}") from e
        try:
            return c.etcd.member(target)
        except (KeyError, ValueError) as e:
            raise NemesisError(f"no etcd member {target!r}") from e

    # ------------------------------------------------------------------ replicas

    async def _replica(self, spec: FaultSpec, r: Replica) -> None:
        detail: dict[str, Any] = {"identity": r.identity, "pid": r.pid, "target": spec.target}
        with contextlib.suppress(Exception):
            lease = await self.cluster.lease()
            if lease is not None and lease.spec.holder_identity == r.identity:
                detail["lease_transitions"] = lease.spec.lease_transitions
                detail["leader"] = True
        name = FAULT_RECORD_NAMES[spec.fault]
        self.say(f"{spec.fault} {r.name} ({r.identity}){' [leader]' if detail.get('leader') else ''}")
        if spec.fault == "kill":
            self._record(time.time(), name, r.name, detail)
            await r.kill()
        elif spec.fault == "term":
            self._record(time.time(), name, r.name, detail)
            await r.terminate()
        elif spec.fault == "restart":
            self._record(time.time(), name, r.name, detail)
            await r.terminate(restart=False)
            await r.start(wait_ready=True)  # a rolling restart waits for each replica to be ready
        elif spec.fault == "partition":
            proxy = self.proxies.get(r.name)
            if proxy is None:
                raise NemesisError(f"{r.name} is not behind a partition proxy")
            d = spec.duration if spec.duration is not None else self.default_stop
            self._record(time.time(), name, r.name, detail | {"phase": PHASE_START, "partition_for_s": d})
            proxy.partition()
            try:
                await asyncio.sleep(d)
            finally:
                ts = time.time()
                proxy.heal()
                self._record(ts, name, r.name, {"identity": detail["identity"], "phase": PHASE_END})
        else:
            d = spec.duration if spec.duration is not None else self.default_stop
            self._record(time.time(), name, r.name, detail | {"phase": PHASE_START, "stop_for_s": d})
            await r.stop()
            try:
                await asyncio.sleep(d)
            finally:
                ts = time.time()
                await r.cont()
                self._record(ts, name, r.name, {"identity": detail["identity"], "phase": PHASE_END})

    # ------------------------------------------------------------------ API server and etcd

    async def _apiserver(self, spec: FaultSpec) -> None:
        api = self.cluster.apiserver
        if api is None:
            raise NemesisError("the cluster has no API server")
        down = spec.duration or 0.0
        detail: dict[str, Any] = {"pid": api.pid}
        name = FAULT_RECORD_NAMES[spec.fault]
        self.say(f"{spec.fault} {api.name}" + (f" ({down:g}s)" if down else ""))
        if spec.fault == "stop":
            d = spec.duration if spec.duration is not None else self.default_stop
            self._record(time.time(), name, api.name, detail | {"phase": PHASE_START, "stop_for_s": d})
            api.pause()
            try:
                await asyncio.sleep(d)
            finally:
                ts = time.time()
                api.resume()
                self._record(ts, name, api.name, {"phase": PHASE_END})
            return
        self._record(time.time(), name, api.name, detail | ({"down_s": down} if down else {}))
        if not down:
            await self.cluster.restart_apiserver(kill=spec.fault == "kill")
            return
        if spec.fault == "kill":
            api.kill()
        else:
            await api.terminate()
        await asyncio.sleep(down)
        ts = time.time()
        api.start()
        await api.wait_ready(self.cluster.plan.ready_timeout)
        self._record(ts, RESTART, api.name, {"after": spec.fault})

    async def _etcd(self, spec: FaultSpec, m: EtcdProcess) -> None:
        down = spec.duration or 0.0
        detail: dict[str, Any] = {"pid": m.pid, "members": len(self.cluster.etcd_members)}
        name = FAULT_RECORD_NAMES[spec.fault]
        self.say(f"{spec.fault} {m.name}" + (f" ({down:g}s)" if down else ""))
        if spec.fault == "stop":
            d = spec.duration if spec.duration is not None else self.default_stop
            self._record(time.time(), name, m.name, detail | {"phase": PHASE_START, "stop_for_s": d})
            await m.pause()
            try:
                await asyncio.sleep(d)
            finally:
                ts = time.time()
                await m.resume()
                self._record(ts, name, m.name, {"phase": PHASE_END})
            return
        self._record(time.time(), name, m.name, detail | ({"down_s": down} if down else {}))
        if spec.fault == "kill":
            await m.kill()
        else:
            await m.stop()
        if down:
            await asyncio.sleep(down)
        ts = time.time()
        await m.restart()
        self._record(ts, RESTART, m.name, {"after": spec.fault})
