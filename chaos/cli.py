"""`kse chaos`: run fault-injection scenarios and judge them.

    kse chaos run kill-leader                    # a scenario by name (scenarios/) or a path
    kse chaos run scenarios/zombie-leader.yaml --short --json
    kse chaos run etcd-member-kill --seed 3 --report out/
    kse chaos run kill-leader --attach ~/.kse                  # against a running `kse up`
    kse chaos run upgrade-day --attach /var/lib/kse --backend docker   # compose's chaos service
    kse chaos list
    kse chaos soak --duration 1h --seed 1 --report out/     # hours of faults, checked as it goes

`run` starts a fresh local cluster (a temp dir), injects the scenario's faults on time, then checks
the run's history (`chaos.runner`). With `--attach DATA_DIR` it starts nothing: the faults hit the
running cluster through the chosen backend (local processes by pid from DATA_DIR/run/cluster.json,
or docker containers), and the run's files go to DATA_DIR/chaos/<scenario>-<time>/. Exit status: 0
when every check of the scenario passed, 1 when an invariant failed (or a fault could not be
injected, or the run could not be carried out), 2 for a bad scenario or usage.

`--json` prints one object: {"scenario", "seed", "passed", "invariants": {NAME: {"passed",
"detail"}}, "faults": [...], "failovers": [{"fault", "fault_to_acquire_ms", "gap_ms"}],
"rpc_errors_by_code": {...}}.

`soak` (`chaos.soak`) runs one long seeded schedule of faults on a fresh cluster; `--json` prints
the `run` object plus "fault_counts" ({kind: n} injected), "planned_counts", "resources" (RSS and
fds per process, the leak verdict), "duration_s", "errors" and "data_dir" (kept when it fails).
Exit status as `run`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from chaos.run_header import run_header
from chaos.scenario import SCENARIOS_DIR, Scenario, ScenarioError, find_scenario, load_scenario
from kse.durations import PositiveDuration

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse chaos", description=(__doc__ or "").splitlines()[0])
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    run = sub.add_parser("run", help="run a scenario on a fresh local cluster and check it")
    run.add_argument("scenario", metavar="SCENARIO", help="a YAML file, or a name from scenarios/")
    run.add_argument(
        "--seed", type=int, default=None, help="seed of random faults and targets (default: the scenario's)"
    )
    run.add_argument("--json", action="store_true", help="print the result as one JSON object")
    run.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="write report.md, report.json and timeline.png into DIR",
    )
    run.add_argument(
        "--short", action="store_true", help="scaled down for CI: 2 s lease, <= 5 nodes, <= 5 pods/s, 10-20 s"
    )
    run.add_argument(
        "--keep", action="store_true", help="keep the temp dir (cluster data, logs, the history)"
    )
    run.add_argument(
        "--attach",
        metavar="DATA_DIR",
        type=Path,
        default=None,
        help="run against the running cluster whose data dir this is (`kse up --data-dir`, or the "
        "compose volume); its own workload keeps going; the scenario's cluster section is ignored",
    )
    run.add_argument(
        "--backend",
        choices=("local", "docker"),
        default="local",
        help="how faults reach processes with --attach: local pids (default) or docker containers",
    )
    sub.add_parser("list", help="the scenarios shipped in scenarios/")
    soak = sub.add_parser("soak", help="a long seeded schedule of faults under load, checked as it goes")
    soak.add_argument(
        "--duration",
        action=PositiveDuration,
        required=True,
        metavar="D",
        help="how long the faults go on: seconds or a Go duration (3m, 1h)",
    )
    soak.add_argument("--seed", type=int, default=1, help="seed of the schedule and its targets (default 1)")
    soak.add_argument("--json", action="store_true", help="print the result as one JSON object")
    soak.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="write report.md, report.json, timeline.png, soak.json, resources.json",
    )
    soak.add_argument("--keep", action="store_true", help="keep the data dir even when the soak passes")
    soak.add_argument(
        "--faults",
        type=_fault_kinds,
        default=None,
        metavar="KIND,...",
        help="inject only these fault kinds (default: all of leader-kill, zombie-leader, leaf-rotation, "
        "ca-rotation, apiserver-restart, etcd-restart, partition)",
    )
    for component, to_whom, example in (
        ("scheduler", "every scheduler replica", "--leader-elect=false"),
        ("apiserver", "the API server", "--fencing=off"),
        ("nodesim", "the simulated nodes", "--cpu=2"),
    ):
        soak.add_argument(
            f"--{component}-arg",
            action="append",
            default=[],
            metavar="ARG",
            help=f"pass ARG to {to_whom}, after the soak's own flags (repeatable; e.g. "
            f"--{component}-arg={example}): a soak with a property broken on purpose",
        )
    return p


def _fault_kinds(text: str) -> tuple[str, ...]:
    from chaos.soak import soak_kinds

    try:
        return soak_kinds(tuple(k.strip() for k in text.split(",") if k.strip()))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def scenario_settings(s: Scenario, short: bool) -> dict[str, str]:
    """The settings a report's header names (`chaos.run_header`)."""
    c = s.cluster
    return {
        "form": "short" if short else "full",
        "duration": f"{s.duration:g}s",
        "replicas": str(c.replicas),
        "etcd members": str(c.etcd_members),
        "nodes": str(c.nodes),
        "rate": f"{c.rate:g} pods/s",
        "lease": f"{c.lease_duration:g}s/{c.renew_deadline:g}s/{c.retry_period:g}s",
        "election": c.election.strategy,
    }


def _list() -> int:
    """Each scenario's name, its faults-and-workload duration (full and `--short`; "+": and until
    its rounds are through), and what it does."""
    print(f"{'SCENARIO':30} {'DURATION':>8} {'SHORT':>6}  DESCRIPTION")
    for path in sorted(SCENARIOS_DIR.glob("*.yaml")):
        try:
            s = load_scenario(path)
        except ScenarioError as e:
            print(f"{path.stem:30} INVALID: {e}")
            continue
        more = "+" if s.rounds else ""  # rounds run until they are through: at least this long
        full, short = f"{s.duration:.3g}s{more}", f"{s.short().duration:.3g}s{more}"
        print(f"{s.name:30} {full:>8} {short:>6}  {s.description}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from chaos.checker import to_markdown, write_report
    from chaos.runner import RunError, run_scenario
    from harness.stoppable import Stopped, run_stoppable

    if args.backend != "local" and args.attach is None:
        print("kse chaos run: --backend docker needs --attach DATA_DIR", file=sys.stderr)
        return 2
    if args.attach is not None and args.keep:
        print("kse chaos run: --keep is for fresh clusters (attached runs keep their files)", file=sys.stderr)
        return 2
    try:
        scenario = load_scenario(find_scenario(args.scenario))
    except ScenarioError as e:
        print(f"kse chaos run: error: {e}", file=sys.stderr)
        return 2
    if args.short:
        scenario = scenario.short()
    logging.getLogger("harness.up.supervisor").setLevel(logging.ERROR)

    async def go() -> object:
        return await run_scenario(
            scenario, seed=args.seed, keep=args.keep, attach=args.attach, backend=args.backend
        )

    try:
        outcome = run_stoppable(go)  # SIGTERM stops the cluster in order, as Ctrl-C does
    except Stopped as e:
        print(f"kse chaos run: {e.how}", file=sys.stderr)
        return e.exit_code
    except (RunError, OSError) as e:
        print(f"kse chaos run: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    from chaos.runner import RunOutcome

    assert isinstance(outcome, RunOutcome)
    for err in outcome.errors:
        print(f"kse chaos run: fault not injected: {err}", file=sys.stderr)
    if args.report is not None:
        header = run_header("chaos run", scenario.name, outcome.seed, scenario_settings(scenario, args.short))
        paths = write_report(outcome.result, outcome.history, args.report, run=header)
        (args.report / "run.json").write_text(
            json.dumps(outcome.to_json(), indent=2) + "\n", encoding="utf-8"
        )
        print(f"[chaos] report: {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(outcome.to_json()) + "\n")
    else:
        print(f"scenario {scenario.name} (seed {outcome.seed}): {'PASS' if outcome.passed else 'FAIL'}")
        print(to_markdown(outcome.result))
    sys.stdout.flush()
    return 0 if outcome.passed else 1


def _soak(args: argparse.Namespace) -> int:
    from chaos.checker import write_report
    from chaos.runner import progress
    from chaos.soak import run_soak
    from harness.stoppable import Stopped, run_stoppable

    logging.getLogger("harness.up.supervisor").setLevel(logging.ERROR)

    async def go() -> object:
        return await run_soak(
            args.duration,
            args.seed,
            keep=args.keep,
            say=progress,
            scheduler_args=tuple(args.scheduler_arg),
            apiserver_args=tuple(args.apiserver_arg),
            nodesim_args=tuple(args.nodesim_arg),
            kinds=args.faults,
        )

    try:
        outcome = run_stoppable(go)
    except Stopped as e:
        print(f"kse chaos soak: {e.how}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        print(f"kse chaos soak: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    from chaos.soak import SoakOutcome
    from chaos.soak_resources import series_json

    assert isinstance(outcome, SoakOutcome)
    doc = outcome.to_json()
    if args.report is not None:
        scenario = outcome.run.scenario
        settings = {"duration": f"{args.duration:g}s", **scenario_settings(scenario, False)}
        if args.scheduler_arg:
            settings["scheduler args"] = " ".join(args.scheduler_arg)
        if args.apiserver_arg:
            settings["apiserver args"] = " ".join(args.apiserver_arg)
        if args.nodesim_arg:
            settings["nodesim args"] = " ".join(args.nodesim_arg)
        if args.faults is not None:
            settings["faults"] = ",".join(args.faults)
        header = run_header("chaos soak", "soak", args.seed, settings)
        paths = write_report(outcome.run.result, outcome.run.history, args.report, run=header)
        (args.report / "soak.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        (args.report / "resources.json").write_text(
            json.dumps(series_json(outcome.series)) + "\n", encoding="utf-8"
        )
        print(f"[chaos] report: {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(doc) + "\n")
    else:
        print(_soak_summary(doc))
    sys.stdout.flush()
    return 0 if outcome.passed else 1


def _soak_summary(doc: dict[str, object]) -> str:
    """The soak for people: verdict, faults injected of planned, every invariant, the processes."""
    planned = doc["planned_counts"]
    injected = doc["fault_counts"]
    assert isinstance(planned, dict) and isinstance(injected, dict)
    lines = [
        f"soak {doc['duration_s']:g}s (seed {doc['seed']}): {'PASS' if doc['passed'] else 'FAIL'}",
        "faults injected: " + ", ".join(f"{k} {injected.get(k, 0)}/{n}" for k, n in planned.items()),
        "",
        "| invariant | passed | detail |",
        "|---|---|---|",
    ]
    invariants = doc["invariants"]
    assert isinstance(invariants, dict)
    for name, v in invariants.items():
        lines.append(f"| {name} | {'yes' if v['passed'] else 'NO'} | {v['detail']} |")
    resources = doc["resources"]
    assert isinstance(resources, dict)
    lines += [
        "",
        "| process | pid | samples | RSS MiB first/last/peak | fds first/last | leak |",
        "|---|---|---|---|---|---|",
    ]
    for r in resources["processes"]:
        rss = "/".join(f"{x:g}" for x in r["rss_mib"]) if r["rss_mib"] else "-"
        fds = "/".join(str(x) for x in r["fds"]) if r["fds"] else "-"
        leak = r["leak"] or ("flat" if r["judged"] else "not judged (short-lived)")
        lines.append(f"| {r['name']} | {r['pid']} | {r['samples']} | {rss} | {fds} | {leak} |")
    for err in doc.get("errors") or []:  # type: ignore[attr-defined]
        lines.append(f"error: {err}")
    if doc.get("data_dir"):
        lines.append(f"data dir kept: {doc['data_dir']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.cmd == "run":
        return _run(args)
    if args.cmd == "list":
        return _list()
    if args.cmd == "soak":
        return _soak(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
