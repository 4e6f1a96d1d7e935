"""`kse up`: the whole topology as local processes, a live status view, and a clean shutdown.

    kse up                                   # etcd, API server, 3 schedulers, 100 nodes, 20 pods/s
    kse up --duration 60 --json              # run a minute, then print one JSON summary
    kse --config ~/.kse/config.json get pods # from another terminal
    export KUBECONFIG=~/.kse/kubeconfig; kubectl get pods -o wide   # the Kubernetes HTTP API
    kse up --cert-ttl 10m                    # short-lived certificates, renewed while it runs
    kse up --partition-proxies               # each replica behind a proxy chaos can cut

Everything lives under --data-dir (default ~/.kse; see harness.up.plan for the layout); the admin
connection file is D/config.json, which is also the CLI's default when D is ~/.kse; the admin
kubeconfig (for kubectl, on the API server's HTTP port, a free one unless --http-port) is
D/kubeconfig, unless --no-http. Ctrl-C or SIGTERM
stops the workload, the schedulers, nodesim, the API server and etcd, in that order; a second one
kills whatever is left at once. Exit codes: 0 after a clean run, 1 if something failed to come up
(the message shows the log tail) or a core process died during the run, 2 for bad flags, 130 when
interrupted during startup.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import logging
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from kse.durations import DurationError, DurationFlag, positive_duration
from kse.flags.argtypes import non_negative_float, non_negative_int, positive_int
from kse.flags.election_args import ELECTION_FLAGS, add_election_flags, in_flag_words
from kse.flags.logging_args import add_log_level_flag

if TYPE_CHECKING:  # imported when the command runs, so `kse --help` stays fast
    from rich.live import Live

    from harness.up.cluster import Cluster
    from harness.up.plan import ClusterPlan
    from harness.up.status import StatusSnapshot

DEFAULT_DATA_DIR = Path("~/.kse")
# The floor of --cert-ttl; the same number as harness.up.plan.MIN_CERT_TTL (not imported here, so
# `kse --help` stays fast; a unit test holds them equal).
MIN_CERT_TTL_S = 30.0
LINE_EVERY_S = 5.0  # compact status line interval when stdout is not a terminal
REFRESH_S = 1.0
ETCD_DEFRAG_INTERVAL_S = 1800.0  # harness.up.etcd_defrag: one pass every 30 min


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `kse up` to the `kse` command."""
    p = subparsers.add_parser(
        "up",
        help="run etcd, the API server, scheduler replicas, nodesim and a workload as local processes",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="certs, etcd data, logs and the connection file (default ~/.kse)",
    )
    p.add_argument("--replicas", type=positive_int, default=3, help="scheduler replicas (default 3)")
    p.add_argument(
        "--controller-managers",
        type=non_negative_int,
        default=2,
        metavar="N",
        help="kse controller-manager replicas, electing a leader on kube-system/kube-controller-manager "
        "(default 2; 0: none)",
    )
    p.add_argument("--nodes", type=non_negative_int, default=100, help="simulated nodes (default 100)")
    p.add_argument(
        "--rate", type=non_negative_float, default=20.0, help="workload pods per second (default 20)"
    )
    p.add_argument("--workload-total", type=positive_int, metavar="N", help="stop the workload after N pods")
    p.add_argument("--no-workload", action="store_true", help="do not run the workload")
    p.add_argument(
        "--pod-lifetime",
        action=DurationFlag,
        default=None,
        metavar="DURATION",
        help="delete each workload pod this long after it runs, for a steady state (default: about half "
        "the fleet in use, at most 30s; 0 keeps every pod, so the cluster fills up)",
    )
    p.add_argument(
        "--etcd-members", type=int, choices=(1, 3, 5), default=1, help="etcd cluster size (default 1)"
    )
    add_election_flags(p)
    tls = p.add_argument_group("certificates and links")
    tls.add_argument(
        "--cert-ttl",
        action=DurationFlag,
        convert=cert_ttl,
        metavar="DURATION",
        help="short-lived certificates: every leaf lives DURATION (e.g. 10m, 90s; at least "
        f"{MIN_CERT_TTL_S:g}s) and kse up renews each at a jittered 70-90 %% of it while it runs; "
        "the components re-read their files without restarting (default: 1-year certificates)",
    )
    tls.add_argument(
        "--etcd-tls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="etcd serves over mTLS; the API server uses the apiserver-etcd-client pair (default on)",
    )
    tls.add_argument(
        "--partition-proxies",
        action="store_true",
        help="put a TCP proxy between each scheduler replica and the API server (what chaos "
        "partitions cut), listed in D/run/cluster.json",
    )
    tls.add_argument(
        "--http-port",
        type=port_number,
        default=0,
        metavar="PORT",
        help="the API server's Kubernetes HTTP API (kubectl, client libraries) on 127.0.0.1:PORT; "
        "D/kubeconfig points at it (default 0: a free port, picked at each start)",
    )
    tls.add_argument(
        "--no-http",
        action="store_true",
        help="serve gRPC only: no Kubernetes HTTP API and no D/kubeconfig",
    )
    tls.add_argument(
        "--rpc-error-logs",
        action="store_true",
        help="the schedulers, nodesim and the workload log every failed RPC to D/run/rpc-errors-<name>.jsonl",
    )
    p.add_argument(
        "--duration", action=DurationFlag, metavar="S", help="run S seconds after ready, then stop"
    )
    p.add_argument("--json", action="store_true", help="no live view; print one JSON summary at the end")
    p.add_argument("--fresh", action="store_true", help="new PKI, empty etcd, no old logs")
    add_log_level_flag(p, help="log level of the components (their logs are in D/logs)")
    p.set_defaults(func=_cmd_up)


