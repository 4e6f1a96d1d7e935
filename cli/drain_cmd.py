"""`kse cordon|uncordon|drain NODE...`: kubectl's node maintenance verbs, with its flags and output,
plus the drain planner.

    kse cordon n1                      # node/n1 cordoned
    kse drain n1 --ignore-daemonsets   # node/n1 cordoned, evicting pod default/web-1, pod/web-1 evicted,
                                       # node/n1 drained
    kse drain --plan n1 [-o json]      # what the drain would do (scheduler.drainplan); changes nothing
    kse drain --report                 # after a drain: its plan against what happened

The library is `kse.drain` (the drain) and `scheduler.drainplan` / `scheduler.drainreport`; this
module parses flags and prints kubectl's lines from the drain's progress records. A real drain also
records its plan (the `--plan` JSON, made just before cordoning) in --plan-file, default
`drain-plan.json` beside the connection file, for `--report`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.resource_io import CommandError, Out, run
from kse.client.clientset import Clientset
from kse.durations import DurationError, DurationFlag, non_negative_duration, parse_seconds
from kse.objects.labels import SelectorError, parse_selector
from kse.objects.timeutil import to_epoch

if TYPE_CHECKING:
    from kse.drain.drainer import DrainOptions, Progress
    from scheduler.drainplan import DrainPlan

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

PLAN_FILE_NAME = "drain-plan.json"


# ---------------------------------------------------------------- flags


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("nodes", nargs="*", metavar="NODE", help="the nodes")
    p.add_argument("-l", "--selector", default="", help="selector (label query) on nodes, instead of names")
    p.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        choices=("none", "client", "server"),
        help='"none" (default), "client" (print only) or "server" (every write sent with dryRun)',
    )
    p.add_argument(
        "--config", metavar="PATH", help="connection file (default: $KSE_CONFIG, ~/.kse/config.json)"
    )
    p.add_argument(
        "--request-timeout",
        action=DurationFlag,
        default=30.0,
        metavar="SECONDS",
        help="time limit for each request (default 30)",
    )


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None


def _duration(text: str) -> float:
    try:
        return non_negative_duration(text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(subparsers: SubParsers) -> None:
    for verb, desired in (("cordon", True), ("uncordon", False)):
        p = subparsers.add_parser(
            verb,
            help=f"mark nodes as {'un' if desired else ''}schedulable, as kubectl {verb}",
            description=f"Set spec.unschedulable={'true' if desired else 'false'} on each node.",
        )
        _common(p)
        p.set_defaults(func=run_cordon, desired=desired, verb=verb)

    p = subparsers.add_parser(
        "drain",
        help="cordon nodes and evict their pods, as kubectl drain; --plan predicts, --report compares",
        description="Cordon the nodes, then evict (or delete) their pods with kubectl drain's filters, "
        "retrying while a PodDisruptionBudget refuses (429), and wait until they are gone. --plan "
        "predicts the drain without changing anything; --report compares the last plan with what happened.",
    )
    _common(p)
    p.add_argument("--force", action="store_true", help="also delete pods that declare no controller")
    p.add_argument("--ignore-daemonsets", action="store_true", help="ignore DaemonSet-managed pods")
    p.add_argument(
        "--delete-emptydir-data", action="store_true", help="continue even if there are pods using emptyDir"
    )
    p.add_argument("--delete-local-data", action="store_true", help=argparse.SUPPRESS)  # deprecated alias
    p.add_argument(
        "--grace-period",
        type=_int,
        default=-1,
        metavar="SECONDS",
        help="grace period given to each pod; negative: the pod's own (default -1)",
    )
    p.add_argument(
        "--timeout",
        action=DurationFlag,
        default=0.0,
        metavar="DURATION",
        help="give up after this long (e.g. 30s, 5m); 0: never (default)",
    )
    p.add_argument("--pod-selector", default="", help="label selector to filter pods on the node")
    p.add_argument(
        "--disable-eviction",
        action="store_true",
        help="delete instead of evict (bypasses disruption budgets)",
    )
    p.add_argument(
        "--skip-wait-for-delete-timeout",
        type=_int,
        default=0,
        metavar="SECONDS",
        help="do not wait for pods whose deletionTimestamp is older than this (0: always wait)",
    )
    p.add_argument("--plan", action="store_true", help="predict the drain (changes nothing)")
    p.add_argument("--report", action="store_true", help="compare the recorded plan with what happened")
    p.add_argument(
        "--plan-file",
        metavar="PATH",
        help=f"where a drain records its plan and --report reads it (default: {PLAN_FILE_NAME} "
        "beside the connection file)",
    )
    p.add_argument(
        "--since",
        metavar="TIME",
        help="--report: count pods created since TIME (RFC 3339, or a duration ago: 10m) as "
        "replacements (default: the plan's time)",
    )
    p.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="--plan/--report output"
    )
    p.add_argument(
        "--scheduler-config",
        metavar="CONFIG.yaml",
        help="--plan: a KubeSchedulerConfiguration (first profile)",
    )
    p.add_argument("--seed", type=_int, default=0, help="--plan: seed of the tie-break among equal scores")
    p.set_defaults(func=run_drain)


# ---------------------------------------------------------------- nodes


async def _node_names(cs: Clientset, args: argparse.Namespace) -> list[str]:
    if args.nodes and args.selector:
        raise CommandError("cannot specify both a node name and a --selector option")
    if args.selector:
        try:
            parse_selector(args.selector)
        except SelectorError as e:
            raise CommandError(str(e)) from None
        found = await cs.nodes.list_all(label_selector=args.selector)
        if not found.items:
            raise CommandError("No resources found")
        return [n.metadata.name for n in found.items]
    if not args.nodes:
        raise CommandError(f"USAGE: {args.verb if hasattr(args, 'verb') else 'drain'} NODE [flags]")
    for name in args.nodes:
        await cs.nodes.get(name)  # NotFound before anything changes, as kubectl's builder
    return list(args.nodes)


def _suffix(dry_run: str) -> str:
    return {"client": " (dry run)", "server": " (server dry run)"}.get(dry_run, "")


# ---------------------------------------------------------------- cordon / uncordon


def run_cordon(args: argparse.Namespace) -> int:
    from kse.drain.cordon import set_unschedulable

    async def body(cs: Clientset, out: Out) -> None:
        for name in await _node_names(cs, args):
            result = await set_unschedulable(cs, name, args.desired, dry_run=args.dry_run)
            out.line(f"node/{name} {result.verb}{_suffix(args.dry_run) if result.changed else ''}")

    return run(args, body)


# ---------------------------------------------------------------- drain


def _options(args: argparse.Namespace) -> DrainOptions:
    from kse.drain.drainer import DrainOptions

    opts = DrainOptions(
        force=args.force,
        ignore_daemonsets=args.ignore_daemonsets,
        delete_emptydir_data=args.delete_emptydir_data or args.delete_local_data,
        grace_period=args.grace_period,
        timeout=args.timeout,
        pod_selector=args.pod_selector,
        disable_eviction=args.disable_eviction,
        skip_wait_for_delete_timeout=args.skip_wait_for_delete_timeout,
        dry_run=args.dry_run,
    )
    try:
        opts.validate()
    except ValueError as e:
        raise CommandError(str(e)) from None
    return opts


def plan_file(args: argparse.Namespace) -> Path:
    if args.plan_file:
        return Path(args.plan_file)
    from kse.config import ConfigError, resolve

    try:
        return resolve(args.config).parent / PLAN_FILE_NAME
    except ConfigError as e:
        raise CommandError(str(e)) from None


class ProgressPrinter:
    """kubectl drain's lines for the drain's progress records (pkg/cmd/drain/drain.go)."""

    def __init__(self, out: Out, dry_run: str) -> None:
        self.out = out
        self.suffix = _suffix(dry_run)

    def __call__(self, p: Progress) -> None:
        from kse.drain import drainer as d

        if p.kind == d.CORDONED:
            changed = not p.message.startswith("already")
            self.out.line(f"node/{p.node} {p.message}{self.suffix if changed else ''}")
        elif p.kind == d.WARNING:
            self.out.note(f"Warning: {p.message}")
        elif p.kind == d.EVICTING:
            self.out.line(f"evicting pod {p.pod}{self.suffix}")
        elif p.kind == d.RETRY:
            self.out.note(
                f'error when evicting pods/"{p.name}" -n "{p.namespace}" (will retry after 5s): {p.message}'
            )
        elif p.kind in (d.EVICTED, d.DELETED):
            self.out.line(f"pod/{p.name} {p.kind}{self.suffix}")
        elif p.kind == d.SKIPPED_WAIT:
            self.out.line(p.message)
        elif p.kind == d.PENDING:
            self.out.note(f'There are pending pods in node "{p.node}" when an error occurred: {p.message}')
            for name in p.pods:
                self.out.note(f"pod/{name}")
        elif p.kind == d.DRAINED:
            self.out.line(f"node/{p.node} drained{self.suffix}")


async def _plan(cs: Clientset, args: argparse.Namespace, nodes: list[str], opts: DrainOptions) -> DrainPlan:
    from scheduler import drainplan

    state = await drainplan.read_cluster(cs)
    try:
        return drainplan.plan_drain(state, nodes, opts, config=args.scheduler_config, seed=args.seed)
    except drainplan.DrainPlanError as e:
        raise CommandError(str(e)) from None


def print_plan(out: Out, plan: DrainPlan, output: str) -> None:
    from scheduler import drainplan

    if output == "json":
        out.line(json.dumps(plan.to_json(), indent=2))
    else:
        out.write(drainplan.format_table(plan))


def _since(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return to_epoch(text)
    except ValueError:
        pass
    try:
        return time.time() - parse_seconds(text)
    except DurationError:
        raise CommandError(f"--since: expected an RFC 3339 time or a duration, got {text!r}") from None


def _report(args: argparse.Namespace) -> int:
    from scheduler import drainreport

    path = plan_file(args)
    try:
        plan_doc: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        print(f"error: cannot read the drain plan {str(path)!r}: {e.strerror or e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"error: the drain plan {str(path)!r} is not JSON: {e}", file=sys.stderr)
        return 1

    async def body(cs: Clientset, out: Out) -> None:
        since = _since(args.since)
        pods = (await cs.pods.list_all()).items
        try:
            report = drainreport.compare(plan_doc, pods, since)
        except drainreport.ReportError as e:
            raise CommandError(f"{path}: {e}") from None
        if args.output == "json":
            out.line(json.dumps(report.to_json(), indent=2))
        else:
            out.write(drainreport.format_table(report))

    return run(args, body)


def run_drain(args: argparse.Namespace) -> int:
    if args.plan and args.report:
        print("error: --plan and --report cannot be combined", file=sys.stderr)
        return 1
    if args.report:
        return _report(args)
    from kse.drain.drainer import Drainer

    try:
        opts = _options(args)  # bad flags are refused before anything connects
    except CommandError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    async def body(cs: Clientset, out: Out) -> None:
        nodes = await _node_names(cs, args)
        if args.plan:
            print_plan(out, await _plan(cs, args, nodes, opts), args.output)
            return
        if opts.dry_run == "none":
            await _record_plan(cs, args, nodes, opts, out)
        drainer = Drainer(cs, opts, ProgressPrinter(out, opts.dry_run))
        outcome = await drainer.drain(nodes)
        if not outcome.ok:
            why = f"due to error: {outcome.error}, continuing command..."
            out.note(f'error: unable to drain node "{outcome.failed}" {why}')
            if outcome.remaining:
                out.note("There are pending nodes to be drained:")
                for name in outcome.remaining:
                    out.note(f" {name}")
            # kubectl's CheckErr: an aggregate's errors one a line, as they are; else "error: ...".
            for line in outcome.errors or [f"error: {outcome.error}"]:
                out.error(line)

    return run(args, body)


async def _record_plan(
    cs: Clientset, args: argparse.Namespace, nodes: list[str], opts: DrainOptions, out: Out
) -> None:
    """The plan, for a later --report; a drain is never stopped by its plan (a note on failure)."""
    from kse.fileio import write_atomic

    try:
        plan = await _plan(cs, args, nodes, opts)
        write_atomic(plan_file(args), json.dumps(plan.to_json(), indent=2) + "\n")
    except (CommandError, OSError) as e:
        out.note(f"note: the drain plan was not recorded: {e}")
