"""`kse chaos` without a cluster: usage errors, the --json contract and the exit status of a run
whose history fails an invariant (the runner replaced by a stub returning a judged history)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from chaos import cli, runner
from chaos.checker import CheckResult
from chaos.checker.invariants import InvariantResult
from chaos.history import FaultRecord, History, RpcErrorRecord
from chaos.scenario import find_scenario, load_scenario


def _outcome(passed: bool, errors: list[str] | None = None) -> runner.RunOutcome:
    scenario = load_scenario(find_scenario("kill-leader")).short()
    inv = {
        name: InvariantResult(name, True, "ok")
        for name in (
            "pods_bound_once",
            "no_pod_vanished",
            "no_overcommit",
            "no_stale_writes",
            "watch_integrity",
            "audit_matches_etcd",
        )
    }
    inv["no_stale_writes"] = InvariantResult(
        "no_stale_writes", passed, "1 stale accepted" if not passed else "0"
    )
    inv["no_rotation_rpc_errors"] = InvariantResult("no_rotation_rpc_errors", False, "not a scenario check")
    history = History(
        faults=[FaultRecord(1.0, "kill", "scheduler-1", {"identity": "scheduler-1_x"})],
        rpc_errors=[RpcErrorRecord(2.0, "scheduler-2", "/Bind", "UNAVAILABLE")] * 2,
    )
    return runner.RunOutcome(scenario, 5, CheckResult(inv), history, scenario.schedule(), errors or [])


@pytest.fixture
def stub_run(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    outcomes: list[Any] = []

    async def fake(scenario: Any, **kwargs: Any) -> runner.RunOutcome:
        return outcomes.pop(0)  # type: ignore[no-any-return]

    monkeypatch.setattr(runner, "run_scenario", fake)
    return outcomes


def test_json_contract_and_exit_0(stub_run: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    stub_run.append(_outcome(True))
    assert cli.main(["run", "kill-leader", "--short", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {
        "scenario",
        "seed",
        "passed",
        "invariants",
        "faults",
        "failovers",
        "rpc_errors_by_code",
    }
    assert out["passed"] is True and out["seed"] == 5 and out["scenario"] == "kill-leader"
    # Only the scenario's checks are judged (no_rotation_rpc_errors failed, but is not one of them).
    assert set(out["invariants"]) == {
        "pods_bound_once",
        "no_pod_vanished",
        "no_overcommit",
        "no_stale_writes",
        "watch_integrity",
        "audit_matches_etcd",
    }
    assert out["invariants"]["no_stale_writes"] == {"passed": True, "detail": "0"}
    assert out["faults"] == [
        {"ts": 1.0, "fault": "kill", "target": "scheduler-1", "detail": {"identity": "scheduler-1_x"}}
    ]
    assert out["failovers"] == []
    assert out["rpc_errors_by_code"] == {"UNAVAILABLE": 2}


def test_failed_invariant_exits_1(stub_run: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    stub_run.append(_outcome(False))
    assert cli.main(["run", "kill-leader", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] is False
    assert out["invariants"]["no_stale_writes"] == {"passed": False, "detail": "1 stale accepted"}


def test_fault_not_injected_fails_the_run(stub_run: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    stub_run.append(_outcome(True, ["t=1s kill leader: no leader to hit"]))
    assert cli.main(["run", "kill-leader"]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "no leader to hit" in captured.err


def test_report_dir(stub_run: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub_run.append(_outcome(True))
    assert cli.main(["run", "kill-leader", "--report", str(tmp_path / "r")]) == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert json.loads((tmp_path / "r" / "run.json").read_text())["passed"] is True
    # What was run comes first: the scenario, its seed, settings, date and version.
    first = report.splitlines()[:3]
    assert first[0].startswith("# kse chaos run: kill-leader (seed ")
    assert "with kse " in first[2] and "lease 15s/10s/2s" in first[2] and "replicas 3" in first[2]
    assert "## RPC errors by code (2)" in report and "| scheduler-2 | 2 |" in report
    run = json.loads((tmp_path / "r" / "report.json").read_text())["run"]
    assert run["name"] == "kill-leader" and run["kind"] == "chaos run" and run["version"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "no-such-scenario"], "no scenario 'no-such-scenario'"),
        (["run", "kill-leader", "--backend", "docker"], "--backend docker needs --attach"),
        (["run", "kill-leader", "--attach", "d", "--keep"], "--keep is for fresh clusters"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert needle in capsys.readouterr().err


def test_bad_scenario_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("name: s\nduration: 10\nfaults: [{at: 1, fault: kill, target: moon}]\n")
    assert cli.main(["run", str(p)]) == 2
    assert "faults[0].target: must be one of" in capsys.readouterr().err


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "kill-leader" in out and "INVALID" not in out
    assert out.splitlines()[0].split()[:3] == ["SCENARIO", "DURATION", "SHORT"]
    kill = next(line for line in out.splitlines() if line.startswith("kill-leader "))
    assert kill.split()[1:3] == ["60s", "10s"]  # scenarios/kill-leader.yaml: duration 60, short 10


def test_attach_to_a_missing_dir_or_cluster_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", "kill-leader", "--attach", str(tmp_path / "nope")]) == 1
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{}")
    assert cli.main(["run", "kill-leader", "--attach", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "cluster.json does not exist" in err and "kse up" in err


def test_attach_docker_without_the_module_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "chaos.docker_backend", None)  # as if the file were missing
    (tmp_path / "config.json").write_text("{}")
    assert cli.main(["run", "kill-leader", "--attach", str(tmp_path), "--backend", "docker"]) == 1
    assert (
        "docker backend (chaos/docker_backend.py) is not part of this installation" in capsys.readouterr().err
    )


def test_bind_gaps_are_the_pauses_that_stand_out() -> None:
    from chaos.checker.report import bind_gaps

    steady = [i * 0.1 for i in range(50)]  # 10 binds/s for 5 s
    resumed = [7.4 + i * 0.1 for i in range(20)]  # a 2.5 s pause, then the same pace
    assert bind_gaps(steady) == []
    [(start, length)] = bind_gaps([*steady, *resumed])
    assert start == pytest.approx(4.9) and length == pytest.approx(2.5)


def test_pending_pods_over_time_from_creates_binds_and_deletes() -> None:
    from chaos.checker.report import pending_over_time
    from kse.audit import AuditRecord

    def rec(ts: float, verb: str, name: str) -> AuditRecord:
        sub = "binding" if verb == "bind" else ""
        return AuditRecord(ts=ts, user="u", verb=verb, resource="pods", namespace="default", name=name,
                           code="OK", subresource=sub)  # fmt: skip

    audit = [rec(0.5, "create", "a"), rec(1.5, "create", "b"), rec(2.5, "bind", "a"), rec(3.5, "delete", "b")]
    # bins start at 0, 1, 2, 3, 4: a pending from bin 1, b from bin 2; a bound in bin 2, b deleted in bin 3
    assert pending_over_time(History(audit=audit), 0.0, 1.0, 5) == [0, 1, 2, 1, 0]


def test_every_replica_has_a_lane_and_a_restart_stays_on_its_replicas() -> None:
    from chaos.checker.report import replica_lanes
    from chaos.history import ReplicaLife

    lives = [
        ReplicaLife("scheduler-2", "scheduler", "scheduler-2_b", 1.0),  # a standby that never led
        ReplicaLife("scheduler-1", "scheduler", "scheduler-1_a", 1.0, ended_at=5.0, exit_code=-9),
        ReplicaLife("scheduler-1", "scheduler", "scheduler-1_c", 5.5),  # its restart
        ReplicaLife("controller-manager-1", "controller-manager", "controller-manager-1_d", 1.0),
    ]
    lanes = replica_lanes(History(replica_lives=lives), ["scheduler-1_a", "scheduler-1_c"])
    assert lanes == {
        "scheduler-1_a": "scheduler-1",
        "scheduler-1_c": "scheduler-1",
        "scheduler-2_b": "scheduler-2",
    }
    cm = replica_lanes(History(replica_lives=lives), ["controller-manager-1_d"])
    assert cm == {"controller-manager-1_d": "controller-manager-1"}
    # Without recorded lives (an attached run): one lane per holder, as they led.
    assert replica_lanes(History(), ["x", "y"]) == {"x": "x", "y": "y"}


def test_a_run_has_one_time_origin_the_recorded_one_or_its_first_record(tmp_path: Path) -> None:
    from chaos.history import ORIGIN_FILE, REPLICAS_FILE, ReplicaLife, write_origin, write_replica_lives

    fault = FaultRecord(ts=105.0, fault="kill", target="scheduler-1")
    assert History(faults=[fault]).origin() == 105.0 and History().origin() == 0.0
    write_origin(tmp_path, 100.0, "the first leader elected")
    write_replica_lives(tmp_path, [ReplicaLife("scheduler-1", "scheduler", "scheduler-1_a", 99.0)])
    h = History.load(tmp_path)
    assert h.origin() == 100.0 and h.replica_lives[0].identity == "scheduler-1_a"
    (tmp_path / ORIGIN_FILE).write_text('{"ts": ')  # torn: as if there were none
    (tmp_path / REPLICAS_FILE).unlink()
    h = History.load(tmp_path)
    assert h.origin_ts is None and h.replica_lives == []


def test_console_lines_carry_the_runs_time_from_t0_on() -> None:
    said: list[str] = []
    drive = runner.Drive(say=said.append)
    drive.say("cluster: starting")
    drive.t0 = time.monotonic() - 12.34
    drive.say("restart scheduler-1")
    assert said[0] == "cluster: starting"
    assert said[1].startswith("t=12.") and said[1].endswith("s restart scheduler-1")
