"""`kse up` brings etcd members and the API server back, as a kubelet restarts a crashed static pod:
the SIGKILL of one of three etcd members (quorum intact) and then of the API server no longer stop
the cluster. Both come back under new pids, pods keep being bound afterwards, and the run ends
cleanly with nothing left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.clusterfile import ClusterFile, ClusterFileError
from harness.procs.proctable import pid_alive
from harness.up import Cluster, ClusterPlan, ElectionPlan
from harness.up.status import STALE_AFTER_S, render_line
from kse.audit import read_audit_logs
from tests.fixtures.polling import eventually
from tests.fixtures.procs import procs_naming

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST_ELECTION = ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.5"]


def _pid(data: Path, name: str) -> int | None:
    try:
        entry = ClusterFile.load(data).processes.get(name)
    except (ClusterFileError, OSError, ValueError):
        return None
    return entry.pid if entry is not None and entry.running else None


def _wait_for(what: str, probe, within: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {within:g}s waiting for {what}")


CLIENTS = (
    "scheduler-1",
    "scheduler-2",
    "controller-manager-1",
    "controller-manager-2",
    "nodesim",
    "workload",
)


ELECTORS = ("scheduler-1", "scheduler-2", "controller-manager-1", "controller-manager-2")


def _all_observed_a_leader(data: Path) -> bool:
    """Every leader-electing client logged a holder of its Lease (the elector logs "new leader"
    only for a non-empty holder), so none of them has a first read of a missing Lease ahead."""
    logs = data / "logs"
    try:
        texts = [(logs / f"{name}.log").read_text(errors="replace") for name in ELECTORS]
    except FileNotFoundError:
        return False
    return all(re.search(r"new leader '[^']+'", text) is not None for text in texts)


def _all_reloaded(data: Path, version: int) -> bool:
    """Every client and the API server's serving side took the `version`-th set of files."""
    logs = data / "logs"
    clients = all(
        f"client credentials reloaded (version {version},"
        in (logs / f"{name}.log").read_text(errors="replace")
        for name in CLIENTS
    )
    server = f"serving TLS credentials reloaded (version {version})" in (logs / "apiserver.log").read_text()
    return clients and server


