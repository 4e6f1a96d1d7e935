"""The short fuzz run of CI: `kse fuzz apiserver` with a fixed seed over both doors, 0 findings.

The full run (>= 10,000 requests, README "Fuzzing the API server") is the same command with a
larger --requests; this one keeps the contract alive: every RPC and HTTP route fuzzed, no INTERNAL,
no 5xx, no hang, no crash, nothing invalid in etcd, and the JSON summary's keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REQUESTS = 500
SEED = 1


@pytest.mark.timeout(240)
def test_short_fuzz_run_has_no_findings(tmp_path: Path):
    report = tmp_path / "report"
    args = ("--requests", str(REQUESTS), "--seed", str(SEED), "--json", "--report", str(report))
    proc = subprocess.run(
        [sys.executable, "-m", "kse", "fuzz", "apiserver", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        timeout=220,
    )
    assert proc.stdout, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    findings = (report / "findings.jsonl").read_text()
    assert proc.returncode == 0, findings[:5000]
    for key in (
        "requests",
        "by_door",
        "by_code",
        "crashes",
        "hangs",
        "internal",
        "invalid_in_etcd",
        "rss_mib",
    ):
        assert key in summary
    assert summary["seed"] == SEED and summary["requests"] == REQUESTS
    assert summary["findings"] == 0 and findings == ""
    assert summary["crashes"] == summary["hangs"] == summary["internal"] == summary["invalid_in_etcd"] == 0
    assert set(summary["by_door"]) == {"grpc", "http"}
    assert summary["objects_in_etcd"] > 2  # valid objects did get in (the namespace and node besides)
    assert set(summary["rss_mib"]) == {"start", "peak", "end"}
    assert json.loads((report / "summary.json").read_text()) == summary
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # its temp dir is gone


def test_bad_flags_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "kse", "fuzz", "apiserver", "--requests", "0"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "--requests" in proc.stderr
