"""What every benchmark shares: a work dir, progress on stderr, percentiles, the result table, and
closed-loop load spread over one or more client processes.

Load functions are `async def load(args, start: StartGate) -> LoadResult`, module-level (so a child
process can import them) and taking picklable `args`; they connect, `await start()`, then run.
`run_load` runs one in this process, or one per client process (`harness.bench.loadproc`), releasing
them together once all have connected; the result merges them (ops summed, the window from the
earliest start to the latest end).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import pickle
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.procs.launcher import Launcher, ManagedProcess
from harness.procs.proctable import process_cpu_seconds, system_busy_seconds
from harness.progress import Reporter

_REPORTER = Reporter("bench")


def progress(message: str) -> None:
    """A progress line on stderr (stdout is reserved for the table or the JSON object); on a
    terminal, above the live bar of a timed load (`harness.progress`)."""
    _REPORTER(message)


@contextlib.contextmanager
def work_dir(prefix: str, keep: bool) -> Iterator[Path]:
    """A fresh temp dir for a run's data (etcd, PKI, logs), removed afterwards unless `keep`."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            progress(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


@dataclass(frozen=True)
class Row:
    """One line of a result table. `passed` is None for a metric without a target."""

    metric: str
    value: str
    target: str = "-"
    passed: bool | None = None


def format_table(rows: Sequence[Row]) -> str:
    header = Row("metric", "value", "target")
    cells = [
        (r.metric, r.value, r.target, _verdict(r) if r is not header else "result") for r in (header, *rows)
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(4)).rstrip() for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _verdict(row: Row) -> str:
    return "-" if row.passed is None else ("PASS" if row.passed else "FAIL")


# ---------------------------------------------------------------------- CPU accounting
# (the /proc readers live in harness.procs.proctable; `process_cpu_seconds` stays importable here)


class CpuMeter:
    """CPU used during a phase, as a percentage of one core over the phase's wall time (100 % = one
    core busy throughout): by the named processes, by this one ("bench"), and by everything else on
    the machine ("other"), which says how much the figures were disturbed by unrelated work."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self.pids = {name: pid for name, pid in pids.items() if pid is not None}
        self._start = self._sample()

    def _sample(self) -> dict[str, float]:
        sample = {"wall": time.monotonic(), "bench": _cpu_now()}
        system = system_busy_seconds()
        if system is not None:
            sample["system"] = system
        for name, pid in self.pids.items():
            cpu = process_cpu_seconds(pid)
            if cpu is not None:
                sample[name] = cpu
        return sample

    def percent(self, *, include_self: bool = True, extra_cpu_seconds: float = 0.0) -> dict[str, float]:
        """Per-process CPU % since construction (call at the end of the phase).

        `extra_cpu_seconds`: CPU of our own processes not named here (load processes), so it is not
        counted as "other".
        """
        end = self._sample()
        wall = max(end["wall"] - self._start["wall"], 1e-9)
        used = {
            name: end[name] - self._start[name]
            for name in end
            if name not in ("wall", "system") and name in self._start
        }
        out = {
            name: round(100.0 * seconds / wall, 1)
            for name, seconds in used.items()
            if include_self or name != "bench"
        }
        if "system" in end and "system" in self._start:
            ours = sum(used.values()) + extra_cpu_seconds
            other = end["system"] - self._start["system"] - ours
            out["other"] = round(max(0.0, 100.0 * other / wall), 1)
        return out


# ---------------------------------------------------------------------- closed-loop load


@dataclass
class LoadResult:
    """What one load generator did: successes, failures by reason, its window, per-op latencies."""

    ok: int = 0
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    start: float = 0.0  # wall clock (time.time), comparable across processes
    end: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, successful ops only
    cpu: float = 0.0  # CPU seconds the generating process used during the window

    @property
    def elapsed(self) -> float:
        return max(self.end - self.start, 1e-9)

    @property
    def rate(self) -> float:
        return self.ok / self.elapsed

    @staticmethod
    def merge(parts: Sequence[LoadResult]) -> LoadResult:
        merged = LoadResult(start=min(p.start for p in parts), end=max(p.end for p in parts))
        for p in parts:
            merged.ok += p.ok
            merged.failed += p.failed
            merged.errors.update(p.errors)
            merged.latencies.extend(p.latencies)
            merged.cpu += p.cpu
        return merged

    def summary(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "failed": self.failed,
            "errors": dict(self.errors),
            "elapsed_s": round(self.elapsed, 3),
            "latency_ms_p50": ms(percentile(self.latencies, 50)) if self.latencies else None,
            "latency_ms_p99": ms(percentile(self.latencies, 99)) if self.latencies else None,
        }


StartGate = Callable[[], Awaitable[None]]
LoadFn = Callable[[Any, StartGate], Coroutine[Any, Any, LoadResult]]


async def _no_gate() -> None:
    return None


def _cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


@contextlib.asynccontextmanager
async def measured_window(result: LoadResult) -> AsyncIterator[None]:
    """Set `result`'s window (wall clock) and the CPU this process used in it."""
    cpu = _cpu_now()
    result.start = time.time()
    try:
        yield
    finally:
        result.end = time.time()
        result.cpu = _cpu_now() - cpu


