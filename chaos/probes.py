"""HTTP probes of a scheduler replica's metrics/health server (`--metrics-bind-address`): is it
ready (`/readyz`: informers synced), does it say it leads (`leader_election_master_status`)?

The waits (`chaos.waits`) ask a backend for these; the local backend answers with this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl

__all__ = ["http_get", "master_status", "ready"]

_MASTER = re.compile(r'^leader_election_master_status\{[^}]*name="kube-scheduler"[^}]*\}\s+(\S+)', re.M)


async def http_get(
    address: str,
    path: str,
    within: float = 2.0,
    *,
    tls: ssl.SSLContext | None = None,
    version: str = "1.1",
) -> tuple[int, str] | None:
    """GET `path` on `address` ("host:port"), over TLS with `tls`; (status, body), or None if nothing
    answers within `within` s (a paused or dead process). `version` "1.0" asks for the body whole,
    never chunked (etcd's /metrics)."""
    host, _, port = address.rpartition(":")
    writer = None
    keep = "" if version == "1.0" else "Connection: close\r\n"
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection(host, int(port), ssl=tls)
            writer.write(f"GET {path} HTTP/{version}\r\nHost: {address}\r\n{keep}\r\n".encode())
            await writer.drain()
            raw = await reader.read()
    except (OSError, TimeoutError, ValueError, ssl.SSLError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        code = int(head.split(b"\r\n", 1)[0].split()[1])
    except (IndexError, ValueError):
        return None
    return code, body.decode(errors="replace")


async def ready(address: str) -> bool:
    """Whether the replica's /readyz answers 200 (its informers have synced: a warm candidate)."""
    got = await http_get(address, "/readyz")
    return got is not None and got[0] == 200


async def master_status(address: str) -> float | None:
    """The replica's `leader_election_master_status{name="kube-scheduler"}` (1 leading, 0 not), or
    None if it does not answer or does not export it."""
    got = await http_get(address, "/metrics")
    if got is None or got[0] != 200:
        return None
    m = _MASTER.search(got[1])
    return float(m.group(1)) if m else None
