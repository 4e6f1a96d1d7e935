"""`kse bench scheduler-perf` runs kse's shipped scheduler_perf configs: the smallest variants
(`integration-test,short`, as upstream's pull-kubernetes-integration) in process, so the format
keeps working, and one tiny workload end to end (etcd, API server, scheduler process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[2] / "bench" / "scheduler_perf"
BUCKETS = {"Average", "Perc50", "Perc90", "Perc95", "Perc99"}


def bench(*args: str, timeout: float = 110) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kse", "bench", "scheduler-perf", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check(results: list[dict[str, object]]) -> None:
    for r in results:
        assert {"name", "threshold", "throughput", "attempt_ms"} <= set(r), r
        assert "error" not in r, r
        if "skipped" in r:
            assert r["throughput"] is None and "plugin" in str(r["skipped"])
            continue
        assert set(r["throughput"]) == BUCKETS  # type: ignore[arg-type]
        assert set(r["attempt_ms"]) == {"p50", "p99"}  # type: ignore[arg-type]


@pytest.mark.parametrize("config", ["misc", "affinity", "topology_spreading"])
def test_smallest_variants_in_process(config: str) -> None:
    out = bench("--config", str(CONFIGS / config / "performance-config.yaml"),
                "--label-filter", "integration-test,short", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout)
    assert results, out.stderr
    check(results)
    ran = [r for r in results if "skipped" not in r]
    assert ran, "every workload was skipped"
    assert all(r["attempt_ms"]["p50"] is not None for r in ran)  # type: ignore[index]
    if config == "misc":
        # DefaultPreemption runs in process: the preemption workloads are measured, not skipped
        names = {str(r["name"]).split("/")[0] for r in ran}
        assert {"PreemptionBasic", "PreemptionAsync", "Unschedulable"} <= names, names


def test_one_tiny_workload_end_to_end() -> None:
    out = bench("--config", str(CONFIGS / "misc" / "performance-config.yaml"),
                "--workload", "SchedulingBasic/5Nodes", "--e2e", "--json", timeout=110)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    (result,) = json.loads(out.stdout)
    check([result])
    assert result["name"] == "SchedulingBasic/5Nodes" and result["threshold"] is None


def test_table_and_bad_input() -> None:
    out = bench(
        "--config", str(CONFIGS / "misc" / "performance-config.yaml"), "--workload", "SchedulingBasic/5Nodes"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[0].split()[:2] == ["workload", "avg"]
    assert "SchedulingBasic/5Nodes" in out.stdout
    out = bench(
        "--config", str(CONFIGS / "misc" / "performance-config.yaml"), "--workload", "SchedulingBasic/9Nodes"
    )
    assert out.returncode == 2 and "no such TEST/WORKLOAD" in out.stderr
    out = bench("--config", "/nonexistent.yaml")
    assert out.returncode == 2 and "cannot read" in out.stderr
