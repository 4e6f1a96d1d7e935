"""SchedulingThroughput as upstream's throughputCollector measures it, and latency summaries.

upstream (test/integration/scheduler_perf/util.go, throughputCollector.run/collect):

* the collector counts pods that *become* scheduled (an informer Add or Update whose old pod had
  no nodeName and whose new one has) in its namespaces, matching its label selector;
* once per second (a ticker) it reads the count; nothing is recorded while the count is 0; the
  first sample with pods scheduled is skipped (it is an outlier: sampling and pod creation start
  independently); an interval with no new pod is not recorded as 0 pods/s but merged into the
  next one that has some, which is then recorded once per merged interval at the rate
  new pods / actual elapsed time;
* the summary sorts the samples: Average is their mean (so it is the mean of per-second rates,
  not pods over elapsed time), PercNN is sample[ceil(n * NN / 100) - 1].

`ThroughputSampler` is the sampling state machine, clock-free so it can be tested: feed it
`tick(now, scheduled)`; `ThroughputCollector` drives it from a 1 s ticker on the event loop.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

SAMPLE_INTERVAL = 1.0  # upstream throughputSampleInterval

BUCKETS = ("Average", "Perc50", "Perc90", "Perc95", "Perc99")


def upstream_percentile(sorted_values: Sequence[float], p: int) -> float:
    """sample[ceil(n * p / 100) - 1] of ascending values, as upstream's collectors index."""
    n = len(sorted_values)
    return float(sorted_values[max(0, math.ceil(n * p / 100) - 1)])


def summarize(values: Sequence[float]) -> dict[str, float] | None:
    """Average, Perc50/90/95/99 of `values` as upstream's collect(); None when there are none."""
    if not values:
        return None
    s = sorted(values)
    out = {"Average": math.fsum(s) / len(s)}
    for p in (50, 90, 95, 99):
        out[f"Perc{p}"] = upstream_percentile(s, p)
    return out


@dataclass
class ThroughputSampler:
    interval: float = SAMPLE_INTERVAL
    samples: list[float] = field(default_factory=list)
    started: bool = False
    last_count: int = 0
    last_time: float = 0.0
    skipped: int = 0

    def tick(self, now: float, scheduled: int) -> None:
        if scheduled == 0:
            return
        if not self.started:
            self.started = True
            self.last_count, self.last_time = scheduled, now
            return
        new = scheduled - self.last_count
        if new == 0:
            self.skipped += 1
            return
        duration = now - self.last_time
        rate = new / duration if duration > 0 else 0.0
        self.samples.extend([rate] * (self.skipped + 1))
        self.last_count, self.last_time, self.skipped = scheduled, now, 0


class ThroughputCollector:
    """Counts pods that become scheduled (`observe(pod_namespace, labels)` is called by the
    cluster for each) and samples the count once per `interval` while `run()` runs."""

    def __init__(
        self,
        namespaces: Sequence[str],
        label_selector: dict[str, str],
        interval: float = SAMPLE_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.namespaces = set(namespaces)
        self.selector = dict(label_selector)
        self.sampler = ThroughputSampler(interval)
        self.scheduled = 0
        self.clock = clock

    def observe(self, namespace: str, labels: dict[str, str] | None) -> None:
        if namespace not in self.namespaces:
            return
        if self.selector:
            got = labels or {}
            if any(got.get(k) != v for k, v in self.selector.items()):
                return
        self.scheduled += 1

    async def run(self) -> None:
        """Sample on a fixed-phase ticker (as Go's time.Ticker) until cancelled."""
        start = self.clock()
        n = 0
        while True:
            n += 1
            delay = start + n * self.sampler.interval - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                n = int((self.clock() - start) / self.sampler.interval)  # a late tick drops missed ones
                await asyncio.sleep(0)
            self.sampler.tick(self.clock(), self.scheduled)

    def summary(self) -> dict[str, float] | None:
        return summarize(self.sampler.samples)