def cert_ttl(text: str) -> float:
    """--cert-ttl: a duration (10m, 90s, 1h) of at least MIN_CERT_TTL_S."""
    value = positive_duration(text)
    if value < MIN_CERT_TTL_S:
        raise DurationError(
            f"{text!r} is too short to renew: certificates are renewed at 70-90 % of their life and "
            f"every process needs time to re-read them; use at least {MIN_CERT_TTL_S:g}s"
        )
    return value


def port_number(text: str) -> int:
    """--http-port: 0 (a free port) or 1-65535."""
    value = non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, got {value}")
    return value


def _pod_lifetime(args: argparse.Namespace) -> float | None:
    from harness.up.plan import steady_pod_lifetime

    if args.pod_lifetime is None:
        return steady_pod_lifetime(args.nodes, args.rate)
    return args.pod_lifetime or None


def plan_from_args(args: argparse.Namespace) -> ClusterPlan:
    from harness.shape import election_from_flags
    from harness.up.plan import ClusterPlan
    from harness.up.supervisor import BackoffPolicy

    return ClusterPlan(
        data_dir=args.data_dir,
        replicas=args.replicas,
        controller_managers=args.controller_managers,
        nodes=args.nodes,
        rate=args.rate,
        workload=not args.no_workload,
        workload_total=args.workload_total,
        pod_lifetime=_pod_lifetime(args),
        etcd_members=args.etcd_members,
        election=election_from_flags(args),
        fresh=args.fresh,
        etcd_tls=args.etcd_tls,
        restart_policy=BackoffPolicy(),
        supervise_control_plane=True,
        etcd_defrag_interval=ETCD_DEFRAG_INTERVAL_S,
        log_level=args.log_level,
        cert_ttl=args.cert_ttl,
        partition_proxies=args.partition_proxies,
        rpc_error_logs=args.rpc_error_logs,
        http=not args.no_http,
        http_port=args.http_port,
    )


class _LogFile(logging.FileHandler):
    """kse up's own log (informer reconnects, supervisor decisions): in D/logs/up.log, never on the
    terminal, where it would tear the live view. Opened at the first record, after --fresh."""

    def _open(self) -> Any:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


# A shape field (harness.shape) -> the `kse up` flag that sets it.
SHAPE_FLAGS = {
    "replicas": "--replicas",
    "nodes": "--nodes",
    "rate": "--rate",
    "etcd_members": "--etcd-members",
    **ELECTION_FLAGS,
}


def _in_flags(text: str) -> str:
    """A shape problem ("renew_deadline: must be < lease_duration (5s), got 6s") in the flags'
    words ("--renew-deadline: must be < --lease-duration (5s), got 6s")."""
    return in_flag_words(text, SHAPE_FLAGS)


def _cmd_up(args: argparse.Namespace) -> int:
    from harness.shape import ShapeError

    if args.no_http and args.http_port:
        print("kse up: error: --http-port and --no-http contradict each other", file=sys.stderr)
        return 2
    try:
        plan = plan_from_args(args)
    except ShapeError as e:
        for p in e.problems:
            print(f"kse up: error: {_in_flags(str(p))}", file=sys.stderr)
        return 2
    problems = plan.problems()
    if problems:
        for problem in problems:
            print(f"kse up: error: {problem}", file=sys.stderr)
        return 2
    handler = _LogFile(plan.logs_dir / "up.log", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, args.log_level.upper()))
    try:
        return asyncio.run(_run(args, plan))
    except KeyboardInterrupt:
        return 130


