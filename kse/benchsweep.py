"""`kse bench throughput --nodes 500,1000,5000,15000`: how scheduling cost grows with the cluster.

One run per point (each in a fresh process, so a point's peak RSS is its own), then this module
reports them, for both the in-process sweep (scheduler.bench.sweep) and the end-to-end one
(harness.bench.scheduler_e2e), which must not import each other:

* JSON: a list of the single-run objects `kse bench throughput --json` prints, each with
  `rss_mib` (peak RSS of the scheduler: this benchmark's child process in-process, the
  `kse scheduler` process with --e2e), in-process `baseline_rss_mib` (the child's peak before
  the run) and, with --e2e, `apiserver_rss_mib` and `etcd_rss_mib`;
* a table with the goals of the issue checked: throughput at the largest point >= 50 % of the
  smallest's, and scheduler memory <= 50 KiB per node + 5 KiB per pod (init and measured),
  counted over the baseline where there is one (in-process); with --e2e, where each peak is a
  whole `kse scheduler` process (interpreter, grpc, numpy: ~100 MiB before any object), the
  growth over the smallest point against the budget of the nodes and pods added since;
* a PNG: pods/s and peak RSS against the node count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KIB_PER_NODE = 50
KIB_PER_POD = 5
MIN_RETAINED = 0.5  # throughput at the largest point / at the smallest


def memory_budget_mib(point: dict[str, Any]) -> float:
    pods = int(point.get("init_pods", 0)) + int(point["pods"])
    return (KIB_PER_NODE * int(point["nodes"]) + KIB_PER_POD * pods) / 1024.0


def memory_allowance_mib(point: dict[str, Any], smallest: dict[str, Any]) -> tuple[float, float]:
    """(baseline, budget over it) of the scheduler's RSS at a point, in MiB: in-process its
    measured baseline and its budget; with --e2e (no baseline) the smallest point's RSS and the
    budget of what was added since."""
    base = point.get("baseline_rss_mib")
    if base is not None or smallest.get("rss_mib") is None:
        return base or 0.0, memory_budget_mib(point)
    return float(smallest["rss_mib"]), memory_budget_mib(point) - memory_budget_mib(smallest)


def memory_goal_mib(point: dict[str, Any], smallest: dict[str, Any]) -> float:
    """The scheduler's RSS the goal allows at a point (the curve's goal line)."""
    return sum(memory_allowance_mib(point, smallest))


def goals(points: Sequence[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The issue's goals, each with whether this sweep meets it."""
    out: list[tuple[str, bool]] = []
    if len(points) >= 2:
        first, last = points[0], points[-1]
        ratio = last["pods_per_s"] / first["pods_per_s"] if first["pods_per_s"] else 0.0
        out.append((
            f"throughput at {last['nodes']} nodes is {ratio:.0%} of that at {first['nodes']} "
            f"(goal >= {MIN_RETAINED:.0%})",
            ratio >= MIN_RETAINED,
        ))  # fmt: skip
        if first.get("pods_per_cpu_s") and last.get("pods_per_cpu_s"):
            cpu_ratio = last["pods_per_cpu_s"] / first["pods_per_cpu_s"]
            out.append((
                f"per CPU second (what a core of its own gives, whatever shares the machine): "
                f"{cpu_ratio:.0%} (goal >= {MIN_RETAINED:.0%})",
                cpu_ratio >= MIN_RETAINED,
            ))  # fmt: skip
    for p in points:
        if p.get("rss_mib") is None:
            continue
        in_process = p.get("baseline_rss_mib") is not None
        if not in_process and (p is points[0] or points[0].get("rss_mib") is None):
            continue  # --e2e: a whole process's peak; the smallest point is the others' baseline
        base, budget = memory_allowance_mib(p, points[0])
        used = p["rss_mib"] - base
        if in_process:
            what = f"{used:.0f} MiB over the {base:.0f} MiB baseline"
            rule = f"{KIB_PER_NODE} KiB/node + {KIB_PER_POD} KiB/pod"
        else:
            what = f"{used:.0f} MiB over the {base:.0f} MiB at {points[0]['nodes']} nodes"
            rule = f"{KIB_PER_NODE} KiB per added node + {KIB_PER_POD} KiB per added pod"
        out.append((
            f"scheduler peak RSS at {p['nodes']} nodes: {what} (goal <= {budget:.0f} MiB = {rule})",
            used <= budget,
        ))  # fmt: skip
    return out


