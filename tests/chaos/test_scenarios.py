"""Every scenario shipped in scenarios/, short form (`kse chaos run NAME --short --json`), end to end
on a real local cluster, in this process: the run passes its checks, the `--json` object keeps its
contract, the faults were recorded, and nothing the run started is left behind.

Each run takes 15-40 s (a 2 s lease, 10-16 s of faults and workload, a CA rotation's phases where
there is one, the settle and the shutdown); under xdist they run in parallel.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from chaos import cli
from chaos.scenario import SCENARIOS_DIR, find_scenario, load_scenario
from tests.fixtures.procs import procs_naming

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(90)]

SHIPPED = sorted(p.stem for p in SCENARIOS_DIR.glob("*.yaml"))
KEYS = {"scenario", "seed", "passed", "invariants", "faults", "failovers", "rpc_errors_by_code"}
LEADER_FAILOVERS = {
    "kill-leader": 2,
    "term-leader": 2,
    "zombie-leader": 2,
    "partition-leader": 2,
    "expire-leader-cert": 1,
    "clock-skew": 1,  # stepped clocks and rates 0.6-1.5 cost nothing; a leader at rate 0.1 loses the lease
}
ROTATIONS = {"rotate-leaf-certs", "rotate-ca", "upgrade-day", "expire-leader-cert"}
NO_FAILOVER = {"rotate-leaf-certs", "rotate-ca"}  # a rotation must not cost the leader its lease
# Scenarios that drain nodes (node-upgrade): the drain invariants judge real evictions and cordons.
NODE_UPGRADES = {"rolling-node-upgrade", "upgrade-day"}
DRAIN_CHECKS = (
    "no_pdb_violation",
    "evictions_within_budget",
    "replacements_bound_once",
    "no_bind_to_cordoned",
    "deployments_restored",
)
# Scenarios whose leader has writes in flight across its lease expiry: fencing must reject some.
ZOMBIE_WRITES = {"zombie-leader", "partition-leader"}


def test_every_required_scenario_is_shipped() -> None:
    for name in (
        "kill-leader",
        "zombie-leader",
        "partition-leader",
        "rotate-leaf-certs",
        "rotate-ca",
        "expire-leader-cert",
        "clock-skew",
        "apiserver-restart",
        "etcd-member-kill",
        "upgrade-day",
        "rolling-node-upgrade",
    ):
        assert name in SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_scenario_short(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario(find_scenario(name)).short()
    argv = ["run", name, "--short", "--json"]
    report = tmp_path / "report"
    if name == "kill-leader":
        argv += ["--report", str(report)]
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    result = json.loads(lines[0])
    assert set(result) == KEYS
    assert result["scenario"] == name
    assert set(result["invariants"]) == set(scenario.checks)
    for inv in result["invariants"].values():
        assert set(inv) == {"passed", "detail"}
    failed = {k: v["detail"] for k, v in result["invariants"].items() if not v["passed"]}
    assert result["passed"], f"{failed}\n{err[-4000:]}"
    assert rc == 0

    # Every scheduled fault was recorded (a window: start and end records; steps inside a fault
    # carry "part_of", a process back after a fault "after").
    schedule = scenario.schedule(result["seed"])
    starts = [
        f
        for f in result["faults"]
        if f["detail"].get("phase") != "end" and "after" not in f["detail"] and "part_of" not in f["detail"]
    ]
    assert len(starts) == len(schedule), result["faults"]
    for f in result["faults"]:
        if f["target"].startswith("scheduler-"):
            assert f["detail"]["identity"].startswith(f["target"])
    for fo in result["failovers"]:
        assert set(fo) == {"fault", "fault_to_acquire_ms", "gap_ms"}
    if name in LEADER_FAILOVERS:
        assert len(result["failovers"]) == LEADER_FAILOVERS[name], result["failovers"]
        assert all(fo["fault_to_acquire_ms"] is not None for fo in result["failovers"])
    if name in ROTATIONS:
        rot = result["invariants"]["no_rotation_rpc_errors"]["detail"]
        assert not rot.startswith("SKIPPED"), rot
    if name in NO_FAILOVER:
        assert result["failovers"] == [], result["failovers"]
    if name in ZOMBIE_WRITES:
        stale = result["invariants"]["no_stale_writes"]["detail"]
        rejected = re.search(r"(\d+) stale rejected", stale)
        assert rejected is not None and int(rejected.group(1)) > 0, stale
    if name == "expire-leader-cert":
        assert "whose certificate was let expire" in result["invariants"]["no_rotation_rpc_errors"]["detail"]
        assert result["rpc_errors_by_code"].get("UNAVAILABLE", 0) > 0  # the expired leader's own
    if name in NODE_UPGRADES:
        for check in DRAIN_CHECKS:
            detail = result["invariants"][check]["detail"]
            assert not detail.startswith("SKIPPED"), f"{check}: {detail}"
        upgrade = [f for f in result["faults"] if f["fault"] == "node_upgrade"]
        (end,) = [f for f in upgrade if f["detail"]["phase"] == "end"]
        nodes = upgrade[0]["detail"]["nodes"]
        assert end["detail"]["upgraded"] == nodes and end["detail"]["evicted"] > 0, end
        cordons = [f for f in result["faults"] if f["fault"] in ("cordon", "uncordon")]
        assert len(cordons) == 2 * len(nodes) and all(f["detail"]["revision"] > 0 for f in cordons)
    if name == "kill-leader":
        assert (report / "report.md").exists() and (report / "run.json").exists()
        assert (report / "timeline.png").exists()

    # The run stops every process it started (a SIGKILLed group may take a moment to be reaped).
    deadline = time.monotonic() + 5.0
    while (left := procs_naming(f"kse-chaos-{name}-")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes left behind: {left}\n{err[-3000:]}"