async def closed_loop(
    inflight: int,
    op: Callable[[int], Awaitable[None]],
    result: LoadResult,
    *,
    until: float | None = None,
    count: int | None = None,
) -> None:
    """`inflight` workers each running `op(i)` back to back for i = 0, 1, ... until `count` ops have
    been issued or the monotonic time `until` has passed. `op` records its own outcome in `result`;
    the window (`result.start`/`end`/`cpu`) is set here."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while True:
            if count is not None and next_index >= count:
                return
            if until is not None and time.monotonic() >= until:
                return
            i = next_index
            next_index += 1
            await op(i)

    timed = None if until is None else max(0.0, until - time.monotonic())
    with _REPORTER.phase(f"closed loop, {inflight} in flight", total_s=timed):
        async with measured_window(result), asyncio.TaskGroup() as tg:
            for _ in range(inflight):
                tg.create_task(worker())


async def per_worker_loop(
    workers: int, op: Callable[[int], Awaitable[None]], result: LoadResult, *, until: float
) -> None:
    """`workers` loops, loop w running `op(w)` back to back until the monotonic time `until` (for
    loads where each worker owns a resource, e.g. one etcd key each)."""

    async def worker(w: int) -> None:
        while time.monotonic() < until:
            await op(w)

    with _REPORTER.phase(f"{workers} workers", total_s=max(0.0, until - time.monotonic())):
        async with measured_window(result), asyncio.TaskGroup() as tg:
            for w in range(workers):
                tg.create_task(worker(w))


@dataclass
class LoadRun:
    """A finished `run_load`: the merged result, the per-process ones, and CPU use in the window."""

    total: LoadResult
    parts: list[LoadResult]
    cpu_percent: dict[str, float]  # % of one core: the named processes, and "client" (all load procs)


async def run_load(
    fn: LoadFn, per_process_args: Sequence[Any], work_dir: Path, pids: dict[str, int | None] | None = None
) -> LoadRun:
    """Run `fn` once per element of `per_process_args`: in this process when there is one, else each
    in its own child process (`python -m harness.bench.loadproc`, started with the kse launcher), released
    together once all have connected. Files for the exchange go under `work_dir`.

    CPU of the processes in `pids` is measured from the release to the end of the load, and the
    load processes' own CPU over their windows, so start-up and connecting are not counted.
    """
    meter: CpuMeter | None = None

    def start_meter() -> None:
        nonlocal meter
        meter = CpuMeter(pids or {})

    if len(per_process_args) == 1:

        async def gate() -> None:
            start_meter()

        part = await fn(per_process_args[0], gate)
        parts = [part]
    else:
        # The load's own bar is in the child processes, whose stderr is a log file: show one here.
        with _REPORTER.phase(f"{fn.__name__} in {len(per_process_args)} processes"):
            parts = await _run_in_processes(fn, per_process_args, work_dir, start_meter)
    total = LoadResult.merge(parts)
    cpu: dict[str, float] = {"client": round(100.0 * total.cpu / total.elapsed, 1)}
    if meter is not None:
        # In-process, this process *is* the client: its CPU is not "other" either way.
        cpu.update(meter.percent(include_self=False, extra_cpu_seconds=total.cpu))
    return LoadRun(total, parts, cpu)


async def _run_in_processes(
    fn: LoadFn, per_process_args: Sequence[Any], work_dir: Path, on_go: Callable[[], None]
) -> list[LoadResult]:
    run_dir = Path(tempfile.mkdtemp(prefix="load-", dir=work_dir))
    go = run_dir / "go"
    target = f"{fn.__module__}:{fn.__name__}"
    async with Launcher(run_dir) as launcher:
        procs: list[ManagedProcess] = []
        for i, args in enumerate(per_process_args):
            spec = run_dir / f"{i}.spec"
            spec.write_bytes(pickle.dumps((target, args)))
            proc = ManagedProcess(
                f"load-{i}",
                [
                    sys.executable,
                    "-m",
                    "harness.bench.loadproc",
                    str(spec),
                    str(run_dir / f"{i}.ready"),
                    str(go),
                    str(run_dir / f"{i}.result"),
                ],
                data_dir=run_dir,
                ready_file=run_dir / f"{i}.ready",
                ready_timeout=60,
            )
            procs.append(launcher.add(proc))
            proc.start()
        for proc in procs:
            await proc.wait_ready()
        on_go()
        go.touch()
        parts: list[LoadResult] = []
        for i, proc in enumerate(procs):
            code = await proc.wait()
            result_file = run_dir / f"{i}.result"
            if code != 0 or not result_file.exists():
                raise RuntimeError(
                    f"load process {proc.name} failed (exit code {code}); last lines of {proc.log_path}:\n"
                    + proc.log_tail()
                )
            parts.append(pickle.loads(result_file.read_bytes()))
    return parts
