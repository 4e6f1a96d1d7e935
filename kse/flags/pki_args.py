"""The flags of commands that issue a PKI: `kse certs init` and `kse datadir init` (and `--ttl` of
`kse certs rotate` / `rotate-ca`).

One definition of each flag (name, type, metavar, how it repeats); each command keeps its own help
text, which says what the flag means there.
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from kse.durations import GO_UNITS_WITH_DAYS, DurationError, DurationFlag, parse_go_duration_ns
from kse.flags.argtypes import non_negative_int


def cert_lifetime(text: str) -> timedelta:
    """A certificate lifetime: a Go duration that may also use days and weeks ("365d", "8760h",
    "1h30m", "90s"), > 0. Unlike other duration flags, a bare number is refused: a lifetime of "10"
    (seconds? days?) is more likely a mistake than a wish for 10-second certificates."""
    try:
        ns = parse_go_duration_ns(text, units=GO_UNITS_WITH_DAYS)
    except DurationError:
        raise DurationError("not a duration with a unit (examples: 365d, 12h, 1h30m, 90s)") from None
    if ns <= 0:
        raise DurationError("a lifetime must be > 0 (a duration such as 365d, 12h, 1h30m)")
    return timedelta(microseconds=ns // 1000)


def add_scheduler_replicas_flag(p: argparse.ArgumentParser, *, help: str) -> None:
    """`--scheduler-replicas N` (default 3): how many scheduler identities to issue."""
    p.add_argument("--scheduler-replicas", type=non_negative_int, default=3, metavar="N", help=help)


def add_hosts_flag(p: argparse.ArgumentParser, *, help: str) -> None:
    """`--host H [H ...]` (repeatable, into `args.hosts`): extra names in the API server's cert."""
    p.add_argument("--host", dest="hosts", action="extend", nargs="+", default=[], metavar="H", help=help)


def add_ttl_flag(p: argparse.ArgumentParser, *, default: timedelta | None, help: str) -> None:
    """`--ttl DURATION` (`args.ttl`, a timedelta): the lifetime of the certificates issued."""
    p.add_argument(
        "--ttl", action=DurationFlag, convert=cert_lifetime, default=default, metavar="DURATION", help=help
    )
