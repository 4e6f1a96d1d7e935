"""`kse what-if --cluster CLUSTER.yaml --pod POD.yaml [--config CONFIG.yaml] [-o json|table]`:
where would the scheduler put this pod, and why not elsewhere.

Runs one scheduling cycle offline (no API server) for the first Pod of POD.yaml against the Nodes
and bound Pods of CLUSTER.yaml, with the default profile or the first profile of CONFIG.yaml,
evaluating every node. The scheduler's code is imported only when the command runs (`kse --help`
stays fast). Exit status: 0 when the cycle ran (whether or not
a node fits), 1 for an unreadable or invalid input file, 2 for an invalid scheduler
configuration or arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kse.drain.drainer import DrainOptions
    from scheduler.drainplan import DrainPlan

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def register(subparsers: SubParsers) -> None:
    p = subparsers.add_parser(
        "what-if",
        help="explain where the scheduler would place a pod in a given cluster",
        description="Run one scheduling cycle for the pod of POD.yaml against the Nodes and bound Pods "
        "of CLUSTER.yaml (multi-document YAML or kind: List), evaluating every node: which filter "
        "rejected it, each score plugin's score, the weighted total, and the node selected; when no "
        "node fits, what preemption would do (the nominated node, its victims, every candidate).",
    )
    p.add_argument(
        "--cluster",
        metavar="CLUSTER.yaml",
        help="Nodes and bound Pods (and the Namespaces, PriorityClasses and PodDisruptionBudgets); "
        "required without --drain",
    )
    p.add_argument(
        "--pod", metavar="POD.yaml", help="the pod to schedule (its first Pod; required without --drain)"
    )
    p.add_argument(
        "--drain",
        nargs="+",
        metavar="NODE",
        help="instead of one pod: the plan of draining these nodes (as `kse drain --plan`), of the cluster "
        "in --cluster, else of the live cluster (connection file: `kse --config PATH`, $KSE_CONFIG)",
    )
    for flag, what in (
        ("--ignore-daemonsets", "ignore DaemonSet-managed pods"),
        ("--force", "also delete pods that declare no controller"),
        ("--delete-emptydir-data", "continue even if there are pods using emptyDir"),
        ("--disable-eviction", "delete instead of evict (no disruption budget is consulted)"),
    ):
        p.add_argument(flag, action="store_true", help=f"--drain: {what}")
    p.add_argument("--pod-selector", default="", help="--drain: label selector to filter pods on the nodes")
    p.add_argument(
        "--config",
        metavar="CONFIG.yaml",
        help="a KubeSchedulerConfiguration; its first profile is used (default: the default profile)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    p.add_argument("--seed", type=int, default=0, help="seed of the tie-break among equal scores (default 0)")
    p.set_defaults(func=run, parser=p)


def run(args: argparse.Namespace) -> int:
    from scheduler import whatif

    if args.drain:
        return run_drain_plan(args)
    missing = [f for f, v in (("--cluster", args.cluster), ("--pod", args.pod)) if not v]
    if missing:
        args.parser.error(f"the following arguments are required: {', '.join(missing)}")

    try:
        result = whatif.what_if_files(args.cluster, args.pod, args.config, seed=args.seed)
    except whatif.WhatIfError as e:
        print(f"kse what-if: error: {e}", file=sys.stderr)
        return int(e.exit_code)
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        sys.stdout.write(whatif.format_table(result))
    return 0


def run_drain_plan(args: argparse.Namespace) -> int:
    """`--drain NODE...`: the drain planner, on --cluster's objects or on the live cluster."""
    from kse.drain.drainer import DrainOptions as Options
    from scheduler import drainplan, whatif

    opts = Options(
        force=args.force,
        ignore_daemonsets=args.ignore_daemonsets,
        delete_emptydir_data=args.delete_emptydir_data,
        disable_eviction=args.disable_eviction,
        pod_selector=args.pod_selector,
    )
    if args.cluster is None:
        return _live_drain_plan(args, opts)
    try:
        state = drainplan.from_objects(whatif._load(args.cluster, "cluster"))
        plan = drainplan.plan_drain(state, args.drain, opts, config=args.config, seed=args.seed)
    except whatif.WhatIfError as e:
        print(f"kse what-if: error: {e}", file=sys.stderr)
        return int(e.exit_code)
    except drainplan.DrainPlanError as e:
        print(f"kse what-if: error: {e}", file=sys.stderr)
        return 1
    _print_plan(plan, args.output)
    return 0


def _print_plan(plan: DrainPlan, output: str) -> None:
    from scheduler import drainplan

    if output == "json":
        print(json.dumps(plan.to_json(), indent=2))
    else:
        sys.stdout.write(drainplan.format_table(plan))


def _live_drain_plan(args: argparse.Namespace, opts: DrainOptions) -> int:
    from cli.resource_io import CommandError, Out
    from cli.resource_io import run as run_with_clientset
    from kse.client.clientset import Clientset
    from scheduler import drainplan

    conn = argparse.Namespace(config=None, request_timeout=30.0)

    async def body(cs: Clientset, out: Out) -> None:
        state = await drainplan.read_cluster(cs)
        try:
            plan = drainplan.plan_drain(state, args.drain, opts, config=args.config, seed=args.seed)
        except drainplan.DrainPlanError as e:
            raise CommandError(str(e)) from None
        _print_plan(plan, args.output)

    return run_with_clientset(conn, body)
