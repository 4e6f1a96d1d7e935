"""HTTP probes of a scheduler replica's metrics/health server (`--metrics-bind-address`): is it
ready (`/readyz`: informers synced), does it say it leads (`leader_election_master_status`)?

The waits (`chaos.waits`) ask a backend for these; the local backend answers with this module,
over `kse.scrape.http_get` (aiohttp's client).
"""

from __future__ import annotations

import re

from kse.scrape import http_get

__all__ = ["master_status", "ready"]

_MASTER = re.compile(r'^leader_election_master_status\{[^}]*name="kube-scheduler"[^}]*\}\s+(\S+)', re.M)


async def _get(address: str, path: str, within: float = 2.0) -> tuple[int, str] | None:
    """`kse.scrape.http_get`, or None if nothing answers within `within` s (a paused or dead
    process): a probe's "no" is not an error."""
    try:
        return await http_get(address, path, within)
    except (OSError, TimeoutError, ValueError):
        return None


async def ready(address: str) -> bool:
    """Whether the replica's /readyz answers 200 (its informers have synced: a warm candidate)."""
    got = await _get(address, "/readyz")
    return got is not None and got[0] == 200


async def master_status(address: str) -> float | None:
    """The replica's `leader_election_master_status{name="kube-scheduler"}` (1 leading, 0 not), or
    None if it does not answer or does not export it."""
    got = await _get(address, "/metrics")
    if got is None or got[0] != 200:
        return None
    m = _MASTER.search(got[1])
    return float(m.group(1)) if m else None