def format_table(points: Sequence[dict[str, Any]]) -> str:
    e2e = any("apiserver_rss_mib" in p for p in points)
    cpu = any(p.get("pods_per_cpu_s") for p in points)
    header = ["nodes", "pods", "pods/s", "attempt p50 ms", "attempt p99 ms", "scheduler RSS MiB"]
    if cpu:
        header.append("pods/cpu-s")
    if e2e:
        header += ["apiserver RSS MiB", "etcd RSS MiB"]
    rows = [header]
    for p in points:
        row = [str(p["nodes"]), str(p["pods"]), f"{p['pods_per_s']:.1f}", f"{p['attempt_ms_p50']:.3f}",
               f"{p['attempt_ms_p99']:.3f}", _mib(p.get("rss_mib"))]  # fmt: skip
        if cpu:
            row.append(f"{p['pods_per_cpu_s']:.1f}" if p.get("pods_per_cpu_s") else "-")
        if e2e:
            row += [_mib(p.get("apiserver_rss_mib")), _mib(p.get("etcd_rss_mib"))]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(f"{c:>{widths[i]}}" for i, c in enumerate(r)) for r in rows]
    for text, ok in goals(points):
        lines.append(f"{'ok  ' if ok else 'MISS'}  {text}")
    return "\n".join(lines)


def _mib(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def plot(points: Sequence[dict[str, Any]], path: str | Path, title: str) -> Path:
    """pods/s (left axis) and peak RSS (right axis) against nodes; returns the path written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(path)
    fig = Figure(figsize=(7.5, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    nodes = [p["nodes"] for p in points]
    ax.plot(nodes, [p["pods_per_s"] for p in points], "o-", color="tab:blue", label="pods/s")
    if any(p.get("pods_per_cpu_s") for p in points):
        ax.plot(nodes, [p.get("pods_per_cpu_s") or float("nan") for p in points], "o:", color="tab:blue",
                label="pods per CPU second")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("pods/s", color="tab:blue")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    for key, label, color in (("rss_mib", "scheduler RSS", "tab:red"),
                              ("apiserver_rss_mib", "apiserver RSS", "tab:orange"),
                              ("etcd_rss_mib", "etcd RSS", "tab:green")):  # fmt: skip
        ys = [p.get(key) for p in points]
        if any(y is not None for y in ys):
            ax2.plot(
                nodes, [y if y is not None else float("nan") for y in ys], "s--", color=color, label=label
            )
    goal = [memory_goal_mib(p, points[0]) for p in points]
    ax2.plot(nodes, goal, ":", color="grey", label="scheduler memory goal")
    ax2.set_ylabel("peak RSS (MiB)")
    ax2.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="upper center", fontsize=8, ncol=3)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out


def report(
    points: Sequence[dict[str, Any]], keys: Sequence[str], as_json: bool, png: str | Path, title: str
) -> None:
    """Print the sweep (JSON list of single-run objects + RSS keys, or the table) and write the PNG."""
    import sys

    written = plot(points, png, title)
    print(f"kse bench throughput: curve written to {written}", file=sys.stderr)
    if as_json:
        extra = ("rss_mib", "baseline_rss_mib", "apiserver_rss_mib", "etcd_rss_mib")
        print(json.dumps([{k: p[k] for k in (*keys, *extra) if k in p} for p in points]))
    else:
        print(format_table(points))
