"""Reading a component's HTTP endpoints from outside: metrics, health (tests, benches, probes).

The scheduler serves Prometheus' text format and kube-style health checks on its metrics port;
benches and the harness read them as any scraper would, through these helpers, rather than by
importing the scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterable

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:PORT); port 0 picks a free port. ValueError if malformed."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT (port 0 picks a free one), got {text!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


async def http_get(address: str, path: str, within: float = 10.0) -> tuple[int, str]:
    """GET http://address/path: (status, body). A tiny client for the endpoints above (tests,
    benchmarks); raises OSError, or TimeoutError when no answer comes `within` seconds."""
    host, port = parse_address(address)
    async with asyncio.timeout(within):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split(b" ")
    if len(status_line) < 2 or not status_line[1].isdigit():
        raise OSError(f"malformed HTTP response from {address}: {head[:80]!r}")
    return int(status_line[1]), body.decode("utf-8", "replace")


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Parse the text format back into name -> [(labels, value)] (tests and the e2e bench)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, brace, rest = head.partition("{")
        labels: dict[str, str] = {}
        if brace:
            body = rest[:-1]
            for part in _split_labels(body):
                k, _, v = part.partition("=")
                labels[k] = v[1:-1].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        out.setdefault(name, []).append((labels, float(value)))
    return out


def _split_labels(body: str) -> Iterable[str]:
    part, quoted, escaped = [], False, False
    for ch in body:
        if escaped:
            part.append(ch)
            escaped = False
            continue
        if ch == "\\":
            part.append(ch)
            escaped = True
            continue
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            yield "".join(part)
            part = []
            continue
        part.append(ch)
    if part:
        yield "".join(part)



def sample_sum(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    return sum(v for lbl, v in samples.get(name, []) if all(lbl.get(k) == x for k, x in labels.items()))


def histogram_quantile(q: float, samples: Samples, name: str, **labels: str) -> float:
    """Prometheus' histogram_quantile over the `<name>_bucket` series matching `labels` (summed
    across the other labels): linear interpolation inside the bucket; NaN without observations."""
    buckets: dict[float, float] = {}
    for lbl, value in samples.get(f"{name}_bucket", []):
        if all(lbl.get(k) == x for k, x in labels.items()):
            le = float(lbl["le"])
            buckets[le] = buckets.get(le, 0.0) + value
    if not buckets:
        return math.nan
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    if total == 0:
        return math.nan
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return prev_bound  # in the +Inf bucket: the highest finite bound, as Prometheus
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound
