"""The clocks leader election reads: one protocol, a real clock, a manual clock, a skewed clock.

Leader election measures every duration on the candidate's own clock (client-go's rule, see
`elector`), so the clock is injected, never read from `time` directly:

* `now()` - monotonic seconds. Only differences of two readings of the same clock mean anything;
  this is what lease expiry, renew deadlines and retry periods are measured with.
* `wall()` - an aware UTC datetime, written into the Lease (acquireTime, renewTime). Other
  candidates never compare it with their own time; it is informational (kubectl, the chaos history).
* `sleep_until(deadline)` / `timeout_at(deadline)` - wait for, or bound an operation by, a
  `now()` reading.

`RealClock` is the process's clock (the tests' `FakeClock`, in `tests/fixtures/leaderelection.py`,
moves only when a test moves it, so elections run deterministically). `SkewedClock` runs another
clock at an offset and a rate (a replica whose clock is wrong, or runs fast or slow), for the
chaos scenarios; `SkewFileClock` is a SkewedClock whose offset and rate come from a JSON file that
the chaos harness rewrites while the replica runs (`kse scheduler --clock-skew-file`). All of them
also have `sleep(seconds)`, so they serve as the `now()`/`sleep()` clocks of `kse.client.ratelimit`
and `nodesim.workload` too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kse.tasks import TaskSet

__all__ = [
    "Clock",
    "RealClock",
    "SkewFileClock",
    "SkewFileError",
    "SkewedClock",
    "read_skew_file",
]

log = logging.getLogger(__name__)


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds; only differences between readings are meaningful."""
        ...

    def wall(self) -> datetime:
        """The wall-clock time (aware, UTC), for timestamps written into objects."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return once `now() >= deadline` (at once if it already is)."""
        ...

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[Any]:
        """Like `asyncio.timeout_at`, on this clock: cancel the body at `deadline`, raise TimeoutError."""
        ...


