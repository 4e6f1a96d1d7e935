"""`kse up`'s terminal view (rich) and its log line, from one StatusSnapshot."""

from __future__ import annotations

import io

from rich.console import Console

from harness.up.status import (
    Failover,
    LeaseObservation,
    ProcessInfo,
    ReplicaInfo,
    ReplicaView,
    StatusSnapshot,
    render_line,
    render_view,
)


def snapshot() -> StatusSnapshot:
    def replica(name: str, pid: int | None, running: bool, state: str, restarts: int = 0) -> ReplicaInfo:
        return ReplicaInfo(name, f"{name}-a", (f"{name}-a",), pid, running, False, restarts, state,
                           backoff_remaining_s=3.2 if state == "backoff" else None)  # fmt: skip

    lease = LeaseObservation("scheduler-2-a", 15.0, 95.0, 99.0, 2, observed_at=99.5)
    return StatusSnapshot(
        at=100.0,
        uptime_s=42.0,
        synced=True,
        replicas=[
            ReplicaView(replica("scheduler-1", None, False, "backoff", restarts=1), "backoff"),
            ReplicaView(replica("scheduler-2", 4242, True, "running"), "leader"),
            ReplicaView(replica("scheduler-3", 4343, True, "running"), "standby"),
        ],
        processes=[ProcessInfo("etcd-0", 11, True, None), ProcessInfo("workload", None, False, 3)],
        lease=lease,
        leader="scheduler-2",
        holder_replica="scheduler-2",
        pods={"created": 30, "total": 30, "pending": 2, "bound": 28, "running": 25},
        nodes={"total": 100, "ready": 99},
        binds_per_s=19.5,
        binds_total=28,
        failovers=[Failover("scheduler-1-a", "scheduler-2-a", 90.0, 95.0, 80.0, False, 2, 95.1)],
        hint="kse --config D/config.json get pods",
        notes=("workload finished with exit code 3",),
    )


def test_the_view_shows_every_item_of_the_snapshot() -> None:
    console = Console(file=io.StringIO(), width=140, force_terminal=True, color_system="standard")
    console.print(render_view(snapshot(), ["12:00:01 replica scheduler-1 exited"]))
    text = Console(file=io.StringIO(), width=140, record=True)
    text.print(render_view(snapshot(), ["12:00:01 replica scheduler-1 exited"]))
    lines = [line.rstrip() for line in text.export_text().splitlines()]
    assert lines[0] == "kse up  uptime     42s  view 0.0s old"
    header = next(i for i, line in enumerate(lines) if line.startswith("REPLICA"))
    assert lines[header].split() == ["REPLICA", "ROLE", "PID", "RESTARTS", "IDENTITY"]
    assert lines[header + 1].split() == ["scheduler-1", "backoff", "3s", "-", "1", "scheduler-1-a"]
    assert lines[header + 2].split() == ["scheduler-2", "leader", "4242", "0", "scheduler-2-a"]
    body = "\n".join(lines)
    assert "lease: holder scheduler-2-a = scheduler-2  transitions 2  renewed 1.0s ago  duration 15s" in body
    assert "last failover 5.0s ago: scheduler-1 -> scheduler-2 (expired): 5.000s after takeable" in body
    assert "pods: 2 pending, 28 bound, 25 running (30 created by the workload)" in body
    assert "nodes: 99/100 ready" in body and "processes: etcd-0 11, workload exited 3" in body
    assert "try: kse --config D/config.json get pods" in body and "Ctrl-C stops everything" in body
    assert lines[-2:] == ["events:", "12:00:01 replica scheduler-1 exited"]
    # Colour on a terminal: the leader green, the failed workload red.
    painted = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b[32mleader" in painted and "\x1b[31mexited 3" in painted


def test_the_log_line_is_unchanged() -> None:
    assert render_line(snapshot()) == (
        "[   42s] scheduler-1=backoff(r1) scheduler-2=leader scheduler-3=standby holder=scheduler-2 "
        "transitions=2 pods pending=2 bound=28 running=25 binds/s=19.5 last-failover=5.00s"
    )


def test_a_view_that_stopped_moving_says_so_instead_of_showing_old_news_as_current() -> None:
    import dataclasses

    stale = dataclasses.replace(snapshot(), view_age_s=12.4)
    text = Console(file=io.StringIO(), width=200, record=True)
    text.print(render_view(stale))
    first = text.export_text().splitlines()[0]
    assert "NO UPDATE FOR 12s: the API server or etcd is not answering" in first
    assert render_line(stale).startswith("[   42s] STALE(no update for 12s) scheduler-1=backoff(r1)")
    fresh = dataclasses.replace(snapshot(), view_age_s=4.9)
    assert "STALE" not in render_line(fresh)
