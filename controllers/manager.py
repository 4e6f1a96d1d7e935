"""`kse controller-manager`: several controllers in one process, as kube-controller-manager, until
SIGTERM / SIGINT.

Flags are kube-controller-manager's where kse has the concept: `--controllers` (see
`controllers.selection`), `--leader-elect` (default true) and `--leader-elect-lease-duration /
-renew-deadline / -retry-period / -resource-namespace / -resource-name` (default
`kube-system/kube-controller-manager`, 15 s / 10 s / 2 s), `--kube-api-qps / --kube-api-burst`
(20 / 30), `--concurrent-deployment-syncs / --concurrent-replicaset-syncs /
--concurrent-daemonset-syncs`, `--node-monitor-grace-period / --node-monitor-period /
--node-startup-grace-period`, `--terminated-pod-gc-threshold`; the connection is kse's
(`--connection-file` or `--server --ca --cert --key`, as every component).

Leadership. Unlike the scheduler (which keeps warm caches in standby), kube-controller-manager
starts its informers only once it leads, and so does this: each term builds every selected
controller from a fresh `ControllerContext`, starts the shared informers, waits until they have
synced *and* reached the revision at which the lease was acquired, then runs the controllers; the
term's end cancels all of it. Why the revision: every write of the previous leader that the API
server accepted was checked against its fence in the same etcd transaction, so it landed before
the new term began; an informer at or past the acquisition revision has seen all of them, and the
new leader counts the previous leader's pods and ReplicaSets before it creates any (no
over-creation across a failover). Every write carries the term's fence token; a write refused as
fenced ends the term at once. With `--on-lost-lease=exit` (the default, as upstream's
"leaderelection lost") the process then exits with status 1 and its supervisor restarts it.

`/healthz` (with a `leaderElection` check), `/readyz` and `/metrics` (see `controllers.metrics`)
on `--metrics-bind-address`. Exit codes: 0 after a clean stop, 1 when it cannot start or lost
its lease, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from controllers.base import ControllerContext, ControllerOptions
from controllers.selection import ControllerSelectionError, parse_controllers, select_controllers
from kse.config import ConnectionFile
from kse.durations import DurationFlag
from kse.flags.argtypes import boolean, host_port, non_negative_float, non_negative_int, positive_int
from kse.flags.connection_args import (
    add_connection_flags,
    connection_from_args,
    connection_source,
    rpc_error_log_from_args,
)
from kse.flags.logging_args import add_log_level_flag, setup_logging
from kse.leaderelection import LeaderElectionConfig, LeaderElectionConfigError, Strategy, default_identity
from kse.leaderelection.config import ON_LOST_LEASE

if TYPE_CHECKING:
    from controllers.metrics import ControllerManagerMetrics
    from kse.client.clientset import Clientset
    from kse.leaderelection import LeaderElector, LeaderTerm
    from proto import kse_pb2 as pb

log = logging.getLogger("controller-manager")

DEFAULT_QPS = 20.0  # kube-controller-manager's --kube-api-qps
DEFAULT_BURST = 30  # --kube-api-burst
DEFAULT_METRICS_ADDRESS = "127.0.0.1:10257"
LEASE_NAME = "kube-controller-manager"
LEASE_NAMESPACE = "kube-system"
STOP_GRACE_S = 5.0
LEADER_ELECTION_HEALTHZ_TOLERANCE_S = 20.0
CONCURRENT_SYNC_FLAGS = ("deployment", "replicaset", "daemonset")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kse controller-manager", description="Run a kube-controller-manager replica."
    )
    p.add_argument(
        "--controllers",
        default="*",
        metavar="LIST",
        help="controllers to run: '*' all that are on by default, 'foo' enables foo, '-foo' "
        "disables foo (default %(default)s)",
    )
    conn = add_connection_flags(p, "controller-manager's")
    conn.add_argument("--kube-api-qps", type=non_negative_float, default=DEFAULT_QPS, help="QPS (default 20)")
    conn.add_argument("--kube-api-burst", type=positive_int, default=DEFAULT_BURST, help="burst (default 30)")
    le = p.add_argument_group("leader election")
    le.add_argument(
        "--leader-elect",
        type=boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="elect a leader among the replicas; only the Lease holder runs controllers (default true)",
    )
    for flag, default, what in (
        ("--leader-elect-lease-duration", 15.0, "how long a standby waits before taking a silent lease"),
        ("--leader-elect-renew-deadline", 10.0, "how long the leader tries to renew before it stops"),
        ("--leader-elect-retry-period", 2.0, "the wait between attempts to acquire and renew"),
    ):
        le.add_argument(
            flag,
            action=DurationFlag,
            default=default,
            metavar="DURATION",
            help=f"{what} (default {default:g}s)",
        )
    le.add_argument("--leader-elect-resource-lock", choices=("leases",), default="leases", help="only leases")
    le.add_argument(
        "--leader-elect-resource-name",
        default=LEASE_NAME,
        metavar="NAME",
        help="the Lease (default %(default)s)",
    )
    le.add_argument(
        "--leader-elect-resource-namespace",
        default=LEASE_NAMESPACE,
        metavar="NAMESPACE",
        help="the Lease's namespace (default %(default)s)",
    )
    le.add_argument(
        "--leader-elect-strategy",
        choices=[s.value for s in Strategy],
        default=Strategy.WATCH.value,
        help="kse: standbys watch the Lease or poll it as client-go (default %(default)s)",
    )
    le.add_argument(
        "--on-lost-lease",
        choices=ON_LOST_LEASE,
        default="exit",
        help="kse: after losing the lease, exit with status 1 as upstream, or stand by again "
        "(default %(default)s)",
    )
    le.add_argument(
        "--identity", default="", help="this replica's name in the election (default <hostname>_<uuid>)"
    )
    ctl = p.add_argument_group("controllers")
    for name in CONCURRENT_SYNC_FLAGS:
        ctl.add_argument(
            f"--concurrent-{name}-syncs",
            type=positive_int,
            default=None,
            metavar="N",
            help=f"{name} objects synced at once (default {'2' if name == 'daemonset' else '5'})",
        )
    ctl.add_argument(
        "--node-monitor-grace-period",
        action=DurationFlag,
        default=40.0,
        metavar="DURATION",
        help="how long a node may go silent before it is marked unhealthy (default 40s)",
    )
    ctl.add_argument(
        "--node-monitor-period",
        action=DurationFlag,
        default=5.0,
        metavar="DURATION",
        help="how often node status is checked (default 5s)",
    )
    ctl.add_argument(
        "--node-startup-grace-period",
        action=DurationFlag,
        default=60.0,
        metavar="DURATION",
        help="how long a starting node may be silent (default 1m)",
    )
    ctl.add_argument(
        "--terminated-pod-gc-threshold",
        type=non_negative_int,
        default=12500,
        metavar="N",
        help="terminated pods kept before podgc deletes them (0: off; default %(default)s)",
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
    add_log_level_flag(p)
    return p


def options_from_args(args: argparse.Namespace) -> ControllerOptions:
    syncs = {
        name: getattr(args, f"concurrent_{name}_syncs")
        for name in CONCURRENT_SYNC_FLAGS
        if getattr(args, f"concurrent_{name}_syncs") is not None
    }
    return ControllerOptions(
        node_monitor_grace_period_s=args.node_monitor_grace_period,
        node_monitor_period_s=args.node_monitor_period,
        node_startup_grace_period_s=args.node_startup_grace_period,
        terminated_pod_gc_threshold=args.terminated_pod_gc_threshold,
        concurrent_syncs=syncs,
    )


def election_from_args(args: argparse.Namespace, identity: str) -> LeaderElectionConfig:
    """LeaderElectionConfigError lists every problem, each naming its flag."""
    errors: list[str] = []
    for flag, value in (
        ("--leader-elect-resource-name", args.leader_elect_resource_name),
        ("--leader-elect-resource-namespace", args.leader_elect_resource_namespace),
    ):
        if not value:
            errors.append(f"{flag} must not be empty")
    config = LeaderElectionConfig(
        lease_namespace=args.leader_elect_resource_namespace or LEASE_NAMESPACE,
        lease_name=args.leader_elect_resource_name or LEASE_NAME,
        identity=identity,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        strategy=Strategy(args.leader_elect_strategy),
    )
    try:
        config.validate()
    except LeaderElectionConfigError as e:
        errors += e.errors
    if errors:
        raise LeaderElectionConfigError(errors)
    return config


class ControllerManager:
    """The selected controllers, run once per term (or once, without leader election)."""

    def __init__(
        self,
        clientset: Clientset,
        names: Sequence[str],
        options: ControllerOptions,
        identity: str,
        metrics: ControllerManagerMetrics,
        event_clientset: Clientset | None = None,
    ) -> None:
        self.clientset = clientset
        # As upstream, events go through a client of their own (never taking the sync's tokens).
        self.event_clientset = event_clientset
        self.names = list(names)
        self.options = options
        self.identity = identity
        self.metrics = metrics
        self.synced = False  # this term's informers have synced (readyz)
        self.fence: Callable[[], pb.FenceToken | None] = lambda: None
        self.on_fenced: Callable[[pb.FenceToken | None], None] = lambda token: None

    async def run(self, min_revision: int = 0) -> None:
        """Build the controllers, start the informers, wait for them (and for `min_revision`),
        run the controllers until cancelled."""
        from controllers.registry import CONTROLLERS
        from kse.client.informer import InformerFactory
        from kse.events import EventRecorder

        informers = InformerFactory(self.clientset)
        # The term's recorder: events carry the fence of the term that decided them, and what is
        # still queued when the term ends is dropped with it.
        recorder = (
            EventRecorder(
                self.event_clientset, instance=self.identity, fence=self.fence, on_fenced=self.on_fenced
            )
            if self.event_clientset is not None
            else None
        )
        ctx = ControllerContext(
            clientset=self.clientset,
            informers=informers,
            fence=self.fence,
            identity=self.identity,
            options=self.options,
            on_fenced=self.on_fenced,
            workqueue_metrics=self.metrics,
            events=recorder,
        )
        controllers = [CONTROLLERS[name](ctx) for name in self.names]
        try:
            async with informers.running():
                await informers.wait_for_sync()
                if min_revision:
                    await informers.wait_for_revision(min_revision)
                self.synced = True
                log.info(
                    "informers synced (revision >= %d); starting controllers %s", min_revision, self.names
                )
                async with asyncio.TaskGroup() as tg:
                    if recorder is not None:
                        tg.create_task(recorder.run(), name="event-recorder")
                    for c in controllers:
                        tg.create_task(c.run(), name=f"controller-{c.name}")
        finally:
            self.synced = False


def new_elector(
    config: LeaderElectionConfig,
    clientset: Clientset,
    cm: ControllerManager,
    metrics: ControllerManagerMetrics,
) -> LeaderElector:
    """The elector wired to the manager: a term runs the controllers (from the acquisition
    revision on); its end cancels them; writes carry the term's fence; a fenced refusal ends it."""
    from kse.leaderelection import ClientsetLeaseClient, LeaderCallbacks, LeaderElector

    elector: LeaderElector

    async def started(term: LeaderTerm) -> None:
        metrics.set_leader(True)
        log.info(
            "became leader: identity %s, lease %s, leaseTransitions %d (acquired at revision %d)",
            term.identity,
            config.describe(),
            term.lease_transitions,
            term.acquired_revision,
        )
        await cm.run(min_revision=term.acquired_revision)

    def stopped() -> None:
        metrics.set_leader(False)
        term = elector.last_term
        log.warning(
            "stopped leading: identity %s, lease %s: %s",
            config.identity,
            config.describe(),
            term.end_reason if term is not None else "",
        )

    elector = LeaderElector(
        config,
        ClientsetLeaseClient(clientset),
        LeaderCallbacks(on_started_leading=started, on_stopped_leading=stopped),
    )
    metrics.enable_leader_election(config.lease_name)

    def fenced(token: pb.FenceToken | None) -> None:
        elector.step_down("a write was refused as fenced: another replica holds the lease", fence=token)

    cm.fence = elector.fence_token
    cm.on_fenced = fenced
    return elector


