"""What was run, at the top of every chaos and failover report: the command's kind and name, the
seed, the settings that shape the run, the date (UTC) and the version of kse (with its git commit
when run from a checkout), so a report read a month later says what produced it."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["header_markdown", "kse_version", "run_header"]

_REPO = Path(__file__).resolve().parent.parent


@functools.cache
def kse_version() -> str:
    """`0.1.0` (the installed distribution's), plus `+g<commit>` (and `.dirty`) from a git checkout."""
    try:
        version = metadata.version("kse")
    except metadata.PackageNotFoundError:
        version = "unknown"
    try:
        commit = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+g{commit}" + (".dirty" if dirty else "")


def run_header(kind: str, name: str, seed: int | None, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The header object (`"run"` in report.json): kind ("chaos run", "chaos soak", ...), name, seed,
    settings, date, version."""
    return {
        "kind": kind,
        "name": name,
        "seed": seed,
        "settings": dict(settings),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "version": kse_version(),
    }


def header_markdown(header: Mapping[str, Any]) -> list[str]:
    """The header as the first lines of a Markdown report."""
    seed = "" if header.get("seed") is None else f" (seed {header['seed']})"
    settings = ", ".join(f"{k} {v}" for k, v in header.get("settings", {}).items())
    return [
        f"# kse {header['kind']}: {header['name']}{seed}",
        "",
        f"Run {header['date']} with kse {header['version']}."
        + (f" Settings: {settings}." if settings else ""),
        "",
    ]
