"""The leader-election flags of the commands that start a scheduler cluster: `kse up` and
`kse bench failover` (`--election --lease-duration --renew-deadline --retry-period --on-lost-lease`).

One definition (names, defaults, help, the duration convention of `kse.durations`) so both commands
take the same values with the same words. The flags only read values; the election's rules
(leaseDuration > renewDeadline > JitterFactor x retryPeriod, a lease of at least a second) are
checked once, by the harness's `ElectionPlan`, whose problems name its fields: `in_flag_words`
turns them back into these flags. Each flag passes the replicas' `kse scheduler --leader-elect-*`
flag of the same meaning.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

from kse.durations import DurationFlag

__all__ = ["ELECTION_FLAGS", "add_election_flags", "in_flag_words"]

# An election field (harness.shape.ElectionPlan) -> the flag that sets it.
ELECTION_FLAGS: Mapping[str, str] = {
    "strategy": "--election",
    "lease_duration": "--lease-duration",
    "renew_deadline": "--renew-deadline",
    "retry_period": "--retry-period",
    "on_lost_lease": "--on-lost-lease",
}


def add_election_flags(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add the leader-election group (returned, for a caller's own election flags). Values land in
    `args.election`, `args.lease_duration`, `args.renew_deadline` and `args.retry_period` (float
    seconds) and `args.on_lost_lease`; defaults are kube-scheduler's."""
    # Here, not at module top: `kse bench` imports its commands' modules to build its parser, and
    # the leader-election package brings grpc with it.
    from kse.leaderelection.config import (
        DEFAULT_LEASE_DURATION,
        DEFAULT_RENEW_DEADLINE,
        DEFAULT_RETRY_PERIOD,
        ON_LOST_LEASE,
        STRATEGIES,
    )

    le = p.add_argument_group("leader election (kube-scheduler's --leader-elect-* flags)")
    le.add_argument(
        "--election",
        choices=STRATEGIES,
        default=STRATEGIES[0],
        help="how standbys follow the Lease: watch it (kse) or poll it (client-go) (default %(default)s)",
    )
    for flag, default, upstream in (
        ("--lease-duration", DEFAULT_LEASE_DURATION, "--leader-elect-lease-duration"),
        ("--renew-deadline", DEFAULT_RENEW_DEADLINE, "--leader-elect-renew-deadline"),
        ("--retry-period", DEFAULT_RETRY_PERIOD, "--leader-elect-retry-period"),
    ):
        le.add_argument(
            flag, action=DurationFlag, default=default, metavar="S", help=f"{upstream} (default {default:g})"
        )
    le.add_argument(
        "--on-lost-lease",
        choices=ON_LOST_LEASE,
        default=ON_LOST_LEASE[0],
        help="what a leader that loses the lease does: exit (then its supervisor restarts it, as "
        "upstream) or go back to standby (default %(default)s)",
    )
    return le


def in_flag_words(text: str, flags: Mapping[str, str] = ELECTION_FLAGS) -> str:
    """A shape problem in its fields' words ("renew_deadline: must be < lease_duration (5s), got
    6s") in the flags' ("--renew-deadline: must be < --lease-duration (5s), got 6s")."""
    return re.sub(r"\b[a-z_]+\b", lambda m: flags.get(m.group(0), m.group(0)), text)
