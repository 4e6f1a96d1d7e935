"""Leader election configuration and callbacks (client-go's LeaderElectionConfig / LeaderCallbacks).

Durations are float seconds. Defaults are kube-scheduler's (component-base
LeaderElectionConfiguration): lease 15 s, renew deadline 10 s, retry period 2 s, the Lease
`kube-system/kube-scheduler`, identity `<hostname>_<uuid>`, release on cancel. `validate()` applies
upstream NewLeaderElector's rules, each message naming the kube-scheduler flag and the
configuration field it comes from.
"""

from __future__ import annotations

import math
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kse.leaderelection.elector import LeaderTerm

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_LEASE_NAME",
    "DEFAULT_LEASE_NAMESPACE",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "JITTER_FACTOR",
    "ON_LOST_LEASE",
    "STRATEGIES",
    "LeaderCallbacks",
    "LeaderElectionConfig",
    "LeaderElectionConfigError",
    "Strategy",
    "default_identity",
]

DEFAULT_LEASE_NAMESPACE = "kube-system"
DEFAULT_LEASE_NAME = "kube-scheduler"
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
# client-go leaderelection.JitterFactor: acquire retries wait retryPeriod * [1, 1 + 1.2).
JITTER_FACTOR = 1.2
# leaseDurationSeconds is an int32 on the wire.
_MAX_LEASE_SECONDS = 2**31 - 1


class Strategy(StrEnum):
    """How a standby learns that the lease changed hands or lapsed."""

    # client-go's loop: every candidate polls (Get) every retryPeriod * [1, 2.2).
    POLL = "poll"
    # kse: standbys watch the Lease and act at the moment it is released or expires; a slow poll
    # covers the time the watch is down. The leader renews exactly as with POLL.
    WATCH = "watch"


# The values of the election flags (`kse scheduler --leader-elect-strategy`, `kse up --election`,
# `kse bench failover --election`), the default first.
STRATEGIES: tuple[str, ...] = (Strategy.WATCH.value, Strategy.POLL.value)
# What a leader that lost its lease does (kse's --on-lost-lease): exit, as upstream, then its
# supervisor restarts it; or stop acting and stand by in the same process.
ON_LOST_LEASE: tuple[str, ...] = ("exit", "standby")


