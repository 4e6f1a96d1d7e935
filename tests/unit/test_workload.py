"""The workload generator: its absolute pacing schedule, bursts, totals, failures and clean stops."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path
from typing import Any

import pytest

from kse.client.errors import AlreadyExistsError, UnavailableError
from kse.objects.podresources import pod_requests
from nodesim import workload_cli
from nodesim.workload import (
    CANCELLED,
    RUN_LABEL,
    Schedule,
    Workload,
    WorkloadConfig,
    WorkloadError,
    default_pod_template,
    load_pod_template,
)
from proto import kse_pb2 as pb


class FakeClock:
    """Virtual time: `sleep` jumps the clock, then yields once so other tasks run."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)


def workload(config: WorkloadConfig, create: Any, clock: FakeClock | None = None) -> Workload:
    return Workload(types.SimpleNamespace(), config, clock=clock, create=create)  # type: ignore[arg-type]


async def instant(pod: pb.Pod) -> pb.Pod:
    return pod


# ---------------------------------------------------------------- the schedule


def test_schedule_offsets() -> None:
    assert [Schedule(rate=4).due(k) for k in range(5)] == [0, 0.25, 0.5, 0.75, 1.0]
    assert [Schedule(burst=3, burst_interval=2).due(k) for k in range(7)] == [0, 0, 0, 2, 2, 2, 4]
    assert Schedule(burst=3, burst_interval=2, rate=100).due(3) == 2  # bursts win over the rate
    assert Schedule().due(10) == 0.0
    with pytest.raises(WorkloadError):
        Schedule(rate=-1)
    with pytest.raises(WorkloadError):
        Schedule(burst=2, burst_interval=0)


def test_config_validation() -> None:
    with pytest.raises(WorkloadError, match="total or a duration"):
        WorkloadConfig()  # unpaced and unbounded: a flood that never ends
    with pytest.raises(WorkloadError):
        WorkloadConfig(total=1, concurrency=0)
    WorkloadConfig(rate=5)  # runs until stopped


# ---------------------------------------------------------------- pacing with an injected clock


async def test_rate_on_absolute_schedule() -> None:
    clock = FakeClock()
    wl = workload(WorkloadConfig(rate=10, total=20), instant, clock)
    summary = await wl.run()
    assert summary.created == 20 and summary.failed == {} and summary.stopped_by == "total"
    assert wl.create_times == pytest.approx([1000.0 + k / 10 for k in range(20)])


async def test_slow_creates_do_not_make_the_schedule_drift() -> None:
    clock = FakeClock()

    async def slow(pod: pb.Pod) -> pb.Pod:
        clock.t += 0.03  # each create costs 30 ms of (virtual) time
        await asyncio.sleep(0)
        return pod

    wl = workload(WorkloadConfig(rate=10, total=100, concurrency=4), slow, clock)
    summary = await wl.run()
    assert summary.created == 100
    lags = [t - (1000.0 + k / 10) for k, t in enumerate(wl.create_times)]
    # A pacer that slept 1/rate after each create would be 100 * 30 ms = 3 s late by the end.
    assert max(lags) <= 0.031
    assert summary.max_lag_s <= 0.031


async def test_burst_mode() -> None:
    clock = FakeClock()
    wl = workload(WorkloadConfig(burst=5, burst_interval=2.0, total=12), instant, clock)
    summary = await wl.run()
    assert summary.created == 12
    assert wl.create_times == [1000.0] * 5 + [1002.0] * 5 + [1004.0] * 2
    assert summary.target_rate == 2.5


async def test_duration_bounds_the_run() -> None:
    clock = FakeClock()
    wl = workload(WorkloadConfig(rate=10, duration=1.0), instant, clock)
    summary = await wl.run()
    assert summary.created == 10 and summary.stopped_by == "duration"  # due at 0.0 .. 0.9 s


async def test_total_zero_creates_nothing() -> None:
    summary = await workload(WorkloadConfig(rate=10, total=0), instant, FakeClock()).run()
    assert (summary.created, summary.attempted, summary.stopped_by) == (0, 0, "total")


async def test_summary_rate_and_duration() -> None:
    clock = FakeClock()
    summary = await workload(WorkloadConfig(rate=10, total=21), instant, clock).run()
    assert summary.duration_s == pytest.approx(2.0)
    assert summary.achieved_rate == pytest.approx(10.5)
    d = summary.to_dict()
    assert {"created", "failed", "duration_s", "achieved_rate"} <= set(d)
    assert "names" not in d


# ---------------------------------------------------------------- outcomes


