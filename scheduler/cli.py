"""`kse scheduler`: run one kube-scheduler replica until SIGTERM / SIGINT.

Flags follow kube-scheduler's (``cmd/kube-scheduler/app/options``) where kse has the concept:
``--config``, ``--kube-api-qps``, ``--kube-api-burst``, ``--leader-elect``; the connection to the
API server is a kse connection file (``--connection-file``, alias ``--kubeconfig``) or its parts
(``--server --ca --cert --key``). As upstream, an explicitly given ``--kube-api-qps`` /
``--kube-api-burst`` / ``--leader-elect`` wins over the configuration file's clientConnection /
leaderElection, which wins over the defaults (50, 100, true).

Leader election is the next piece of work: ``--leader-elect=true`` (also the default, as
upstream's) is refused with exit code 2 and a message saying to pass ``--leader-elect=false``.

Exit codes: 0 after a clean stop, 1 when it cannot start (bad configuration, unreadable
certificates, port taken), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

from kse.config import ConfigError as ConnectionConfigError
from kse.config import ConnectionFile
from scheduler.apis.config import ConfigError, KubeSchedulerConfiguration, parse_duration
from scheduler.cache.cache import DEFAULT_ASSUMED_POD_TTL
from scheduler.framework.runtime import MAX_PERMIT_TIMEOUT
from scheduler.scheduler import DEFAULT_MAX_BINDS_IN_FLIGHT

log = logging.getLogger("scheduler")

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_METRICS_ADDRESS = "127.0.0.1:10259"
STOP_GRACE_S = 5.0


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "t", "1", "yes"):
        return True
    if value in ("false", "f", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _duration(text: str) -> float:
    """A Go duration ("30s", "1m30s") or plain seconds."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_duration(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30s, 1m30s, 15m)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _address(text: str) -> str:
    from scheduler.server import parse_address

    try:
        parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse scheduler", description="Run a kube-scheduler replica.")
    p.add_argument("--config", type=Path, help="a KubeSchedulerConfiguration file (default: the v1 defaults)")
    conn = p.add_argument_group("API server connection")
    conn.add_argument(
        "--connection-file",
        "--kubeconfig",
        dest="connection_file",
        type=Path,
        help="a kse connection file (server, CA bundle, client cert and key); or give the parts below",
    )
    conn.add_argument("--server", help="API server address HOST:PORT")
    conn.add_argument("--ca", type=Path, help="CA bundle verifying the API server")
    conn.add_argument("--cert", type=Path, help="client certificate (the scheduler's identity)")
    conn.add_argument("--key", type=Path, help="client key")
    conn.add_argument("--tls-server-name", default="localhost", help="name checked in the server cert")
    conn.add_argument(
        "--kube-api-qps", type=_positive_float, default=None, help="QPS to the API server (default 50)"
    )
    conn.add_argument(
        "--kube-api-burst", type=_positive_int, default=None, help="burst to the API server (default 100)"
    )
    le = p.add_argument_group("leader election")
    le.add_argument(
        "--leader-elect",
        type=_bool,
        nargs="?",
        const=True,
        default=None,
        metavar="BOOL",
        help="run leader election before scheduling (default true, as kube-scheduler; "
        "not implemented yet: pass --leader-elect=false)",
    )
    le.add_argument("--identity", default="", help="this replica's name (default: hostname_uuid)")
    sch = p.add_argument_group("scheduling")
    sch.add_argument(
        "--permit-wait-timeout",
        type=_duration,
        default=MAX_PERMIT_TIMEOUT,
        metavar="DURATION",
        help="the longest a Permit plugin may make a pod wait (default 15m)",
    )
    sch.add_argument(
        "--assumed-pod-ttl",
        type=_duration,
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
    srv = p.add_argument_group("serving")
    srv.add_argument(
        "--metrics-bind-address",
        type=_address,
        default=DEFAULT_METRICS_ADDRESS,
        metavar="HOST:PORT",
        help="serve /healthz, /readyz and /metrics here; port 0 picks one (default %(default)s)",
    )
    srv.add_argument(
        "--ready-file", type=Path, help='written once serving: {"metrics": "HOST:PORT", "pid": N}'
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="(default: %(default)s)",
    )
    return p


def connection_from_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> ConnectionFile:
    parts = (args.server, args.ca, args.cert, args.key)
    if args.connection_file is not None:
        if any(x is not None for x in parts):
            p.error("give either --connection-file or --server/--ca/--cert/--key, not both")
        try:
            return ConnectionFile.load(args.connection_file)
        except ConnectionConfigError as e:
            p.error(str(e))
    if not all(x is not None for x in parts):
        p.error(
            "an API server connection is required: --connection-file, or --server, --ca, --cert and --key"
        )
    for flag, path in (("--ca", args.ca), ("--cert", args.cert), ("--key", args.key)):
        if not Path(path).is_file():
            p.error(f"{flag}: no such file: {path}")
    return ConnectionFile.for_identity(args.server, args.cert, args.key, args.ca, args.tls_server_name)


def resolve_client_limits(args: argparse.Namespace, cfg: KubeSchedulerConfiguration) -> tuple[float, int]:
    cc = cfg.client_connection
    qps = args.kube_api_qps if args.kube_api_qps is not None else (cc.qps or DEFAULT_QPS)
    burst = args.kube_api_burst if args.kube_api_burst is not None else (cc.burst or DEFAULT_BURST)
    return float(qps), int(burst)


def resolve_leader_elect(args: argparse.Namespace, cfg: KubeSchedulerConfiguration) -> bool:
    if args.leader_elect is not None:
        return bool(args.leader_elect)
    le = cfg.leader_election.leader_elect
    return True if le is None else bool(le)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def serve(
    args: argparse.Namespace, cfg: KubeSchedulerConfiguration, conn: ConnectionFile, identity: str
) -> int:
    from kse.client.channel import secure_channel
    from kse.client.clientset import Clientset
    from kse.client.ratelimit import TokenBucketRateLimiter
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

    def clientset(user_agent: str) -> Clientset:
        limiter = TokenBucketRateLimiter(qps, burst, on_wait=lambda s: metrics.observe_rate_limiter(host, s))
        cs = Clientset(channel, rate_limiter=limiter, user_agent=user_agent)
        cs.metrics.observers.append(
            lambda verb, res, code, s: metrics.observe_request(host, verb, res, code, s)
        )
        return cs

    channel = secure_channel(conn)
    try:
        # As upstream: events go through a client of their own, so they never take the tokens
        # the binds need.
        cs = clientset(f"kse-scheduler/{identity}")
        event_cs = clientset(f"kse-scheduler/{identity}/events")
        options = SchedulerOptions(
            identity=identity,
            assumed_pod_ttl=args.assumed_pod_ttl,
            permit_wait_timeout=args.permit_wait_timeout,
            max_binds_in_flight=args.max_binds_in_flight,
        )
        sched = Scheduler(cfg, cs, event_clientset=event_cs, options=options, metrics=metrics)
        async with HealthServer(
            args.metrics_bind_address,
            healthz={"scheduler-loop": sched.healthy},
            readyz={"sched-handler-sync": sched.ready},
            metrics=metrics.expose,
        ) as server:
            if args.ready_file is not None:
                write_atomic(
                    args.ready_file, json.dumps({"metrics": server.address, "pid": os.getpid()}) + "\n"
                )
            log.info(
                "scheduler %s starting: API server %s, profiles %s, qps %g burst %d",
                identity,
                conn.server,
                sorted(sched.profiles),
                qps,
                burst,
            )
            run = asyncio.create_task(sched.run(), name="scheduler")
            stopping = asyncio.create_task(stop.wait(), name="stop-signal")
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
            else:
                stopping.cancel()
            if not run.cancelled() and run.exception() is not None:
                log.error("scheduler failed: %r", run.exception())
                return 1
    finally:
        await channel.close(grace=None)
        if args.ready_file is not None:
            args.ready_file.unlink(missing_ok=True)
    log.info("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from scheduler.profile import load_scheduler_config

    try:
        cfg = load_scheduler_config(args.config)
    except ConfigError as e:
        print(f"kse scheduler: invalid configuration {args.config or ''}:\n{e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kse scheduler: cannot read --config: {e}", file=sys.stderr)
        return 1
    if resolve_leader_elect(args, cfg):
        print(
            "kse scheduler: leader election is not implemented yet; run a single replica with "
            "--leader-elect=false",
            file=sys.stderr,
        )
        return 2
    conn = connection_from_args(parser, args)
    identity = args.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    try:
        return asyncio.run(serve(args, cfg, conn, identity))
    except OSError as e:
        log.error("cannot start: %s", e)
        return 1