async def serve(
    args: argparse.Namespace,
    conn: ConnectionFile,
    names: Sequence[str],
    identity: str,
    election: LeaderElectionConfig | None,
) -> int:
    from controllers.metrics import ControllerManagerMetrics
    from kse.client.clientset import ChannelSource, Clientset
    from kse.client.ratelimit import TokenBucketRateLimiter
    from kse.healthserver import Check, HealthServer

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    metrics = ControllerManagerMetrics()
    host = conn.server

    def clientset(channel: ChannelSource, user_agent: str) -> Clientset:
        cs = Clientset(
            channel,
            rate_limiter=TokenBucketRateLimiter(args.kube_api_qps, args.kube_api_burst),
            user_agent=user_agent,
        )
        cs.metrics.observers.append(
            lambda verb, res, code, s: metrics.observe_request(host, verb, res, code, s)
        )
        return cs

    errors = rpc_error_log_from_args(args)
    channel = connection_source(conn, errors)
    le_channel = (
        connection_source(conn, errors, options=[("grpc.use_local_subchannel_pool", 1)])
        if election is not None
        else None
    )
    code = 1
    try:
        cm = ControllerManager(
            clientset(channel, f"kse-controller-manager/{identity}"),
            names,
            options_from_args(args),
            identity,
            metrics,
            event_clientset=clientset(channel, f"kse-controller-manager/{identity}/events"),
        )
        healthz: dict[str, Check] = {}
        elector: LeaderElector | None = None
        if election is not None:
            assert le_channel is not None
            le_cs = clientset(le_channel, f"kse-controller-manager/{identity}/leader-election")
            elector = new_elector(election, le_cs, cm, metrics)
            healthz["leaderElection"] = _leader_election_check(elector)
        async with HealthServer(args.metrics_bind_address, healthz=healthz, metrics=metrics.expose) as server:
            if args.ready_file is not None:
                from kse.fileio import write_atomic

                write_atomic(
                    args.ready_file, json.dumps({"metrics": server.address, "pid": os.getpid()}) + "\n"
                )
            log.info(
                "controller-manager %s starting: API server %s, controllers %s, %s",
                identity,
                conn.server,
                ",".join(names),
                "leader election off"
                if election is None
                else f"leader election on lease {election.describe()} (lease {election.lease_duration:g}s, "
                f"renew {election.renew_deadline:g}s, retry {election.retry_period:g}s)",
            )
            try:
                if elector is None:
                    code = await _run_alone(cm, stop)
                else:
                    code = await _run_elected(elector, stop, standby=args.on_lost_lease == "standby")
            except* Exception as eg:
                for e in eg.exceptions:
                    log.error("controller-manager failed: %r", e, exc_info=e)
                code = 1
    finally:
        await channel.close(grace=None)
        if le_channel is not None:
            await le_channel.close(grace=None)
        if errors is not None:
            errors.close()
        if args.ready_file is not None:
            args.ready_file.unlink(missing_ok=True)
    log.info("stopped (exit code %d)", code)
    return code


