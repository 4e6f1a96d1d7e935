"""`kse bench overload` in a short form: the JSON contract, and what must hold whatever the
machine: no acknowledged write lost, the samplers saw the flood. The flood's figures are for the
bench run on a quiet machine (README, "Overload")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.bench.overload import table

pytestmark = pytest.mark.integration

SHORT = ["--duration", "4", "--calibrate", "1", "--flood-procs", "2", "--nodes", "3", "--rate", "2"]


def test_a_short_flood_reports_every_figure_and_loses_no_acknowledged_write() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kse", "bench", "overload", *SHORT, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: a check failed; the JSON says which
    result = json.loads(proc.stdout)
    assert result["benchmark"] == "overload" and result["fairness"] is True
    assert result["capacity_per_s"] > 0 and result["sent_per_s"] > 0 and result["accepted_per_s"] > 0
    assert result["acked_writes"] > 0 and result["acked_missing"] == 0
    assert result["checks"]["acked_writes_present"] is True
    assert result["lease_renew_ms"]["count"] > 0 and result["lease_holders"]
    assert set(result["rss_mib"]) == {"apiserver", "etcd"}
    assert result["passed"] == all(result["checks"].values())
    assert (proc.returncode == 0) == result["passed"]
    assert "leader changes" in table(result)


def test_a_short_flood_through_the_http_api_is_counted_as_the_grpc_one() -> None:
    """The same flood as kubectl's and client-go's clients send it: pods POSTed and listed as JSON
    over HTTPS; every acknowledged create is stored, and what the gate shed answers 429."""
    proc = subprocess.run(
        [sys.executable, "-m", "kse", "bench", "overload", *SHORT, "--flood-door", "http", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["flood_door"] == "http"
    assert result["capacity_per_s"] > 0 and result["accepted_per_s"] > 0
    assert result["acked_writes"] > 0 and result["acked_missing"] == 0
    # Every failure is one the server meant (429 shed, a deadline) or a request the pool never sent.
    assert set(result["flood_errors"]) <= {"RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "not_sent"}, result[
        "flood_error_samples"
    ]
    assert "Kubernetes HTTP API" in table(result)
