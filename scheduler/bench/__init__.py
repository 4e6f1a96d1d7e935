"""Scheduler benchmarks. `register_throughput(sub)` adds `kse bench throughput` to the
subparsers of `kse bench`; it imports nothing heavy, the benchmark module is loaded only when the
command runs (so `kse --help` stays fast)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from kse.flags.argtypes import non_negative_int as _count
from kse.flags.argtypes import positive_int as _positive

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

DEFAULT_NODES = 5000
DEFAULT_INIT_PODS = 1000
DEFAULT_PODS = 10000


def register_throughput(sub: SubParsers) -> argparse.ArgumentParser:
    """Add `kse bench throughput` (upstream scheduler_perf SchedulingBasic); returns its parser, whose
    `--e2e` the CLI routes to the harness."""
    p = sub.add_parser(
        "throughput",
        help="scheduling throughput, as scheduler_perf SchedulingBasic (pods/s, attempt latency)",
        description="Schedules PODS pods onto NODES nodes (4 CPU, 32Gi, 110 pods each) after "
        "INIT_PODS unmeasured ones (100m CPU, 500Mi each), with the default profile. By default "
        "in-process: the real scheduling queue and framework over an in-memory cache, binds "
        "written to the cache only. --e2e runs the scheduler process against the API server.",
    )
    p.add_argument(
        "--nodes",
        type=node_list,
        default=[DEFAULT_NODES],
        metavar="N[,N...]",
        help="nodes (default 5000); a comma-separated list runs one point per value, each in a fresh "
        "process, and reports pods/s and peak RSS per point with a PNG curve (--png)",
    )
    p.add_argument(
        "--init-pods",
        type=_count,
        default=DEFAULT_INIT_PODS,
        metavar="I",
        help="unmeasured pods (default 1000)",
    )
    p.add_argument(
        "--pods", type=_positive, default=DEFAULT_PODS, metavar="P", help="measured pods (default 10000)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the tie-break RNG (default 0)")
    p.add_argument(
        "--scalar",
        action="store_true",
        help="disable the plugins' batch (numpy) methods: the node-by-node reference path",
    )
    p.add_argument(
        "--workload",
        choices=(
            "basic",
            "pod-anti-affinity",
            "pod-affinity",
            "preferred-pod-affinity",
            "mixed-base-pod",
            "preemption-async",
        ),
        default="basic",
        help="in-process only: the scheduler_perf workload, SchedulingBasic (default), "
        "SchedulingPodAntiAffinity, SchedulingPodAffinity, SchedulingPreferredPodAffinity, "
        "MixedSchedulingBasePod (INIT_PODS of each of its five kinds) or PreemptionAsync "
        "(low-priority init pods, a preempting high-priority pod every 200 ms)",
    )
    p.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="in-process: freeze the loaded caches out of CPython's full collections before the "
        "measured phase and every 10 s of it, as `kse scheduler --gc-freeze` (default: on; "
        "--no-gc-freeze for the A/B)",
    )
    p.add_argument("--e2e", action="store_true", help="end to end: etcd, API server, scheduler process")
    p.add_argument("--keep", action="store_true", help="with --e2e: keep the temp dir (data, certs, logs)")
    p.add_argument(
        "--apiserver-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="with --e2e: pass ARG to the API server (repeatable; e.g. "
        "--apiserver-arg=--group-commit-inflight=0 for the A/B)",
    )
    p.add_argument(
        "--scheduler-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="with --e2e: pass ARG to the scheduler (repeatable)",
    )
    p.add_argument(
        "--create-call",
        choices=("batch", "unary"),
        default="batch",
        help="with --e2e: how this process creates the nodes and pods: 'batch' the creates in flight "
        "coalesced into CreateBatch calls (kse.client.batcher), 'unary' one Create call each "
        "(default %(default)s)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout instead of a table (a list of them for a --nodes list)",
    )
    p.add_argument(
        "--png",
        default="kse-throughput-nodes.png",
        metavar="FILE",
        help="with a --nodes list: where to write the curve (default kse-throughput-nodes.png)",
    )
    p.set_defaults(func=_run_throughput)
    return p


def node_list(text: str) -> list[int]:
    """`5000` or `500,1000,5000,15000`: positive node counts, in the order given."""
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"invalid node list {text!r}: want N or N,N,...")
    return [_positive(t) for t in items]


def _run_throughput(args: argparse.Namespace) -> int:
    from scheduler.bench.throughput import main

    return main(args)
