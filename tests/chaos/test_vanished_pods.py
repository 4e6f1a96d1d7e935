"""`no_pod_vanished` on a real run: a short `kill-leader` on a real local cluster (etcd, the API
server over mTLS, three scheduler replicas, nodesim) passes it; the same run's files with bound pods
taken out of `final.json` (what etcd losing them would look like) fail it, naming exactly those
pods, while every other invariant still passes on them.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from chaos.checker import CheckResult, check
from chaos.history import SNAPSHOT_FILE
from chaos.runner import load_history, run_scenario
from chaos.scenario import find_scenario, load_scenario

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(120)]

REMOVED = 25


def _recheck(data_dir: Path, chaos_dir: Path, *, allow_pending: bool, lease_s: float) -> CheckResult:
    """The checker over the kept run's files, as the runner checks them."""
    history = load_history([data_dir / "audit" / "audit.jsonl"], chaos_dir, data_dir / "run", since=None)
    return check(history, allow_pending=allow_pending, lease_duration_s=lease_s, require_fence=True)


def test_pods_removed_from_a_real_runs_snapshot_are_caught() -> None:
    scenario = load_scenario(find_scenario("kill-leader")).short()
    outcome = asyncio.run(run_scenario(scenario, keep=True, say=lambda _m: None))
    assert outcome.run_dir is not None
    chaos_dir = outcome.run_dir
    data_dir = chaos_dir.parent.parent  # <tmp>/kse/chaos/<scenario>-<time>
    try:
        assert outcome.passed, {k: v.detail for k, v in outcome.result.invariants.items()}
        recheck = {"allow_pending": scenario.allow_pending, "lease_s": scenario.cluster.lease_duration}

        # Untouched, re-checked from the files: passes, and judged every pod it created.
        intact = _recheck(data_dir, chaos_dir, **recheck)
        vanished = intact.invariants["no_pod_vanished"]
        assert intact.passed, {k: v.detail for k, v in intact.invariants.items() if not v.passed}
        assert vanished.counts["vanished"] == 0 and vanished.counts["created"] > 0, vanished.detail

        # Bound pods taken out of the snapshot, as lost data: caught, by name, and only by it.
        snap_path = chaos_dir / SNAPSHOT_FILE
        snap = json.loads(snap_path.read_text(encoding="utf-8"))
        bound = [p for p in snap["pods"] if p.get("spec", {}).get("nodeName")]
        assert len(bound) >= REMOVED, f"only {len(bound)} bound pods in the run"
        removed = bound[:REMOVED]
        gone = {id(p) for p in removed}
        snap["pods"] = [p for p in snap["pods"] if id(p) not in gone]
        snap_path.write_text(json.dumps(snap), encoding="utf-8")

        broken = _recheck(data_dir, chaos_dir, **recheck)
        res = broken.invariants["no_pod_vanished"]
        assert not res.passed
        names = {f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}" for p in removed}
        assert {v["pod"] for v in res.violations} == names
        assert res.counts["vanished"] == REMOVED
        assert broken.failed() == ["no_pod_vanished"]
    finally:
        shutil.rmtree(data_dir.parent, ignore_errors=True)
