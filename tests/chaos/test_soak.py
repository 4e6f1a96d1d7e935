"""`kse chaos soak --duration 3m`, the short soak CI runs, end to end on a real local cluster (three
etcd members, the API server, three schedulers, two controller managers, the fleet and the
workload): every planned fault kind went in, every invariant passed on a history that exercised it
(zombie writes fenced, etcd's history read, rotations watched), every process was sampled, the
`--json` contract holds, the report is written, and nothing is left behind.

The one-hour soak runs outside CI (its figures are in the README)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from chaos import cli
from chaos.soak import SOAK_CHECKS, SOAK_RATES_PER_HOUR, soak_counts
from tests.fixtures.procs import procs_naming

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.timeout(600)]

RUN_KEYS = {"scenario", "seed", "passed", "invariants", "faults", "failovers", "rpc_errors_by_code"}
SOAK_KEYS = {"duration_s", "fault_counts", "planned_counts", "resources", "errors", "data_dir"}
CLUSTER_PROCESSES = {
    "etcd-0", "etcd-1", "etcd-2", "apiserver", "scheduler-1", "scheduler-2", "scheduler-3",
    "controller-manager-1", "controller-manager-2", "nodesim", "workload", "kse-chaos",
}  # fmt: skip


def test_a_three_minute_soak_injects_every_fault_kind_and_passes_every_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report"
    rc = cli.main(["soak", "--duration", "3m", "--seed", "1", "--json", "--report", str(report)])
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    result = json.loads(lines[0])
    assert set(result) == RUN_KEYS | SOAK_KEYS
    failed = {k: v["detail"] for k, v in result["invariants"].items() if not v["passed"]}
    assert result["passed"] and rc == 0, f"{failed}\n{result['errors']}\n{err[-4000:]}"

    assert result["duration_s"] == 180.0
    assert result["planned_counts"] == soak_counts(180) and set(result["fault_counts"]) == set(
        SOAK_RATES_PER_HOUR
    )
    assert result["fault_counts"] == result["planned_counts"], result["errors"]
    assert set(result["invariants"]) == {*SOAK_CHECKS, "continuous_safety", "no_resource_leak"}
    for name, inv in result["invariants"].items():
        assert not inv["detail"].startswith("SKIPPED"), f"{name}: {inv['detail']}"
    # The zombie round's binds arrived after its lease had passed to a successor: fenced off.
    stale = result["invariants"]["no_stale_writes"]["detail"]
    rejected = re.search(r"(\d+) stale rejected", stale)
    assert rejected is not None and int(rejected.group(1)) > 0, stale
    # 5 leader kills + a zombie + a partition: at least that many failovers.
    assert len(result["failovers"]) >= soak_counts(180)["leader-kill"] + 2, result["failovers"]

    processes = result["resources"]["processes"]
    assert {p["name"] for p in processes} == CLUSTER_PROCESSES
    assert any(p["judged"] for p in processes) and all(p["samples"] > 0 for p in processes)
    assert result["data_dir"] is None  # a passing soak leaves no data behind
    assert (report / "report.md").exists() and (report / "soak.json").exists()
    assert json.loads((report / "soak.json").read_text())["fault_counts"] == result["fault_counts"]

    deadline = time.monotonic() + 5.0
    while (left := procs_naming("kse-chaos-soak-")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes left behind: {left}\n{err[-3000:]}"


def test_soak_refuses_a_bad_duration(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["soak", "--duration", "-3m"])
    assert e.value.code == 2
    assert "--duration" in capsys.readouterr().err


def test_a_soak_whose_schedulers_do_not_elect_a_leader_is_stopped_at_the_first_overcommit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The guard proven on real processes: three schedulers with `--leader-elect=false` (and the API
    server's fencing off, which would refuse their unfenced binds), each bind
    held back 1 s (so each places pods its cache does not yet see the others'), on nodes of 300m
    (three of the workload's 100m pods). They over-commit within seconds of the first pods; the
    guard must stop the soak there, fail it, and keep its data dir for a post-mortem."""
    started = time.monotonic()
    rc = cli.main(
        [
            "soak", "--duration", "10m", "--seed", "1", "--json",
            "--scheduler-arg=--leader-elect=false", "--apiserver-arg=--fencing=off",
            "--scheduler-arg=--failpoints=binder/bind=delay(1000)",
            "--nodesim-arg=--cpu=300m",
        ]
    )  # fmt: skip
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    try:
        assert rc == 1 and not result["passed"]
        continuous = result["invariants"]["continuous_safety"]
        assert not continuous["passed"] and continuous["detail"].startswith("no_overcommit"), continuous
        # The end-of-run checker judged the history up to the stop, and agrees.
        assert not result["invariants"]["no_overcommit"]["passed"], result["invariants"]["no_overcommit"]
        assert sum(result["fault_counts"].values()) < sum(result["planned_counts"].values())
        assert elapsed < 600, "the guard did not stop the soak: it ran its whole duration"
        assert result["data_dir"] is not None and Path(result["data_dir"]).is_dir()
        assert "VIOLATION (no_overcommit)" in err
    finally:
        if result.get("data_dir"):
            shutil.rmtree(result["data_dir"], ignore_errors=True)
