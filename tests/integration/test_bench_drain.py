"""`kse bench drain`, tiny variant: its JSON contract, its report files and what must hold by
construction (no budget violated, every evicted pod rescheduled, a budget of one at a time); the
figures belong to the benchmark runs in the README, not to this test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.drain_bench import KEYS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

EXTRA = {
    "nodes",
    "batch",
    "drain_nodes",
    "deployments",
    "replicas",
    "pdb",
    "evicted",
    "pending_max",
    "max_unavailable_by_deployment",
}


def test_tiny_drain_json_contract_and_report(tmp_path: Path) -> None:
    report = tmp_path / "report"
    out = subprocess.run(
        [sys.executable, "-m", "kse", "bench", "drain", "--nodes", "6", "--batch", "2", "--drain-nodes", "2",
         "--deployments", "2", "--replicas", "4", "--pdb", "maxUnavailable=1", "--report", str(report),
         "--json"],
        capture_output=True,
        text=True,
        timeout=220,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    r = json.loads(lines[0])
    assert set(r) == set(KEYS) | EXTRA
    assert r["pdb_violations"] == 0
    assert (r["nodes"], r["batch"], r["drain_nodes"], r["replicas"]) == (6, 2, 2, 4)
    assert r["drain_s"] is not None and r["drain_s"] > 0
    if r["evicted"]:
        assert 0 < r["reschedule_ms_p50"] <= r["reschedule_ms_p99"]
    # maxUnavailable=1: the budget lets one pod of a Deployment go at a time
    assert all(0 <= v <= 1 for v in r["max_unavailable_by_deployment"].values()), r
    assert r["max_unavailable"] == max(r["max_unavailable_by_deployment"].values())
    assert isinstance(r["evictions_refused"], int) and r["evictions_refused"] >= 0
    assert {p.name for p in report.iterdir()} == {"report.md", "result.json", "pending.png"}
    assert (report / "pending.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "pdb_violations" in (report / "report.md").read_text()


def test_bad_flags_are_refused_before_anything_starts() -> None:
    for argv, needle in (
        (["--pdb", "half"], "--pdb: must be minAvailable=N or maxUnavailable=N"),
        (["--nodes", "4", "--drain-nodes", "4"], "--drain-nodes: must be in [1, --nodes)"),
        (["--batch", "0"], "--batch: must be >= 1"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "kse", "bench", "drain", *argv], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2 and needle in out.stderr, out.stderr
