"""Running selected workloads of a config and reporting them (`kse bench scheduler-perf`).

`run_workloads(pairs, new_cluster, available_plugins)` runs each (test case, workload) on a fresh
cluster from `new_cluster()` (an async context manager yielding a `Cluster`), one after another
as upstream does, and returns one `Result` per workload: its SchedulingThroughput summary (the
first metrics collection of the run), the attempt latency p50/p99, and the threshold. A workload
whose test case needs a plugin kse does not have is skipped with the reason; one that fails
(bad template, timeout) is reported with its error and the others still run.

Feature gates: kse's scheduler has its gates fixed (scheduler.framework.plugins.feature), so a
workload's featureGates change nothing here; they are listed in `ignored_feature_gates` and on
stderr, never silently dropped.

JSON (`result_json`): `{"name": "TEST/WORKLOAD", "threshold": number|null, "throughput":
{"Average", "Perc50", "Perc90", "Perc95", "Perc99"} (pods/s, as upstream's SchedulingThroughput
data item, null when the run was too short for one sample), "attempt_ms": {"p50", "p99"}}`; a
skipped or failed workload carries `"skipped"` or `"error"` (a string) and null measurements.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from kse.schedperf.config import ConfigError, TestCase, Workload
from kse.schedperf.executor import Cluster, Executor, WorkloadError
from kse.schedperf.metrics import BUCKETS
from kse.schedperf.objects import Renderer

# Test cases (by upstream name) whose point is a plugin kse may not have: they are skipped, with
# this reason, until the plugin is registered. Upstream's format has no way to say so itself.
PLUGIN_NEEDS: dict[str, tuple[str, ...]] = {
    "PreemptionBasic": ("DefaultPreemption",),
    "PreemptionAsync": ("DefaultPreemption",),
    "PreemptionPVs": ("DefaultPreemption",),
    "Unschedulable": ("DefaultPreemption",),
    "SchedulingPodAntiAffinity": ("InterPodAffinity",),
    "SchedulingPodAffinity": ("InterPodAffinity",),
    "SchedulingPreferredPodAffinity": ("InterPodAffinity",),
    "SchedulingPreferredPodAntiAffinity": ("InterPodAffinity",),
    "MixedSchedulingBasePod": ("InterPodAffinity",),
    "TopologySpreading": ("PodTopologySpread",),
    "PreferredTopologySpreading": ("PodTopologySpread",),
    "SchedulingNodeAffinity": ("NodeAffinity",),
    "SchedulingDaemonset": ("NodeAffinity",),
}

NewCluster = Callable[[], AbstractAsyncContextManager[Cluster]]


@dataclass
class Result:
    name: str
    threshold: float | None
    throughput: dict[str, float] | None = None
    attempt_ms: dict[str, float | None] | None = None
    scheduled: int = 0
    elapsed_s: float = 0.0
    cpu_s: float | None = None
    wall_s: float = 0.0
    skipped: str | None = None
    error: str | None = None
    ignored_feature_gates: dict[str, bool] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def pods_per_cpu_s(self) -> float | None:
        return self.scheduled / self.cpu_s if self.cpu_s else None

    @property
    def ratio(self) -> float | None:
        if self.threshold is None or self.throughput is None:
            return None
        return self.throughput["Average"] / self.threshold


def _progress(message: str) -> None:
    print(f"kse bench scheduler-perf: {message}", file=sys.stderr, flush=True)


def missing_plugins(case: TestCase, available: Iterable[str]) -> list[str]:
    have = set(available)
    return [p for p in PLUGIN_NEEDS.get(case.name, ()) if p not in have]


async def run_workload(case: TestCase, w: Workload, new_cluster: NewCluster) -> Result:
    name = f"{case.name}/{w.name}"
    res = Result(name=name, threshold=w.threshold or None)
    res.ignored_feature_gates = {**case.feature_gates, **w.feature_gates}
    if res.ignored_feature_gates:
        gates = ", ".join(f"{k}={str(v).lower()}" for k, v in res.ignored_feature_gates.items())
        _progress(f"{name}: featureGates ignored (kse's gates are fixed): {gates}")
    t0 = time.monotonic()
    try:
        async with new_cluster() as cluster:
            run = await Executor(cluster, case, w, Renderer()).run()
    except (WorkloadError, ConfigError) as e:
        res.error = str(e)
        res.wall_s = time.monotonic() - t0
        return res
    except Exception as e:  # an API error, a cluster that would not start: this workload failed
        res.error = f"{type(e).__name__}: {e}"
        res.wall_s = time.monotonic() - t0
        return res
    res.wall_s = time.monotonic() - t0
    res.warnings = run.warnings
    for warning in run.warnings:
        _progress(f"{name}: {warning}")
    if run.collections:
        c = run.collections[0]
        res.throughput = c.throughput
        res.attempt_ms = c.attempt_ms
        res.scheduled = c.scheduled
        res.elapsed_s = c.elapsed_s
        res.cpu_s = c.cpu_s
    return res


async def run_workloads(
    pairs: list[tuple[TestCase, Workload]],
    new_cluster: NewCluster,
    available_plugins: Iterable[str],
) -> list[Result]:
    plugins = set(available_plugins)
    out: list[Result] = []
    for case, w in pairs:
        missing = missing_plugins(case, plugins)
        if missing:
            reason = f"needs the {', '.join(missing)} plugin, which this scheduler does not register yet"
            _progress(f"{case.name}/{w.name}: skipped: {reason}")
            out.append(Result(f"{case.name}/{w.name}", w.threshold or None, skipped=reason))
            continue
        _progress(f"{case.name}/{w.name}: running")
        res = await run_workload(case, w, new_cluster)
        if res.error:
            _progress(f"{res.name}: error: {res.error}")
        else:
            avg = res.throughput["Average"] if res.throughput else None
            shown = f"{avg:.1f} pods/s" if avg is not None else "no throughput sample (shorter than 2 s)"
            _progress(f"{res.name}: {shown}, {res.scheduled} pods measured in {res.elapsed_s:.1f} s")
        out.append(res)
    return out


def _round(d: Mapping[str, float | None] | None, keys: Iterable[str]) -> dict[str, float | None] | None:
    if d is None:
        return None
    return {k: (round(d[k], 3) if d.get(k) is not None else None) for k in keys}  # type: ignore[arg-type]


def result_json(r: Result) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": r.name,
        "threshold": r.threshold,
        "throughput": _round(r.throughput, BUCKETS) if r.throughput else (
            None if (r.skipped or r.error) else dict.fromkeys(BUCKETS)
        ),
        "attempt_ms": _round(r.attempt_ms, ("p50", "p99")) if r.attempt_ms else (
            None if (r.skipped or r.error) else {"p50": None, "p99": None}
        ),
    }  # fmt: skip
    if r.skipped:
        out["skipped"] = r.skipped
    if r.error:
        out["error"] = r.error
    return out


def format_table(results: list[Result]) -> str:
    """A table for people: throughput buckets, the threshold and the ratio to it, and the
    scheduler's pods per CPU second over the collection (what a core of its own would give)."""
    header = (
        "workload",
        "avg pods/s",
        "p50",
        "p90",
        "p99",
        "threshold",
        "ratio",
        "attempt p50/p99 ms",
        "pods/cpu-s",
        "note",
    )
    rows: list[tuple[str, ...]] = [header]
    for r in results:
        t = r.throughput or {}

        def num(key: str, t: dict[str, float] = t) -> str:
            return f"{t[key]:.1f}" if key in t else "-"

        ratio = r.ratio
        att = r.attempt_ms or {}
        attempt = (
            f"{att['p50']:.2f} / {att['p99']:.2f}"
            if att.get("p50") is not None and att.get("p99") is not None
            else "-"
        )
        note = ""
        if r.skipped:
            note = f"skipped: {r.skipped}"
        elif r.error:
            note = f"error: {r.error}"
        elif not r.throughput:
            note = "too short for a 1 s sample"
        elif ratio is not None:
            note = "above threshold" if ratio > 1 else "BELOW threshold"
        rows.append((
            r.name, num("Average"), num("Perc50"), num("Perc90"), num("Perc99"),
            f"{r.threshold:g}" if r.threshold else "-",
            f"{ratio:.2f}x" if ratio is not None else "-",
            attempt, f"{r.pods_per_cpu_s:.0f}" if r.pods_per_cpu_s else "-", note,
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for row in rows:
        cells = [f"{c:<{widths[i]}}" if i == 0 else f"{c:>{widths[i]}}" for i, c in enumerate(row[:-1])]
        lines.append("  ".join(cells) + ("  " + row[-1] if row[-1] else ""))
    return "\n".join(lines)
