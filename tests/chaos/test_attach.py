"""`kse chaos run --attach`: a scenario against a cluster the run did not start.

The test starts a `harness.up.Cluster` itself (in this process: it writes run/cluster.json as `kse up`
does, and its supervisor restarts what dies), then runs a one-fault scenario (kill the leader)
attached to its data dir with the local backend: the fault goes by pid, the running cluster's
supervisor restarts the killed replica, a standby takes over, and the history (the cluster's own
audit log and rpc-errors files, the run's faults and watch deliveries under DATA_DIR/chaos/) passes
its checks with the workload still running.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.runner import run_scenario
from chaos.scenario import parse_scenario
from harness.up import BackoffPolicy, Cluster, ClusterPlan, ElectionPlan

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(120)]


async def test_attach_kill_leader(tmp_path: Path) -> None:
    from chaos.cluster_setup import fencing_args

    plan = ClusterPlan(
        data_dir=tmp_path / "kse",
        replicas=3,
        nodes=5,
        rate=5,
        election=ElectionPlan(lease_duration=2.0, renew_deadline=1.5, retry_period=0.5),
        restart_policy=BackoffPolicy(initial=0.5, cap=2.0, reset_after=5.0),
        apiserver_args=fencing_args(True),
        workload_args=("--delete-after", "10s"),
        rpc_error_logs=True,
    )
    scenario = parse_scenario(
        {
            "name": "attach-kill-leader",
            "duration": 6,
            "faults": [{"at": 1, "fault": "kill", "target": "leader"}],
            "checks": [
                "pods_bound_once",
                "no_pod_vanished",
                "no_overcommit",
                "no_stale_writes",
                "watch_integrity",
            ],
        }
    )
    lines: list[str] = []
    async with Cluster(plan) as cluster:
        assert (plan.run_dir / "cluster.json").is_file()
        await cluster.wait_for_leader(30)
        outcome = await run_scenario(scenario, attach=plan.data_dir, say=lines.append)
        # The cluster is still ours and still running: nothing was stopped by the attached run.
        assert cluster.workload is not None and cluster.workload.running
        assert cluster.apiserver is not None and cluster.apiserver.running
    log = "\n".join(lines)
    failed = {k: v["detail"] for k, v in outcome.to_json()["invariants"].items() if not v["passed"]}
    assert outcome.passed, f"{failed}\n{outcome.errors}\n{log}"
    assert outcome.run_dir is not None and outcome.run_dir.parent == plan.data_dir / "chaos"
    assert (outcome.run_dir / "faults.jsonl").is_file() and (outcome.run_dir / "final.json").is_file()
    kills = [f for f in outcome.history.faults if f.fault == "kill"]
    assert len(kills) == 1 and kills[0].detail.get("leader") is True, kills
    result = outcome.to_json()
    assert len(result["failovers"]) == 1 and result["failovers"][0]["fault_to_acquire_ms"] is not None
    json.dumps(result)  # the --json object stays serialisable
