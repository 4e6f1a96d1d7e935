"""Event-loop contention: how late the loop runs what is due, and what blocked it.

In an asyncio process the contended resource is the event loop itself: a callback that runs
long (a big sort, a synchronous call, a scheduling cycle over many nodes) delays every other
task, as a held mutex delays Go's goroutines. ``LoopWatch`` measures that at no cost per
callback:

* a *tick* on the loop every ``interval`` (50 ms) records how late it ran (the loop's lag) in a
  histogram;
* a *watchdog thread* wakes every ``interval / 2`` and, when the loop has not ticked for
  ``threshold`` (100 ms), takes the loop thread's stack at that moment, which is the code
  blocking it, once per stall. When the loop ticks again the stall's length is known and added
  to that stack's record.

``report()`` gives the lag percentiles and the blocking stacks by total blocked time, as text
(``/debug/pprof/block``) or a dict (``?format=json``). Cost: one timer callback per 50 ms on the
loop and one short wakeup of a thread per 25 ms (measured in the README).
"""

from __future__ import annotations

import asyncio
import bisect
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .sampler import Func, _label, _stack_of

# Lag histogram upper bounds, seconds.
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
MAX_STACKS = 512  # distinct blocking stacks kept (the rest counted as "other")


@dataclass
class _Stall:
    count: int = 0
    total: float = 0.0
    longest: float = 0.0


@dataclass
class LagStats:
    ticks: int = 0
    total: float = 0.0
    maximum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS) + 1))

    def observe(self, lag: float) -> None:
        self.ticks += 1
        self.total += lag
        self.maximum = max(self.maximum, lag)
        self.buckets[bisect.bisect_left(LAG_BUCKETS, lag)] += 1

    def quantile(self, q: float) -> float:
        """The upper bound of the bucket holding the q-quantile (Prometheus-style, coarse)."""
        if not self.ticks:
            return 0.0
        rank, seen = q * self.ticks, 0
        for i, n in enumerate(self.buckets):
            seen += n
            if seen >= rank:
                return LAG_BUCKETS[i] if i < len(LAG_BUCKETS) else self.maximum
        return self.maximum


class LoopWatch:
    """Watches the running loop while `async with` (or between `start()` and `stop()`)."""

    def __init__(
        self, *, interval: float = 0.05, threshold: float = 0.1, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if interval <= 0 or threshold < interval:
            raise ValueError("interval must be positive and threshold at least the interval")
        self.interval = interval
        self.threshold = threshold
        self._clock = clock
        self.lag = LagStats()
        self.stalls: dict[tuple[Func, ...], _Stall] = {}
        self.started = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._last_tick = 0.0
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._pending: tuple[Func, ...] | None = None  # stack of the stall in progress
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    async def __aenter__(self) -> LoopWatch:
        self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self.started = self._last_tick = self._clock()
        self._schedule()
        self._thread = threading.Thread(target=self._watch, name="pprof-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval + 1)

    # ------------------------------------------------------------------ on the loop

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self._clock() + self.interval
        self._handle = self._loop.call_later(self.interval, self._tick)

    def _tick(self) -> None:
        now = self._clock()
        lag = max(0.0, now - self._due)
        self.lag.observe(lag)
        with self._lock:
            self._last_tick = now
            pending, self._pending = self._pending, None
        if pending is not None:
            stall = self.stalls.get(pending)
            if stall is None:
                pending = pending if len(self.stalls) < MAX_STACKS else (("~", 0, "<other stacks>"),)
                stall = self.stalls.setdefault(pending, _Stall())
            stall.count += 1
            stall.total += lag + self.interval
            stall.longest = max(stall.longest, lag + self.interval)
        if not self._stop.is_set():
            self._schedule()

    # ------------------------------------------------------------------ the watchdog

    def _watch(self) -> None:
        while not self._stop.wait(self.interval / 2):
            with self._lock:
                stalled = self._clock() - self._last_tick > self.threshold + self.interval
                fresh = stalled and self._pending is None
            if not fresh:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            stack = _stack_of(frame)
            with self._lock:
                if self._pending is None:
                    self._pending = stack

    # ------------------------------------------------------------------ the report

    def report(self) -> dict[str, Any]:
        stalls = sorted(self.stalls.items(), key=lambda kv: -kv[1].total)
        return {
            "watching_seconds": round(self._clock() - self.started, 3),
            "interval_seconds": self.interval,
            "threshold_seconds": self.threshold,
            "lag": {
                "ticks": self.lag.ticks,
                "mean_seconds": self.lag.total / self.lag.ticks if self.lag.ticks else 0.0,
                "p50_seconds": self.lag.quantile(0.5),
                "p99_seconds": self.lag.quantile(0.99),
                "max_seconds": self.lag.maximum,
                "buckets": {
                    **{f"le_{b:g}": n for b, n in zip(LAG_BUCKETS, self.lag.buckets, strict=False)},
                    "le_inf": self.lag.buckets[-1],
                },
            },
            "stalls": [
                {
                    "count": s.count,
                    "total_seconds": round(s.total, 4),
                    "longest_seconds": round(s.longest, 4),
                    "stack": [_label(f) for f in reversed(stack)],  # innermost first
                }
                for stack, s in stalls
            ],
        }

    def text(self) -> str:
        r = self.report()
        lag = r["lag"]
        lines = [
            f"event loop watched for {r['watching_seconds']:.1f} s: a tick every "
            f"{self.interval * 1000:g} ms, a stall is no tick for {self.threshold * 1000:g} ms",
            f"lag: {lag['ticks']} ticks, mean {lag['mean_seconds'] * 1000:.2f} ms, p50 <= "
            f"{lag['p50_seconds'] * 1000:g} ms, p99 <= {lag['p99_seconds'] * 1000:g} ms, "
            f"max {lag['max_seconds'] * 1000:.1f} ms",
            f"stalls: {sum(s['count'] for s in r['stalls'])} (by total time blocked; the stack the "
            "watchdog saw, innermost first)",
            "",
        ]
        for s in r["stalls"]:
            lines.append(
                f"{s['count']} stalls, {s['total_seconds']:.3f} s total, "
                f"longest {s['longest_seconds']:.3f} s @"
            )
            lines += [f"    {f}" for f in s["stack"]]
            lines.append("")
        return "\n".join(lines) + "\n"
