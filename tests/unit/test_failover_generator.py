"""`kse bench failover` as a generator on the chaos pipeline: the rounds it hands the run driver,
and the trials it reads back from the driver's round results (pure functions, no cluster)."""

from __future__ import annotations

import pytest

from chaos.failover_bench import FailoverBenchConfig, failover_rounds, trials_from_rounds
from chaos.history import KILL, PHASE_END, PHASE_START, STOP, FaultRecord
from chaos.nemesis import FAULT_RECORD_NAMES
from chaos.runner import RoundResult
from chaos.scenario import (
    FAULTS,
    NEW_LEADER,
    RECOVERED,
    RESTARTED,
    STABLE_LEADER,
    STANDBY,
    STEADY_THROUGHPUT,
    FaultSpec,
    WaitSpec,
)


@pytest.mark.parametrize("fault", ["kill", "term", "stop"])
def test_each_trial_is_a_stable_leader_a_leader_fault_a_takeover_and_a_recovery(fault: str) -> None:
    cfg = FailoverBenchConfig(fault=fault, trials=3, lease_duration=2, renew_deadline=1.5, retry_period=0.5)
    rounds = failover_rounds(cfg)
    assert [r.label for r in rounds] == ["trial 1/3", "trial 2/3", "trial 3/3"]
    stable, hit, takeover, back = rounds[0].steps
    assert stable == WaitSpec(STABLE_LEADER, within=62.0, jitter=0.5)  # the seeded delay in [0, retryPeriod)
    assert isinstance(hit, FaultSpec) and hit.fault in FAULTS and hit.target == "leader"
    assert isinstance(takeover, WaitSpec) and takeover.wait == NEW_LEADER
    assert takeover.within >= cfg.takeover_within
    assert isinstance(back, WaitSpec) and back.wait == RECOVERED and back.expect == RESTARTED
    # The bench's fault names are the nemesis' record names.
    assert FAULT_RECORD_NAMES[hit.fault] == {"kill": "kill", "term": "terminate", "stop": "stop"}[fault]
    if fault == "stop":
        # Paused past the lease, and until another replica holds it.
        assert (hit.duration, hit.until) == (cfg.stop_for, NEW_LEADER) and cfg.stop_for == 3.5
    else:
        assert (hit.duration, hit.until) == (None, None)


def test_a_deposed_leader_that_stays_standby_is_waited_for_as_one() -> None:
    cfg = FailoverBenchConfig(fault="stop", on_lost_lease="standby", trials=1)
    [rnd] = failover_rounds(cfg)
    assert rnd.steps[-1] == WaitSpec(RECOVERED, within=150.0, expect=STANDBY)


def test_settle_waits_for_the_new_leader_to_bind_at_the_workloads_pace_before_the_next_fault() -> None:
    [plain] = failover_rounds(FailoverBenchConfig(trials=1))
    assert [getattr(s, "wait", None) for s in plain.steps][-1] == RECOVERED  # no --settle: as before
    [rnd] = failover_rounds(FailoverBenchConfig(trials=1, rate=20, settle=3))
    assert rnd.steps[-1] == WaitSpec(STEADY_THROUGHPUT, within=63.0, rate=16.0, window=3.0)
    assert FailoverBenchConfig(settle=-1).problems() == ["settle must be >= 0, got -1"]


def test_trials_come_from_the_fault_records_and_the_waits() -> None:
    done = RoundResult(
        "trial 1/2",
        faults=[
            FaultRecord(10.0, STOP, "scheduler-1", {"identity": "s1_a", "pid": 7, "lease_transitions": 3,
                                                     "phase": PHASE_START}),
            FaultRecord(13.6, STOP, "scheduler-1", {"identity": "s1_a", "phase": PHASE_END}),
        ],
        waits={STABLE_LEADER: "scheduler-1", NEW_LEADER: "s2_b", RECOVERED: RESTARTED},
        wall_s=21.5,
    )  # fmt: skip
    hit = {"identity": "s2_b", "pid": 8, "lease_transitions": 4}
    failed = RoundResult(
        "trial 2/2",
        faults=[FaultRecord(40.0, KILL, "scheduler-2", hit)],
        waits={STABLE_LEADER: "scheduler-2"},
        wall_s=90.0,
        error="timed out after 90s waiting for a leader other than s2_b",
    )
    never = RoundResult("trial 3/3", error="timed out waiting for a stable leader")
    t1, t2 = trials_from_rounds([done, failed, never])
    assert (t1.index, t1.target, t1.identity, t1.transitions) == (1, "scheduler-1", "s1_a", 3)
    assert t1.fault_ts == 10.0
    assert (t1.new_identity, t1.resumed_ts, t1.back, t1.wall_s) == ("s2_b", 13.6, RESTARTED, 21.5)
    assert (t2.index, t2.identity, t2.new_identity, t2.back, t2.resumed_ts) == (2, "s2_b", "", "", None)
    assert t2.wall_s == 0.0  # a trial that did not finish has no wall time
