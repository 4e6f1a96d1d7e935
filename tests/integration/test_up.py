"""`kse up` end to end, the `Cluster` fault hooks, and the replica supervisor's backoff schedule.

* `kse up --duration 20 --json` as a subprocess on a small topology with fast leases: exits 0, the
  summary names a leader and bound pods, and no process it started is left afterwards (by the pids
  it reports, and by a scan of /proc for anything naming its data dir); its stop hands the Lease to
  nobody (the standbys exit before the leader releases it).
* `Cluster` in-process: kill the leader, a standby takes over, the supervisor restarts the killed
  replica with a new identity, and the status tracker records the failover.
* The supervisor with a real child process that exits at once, on an injected clock and sleep:
  1, 2, 4, ... capped; reset after 10 minutes of running; hold/release.

No sleeps to let time pass: everything polls with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.procs.launcher import ManagedProcess
from harness.procs.proctable import pid_alive
from harness.up import Cluster, ClusterPlan, ElectionPlan, UpError
from harness.up.status import Failover, LeaseHistory, LeaseObservation
from harness.up.supervisor import BackoffPolicy, CrashLoopBackoff, RestartRecord, Supervisor
from kse.audit import read_audit_logs
from tests.fixtures.polling import truthy
from tests.fixtures.procs import procs_naming

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST_ELECTION = ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.5"]


# ---------------------------------------------------------------------------------------------- kse up


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_kse_up_runs_and_leaves_nothing_behind(tmp_path: Path) -> None:
    data = tmp_path / "kse"
    argv = [
        sys.executable, "-m", "kse", "up",
        "--duration", "20", "--json",
        "--nodes", "10", "--rate", "5", "--replicas", "3",
        "--data-dir", str(data),
        *FAST_ELECTION,
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=75, cwd=REPO_ROOT, check=False)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, f"exit {proc.returncode}\nstderr:\n{proc.stderr}\nstdout:\n{proc.stdout}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    print(proc.stderr)
    print(json.dumps(summary, indent=1))

    # Nothing it started is left: every pid it reports, and anything naming the data dir.
    assert summary["processes"], summary
    alive = [p for p in summary["processes"] if pid_alive(p["pid"])]
    assert not alive, f"left running: {alive}"
    assert not procs_naming(str(data)), procs_naming(str(data))
    assert summary["leftovers"] == [] and summary["errors"] == []

    assert summary["data_dir"] == str(data)
    assert (data / "config.json").is_file() and (data / "logs" / "apiserver.log").is_file()
    assert "ready in" in proc.stderr
    assert summary["duration_s"] >= 20 and elapsed < 75
    assert summary["pods"]["created"] > 0
    assert summary["pods"]["bound"] > 0, summary["pods"]
    assert summary["binds_per_s"] > 0
    names = [r["name"] for r in summary["replicas"]]

    assert summary["leader_election"], summary
    assert names == ["scheduler-1", "scheduler-2", "scheduler-3"]
    assert summary["leader"] in names, summary
    assert summary["leader_identity"].startswith(summary["leader"] + "_")
    assert all(r["identity"].startswith(r["name"] + "_") for r in summary["replicas"])
    roles = sorted(r["role"] for r in summary["replicas"])
    assert roles == ["leader", "standby", "standby"], roles

    # The stop hands the Lease to nobody: the standbys are gone before the leader releases it, so
    # the release is the Lease's last write (no standby acquires it on the way out, which the
    # summary would count as a failover).
    lease_writes = [
        r
        for r in read_audit_logs(data / "audit" / "audit.jsonl")
        if r.resource == "leases" and r.name == "kube-scheduler" and r.verb == "update" and r.code == "OK"
    ]
    assert lease_writes and not lease_writes[-1].lease_holder, lease_writes[-3:]
    logs = data / "logs"
    released_at = _log_time(logs / f"{summary['leader']}.log", "stopped leading")
    for name in names:
        if name != summary["leader"]:
            exited_at = _log_time(logs / f"{name}.log", "stopped (exit code")
            assert exited_at <= released_at, f"{name} stopped {exited_at}, after the release {released_at}"


def _log_time(log: Path, needle: str) -> str:
    """The timestamp ("YYYY-MM-DD HH:MM:SS,mmm", so it sorts as text) of the last line holding
    `needle` in a component's log."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if needle in line]
    assert lines, f"no {needle!r} in {log}"
    return lines[-1][:23]


@pytest.mark.integration
@pytest.mark.timeout(90)
async def test_cluster_kill_leader_fails_over_and_restarts(tmp_path: Path) -> None:
    plan = ClusterPlan(
        data_dir=tmp_path / "kse",
        replicas=2,
        nodes=5,
        rate=5,
        election=ElectionPlan(lease_duration=2, renew_deadline=1.5, retry_period=0.5),
        restart_policy=BackoffPolicy(initial=0.2, cap=1, reset_after=600),
        grace=5,
    )
    async with Cluster(plan) as cluster:
        assert cluster.leader_election
        assert cluster.audit_logs and cluster.audit_logs[0].parent.is_dir()
        old = await cluster.wait_for_leader(30)
        old_identity, old_pid = old.identity, old.pid
        await old.kill()
        new = await cluster.wait_for_leader(30, other_than=old_identity)
        assert new.identity != old_identity
        # The killed replica is restarted by the supervisor as a new candidate.
        await truthy(lambda: old.restarts >= 1 and old.running, 20, "the killed replica's restart")
        assert old.pid != old_pid and old.identity != old_identity
        assert old.restart_history[0].exit_code == -9
        status = cluster.status
        assert status is not None
        failover: Failover = await truthy(
            lambda: next(iter(status.lease_history.failovers), None), 10, "the failover in the status"
        )
        assert failover.from_identity == old_identity and failover.to_identity == new.identity
        assert not failover.released
        assert -0.5 < failover.duration_s < 5, failover
        snap = cluster.snapshot()
        assert snap is not None and snap.leader == new.name
        pids = set(cluster.pids)
    assert old_pid in pids
    assert not [p for p in pids if pid_alive(p)]
    assert not cluster.leftovers


