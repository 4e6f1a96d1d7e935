"""`kse bench overload`: flags and output; the bench itself is `harness.bench.overload`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from kse.durations import PositiveDuration
from kse.flags.argtypes import non_negative_int, positive_float, positive_int

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "overload",
        help="flood the API server at N x its capacity: leader changes, Lease renew latency, memory, "
        "acknowledged writes; priority and fairness on or off",
        description="Start a cluster (etcd, API server, two electing schedulers, nodes, a steady "
        "workload), calibrate the API server's capacity for bulk pod creates and LISTs, then flood it "
        "open-loop from several client processes while a probe renews a Lease as the scheduler "
        "(harness/bench/overload.py). Exit status 1 when a check fails.",
    )
    p.add_argument(
        "--duration",
        action=PositiveDuration,
        default=60.0,
        metavar="SECONDS",
        help="flood length (default: %(default)s)",
    )
    p.add_argument(
        "--fairness",
        choices=("on", "off"),
        default="on",
        help="the API server's --enable-priority-and-fairness (default: on)",
    )
    p.add_argument(
        "--flood-procs",
        type=positive_int,
        default=3,
        metavar="N",
        help="flood client processes, each its own user (default: %(default)s)",
    )
    p.add_argument(
        "--flood-factor",
        type=positive_float,
        default=10.0,
        metavar="X",
        help="offered rate as a multiple of the calibrated capacity (default: %(default)s)",
    )
    p.add_argument(
        "--flood-door",
        choices=("grpc", "http"),
        default="grpc",
        help="where the flood goes in: the gRPC API (default) or the Kubernetes HTTP API, as kubectl "
        "and client-go clients would (pods POSTed and listed as JSON)",
    )
    p.add_argument(
        "--max-outstanding",
        type=positive_int,
        default=2000,
        metavar="N",
        help="requests in flight per flood process at most (default: %(default)s)",
    )
    p.add_argument(
        "--calibrate",
        action=PositiveDuration,
        default=5.0,
        metavar="SECONDS",
        help="capacity calibration length (default: %(default)s)",
    )
    p.add_argument(
        "--list-every",
        type=non_negative_int,
        default=20,
        metavar="N",
        help="every Nth flood request is a LIST of 500 pods; 0: creates only (default: %(default)s)",
    )
    p.add_argument(
        "--max-requests-inflight", type=non_negative_int, metavar="N", help="passed to the API server"
    )
    p.add_argument(
        "--max-mutating-requests-inflight",
        type=non_negative_int,
        metavar="N",
        help="passed to the API server",
    )
    p.add_argument(
        "--apiserver-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="pass ARG to the API server (repeatable; e.g. "
        "--apiserver-arg=--http2-max-streams-per-connection=0)",
    )
    p.add_argument("--nodes", type=positive_int, default=20, help="simulated nodes (default: %(default)s)")
    p.add_argument(
        "--rate", type=positive_float, default=10.0, help="steady workload pods/s (default: %(default)s)"
    )
    p.add_argument("--lease-duration", action=PositiveDuration, default=15.0, metavar="SECONDS")
    p.add_argument("--renew-deadline", action=PositiveDuration, default=10.0, metavar="SECONDS")
    p.add_argument("--retry-period", action=PositiveDuration, default=2.0, metavar="SECONDS")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of a table")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (data, certs, logs) and say where")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    from harness.bench.overload import OverloadConfig, run, table
    from harness.stoppable import Stopped, run_stoppable

    cfg = OverloadConfig(
        duration=args.duration,
        fairness=args.fairness == "on",
        flood_procs=args.flood_procs,
        flood_factor=args.flood_factor,
        flood_door=args.flood_door,
        max_outstanding=args.max_outstanding,
        calibrate_s=args.calibrate,
        list_every=args.list_every,
        nodes=args.nodes,
        rate=args.rate,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        max_requests_inflight=args.max_requests_inflight,
        max_mutating_requests_inflight=args.max_mutating_requests_inflight,
        extra_apiserver_args=tuple(args.apiserver_arg),
        keep=args.keep,
    )

    async def bench() -> dict[str, Any]:
        return await run(cfg)

    try:
        result = run_stoppable(bench)
    except Stopped as e:
        print(f"kse bench overload: {e.how}", file=sys.stderr)
        return e.exit_code
    except Exception as e:
        print(f"kse bench overload: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(table(result))
    return 0 if result["passed"] else 1