def _leader_election_check(elector: LeaderElector) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        problem = elector.check(LEADER_ELECTION_HEALTHZ_TOLERANCE_S)
        return (problem is None, problem or "ok")

    return check


async def _run_alone(cm: ControllerManager, stop: asyncio.Event) -> int:
    async with asyncio.TaskGroup() as tg:
        run = tg.create_task(cm.run(), name="controllers")
        stopping = tg.create_task(stop.wait(), name="stop-signal")
        await asyncio.wait({run, stopping}, return_when=asyncio.FIRST_COMPLETED)
        run.cancel()
        stopping.cancel()
    return 0


async def _run_elected(elector: LeaderElector, stop: asyncio.Event, *, standby: bool) -> int:
    async with asyncio.TaskGroup() as tg:
        elect = tg.create_task(elector.run(rejoin=standby), name="leader-election")
        stopping = tg.create_task(stop.wait(), name="stop-signal")
        done, _ = await asyncio.wait({elect, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stopping in done:
            log.info("signal received; stopping")
            elector.stop()  # ends the term (controllers cancelled) and releases the lease
            await asyncio.wait({elect}, timeout=elector.config.renew_deadline + STOP_GRACE_S)
            if not elect.done():
                elect.cancel()
            return 0
        stopping.cancel()
        last = elector.last_term
        log.error(
            "leaderelection lost: %s; exiting", last.end_reason if last is not None else "the term ended"
        )
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    from controllers.registry import CONTROLLERS

    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging(args.log_level)
    try:
        names = select_controllers(parse_controllers(args.controllers), CONTROLLERS)
    except ControllerSelectionError as e:
        parser.error(str(e))
    if not names:
        parser.error(f"--controllers {args.controllers!r} selects no controller")
    identity = args.identity or default_identity()
    election: LeaderElectionConfig | None = None
    if args.leader_elect:
        try:
            election = election_from_args(args, identity)
        except LeaderElectionConfigError as e:
            print("kse controller-manager: invalid leader election configuration:", file=sys.stderr)
            for err in e.errors:
                print(f"  {err}", file=sys.stderr)
            return 1
    conn = connection_from_args(parser, args)
    try:
        return asyncio.run(serve(args, conn, names, identity, election))
    except OSError as e:
        log.error("cannot start: %s", e)
        return 1