class _Output:
    """Where progress goes: printed before the live view, into the view's event list once it runs."""

    def __init__(self, to_stderr: bool, live: bool) -> None:
        self.to_stderr = to_stderr
        self.live = live
        self.in_view = False
        self.events: collections.deque[str] = collections.deque(maxlen=5)

    def progress(self, msg: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        if self.in_view:
            self.events.append(f"{stamp} {msg}")
        else:
            print(f"kse up: {msg}", file=self.stream, flush=True)

    @property
    def stream(self) -> TextIO:
        """stderr under --json, else stdout, looked up when printing: while the live view is up,
        rich's stand-in for stdout puts the line above the view instead of through it."""
        return sys.stderr if self.to_stderr else sys.stdout


@dataclass
class _SignalState:
    signals: int = 0
    ready: bool = False
    by: str = ""


async def _run(args: argparse.Namespace, plan: ClusterPlan) -> int:
    from harness.up.cluster import Cluster
    from harness.up.plan import UpError

    loop = asyncio.get_running_loop()
    live = sys.stdout.isatty() and not args.json
    out = _Output(args.json, live)
    cluster = Cluster(plan, progress=out.progress)
    stop = asyncio.Event()
    main = asyncio.current_task()
    assert main is not None
    state = _SignalState()

    def on_signal(sig: signal.Signals) -> None:
        state.signals += 1
        if state.signals == 1:
            state.by = sig.name
            out.in_view = False
            out.progress(f"{sig.name}: stopping (send it again to kill everything at once)")
            stop.set()
            if not state.ready:
                main.cancel()
        else:
            out.progress(f"{sig.name} again: killing every process now")
            cluster.kill_all()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    snap: StatusSnapshot | None = None
    errors: list[str] = []
    stopped_by = ""
    run_started = time.monotonic()
    run_s = 0.0
    try:
        try:
            await cluster.start()
        except asyncio.CancelledError:
            if state.signals:
                main.uncancel()
                out.progress("interrupted during startup; everything started so far is stopped")
                return 130
            raise
        except UpError as e:
            print(f"kse up: error: {e}", file=sys.stderr, flush=True)
            return 1
        state.ready = True
        ready_s = cluster.ready_timings.get("ready", 0.0)
        out.progress(f"ready in {ready_s:.1f}s; logs in {plan.logs_dir}; try: {plan.cli_hint}")
        if cluster.kubeconfig is not None:
            out.progress(f"kubectl: {plan.kubectl_hint}")
        run_started = time.monotonic()
        stopped_by, errors = await _watch(cluster, stop, args, out)
        run_s = time.monotonic() - run_started
        snap = cluster.snapshot()
        out.in_view = False
        stopped_by = stopped_by or state.by
        if live and snap is not None:
            print(flush=True)
        out.progress("stopping: workload, schedulers, nodesim, API server, etcd")
    finally:
        t_stop = time.monotonic()
        await cluster.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if cluster.leftovers:
        errors.append("processes left after shutdown (killed): " + ", ".join(cluster.leftovers))
    out.progress(
        f"stopped in {time.monotonic() - t_stop:.1f}s" + ("" if not cluster.leftovers else " (leftovers!)")
    )
    if args.json:
        summary = build_summary(cluster, snap, run_s, stopped_by, errors)
        print(json.dumps(summary, sort_keys=False), flush=True)
    for error in errors:
        print(f"kse up: error: {error}", file=sys.stderr, flush=True)
    return 1 if errors else 0


async def _watch(
    cluster: Cluster, stop: asyncio.Event, args: argparse.Namespace, out: _Output
) -> tuple[str, list[str]]:
    """Show the status until a signal, the end of --duration, or the death of a core process."""
    from rich.live import Live

    # On a terminal, redrawn by the loop once a second (no refresh thread of rich's own); the last
    # frame stays on the screen when it ends.
    view = Live(auto_refresh=False, redirect_stderr=False) if out.live else None
    with view or contextlib.nullcontext():
        return await _watch_loop(cluster, stop, args, out, view)


async def _watch_loop(
    cluster: Cluster, stop: asyncio.Event, args: argparse.Namespace, out: _Output, view: Live | None
) -> tuple[str, list[str]]:
    from harness.up.status import render_line, render_view

    out.in_view = out.live
    started = time.monotonic()
    deadline = None if args.duration is None else started + args.duration
    last_line = started
    workload_noted = False
    while True:
        now = time.monotonic()
        dead = _dead_core(cluster)
        if dead:
            return "failure", dead
        wl = cluster.workload
        if wl is not None and not wl.running and not workload_noted:
            workload_noted = True
            code = wl.returncode
            note = "workload finished" + ("" if code == 0 else f" with exit code {code} (see {wl.log_path})")
            cluster.notes.append(note)
            out.progress(note)
        snap = cluster.snapshot()
        if snap is not None:
            if view is not None:
                view.update(render_view(snap, list(out.events)), refresh=True)
            elif now - last_line >= LINE_EVERY_S:
                last_line = now
                print(render_line(snap), file=out.stream, flush=True)
        if deadline is not None and now >= deadline:
            return "duration", []
        wait = REFRESH_S if deadline is None else max(0.0, min(REFRESH_S, deadline - now))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await stop.wait()
        if stop.is_set():
            return "", []


def _dead_core(cluster: Cluster) -> list[str]:
    """etcd, the API server or nodesim exited on their own and nothing brings them back: the
    cluster cannot go on. (`kse up` supervises etcd members and the API server: their exits are
    restarts, shown as events, never the end of the run.)"""
    from harness.procs.launcher import log_tail

    dead = []
    procs = [(m.name, m.managed) for m in cluster.etcd_members]
    if cluster.apiserver is not None:
        procs.append(("apiserver", cluster.apiserver))
    if cluster.nodesim is not None:
        procs.append(("nodesim", cluster.nodesim))
    for name, proc in procs:
        if cluster.supervised(proc.name):
            continue
        if proc.pid is not None and not proc.running:
            tail = "\n".join(f"  | {line}" for line in log_tail(proc.log_path, 15).splitlines())
            dead.append(
                f"{name} (pid {proc.pid}) exited with code {proc.returncode}; {proc.log_path}:\n{tail}"
            )
    return dead


def build_summary(
    cluster: Cluster, snap: StatusSnapshot | None, run_s: float, stopped_by: str, errors: list[str]
) -> dict[str, Any]:
    """The `--json` object."""
    plan = cluster.plan
    names = {ident: r.name for r in cluster.replicas for ident in r.identities}
    # Roles and the leader as the run ended; pods, binds and failovers once the workload, the
    # schedulers and nodesim had stopped (nothing changes them after that).
    final = cluster.final_snapshot or snap
    pods = final.pods if final is not None else {"created": 0, "pending": 0, "bound": 0, "running": 0}
    lease = snap.lease if snap is not None else None
    roles = {v.info.name: v.role for v in snap.replicas} if snap is not None else {}
    binds = final.binds_total if final is not None else 0
    all_pids = cluster.pids
    return {
        "duration_s": round(run_s, 3),
        "ready_s": cluster.ready_timings.get("ready"),
        "ready_timings_s": dict(cluster.ready_timings),
        "stopped_by": stopped_by,
        "replicas": [
            {
                "name": r.name,
                "identity": r.identity,
                "pid": r.pid,
                "restarts": r.restarts,
                "role": roles.get(r.name, ""),
                "identities": list(r.identities),
                "pids": list(r.process.pids),
            }
            for r in cluster.replicas
        ],
        "leader": snap.leader if snap is not None else None,
        "leader_identity": lease.holder if lease is not None and lease.holder else None,
        "lease_transitions": lease.transitions if lease is not None else 0,
        "leader_election": cluster.leader_election,
        "pods": {k: pods.get(k, 0) for k in ("created", "pending", "bound", "running")},
        "nodes": final.nodes if final is not None else {},
        "binds_per_s": round(binds / run_s, 3) if run_s > 0 else 0.0,
        "binds_seen": binds,
        "failovers": [f.as_dict(names.get) for f in (final.failovers if final is not None else [])],
        "restarts": [rec.as_dict() for r in cluster.replicas for rec in r.restart_history],
        "processes": [{"name": name, "pid": pid} for pid, name in sorted(all_pids.items())],
        "leftovers": list(cluster.leftovers),
        "errors": errors,
        "notes": list(cluster.notes),
        "data_dir": str(plan.data_dir),
        "connection_file": str(plan.connection_file),
        "kubeconfig": str(plan.kubeconfig) if plan.http else None,
        "logs_dir": str(plan.logs_dir),
        "audit_logs": [str(p) for p in cluster.audit_logs],
        "run_id": cluster.run_id,
        "cluster_file": str(plan.cluster_file),
        "cert_ttl_s": plan.cert_ttl,
        "cert_renewals": cluster.cert_renewals(),
        "proxies": {name: proxy.address for name, proxy in cluster.proxies.items()},
    }
