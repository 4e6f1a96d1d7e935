"""`kse bench apiserver` in a tiny configuration: the JSON contract and the cleanup, not the targets.

Timing goals belong to the benchmark run on a quiet machine; here the numbers only have to exist,
have the right types and be positive.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bench.apiserver import METRICS, rows
from harness.bench.common import format_table

pytestmark = pytest.mark.integration

TINY = [
    *("--duration", "1", "--pods", "200", "--inflight", "16", "--watchers", "2", "--rate", "100"),
    *("--list-pods", "300", "--list-repeats", "2"),
]


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z":
            found.append(f"{entry}: {cmdline}")
    return found


def run_bench(tmp_path: Path, *extra: str) -> dict[str, object]:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "kse", "bench", "apiserver", "--json", *TINY, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, f"bench failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"--json must print exactly one line on stdout, got:\n{proc.stdout}"
    assert "[bench]" in proc.stderr, "progress goes to stderr"
    # Everything it started is gone, and so is its temp dir.
    assert _processes_mentioning(str(tmp_path)) == []
    assert list(tmp_path.iterdir()) == []
    result = json.loads(lines[0])
    assert isinstance(result, dict)
    return result


def check_contract(result: dict[str, object]) -> None:
    assert set(result) <= {*METRICS, "details"} and set(METRICS) <= set(result)
    for key in METRICS:
        value = result[key]
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (key, value)
        assert math.isfinite(value) and value > 0, (key, value)
    assert math.isclose(
        float(result["bind_to_etcd_ratio"]),  # type: ignore[arg-type]
        float(result["binds_per_s"]) / float(result["etcd_txn_per_s"]),  # type: ignore[arg-type]
        rel_tol=0.01,
    )
    assert result["watch_latency_ms_p99"] >= result["watch_latency_ms_p50"]  # type: ignore[operator]
    assert result["http_watch_latency_ms_p99"] >= result["http_watch_latency_ms_p50"]  # type: ignore[operator]
    details = result["details"]
    assert isinstance(details, dict)
    assert details["binds"]["ok"] == details["http_binds"]["ok"] == 200
    assert details["http_watch"]["events_received"] > 0
    assert details["http_list"]["items"] == 300 and details["http_list"]["repeats"] == 2
    for phase in ("etcd", "binds", "http_binds"):
        assert details[phase]["client_procs"] in (1, 2)
        assert details[phase]["cpu_percent"]["client"] > 0
    assert details["watch"]["events_received"] > 0
    # The table renders from the same object, with a verdict for each target.
    table = format_table(rows(result))
    assert "bind_to_etcd_ratio" in table and ("PASS" in table or "FAIL" in table)
    assert "http_binds_per_s / binds_per_s" in table and "http_watch_latency_ms_p99" in table


def test_bench_apiserver_json_contract(tmp_path: Path) -> None:
    result = run_bench(tmp_path)
    check_contract(result)
    assert result["details"]["binds"]["call"] == "BindBatch (clientset)"  # type: ignore[index]


def test_bench_apiserver_two_client_processes(tmp_path: Path) -> None:
    """Also the unary bind path (one Bind call per pod), where the HTTP door's ratio is judged."""
    result = run_bench(tmp_path, "--client-procs", "2", "--bind-call", "unary")
    check_contract(result)
    assert result["details"]["binds"]["call"] == "Bind (raw stub)"  # type: ignore[index]
    table = format_table(rows(result))
    assert "judged with --bind-call unary" not in table
    details = result["details"]
    assert details["config"]["client_procs"] == 2  # type: ignore[index]
    for phase in ("etcd", "binds", "http_binds"):
        assert details[phase]["client_procs"] == 2  # type: ignore[index]
