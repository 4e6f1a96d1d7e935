"""`kse bench throughput` keeps its JSON contract in both modes (the figures belong to the benchmark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KEYS = {"mode", "nodes", "pods", "pods_per_s", "attempt_ms_p50", "attempt_ms_p99"}


@pytest.mark.parametrize(
    ("extra", "mode"),
    [([], "in-process"), (["--e2e"], "e2e")],
)
def test_throughput_json_contract(extra: list[str], mode: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kse",
            "bench",
            "throughput",
            "--nodes",
            "20",
            "--init-pods",
            "10",
            "--pods",
            "40",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert set(result) == KEYS
    assert result["mode"] == mode
    assert (result["nodes"], result["pods"]) == (20, 40)
    assert result["pods_per_s"] > 0
    assert 0 < result["attempt_ms_p50"] <= result["attempt_ms_p99"]


def test_node_sweep_json_and_png(tmp_path: Path) -> None:
    png = tmp_path / "curve.png"
    out = subprocess.run(
        [sys.executable, "-m", "kse", "bench", "throughput", "--nodes", "10,40", "--init-pods", "5",
         "--pods", "30", "--json", "--png", str(png)],
        capture_output=True,
        text=True,
        timeout=150,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    points = json.loads(out.stdout)
    assert [p["nodes"] for p in points] == [10, 40]
    for p in points:
        assert KEYS <= set(p) and p["mode"] == "in-process"
        assert p["rss_mib"] > 0
    assert png.read_bytes()[:4] == b"\x89PNG"
