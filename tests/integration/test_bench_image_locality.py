"""`kse bench image-locality`, tiny variant: its JSON contract and its report files (the figures
belong to the study, not to this test; the ordering of latencies is not asserted for that reason,
only what must hold by construction)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bench.image_locality import JSON_KEYS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_tiny_study_json_contract_and_report(tmp_path: Path) -> None:
    spec = tmp_path / "images.txt"
    spec.write_text("# name=size\nexample.com/small:1=20Mi\nexample.com/big:1=300Mi, mid:1=80Mi\n")
    report = tmp_path / "report"
    out = subprocess.run(
        [sys.executable, "-m", "kse", "bench", "image-locality", "--nodes", "3", "--pods", "6",
         "--weights", "0,10", "--rate", "20", "--images", str(spec), "--node-bandwidth", "400Mi",
         "--registry-bandwidth", "800Mi", "--report", str(report), "--json"],
        capture_output=True,
        text=True,
        timeout=220,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(out.stdout)
    assert isinstance(rows, list) and [r["weight"] for r in rows] == [0, 10]
    for r in rows:
        assert tuple(r) == JSON_KEYS
        assert 0 <= r["startup_ms_p50"] <= r["startup_ms_p99"]
        assert isinstance(r["bytes_pulled"], int) and r["bytes_pulled"] >= 0
        assert 1 <= r["max_pods_per_node"] <= 6
    assert {p.name for p in report.iterdir()} == {"report.md", "results.json", "latency.png"}
    assert (report / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (report / "report.md").read_text()
    assert "| ImageLocality weight |" in md and "example.com/big:1" in md
    full = json.loads((report / "results.json").read_text())
    assert [w["weight"] for w in full["weights"]] == [0, 10]
    assert {"startup_ms_p90", "nodes_used"} <= set(full["weights"][0])


def test_bad_flags_name_the_flag() -> None:
    for argv, needle in (
        (["--weights", "0,x"], "weights: 'x' is not an integer"),
        (["--weights", "1,1"], "distinct"),
        (["--images", "nosize"], "--images"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "kse", "bench", "image-locality", *argv],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert needle in out.stderr
