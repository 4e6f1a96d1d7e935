"""The nemesis: decides which process a fault hits, hits it through a `FaultBackend`, and records it.

The backend (`chaos.backend`) says how a fault reaches a process: local processes
(`chaos.local_backend`) or docker containers (`chaos.docker_backend`). Who leads is read from the
scheduler Lease through the API (the admin clientset), the same for every backend. Each fault
resolves its target when it fires, acts, and appends `FaultRecord`s (chaos.history) to the run's
`faults.jsonl`, stamped with this machine's wall clock just before the fault is applied:

    fault       replica (leader, standby, scheduler-N, random,    apiserver / etcd member
                controller-manager-leader)
    kill        SIGKILL; its supervisor restarts it               SIGKILL; started again after `duration`
    term        SIGTERM (a leader releases its lease)             SIGTERM; started again after `duration`
    stop        SIGSTOP for `duration` s, then SIGCONT            the same
    restart     SIGTERM, started again at once (ready awaited)    SIGTERM, started again after `duration`
    partition   its link to the API server black-holed (mode     -
                delay / loss: slowed, or segments lost) for
                `duration` s, then healed
    rotate-leaf its identity's pair reissued from the same CA     apiserver: its serving and etcd-client
                                                                  pairs; etcd: etcd's serving pair;
                                                                  all: every leaf
    expire-cert its client pair reissued already expired (or      -
                expiring in `duration` s); after `heal_after` s
                a valid pair again
    clock-skew  its clock file set to `offset` / `rate`; reset    -
                after `duration` s if given
    rotate-ca   (target all) add, switch, remove, `duration` s apart; etcd members restarted one at a
                time after add and after remove (see `_rotate_ca`)
    node-upgrade (target nodes) batches cordoned, drained, their kubelets restarted upgraded through
                the backend's `set_kubelets`, uncordoned (`chaos.node_upgrade`); a window
                "node_upgrade" with its cordon / uncordon records (detail "revision", "part_of")

Records: `kill` / `terminate` / `restart` are instants (an API server brought back at once also gets
a `restart` record with detail "after" once it is ready again, which ends its outage); `stop`,
`partition`, `rotate_certs`, `rotate_ca`, `expire_certs` and `clock_skew` are windows: a record with
detail phase "start" and one with phase "end" for the same fault and target (at SIGCONT, heal, the
end of the watched window, the last CA phase's window, the valid pair issued again, the skew
removed; a window without an end record lasts to the end of the history). Steps inside a window
(rotate-ca's phases, the etcd restarts it makes) are records with detail "part_of" naming the
window's fault. A process that stays down for a while gets a `restart` record (detail "after") when
it is started again. Faults on replicas carry the replica's lease identity (and the Lease's
transitions if it held the Lease) in `detail`, which the failover analysis needs.

What `no_rotation_rpc_errors` reads: a rotation's window runs from just before the first file is
written to `duration` s (rotate-leaf) or `duration` s after the last phase (rotate-ca) later, the
time by which every process has reloaded (clients poll their files every second). An expire-cert
window carries detail "client" (the replica name, which is also the client name of its
`rpc-errors-<name>.jsonl`): that client's errors inside it are what the fault is for, and are not
charged to a rotation that overlaps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from chaos.backend import BackendError, FaultBackend
from chaos.history import (
    CLOCK_SKEW,
    EXPIRE_CERTS,
    KILL,
    PARTITION,
    PHASE_END,
    PHASE_START,
    RESTART,
    ROTATE_CA,
    ROTATE_CERTS,
    STOP,
    TERMINATE,
    FaultRecord,
    JsonlWriter,
)
from chaos.scenario import CONTROLLER_MANAGER_LEADER, ROTATION_STEP_S, FaultSpec
from harness.up.plan import CONTROLLER_MANAGER_LEASE

if TYPE_CHECKING:
    from chaos.node_upgrade import UpgradeStats
    from kse.client.clientset import Clientset
    from proto import kse_pb2 as pb

__all__ = ["FAULT_RECORD_NAMES", "Nemesis", "NemesisError"]

# Scenario fault name -> FaultRecord.fault
FAULT_RECORD_NAMES: dict[str, str] = {
    "kill": KILL,
    "term": TERMINATE,
    "stop": STOP,
    "restart": RESTART,
    "partition": PARTITION,
    "rotate-leaf": ROTATE_CERTS,
    "rotate-ca": ROTATE_CA,
    "expire-cert": EXPIRE_CERTS,
    "clock-skew": CLOCK_SKEW,
    "node-upgrade": "node_upgrade",
}
EXPIRED_AGO = timedelta(hours=1)  # an "already expired" certificate expired this long ago
CLIENT_RELOAD_S = 2.5  # a client picks up new files within its 1 s poll, plus the channel swap
SKEW_FILE_CHECK_S = 0.5  # `kse scheduler --clock-skew-file` looks every 0.25 s; margin for a busy machine


class NemesisError(RuntimeError):
    """A fault could not be injected (no leader to hit, an unknown target, a backend that cannot)."""


class Nemesis:
    """Injects `FaultSpec`s through a backend; one per run (it owns the faults writer)."""

    def __init__(
        self,
        backend: FaultBackend,
        clientset: Clientset,
        faults: JsonlWriter,
        *,
        seed: int = 0,
        default_stop: float = 5.0,
        leader_within: float = 60.0,
        lease: tuple[str, str] = ("kube-system", "kube-scheduler"),
        retry_period: float = 2.0,
        renew_deadline: float = 10.0,
        say: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.backend = backend
        self.clientset = clientset
        self.faults = faults
        self.rng = random.Random(seed)
        self.default_stop = default_stop
        self.leader_within = leader_within
        self.lease_ref = lease
        self.retry_period = retry_period  # the replicas' --leader-elect-retry-period
        self.renew_deadline = renew_deadline  # and their --leader-elect-renew-deadline
        self.say = say
        self.injected: list[FaultRecord] = []
        self.upgrades: list[UpgradeStats] = []  # one per node-upgrade fault, filled as it goes
        # One PKI writer at a time (rotations hold the PKI's flock too; this keeps them in order).
        self._pki = asyncio.Lock()
        # One fault at a time on the API server: a kill that lands while a restart is still
        # waiting for readiness would fail the restart instead of testing the cluster (seen in
        # the short form on a loaded machine, where the faults' times are compressed).
        self._apiserver_lock = asyncio.Lock()

    def _record(self, ts: float, fault: str, target: str, detail: dict[str, Any]) -> FaultRecord:
        rec = FaultRecord(ts, fault, target, detail)
        self.faults.append(rec)
        self.injected.append(rec)
        return rec

    async def inject(self, spec: FaultSpec) -> None:
        """Inject one fault and see it through (a `stop` returns after its SIGCONT, a process that
        stays down after it is started again, a window after its end)."""
        try:
            await self._inject(spec)
        except BackendError as e:
            raise NemesisError(str(e)) from e

    async def _inject(self, spec: FaultSpec) -> None:
        t, f = spec.target, spec.fault
        if f == "node-upgrade":
            await self._node_upgrade(spec)
        elif f == "rotate-ca":
            await self._rotate_ca(spec)
        elif f == "rotate-leaf" and t in ("apiserver", "etcd", "all"):
            await self._rotate_leaf(spec, t, None)
        elif t == "apiserver":
            async with self._apiserver_lock:
                await self._apiserver(spec)
        elif t.startswith("etcd"):
            await self._etcd(spec, await self._etcd_member(t))
        else:
            await self._replica(spec, await self._replica_target(t))

    async def _node_upgrade(self, spec: FaultSpec) -> None:
        """A rolling node upgrade (`chaos.node_upgrade`) through the backend's kubelet switch."""
        from chaos.node_upgrade import NodeUpgradeError, UpgradeStats, run_node_upgrade

        set_kubelets = getattr(self.backend, "set_kubelets", None)
        if set_kubelets is None:
            raise NemesisError(f"node-upgrade: the {type(self.backend).__name__} cannot stop kubelets")
        stats = UpgradeStats()
        self.upgrades.append(stats)
        try:
            await run_node_upgrade(
                spec,
                self.clientset,
                self.backend,  # type: ignore[arg-type]
                self._record,
                say=self.say,
                stats=stats,
            )
        except NodeUpgradeError as e:
            raise NemesisError(f"node-upgrade: {e}") from e

    # ------------------------------------------------------------------ lease and targets

    async def lease(self) -> pb.Lease | None:
        """The scheduler Lease, read through the API now (None if there is none)."""
        from kse.client.errors import NotFoundError

        ns, name = self.lease_ref
        try:
            return await self.clientset.leases.get(ns, name)
        except NotFoundError:
            return None

    async def replica_with_identity(self, identity: str) -> str | None:
        """The replica whose current lease identity is `identity`, if any."""
        for r in await self.backend.replicas():
            if identity and await self.backend.identity(r) == identity:
                return r
        return None

    async def leader(self) -> str | None:
        """The replica whose current identity holds the Lease (read now), if any."""
        lease = await self.lease()
        if lease is None or not lease.spec.holder_identity:
            return None
        return await self.replica_with_identity(lease.spec.holder_identity)

    async def wait_for_leader(self, within: float) -> str:
        from kse.client.errors import ApiError

        deadline = time.monotonic() + within
        last = ""
        while True:
            try:
                r = await self.leader()
            except ApiError as e:
                r, last = None, str(e)
            if r is not None:
                return r
            if time.monotonic() >= deadline:
                raise NemesisError(f"no leader to hit within {within:g}s" + (f" ({last})" if last else ""))
            await asyncio.sleep(0.05)

    async def controller_manager_leader(self) -> str | None:
        """The controller-manager replica whose identity holds its Lease (read now), if any."""
        from kse.client.errors import NotFoundError

        names = getattr(self.backend, "controller_managers", None)
        if names is None:
            raise NemesisError(f"the {self.backend.name} backend cannot target the controller-manager")
        try:
            lease = await self.clientset.leases.get(*CONTROLLER_MANAGER_LEASE)
        except NotFoundError:
            return None
        for r in await names():
            if lease.spec.holder_identity and await self.backend.identity(r) == lease.spec.holder_identity:
                return str(r)
        return None

    async def _controller_manager_target(self) -> str:
        from kse.client.errors import ApiError

        deadline = time.monotonic() + self.leader_within
        while True:
            with contextlib.suppress(ApiError):
                r = await self.controller_manager_leader()
                if r is not None:
                    return r
            if time.monotonic() >= deadline:
                raise NemesisError(f"no controller-manager leader to hit within {self.leader_within:g}s")
            await asyncio.sleep(0.05)

    async def _replica_target(self, target: str) -> str:
        if target == "leader":
            return await self.wait_for_leader(self.leader_within)
        if target == CONTROLLER_MANAGER_LEADER:
            return await self._controller_manager_target()
        replicas = await self.backend.replicas()
        if target == "standby":
            leader = await self.leader()
            others = [r for r in replicas if r != leader]
            if not others:
                raise NemesisError("no standby replica (every replica is the leader, or there is none)")
            return self.rng.choice(others)
        if target == "random-replica":
            if not replicas:
                raise NemesisError("no scheduler replicas")
            return self.rng.choice(replicas)
        if target not in replicas:
            raise NemesisError(f"no replica {target!r}; have: {', '.join(replicas)}")
        return target

    async def _etcd_member(self, target: str) -> str:
        members = await self.backend.etcd_members()
        if not members:
            raise NemesisError("the cluster has no etcd members the backend can reach")
        if target == "etcd":
            return self.rng.choice(members)
        if target == "etcd-leader":
            leader = getattr(self.backend, "etcd_leader", None)
            if leader is None:
                raise NemesisError(f"the {self.backend.name} backend cannot tell the etcd leader")
            return str(await leader())
        if target not in members:
            raise NemesisError(f"no etcd member {target!r}; have: {', '.join(members)}")
        return target

    async def _replica_detail(self, replica: str, target: str) -> dict[str, Any]:
        identity = await self.backend.identity(replica)
        detail: dict[str, Any] = {
            "identity": identity,
            "pid": await self.backend.pid(replica),
            "target": target,
        }
        with contextlib.suppress(Exception):
            lease = await self.lease()
            if lease is not None and identity and lease.spec.holder_identity == identity:
                detail["lease_transitions"] = lease.spec.lease_transitions
                detail["leader"] = True
        return detail

    # ------------------------------------------------------------------ replicas

    async def _replica(self, spec: FaultSpec, r: str) -> None:
        b = self.backend
        detail = await self._replica_detail(r, spec.target)
        name = FAULT_RECORD_NAMES[spec.fault]
        leader = " [leader]" if detail.get("leader") else ""
        self.say(f"{spec.describe(planned_time=False)}: {r} ({detail['identity']}){leader}")
        if spec.fault == "kill":
            self._record(time.time(), name, r, detail)
            await b.kill(r)
        elif spec.fault == "term":
            self._record(time.time(), name, r, detail)
            await b.terminate(r)
        elif spec.fault == "restart":
            self._record(time.time(), name, r, detail)
            await b.terminate(r, restart=False)
            await b.start(r)  # a rolling restart waits for each replica to be ready
        elif spec.fault == "partition":
            d = spec.duration if spec.duration is not None else self.default_stop
            mode = spec.mode or "blackhole"
            how: dict[str, Any] = {"mode": mode}
            if spec.delay is not None:
                how["delay_s"] = spec.delay
            if spec.loss is not None:
                how["loss"] = spec.loss
            await self._window(
                name,
                r,
                d,
                start=detail | how | {"partition_for_s": d},
                end={"identity": detail["identity"]},
                begin=lambda: b.partition(r, mode, delay=spec.delay or 0.0, loss=spec.loss or 0.0),
                finish=lambda: b.heal(r),
                until=self._until(spec, detail["identity"]),
            )
        elif spec.fault == "stop":
            d = spec.duration if spec.duration is not None else self.default_stop
            await self._window(
                name,
                r,
                d,
                start=detail | {"stop_for_s": d},
                end={"identity": detail["identity"]},
                begin=lambda: b.pause(r),
                finish=lambda: b.resume(r),
                until=self._until(spec, detail["identity"]),
            )
        elif spec.fault == "rotate-leaf":
            await self._rotate_leaf(spec, r, detail)
        elif spec.fault == "expire-cert":
            await self._expire_cert(spec, r, detail)
        elif spec.fault == "clock-skew":
            await self._clock_skew(spec, r, detail)
        else:
            raise NemesisError(f"{spec.fault} does not apply to a replica")

    async def _window(
        self,
        fault: str,
        target: str,
        seconds: float,
        *,
        start: dict[str, Any],
        end: dict[str, Any],
        begin: Callable[[], Awaitable[None]],
        finish: Callable[[], Awaitable[None]],
        until: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """A fault that lasts (a pause, a partition): its start record, `begin`, `seconds` (and then
        `until`, if given, returns), then `finish` and its end record, stamped just before `finish`
        acts (also when cancelled, or when `until` gives up)."""
        self._record(time.time(), fault, target, start | {"phase": PHASE_START})
        await begin()
        try:
            await asyncio.sleep(seconds)
            if until is not None:
                await until()
        finally:
            ts = time.time()
            await finish()
            self._record(ts, fault, target, end | {"phase": PHASE_END})

    def _until(self, spec: FaultSpec, identity: str) -> Callable[[], Awaitable[None]] | None:
        """What a window waits for past its duration (`FaultSpec.until`), if anything."""
        if spec.until is None:
            return None
        if spec.until != "new-leader":
            raise NemesisError(f"{spec.describe()}: unknown until {spec.until!r}")

        async def another_holder() -> None:
            from kse.client.errors import ApiError

            deadline = time.monotonic() + self.leader_within
            while True:
                with contextlib.suppress(ApiError):
                    lease = await self.lease()
                    if lease is not None and lease.spec.holder_identity not in ("", identity):
                        return
                if time.monotonic() >= deadline:
                    raise NemesisError(
                        f"{spec.describe()}: no replica other than {identity} took the lease within "
                        f"{self.leader_within:g}s"
                    )
                await asyncio.sleep(0.02)

        return another_holder

    # ------------------------------------------------------------------ API server and etcd

    async def _down_and_up(self, spec: FaultSpec, target: str, detail: dict[str, Any]) -> None:
        """kill / term / restart of a process the cluster does not restart by itself (API server,
        etcd member): down for `duration` s (0: back at once), then started again, ready awaited."""
        b = self.backend
        down = spec.duration or 0.0
        name = FAULT_RECORD_NAMES[spec.fault]
        if spec.fault == "stop":
            d = spec.duration if spec.duration is not None else self.default_stop
            await self._window(
                name,
                target,
                d,
                start=detail | {"stop_for_s": d},
                end={},
                begin=lambda: b.pause(target),
                finish=lambda: b.resume(target),
            )
            return
        self._record(time.time(), name, target, detail | ({"down_s": down} if down else {}))
        if spec.fault == "kill":
            await b.kill(target, restart=False)
        else:
            await b.terminate(target, restart=False)
        if down:
            await asyncio.sleep(down)
        ts = time.time()
        await b.start(target)
        self._record(ts, RESTART, target, {"after": spec.fault})

    async def _apiserver(self, spec: FaultSpec) -> None:
        down = spec.duration or 0.0
        target = "apiserver"
        self.say(f"{spec.fault} {target}" + (f" ({down:g}s)" if down else ""))
        detail: dict[str, Any] = {"pid": await self.backend.pid(target)}
        if spec.fault in ("kill", "term", "restart") and not down:
            # Back at once (ready awaited): one record, as `kse up`'s own restart makes it.
            self._record(time.time(), FAULT_RECORD_NAMES[spec.fault], target, detail)
            if spec.fault == "kill":
                await self.backend.kill(target, restart=True)
            else:
                await self.backend.terminate(target, restart=True)
            # Back and ready: the end of the outage (no_rotation_rpc_errors does not charge a
            # rotation with the errors an API server outage causes).
            self._record(time.time(), RESTART, target, {"after": spec.fault, "ready": True})
            return
        await self._down_and_up(spec, target, detail)

    async def _etcd(self, spec: FaultSpec, member: str) -> None:
        down = spec.duration or 0.0
        self.say(f"{spec.fault} {member}" + (f" ({down:g}s)" if down else ""))
        detail: dict[str, Any] = {
            "pid": await self.backend.pid(member),
            "members": len(await self.backend.etcd_members()),
        }
        await self._down_and_up(spec, member, detail)

    # ------------------------------------------------------------------ certificates

    def _stems(self, target: str) -> list[str]:
        from certs.layout import APISERVER, APISERVER_ETCD_CLIENT, ETCD_SERVER

        if target == "apiserver":
            return [APISERVER, APISERVER_ETCD_CLIENT]
        if target == "etcd":
            return [ETCD_SERVER]
        return [target]  # a replica's stem is its name (certs.layout.scheduler_stem); or "all"

    async def _rotate_leaf(self, spec: FaultSpec, target: str, detail: dict[str, Any] | None) -> None:
        from certs.rotation import RotationError, rotate

        window = spec.duration if spec.duration is not None else ROTATION_STEP_S
        stems = self._stems(target)
        pki = self.backend.pki_dir
        if detail is None:
            self.say(f"{spec.describe(planned_time=False)}: {', '.join(stems)}")
        start = (detail or {}) | {"phase": PHASE_START, "identities": stems, "window_s": window}
        async with self._pki:
            self._record(time.time(), ROTATE_CERTS, target, start)
            try:
                leaves = []
                for stem in stems:
                    leaves += await asyncio.to_thread(rotate, pki, stem)
            except RotationError as e:
                self._record(time.time(), ROTATE_CERTS, target, {"phase": PHASE_END, "error": str(e)})
                raise NemesisError(str(e)) from e
        await asyncio.sleep(window)
        self._record(
            time.time(),
            ROTATE_CERTS,
            target,
            {"phase": PHASE_END, "serials": {leaf.stem: f"{leaf.serial:x}" for leaf in leaves}}
            | ({"identity": detail["identity"]} if detail is not None else {}),
        )

    async def _rotate_ca(self, spec: FaultSpec) -> None:
        """A full CA rotation in the order of Kubernetes' "Manual Rotation of CA Certificates": the new
        CA trusted everywhere (add), every pair moved to it (switch), the old CA no longer trusted
        (remove), `duration` s apart so every process reloads in between (clients poll their files
        every second; the API server reads its trust bundle per handshake).

        etcd 3.5 reads `--trusted-ca-file` once, at start (its serving pair it re-reads per
        handshake): measured here, an etcd started before `add` refuses the API server's etcd
        client pair once `switch` moved it to the new CA (BAD_CERTIFICATE). So, as the Kubernetes
        procedure restarts the control-plane components after distributing the bundle, each etcd
        member is restarted (SIGTERM, started again, health awaited), one at a time so a
        multi-member cluster keeps its quorum, after `add`; and again after `remove`, so that it
        stops trusting the old CA.
        """
        from certs.rotation import RotationError, rotate_ca

        step = spec.duration if spec.duration is not None else ROTATION_STEP_S
        pki = self.backend.pki_dir
        members = await self.backend.etcd_members()
        self.say(
            f"{spec.describe(planned_time=False)}: add, switch, remove {step:g}s apart; "
            f"etcd restarts: {', '.join(members)}"
        )
        async with self._pki:
            self._record(time.time(), ROTATE_CA, spec.target, {"phase": PHASE_START, "step_s": step})
            try:
                for phase in ("add", "switch", "remove"):
                    ts = time.time()
                    result = await asyncio.to_thread(rotate_ca, pki, phase)
                    self._record(
                        ts,
                        ROTATE_CA,
                        spec.target,
                        {"part_of": ROTATE_CA, "step": phase, "actions": list(result.actions)},
                    )
                    if phase in ("add", "remove"):
                        await self._restart_etcd_members(members)
                    await asyncio.sleep(step)
            except (RotationError, BackendError) as e:
                self._record(time.time(), ROTATE_CA, spec.target, {"phase": PHASE_END, "error": str(e)})
                raise NemesisError(f"CA rotation: {e}") from e
        self._record(time.time(), ROTATE_CA, spec.target, {"phase": PHASE_END})

    async def _restart_etcd_members(self, members: list[str]) -> None:
        for m in members:
            ts = time.time()
            pid = await self.backend.pid(m)
            await self.backend.terminate(m, restart=False)
            await self.backend.start(m)
            self._record(ts, RESTART, m, {"part_of": ROTATE_CA, "pid": pid, "why": "reload the trusted CA"})

    async def _expire_cert(self, spec: FaultSpec, r: str, detail: dict[str, Any]) -> None:
        from cryptography import x509

        from certs.layout import CertPaths
        from certs.pki import leaf_ttl, load_ca, reissue, write_pair
        from certs.rotation import pki_lock, rotate

        pki = self.backend.pki_dir
        left = spec.duration or 0.0
        paths = CertPaths.in_dir(pki, r)

        def expire() -> timedelta:
            with pki_lock(pki):
                template = x509.load_pem_x509_certificate(paths.cert.read_bytes())
                ttl = leaf_ttl(template)
                if left > 0:
                    pair = reissue(load_ca(pki), template, ttl=timedelta(seconds=left))
                else:  # issued in the past, so that it expired EXPIRED_AGO ago
                    short = timedelta(minutes=10)
                    pair = reissue(
                        load_ca(pki), template, ttl=short, now=datetime.now(UTC) - EXPIRED_AGO - short
                    )
                write_pair(paths, pair)
                return ttl

        # The client notices the new files at its next poll (every second) and then swaps channels:
        # the failover analysis allows for that before it calls a leader that renewed "survived".
        effect = left + CLIENT_RELOAD_S
        window = detail | {"phase": PHASE_START, "client": r, "expires_in_s": left, "effect_within_s": effect}
        if spec.heal_after is not None:
            window["heal_after_s"] = spec.heal_after
        async with self._pki:
            self._record(time.time(), EXPIRE_CERTS, r, window)
            ttl = await asyncio.to_thread(expire)
        if spec.heal_after is None:
            return  # expired for the rest of the run: the window lasts to the end of the history
        await asyncio.sleep(spec.heal_after)
        async with self._pki:
            ts = time.time()
            await asyncio.to_thread(rotate, pki, r, ttl=ttl)
            self._record(
                ts, EXPIRE_CERTS, r, {"identity": detail["identity"], "client": r, "phase": PHASE_END}
            )

    # ------------------------------------------------------------------ clocks

    async def _clock_skew(self, spec: FaultSpec, r: str, detail: dict[str, Any]) -> None:
        offset = spec.offset or 0.0
        rate = spec.rate if spec.rate is not None else 1.0
        # The replica reads its clock file every SKEW_FILE_CHECK_S, and a renewal already waiting
        # wakes by the old rate (up to one retry period later) and may take up to its renew
        # deadline to land (a loaded machine): a leader that still renews after that has survived
        # the skew; one that does not (a clock so slow that its retry period outlasts the lease)
        # lost the lease to it. Without the renew deadline in the bound, that one late renewal
        # can land past a short run's 1.0 s bound on a loaded machine and read as "survived".
        effect = SKEW_FILE_CHECK_S + self.retry_period + self.renew_deadline
        start = detail | {"offset_s": offset, "rate": rate, "effect_within_s": effect}
        if spec.duration is None:  # skewed for the rest of the run: the window lasts to the end
            self._record(time.time(), CLOCK_SKEW, r, start | {"phase": PHASE_START})
            await self.backend.set_clock_skew(r, offset, rate)
            return
        await self._window(
            CLOCK_SKEW,
            r,
            spec.duration,
            start=start,
            end={"identity": detail["identity"]},
            begin=lambda: self.backend.set_clock_skew(r, offset, rate),
            finish=lambda: self.backend.set_clock_skew(r, 0.0, 1.0),
        )
