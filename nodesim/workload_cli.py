"""`kse workload`: create pods from a template at a rate, in bursts, or to a total.

    kse workload --connection-file workload.json --rate 50 --total 1000 --json
    kse workload --pki-dir pki --server 127.0.0.1:6443 --burst 100 --burst-interval 10s --duration 5m
    kse workload ... --rate 20 --duration 10m --delete-after 30s      # churn

The identity is the PKI's `workload` client (CN kse:workload, O kse:workloads: create, delete, get,
list and watch pods); its files are followed while it runs (rotation swaps the channel, no create
fails), and `--rpc-error-log PATH` logs every failed RPC as a JSON line. On SIGTERM / SIGINT no
new pod is created, in-flight creates finish, and the summary is printed (`--json`: one JSON object
on stdout). Exit codes: 0 when every create succeeded, 1 when some failed (or it could not start),
2 for bad flags.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kse.config import ConnectionFile
from kse.durations import DurationFlag, PositiveDuration
from kse.fileio import write_atomic
from kse.flags.logging_args import add_log_level_flag
from nodesim.cli import (
    add_connection_flags,
    client_channel,
    non_negative_float,
    non_negative_int,
    positive_int,
    run_component,
    stop_on_signals,
)

log = logging.getLogger("workload")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse workload", description="Create pods at a rate.")
    t = p.add_argument_group("pods")
    t.add_argument(
        "--template",
        type=Path,
        metavar="FILE",
        help="a Pod manifest (default: scheduler_perf's pod-default, 100m CPU / 500Mi)",
    )
    t.add_argument("--namespace", "-n", default="default", help="(default %(default)s)")
    t.add_argument(
        "--name-prefix", default="", help="pod names are PREFIX<k> (default: <generateName or pod-><run id>-)"
    )
    t.add_argument(
        "--label", action="append", default=[], metavar="KEY=VALUE", help="extra pod label (repeatable)"
    )
    t.add_argument("--run-id", default="", help="value of the kse.io/workload-run label (default: random)")
    pace = p.add_argument_group("pacing")
    pace.add_argument(
        "--rate",
        type=non_negative_float,
        default=0.0,
        help="pods per second, on an absolute schedule (0: as fast as --concurrency allows)",
    )
    pace.add_argument(
        "--burst", type=non_negative_int, default=0, metavar="N", help="create N pods every --burst-interval"
    )
    pace.add_argument(
        "--burst-interval", action=PositiveDuration, default=1.0, metavar="DURATION", help="(default 1s)"
    )
    pace.add_argument("--total", type=non_negative_int, default=None, help="stop after N pods")
    pace.add_argument(
        "--duration",
        action=DurationFlag,
        default=None,
        metavar="DURATION",
        help="stop creating after this long",
    )
    pace.add_argument("--concurrency", type=positive_int, default=16, help="creates in flight (default 16)")
    pace.add_argument(
        "--delete-after",
        action=DurationFlag,
        default=None,
        metavar="DURATION",
        help="churn: delete each pod this long after it is Running",
    )
    pace.add_argument(
        "--drain-timeout",
        action=DurationFlag,
        default=60.0,
        metavar="DURATION",
        help="with --delete-after: how long to wait for the last deletions (default 60s)",
    )
    pace.add_argument(
        "--stop-grace",
        action=DurationFlag,
        default=30.0,
        metavar="DURATION",
        help="on a signal, how long in-flight creates may take (default 30s)",
    )
    add_connection_flags(p, "workload", pki_stem="workload")
    lim = p.add_argument_group("client")
    lim.add_argument(
        "--qps",
        type=non_negative_float,
        default=0.0,
        help="client QPS (default 0: unlimited; the pacing is --rate)",
    )
    lim.add_argument("--client-burst", type=positive_int, default=100, help="client burst (default 100)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object on stdout")
    p.add_argument("--ready-file", type=Path, help='written once connected: {"run_id": ID, "pid": N}')
    add_log_level_flag(p)
    return p


def config_from_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> object:
    from nodesim.template import TemplateError, parse_labels
    from nodesim.workload import WorkloadConfig, WorkloadError, load_pod_template, new_run_id

    try:
        kwargs: dict[str, object] = {}
        if args.template is not None:
            kwargs["template"] = load_pod_template(args.template)
        return WorkloadConfig(
            namespace=args.namespace,
            name_prefix=args.name_prefix,
            rate=args.rate,
            burst=args.burst,
            burst_interval=args.burst_interval,
            total=args.total,
            duration=args.duration,
            concurrency=args.concurrency,
            delete_after=args.delete_after,
            drain_timeout=args.drain_timeout,
            stop_grace=args.stop_grace,
            run_id=args.run_id or new_run_id(),
            labels=parse_labels(args.label),
            **kwargs,  # type: ignore[arg-type]
        )
    except (WorkloadError, TemplateError, ValueError, OSError) as e:
        p.error(str(e))


def human_summary(d: dict[str, Any]) -> str:
    failed: dict[str, int] = d.get("failed") or {}
    lines = [
        f"run {d['run_id']}: created {d['created']} of {d['attempted']} pods in {d['duration_s']:.3f}s "
        f"({d['achieved_rate']:.2f} pods/s; stopped by {d['stopped_by']})",
    ]
    if failed:
        lines.append("failed: " + ", ".join(f"{code}={n}" for code, n in sorted(failed.items())))
    if d.get("running_seen") or d.get("deleted"):
        lines.append(
            f"running seen {d['running_seen']}, deleted {d['deleted']}, "
            f"pending deletes {d['pending_deletes']}"
        )
    return "\n".join(lines)


async def serve(args: argparse.Namespace, config: object, conn: ConnectionFile) -> int:
    from kse.client.clientset import Clientset
    from nodesim.workload import Workload, WorkloadConfig

    assert isinstance(config, WorkloadConfig)
    async with client_channel(args, conn) as channel:
        cs = Clientset(channel, qps=args.qps, burst=args.client_burst, user_agent="kse-workload/0.1")
        wl = Workload(cs, config)
        with stop_on_signals(wl.stop):
            if args.ready_file is not None:
                ready = {"run_id": config.run_id, "pid": os.getpid()}
                write_atomic(args.ready_file, json.dumps(ready) + "\n")
            summary = await wl.run()
    out = summary.to_dict()
    if args.json:
        print(json.dumps(out, sort_keys=True), flush=True)
    else:
        print(human_summary(out), flush=True)
    return 1 if summary.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_component(argv, build_parser(), "workload", config_from_args, serve, interrupted=1)
