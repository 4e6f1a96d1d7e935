"""Diagnostics of the machine a benchmark runs on, for a slow timing: was a process starved of CPU
(the kernel's schedstat run-queue waits), was etcd's disk slow (its WAL fsync and backend commit
histograms)? Nothing here is a timing of the system under test.
"""

from __future__ import annotations

import os
import re
import ssl
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from harness.procs.proctable import schedstat

if TYPE_CHECKING:
    from harness.up import Cluster

__all__ = [
    "RunQueueMeter",
    "cluster_pids",
    "etcd_histograms",
    "histogram_summary",
    "probe",
    "scheduler_cpu_seconds",
]


class RunQueueMeter:
    """How long our processes waited for a CPU while runnable (the kernel's schedstat, read by
    `harness.procs.proctable.schedstat`), per process name, over the samples taken: `sample()` at
    the start, before each fault and after each trial (so a replica's pid is seen before it is
    killed), and at the end. A pid first seen after the start counts from its birth."""

    def __init__(self) -> None:
        self._first: dict[int, tuple[float, float, int]] = {}
        self._last: dict[int, tuple[float, float, int]] = {}
        self._names: dict[int, str] = {}
        self._t0 = time.monotonic()
        self._initial = True

    def sample(self, procs: dict[int, str]) -> None:
        for pid, name in procs.items():
            st = schedstat(pid)
            if st is None:
                continue
            self._names[pid] = name
            self._first.setdefault(pid, st if self._initial else (0.0, 0.0, 0))
            self._last[pid] = st
        self._initial = False

    def summary(self) -> dict[str, dict[str, float]]:
        """Per name: `wait_pct` (run-queue wait as % of the wall time) and `wait_per_slice_ms` (the
        mean delay between becoming runnable and running: what a timer or a message waits extra)."""
        wall = max(time.monotonic() - self._t0, 1e-9)
        acc: dict[str, list[float]] = {}
        for pid, last in self._last.items():
            first = self._first[pid]
            a = acc.setdefault(self._names[pid], [0.0, 0.0])
            a[0] += max(0.0, last[1] - first[1])
            a[1] += max(0, last[2] - first[2])
        return {
            name: {
                "wait_pct": round(100.0 * wait / wall, 1),
                "wait_per_slice_ms": round(1000.0 * wait / slices, 3) if slices else 0.0,
            }
            for name, (wait, slices) in sorted(acc.items())
        }


def cluster_pids(cluster: Cluster) -> dict[int, str]:
    out: dict[int, str] = {os.getpid(): "bench"}
    for name, proc in cluster.processes():
        if proc.pid is not None and proc.running:
            out[proc.pid] = name
    return out


_BUCKET = re.compile(r'^(etcd_disk_wal_fsync_duration_seconds|etcd_disk_backend_commit_duration_seconds)'
                     r'_bucket\{le="([^"]+)"\}\s+(\S+)', re.M)  # fmt: skip


async def etcd_histograms(cluster: Cluster) -> dict[str, dict[float, float]] | None:
    """etcd's WAL fsync and backend commit latency histograms (cumulative buckets) from its
    /metrics, over the same mTLS the API server uses; None if unreachable."""
    from harness.procs.etcd import EtcdServerTLS
    from kse.scrape import http_get

    members = cluster.etcd_members
    if not members or cluster.pki is None:
        return None
    url = members[0].endpoint
    scheme, _, hostport = url.partition("://")
    ctx = None
    if scheme == "https":
        tls = EtcdServerTLS.from_pki_dir(cluster.pki.dir)
        ctx = ssl.create_default_context(cafile=str(tls.ca_file))
        if tls.client_cert_file is not None and tls.client_key_file is not None:
            ctx.load_cert_chain(str(tls.client_cert_file), str(tls.client_key_file))
    try:
        _, raw = await http_get(hostport, "/metrics", 5.0, tls=ctx)
    except (OSError, TimeoutError):
        return None
    out: dict[str, dict[float, float]] = {}
    for name, le, value in _BUCKET.findall(raw):
        try:
            bucket, count = float(le), float(value)
        except ValueError:
            continue
        out.setdefault(name.removeprefix("etcd_disk_").removesuffix("_duration_seconds"), {})[bucket] = count
    return out or None


def histogram_summary(before: dict[float, float] | None, after: dict[float, float]) -> dict[str, Any]:
    """Observations between two scrapes: count, and upper bounds (bucket edges, ms) of p50 / p99 /
    the slowest one."""
    diff = sorted((le, after[le] - (before or {}).get(le, 0.0)) for le in after)
    total = diff[-1][1] if diff else 0.0

    def bound(q: float) -> float | None:
        for le, cum in diff:
            if total and cum >= q * total:
                return None if le == float("inf") else round(le * 1000.0, 3)
        return None

    return {"count": int(total), "p50_le_ms": bound(0.5), "p99_le_ms": bound(0.99), "max_le_ms": bound(1.0)}


async def probe(
    coro: Coroutine[Any, Any, dict[str, dict[float, float]] | None], notes: list[str], what: str
) -> dict[str, dict[float, float]] | None:
    """A diagnostic probe: its failure is a note, never the run's."""
    try:
        return await coro
    except Exception as e:
        notes.append(f"{what} unavailable: {type(e).__name__}: {e}")
        return None


def scheduler_cpu_seconds(cluster: Cluster) -> float:
    """CPU seconds of the scheduler replicas' current processes (restarts lose the dead ones' share)."""
    from harness.bench.common import process_cpu_seconds

    total = 0.0
    for r in cluster.replicas:
        if r.pid is not None:
            total += process_cpu_seconds(r.pid) or 0.0
    return total