def default_identity() -> str:
    """kube-scheduler's default identity: `<hostname>_<uuid>`, unique per process start."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElectionConfigError(ValueError):
    """An invalid configuration; `errors` lists every problem found (the message joins them)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid leader election configuration: " + "; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class LeaderElectionConfig:
    """What one candidate needs to take part in the election for one Lease."""

    lease_namespace: str = DEFAULT_LEASE_NAMESPACE
    lease_name: str = DEFAULT_LEASE_NAME
    identity: str = field(default_factory=default_identity)
    # How long a standby waits, from the moment it *observed* the last change of the lease record,
    # before it may take the lease over. Written into the Lease as leaseDurationSeconds (rounded up
    # to whole seconds: the promise the holder makes must never be shorter than what it acts on).
    lease_duration: float = DEFAULT_LEASE_DURATION
    # How long the leader keeps trying to renew, from the start of its last successful write, before
    # it stops leading.
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    # The wait between attempts (jittered by JITTER_FACTOR while acquiring).
    retry_period: float = DEFAULT_RETRY_PERIOD
    # Release the lease (holderIdentity "", leaseDurationSeconds 1) when the elector is stopped
    # while leading, so a standby can take over at once.
    release_on_cancel: bool = True
    strategy: Strategy = Strategy.WATCH

    @property
    def lease_duration_seconds(self) -> int:
        """The leaseDurationSeconds this candidate writes: lease_duration rounded up, at least 1."""
        return max(1, math.ceil(self.lease_duration - 1e-9))

    def describe(self) -> str:
        return f"{self.lease_namespace}/{self.lease_name}"

    def validate(self) -> None:
        """Raise LeaderElectionConfigError listing every violated rule (upstream NewLeaderElector's,
        plus the names a Lease needs)."""
        errs: list[str] = []
        lease, renew, retry = self.lease_duration, self.renew_deadline, self.retry_period
        positive = True
        for flag, name, value in (
            ("--leader-elect-lease-duration", "leaseDuration", lease),
            ("--leader-elect-renew-deadline", "renewDeadline", renew),
            ("--leader-elect-retry-period", "retryPeriod", retry),
        ):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                errs.append(f"{flag} ({name}) must be greater than zero, got {_secs(value)}")
                positive = False
        if positive:
            if lease <= renew:
                errs.append(
                    f"--leader-elect-lease-duration (leaseDuration, {_secs(lease)}) must be greater than "
                    f"--leader-elect-renew-deadline (renewDeadline, {_secs(renew)})"
                )
            if renew <= JITTER_FACTOR * retry:
                errs.append(
                    f"--leader-elect-renew-deadline (renewDeadline, {_secs(renew)}) must be greater than "
                    f"--leader-elect-retry-period (retryPeriod, {_secs(retry)}) * "
                    f"JitterFactor {JITTER_FACTOR} = {_secs(JITTER_FACTOR * retry)}"
                )
            if lease > _MAX_LEASE_SECONDS:
                errs.append(
                    f"--leader-elect-lease-duration (leaseDuration) must be at most {_MAX_LEASE_SECONDS}s"
                )
        if not self.lease_namespace:
            errs.append("--leader-elect-resource-namespace (resourceNamespace) is required")
        if not self.lease_name:
            errs.append("--leader-elect-resource-name (resourceName) is required")
        if not self.identity:
            errs.append("--identity: the lock identity is empty")
        if self.strategy not in tuple(Strategy):
            errs.append(
                f"--leader-elect-strategy must be one of {', '.join(s.value for s in Strategy)}, "
                f"got {self.strategy!r}"
            )
        if errs:
            raise LeaderElectionConfigError(errs)

    @classmethod
    def from_component_config(
        cls,
        le: Any,
        *,
        identity: str = "",
        strategy: Strategy | str = Strategy.WATCH,
        release_on_cancel: bool = True,
    ) -> LeaderElectionConfig:
        """From a defaulted `scheduler.apis.config.LeaderElectionConfiguration` (leaseDuration,
        renewDeadline, retryPeriod, resourceNamespace, resourceName). kube-scheduler always
        releases on cancel (`ReleaseOnCancel: true` in its setup)."""
        return cls(
            lease_namespace=le.resource_namespace or DEFAULT_LEASE_NAMESPACE,
            lease_name=le.resource_name or DEFAULT_LEASE_NAME,
            identity=identity or default_identity(),
            lease_duration=float(
                le.lease_duration if le.lease_duration is not None else DEFAULT_LEASE_DURATION
            ),
            renew_deadline=float(
                le.renew_deadline if le.renew_deadline is not None else DEFAULT_RENEW_DEADLINE
            ),
            retry_period=float(le.retry_period if le.retry_period is not None else DEFAULT_RETRY_PERIOD),
            release_on_cancel=release_on_cancel,
            strategy=Strategy(strategy),
        )


def _secs(value: object) -> str:
    return f"{value:g}s" if isinstance(value, int | float) else repr(value)


@dataclass
class LeaderCallbacks:
    """Lifecycle callbacks, as client-go's LeaderCallbacks. All run on the event loop.

    * `on_started_leading(term)`: called synchronously the moment a term begins. If it returns an
      awaitable, that runs as a task for the length of the term and is cancelled when the term ends
      (client-go's ctx); finishing early does not end the term, raising does (and `run()` re-raises
      after cleanup).
    * `on_stopped_leading()`: called synchronously the moment a term ends, before the elector
      does anything else (before the leading task is cancelled, before any release). Called once per
      term, and only for a term that began (client-go calls it whenever Run returns).
    * `on_new_leader(identity)`: called synchronously when the observed holder changes, including
      to "" (released); must not block.
    """

    on_started_leading: Callable[[LeaderTerm], Awaitable[None] | None] | None = None
    on_stopped_leading: Callable[[], None] | None = None
    on_new_leader: Callable[[str], None] | None = None
