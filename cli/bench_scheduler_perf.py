"""`kse bench scheduler-perf --config FILE [--workload TEST/WORKLOAD ...] [--e2e] [--json]`.

Runs workloads of a config file in upstream scheduler_perf's format (kse.schedperf) in process
(scheduler.bench.perf_inprocess: the real scheduling queue, framework and cache) or, with --e2e,
against etcd, the API server and a `kse scheduler` process (harness.bench.scheduler_perf_e2e).
Prints a table (throughput, threshold, ratio) or, with --json, a list with one object per
workload. Without --workload, the workloads labelled `performance` run (upstream's benchmark
default, --label-filter changes it). Exit 0 when every selected workload ran (below-threshold
results are reported, not failed: the thresholds are upstream's, for Go on CI machines), 1 when
one failed, 2 for a bad config or flag.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

DEFAULT_LABEL_FILTER = "performance"


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "scheduler-perf",
        help="run workloads of an upstream scheduler_perf config (pods/s vs. upstream's thresholds)",
        description="Reads a config in upstream scheduler_perf's format (test cases, workloadTemplate, "
        "workloads with params, labels, threshold and featureGates; template files resolved relative to "
        "the config) and runs the selected workloads, each on a fresh cluster. Reports "
        "SchedulingThroughput (Average of once-per-second samples, Perc50/90/95/99, pods/s) and the "
        "attempt latency. Configs shipped with kse: bench/scheduler_perf/*/performance-config.yaml.",
    )
    p.add_argument("--config", required=True, metavar="FILE", help="the scheduler_perf config (YAML)")
    p.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="TEST/WORKLOAD",
        help="run this workload (TEST alone: all of its workloads); repeatable. Default: the workloads "
        f"selected by --label-filter ({DEFAULT_LABEL_FILTER!r} when no --workload is given)",
    )
    p.add_argument(
        "--label-filter",
        default=None,
        metavar="LABELS",
        help="upstream's label filter: comma-separated labels a workload (with its test case) must "
        "have, '-label' for one it must not have; e.g. integration-test,short",
    )
    p.add_argument("--e2e", action="store_true", help="end to end: etcd, API server, scheduler process")
    p.add_argument("--keep", action="store_true", help="with --e2e: keep the temp dirs (data, certs, logs)")
    p.add_argument("--seed", type=int, default=0, help="in-process: seed of the tie-break RNG (default 0)")
    p.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="in-process: freeze the loaded caches out of CPython's full collections when metrics "
        "collection starts and every 10 s, as `kse scheduler --gc-freeze` (default: on)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list (one object per workload)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from kse.schedperf.config import ConfigError, load_config, select
    from kse.schedperf.runner import format_table, result_json, run_workloads
    from scheduler.bench.perf_inprocess import registered_plugins

    try:
        cases = load_config(args.config)
        label_filter = args.label_filter
        if label_filter is None and not args.workload:
            label_filter = DEFAULT_LABEL_FILTER
        pairs = select(cases, args.workload, label_filter)
    except ConfigError as e:
        print(f"kse bench scheduler-perf: error: {e}", file=sys.stderr)
        return 2
    if not pairs:
        print(
            f"kse bench scheduler-perf: error: no workload selected (label filter {label_filter!r})",
            file=sys.stderr,
        )
        return 2
    if args.e2e:
        from harness.bench.scheduler_perf_e2e import E2ECluster

        def new_cluster():  # type: ignore[no-untyped-def]
            return E2ECluster(keep=args.keep)
    else:
        from scheduler.bench.perf_inprocess import InProcessCluster

        def new_cluster():  # type: ignore[no-untyped-def]
            return InProcessCluster(seed=args.seed, gc_freeze=args.gc_freeze)

    try:
        results = asyncio.run(run_workloads(pairs, new_cluster, registered_plugins(e2e=args.e2e)))
    except KeyboardInterrupt:
        print("kse bench scheduler-perf: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps([result_json(r) for r in results]))
    else:
        print(format_table(results))
    return 1 if any(r.error for r in results) else 0
