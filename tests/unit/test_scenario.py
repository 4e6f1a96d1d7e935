"""Scenario files: loading, validation errors that name the field, the seeded schedule, `--short`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaos.scenario import (
    SCENARIOS_DIR,
    FaultSpec,
    ScenarioError,
    find_scenario,
    load_scenario,
    parse_scenario,
)

SHIPPED = sorted(p.stem for p in SCENARIOS_DIR.glob("*.yaml"))


def base(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "t",
        "duration": 30,
        "cluster": {"replicas": 3, "nodes": 10, "rate": 10},
        "faults": [{"at": 5, "fault": "kill", "target": "leader"}],
    }
    d.update(over)
    return d


def error_of(data: object) -> str:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(data, source="x.yaml")
    return str(e.value)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenarios_load(name: str) -> None:
    s = load_scenario(find_scenario(name))
    assert s.name == name
    assert s.schedule(), "a scenario without faults"
    short = s.short()
    assert 0 < short.duration <= 20
    assert short.cluster.lease_duration == 2.0
    assert all(f.at is not None and f.at < short.duration for f in short.schedule())


def test_minimal_defaults() -> None:
    s = parse_scenario(base())
    assert s.checks == (
        "pods_bound_once",
        "no_pod_vanished",
        "no_overcommit",
        "no_stale_writes",
        "watch_integrity",
        "audit_matches_etcd",
    )
    assert s.cluster.etcd_members == 1 and s.cluster.lease_duration == 15.0
    assert s.faults == (FaultSpec("kill", "leader", at=5.0),)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([1, 2], "scenario: must be a mapping, got list"),
        ({"duration": 3, "faults": []}, "name: required"),
        (base(name="a b"), "name: must be letters"),
        (base(duration=None), "duration: required"),
        (base(duration=-1), "duration: must be > 0"),
        (base(duration="10s"), "duration: must be a number of seconds"),
        (base(extra=1), "extra: unknown field"),
        (base(cluster={"replicas": 0}), "cluster.replicas: must be >= 1"),
        (base(cluster={"replicas": "3"}), "cluster.replicas: must be an integer"),
        (base(cluster={"etcd_members": 2}), "cluster.etcd_members: must be odd"),
        (base(cluster={"lease_duration": 5, "renew_deadline": 6}), "cluster.renew_deadline: must be <"),
        (base(cluster={"election": "gossip"}), "cluster.election: must be one of watch, poll"),
        # client-go's rule: renewDeadline > JitterFactor (1.2) x retryPeriod
        (base(cluster={"renew_deadline": 10, "retry_period": 9}), "cluster.retry_period: must be < renew_"),
        (base(cluster={"lease_duration": 0.5}), "cluster.lease_duration: must be >= 1s"),
        (base(cluster={"on_lost_lease": "panic"}), "cluster.on_lost_lease: must be one of exit, standby"),
        (base(cluster={"nodes": 0}), "cluster.nodes: must be >= 1"),
        (base(cluster={"leases": 1}), "cluster.leases: unknown field"),
        (base(cluster=[]), "cluster: must be a mapping"),
        (base(faults={"at": 1}), "faults: must be a list"),
        (base(faults=[]), "faults: a scenario needs faults"),
        (base(faults=[{"at": 1, "fault": "explode", "target": "leader"}]), "faults[0].fault: must be one of"),
        (base(faults=[{"at": 1, "fault": "kill"}]), "faults[0].target: required"),
        (base(faults=[{"at": 1, "fault": "kill", "target": "moon"}]), "faults[0].target: must be one of"),
        (base(faults=[{"at": 1, "fault": "kill", "target": "scheduler-4"}]), "faults[0].target: no replica"),
        (base(faults=[{"at": 1, "fault": "kill", "target": "etcd-1"}]), "faults[0].target: no etcd member"),
        (base(faults=[{"fault": "kill", "target": "leader"}]), "faults[0].at: required"),
        (
            base(faults=[{"at": 30, "fault": "kill", "target": "leader"}]),
            "faults[0].at: must be before the end",
        ),
        (
            base(faults=[{"at": 1, "fault": "stop", "target": "leader", "duration": -2}]),
            "faults[0].duration: must be >= 0",
        ),
        (
            base(faults=[{"at": 1, "fault": "kill", "target": "leader", "duration": 2}]),
            "faults[0].duration: a killed",
        ),
        (
            base(faults=[{"at": 1, "fault": "restart", "target": "leader", "duration": 2}]),
            "faults[0].duration: a replica's restart",
        ),
        (
            base(faults=[{"at": 1, "fault": "kill", "target": "leader", "when": 2}]),
            "faults[0].when: unknown field",
        ),
        (
            base(
                faults=None,
                random={"every": 5, "faults": [{"fault": "kill", "target": "leader"}], "seed": -1},
            ),
            "random.seed: must be >= 0",
        ),
        (
            base(faults=None, random={"faults": [{"fault": "kill", "target": "leader"}]}),
            "random.every: required",
        ),
        (base(faults=None, random={"every": 5, "faults": []}), "random.faults: must list at least one"),
        (
            base(
                faults=None, random={"every": 5, "faults": [{"at": 3, "fault": "kill", "target": "leader"}]}
            ),
            "random.faults[0].at: unknown field",
        ),
        (
            base(faults=[{"at": 1, "fault": "partition", "target": "apiserver"}]),
            "faults[0].target: a partition cuts a scheduler replica",
        ),
        (
            base(faults=[{"at": 1, "fault": "clock-skew", "target": "leader", "rate": 0}]),
            "faults[0].rate: must be > 0",
        ),
        (
            base(faults=[{"at": 1, "fault": "clock-skew", "target": "leader", "offset": "5s"}]),
            "faults[0].offset: must be a number of seconds",
        ),
        (
            base(faults=[{"at": 1, "fault": "clock-skew", "target": "leader"}]),
            "faults[0].offset: a clock-skew needs an `offset`",
        ),
        (
            base(faults=[{"at": 1, "fault": "clock-skew", "target": "apiserver", "rate": 2}]),
            "faults[0].target: clock-skew applies to a scheduler replica",
        ),
        (
            base(faults=[{"at": 1, "fault": "kill", "target": "leader", "rate": 2}]),
            "faults[0].rate: only clock-skew faults take `rate`",
        ),
        (
            base(faults=[{"at": 1, "fault": "rotate-leaf", "target": "leader", "heal_after": 2}]),
            "faults[0].heal_after: only expire-cert faults take `heal_after`",
        ),
        (
            base(faults=[{"at": 1, "fault": "expire-cert", "target": "leader", "heal_after": 0}]),
            "faults[0].heal_after: must be > 0",
        ),
        (
            base(faults=[{"at": 1, "fault": "expire-cert", "target": "etcd"}]),
            "faults[0].target: expire-cert applies to a scheduler replica",
        ),
        (
            base(faults=[{"at": 1, "fault": "rotate-ca", "target": "leader"}]),
            "faults[0].target: a CA rotation reissues every leaf",
        ),
        (
            base(faults=[{"at": 1, "fault": "rotate-ca", "duration": 0}]),
            "faults[0].duration: must be > 0",
        ),
        (
            base(faults=[{"at": 1, "fault": "rotate-leaf", "target": "etcd-leader"}]),
            "faults[0].target: etcd members share one serving pair",
        ),
        (base(faults=[{"at": 1, "fault": "kill", "target": "all"}]), "faults[0].target: `all` is a target"),
        (
            base(faults=[{"at": 1, "fault": "partition", "target": "leader", "mode": "jitter"}]),
            "faults[0].mode: must be one of blackhole, delay, delay-up, loss",
        ),
        (
            base(faults=[{"at": 1, "fault": "partition", "target": "leader", "mode": "delay"}]),
            "faults[0].delay: a delay partition needs `delay`",
        ),
        (
            base(faults=[{"at": 1, "fault": "partition", "target": "leader", "mode": "loss", "loss": 2}]),
            "faults[0].loss: a fraction of the segments",
        ),
        (
            base(faults=[{"at": 1, "fault": "partition", "target": "leader", "delay": 0.2}]),
            "faults[0].mode: a blackhole partition forwards nothing",
        ),
        (
            base(faults=[{"at": 1, "fault": "kill", "target": "leader", "loss": 0.2}]),
            "faults[0].loss: only partition faults take `loss`",
        ),
        (base(checks=["pods_bound_once", "liveness"]), "checks[1]: unknown invariant 'liveness'"),
        (base(checks=[]), "checks: must name at least one"),
        (base(checks=["no_overcommit", "no_overcommit"]), "checks: names an invariant twice"),
        (base(allow_pending="yes"), "allow_pending: must be true or false"),
    ],
)
def test_errors_name_the_field(data: object, needle: str) -> None:
    msg = error_of(data)
    assert msg.startswith("x.yaml: "), msg
    assert needle in msg, msg


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: not valid YAML"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match=r"missing\.yaml"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(ScenarioError, match=r"no scenario 'nope'.*known: .*kill-leader"):
        find_scenario("nope")


def test_random_schedule_is_seeded() -> None:
    s = parse_scenario(
        base(
            faults=[{"at": 2, "fault": "term", "target": "scheduler-1"}],
            random={
                "seed": 3,
                "every": 5,
                "faults": [
                    {"fault": "kill", "target": "random-replica"},
                    {"fault": "stop", "target": "leader"},
                ],
            },
        )
    )
    a, b, c = s.schedule(), s.schedule(3), s.schedule(4)
    assert a == b
    assert [f.at for f in a] == [2.0, 5.0, 10.0, 15.0, 20.0, 25.0]
    assert a[0] == FaultSpec("term", "scheduler-1", at=2.0)
    assert [f.at for f in c] == [f.at for f in a]
    assert any(x != y for x, y in zip(a, c, strict=True)) or len({f.fault for f in a}) == 1


def test_short_keeps_a_stop_past_the_lease() -> None:
    s = parse_scenario(
        base(
            duration=60,
            faults=[
                {"at": 10, "fault": "stop", "target": "leader", "duration": 25},
                {"at": 40, "fault": "stop", "target": "leader"},
            ],
        )
    )
    short = s.short()
    assert short.cluster.nodes == 5 and short.cluster.rate == 5.0
    assert (short.cluster.lease_duration, short.cluster.renew_deadline, short.cluster.retry_period) == (
        2.0,
        1.5,
        0.5,
    )
    assert short.duration == 10.0
    first, second = short.schedule()
    assert first.at == pytest.approx(10 / 6, abs=0.01) and first.duration is not None and first.duration > 2.0
    assert second.duration is not None and second.duration > 2.0  # default stop: lease + retry + 1, scaled


def test_short_leaves_a_short_run_alone() -> None:
    s = parse_scenario(base(duration=8, faults=[{"at": 4, "fault": "kill", "target": "leader"}]))
    assert s.short().duration == 8 and s.short().faults[0].at == 4


def test_new_faults_parse_with_their_fields() -> None:
    s = parse_scenario(
        base(
            faults=[
                {"at": 1, "fault": "rotate-ca"},
                {"at": 2, "fault": "rotate-leaf", "target": "apiserver", "duration": 2},
                {"at": 3, "fault": "expire-cert", "target": "leader", "heal_after": 20},
                {
                    "at": 4,
                    "fault": "clock-skew",
                    "target": "standby",
                    "offset": -30,
                    "rate": 0.5,
                    "duration": 9,
                },
            ]
        )
    )
    assert s.faults[0] == FaultSpec("rotate-ca", "all", at=1.0)
    assert s.faults[2].heal_after == 20.0
    assert (s.faults[3].offset, s.faults[3].rate, s.faults[3].duration) == (-30.0, 0.5, 9.0)
    assert s.clock_skew and not s.partitions
    assert "offset -30s rate 0.5" in s.faults[3].describe()


def test_short_keeps_rotation_steps_and_scales_heal_and_skew() -> None:
    s = parse_scenario(
        base(
            duration=60,
            cluster={"replicas": 3, "lease_duration": 15, "renew_deadline": 10, "retry_period": 2},
            faults=[
                {"at": 10, "fault": "rotate-ca", "duration": 4},
                {"at": 20, "fault": "expire-cert", "target": "leader", "heal_after": 45},
                {"at": 30, "fault": "clock-skew", "target": "leader", "rate": 1.5, "duration": 20},
            ],
        )
    ).short()
    ca, expire, skew = s.faults
    assert ca.duration == 4.0  # bound by the reload time, not the lease
    assert expire.heal_after == 6.0  # 45 x 2/15
    assert skew.rate == 1.5 and skew.duration is not None and 1.0 <= skew.duration < 20


def test_partition_modes_parse() -> None:
    s = parse_scenario(
        base(
            faults=[
                {"at": 1, "fault": "partition", "target": "leader", "duration": 5},
                {"at": 2, "fault": "partition", "target": "leader", "mode": "delay", "delay": 0.2},
                {"at": 3, "fault": "partition", "target": "standby", "mode": "loss", "loss": 0.3},
            ]
        )
    )
    modes = [(f.mode, f.delay, f.loss) for f in s.faults]
    assert modes == [("blackhole", None, None), ("delay", 0.2, None), ("loss", None, 0.3)]
    assert "200ms" in s.faults[1].describe() and "30% loss" in s.faults[2].describe()


def test_until_new_leader_parses_for_faults_that_last() -> None:
    s = parse_scenario(
        base(faults=[{"at": 5, "fault": "stop", "target": "leader", "duration": 3, "until": "new-leader"}])
    )
    [f] = s.faults
    assert f.until == "new-leader" and "until a new-leader" in f.describe()
    assert s.short().faults[0].until == "new-leader"
    assert "faults[0].until: only stop and partition" in error_of(
        base(faults=[{"at": 5, "fault": "kill", "target": "leader", "until": "new-leader"}])
    )
    assert "faults[0].until: must be one of new-leader" in error_of(
        base(faults=[{"at": 5, "fault": "stop", "target": "leader", "until": "later"}])
    )


def test_rounds_parse_into_sequential_steps_and_scale_with_short() -> None:
    from chaos.scenario import NEW_LEADER, RECOVERED, RESTARTED, STABLE_LEADER, WaitSpec

    s = parse_scenario(
        {
            "name": "t",
            "duration": 30,
            "rounds": {
                "repeat": 2,
                "steps": [
                    {"wait": "stable-leader", "jitter": 2},
                    {"fault": "stop", "target": "leader", "duration": 20, "until": "new-leader"},
                    {"wait": "new-leader", "within": 40},
                    {"wait": "recovered", "expect": "restarted"},
                ],
            },
        }
    )
    assert s.faults == () and s.random is None
    assert [r.label for r in s.rounds] == ["round 1/2", "round 2/2"]
    stable, stop, new, back = s.rounds[0].steps
    assert stable == WaitSpec(STABLE_LEADER, within=75.0, jitter=2.0)  # 60 + the 15 s default lease
    assert stop == FaultSpec("stop", "leader", duration=20.0, until="new-leader")
    assert new == WaitSpec(NEW_LEADER, within=40.0)
    assert back == WaitSpec(RECOVERED, within=75.0, expect=RESTARTED)
    short = s.short()
    sstable, sstop, _, _ = short.rounds[0].steps
    assert isinstance(sstable, WaitSpec) and sstable.jitter == pytest.approx(2.0 * 2 / 15, abs=1e-3)
    assert isinstance(sstop, FaultSpec) and sstop.duration == pytest.approx(20 * 2 / 15, abs=1e-3)
    assert s.partitions is False


@pytest.mark.parametrize(
    ("rounds", "needle"),
    [
        ({"steps": []}, "rounds.steps: must list at least one step"),
        ({"steps": [{"wait": "soon"}]}, "rounds.steps[0].wait: must be one of stable-leader"),
        ({"steps": [{"wait": "new-leader", "jitter": 1}]}, "rounds.steps[0].jitter: only a stable-leader"),
        ({"steps": [{"wait": "stable-leader", "expect": "restarted"}]}, "rounds.steps[0].expect: only a"),
        ({"steps": [{"fault": "kill", "target": "leader", "at": 3}]}, "rounds.steps[0].at: unknown field"),
        ({"repeat": 0, "steps": [{"wait": "new-leader"}]}, "rounds.repeat: must be >= 1"),
        ({"steps": [{"wait": "recovered", "expect": "soon"}]}, "rounds.steps[0].expect: must be one of"),
        ({"steps": [{"wait": "steady-throughput"}]}, "rounds.steps[0].rate: a steady-throughput wait needs"),
        ({"steps": [{"wait": "new-leader", "rate": 5}]}, "rounds.steps[0].rate: only a steady-throughput"),
        ({"steps": [{"wait": "steady-throughput", "rate": -1}]}, "rounds.steps[0].rate: must be > 0"),
    ],
)
def test_round_errors_name_the_field(rounds: dict[str, Any], needle: str) -> None:
    data = base(rounds=rounds)
    assert needle in error_of(data)


def test_the_controller_manager_leader_is_a_target_of_process_faults_only():
    from chaos.scenario import ScenarioError, parse_scenario

    def scenario(fault: dict) -> dict:
        return {"name": "cm", "duration": 30, "faults": [{"at": 5, **fault}]}

    for fault in ("kill", "term", "stop", "partition"):
        parsed = parse_scenario(scenario({"fault": fault, "target": "controller-manager-leader"}))
        assert parsed.faults[0].target == "controller-manager-leader"
    for fault in ("clock-skew", "expire-cert", "rotate-leaf"):
        with pytest.raises(ScenarioError, match="controller-manager leader takes kill, term"):
            parse_scenario(scenario({"fault": fault, "target": "controller-manager-leader"}))


def test_a_steady_throughput_wait_parses_with_its_rate_and_window() -> None:
    from chaos.scenario import WaitSpec, parse_scenario

    data = base(rounds={"steps": [{"wait": "steady-throughput", "rate": 16, "window": 3}]})
    [rnd] = parse_scenario(data).rounds
    assert rnd.steps == (WaitSpec("steady-throughput", within=rnd.steps[0].within, rate=16.0, window=3.0),)
