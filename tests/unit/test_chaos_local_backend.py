"""The attached local backend against real processes described by a cluster.json (as a running
`kse up` writes it), and the clock-skew files: signals reach the recorded pids, what it cannot do
attached is refused with a message that says why."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.backend import BackendError
from chaos.local_backend import AttachedLocalBackend, clock_skew_path, natural_key, write_clock_skew
from harness.procs.proctable import pid_alive


def _spawn(*extra: str) -> subprocess.Popen[bytes]:
    # A stand-in process, its own group leader as `kse up` starts every process.
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", *extra], start_new_session=True
    )


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def _cluster_json(data_dir: Path, processes: dict[str, dict[str, object]]) -> Path:
    run = data_dir / "run"
    run.mkdir(parents=True)
    path = run / "cluster.json"
    path.write_text(
        json.dumps({"pki_dir": str(data_dir / "pki"), "run_dir": str(run), "processes": processes})
    )
    return path


def _wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


async def test_attached_backend_by_pid(tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    skew = tmp_path / "skew-s2.json"
    s1, s2, api = _spawn(), _spawn("--clock-skew-file", str(skew)), _spawn()
    procs += [s1, s2, api]
    _cluster_json(
        tmp_path,
        {
            "scheduler-2": {"role": "scheduler", "pid": s2.pid, "identity": "scheduler-2_b"},
            "scheduler-1": {"role": "scheduler", "pid": s1.pid, "identity": "scheduler-1_a"},
            "apiserver": {"role": "apiserver", "pid": api.pid, "identity": None},
            "etcd-0": {"role": "etcd", "pid": None},
        },
    )
    b = AttachedLocalBackend.from_data_dir(tmp_path, restart_within=0.3, grace=2.0)
    assert b.pki_dir == tmp_path / "pki"
    assert await b.replicas() == ["scheduler-1", "scheduler-2"]
    assert await b.identity("scheduler-1") == "scheduler-1_a"
    assert await b.etcd_members() == ["etcd-0"]
    assert await b.pid("scheduler-1") == s1.pid and await b.pid("etcd-0") is None

    # Clock skew goes to the file on the replica's command line; one without the flag is refused.
    await b.set_clock_skew("scheduler-2", 5.0, 1.5)
    assert json.loads(skew.read_text()) == {"offset_s": 5.0, "rate": 1.5}
    with pytest.raises(BackendError, match="not started with --clock-skew-file"):
        await b.set_clock_skew("scheduler-1", 5.0, 1.5)

    # What the running `kse up` would have to do is refused, saying so.
    with pytest.raises(BackendError, match="keep it down: not possible attached"):
        await b.kill("scheduler-1", restart=False)
    with pytest.raises(BackendError, match="partition proxies live inside the `kse up` process"):
        await b.partition("scheduler-1")

    # A replica is killed by pid (its supervisor would restart it).
    await b.kill("scheduler-1")
    assert _wait_gone(s1.pid)
    # The API server SIGTERMed: nobody restarts it here, so the backend says it cannot.
    with pytest.raises(BackendError, match="did not restart apiserver"):
        await b.terminate("apiserver")
    assert api.poll() is not None
    with pytest.raises(BackendError, match="is not running"):
        await b.pause("apiserver")


def test_missing_cluster_json_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match=r"run/cluster.json does not exist"):
        AttachedLocalBackend.from_data_dir(tmp_path)


def test_clock_skew_file_and_names(tmp_path: Path) -> None:
    path = clock_skew_path(tmp_path, "scheduler-3")
    assert path == tmp_path / "clock-skew-scheduler-3.json"
    write_clock_skew(path, -2.5, 0.8)
    assert json.loads(path.read_text()) == {"offset_s": -2.5, "rate": 0.8}
    with pytest.raises(BackendError, match="rate must be > 0"):
        write_clock_skew(path, 0, 0)
    assert sorted(["scheduler-10", "scheduler-2", "scheduler-1"], key=natural_key) == [
        "scheduler-1",
        "scheduler-2",
        "scheduler-10",
    ]
