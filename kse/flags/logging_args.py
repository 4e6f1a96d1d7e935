"""`--log-level` and the log format every kse component process shares (one line per record on
stderr, which `kse up` collects into D/logs/<process>.log)."""

from __future__ import annotations

import argparse
import logging

__all__ = ["LOG_LEVELS", "add_log_level_flag", "setup_logging"]

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def add_log_level_flag(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, help: str = "(default: %(default)s)"
) -> None:
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS, help=help)


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper()), format=LOG_FORMAT)
