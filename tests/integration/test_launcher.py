"""The process launcher against real child processes: readiness, signals, cleanup, error messages."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness.procs.apiserver import ApiServerProcess
from harness.procs.launcher import (
    Launcher,
    LaunchError,
    ManagedProcess,
    NotReadyError,
    ready_file_json,
)

pytestmark = pytest.mark.integration

# A child that (optionally) forks a grandchild into its own process group, writes a JSON ready file
# naming both pids, and then sleeps; MODE selects how it reacts to SIGTERM.
CHILD = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    ready, mode = sys.argv[1], sys.argv[2]
    print("child booting", flush=True)
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif mode == "clean-exit":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "grandchild": grandchild.pid}, f)
    os.replace(tmp, ready)
    print("child ready", flush=True)
    while True:
        time.sleep(0.05)
    """
)


def _state(pid: int) -> str | None:
    """Process state letter from /proc (R, S, T, Z, ...); None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    # A zombie has exited; it lingers only until its parent (here: maybe a non-reaping pid 1) reaps it.
    return _state(pid) not in (None, "Z", "X")


def _group_alive(pgid: int) -> bool:
    """Any non-zombie process left in process group `pgid`."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                return True
    return False


def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.01)
    return False


def child(tmp_path: Path, name: str = "child", mode: str = "default", **kwargs: object) -> ManagedProcess:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ready = tmp_path / "run" / f"{name}.json"
    return ManagedProcess(
        name,
        [sys.executable, str(script), str(ready), mode],
        data_dir=tmp_path,
        ready_file=ready,
        ready_check=ready_file_json,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_start_ready_terminate_leaves_nothing(tmp_path: Path) -> None:
    proc = child(tmp_path).start()
    info = await proc.wait_ready(ready_timeout=10)
    assert info["pid"] == proc.pid and proc.running and proc.returncode is None
    assert _alive(info["grandchild"])
    code = await proc.terminate(grace=5)
    assert code == -signal.SIGTERM
    assert proc.returncode == code and not proc.running
    assert not _group_alive(info["pid"])
    assert _wait_gone(info["grandchild"]), "the grandchild in the process group must die too"
    log = proc.log_path.read_text()
    assert "child ready" in log and "kse launcher: start #1" in log
    assert proc.log_path == tmp_path / "logs" / "child.log"


async def test_terminate_escalates_to_sigkill(tmp_path: Path) -> None:
    proc = child(tmp_path, mode="ignore-term").start()
    info = await proc.wait_ready(ready_timeout=10)
    started = time.monotonic()
    code = await proc.terminate(grace=0.3)
    assert code == -signal.SIGKILL
    assert time.monotonic() - started < 5
    assert not _group_alive(info["pid"]) and _wait_gone(info["grandchild"])


def test_kill_leaves_nothing(tmp_path: Path) -> None:
    proc = child(tmp_path).start()
    info = proc.wait_ready_sync(ready_timeout=10)
    assert proc.kill() == -signal.SIGKILL
    assert not _group_alive(info["pid"]) and _wait_gone(info["grandchild"])
    # Idempotent: terminating or killing a dead process is fine.
    assert proc.terminate_sync(grace=0.1) == -signal.SIGKILL
    assert proc.kill() == -signal.SIGKILL


async def test_never_ready_reports_log_tail_and_is_killed(tmp_path: Path) -> None:
    script = (
        "import time\n"
        "for i in range(1000):\n"
        "    print(f'still booting {i}', flush=True)\n"
        "    time.sleep(0.05)\n"
    )
    proc = ManagedProcess(
        "slowpoke",
        [sys.executable, "-c", script],
        data_dir=tmp_path,
        ready_file=tmp_path / "never.json",
        ready_timeout=0.8,
    ).start()
    pid = proc.pid
    assert pid is not None
    started = time.monotonic()
    with pytest.raises(NotReadyError) as err:
        await proc.wait_ready()
    assert time.monotonic() - started < 5
    message = str(err.value)
    assert "slowpoke" in message and "not ready within 0.8 s" in message
    assert "still booting" in message and str(proc.log_path) in message
    assert "still booting" in err.value.log_tail
    assert not proc.running and not _group_alive(pid)


async def test_exit_before_ready_reports_code_and_log(tmp_path: Path) -> None:
    script = "import sys\nprint('fatal: bad flag --frobnicate', file=sys.stderr)\nsys.exit(3)\n"
    proc = ManagedProcess(
        "broken", [sys.executable, "-c", script], data_dir=tmp_path, ready_file=tmp_path / "r.json"
    ).start()
    with pytest.raises(NotReadyError) as err:
        await proc.wait_ready(ready_timeout=10)
    assert "exited with code 3" in str(err.value)
    assert "fatal: bad flag --frobnicate" in str(err.value)
    assert err.value.returncode == 3


async def test_stop_and_continue(tmp_path: Path) -> None:
    proc = child(tmp_path, mode="clean-exit").start()
    info = await proc.wait_ready(ready_timeout=10)
    proc.stop_signal(signal.SIGSTOP)
    await asyncio.sleep(0.1)
    assert _state(info["pid"]) == "T" and _state(info["grandchild"]) == "T" and proc.paused
    proc.stop_signal(signal.SIGCONT)
    await asyncio.sleep(0.1)
    assert _state(info["pid"]) != "T" and not proc.paused
    with pytest.raises(ValueError):
        proc.stop_signal(signal.SIGTERM)
    # A frozen process still terminates promptly (SIGCONT follows SIGTERM), without escalation.
    proc.pause()
    assert await proc.terminate(grace=5) == 0
    assert not _group_alive(info["pid"])


async def test_restart_runs_again_and_appends_log(tmp_path: Path) -> None:
    proc = child(tmp_path).start()
    first = await proc.wait_ready(ready_timeout=10)
    second = await proc.restart(grace=5)
    assert second["pid"] == proc.pid != first["pid"]
    assert not _alive(first["pid"]) and _wait_gone(first["grandchild"])
    log = proc.log_path.read_text()
    assert "start #1" in log and "start #2" in log and proc.starts == 2
    with pytest.raises(LaunchError, match="already running"):
        proc.start()
    await proc.terminate()


async def test_launcher_stops_everything_on_exception(tmp_path: Path) -> None:
    infos = []
    with pytest.raises(RuntimeError, match="boom"):
        async with Launcher(tmp_path, grace=2) as launcher:
            for name in ("a", "b", "c"):
                proc = await launcher.start(child(tmp_path, name))
                infos.append(proc.ready_info)
            assert [p.name for p in launcher.processes] == ["a", "b", "c"]
            raise RuntimeError("boom")
    for info in infos:
        assert not _group_alive(info["pid"]) and _wait_gone(info["grandchild"])


async def test_launcher_stops_everything_on_cancel(tmp_path: Path) -> None:
    """Ctrl-C under asyncio.run cancels the main task; the block must still stop its processes."""
    infos: list[dict[str, int]] = []
    ready = asyncio.Event()

    async def body() -> None:
        async with Launcher(tmp_path, grace=2) as launcher:
            for name in ("x", "y"):
                infos.append((await launcher.start(child(tmp_path, name))).ready_info)
            ready.set()
            await asyncio.sleep(600)

    task = asyncio.create_task(body())
    await asyncio.wait_for(ready.wait(), 20)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for info in infos:
        assert not _group_alive(info["pid"]) and _wait_gone(info["grandchild"])


def test_launcher_sync_and_stop_order(tmp_path: Path) -> None:
    with Launcher(tmp_path, grace=2) as launcher:
        a = launcher.start_sync(child(tmp_path, "first", mode="clean-exit"))
        b = launcher.start_sync(child(tmp_path, "second", mode="clean-exit"))
        pids = [a.pid, b.pid]
        assert launcher.get("second") is b
        with pytest.raises(ValueError, match="already tracked"):
            launcher.add(child(tmp_path, "first"))
    assert a.returncode == 0 and b.returncode == 0
    assert all(pid is not None and not _group_alive(pid) for pid in pids)


FAKE_APISERVER = """\
import json, os, socket, sys, time
args = sys.argv[1:]
ready = args[args.index("--ready-file") + 1]
host, port = args[args.index("--listen") + 1].rsplit(":", 1)
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind((host, int(port)))
sock.listen()
with open(ready + ".tmp", "w") as f:
    json.dump({"address": "%s:%d" % sock.getsockname(), "pid": os.getpid(), "argv": args}, f)
os.replace(ready + ".tmp", ready)
while True:
    time.sleep(0.05)
"""


async def test_apiserver_process_argv_address_and_restart(tmp_path: Path) -> None:
    # A stand-in for `python -m kse apiserver` that honours the same flags, so this test needs no etcd.
    fake = tmp_path / "fake-python"
    fake.write_text(f'#!/bin/sh\nshift 3\nexec {sys.executable} {tmp_path / "fake_api.py"} "$@"\n')
    fake.chmod(0o755)
    (tmp_path / "fake_api.py").write_text(FAKE_APISERVER)
    api = ApiServerProcess(
        etcd_endpoints=["http://127.0.0.1:1", "http://127.0.0.1:2"],
        prefix="/bench",
        pki_dir=tmp_path / "pki",
        data_dir=tmp_path,
        extra_args=["--verbose"],
        python=str(fake),
    )
    assert api.command_line()[:4] == [str(fake), "-m", "kse", "apiserver"]
    with pytest.raises(LaunchError, match="not serving"):
        _ = api.address
    async with Launcher(tmp_path) as launcher:
        await launcher.start(api)
        args = api.ready_info["argv"]
        assert args[args.index("--etcd-endpoints") + 1] == "http://127.0.0.1:1,http://127.0.0.1:2"
        assert args[args.index("--prefix") + 1] == "/bench" and args[-1] == "--verbose"
        assert args[args.index("--pki-dir") + 1] == str(tmp_path / "pki")
        address = api.address
        assert address.startswith("127.0.0.1:") and not address.endswith(":0")
        await api.restart(grace=2)
        assert api.address == address, "a restart keeps the port of the first start"
        assert json.loads(api.ready_file.read_text())["address"] == address  # type: ignore[union-attr]


# Reports what the kernel and the exec left it: its parent-death signal (prctl PR_GET_PDEATHSIG),
# parent, pid, argv, one env var and cwd, as a JSON ready file.
PROBE = textwrap.dedent(
    """
    import ctypes, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    sig = ctypes.c_int(-1)
    libc.prctl(2, ctypes.byref(sig), 0, 0, 0)
    seen = {"pdeathsig": sig.value, "ppid": os.getppid(), "pid": os.getpid(), "argv": sys.argv,
            "env": os.environ.get("KSE_PROBE"), "cwd": os.getcwd()}
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(seen, f)
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    """
)


def _probe(tmp_path: Path, name: str) -> ManagedProcess:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    ready = tmp_path / "run" / f"{name}.json"
    return ManagedProcess(
        name,
        [sys.executable, str(script), str(ready), "an arg"],
        data_dir=tmp_path,
        env={"KSE_PROBE": "kept"},
        cwd=tmp_path,
        ready_file=ready,
        ready_check=ready_file_json,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_started_from_the_main_thread_dies_with_its_parent_and_is_otherwise_unchanged(
    tmp_path: Path,
) -> None:
    proc = _probe(tmp_path, "probe").start()
    seen = proc.wait_ready_sync(ready_timeout=10)
    assert seen["pdeathsig"] == signal.SIGKILL
    assert seen["ppid"] == os.getpid() and seen["pid"] == proc.pid  # the command replaced the wrapper
    assert seen["argv"][1:] == [str(tmp_path / "run" / "probe.json"), "an arg"]
    assert seen["env"] == "kept" and seen["cwd"] == str(tmp_path)
    deadline = time.monotonic() + 10
    while proc.returncode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_started_from_a_worker_thread_outlives_that_thread(tmp_path: Path) -> None:
    """The kernel sends the parent-death signal when the forking *thread* ends."""
    started: list[ManagedProcess] = []
    worker = threading.Thread(target=lambda: started.append(_probe(tmp_path, "from-thread").start()))
    worker.start()
    worker.join()
    seen = started[0].wait_ready_sync(ready_timeout=10)
    assert seen["pdeathsig"] == 0


def test_a_missing_executable_is_refused_by_name(tmp_path: Path) -> None:
    proc = ManagedProcess("ghost", ["kse-no-such-binary", "--flag"], data_dir=tmp_path)
    with pytest.raises(LaunchError, match="cannot start ghost: kse-no-such-binary not found"):
        proc.start()
    assert not proc.running


async def test_children_start_cleanly_while_grpc_aio_calls_run_in_the_parent(tmp_path: Path) -> None:
    """Starting a child must not run Python in the forked copy of this process. With grpc.aio calls
    in flight on the loop, a `preexec_fn` made about a third of the children die of SIGSEGV or
    SIGABRT before their first line (seen in CI as a scheduler restart "exited with code -6")."""
    import grpc  # the parent's gRPC state is the point of the test

    async def echo(request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler(
        "probe.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server = grpc.aio.server(handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stop = asyncio.Event()

    async def hammer() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/probe.Echo/Echo")
            while not stop.is_set():
                await call(b"x", timeout=5)

    codes: list[int] = []
    try:
        async with asyncio.TaskGroup() as tg:
            for _ in range(4):
                tg.create_task(hammer())
            await asyncio.sleep(0)  # the calls are in flight before the first start
            for i in range(40):
                argv = [sys.executable, "-c", "print('ran')"]
                proc = ManagedProcess(f"quick-{i}", argv, data_dir=tmp_path).start()
                async with asyncio.timeout(20):
                    codes.append(await proc.wait())
            stop.set()
    finally:
        await server.stop(0)
    assert codes == [0] * 40


async def test_every_start_is_a_life_with_its_start_and_the_exit_seen(tmp_path: Path) -> None:
    proc = child(tmp_path)
    before = time.time()
    proc.start()
    await proc.wait_ready(ready_timeout=10)
    first_pid = proc.pid
    assert proc.kill() == -signal.SIGKILL
    proc.start()
    await proc.wait_ready(ready_timeout=10)
    [first, second] = proc.lives
    assert first.pid == first_pid and second.pid == proc.pid
    assert before <= first.started_at <= (first.ended_at or 0) <= second.started_at
    assert first.exit_code == -signal.SIGKILL
    assert second.ended_at is None and second.exit_code is None  # still running
    await proc.terminate(grace=5)
    assert second.ended_at is not None and second.exit_code == -signal.SIGTERM