def test_kse_up_restarts_a_killed_etcd_member_and_a_killed_api_server(tmp_path: Path) -> None:
    data = tmp_path / "kse"
    argv = [
        sys.executable, "-m", "kse", "up", "--duration", "45", "--json",
        "--etcd-members", "3", "--nodes", "5", "--rate", "5", "--replicas", "2",
        "--data-dir", str(data), *FAST_ELECTION,
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        etcd_pid = _wait_for("etcd-1 in cluster.json", lambda: _pid(data, "etcd-1"))
        api_pid = _wait_for("the API server in cluster.json", lambda: _pid(data, "apiserver"))
        _wait_for("a leader", lambda: (data / "run" / "scheduler-1.ready.json").exists())
        os.kill(etcd_pid, signal.SIGKILL)
        _wait_for("etcd-1 back", lambda: (_pid(data, "etcd-1") or etcd_pid) != etcd_pid)
        os.kill(api_pid, signal.SIGKILL)
        _wait_for("the API server back", lambda: (_pid(data, "apiserver") or api_pid) != api_pid)
        back_at = time.time()
        assert proc.poll() is None, "kse up stopped"
        out, err = proc.communicate(timeout=100)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{err[-4000:]}"
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["errors"] == [] and summary["leftovers"] == [], summary
    assert "etcd-1 exited (code -9)" in err and "apiserver exited (code -9)" in err, err[-4000:]
    binds_after = [
        r
        for r in read_audit_logs(data / "audit" / "audit.jsonl")
        if r.verb == "bind" and r.code == "OK" and r.ts > back_at
    ]
    assert binds_after, "no pod bound after the API server came back"
    alive = [p for p in summary["processes"] if pid_alive(p["pid"])]
    assert not alive and not procs_naming(str(data)), alive


def test_a_sigkilled_kse_up_takes_its_children_with_it(tmp_path: Path) -> None:
    data = tmp_path / "kse"
    argv = [
        sys.executable, "-m", "kse", "up", "--nodes", "3", "--rate", "2", "--replicas", "2",
        "--data-dir", str(data), *FAST_ELECTION,
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO_ROOT)
    try:
        _wait_for("nodesim in cluster.json", lambda: _pid(data, "nodesim"))
        _wait_for("the workload in cluster.json", lambda: _pid(data, "workload"))
        children = [
            p.pid for p in ClusterFile.load(data).processes.values() if p.pid is not None and p.running
        ]
        assert len(children) >= 6, children  # etcd, API server, 2 schedulers, 2 controller managers, ...
        proc.kill()
        proc.wait(timeout=10)
        _wait_for("every child gone", lambda: not any(pid_alive(pid) for pid in children), within=15)
        assert not procs_naming(str(data)), procs_naming(str(data))
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.timeout(240)
def test_a_full_ca_rotation_on_a_running_kse_up_fails_no_request_and_keeps_the_leader(tmp_path: Path) -> None:
    """The documented procedure: `kse certs rotate-ca --phase add / switch / remove` against a
    running `kse up`, a few seconds apart; the command restarts the etcd members itself after add and
    after remove. No client sees a failed RPC, the scheduler's Lease never changes hands."""
    data = tmp_path / "kse"
    argv = [
        sys.executable, "-m", "kse", "up", "--json", "--rpc-error-logs",
        "--etcd-members", "3", "--nodes", "5", "--rate", "5", "--replicas", "2",
        "--data-dir", str(data),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        _wait_for("the workload running", lambda: _pid(data, "workload"), within=90)
        _wait_for("both schedulers ready", lambda: all(
            (data / "run" / f"scheduler-{i}.ready.json").exists() for i in (1, 2)
        ), within=60)  # fmt: skip
        # A replica is ready (serving metrics) before its first Lease read, and a read before the
        # first leader writes the Lease is a NOT_FOUND: start counting once every elector has seen
        # its Lease held.
        _wait_for("every elector observing a leader", lambda: _all_observed_a_leader(data), within=60)
        outputs = []
        began = time.time()
        for version, phase in enumerate(("add", "switch", "remove"), start=2):
            command = ["certs", "rotate-ca", "--dir", str(data / "pki"), "--phase", phase]
            rotate = subprocess.run(
                [sys.executable, "-m", "kse", *command],
                capture_output=True, text=True, timeout=150, cwd=REPO_ROOT, check=False,
            )  # fmt: skip
            assert rotate.returncode == 0, f"{phase}: {rotate.stdout}\n{rotate.stderr}"
            outputs.append(rotate.stdout)
            _wait_for(
                f"every process on the files of {phase}", lambda v=version: _all_reloaded(data, v), within=30
            )
        assert "etcd-2 healthy again" in outputs[0] and "etcd-2 healthy again" in outputs[2], outputs
        assert "restarting the etcd members" not in outputs[1]
        assert proc.poll() is None, "kse up stopped"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{err[-4000:]}"
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["errors"] == [], summary["errors"]
    assert summary["lease_transitions"] == 0 and summary["failovers"] == [], summary
    # Every failed RPC any client saw from the first phase on (before it: the first Lease reads'
    # NOT_FOUND, application answers of a fresh cluster).
    records = [
        json.loads(line)
        for f in sorted((data / "run").glob("rpc-errors-*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    failed = [r for r in records if r["ts"] >= began]
    assert failed == [], failed[:10]


async def test_the_live_view_says_when_the_api_server_stops_answering(tmp_path: Path) -> None:
    plan = ClusterPlan(
        data_dir=tmp_path / "kse", replicas=1, nodes=3, rate=2,
        election=ElectionPlan(lease_duration=2, renew_deadline=1.5, retry_period=0.5), grace=5,
    )  # fmt: skip
    async with Cluster(plan) as cluster:
        await cluster.wait_for_leader(30)
        await eventually(cluster.snapshot, lambda s: s is not None and s.synced, "the view synced")
        fresh = cluster.snapshot()
        assert fresh is not None and fresh.view_age_s < STALE_AFTER_S
        assert cluster.apiserver is not None
        cluster.apiserver.pause()  # hung: the process is there, nothing answers
        try:
            stale = await eventually(
                cluster.snapshot, lambda s: s is not None and s.view_age_s > STALE_AFTER_S, "a stale view", 20
            )
            assert "STALE(no update for" in render_line(stale)
        finally:
            cluster.apiserver.resume()
        await eventually(
            cluster.snapshot, lambda s: s is not None and s.view_age_s < STALE_AFTER_S, "the view moving", 30
        )
