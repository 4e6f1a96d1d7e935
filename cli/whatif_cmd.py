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
        required=True,
        metavar="CLUSTER.yaml",
        help="Nodes and bound Pods (and the Namespaces, PriorityClasses and PodDisruptionBudgets)",
    )
    p.add_argument("--pod", required=True, metavar="POD.yaml", help="the pod to schedule (its first Pod)")
    p.add_argument(
        "--config",
        metavar="CONFIG.yaml",
        help="a KubeSchedulerConfiguration; its first profile is used (default: the default profile)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format")
    p.add_argument("--seed", type=int, default=0, help="seed of the tie-break among equal scores (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from scheduler import whatif

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
