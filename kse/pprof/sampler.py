"""A CPU profile of the live process by stack sampling, with no dependency and no cost when off.

``ITIMER_PROF`` fires SIGPROF every ``1/hz`` seconds of *process CPU time* (all threads); Python
runs the handler in the main thread, where the asyncio loop of every kse component runs, and the
handler records that thread's stack. So the samples are where the event loop spent CPU. A sample
whose stack ends in the selector's wait means the CPU went elsewhere (gRPC's C threads, or the
kernel) while the loop had nothing to run; it is kept, under a frame of its own
(``<event loop idle: CPU used outside Python code>``), so the percentages stay true.

Costs: nothing while no profile runs (no timer, no handler). While one runs: one stack walk per
sample (tens of microseconds at typical depths, so ~0.2 % of one core at 100 Hz) and one wakeup
of the loop per sample (asyncio's signal wakeup fd). One profile at a time (as Go's pprof, which
answers "cpu profiling already in use").

Outputs (``Profile``):

* ``to_pstats()``: the bytes of a ``pstats`` file (``marshal`` of the stats table) that
  ``pstats.Stats(path)`` and ``python -m pstats`` open. Times are sampled CPU seconds; ``ncalls``
  counts the samples a function appears in (a sampler sees no calls); callers/callees are the
  sampled edges;
* ``collapsed()``: Brendan Gregg's folded stacks (``a;b;c 12``), for flamegraph.pl or speedscope;
* ``text(limit)``: the top functions by self and cumulative time, as plain text.
"""

from __future__ import annotations

import io
import marshal
import pstats
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType

Func = tuple[str, int, str]  # pstats' function key: (file, first line, name)
IDLE: Func = ("~", 0, "<event loop idle: CPU used outside Python code>")
_IDLE_WAITS = {("selectors.py", "select"), ("selectors.py", "_select")}
MAX_DEPTH = 128


class ProfilerBusy(RuntimeError):
    """Another CPU profile is running."""


@dataclass
class Profile:
    """Sampled stacks (root first) and how many times each was seen."""

    interval: float
    duration: float = 0.0
    stacks: Counter[tuple[Func, ...]] = field(default_factory=Counter)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def to_pstats(self) -> bytes:
        """A pstats file: {func: (primitive calls, calls, self time, cumulative time, callers)}."""
        w = self.interval
        table: dict[Func, list[float]] = {}
        callers: dict[Func, dict[Func, list[float]]] = {}
        for stack, n in self.stacks.items():
            seen: set[Func] = set()
            for depth, func in enumerate(stack):
                row = table.setdefault(func, [0, 0, 0.0, 0.0])
                leaf = depth == len(stack) - 1
                if func not in seen:
                    seen.add(func)
                    row[0] += n
                    row[1] += n
                    row[3] += n * w
                if leaf:
                    row[2] += n * w
                if depth:
                    edge = callers.setdefault(func, {}).setdefault(stack[depth - 1], [0, 0, 0.0, 0.0])
                    edge[0] += n
                    edge[1] += n
                    edge[2] += n * w if leaf else 0.0
                    edge[3] += n * w
        stats = {
            func: (
                int(r[0]),
                int(r[1]),
                r[2],
                r[3],
                {c: (int(e[0]), int(e[1]), e[2], e[3]) for c, e in callers.get(func, {}).items()},
            )
            for func, r in table.items()
        }
        return marshal.dumps(stats)

    def collapsed(self) -> str:
        lines = []
        for stack, n in sorted(self.stacks.items(), key=lambda kv: -kv[1]):
            lines.append(";".join(_label(f) for f in stack) + f" {n}")
        return "\n".join(lines) + ("\n" if lines else "")

    def text(self, limit: int = 30) -> str:
        """The top `limit` functions by self time and by cumulative time (pstats' own printing)."""
        out = io.StringIO()
        out.write(
            f"CPU profile: {self.samples} samples every {self.interval * 1000:g} ms of CPU time over "
            f"{self.duration:.1f} s of wall time ({self.samples * self.interval:.2f} s of CPU sampled)\n"
        )
        if not self.stacks:
            return out.getvalue()
        stats = pstats.Stats(_PstatsSource(self.to_pstats()), stream=out)  # type: ignore[arg-type]  # duck-typed
        stats.sort_stats("tottime").print_stats(limit)
        stats.sort_stats("cumulative").print_stats(limit)
        return out.getvalue()


class _PstatsSource:
    """What pstats.Stats accepts besides a path: an object with create_stats() and .stats."""

    def __init__(self, data: bytes) -> None:
        self.stats = marshal.loads(data)

    def create_stats(self) -> None:
        pass


def _label(func: Func) -> str:
    file, line, name = func
    return name if file == "~" else f"{name} ({file}:{line})"


def _stack_of(frame: FrameType | None) -> tuple[Func, ...]:
    out: list[Func] = []
    while frame is not None and len(out) < MAX_DEPTH:
        code = frame.f_code
        out.append((code.co_filename, code.co_firstlineno, code.co_qualname))
        frame = frame.f_back
    if out and (out[0][0].rsplit("/", 1)[-1], out[0][2].rsplit(".", 1)[-1]) in _IDLE_WAITS:
        return (IDLE,)
    out.reverse()
    return tuple(out)


class Sampler:
    """Takes one CPU profile at a time (`async with`-free: `start()`, then `stop()`)."""

    _lock = threading.Lock()
    _running = False

    def __init__(self, hz: int = 100) -> None:
        if not 1 <= hz <= 1000:
            raise ValueError(f"hz: must be between 1 and 1000, got {hz}")
        self.profile = Profile(interval=1.0 / hz)
        self._previous: object = None
        self._t0 = 0.0

    def start(self) -> None:
        """Install the SIGPROF handler and the timer. Must run in the main thread; raises
        ProfilerBusy when a profile runs already."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("CPU profiling needs the main thread (signals are delivered there)")
        with Sampler._lock:
            if Sampler._running:
                raise ProfilerBusy("cpu profiling already in use")
            Sampler._running = True
        stacks = self.profile.stacks

        def on_sigprof(_signum: int, frame: FrameType | None) -> None:
            stacks[_stack_of(frame)] += 1

        self._previous = signal.signal(signal.SIGPROF, on_sigprof)
        signal.siginterrupt(signal.SIGPROF, False)  # restart the syscalls it interrupts (SA_RESTART)
        self._t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_PROF, self.profile.interval, self.profile.interval)

    def stop(self) -> Profile:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, self._previous if self._previous is not None else signal.SIG_DFL)  # type: ignore[arg-type]
        self.profile.duration = time.monotonic() - self._t0
        with Sampler._lock:
            Sampler._running = False
        return self.profile