class RealClock:
    """The process's monotonic clock (the event loop's own) and the system wall clock."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - self.now()))

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self.now() + seconds)

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[Any]:
        # The loop's clock is time.monotonic() by default; translate anyway, in case it is not.
        loop = asyncio.get_running_loop()
        return asyncio.timeout_at(loop.time() + (deadline - self.now()))


class SkewedClock:
    """`base` seen from a machine whose clock is off by `offset` seconds and runs at `rate`.

    The offset moves only the wall clock: wall() = wall₀ + (base elapsed) · rate + offset. The
    monotonic reading every duration is measured with is bent only by the rate: now() = now₀ + (base
    elapsed) · rate. That is what a Go process sees when NTP steps the wall clock: `time.Now()` carries
    a monotonic reading, and client-go's leader election takes its durations from `Sub` on it
    (k8s.io/client-go/tools/leaderelection/leaderelection.go, `isLeaseValid` / `renew`), so a
    stepped clock changes only the renewTime written into the Lease, while a clock that runs fast or
    slow stretches every lease duration, renew deadline and retry period it measures.

    Both are anchored when built (or re-anchored by `set_skew`, continuing from the current reading).
    Sleeps and timeouts are translated back onto `base`, so a clock running at rate 2 sleeps half as
    long in base time. A sleeper already waiting when the rate changes wakes by the old mapping
    (then sleeps more if it woke early).
    """

    def __init__(self, base: Clock, *, offset: float = 0.0, rate: float = 1.0) -> None:
        if rate <= 0:
            raise ValueError(f"a clock rate must be positive, got {rate}")
        self._base = base
        self._offset = offset
        self._rate = rate
        self._base0 = base.now()
        self._local0 = self._base0
        self._wall_base0 = base.wall()
        self._wall_local0 = self._wall_base0

    @property
    def offset(self) -> float:
        return self._offset

    @property
    def rate(self) -> float:
        return self._rate

    def set_skew(self, *, offset: float | None = None, rate: float | None = None) -> None:
        """Change the skew from now on; both readings continue from where they are (wall() plus any
        change of offset)."""
        if rate is not None and rate <= 0:
            raise ValueError(f"a clock rate must be positive, got {rate}")
        local_now = self.now()
        wall_now = self.wall() - timedelta(seconds=self._offset)
        self._base0 = self._base.now()
        self._local0 = local_now
        self._wall_base0 = self._base.wall()
        self._wall_local0 = wall_now
        if offset is not None:
            self._offset = offset
        if rate is not None:
            self._rate = rate

    def now(self) -> float:
        return self._local0 + (self._base.now() - self._base0) * self._rate

    def wall(self) -> datetime:
        elapsed = (self._base.wall() - self._wall_base0).total_seconds()
        return self._wall_local0 + timedelta(seconds=elapsed * self._rate + self._offset)

    def _to_base(self, deadline: float) -> float:
        return self._base0 + (deadline - self._local0) / self._rate

    async def sleep_until(self, deadline: float) -> None:
        while True:
            base_deadline = self._to_base(deadline)
            await self._base.sleep_until(base_deadline)
            # Loop only if the skew changed while asleep (the deadline moved later in base time).
            if self.now() >= deadline or self._base.now() >= self._to_base(deadline):
                return

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self.now() + seconds)

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[Any]:
        return self._base.timeout_at(self._to_base(deadline))


# ---------------------------------------------------------------- skew from a file


class SkewFileError(ValueError):
    """A clock-skew file that cannot be used; the message names the file and the field."""


def read_skew_file(path: Path) -> tuple[float, float] | None:
    """(offset_s, rate) from a JSON file `{"offset_s": float, "rate": float}`; None if it does not
    exist. A missing key means no skew in that dimension (offset 0, rate 1). Raises SkewFileError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SkewFileError(f"{path}: cannot read: {e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise SkewFileError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise SkewFileError(f'{path}: expected an object {{"offset_s": ..., "rate": ...}}, got {text[:80]!r}')
    unknown = sorted(set(data) - {"offset_s", "rate"})
    if unknown:
        raise SkewFileError(f"{path}: unknown field(s) {', '.join(unknown)} (expected offset_s, rate)")
    values: dict[str, float] = {}
    for key, default in (("offset_s", 0.0), ("rate", 1.0)):
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise SkewFileError(f"{path}: {key} must be a finite number, got {value!r}")
        values[key] = float(value)
    if values["rate"] <= 0:
        raise SkewFileError(f"{path}: rate must be positive, got {values['rate']}")
    return values["offset_s"], values["rate"]


_StatKey = tuple[int, int, int]


class SkewFileClock(SkewedClock):
    """A `SkewedClock` whose offset and rate follow a JSON file (`read_skew_file`).

    `check()` looks at the file (one `stat` when it has not changed) and applies a change with
    `set_skew`, so the clock continues from its current skewed reading: a new rate bends the clock
    from now on, and only a changed offset moves it (backwards too, if the new offset is smaller:
    that is what a stepped clock does). A missing file means no skew: offset 0, rate 1, or
    `default` when given (the `--clock-skew` flag). A file that cannot be used is logged (naming the
    field) and the current skew is kept until the file changes again.

    `now()` never touches the file: `run()` (a task, `start()`) calls `check()` every
    `check_interval` seconds of real time, so a change takes effect within that interval.
    """

    def __init__(
        self,
        base: Clock,
        path: Path | str,
        *,
        check_interval: float = 0.25,
        default: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        if check_interval <= 0:
            raise ValueError(f"check_interval must be positive, got {check_interval}")
        offset, rate = default
        super().__init__(base, offset=offset, rate=rate)
        self.path = Path(path)
        self.check_interval = check_interval
        self.default = (offset, rate)
        self.changes = 0  # skews applied from the file (for logs and tests)
        self.last_error: str | None = None
        self._seen: _StatKey | bool | None = False  # False: never looked; None: file absent
        self._tasks: TaskSet | None = None  # owns run() between start() and stop()
        self._task: asyncio.Task[None] | None = None
        self.check()

    def _stat(self) -> _StatKey | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def check(self) -> bool:
        """Look at the file; apply its skew if it changed. Returns whether the skew changed."""
        try:
            key = self._stat()
        except OSError as e:
            self._error(f"{self.path}: cannot stat: {e}")
            return False
        if key == self._seen:
            return False
        try:
            skew = read_skew_file(self.path)
        except SkewFileError as e:
            self._error(str(e))
            return False  # not remembered as seen: the next look reads it again
        self._seen = key if skew is not None else None
        self.last_error = None
        offset, rate = skew if skew is not None else self.default
        if (offset, rate) == (self.offset, self.rate):
            return False
        before = self.now()
        self.set_skew(offset=offset, rate=rate)
        self.changes += 1
        log.warning(
            "clock skew %s: offset %+gs, rate %g (the clock moved %+.3fs)",
            f"from {self.path}" if skew is not None else f"reset ({self.path} is gone)",
            offset,
            rate,
            self.now() - before,
        )
        return True

    def _error(self, message: str) -> None:
        if message != self.last_error:
            log.error("clock skew file not applied, keeping the current skew: %s", message)
        self.last_error = message

    async def run(self) -> None:
        """Check the file every `check_interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.check_interval)
            self.check()

    def start(self) -> asyncio.Task[None]:
        """Start `run()` on the running loop (idempotent); `stop()` ends it."""
        if self._task is None or self._task.done():
            if self._tasks is None:
                self._tasks = TaskSet("clock-skew-file", logger=log)
            self._task = self._tasks.spawn(self.run(), name="clock-skew-file")
        return self._task

    async def stop(self) -> None:
        """Cancel `run()` and wait for it (idempotent; `start()` may follow)."""
        tasks, self._tasks, self._task = self._tasks, None, None
        if tasks is not None:
            await tasks.aclose()
