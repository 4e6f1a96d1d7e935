"""`kse bench throughput --nodes A,B,C` in process: one `run_in_process` per point, each in a
fresh child process (spawned, so no memory is inherited) whose own peak RSS (getrusage
ru_maxrss, read in the child when the run is over) is the point's `rss_mib`: the scheduler's
queue, cache, snapshot and framework state for that many nodes and pods, plus the interpreter.
`baseline_rss_mib` is the same child's resident set just before the run (interpreter, imports, a
framework over one node), after which the peak is reset (VmHWM, /proc/self/clear_refs) so that
`rss_mib` is the run's own peak: the memory goal is checked on the difference, what the nodes and pods cost.
Reported by kse.benchsweep (table with the goals, JSON list, PNG)."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import resource
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from kse.benchsweep import report
from scheduler.bench.throughput import JSON_KEYS, Config, _setup, run_in_process


def _peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)  # KiB on Linux


def _status_mib(field: str) -> float | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024.0, 1)
    return None


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: "5" into clear_refs), so the peak measured next is
    the run's, not the imports' transient allocations."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _point(cfg: Config) -> dict[str, Any]:
    # the baseline: interpreter, imports, the default profile's framework and queue, one node
    _setup(Config(nodes=1, init_pods=0, pods=1, batch=cfg.batch, workload=cfg.workload))
    gc.collect()
    baseline = _status_mib("VmRSS")
    reset = _reset_peak()
    result = asyncio.run(run_in_process(cfg))
    peak = _status_mib("VmHWM") if reset else None
    result["rss_mib"] = peak if peak is not None else _peak_mib()
    result["baseline_rss_mib"] = baseline if reset else None
    return result


def run_sweep(base: Config, nodes: list[int]) -> list[dict[str, Any]]:
    points = []
    ctx = multiprocessing.get_context("spawn")
    for n in nodes:
        cfg = Config(nodes=n, init_pods=base.init_pods, pods=base.pods, seed=base.seed, batch=base.batch,
                     workload=base.workload, gc_freeze=base.gc_freeze)  # fmt: skip
        print(
            f"kse bench throughput: {n} nodes, {cfg.init_pods} init pods, {cfg.pods} pods ...",
            file=sys.stderr,
        )
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            point = pool.submit(_point, cfg).result()
        print(
            f"kse bench throughput: {n} nodes: {point['pods_per_s']:.1f} pods/s, "
            f"peak RSS {point['rss_mib']:.0f} MiB",
            file=sys.stderr,
        )
        points.append(point)
    return points


def main_sweep(base: Config, nodes: list[int], as_json: bool, png: str) -> int:
    try:
        points = run_sweep(base, nodes)
    except KeyboardInterrupt:
        print("kse bench throughput: interrupted", file=sys.stderr)
        return 130
    report(
        points,
        JSON_KEYS,
        as_json,
        png,
        f"kse bench throughput, in-process, {base.workload}, {base.pods} pods",
    )
    return 0
