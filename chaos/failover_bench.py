"""`kse bench failover`: how long the scheduler is leaderless when its leader fails, and whether
anything unsafe got through meanwhile.

One run starts a `kse up` cluster (`harness.up.Cluster`: etcd, the API server with fencing on and an
audit log, 3 scheduler replicas electing a leader, nodesim, a steady workload with churn) under a
temp dir, then runs `trials` trials, each:

1. wait for a stable leader: every replica running and ready (`/readyz`), a live replica holding the
   Lease, and binds by that holder in the audit log; then a random delay in [0, retryPeriod) (from
   `--seed`) so faults land at every phase of the renew cycle;
2. inject the fault into the *current* leader (re-read from the Lease just before) and record a
   `FaultRecord` with its lease identity: `kill` SIGKILL; `term` SIGTERM (the leader hands over and
   releases the lease); `stop` SIGSTOP for leaseDuration + a margin (and at least until another
   replica holds the lease), then SIGCONT;
3. wait for a new holder and for its first binds (audit log);
4. let the faulted replica come back: the supervisor restarts a killed or terminated replica (short
   backoff); a continued one must exit (restarted) or, with `--on-lost-lease standby`, report
   itself not leading; then it must be ready again.

After the trials the workload is stopped, the pods and nodes are snapshot, the cluster is stopped,
and the `chaos.history.History` (the audit log, the faults, the snapshot and every pod seen created)
is judged by `chaos.checker`: `analyze_failover` times each trial (fault -> acquire, takeable ->
acquire, bind gap), and the invariants count stale writes accepted / rejected, double binds and
over-committed nodes. Timings come from the history only; the waits above just pace the trials.

    kse bench failover --trials 10 --fault kill --json
    python -m chaos.failover_bench --trials 3 --fault stop --lease-duration 2 --renew-deadline 1.5 \
        --retry-period 0.5 --nodes 5 --rate 5

`register(sub)` adds the `failover` subparser to `kse bench`; `main(argv)` runs it stand-alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import re
import signal
import ssl
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only the standard library and the (stdlib-only) report module here: `kse bench` imports this module
# to build its parser, and `kse --help` must stay fast. The cluster, the client and the checker are
# imported by the functions that run the benchmark.
from chaos.cluster_setup import fencing_args
from chaos.failover_report import (
    SAFETY_COUNTS,
    TIMINGS,
    evaluate_targets,
    format_compare,
    format_table,
    ratio,
    write_compare_report,
    write_report,
)
from kse.flags.argtypes import positive_int as _positive_int

if TYPE_CHECKING:
    from chaos.checker.failover import FailoverEvent
    from chaos.history import FaultRecord, History
    from harness.up import Cluster, ElectionPlan, Replica
    from kse.audit import AuditRecord
    from proto import kse_pb2 as pb

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = [
    "ELECTIONS",
    "FAULTS",
    "BenchError",
    "FailoverBenchConfig",
    "build_parser",
    "main",
    "register",
    "run",
    "run_compare",
]

# CLI name -> FaultRecord.fault (chaos.history's KILL, TERMINATE, STOP)
FAULTS: dict[str, str] = {"kill": "kill", "term": "terminate", "stop": "stop"}
ELECTIONS = ("watch", "poll")
ON_LOST_LEASE = ("exit", "standby")
POLL_S = 0.02  # pacing of the waits between steps (the timings come from the audit log, not these)


class BenchError(RuntimeError):
    """A trial could not go on (no leader, no takeover, a replica that did not come back)."""


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class FailoverBenchConfig:
    """One run's settings (the CLI's flags)."""

    fault: str = "kill"
    election: str = "watch"
    trials: int = 10
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    nodes: int = 20
    rate: float = 20.0
    seed: int = 0
    fencing: bool = True
    on_lost_lease: str = "exit"
    stop_margin: float | None = None  # `stop`: paused for leaseDuration + this (default retry + 1 s)
    keep: bool = False
    apiserver_args: tuple[str, ...] = ()  # extra flags, for experiments (e.g. --bookmark-interval)
    scheduler_args: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        out = []
        if self.fault not in FAULTS:
            out.append(f"fault must be one of {', '.join(FAULTS)}, got {self.fault!r}")
        if self.election not in ELECTIONS:
            out.append(f"election must be one of {', '.join(ELECTIONS)}, got {self.election!r}")
        if self.on_lost_lease not in ON_LOST_LEASE:
            out.append(f"on-lost-lease must be one of {', '.join(ON_LOST_LEASE)}, got {self.on_lost_lease!r}")
        if self.trials < 1:
            out.append(f"trials must be >= 1, got {self.trials}")
        if self.nodes < 1:
            out.append(f"nodes must be >= 1, got {self.nodes}")
        if self.rate <= 0:
            out.append(f"rate must be > 0, got {self.rate:g}")
        if self.lease_duration < 1:
            out.append(
                f"lease duration must be >= 1s (the Lease stores whole seconds), got {self.lease_duration:g}"
            )
        if self.stop_margin is not None and self.stop_margin < 0:
            out.append(f"stop margin must be >= 0, got {self.stop_margin:g}")
        out += self.election_plan().problems()
        return out

    def election_plan(self) -> ElectionPlan:
        from harness.up import ElectionPlan

        return ElectionPlan(
            strategy=self.election,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            on_lost_lease=self.on_lost_lease,
        )

    @property
    def stop_for(self) -> float:
        """How long `stop` keeps the leader paused (at least; and until another replica holds the lease)."""
        margin = self.retry_period + 1.0 if self.stop_margin is None else self.stop_margin
        return self.lease_duration + margin

    @property
    def delete_after(self) -> float:
        """Workload churn: each pod is deleted this long after it runs, so about half of the fleet's
        capacity (40 default pods a node: 4 CPU / 100m) is in use at the steady rate."""
        from chaos.cluster_setup import churn_delete_after

        return churn_delete_after(self.nodes, self.rate)

    @property
    def takeover_within(self) -> float:
        """The longest a takeover may take before the trial is declared stuck."""
        return self.lease_duration + 2.2 * self.retry_period * 3 + 15.0


# ---------------------------------------------------------------------------------------------- audit log


class AuditTail:
    """Follows the API server's audit log while the run goes on: accepted binds per fence term
    (holder, leaseTransitions). Used only to pace the trials (has the leader bound pods yet?)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.binds: Counter[tuple[str, int]] = Counter()
        self.by_holder: Counter[str] = Counter()

    def poll(self) -> None:
        from kse.audit import AuditRecord

        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            if b'"bind"' not in raw:
                continue
            try:
                rec = AuditRecord.from_json(raw.decode())
            except (ValueError, TypeError):
                continue
            if rec.verb == "bind" and rec.code == "OK" and rec.fence is not None:
                self.binds[(rec.fence.holder, rec.fence.transitions)] += 1
                self.by_holder[rec.fence.holder] += 1

    def count(self, holder: str, transitions: int | None = None) -> int:
        self.poll()
        if transitions is None:
            return self.by_holder[holder]
        return self.binds[(holder, transitions)]