async def test_failures_are_counted_by_code() -> None:
    async def flaky(pod: pb.Pod) -> pb.Pod:
        k = int(pod.metadata.name.rsplit("-", 1)[1])
        if k % 4 == 0:
            raise AlreadyExistsError(f'pods "{pod.metadata.name}" already exists')
        if k % 4 == 1:
            raise UnavailableError("connection refused")
        return pod

    summary = await workload(WorkloadConfig(total=10, name_prefix="x-"), flaky).run()
    assert summary.failed == {"ALREADY_EXISTS": 3, "UNAVAILABLE": 3}
    assert summary.created == 4 and summary.attempted == 10
    assert summary.names == ["x-2", "x-3", "x-6", "x-7"]


async def test_concurrency_limits_creates_in_flight() -> None:
    inflight = 0
    peak = 0

    async def create(pod: pb.Pod) -> pb.Pod:
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        await asyncio.sleep(0.001)
        inflight -= 1
        return pod

    summary = await workload(WorkloadConfig(total=50, concurrency=3), create).run()
    assert summary.created == 50 and peak == 3


async def test_stop_lets_in_flight_creates_finish() -> None:
    gate = asyncio.Event()
    all_started = asyncio.Event()
    started = 0

    async def create(pod: pb.Pod) -> pb.Pod:
        nonlocal started
        started += 1
        if started == 4:
            all_started.set()
        await gate.wait()
        return pod

    wl = workload(WorkloadConfig(rate=1000, concurrency=4), create)
    run = asyncio.create_task(wl.run())
    await asyncio.wait_for(all_started.wait(), 5)
    wl.stop()
    done, _ = await asyncio.wait([run], timeout=0.05)
    assert not done  # still waiting for the four in flight
    gate.set()
    summary = await asyncio.wait_for(run, 5)
    assert summary.stopped_by == "signal"
    assert summary.created == 4 and summary.attempted == 4 and summary.failed == {}


async def test_stop_grace_reports_unanswered_creates() -> None:
    both = asyncio.Event()
    calls = 0

    async def hang(pod: pb.Pod) -> pb.Pod:
        nonlocal calls
        calls += 1
        if calls == 2:
            both.set()
        await asyncio.Event().wait()
        return pod

    wl = workload(WorkloadConfig(rate=1000, concurrency=2, stop_grace=0.05), hang)
    run = asyncio.create_task(wl.run())
    await asyncio.wait_for(both.wait(), 5)
    wl.stop()
    summary = await asyncio.wait_for(run, 5)
    assert summary.failed == {CANCELLED: 2} and summary.created == 0


async def test_stop_before_run() -> None:
    wl = workload(WorkloadConfig(rate=10), instant, FakeClock())
    wl.stop()
    summary = await wl.run()
    assert summary.created == 0 and summary.stopped_by == "signal"


# ---------------------------------------------------------------- pods from the template


def test_default_template_is_scheduler_perf_pod_default() -> None:
    pod = default_pod_template()
    assert pod.metadata.generate_name == "pod-"
    assert pod_requests(pod) == {"cpu": 100, "memory": 500 * 1024 * 1024}


def test_pods_from_template() -> None:
    cfg = WorkloadConfig(total=1, namespace="ns1", run_id="abc", labels={"app": "x"})
    wl = workload(cfg, instant)
    pod = wl.pod(7)
    assert pod.metadata.name == "pod-abc-7" and pod.metadata.namespace == "ns1"
    assert not pod.metadata.generate_name
    assert dict(pod.metadata.labels) == {"app": "x", RUN_LABEL: "abc"}
    assert pod.kind == "Pod" and pod.api_version == "v1"
    assert workload(WorkloadConfig(total=1, name_prefix="w-"), instant).pod(0).metadata.name == "w-0"


def test_pod_template_file(tmp_path: Path) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {tier: fe}}\n"
        "spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: 250m}}}]}\n"
    )
    cfg = WorkloadConfig(template=load_pod_template(str(f)), total=1, run_id="r")
    pod = workload(cfg, instant).pod(0)
    assert pod.metadata.name == "web-r-0" and pod.metadata.labels["tier"] == "fe"
    f.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    with pytest.raises(WorkloadError):
        load_pod_template(str(f))


def test_cli_flags_build_the_config() -> None:
    p = workload_cli.build_parser()
    args = p.parse_args(["--rate", "20", "--total", "100", "--delete-after", "30s", "--burst-interval", "2s",
                         "--run-id", "r1", "-n", "bench"])
    cfg = workload_cli.config_from_args(p, args)
    assert isinstance(cfg, WorkloadConfig)
    got = (cfg.rate, cfg.total, cfg.delete_after, cfg.run_id, cfg.namespace)
    assert got == (20.0, 100, 30.0, "r1", "bench")
    with pytest.raises(SystemExit):
        workload_cli.config_from_args(p, p.parse_args([]))  # neither pacing nor bounds
