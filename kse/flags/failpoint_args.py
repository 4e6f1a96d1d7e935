"""`--failpoints SPEC` and `--failpoints-file PATH`, shared by the components that have failpoints
(the API server, the scheduler): the flag form of KSE_FAILPOINTS / KSE_FAILPOINTS_FILE
(kse.failpoints has the syntax and the list of points)."""

from __future__ import annotations

import argparse
import os

from kse import failpoints

__all__ = ["add_failpoint_flags", "apply_failpoint_flags"]


def add_failpoint_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument(
        "--failpoints",
        metavar="SPEC",
        help="inject faults at named points, e.g. 'storage/after-commit=1*crash' (testing only; "
        "see kse/failpoints.py; default: none)",
    )
    p.add_argument(
        "--failpoints-file",
        metavar="PATH",
        help="read the failpoint SPEC from PATH at start and again on SIGUSR2 (testing only)",
    )


def apply_failpoint_flags(args: argparse.Namespace) -> None:
    """Enable what the flags ask for; FailpointSpecError (a ValueError) for a bad SPEC."""
    if args.failpoints_file:
        os.environ[failpoints.ENV_FILE] = str(args.failpoints_file)
        failpoints.install_from_environment()
    if args.failpoints:
        failpoints.enable(args.failpoints)