# ---------------------------------------------------------------------------------------------- HTTP probes


async def _http_get(address: str, path: str, within: float = 2.0) -> tuple[int, str] | None:
    """GET on a replica's metrics/health server; None if it does not answer within `within` s."""
    host, _, port = address.rpartition(":")
    writer = None
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            raw = await reader.read()
    except (OSError, TimeoutError, ValueError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        code = int(head.split(b"\r\n", 1)[0].split()[1])
    except (IndexError, ValueError):
        return None
    return code, body.decode(errors="replace")


_MASTER = re.compile(r'^leader_election_master_status\{[^}]*name="kube-scheduler"[^}]*\}\s+(\S+)', re.M)


async def _master_status(r: Replica) -> float | None:
    got = await _http_get(r.metrics_address, "/metrics")
    if got is None or got[0] != 200:
        return None
    m = _MASTER.search(got[1])
    return float(m.group(1)) if m else None


def _renewed_for(lease: pb.Lease) -> float:
    """renewTime - acquireTime of the Lease (both the holder's clock); 0 if either is unreadable."""
    from kse.objects.timeutil import to_epoch

    try:
        return to_epoch(lease.spec.renew_time) - to_epoch(lease.spec.acquire_time)
    except ValueError:
        return 0.0


# ---------------------------------------------------------------------------------------------- host probes
# Diagnostics for a slow timing: was a process starved of CPU, was etcd's disk slow?


def _schedstat(pid: int) -> tuple[float, float, int] | None:
    """(seconds on a CPU, seconds runnable but waiting for one, timeslices) summed over the
    process's threads (/proc/<pid>/task/*/schedstat); None if it is gone."""
    run = wait = 0.0
    slices = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                a, b, c = f.read().split()[:3]
        except (OSError, ValueError):
            continue  # a thread that just exited
        run += int(a) / 1e9
        wait += int(b) / 1e9
        slices += int(c)
    return run, wait, slices


class RunQueueMeter:
    """How long our processes waited for a CPU while runnable (the kernel's schedstat), per process
    name, over the samples taken: `sample()` at the start, before each fault and after each trial
    (so a replica's pid is seen before it is killed), and at the end. A pid first seen after the
    start counts from its birth."""

    def __init__(self) -> None:
        self._first: dict[int, tuple[float, float, int]] = {}
        self._last: dict[int, tuple[float, float, int]] = {}
        self._names: dict[int, str] = {}
        self._t0 = time.monotonic()
        self._initial = True

    def sample(self, procs: dict[int, str]) -> None:
        for pid, name in procs.items():
            st = _schedstat(pid)
            if st is None:
                continue
            self._names[pid] = name
            self._first.setdefault(pid, st if self._initial else (0.0, 0.0, 0))
            self._last[pid] = st
        self._initial = False

    def summary(self) -> dict[str, dict[str, float]]:
        """Per name: `wait_pct` (run-queue wait as % of the wall time) and `wait_per_slice_ms` (the
        mean delay between becoming runnable and running: what a timer or a message waits extra)."""
        wall = max(time.monotonic() - self._t0, 1e-9)
        acc: dict[str, list[float]] = {}
        for pid, last in self._last.items():
            first = self._first[pid]
            a = acc.setdefault(self._names[pid], [0.0, 0.0])
            a[0] += max(0.0, last[1] - first[1])
            a[1] += max(0, last[2] - first[2])
        return {
            name: {
                "wait_pct": round(100.0 * wait / wall, 1),
                "wait_per_slice_ms": round(1000.0 * wait / slices, 3) if slices else 0.0,
            }
            for name, (wait, slices) in sorted(acc.items())
        }


def _cluster_pids(cluster: Cluster) -> dict[int, str]:
    out: dict[int, str] = {os.getpid(): "bench"}
    for name, proc in cluster.processes():
        if proc.pid is not None and proc.running:
            out[proc.pid] = name
    return out


_BUCKET = re.compile(r'^(etcd_disk_wal_fsync_duration_seconds|etcd_disk_backend_commit_duration_seconds)'
                     r'_bucket\{le="([^"]+)"\}\s+(\S+)', re.M)  # fmt: skip


async def _etcd_histograms(cluster: Cluster) -> dict[str, dict[float, float]] | None:
    """etcd's WAL fsync and backend commit latency histograms (cumulative buckets) from its
    /metrics, over the same mTLS the API server uses; None if unreachable."""
    from harness.procs.etcd import EtcdServerTLS

    members = cluster.etcd_members
    if not members or cluster.pki is None:
        return None
    url = members[0].endpoint
    scheme, _, hostport = url.partition("://")
    host, _, port = hostport.rpartition(":")
    ctx = None
    if scheme == "https":
        tls = EtcdServerTLS.from_pki_dir(cluster.pki.dir)
        ctx = ssl.create_default_context(cafile=str(tls.ca_file))
        if tls.client_cert_file is not None and tls.client_key_file is not None:
            ctx.load_cert_chain(str(tls.client_cert_file), str(tls.client_key_file))
    writer = None
    try:
        async with asyncio.timeout(5.0):
            reader, writer = await asyncio.open_connection(host, int(port), ssl=ctx)
            # HTTP/1.0: the body comes whole, not in chunks.
            writer.write(f"GET /metrics HTTP/1.0\r\nHost: {hostport}\r\n\r\n".encode())
            await writer.drain()
            raw = (await reader.read()).decode(errors="replace")
    except (OSError, TimeoutError, ValueError, ssl.SSLError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    out: dict[str, dict[float, float]] = {}
    for name, le, value in _BUCKET.findall(raw):
        try:
            bucket, count = float(le), float(value)
        except ValueError:
            continue
        out.setdefault(name.removeprefix("etcd_disk_").removesuffix("_duration_seconds"), {})[bucket] = count
    return out or None


def _histogram_summary(before: dict[float, float] | None, after: dict[float, float]) -> dict[str, Any]:
    """Observations between two scrapes: count, and upper bounds (bucket edges, ms) of p50 / p99 /
    the slowest one."""
    diff = sorted((le, after[le] - (before or {}).get(le, 0.0)) for le in after)
    total = diff[-1][1] if diff else 0.0

    def bound(q: float) -> float | None:
        for le, cum in diff:
            if total and cum >= q * total:
                return None if le == float("inf") else round(le * 1000.0, 3)
        return None

    return {"count": int(total), "p50_le_ms": bound(0.5), "p99_le_ms": bound(0.99), "max_le_ms": bound(1.0)}


# ---------------------------------------------------------------------------------------------- one run


@dataclass
class Trial:
    """What the harness did in one trial (the timings come later, from the history)."""

    index: int
    target: str
    identity: str
    transitions: int
    fault_ts: float
    new_identity: str = ""
    resumed_ts: float | None = None  # `stop`: SIGCONT
    back: str = ""  # how the faulted replica came back: restarted | standby
    wall_s: float = 0.0


class _Run:
    def __init__(self, cfg: FailoverBenchConfig, cluster: Cluster, run_dir: Path, say: Callable[[str], None]):
        from chaos.history import FAULTS_FILE, JsonlWriter

        self.cfg = cfg
        self.cluster = cluster
        self.run_dir = run_dir
        self.say = say
        self.rng = random.Random(cfg.seed)
        assert cluster.audit_logs, "no audit log"
        self.tail = AuditTail(cluster.audit_logs[0])
        self.faults = JsonlWriter(run_dir / FAULTS_FILE)
        self.trials: list[Trial] = []
        self.created: dict[str, pb.Pod] = {}
        self._ready_pids: set[int] = set()
        self.run_queue = RunQueueMeter()

    # -- waits

    async def _until(self, what: str, within: float, probe: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        deadline = time.monotonic() + within
        while True:
            value = await probe()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise BenchError(f"timed out after {within:g}s waiting for {what}; {self._describe()}")
            await asyncio.sleep(POLL_S)

    def _describe(self) -> str:
        states = ", ".join(f"{r.name} {r.state} {r.identity}" for r in self.cluster.replicas)
        return f"replicas: {states}"

    async def _ready(self, r: Replica) -> bool:
        """Running, not paused, and its /readyz answers 200 (informers synced): a warm candidate."""
        pid = r.pid
        if pid is None or not r.running or r.paused:
            return False
        if pid in self._ready_pids:
            return True
        got = await _http_get(r.metrics_address, "/readyz")
        if got is not None and got[0] == 200:
            self._ready_pids.add(pid)
            return True
        return False

    async def stable_leader(self, within: float) -> tuple[Replica, pb.Lease]:
        """Every replica ready, a live one holding the Lease, binds in the audit log under its
        current term, and at least one renewal on its regular cycle (renewTime >= acquireTime +
        retryPeriod), so the random delay that follows puts the fault anywhere in a renew cycle."""
        from kse.client.errors import ApiError

        found: list[tuple[Replica, pb.Lease]] = []

        async def probe() -> bool:
            for r in self.cluster.replicas:
                if not await self._ready(r):
                    return False
            try:
                lease = await self.cluster.lease()
            except ApiError:
                return False
            if lease is None or not lease.spec.holder_identity:
                return False
            holder = lease.spec.holder_identity
            leader = next((r for r in self.cluster.replicas if r.running and r.identity == holder), None)
            if leader is None or self.tail.count(holder, lease.spec.lease_transitions) < 1:
                return False
            if _renewed_for(lease) < 0.9 * self.cfg.retry_period:
                return False  # not yet renewing on its regular cycle (only the acquisition's writes)
            found[:] = [(leader, lease)]
            return True

        await self._until("a stable leader that binds pods", within, probe)
        return found[0]

    # -- one trial

    async def trial(self, index: int) -> Trial:
        from chaos.history import PHASE_END, PHASE_START, FaultRecord

        cfg, cluster = self.cfg, self.cluster
        started = time.monotonic()
        while True:
            leader, _ = await self.stable_leader(60.0 + cfg.lease_duration)
            await asyncio.sleep(self.rng.uniform(0.0, cfg.retry_period))
            lease = await cluster.lease()  # the current leader, just before the fault
            if lease is not None and lease.spec.holder_identity == leader.identity and leader.running:
                break
        identity, transitions = leader.identity, lease.spec.lease_transitions
        restarts = leader.restarts
        detail: dict[str, Any] = {
            "identity": identity,
            "lease_transitions": transitions,
            "pid": leader.pid,
            "trial": index,
            "election": cfg.election,
        }
        name = leader.name
        term_task: asyncio.Task[int | None] | None = None
        self.run_queue.sample(_cluster_pids(cluster))
        if cfg.fault == "kill":
            ts = time.time()
            await leader.kill()
            self.faults.append(FaultRecord(ts, FAULTS["kill"], name, detail))
        elif cfg.fault == "term":
            ts = time.time()
            term_task = asyncio.create_task(leader.terminate(), name=f"terminate-{name}")
            await asyncio.sleep(0)  # the task's first step sends SIGTERM; it then waits for the exit
            self.faults.append(FaultRecord(ts, FAULTS["term"], name, detail))
        else:
            ts = time.time()
            await leader.stop()
            self.faults.append(FaultRecord(ts, FAULTS["stop"], name, detail | {"phase": PHASE_START}))
        t = Trial(index, name, identity, transitions, ts)
        self.trials.append(t)
        self.say(f"trial {index}/{cfg.trials}: {cfg.fault} {name} ({identity}, term #{transitions})")

        # A new holder, and its first binds.
        new = await cluster.wait_for_leader(cfg.takeover_within, other_than=identity)
        t.new_identity = new.identity
        if term_task is not None:
            await term_task
        elif cfg.fault == "stop":
            wait = ts + cfg.stop_for - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            t.resumed_ts = time.time()
            await leader.cont()
            self.faults.append(
                FaultRecord(t.resumed_ts, FAULTS["stop"], name, {"identity": identity, "phase": PHASE_END})
            )
        new_lease = await cluster.lease()
        new_term = new_lease.spec.lease_transitions if new_lease is not None else None

        async def new_binds() -> bool:
            return self.tail.count(new.identity, new_term) >= 1

        await self._until(f"binds by the new leader {new.identity}", 30.0 + cfg.lease_duration, new_binds)

        # The faulted replica back: restarted by the supervisor, or (stop, standby) not leading.
        async def back() -> str:
            if leader.restarts > restarts and leader.running:
                return "restarted"
            if (
                cfg.fault == "stop"
                and cfg.on_lost_lease == "standby"
                and leader.running
                and leader.identity == identity
                and await _master_status(leader) == 0.0
            ):
                return "standby"
            return ""

        t.back = await self._until(f"{name} to come back after the {cfg.fault}", 90.0, back)
        if t.back == "restarted":
            try:
                await leader.process.wait_ready(60.0)
            except Exception as e:  # LaunchError with the log tail
                raise BenchError(f"{name} did not come back ready: {e}") from e
        t.wall_s = round(time.monotonic() - started, 3)
        self.run_queue.sample(_cluster_pids(cluster))
        return t

    # -- the end

    def watch_created(self) -> None:
        """Keep every pod the status informer delivers as created (its spec, for the time-resolved
        over-commit check of pods deleted before the end)."""
        status = self.cluster.status
        if status is None:
            return

        def added(pod: pb.Pod) -> None:
            key = pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
            self.created.setdefault(key, pod)

        status.pods.add_event_handler(added, None, None)

    async def final_state(self) -> tuple[list[pb.Pod], list[pb.Node]]:
        """Stop the workload, let the leader bind what is pending (a few seconds at most), then list
        pods and nodes."""
        from chaos.cluster_setup import final_state

        cluster = self.cluster
        assert cluster.clientset is not None
        workload = cluster.workload

        async def stop_workload() -> None:
            if workload is not None:
                await workload.terminate(cluster.plan.grace)

        pods, nodes, _ = await final_state(cluster.clientset, stop_workload=stop_workload, settle_s=5.0)
        return pods, nodes


async def run(
    cfg: FailoverBenchConfig,
    *,
    report_dir: Path | None = None,
    say: Callable[[str], None] = progress,
) -> dict[str, Any]:
    """One run (a cluster, `cfg.trials` trials); the result dict (the `--json` object)."""
    result, _ = await _run_with_history(cfg, report_dir=report_dir, say=say)
    return result


async def _run_with_history(
    cfg: FailoverBenchConfig,
    *,
    report_dir: Path | None = None,
    say: Callable[[str], None] = progress,
    write_report_now: bool = True,
) -> tuple[dict[str, Any], History | None]:
    from chaos.history import FAULTS_FILE, SNAPSHOT_FILE, History, write_snapshot
    from harness.bench.common import CpuMeter, work_dir
    from harness.up import BackoffPolicy, Cluster, ClusterPlan, UpError
    from kse.audit import read_audit_log
    from kse.client.errors import ApiError

    problems = cfg.problems()
    if problems:
        raise ValueError("; ".join(problems))
    began = time.monotonic()
    with work_dir(f"kse-failover-{cfg.fault}-{cfg.election}-", cfg.keep) as tmp:
        plan = ClusterPlan(
            data_dir=tmp / "kse",
            replicas=3,
            nodes=cfg.nodes,
            rate=cfg.rate,
            election=cfg.election_plan(),
            # Restarts within a second or two: the trials measure failover, not crash-loop backoff.
            restart_policy=BackoffPolicy(initial=0.5, cap=2.0, reset_after=max(5.0, 2 * cfg.lease_duration)),
            grace=10.0,
            log_level="info",
            apiserver_args=(*fencing_args(cfg.fencing), *cfg.apiserver_args),
            scheduler_args=cfg.scheduler_args,
            nodesim_args=("--seed", str(cfg.seed)),
            workload_args=("--delete-after", f"{cfg.delete_after:g}s"),
        )
        cluster = Cluster(plan, progress=lambda m: say(f"cluster: {m}"))
        errors: list[str] = []
        notes: list[str] = []
        pods: list[pb.Pod] | None = None
        nodes: list[pb.Node] | None = None
        cpu: dict[str, float] = {}
        host: dict[str, Any] = {}
        say(
            f"failover: {cfg.trials} trials of {cfg.fault}, election {cfg.election}, lease "
            f"{cfg.lease_duration:g}s/{cfg.renew_deadline:g}s/{cfg.retry_period:g}s, {cfg.nodes} nodes, "
            f"{cfg.rate:g} pods/s; data under {tmp}"
        )
        async with cluster:
            if not cluster.leader_election:
                raise BenchError("`kse scheduler` offers no leader election (kse up runs one replica)")
            if not cluster.audit_logs:
                raise BenchError("`kse apiserver` has no --audit-log: the benchmark needs the audit log")
            audit_dir = cluster.audit_logs[0].parent
            r = _Run(cfg, cluster, audit_dir, say)
            r.watch_created()
            meter = CpuMeter(
                {
                    "apiserver": cluster.apiserver.pid if cluster.apiserver else None,
                    **{m.name: m.managed.pid for m in cluster.etcd_members},
                    "nodesim": cluster.nodesim.pid if cluster.nodesim else None,
                    "workload": cluster.workload.pid if cluster.workload else None,
                }
            )
            sched_cpu0, trials_began = _sched_cpu(cluster), time.monotonic()
            r.run_queue.sample(_cluster_pids(cluster))
            etcd0 = await _probe(_etcd_histograms(cluster), notes, "etcd metrics")
            try:
                for i in range(1, cfg.trials + 1):
                    t = await r.trial(i)
                    say(
                        f"trial {i}/{cfg.trials}: {t.identity} -> {t.new_identity}; {t.target} {t.back} "
                        f"({t.wall_s:.1f}s)"
                    )
            except (BenchError, UpError, ApiError, TimeoutError) as e:
                errors.append(f"trial {len(r.trials)}: {e}")
                say(f"ERROR: {errors[-1]}")
            cpu = meter.percent()
            wall = max(time.monotonic() - trials_began, 1e-9)
            cpu["schedulers"] = round(100.0 * (_sched_cpu(cluster) - sched_cpu0) / wall, 1)
            r.run_queue.sample(_cluster_pids(cluster))
            host["run_queue"] = r.run_queue.summary()
            etcd1 = await _probe(_etcd_histograms(cluster), notes, "etcd metrics")
            if etcd1 is not None:
                host["etcd"] = {k: _histogram_summary((etcd0 or {}).get(k), v) for k, v in etcd1.items()}
            try:
                pods, nodes = await r.final_state()
            except ApiError as e:
                errors.append(f"final snapshot: {e}")
            r.faults.close()
        if cluster.leftovers:
            notes.append(f"processes left after shutdown (killed): {', '.join(cluster.leftovers)}")
        if pods is not None and nodes is not None:
            write_snapshot(audit_dir / SNAPSHOT_FILE, pods, nodes, created=r.created.values())
        audit = sorted((rec for p in cluster.audit_logs for rec in read_audit_log(p)), key=lambda x: x.ts)
        history = History(
            audit=audit,
            faults=list(_read_faults(audit_dir / FAULTS_FILE)),
            pods=pods,
            nodes=nodes,
            created=list(r.created.values()),
        )
        result = analyze(cfg, history, r.trials, errors=errors, notes=notes, cpu=cpu, host=host)
        result["details"]["wall_s"] = round(time.monotonic() - began, 1)
        if cfg.keep:
            result["details"]["history_dir"] = str(audit_dir)
        if report_dir is not None and write_report_now:
            paths = write_report(report_dir, result, history)
            say(f"report: {', '.join(str(p) for p in paths.values())}")
        return result, history


async def _probe(
    coro: Coroutine[Any, Any, dict[str, dict[float, float]] | None], notes: list[str], what: str
) -> dict[str, dict[float, float]] | None:
    """A diagnostic probe: its failure is a note, never the run's."""
    try:
        return await coro
    except Exception as e:
        notes.append(f"{what} unavailable: {type(e).__name__}: {e}")
        return None


def _sched_cpu(cluster: Cluster) -> float:
    """CPU seconds of the scheduler replicas' current processes (restarts lose the dead ones' share)."""
    from harness.bench.common import process_cpu_seconds

    total = 0.0
    for r in cluster.replicas:
        if r.pid is not None:
            total += process_cpu_seconds(r.pid) or 0.0
    return total


def _read_faults(path: Path) -> list[FaultRecord]:
    from chaos.history import FaultRecord, read_jsonl

    return list(read_jsonl(path, FaultRecord.from_json)) if path.exists() else []


# ---------------------------------------------------------------------------------------------- analysis


def _pct(values: Sequence[float | None]) -> dict[str, float | None]:
    from chaos.checker.failover import summarize

    s = summarize(values)
    if s is None:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    return {k: round(v, 3) for k, v in s.items()}


def analyze(
    cfg: FailoverBenchConfig,
    history: History,
    trials: Sequence[Trial],
    *,
    errors: Sequence[str] = (),
    notes: Sequence[str] = (),
    cpu: dict[str, float] | None = None,
    host: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The result object: timings per trial and their percentiles, safety counts, targets.

    Besides the checker's timings, each failover's takeable -> acquire is split at the acquiring
    write's renewTime, which the winning standby stamped (its wall clock, the same machine's) when
    it started the attempt: `acquire_attempt_ms` (takeable -> the attempt: the standby's reaction,
    watch delivery and timer included) and `acquire_write_ms` (the attempt -> the write committed:
    the API server and etcd). `lease_write_ms` is that stamp -> commit latency over every Lease
    write of the run: the write path's health."""
    from chaos.checker.failover import analyze_failover
    from chaos.checker.invariants import no_overcommit, no_stale_writes, pods_bound_once
    from chaos.history import SCHEDULER_LEASE

    fo = analyze_failover(history, lease=SCHEDULER_LEASE, lease_duration_s=cfg.lease_duration)
    stale = no_stale_writes(history)
    bound = pods_bound_once(history, allow_pending=True)
    over = no_overcommit(history)

    # Safety events, timestamped, to attribute them to trials (a trial runs from its fault to the next).
    rejected_ts = [
        r.ts
        for r in history.audit
        if r.resource != "leases" and r.fence is not None and r.code == "FAILED_PRECONDITION"
    ]
    stale_ts = [v["ts"] for v in stale.violations if v["kind"] == "stale_write"]
    doubles = [v for v in bound.violations if v["kind"] == "double_bind"]
    double_ts = [max(b["ts"] for b in v["binds"]) for v in doubles]
    over_at = [v for v in over.violations if v["kind"] == "overcommit_at"]
    overcommitted = {v["node"] for v in over.violations if v["kind"] in ("overcommit", "overcommit_at")}

    events = {round(e.fault_ts, 6): e for e in fo.events}
    skipped = {round(s["fault_ts"], 6): s for s in fo.skipped}
    per_trial: list[dict[str, Any]] = []
    starts = [t.fault_ts for t in trials]
    for n, t in enumerate(trials):
        lo = t.fault_ts if n else float("-inf")
        hi = starts[n + 1] if n + 1 < len(starts) else float("inf")

        def within(ts: float, lo: float = lo, hi: float = hi) -> bool:
            return lo <= ts < hi

        e = events.get(round(t.fault_ts, 6))
        entry: dict[str, Any] = {
            "trial": t.index,
            "target": t.target,
            "old_identity": t.identity,
            "old_transitions": t.transitions,
            "new_identity": e.new_holder if e is not None else (t.new_identity or None),
            "fault_ts": round(t.fault_ts, 6),
            "outcome": e.outcome if e is not None else "not_timed",
            "takeable_by": e.takeable_by if e is not None else None,
            "fault_to_acquire_ms": e.fault_to_acquire_ms if e is not None else None,
            "expiry_to_acquire_ms": e.expiry_to_acquire_ms if e is not None else None,
            "gap_ms": e.gap_ms if e is not None else None,
            "stale_writes_accepted": sum(1 for ts in stale_ts if within(ts)),
            "stale_writes_rejected": sum(1 for ts in rejected_ts if within(ts)),
            "double_binds": sum(1 for ts in double_ts if within(ts)),
            "overcommitted_nodes": len({v["node"] for v in over_at if within(v["ts"])}),
            "came_back": t.back or None,
            "wall_s": t.wall_s,
        }
        split = _acquire_split(history, e) if e is not None else None
        entry["acquire_attempt_ms"], entry["acquire_write_ms"] = split or (None, None)
        # The new leader's start: its acquisition -> its first accepted bind (cache catch-up to the
        # acquisition's revision, then the first scheduling cycle).
        entry["acquire_to_first_bind_ms"] = (
            round((e.first_new_bind_ts - e.acquire_ts) * 1000.0, 3)
            if e is not None and e.first_new_bind_ts is not None and e.acquire_ts is not None
            else None
        )
        if e is None:
            s = skipped.get(round(t.fault_ts, 6))
            entry["why_not_timed"] = s["reason"] if s else "no failover event for this fault"
        if t.resumed_ts is not None:
            entry["stopped_s"] = round(t.resumed_ts - t.fault_ts, 3)
        per_trial.append(entry)

    failovers = [p for p in per_trial if p["outcome"] == "failover"]
    result: dict[str, Any] = {
        "fault": cfg.fault,
        "election": cfg.election,
        "trials": len(trials),
        "lease_duration_s": cfg.lease_duration,
        "renew_deadline_s": cfg.renew_deadline,
        "retry_period_s": cfg.retry_period,
    }
    for m in TIMINGS:
        result[m] = _pct([p[m] for p in failovers])
    result["stale_writes_accepted"] = int(stale.counts.get("stale_writes_accepted", 0))
    result["stale_writes_rejected"] = int(stale.counts.get("stale_writes_rejected", 0))
    result["double_binds"] = len(doubles)
    result["overcommitted_nodes"] = len(overcommitted)
    assert all(isinstance(result[k], int) for k in SAFETY_COUNTS)
    result["per_trial"] = per_trial
    outcomes = Counter(p["outcome"] for p in per_trial)
    takeable_by = Counter(p["takeable_by"] for p in failovers if p["takeable_by"])
    result["details"] = {
        "trials_requested": cfg.trials,
        "failovers": len(failovers),
        "outcomes": dict(outcomes),
        "takeable_by": dict(takeable_by),
        "timed": {m: sum(1 for p in failovers if p[m] is not None) for m in TIMINGS},
        "nodes": cfg.nodes,
        "rate": cfg.rate,
        "seed": cfg.seed,
        "fencing": cfg.fencing,
        "on_lost_lease": cfg.on_lost_lease,
        "stop_s": cfg.stop_for if cfg.fault == "stop" else None,
        "workload_delete_after_s": cfg.delete_after,
        "apiserver_args": list(cfg.apiserver_args),
        "scheduler_args": list(cfg.scheduler_args),
        "unfenced_scheduler_writes": int(stale.counts.get("unfenced_writes", 0)),
        "pods": {k: v for k, v in bound.counts.items()},
        "binds": sum(1 for r in history.audit if r.verb == "bind" and r.code == "OK"),
        "lease_terms": fo.terms,
        "cpu_percent": cpu or {},
        "diagnostics": {
            "acquire_attempt_ms": _pct([p["acquire_attempt_ms"] for p in failovers]),
            "acquire_write_ms": _pct([p["acquire_write_ms"] for p in failovers]),
            "acquire_to_first_bind_ms": _pct([p["acquire_to_first_bind_ms"] for p in failovers]),
            "lease_write_ms": _pct(_lease_write_latencies(history)),
            **(host or {}),
        },
        "errors": list(errors),
        "notes": list(notes),
    }
    checks = evaluate_targets(result)
    result["targets"] = {"passed": all(c["passed"] for c in checks) and not errors, "checks": checks}
    return result


def _stamp(r: AuditRecord) -> float | None:
    from kse.objects.timeutil import to_epoch

    try:
        return to_epoch(r.lease_renew_time) if r.lease_renew_time else None
    except ValueError:
        return None


def _acquire_split(history: History, e: FailoverEvent) -> tuple[float, float] | None:
    """(takeable -> attempt stamped, stamped -> committed) in ms for a failover event."""
    if e.new_holder is None or e.takeable_ts is None or e.acquire_ts is None:
        return None
    for r in history.audit:
        if (
            r.resource == "leases"
            and r.code == "OK"
            and r.lease_holder == e.new_holder
            and r.lease_transitions == e.new_transitions
            and r.ts == e.acquire_ts
        ):
            stamp = _stamp(r)
            if stamp is None:
                return None
            return round((stamp - e.takeable_ts) * 1000.0, 3), round((e.acquire_ts - stamp) * 1000.0, 3)
    return None


def _lease_write_latencies(history: History) -> list[float]:
    """Stamp (renewTime) -> commit (audit ts) of every accepted write of the scheduler Lease, ms."""
    from chaos.history import SCHEDULER_LEASE

    ns, _, name = SCHEDULER_LEASE.partition("/")
    out = []
    for r in history.audit:
        if r.resource == "leases" and r.namespace == ns and r.name == name and r.code == "OK":
            stamp = _stamp(r)
            if stamp is not None:
                out.append((r.ts - stamp) * 1000.0)
    return out


# ---------------------------------------------------------------------------------------------- compare


async def run_compare(
    cfg: FailoverBenchConfig,
    *,
    report_dir: Path | None = None,
    say: Callable[[str], None] = progress,
) -> dict[str, Any]:
    """`poll` then `watch`, same settings, one cluster each; both results and poll/watch ratios."""
    results: dict[str, dict[str, Any]] = {}
    histories: dict[str, History | None] = {}
    for election in ("poll", "watch"):
        say(f"compare: {election}")
        results[election], histories[election] = await _run_with_history(
            replace(cfg, election=election), say=say, write_report_now=False
        )
    ratios = ratio(results["poll"], results["watch"])
    out = {
        "compare": ["poll", "watch"],
        "poll": results["poll"],
        "watch": results["watch"],
        "ratio_poll_over_watch": ratios,
    }
    if report_dir is not None:
        paths = write_compare_report(report_dir, results["poll"], results["watch"], ratios, histories)
        say(f"report: {', '.join(str(p) for p in paths.values())}")
    return out


# ---------------------------------------------------------------------------------------------- CLI


def _positive_float(text: str) -> float:
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = FailoverBenchConfig()
    p.add_argument(
        "--trials",
        type=_positive_int,
        default=d.trials,
        metavar="N",
        help=f"faults injected, one per trial (default {d.trials})",
    )
    p.add_argument(
        "--fault",
        choices=tuple(FAULTS),
        default=d.fault,
        help="kill: SIGKILL the leader; term: SIGTERM (it releases the lease); stop: SIGSTOP it "
        "for leaseDuration + a margin, then SIGCONT (default kill)",
    )
    p.add_argument(
        "--election",
        choices=ELECTIONS,
        default=d.election,
        help="standbys watch the Lease (kse) or poll it (client-go) (default watch)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="run poll and watch one after the other with the same settings and show both "
        "with their ratio (poll/watch); --election is ignored",
    )
    p.add_argument(
        "--lease-duration",
        type=_positive_float,
        default=d.lease_duration,
        metavar="S",
        help=f"--leader-elect-lease-duration (default {d.lease_duration:g}, as upstream)",
    )
    p.add_argument(
        "--renew-deadline",
        type=_positive_float,
        default=d.renew_deadline,
        metavar="S",
        help=f"--leader-elect-renew-deadline (default {d.renew_deadline:g})",
    )
    p.add_argument(
        "--retry-period",
        type=_positive_float,
        default=d.retry_period,
        metavar="S",
        help=f"--leader-elect-retry-period (default {d.retry_period:g})",
    )
    p.add_argument(
        "--on-lost-lease",
        choices=ON_LOST_LEASE,
        default=d.on_lost_lease,
        help="what a deposed leader does: exit (restarted by the supervisor) or go back to "
        "standby (default exit)",
    )
    p.add_argument(
        "--stop-margin",
        type=_non_negative_float,
        default=None,
        metavar="S",
        help="stop: pause for leaseDuration + this (default retryPeriod + 1)",
    )
    p.add_argument(
        "--nodes",
        type=_positive_int,
        default=d.nodes,
        metavar="N",
        help=f"simulated nodes (default {d.nodes})",
    )
    p.add_argument(
        "--rate",
        type=_positive_float,
        default=d.rate,
        metavar="W",
        help=f"pods created per second by the workload (default {d.rate:g})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=d.seed,
        help="seed of the fault timing (a random delay in [0, retryPeriod) before each fault) "
        "and of nodesim (default 0)",
    )
    p.add_argument(
        "--fencing",
        choices=("on", "off"),
        default="on",
        help="the API server's fencing; off shows what it prevents (safety targets then do "
        "not apply) (default on)",
    )
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="write report.md and timeline.png (with --compare: timeline-poll.png and "
        "timeline-watch.png) into DIR",
    )
    p.add_argument(
        "--apiserver-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra flag for `kse apiserver`, for experiments (repeatable; e.g. "
        "--apiserver-arg=--bookmark-interval=0.1)",
    )
    p.add_argument(
        "--scheduler-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra flag for every `kse scheduler` replica (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of tables")
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the temp dir (cluster data, logs; the history under kse/audit/)",
    )
    p.set_defaults(func=_cli)


def register(sub: SubParsers) -> None:
    """Add `failover` to `kse bench`'s subparsers."""
    p = sub.add_parser(
        "failover",
        help="leader failover: time to a new leader and to the next bind, and safety, per fault",
        description=(__doc__ or "").split("\n\n", 1)[0],
    )
    add_arguments(p)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse bench failover", description=(__doc__ or "").split("\n\n", 1)[0])
    add_arguments(p)
    return p


def _config(args: argparse.Namespace) -> FailoverBenchConfig:
    return FailoverBenchConfig(
        fault=args.fault,
        election=args.election,
        trials=args.trials,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        nodes=args.nodes,
        rate=args.rate,
        seed=args.seed,
        fencing=args.fencing == "on",
        on_lost_lease=args.on_lost_lease,
        stop_margin=args.stop_margin,
        keep=args.keep,
        apiserver_args=tuple(args.apiserver_arg),
        scheduler_args=tuple(args.scheduler_arg),
    )


def _cli(args: argparse.Namespace) -> int:
    from harness.up import UpError

    # The cluster's progress lines already say when a replica exited and was restarted.
    logging.getLogger("harness.up.supervisor").setLevel(logging.ERROR)
    try:
        cfg = _config(args)
        problems = cfg.problems()
        if problems:
            raise ValueError("; ".join(problems))
    except ValueError as e:
        print(f"kse bench failover: error: {e}", file=sys.stderr)
        return 2

    async def bench() -> dict[str, Any]:
        task = asyncio.current_task()
        assert task is not None
        # SIGTERM cancels the run as Ctrl-C does, so the cluster is still stopped in order.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        if args.compare:
            return await run_compare(cfg, report_dir=args.report)
        return await run(cfg, report_dir=args.report)

    try:
        result = asyncio.run(bench())
    except KeyboardInterrupt:
        print("kse bench failover: interrupted", file=sys.stderr)
        return 130
    except asyncio.CancelledError:
        print("kse bench failover: terminated", file=sys.stderr)
        return 143
    except (BenchError, UpError, ValueError, OSError) as e:
        print(f"kse bench failover: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    elif args.compare:
        print(format_compare(result["poll"], result["watch"], result["ratio_poll_over_watch"]))
    else:
        print(format_table(result))
    sys.stdout.flush()
    runs = [result["poll"], result["watch"]] if args.compare else [result]
    return 1 if any(r["details"]["errors"] for r in runs) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """`kse bench failover` stand-alone: `argv` are its flags."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
