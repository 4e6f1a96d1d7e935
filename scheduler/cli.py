"""`kse scheduler`: run one kube-scheduler replica until SIGTERM / SIGINT.

Flags follow kube-scheduler's (``cmd/kube-scheduler/app/options``) where kse has the concept:
``--config``, ``--kube-api-qps``, ``--kube-api-burst``, ``--leader-elect`` and the
``--leader-elect-*`` flags; the connection to the API server is a kse connection file
(``--connection-file``, alias ``--kubeconfig``) or its parts (``--server --ca --cert --key``). As
upstream (``ApplyLeaderElectionTo``), an explicitly given ``--kube-api-qps`` / ``--kube-api-burst`` /
``--leader-elect*`` flag wins over the configuration file's clientConnection / leaderElection,
which wins over the defaults (50, 100; leader election on, lease ``kube-system/kube-scheduler``,
15 s / 10 s / 2 s).

Leader election (``--leader-elect``, the default). Every replica starts its informers at once and
keeps them warm; once they have synced it stands for election (as upstream, which waits for the
caches before it runs the elector). Only the holder of the Lease schedules (``Scheduler.lead``),
and every write it makes carries the term's fence token. The elector has a clientset and a gRPC
connection of its own, so renewals never queue behind binds for rate-limiter tokens or on a busy
connection. kse adds:

* ``--leader-elect-strategy watch|poll``: standbys watch the Lease and act the moment it is
  released or expires (``watch``, the default), or poll it as client-go does (``poll``);
* ``--on-lost-lease exit|standby``: a leader that loses its lease (or learns from a fenced write
  that another replica leads) stops scheduling at once and then exits with status 1, as
  kube-scheduler does (``exit``, the default), or forgets the term's state and goes back to standby
  (``standby``).

SIGTERM / SIGINT: a leader stops popping pods, lets its binding cycles in flight finish and its
queued writes go out (at most ``HANDOVER_GRACE_S``), then releases the Lease so a standby takes over
at once; then everything stops. ``/healthz`` has a ``leaderElection`` check (failing when the
leader has not renewed for leaseDuration + 20 s, as kube-scheduler), ``/metrics`` has
``leader_election_master_status{name="kube-scheduler"}``.

Certificates: the replica follows its cert, key and CA bundle files while it runs (rotation,
renewal, CA phases): both of its connections (the clientset's and leader election's, each a
``ReloadingChannelSource``) build a new channel and move their callers over, without failing a call
or losing leadership. ``--rpc-error-log PATH`` appends every failed RPC it sees as a JSON line (for
the chaos checker).

Clock skew, for the chaos scenarios (which use it to show that safety does not rest on clocks):
``--clock-skew-file PATH`` runs this replica on a clock whose offset and rate come from a JSON file
``{"offset_s": float, "rate": float}``, re-read within ~0.25 s of a change and continuing from the
current skewed time (no file: no skew). The leader election clock (a ``SkewedClock``: expiry, renew
deadline, the times written into the Lease) and the scheduler's clock source read it. The hidden
``--clock-skew OFFSET[,RATE]`` (e.g. ``+5s,1.02``, ``--clock-skew=-2s``, ``0,0.98``) sets a fixed
skew (with the file: the skew while the file does not exist).

Exit codes: 0 after a clean stop, 1 when it cannot start (bad configuration, unreadable
certificates, port taken), when the lease was lost (``--on-lost-lease=exit``) or the scheduler
failed, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import signal
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kse.config import ConnectionFile
from kse.durations import DurationError, DurationFlag, parse_seconds
from kse.fileio import write_atomic
from kse.flags.argtypes import boolean, host_port, non_negative_float
from kse.flags.argtypes import positive_int as _positive_int
from kse.flags.connection_args import (
    add_connection_flags,
    connection_from_args,
    connection_source,
    rpc_error_log_from_args,
)
from kse.flags.failpoint_args import add_failpoint_flags, apply_failpoint_flags
from kse.flags.logging_args import add_log_level_flag, setup_logging
from kse.leaderelection import (
    Clock,
    LeaderElectionConfig,
    LeaderElectionConfigError,
    RealClock,
    SkewedClock,
    Strategy,
    default_identity,
)
from kse.leaderelection.config import ON_LOST_LEASE
from kse.tasks import TaskSet
from scheduler.apis.config import ConfigError, KubeSchedulerConfiguration
from scheduler.apis.config.types import Duration, LeaderElectionConfiguration
from scheduler.cache.cache import DEFAULT_ASSUMED_POD_TTL
from scheduler.framework.runtime import MAX_PERMIT_TIMEOUT
from scheduler.scheduler import DEFAULT_MAX_BINDS_IN_FLIGHT

if TYPE_CHECKING:
    from kse.client.clientset import Clientset
    from kse.leaderelection import LeaderElector
    from proto import kse_pb2 as pb
    from scheduler.metrics import SchedulerMetrics
    from scheduler.scheduler import Scheduler
    from scheduler.server import Check

log = logging.getLogger("scheduler")

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_METRICS_ADDRESS = "127.0.0.1:10259"
STOP_GRACE_S = 5.0
# On SIGTERM, the most a leader waits for its binds in flight and queued writes before it releases.
HANDOVER_GRACE_S = 2.0
# kube-scheduler's healthz tolerance for a leader that has not renewed (leaseDuration + this).
LEADER_ELECTION_HEALTHZ_TOLERANCE_S = 20.0
# The `name` of leader_election_master_status (kube-scheduler's LeaderElectionConfig.Name).
LEADER_ELECTION_NAME = "kube-scheduler"
RESOURCE_LOCKS = ("leases",)


def _clock_skew(text: str) -> tuple[float, float]:
    """OFFSET[,RATE]: a signed Go duration (or seconds) and a positive rate."""
    offset_text, _, rate_text = text.partition(",")
    try:
        offset = parse_seconds(offset_text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(f"expected OFFSET[,RATE] such as +5s,1.02, got {text!r}: {e}") from e
    rate = 1.0
    if rate_text:
        try:
            rate = float(rate_text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a clock rate: {rate_text!r}") from None
        if not (rate > 0 and math.isfinite(rate)):
            raise argparse.ArgumentTypeError(f"a clock rate must be positive, got {rate_text}")
    return offset, rate


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse scheduler", description="Run a kube-scheduler replica.")
    p.add_argument("--config", type=Path, help="a KubeSchedulerConfiguration file (default: the v1 defaults)")
    conn = add_connection_flags(p, "scheduler's")
    conn.add_argument(
        "--kube-api-qps", type=non_negative_float, default=None, help="QPS to the API server (default 50)"
    )
    conn.add_argument(
        "--kube-api-burst", type=_positive_int, default=None, help="burst to the API server (default 100)"
    )
    le = p.add_argument_group("leader election (flags win over the config file's leaderElection)")
    le.add_argument(
        "--leader-elect",
        type=boolean,
        nargs="?",
        const=True,
        default=None,
        metavar="BOOL",
        help="elect a leader among the replicas before scheduling; only the Lease holder schedules "
        "(default true, as kube-scheduler)",
    )
    le.add_argument(
        "--leader-elect-lease-duration",
        action=DurationFlag,
        default=None,
        metavar="DURATION",
        help="how long a standby waits, from when it last saw the Lease change, before it may take "
        "it over (default 15s)",
    )
    le.add_argument(
        "--leader-elect-renew-deadline",
        action=DurationFlag,
        default=None,
        metavar="DURATION",
        help="how long the leader keeps trying to renew before it stops leading; must be less than "
        "the lease duration (default 10s)",
    )
    le.add_argument(
        "--leader-elect-retry-period",
        action=DurationFlag,
        default=None,
        metavar="DURATION",
        help="the wait between attempts to acquire and renew (default 2s)",
    )
    le.add_argument(
        "--leader-elect-resource-lock",
        choices=RESOURCE_LOCKS,
        default=None,
        help="the kind of lock object (only leases, as kube-scheduler since 1.20)",
    )
    le.add_argument(
        "--leader-elect-resource-name",
        default=None,
        metavar="NAME",
        help="the Lease (default kube-scheduler)",
    )
    le.add_argument(
        "--leader-elect-resource-namespace",
        default=None,
        metavar="NAMESPACE",
        help="the Lease's namespace (default kube-system)",
    )
    le.add_argument(
        "--leader-elect-strategy",
        choices=[s.value for s in Strategy],
        default=Strategy.WATCH.value,
        help="kse: how standbys follow the Lease: watch it and act the moment it is released or "
        "expires, or poll it as client-go does (default %(default)s)",
    )
    le.add_argument(
        "--on-lost-lease",
        choices=ON_LOST_LEASE,
        default="exit",
        help="kse: what a leader does once it has lost its lease (it stops scheduling at once): "
        "exit with status 1, as kube-scheduler, or go back to standby (default %(default)s)",
    )
    le.add_argument(
        "--identity",
        default="",
        help="this replica's name in the election (default: <hostname>_<uuid>, new at every start)",
    )
    le.add_argument("--clock-skew", type=_clock_skew, default=None, help=argparse.SUPPRESS)
    le.add_argument(
        "--clock-skew-file",
        type=Path,
        default=None,
        metavar="PATH",
        help='testing aid: run on a clock skewed by the JSON file {"offset_s": S, "rate": R}, re-read '
        "when it changes (no file: no skew); leader election and the scheduler read this clock",
    )
    sch = p.add_argument_group("scheduling")
    sch.add_argument(
        "--permit-wait-timeout",
        action=DurationFlag,
        default=MAX_PERMIT_TIMEOUT,
        metavar="DURATION",
        help="the longest a Permit plugin may make a pod wait (default 15m)",
    )
    sch.add_argument(
        "--assumed-pod-ttl",
        action=DurationFlag,
        default=DEFAULT_ASSUMED_POD_TTL,
        metavar="DURATION",
        help="expire assumed pods whose binding finished but never showed up (default 30s; 0: never)",
    )
    sch.add_argument(
        "--max-binds-in-flight",
        type=_positive_int,
        default=DEFAULT_MAX_BINDS_IN_FLIGHT,
        metavar="N",
        help=f"binding cycles running at once (default {DEFAULT_MAX_BINDS_IN_FLIGHT})",
    )
    sch.add_argument(
        "--batch-binds",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send the binds in flight together as BindBatch calls, each bind still its own "
        "(kse/client/batcher.py); --no-batch-binds: one Bind call per pod, as upstream "
        "(default: on)",
    )
    sch.add_argument(
        "--batch-events",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send the Events being recorded at once together as CreateBatch calls, each still its "
        "own create (kse/client/batcher.py); --no-batch-events: one Create call per Event (default: on)",
    )
    sch.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="once the informers synced, and every 10 s, move the caches' long-lived objects out of "
        "CPython's full collections, whose pauses stall the scheduling loop (kse/gctuning.py; default: on)",
    )
    srv = p.add_argument_group("serving")
    srv.add_argument(
        "--metrics-bind-address",
        type=host_port,
        default=DEFAULT_METRICS_ADDRESS,
        metavar="HOST:PORT",
        help="serve /healthz, /readyz and /metrics here; port 0 picks one (default %(default)s)",
    )
    srv.add_argument(
        "--ready-file", type=Path, help='written once serving: {"metrics": "HOST:PORT", "pid": N}'
    )
    srv.add_argument(
        "--profiling",
        type=boolean,
        nargs="?",
        const=True,
        default=None,
        metavar="BOOL",
        help="serve /debug/pprof/ (CPU profile, thread and task stacks, heap) on the metrics address "
        "(default: the config's enableProfiling, true)",
    )
    srv.add_argument(
        "--contention-profiling",
        type=boolean,
        nargs="?",
        const=True,
        default=None,
        metavar="BOOL",
        help="with profiling, watch the event loop's lag and record what blocks it (/debug/pprof/block) "
        "(default: the config's enableContentionProfiling, true when profiling)",
    )
    add_log_level_flag(p)
    add_failpoint_flags(p)
    return p


def resolve_client_limits(args: argparse.Namespace, cfg: KubeSchedulerConfiguration) -> tuple[float, int]:
    cc = cfg.client_connection
    qps = args.kube_api_qps if args.kube_api_qps is not None else (cc.qps or DEFAULT_QPS)
    burst = args.kube_api_burst if args.kube_api_burst is not None else (cc.burst or DEFAULT_BURST)
    return float(qps), int(burst)


def resolve_profiling(args: argparse.Namespace, cfg: KubeSchedulerConfiguration) -> tuple[bool, bool]:
    """(profiling, contention profiling): a given flag wins over the file's enableProfiling /
    enableContentionProfiling, whose defaults are upstream's (true; contention true when
    profiling). Contention profiling needs profiling (its endpoint is one of pprof's)."""
    profiling = args.profiling if args.profiling is not None else cfg.enable_profiling is not False
    if args.contention_profiling is not None:
        contention = bool(args.contention_profiling)
    elif cfg.enable_contention_profiling is not None:
        contention = bool(cfg.enable_contention_profiling)
    else:
        contention = profiling
    return bool(profiling), bool(profiling and contention)


def resolve_leader_elect(args: argparse.Namespace, cfg: KubeSchedulerConfiguration) -> bool:
    if args.leader_elect is not None:
        return bool(args.leader_elect)
    le = cfg.leader_election.leader_elect
    return True if le is None else bool(le)


def resolve_leader_election(
    args: argparse.Namespace, cfg: KubeSchedulerConfiguration
) -> LeaderElectionConfiguration:
    """The configuration file's leaderElection with every explicitly given --leader-elect* flag
    applied over it (upstream ApplyLeaderElectionTo); the file is not changed."""
    le = dataclasses.replace(cfg.leader_election)
    le.leader_elect = resolve_leader_elect(args, cfg)
    for flag, attr in (
        ("leader_elect_lease_duration", "lease_duration"),
        ("leader_elect_renew_deadline", "renew_deadline"),
        ("leader_elect_retry_period", "retry_period"),
    ):
        value = getattr(args, flag)
        if value is not None:
            setattr(le, attr, Duration(value))
    for flag, attr in (
        ("leader_elect_resource_lock", "resource_lock"),
        ("leader_elect_resource_name", "resource_name"),
        ("leader_elect_resource_namespace", "resource_namespace"),
    ):
        value = getattr(args, flag)
        if value is not None:
            setattr(le, attr, value)
    return le


def leader_election_config(
    args: argparse.Namespace, cfg: KubeSchedulerConfiguration, identity: str
) -> LeaderElectionConfig:
    """The elector's configuration from flags over the file; LeaderElectionConfigError lists
    every problem (each naming the flag and the configuration field)."""
    le = resolve_leader_election(args, cfg)
    errors: list[str] = []
    for flag, value in (
        ("--leader-elect-resource-name", args.leader_elect_resource_name),
        ("--leader-elect-resource-namespace", args.leader_elect_resource_namespace),
    ):
        if value is not None and not value:
            errors.append(f"{flag} must not be empty")
    if le.resource_lock and le.resource_lock not in RESOURCE_LOCKS:
        errors.append(
            f'--leader-elect-resource-lock (resourceLock) must be "leases", got {le.resource_lock!r}'
        )
    config = LeaderElectionConfig.from_component_config(
        le, identity=identity, strategy=args.leader_elect_strategy
    )
    try:
        config.validate()
    except LeaderElectionConfigError as e:
        errors += e.errors
    if errors:
        raise LeaderElectionConfigError(errors)
    return config


def election_clock(args: argparse.Namespace) -> Clock:
    """The clock of leader election and the scheduler: the real one, or skewed (--clock-skew, or
    --clock-skew-file: a `SkewFileClock`, whose file watch the caller starts)."""
    from kse.leaderelection.clock import SkewFileClock

    skew_file: Path | None = getattr(args, "clock_skew_file", None)
    if skew_file is not None:
        return SkewFileClock(RealClock(), skew_file, default=args.clock_skew or (0.0, 1.0))
    if args.clock_skew is None:
        return RealClock()
    offset, rate = args.clock_skew
    return SkewedClock(RealClock(), offset=offset, rate=rate)


async def serve(
    args: argparse.Namespace,
    cfg: KubeSchedulerConfiguration,
    conn: ConnectionFile,
    identity: str,
    election: LeaderElectionConfig | None = None,
) -> int:
    """Run the replica until a signal (or, with leader election, a lost lease); the exit code."""
    from kse.client.clientset import ChannelSource, Clientset
    from kse.client.ratelimit import TokenBucketRateLimiter
    from kse.pprof import LoopWatch, Pprof
    from scheduler.metrics import SchedulerMetrics
    from scheduler.scheduler import Scheduler, SchedulerOptions
    from scheduler.server import HealthServer

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    qps, burst = resolve_client_limits(args, cfg)
    metrics = SchedulerMetrics()
    host = conn.server
    clock = election_clock(args)

    def clientset(channel: ChannelSource, user_agent: str) -> Clientset:
        limiter = TokenBucketRateLimiter(qps, burst, on_wait=lambda s: metrics.observe_rate_limiter(host, s))
        cs = Clientset(
            channel,
            rate_limiter=limiter,
            user_agent=user_agent,
            batch_binds=args.batch_binds,
            batch_creates=args.batch_events,
        )
        cs.metrics.observers.append(
            lambda verb, res, code, s: metrics.observe_request(host, verb, res, code, s)
        )
        return cs

    from kse.leaderelection.clock import SkewFileClock

    errors = rpc_error_log_from_args(args)
    # Both connections follow the credential files: a rotated pair or CA bundle swaps channels
    # under the callers (kse.client.credentials), so no call fails and no renewal is missed.
    channel = connection_source(conn, errors)
    # Leader election's own connection (a local subchannel pool: grpc would otherwise share one TCP
    # connection between channels to the same server), so renewals never wait behind the binds' and
    # watches' traffic.
    le_channel = None
    if election is not None:
        le_channel = connection_source(conn, errors, options=[("grpc.use_local_subchannel_pool", 1)])
    if isinstance(clock, SkewFileClock):
        clock.start()
        log.info("clock skew from %s: offset %+gs, rate %g now", clock.path, clock.offset, clock.rate)
    try:
        # As upstream: events and leader election go through clients of their own, so they never
        # take the tokens the binds need (nor the binds theirs).
        cs = clientset(channel, f"kse-scheduler/{identity}")
        event_cs = clientset(channel, f"kse-scheduler/{identity}/events")
        options = SchedulerOptions(
            identity=identity,
            assumed_pod_ttl=args.assumed_pod_ttl,
            permit_wait_timeout=args.permit_wait_timeout,
            max_binds_in_flight=args.max_binds_in_flight,
            gc_freeze=args.gc_freeze,
        )
        sched = Scheduler(
            cfg, cs, event_clientset=event_cs, options=options, metrics=metrics, clock=clock.now
        )
        healthz: dict[str, Check] = {"scheduler-loop": sched.healthy}
        elector: LeaderElector | None = None
        if election is not None:
            assert le_channel is not None
            le_cs = clientset(le_channel, f"kse-scheduler/{identity}/leader-election")
            elector = new_elector(election, le_cs, sched, metrics, clock)
            healthz["leaderElection"] = leader_election_check(elector)
        profiling, contention = resolve_profiling(args, cfg)
        watch = LoopWatch() if contention else None
        async with (
            contextlib.AsyncExitStack() as debug_stack,
            HealthServer(
                args.metrics_bind_address,
                healthz=healthz,
                readyz={"sched-handler-sync": sched.ready},
                metrics=metrics.expose,
                pprof=Pprof(watch) if profiling else None,
            ) as server,
        ):
            if watch is not None:
                await debug_stack.enter_async_context(watch)
            if args.ready_file is not None:
                write_atomic(
                    args.ready_file, json.dumps({"metrics": server.address, "pid": os.getpid()}) + "\n"
                )
            log.info(
                "scheduler %s starting: API server %s, profiles %s, qps %g burst %d, %s",
                identity,
                conn.server,
                sorted(sched.profiles),
                qps,
                burst,
                "leader election off"
                if election is None
                else f"leader election on lease {election.describe()} ({election.strategy} strategy, "
                f"lease {election.lease_duration:g}s, renew {election.renew_deadline:g}s, "
                f"retry {election.retry_period:g}s, on lost lease: {args.on_lost_lease})",
            )
            if elector is None:
                code = await run_alone(sched, stop)
            else:
                standby = args.on_lost_lease == "standby"
                try:
                    code = await run_elected(sched, elector, stop, standby_on_lost_lease=standby)
                except* Exception as eg:
                    for e in eg.exceptions:
                        log.error("scheduler failed: %r", e, exc_info=e)
                    code = 1
    finally:
        await channel.close(grace=None)
        if le_channel is not None:
            await le_channel.close(grace=None)
        if isinstance(clock, SkewFileClock):
            await clock.stop()
        if errors is not None:
            errors.close()
        if args.ready_file is not None:
            args.ready_file.unlink(missing_ok=True)
    log.info("stopped (exit code %d)", code)
    return code


def new_elector(
    config: LeaderElectionConfig,
    clientset: Clientset,
    sched: Scheduler,
    metrics: SchedulerMetrics,
    clock: Clock,
) -> LeaderElector:
    """The replica's elector, wired to the scheduler: a term runs `sched.lead(term)` and its end
    calls `sched.stop_leading()` first; writes carry the term's fence token; a write refused as
    fenced ends the term at once. Transitions are logged and exported."""
    from kse.leaderelection import ClientsetLeaseClient, LeaderCallbacks, LeaderElector, LeaderTerm

    elector: LeaderElector

    def started(term: LeaderTerm) -> Awaitable[None]:
        metrics.set_leader(True)
        log.info(
            "became leader: identity %s, lease %s, leaseTransitions %d (acquired at revision %d)",
            term.identity,
            config.describe(),
            term.lease_transitions,
            term.acquired_revision,
        )
        return sched.lead(term)

    def stopped() -> None:
        sched.stop_leading()  # first: not one more pod popped
        metrics.set_leader(False)
        term = elector.last_term
        log.warning(
            "stopped leading: identity %s, lease %s, leaseTransitions %s: %s",
            config.identity,
            config.describe(),
            term.lease_transitions if term is not None else "?",
            term.end_reason if term is not None else "",
        )

    elector = LeaderElector(
        config,
        ClientsetLeaseClient(clientset),
        LeaderCallbacks(on_started_leading=started, on_stopped_leading=stopped),
        clock=clock,
    )
    metrics.enable_leader_election(LEADER_ELECTION_NAME)

    def fenced(token: pb.FenceToken) -> None:
        elector.step_down("a write was refused as fenced: another replica holds the lease", fence=token)

    sched.set_fence(elector.fence_token)  # before anything can write
    sched.set_leader_check(elector.is_leader)
    sched.on_fenced = fenced
    return elector


def leader_election_check(elector: LeaderElector) -> Check:
    def check() -> tuple[bool, str]:
        problem = elector.check(LEADER_ELECTION_HEALTHZ_TOLERANCE_S)
        return (problem is None, problem or "ok")

    return check


async def run_alone(sched: Scheduler, stop: asyncio.Event) -> int:
    """Without leader election: schedule from the start until a signal."""
    # Both tasks end with the block, however it is left; the scheduler's error is read below.
    async with TaskSet("run-alone", logger=log, failure_level=logging.DEBUG) as tasks:
        run = tasks.spawn(sched.run(), name="scheduler")
        stopping = tasks.spawn(stop.wait(), name="stop-signal")
        done, _ = await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stopping in done:
            log.info("signal received; stopping (grace %.0fs)", STOP_GRACE_S)
            sched.stop()
            try:
                async with asyncio.timeout(STOP_GRACE_S):
                    await asyncio.shield(run)
            except TimeoutError:
                run.cancel()
            await asyncio.wait({run})
    if not run.cancelled() and run.exception() is not None:
        log.error("scheduler failed: %r", run.exception())
        return 1
    return 0


async def run_elected(
    sched: Scheduler, elector: LeaderElector, stop: asyncio.Event, *, standby_on_lost_lease: bool
) -> int:
    """With leader election: the scheduler's informers (every replica, from the start) and the
    elector (once they have synced) side by side, until a signal (exit 0) or, unless
    `standby_on_lost_lease`, the end of a term (the lease was lost: exit 1). A crash of either
    ends both (cancelling the elector releases a held lease) and is raised."""

    async def elect() -> None:
        await sched.synced.wait()  # as upstream: stand for election with warm caches only
        if stop.is_set():
            return
        await elector.run(rejoin=standby_on_lost_lease)

    async with asyncio.TaskGroup() as tg:
        sched_task = tg.create_task(sched.run(leader_elected=True), name="scheduler")
        elect_task = tg.create_task(elect(), name="leader-election")
        stopping = tg.create_task(stop.wait(), name="stop-signal")
        done, _ = await asyncio.wait({sched_task, elect_task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if stopping in done:
            log.info("signal received; stopping")
            if not sched.synced.is_set():
                elect_task.cancel()  # still waiting for the informers: the elector never started
            elif elector.is_leader():
                # Hand over: finish what is in flight while the lease is still ours, then release.
                await sched.finish_leading(HANDOVER_GRACE_S)
            elector.stop()  # ends the term (stop_leading, lead cancelled) and releases the lease
            await _wait(elect_task, elector.config.renew_deadline + STOP_GRACE_S)
        elif elect_task in done:
            # elector.run() returned by itself: the term ended (a crash would have been raised).
            stopping.cancel()
            last = elector.last_term
            log.error(
                "leaderelection lost: %s; exiting (--on-lost-lease=exit)",
                last.end_reason if last is not None else "the term ended",
            )
            code = 1
        else:  # the scheduler returned by itself (it does not, short of stop()): stop electing too
            stopping.cancel()
            elector.stop()
            await _wait(elect_task, elector.config.renew_deadline + STOP_GRACE_S)
        sched.stop()
        await _wait(sched_task, STOP_GRACE_S)
    return code


async def _wait(task: asyncio.Task[None], grace: float) -> None:
    """Wait for `task` to finish by itself for `grace` seconds, then cancel it and wait."""
    if not task.done():
        await asyncio.wait({task}, timeout=grace)
    if not task.done():
        log.warning("%s did not stop within %.0fs; cancelling it", task.get_name(), grace)
        task.cancel()
        await asyncio.wait({task})


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging(args.log_level)
    try:
        apply_failpoint_flags(args)
    except ValueError as e:
        parser.error(f"--failpoints: {e}")
    from scheduler.profile import load_scheduler_config

    try:
        cfg = load_scheduler_config(args.config)
    except ConfigError as e:
        print(f"kse scheduler: invalid configuration {args.config or ''}:\n{e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kse scheduler: cannot read --config: {e}", file=sys.stderr)
        return 1
    identity = args.identity or default_identity()
    election: LeaderElectionConfig | None = None
    if resolve_leader_elect(args, cfg):
        try:
            election = leader_election_config(args, cfg, identity)
        except LeaderElectionConfigError as e:
            print("kse scheduler: invalid leader election configuration:", file=sys.stderr)
            for err in e.errors:
                print(f"  {err}", file=sys.stderr)
            return 1
    conn = connection_from_args(parser, args)
    try:
        return asyncio.run(serve(args, cfg, conn, identity, election))
    except OSError as e:
        log.error("cannot start: %s", e)
        return 1
