"""Client-side rate limiting, as client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`.

A bucket holds up to `burst` tokens and refills at `qps` tokens a second; it starts full. Every
request takes one token. When the bucket is empty a caller *reserves* the next token and sleeps
until it is due, exactly as `golang.org/x/time/rate.Limiter.Wait` does: reservations are handed out
in call order, so waiters are served first come, first served, and the long-run rate never exceeds
`qps` whatever the concurrency. A caller cancelled while waiting gives its reservation back.

Every wait is recorded (count, total, maximum, and an optional per-call observer), because the
scheduler exports the time spent in the client rate limiter as a metric, as client-go's
`rest_client_rate_limiter_duration_seconds` does.

`qps <= 0` disables limiting: `acquire()` returns at once (client-go's "no rate limiter").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    """Where the limiter reads the time and sleeps; tests inject a fake one."""

    def now(self) -> float:
        """A monotonic time in seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep for `seconds` of this clock's time."""
        ...


class MonotonicClock:
    """The real clock: `time.monotonic` and `asyncio.sleep`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass
class WaitStats:
    """What callers have spent waiting for tokens (only calls that had to wait count in `waited`)."""

    calls: int = 0  # every acquire()
    waited: int = 0  # acquires that had to sleep
    total_seconds: float = 0.0
    max_seconds: float = 0.0
    last_seconds: float = 0.0


class RateLimiter(Protocol):
    """What the clientset needs from a limiter."""

    async def acquire(self) -> float:
        """Wait for permission to send one request; return the seconds waited."""
        ...


class TokenBucketRateLimiter:
    """A token bucket with `qps` refill rate and `burst` capacity (see the module doc)."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Clock | None = None,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps > 0 (got burst={burst})")
        self._qps = float(qps)
        self._burst = int(burst)
        self._clock: Clock = clock or MonotonicClock()
        self._on_wait = on_wait
        self._tokens = float(burst)
        self._last = self._clock.now()
        self.stats = WaitStats()

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    @property
    def enabled(self) -> bool:
        return self._qps > 0

    def _advance(self, now: float) -> None:
        # Refill for the time elapsed since the last reservation, never above the burst.
        elapsed = max(0.0, now - self._last)
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
        self._last = max(self._last, now)

    def tokens(self) -> float:
        """Tokens available now (negative while reservations are outstanding)."""
        if not self.enabled:
            return float("inf")
        self._advance(self._clock.now())
        return self._tokens

    def try_accept(self) -> bool:
        """Take a token if one is available now, without waiting (client-go's `TryAccept`)."""
        if not self.enabled:
            return True
        self._advance(self._clock.now())
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> float:
        """Wait until a token is due; return the seconds waited (0.0 when one was available)."""
        self.stats.calls += 1
        if not self.enabled:
            return 0.0
        now = self._clock.now()
        self._advance(now)
        # Reserve: the token count may go negative; the deficit says when our token is due.
        self._tokens -= 1.0
        delay = -self._tokens / self._qps if self._tokens < 0 else 0.0
        if delay > 0:
            try:
                await self._clock.sleep(delay)
            except asyncio.CancelledError:
                # Give the reservation back so a cancelled waiter does not slow the others.
                self._advance(self._clock.now())
                self._tokens = min(float(self._burst), self._tokens + 1.0)
                raise
        self._record(delay)
        return delay

    def _record(self, seconds: float) -> None:
        s = self.stats
        s.last_seconds = seconds
        if seconds > 0:
            s.waited += 1
            s.total_seconds += seconds
            s.max_seconds = max(s.max_seconds, seconds)
        if self._on_wait is not None:
            self._on_wait(seconds)


def new_token_bucket(
    qps: float,
    burst: int,
    *,
    clock: Clock | None = None,
    on_wait: Callable[[float], None] | None = None,
) -> TokenBucketRateLimiter:
    """client-go's constructor name; `qps <= 0` gives a limiter that never waits."""
    return TokenBucketRateLimiter(qps, burst, clock=clock, on_wait=on_wait)