# ---------------------------------------------------------------------------------------------- supervisor


def test_backoff_policy_doubles_and_caps() -> None:
    policy = BackoffPolicy()
    assert [policy.delay(n) for n in range(1, 12)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert policy.delay(10_000) == 300
    clock = [0.0]
    backoff = CrashLoopBackoff(policy, lambda: clock[0])
    backoff.started()
    clock[0] += 5
    assert backoff.exited() == (5, 1)
    backoff.started()
    assert backoff.exited() == (0, 2)
    backoff.started()
    clock[0] += 600  # ten minutes of running: forgiven
    assert backoff.exited() == (600, 1)


@pytest.mark.timeout(60)
async def test_supervisor_restarts_an_exiting_child_on_the_backoff_schedule(tmp_path: Path) -> None:
    clock = [1000.0]
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        clock[0] += seconds
        await asyncio.sleep(0)

    restarts: list[RestartRecord] = []
    sleeps_before: list[int] = []  # how many backoff sleeps had happened at each restart

    def on_restart(record: RestartRecord) -> None:
        restarts.append(record)
        sleeps_before.append(len(delays))
        if len(restarts) == 5:
            clock[0] += 601  # this start "runs" ten minutes before it exits

    proc = ManagedProcess("crasher", ["/bin/sh", "-c", "exit 3"], data_dir=tmp_path)
    sup = Supervisor(
        BackoffPolicy(initial=1, cap=8, reset_after=600),
        clock=lambda: clock[0],
        sleep=fake_sleep,
        poll_interval=0.002,
        on_restart=on_restart,
    )
    proc.start()
    item = sup.add(proc)
    async with sup.running():
        await truthy(lambda: len(restarts) >= 7, 30, "seven restarts")
        sup.hold("crasher")
        await truthy(lambda: item.state == "held" and not proc.running, 10, "the held crasher to be down")
        n_restarts, n_delays = item.restarts, len(delays)
        sup.release("crasher")  # down and released: started at once, no backoff
        await truthy(lambda: item.restarts > n_restarts, 10, "the restart after release")
        assert sleeps_before[n_restarts] == n_delays  # no backoff sleep before it
    # 1, 2, 4, 8, 8 (capped), then the fifth restart ran 601 s: the count starts again.
    assert delays[:7] == [1, 2, 4, 8, 8, 1, 2], delays
    assert [r.exit_code for r in item.history[:7]] == [3] * 7
    assert [r.delay_s for r in restarts[:7]] == [1, 2, 4, 8, 8, 1, 2]
    assert all(r.pid is not None and r.restarted_at is not None for r in restarts)
    assert len({r.pid for r in restarts}) == len(restarts)  # a new process every time
    assert item.history[5].uptime_s >= 600
    await proc.terminate(1)
    assert not proc.running


# ---------------------------------------------------------------------------------------------- lease history


def _obs(
    holder: str, renew: float, *, acquire: float | None = None, duration: float = 2, t: int = 0
) -> LeaseObservation:
    return LeaseObservation(holder, duration, acquire, renew, t, observed_at=renew + 0.01)


def test_lease_history_failover_after_expiry_and_after_release() -> None:
    h = LeaseHistory(since=100.0)
    assert h.observe(_obs("a_1", 101, acquire=101)) is None  # first acquisition: not a failover
    assert h.observe(_obs("a_1", 102, acquire=101)) is None  # renew
    f = h.observe(_obs("b_1", 104.3, acquire=104.3, t=1))  # a's lease takeable at 102 + 2 = 104
    assert f is not None and (f.from_identity, f.to_identity, f.released) == ("a_1", "b_1", False)
    assert f.duration_s == pytest.approx(0.3) and f.gap_s == pytest.approx(2.3)
    assert h.observe(_obs("", 105, duration=1, t=1)) is None  # b releases at 105
    f2 = h.observe(_obs("c_1", 105.05, acquire=105.05, t=2))
    assert f2 is not None and f2.released and f2.duration_s == pytest.approx(0.05)
    assert [x.to_identity for x in h.failovers] == ["b_1", "c_1"]


def test_lease_history_ignores_a_holder_left_from_an_earlier_run() -> None:
    h = LeaseHistory(since=1000.0)
    h.observe(_obs("old_1", 10))  # from a run long ago
    assert h.observe(_obs("new_1", 1001, acquire=1001, t=1)) is None
    assert h.failovers == [] and h.first_acquired is not None and h.first_acquired.holder == "new_1"


@pytest.mark.integration
@pytest.mark.timeout(90)
async def test_a_replica_that_fails_to_start_fails_the_start_cleanly(tmp_path: Path) -> None:
    """scheduler-1 is ready and supervised when scheduler-2 dies on a bad flag: the start fails
    with UpError naming scheduler-2, and stopping what did start leaves nothing running."""
    plan = ClusterPlan(
        data_dir=tmp_path / "kse",
        replicas=2,
        nodes=0,
        workload=False,
        etcd_fast=True,
        ready_timeout=30.0,
        replica_args={"scheduler-2": ["--no-such-flag"]},
    )
    cluster = Cluster(plan)
    with pytest.raises(UpError, match="scheduler-2"):
        async with cluster:
            pytest.fail("the cluster came up with a replica that cannot start")
    assert not procs_naming(str(plan.data_dir)), procs_naming(str(plan.data_dir))
