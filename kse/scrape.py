"""Reading a component's HTTP endpoints from outside: metrics, health (tests, benches, probes).

The scheduler serves Prometheus' text format and kube-style health checks on its metrics port;
benches and the harness read them as any scraper would, through these helpers, rather than by
importing the scheduler.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:PORT); port 0 picks a free port. ValueError if malformed."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT (port 0 picks a free one), got {text!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


async def http_get(
    address: str, path: str, within: float = 10.0, *, tls: ssl.SSLContext | None = None
) -> tuple[int, str]:
    """GET http://address/path (https:// with `tls`, which then verifies the server and may carry
    a client pair): (status, body), with aiohttp's client (tests, benchmarks, the harness, chaos
    probes). Raises OSError when nothing answers or the answer is broken, TimeoutError when no
    whole answer comes `within` seconds (a paused or dead process)."""
    import aiohttp  # here, not at import: kse/ is imported by every process, most never scrape

    url = f"{'https' if tls is not None else 'http'}://{address}{path}"
    try:
        async with (
            asyncio.timeout(within),
            aiohttp.ClientSession() as session,
            session.get(url, allow_redirects=False, ssl=tls if tls is not None else True) as reply,
        ):
            return reply.status, await reply.text(errors="replace")
    except TimeoutError:
        raise
    except aiohttp.ClientError as e:
        raise OSError(f"GET {url}: {e}") from e


def parse_exposition(text: str) -> Samples:
    """Parse the text format back into name -> [(labels, value)], with prometheus_client's
    parser (tests and the e2e bench). Sample names are as exposed (``x_total``, ``x_bucket``)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


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
