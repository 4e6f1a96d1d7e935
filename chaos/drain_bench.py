"""`kse bench drain`: drain part of a fresh cluster in batches, under Deployments with budgets, and
measure what the drain cost.

A fresh local cluster (`harness.up`: etcd, the API server with fencing and an audit log, one
scheduler, one controller-manager, nodesim with N nodes whose pods stop within 0.5 s of their
deletion; no pod churn), D Deployments of R replicas, each with the budget `--pdb`, all available
before t=0. Then the first `--drain-nodes` K nodes (natural name order; default 10 % of N, at
least 1) are drained `--batch` B at a time, as `kubectl drain --force --ignore-daemonsets`
(`chaos.node_upgrade` without the kubelet restart and the uncordon: the nodes stay cordoned, as
after kubectl drain), evictions refused by a budget retried every second. The run's history (audit
log, the pods' timeline) is then judged:

    drain_s            first cordon -> last node drained (every pod of it gone)
    reschedule_ms_p50  per evicted Deployment pod: its eviction accepted -> its replacement Running
    reschedule_ms_p99    and Ready (replacements paired with evictions per ReplicaSet, in order)
    max_unavailable    most pods of one Deployment not available at once (replicas - available)
    evictions_refused  evictions a budget refused (429) and the drainer retried
    pdb_violations     the no_pdb_violation invariant's violations over the run's history

Extra keys: `nodes`, `batch`, `drain_nodes`, `deployments`, `replicas`, `pdb`, `evicted` (pods
evicted), `pending_max` (most Pending pods at once), `max_unavailable_by_deployment`. `--report
DIR` writes report.md, result.json and pending.png (Pending pods over time, when matplotlib is
installed).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.scenario import DeploymentSpec, FaultSpec

if TYPE_CHECKING:
    from chaos.history import History
    from chaos.node_upgrade import UpgradeStats
    from chaos.podtimeline import PodStateRecord

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["DrainBenchConfig", "measure", "parse_pdb", "register", "run"]

KEYS = (
    "drain_s",
    "reschedule_ms_p50",
    "reschedule_ms_p99",
    "max_unavailable",
    "evictions_refused",
    "pdb_violations",
)
TERMINATION_DELAY = "0.5s"
_PDB = re.compile(r"^(minAvailable|maxUnavailable)=([0-9]+%?)$")


def parse_pdb(text: str) -> tuple[int | str | None, int | str | None]:
    """`minAvailable=X` / `maxUnavailable=Y` (an integer or a percentage) -> (min, max);
    ValueError naming the flag."""
    m = _PDB.match(text)
    if m is None:
        raise ValueError(f"--pdb: must be minAvailable=N or maxUnavailable=N (N or N%), got {text!r}")
    value: int | str = m.group(2) if m.group(2).endswith("%") else int(m.group(2))
    return (value, None) if m.group(1) == "minAvailable" else (None, value)


@dataclass(frozen=True)
class DrainBenchConfig:
    nodes: int = 100
    batch: int = 1
    drain_nodes: int | None = None  # None: 10 % of the nodes, at least 1
    deployments: int = 4
    replicas: int | None = None  # None: nodes / 2, at least 2
    pdb: str = "maxUnavailable=1"
    seed: int = 0
    keep: bool = False

    @property
    def drained(self) -> int:
        return self.drain_nodes if self.drain_nodes is not None else max(1, self.nodes // 10)

    @property
    def per_deployment(self) -> int:
        return self.replicas if self.replicas is not None else max(2, self.nodes // 2)

    def problems(self) -> list[str]:
        out = []
        for name in ("nodes", "batch", "deployments"):
            if getattr(self, name) < 1:
                out.append(f"--{name}: must be >= 1, got {getattr(self, name)}")
        if self.drain_nodes is not None and not 1 <= self.drain_nodes < self.nodes:
            out.append(
                f"--drain-nodes: must be in [1, --nodes) (some node must stay), got {self.drain_nodes}"
            )
        if self.replicas is not None and self.replicas < 1:
            out.append(f"--replicas: must be >= 1, got {self.replicas}")
        try:
            parse_pdb(self.pdb)
        except ValueError as e:
            out.append(str(e))
        return out

    def workload(self) -> list[DeploymentSpec]:
        lo, hi = parse_pdb(self.pdb)
        return [DeploymentSpec(f"app-{i}", self.per_deployment, lo, hi) for i in range(self.deployments)]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank q-th percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _available(s: PodStateRecord) -> bool:
    return s.ready and s.phase == "Running" and not s.terminating and not s.deleted


def _reschedule_ms(states: Sequence[PodStateRecord], evicted_at: dict[str, float]) -> list[float]:
    """Per evicted ReplicaSet pod, eviction -> its replacement available (ms). The replacements of
    a ReplicaSet are its pods first seen after an eviction, paired with the evictions in order."""
    first: dict[str, PodStateRecord] = {}
    ready_at: dict[str, float] = {}
    for s in sorted(states, key=lambda s: (s.ts, s.resource_version)):
        first.setdefault(s.uid, s)
        if _available(s):
            ready_at.setdefault(s.uid, s.ts)
    owner_of_key: dict[str, str] = {s.key: s.owner for s in first.values()}
    evictions: dict[str, list[float]] = defaultdict(list)
    for key, ts in evicted_at.items():
        owner = owner_of_key.get(key, "")
        if owner.startswith("ReplicaSet/"):
            evictions[owner].append(ts)
    out: list[float] = []
    for owner, times in evictions.items():
        news = sorted((s for s in first.values() if s.owner == owner), key=lambda s: s.ts)
        used: set[str] = set()
        for t in sorted(times):
            repl = next((s for s in news if s.ts >= t and s.uid not in used), None)
            if repl is None or repl.uid not in ready_at:
                continue
            used.add(repl.uid)
            out.append((ready_at[repl.uid] - t) * 1000.0)
    return out


def _max_unavailable(
    states: Sequence[PodStateRecord], replicas: dict[str, int], since: float
) -> dict[str, int]:
    """Per Deployment (pods labelled app=NAME): the most of its replicas not available at once
    from `since` on."""
    avail: dict[str, dict[str, bool]] = defaultdict(dict)
    worst = dict.fromkeys(replicas, 0)
    for s in sorted(states, key=lambda s: (s.ts, s.resource_version)):
        app = s.labels.get("app", "")
        if app not in replicas:
            continue
        avail[app][s.uid] = _available(s)
        if s.ts >= since:
            down = replicas[app] - sum(avail[app].values())
            worst[app] = max(worst[app], down)
    return worst


def _pending_series(states: Sequence[PodStateRecord], since: float) -> list[tuple[float, int]]:
    """(seconds since `since`, Pending pods) at every change of the count."""
    pending: dict[str, bool] = {}
    out: list[tuple[float, int]] = []
    for s in sorted(states, key=lambda s: (s.ts, s.resource_version)):
        pending[s.uid] = not s.deleted and not s.terminating and (s.phase in ("", "Pending") or not s.node)
        n = sum(pending.values())
        if s.ts >= since and (not out or out[-1][1] != n):
            out.append((round(s.ts - since, 3), n))
    return out


def measure(cfg: DrainBenchConfig, history: History, stats: UpgradeStats) -> dict[str, Any]:
    """The result object (module doc) from a run's history and the drain's own counts."""
    from chaos.checker.drain_invariants import no_pdb_violation

    since = stats.first_cordon or 0.0
    states = history.pod_states
    resched = _reschedule_ms(states, stats.evicted_at)
    workload = {d.name: d.replicas for d in cfg.workload()}
    worst = _max_unavailable(states, workload, since)
    pending = _pending_series(states, since)
    pdb = no_pdb_violation(states, history.pdbs, history.audit)

    def r(v: float | None, nd: int = 1) -> float | None:
        return None if v is None else round(v, nd)

    drain_s = None if stats.last_drained is None else stats.last_drained - since
    return {
        "drain_s": r(drain_s, 3),
        "reschedule_ms_p50": r(percentile(resched, 50)),
        "reschedule_ms_p99": r(percentile(resched, 99)),
        "max_unavailable": max(worst.values(), default=0),
        "evictions_refused": stats.refused,
        "pdb_violations": len(pdb.violations),
        "nodes": cfg.nodes,
        "batch": cfg.batch,
        "drain_nodes": cfg.drained,
        "deployments": cfg.deployments,
        "replicas": cfg.per_deployment,
        "pdb": cfg.pdb,
        "evicted": stats.evicted,
        "pending_max": max((n for _, n in pending), default=0),
        "max_unavailable_by_deployment": worst,
        "_pending": pending,  # for the report only (removed from the JSON)
    }


async def run(
    cfg: DrainBenchConfig, *, say: Callable[[str], None], report_dir: Path | None = None
) -> dict[str, Any]:
    """One run: the cluster, the workload, the drain, the measurements (module doc)."""
    from chaos.cluster_setup import fencing_args
    from chaos.runner import Drive, RunError, drive_cluster
    from harness.bench.common import work_dir
    from harness.up import Cluster, ClusterPlan

    problems = cfg.problems()
    if problems:
        raise ValueError("; ".join(problems))
    fault = FaultSpec(
        "node-upgrade", "nodes", at=0.0, nodes=cfg.drained, batch=cfg.batch, pause=0.0, upgrade_kubelets=False
    )
    with work_dir("kse-drain-bench-", cfg.keep) as tmp:
        plan = ClusterPlan(
            data_dir=tmp / "kse",
            replicas=1,
            controller_managers=1,
            nodes=cfg.nodes,
            rate=0.0,
            workload=False,
            grace=10.0,
            apiserver_args=fencing_args(True),
            nodesim_args=("--seed", str(cfg.seed), "--termination-delay", TERMINATION_DELAY),
            rpc_error_logs=True,
        )
        # Through the drive (built below, before the cluster starts): t= from t=0 on.
        cluster = Cluster(plan, progress=lambda m: drive.say(f"cluster: {m}"))
        say(
            f"drain: {cfg.drained} of {cfg.nodes} nodes, batches of {cfg.batch}, {cfg.deployments} "
            f"deployments x {cfg.per_deployment} ({cfg.pdb}); data under {tmp}"
        )
        # The measurement ends when the workload is whole again: every evicted pod's replacement
        # bound and Ready (reschedule_ms), within 30 s; a quiet machine is there in about 2 s.
        drive = Drive(
            schedule=[fault],
            duration=0.1,
            seed=cfg.seed,
            say=say,
            settle_s=30.0,
            settle_until_ready=True,
            deployments=cfg.workload(),
        )
        history = await drive_cluster(
            cluster, drive, plan.data_dir / "chaos" / "drain", lease_duration=plan.election.lease_duration
        )
        if drive.errors:
            raise RunError("; ".join(drive.errors))
        assert drive.nemesis is not None and drive.nemesis.upgrades
        result = measure(cfg, history, drive.nemesis.upgrades[0])
    if report_dir is not None:
        write_report(report_dir, cfg, result)
    result.pop("_pending", None)
    return result


# ---------------------------------------------------------------------------------------------- report


def write_report(directory: Path, cfg: DrainBenchConfig, result: dict[str, Any]) -> list[Path]:
    from kse.fileio import write_atomic

    directory.mkdir(parents=True, exist_ok=True)
    pending = result.get("_pending", [])
    public = {k: v for k, v in result.items() if not k.startswith("_")}
    out = [directory / "report.md", directory / "result.json"]
    lines = [
        f"# kse bench drain: {cfg.drained} of {cfg.nodes} nodes in batches of {cfg.batch}",
        "",
        f"{cfg.deployments} Deployments x {cfg.per_deployment} replicas, budget {cfg.pdb}.",
        "",
        "| measure | value |",
        "|---|---|",
        *(f"| {k} | {public[k]} |" for k in (*KEYS, "evicted", "pending_max")),
        "",
        "Pending pods over time: pending.png.",
        "",
    ]
    write_atomic(out[0], "\n".join(lines))
    write_atomic(out[1], json.dumps({"config": asdict(cfg), "result": public}, indent=2) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return out
    fig, ax = plt.subplots(figsize=(8, 3.5))
    if pending:
        xs, ys = zip(*pending, strict=True)
        ax.step(xs, ys, where="post")
    ax.set_xlabel("seconds since the first cordon")
    ax.set_ylabel("Pending pods")
    ax.set_title(f"Pending pods while draining {cfg.drained} of {cfg.nodes} nodes (batch {cfg.batch})")
    fig.tight_layout()
    png = directory / "pending.png"
    fig.savefig(png, format="png")
    plt.close(fig)
    return [*out, png]


# ---------------------------------------------------------------------------------------------- CLI


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = DrainBenchConfig()
    p.add_argument("--nodes", type=_positive, default=d.nodes, help=f"simulated nodes (default {d.nodes})")
    p.add_argument("--batch", type=_positive, default=d.batch, help="nodes drained at once (default 1)")
    p.add_argument(
        "--drain-nodes", type=_positive, default=None, help="nodes drained (default 10%% of --nodes)"
    )
    p.add_argument("--deployments", type=_positive, default=d.deployments, help="Deployments (default 4)")
    p.add_argument("--replicas", type=_positive, default=None, help="replicas each (default --nodes / 2)")
    p.add_argument(
        "--pdb", default=d.pdb, help="each Deployment's budget: minAvailable=N or maxUnavailable=N (N or N%%)"
    )
    p.add_argument("--seed", type=int, default=0, help="nodesim's seed (default 0)")
    p.add_argument(
        "--report", type=Path, default=None, metavar="DIR", help="write report.md, result.json, pending.png"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of a table")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (data, certs, logs) and say where")
    p.set_defaults(func=_cli)


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "drain",
        help="drain nodes in batches under Deployments with budgets: drain time, rescheduling, availability",
        description=(__doc__ or "").split("\n\n", 1)[0],
    )
    add_arguments(p)


def _cli(args: argparse.Namespace) -> int:
    from harness.stoppable import Stopped, run_stoppable

    cfg = DrainBenchConfig(
        nodes=args.nodes,
        batch=args.batch,
        drain_nodes=args.drain_nodes,
        deployments=args.deployments,
        replicas=args.replicas,
        pdb=args.pdb,
        seed=args.seed,
        keep=args.keep,
    )
    problems = cfg.problems()
    if problems:
        print(f"kse bench drain: error: {'; '.join(problems)}", file=sys.stderr)
        return 2

    def say(m: str) -> None:
        print(f"[drain] {m}", file=sys.stderr, flush=True)

    began = time.monotonic()
    try:
        result = run_stoppable(lambda: run(cfg, say=say, report_dir=args.report))
    except Stopped as e:
        print(f"kse bench drain: {e.how}", file=sys.stderr)
        return e.exit_code
    except Exception as e:
        print(f"kse bench drain: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        for k, v in result.items():
            print(f"{k:<32} {v}")
        print(f"({time.monotonic() - began:.0f}s)", file=sys.stderr)
    return 0 if result["pdb_violations"] == 0 else 1
