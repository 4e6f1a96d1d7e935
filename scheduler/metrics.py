"""The scheduler's metrics in the Prometheus text exposition format (version 0.0.4).

``prometheus_client`` is not a dependency, so this is a small registry of its own: counters,
gauges and histograms with labels, plus collectors that set gauges at scrape time. Names, help
texts, labels and buckets are upstream's (``pkg/scheduler/metrics/metrics.go`` and client-go's
``rest_client_*`` from ``component-base/metrics/prometheus/restclient``), so dashboards and
queries written for kube-scheduler work unchanged.

Differences, each deliberate:

* ``rest_client_requests_total`` keeps upstream's ``code``, ``method`` and ``host`` labels (the
  method is the HTTP method the Kubernetes verb maps to) and adds ``resource``; ``code`` is the
  gRPC status name ("OK", "ABORTED") since kse speaks gRPC.
* ``rest_client_rate_limiter_duration_seconds`` has only the ``host`` label: the limiter does not
  know which request it is admitting.

Everything is single-threaded (the scheduler's event loop) apart from scrapes, which run on the
same loop, so no locks are needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.cache.cache import Cache
    from scheduler.queue.scheduling_queue import PriorityQueue

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LabelValues = tuple[str, ...]


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """Upstream metrics.ExponentialBuckets, computed the same way (so the `le` strings match)."""
    if count < 1 or start <= 0 or factor <= 1:
        raise ValueError("exponential buckets need count >= 1, start > 0 and factor > 1")
    out = []
    for _ in range(count):
        out.append(start)
        start *= factor
    return out


def format_value(value: float) -> str:
    """Go's strconv.FormatFloat(v, 'g', -1, 64) as Prometheus prints samples."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(names: Sequence[str], values: Sequence[str], extra: tuple[str, str] | None = None) -> str:
    pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra is not None:
        pairs.append(f'{extra[0]}="{_escape(extra[1])}"')
    return "{" + ",".join(pairs) + "}" if pairs else ""


class _Metric:
    type_name = ""

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)

    def _key(self, values: Sequence[str], kw: dict[str, str]) -> LabelValues:
        if not kw and len(values) == len(self.label_names) and all(type(v) is str for v in values):
            return tuple(values)  # the hot path: label values given positionally, as strings
        if kw:
            if values:
                raise TypeError("give label values positionally or by name, not both")
            try:
                values = tuple(kw[n] for n in self.label_names)
            except KeyError as e:
                raise ValueError(f"{self.name}: missing label {e}") from None
            if len(kw) != len(self.label_names):
                raise ValueError(f"{self.name}: unknown labels {sorted(set(kw) - set(self.label_names))}")
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name}: expected labels {self.label_names}, got {tuple(values)}")
        return tuple(str(v) for v in values)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.type_name}"]

    def samples(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    type_name = "counter"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[LabelValues, float] = {}

    def inc(self, *values: str, amount: float = 1.0, **kw: str) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        key = self._key(values, kw)
        self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *values: str, **kw: str) -> float:
        return self._values.get(self._key(values, kw), 0.0)

    def samples(self) -> list[str]:
        return [
            f"{self.name}{_labels(self.label_names, k)} {format_value(v)}"
            for k, v in sorted(self._values.items())
        ]


class Gauge(_Metric):
    type_name = "gauge"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[LabelValues, float] = {}

    def set(self, value: float, *values: str, **kw: str) -> None:
        self._values[self._key(values, kw)] = float(value)

    def add(self, amount: float, *values: str, **kw: str) -> None:
        key = self._key(values, kw)
        self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *values: str, **kw: str) -> float:
        return self._values.get(self._key(values, kw), 0.0)

    def samples(self) -> list[str]:
        return [
            f"{self.name}{_labels(self.label_names, k)} {format_value(v)}"
            for k, v in sorted(self._values.items())
        ]


class _HistogramChild:
    __slots__ = ("count", "counts", "sum")

    def __init__(self, n: int) -> None:
        self.counts = [0] * n  # per bucket, not cumulative
        self.sum = 0.0
        self.count = 0


class Histogram(_Metric):
    type_name = "histogram"

    def __init__(
        self, name: str, help_text: str, buckets: Sequence[float], label_names: Sequence[str] = ()
    ) -> None:
        super().__init__(name, help_text, label_names)
        if list(buckets) != sorted(buckets) or len(set(buckets)) != len(buckets):
            raise ValueError(f"{name}: buckets must be strictly increasing")
        self.buckets = [b for b in buckets if not math.isinf(b)]
        self._children: dict[LabelValues, _HistogramChild] = {}

    def observe(self, value: float, *values: str, **kw: str) -> None:
        key = self._key(values, kw)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = _HistogramChild(len(self.buckets))
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                child.counts[i] += 1
                break
        child.sum += value
        child.count += 1

    def count(self, *values: str, **kw: str) -> int:
        child = self._children.get(self._key(values, kw))
        return 0 if child is None else child.count

    def sum(self, *values: str, **kw: str) -> float:
        child = self._children.get(self._key(values, kw))
        return 0.0 if child is None else child.sum

    def samples(self) -> list[str]:
        out: list[str] = []
        for key, child in sorted(self._children.items()):
            cumulative = 0
            for bound, n in zip(self.buckets, child.counts, strict=True):
                cumulative += n
                labels = _labels(self.label_names, key, ("le", format_value(bound)))
                out.append(f"{self.name}_bucket{labels} {cumulative}")
            out.append(f"{self.name}_bucket{_labels(self.label_names, key, ('le', '+Inf'))} {child.count}")
            out.append(f"{self.name}_sum{_labels(self.label_names, key)} {format_value(child.sum)}")
            out.append(f"{self.name}_count{_labels(self.label_names, key)} {child.count}")
        return out


class Registry:
    """Metrics by name, exposed in registration order; collectors run before each exposition."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._collectors: list[Callable[[], None]] = []

    def register(self, metric: _Metric) -> None:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self._metrics[metric.name] = metric

    def counter(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Counter:
        m = Counter(name, help_text, label_names)
        self.register(m)
        return m

    def gauge(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Gauge:
        m = Gauge(name, help_text, label_names)
        self.register(m)
        return m

    def histogram(
        self, name: str, help_text: str, buckets: Sequence[float], label_names: Sequence[str] = ()
    ) -> Histogram:
        m = Histogram(name, help_text, buckets, label_names)
        self.register(m)
        return m

    def add_collector(self, collect: Callable[[], None]) -> None:
        self._collectors.append(collect)

    def get(self, name: str) -> _Metric:
        return self._metrics[name]

    def expose(self) -> str:
        for collect in self._collectors:
            collect()
        lines: list[str] = []
        for metric in self._metrics.values():
            samples = metric.samples()
            if not samples:
                continue
            lines += metric.header()
            lines += samples
        return "\n".join(lines) + "\n" if lines else ""


# ---------------------------------------------------------------- the scheduler's metrics

# Upstream result label values.
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"

# client-go's rest client latency buckets.
REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

_VERB_METHOD = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "delete": "DELETE",
}


def attempts_label(attempts: int) -> str:
    """Upstream getAttemptsLabel: the attempt count, capped at "15+"."""
    return "15+" if attempts >= 15 else str(attempts)


class SchedulerMetrics:
    """The metrics a scheduler process exports (one instance per process)."""

    def __init__(self, registry: Registry | None = None) -> None:
        r = self.registry = registry or Registry()
        ms = exponential_buckets(0.001, 2, 15)
        self.schedule_attempts = r.counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ("result", "profile"),
        )
        self.scheduling_attempt_duration = r.histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ms,
            ("result", "profile"),
        )
        self.scheduling_algorithm_duration = r.histogram(
            "scheduler_scheduling_algorithm_duration_seconds", "Scheduling algorithm latency in seconds", ms
        )
        self.pending_pods = r.gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number "
            "of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            ("queue",),
        )
        self.pod_scheduling_sli_duration = r.histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
            "might involve multiple scheduling attempts.",
            exponential_buckets(0.01, 2, 20),
            ("attempts",),
        )
        self.pod_scheduling_attempts = r.histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            exponential_buckets(1, 2, 5),
        )
        self.queue_incoming_pods = r.counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ("queue", "event"),
        )
        self.event_handling_duration = r.histogram(
            "scheduler_event_handling_duration_seconds",
            "Event handling latency in seconds.",
            exponential_buckets(0.0001, 2, 12),
            ("event",),
        )
        self.permit_wait_duration = r.histogram(
            "scheduler_permit_wait_duration_seconds", "Duration of waiting on permit.", ms, ("result",)
        )
        self.goroutines = r.gauge(
            "scheduler_goroutines",
            "Number of running goroutines split by the work they do such as binding.",
            ("operation",),
        )
        self.cache_size = r.gauge(
            "scheduler_scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ("type",),
        )
        self.snapshot_update_duration = r.histogram(
            "scheduler_snapshot_update_duration_seconds",
            "kse: time to bring the cycle's snapshot up to date with the cache.",
            exponential_buckets(0.00001, 2, 16),
        )
        self.rest_client_requests = r.counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host", "resource"),
        )
        self.rest_client_request_duration = r.histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            REST_CLIENT_BUCKETS,
            ("verb", "host"),
        )
        self.rest_client_rate_limiter_duration = r.histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            REST_CLIENT_BUCKETS,
            ("host",),
        )

        # component-base/metrics/prometheus/clientgo/leaderelection; registered with leader election.
        self.leader_election_master_status: Gauge | None = None
        self._leader_election_name = ""

    def enable_leader_election(self, name: str) -> None:
        """Export `leader_election_master_status{name}` (0 until `set_leader(True)`), as a
        kube-scheduler with --leader-elect does; `name` is the elector's (upstream: "kube-scheduler")."""
        if self.leader_election_master_status is None:
            self.leader_election_master_status = self.registry.gauge(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
                "1 indicates master. 'name' is the string used to identify the lease. Please make sure "
                "to group by name.",
                ("name",),
            )
        self._leader_election_name = name
        self.leader_election_master_status.set(0, name)

    def set_leader(self, leading: bool) -> None:
        if self.leader_election_master_status is not None:
            self.leader_election_master_status.set(1 if leading else 0, self._leader_election_name)

    # -- recording helpers (upstream metric_recorder.go names)

    def pod_scheduled(self, profile: str, duration: float) -> None:
        self._attempt(SCHEDULED, profile, duration)

    def pod_unschedulable(self, profile: str, duration: float) -> None:
        self._attempt(UNSCHEDULABLE, profile, duration)

    def pod_schedule_error(self, profile: str, duration: float) -> None:
        self._attempt(ERROR, profile, duration)

    def _attempt(self, result: str, profile: str, duration: float) -> None:
        self.schedule_attempts.inc(result, profile)
        self.scheduling_attempt_duration.observe(duration, result, profile)

    def observe_request(self, host: str, verb: str, resource: str, code: str, seconds: float) -> None:
        """A `kse.client.RequestMetrics` observer."""
        method = _VERB_METHOD.get(verb, verb.upper())
        self.rest_client_requests.inc(code, method, host, resource)
        if verb != "watch":  # a watch's duration is the stream's life, not a latency
            self.rest_client_request_duration.observe(seconds, verb.upper(), host)

    def observe_rate_limiter(self, host: str, seconds: float) -> None:
        self.rest_client_rate_limiter_duration.observe(seconds, host)

    def incoming(self, queue: str, event: str) -> None:
        """The queue's `on_incoming` hook."""
        self.queue_incoming_pods.inc(queue, event)

    # -- scrape-time collectors

    def watch_queue(self, queue: PriorityQueue) -> None:
        def collect() -> None:
            for name, n in queue.pending_pods().items():
                self.pending_pods.set(n, name)

        self.registry.add_collector(collect)

    def watch_cache(self, cache: Cache) -> None:
        def collect() -> None:
            for name, n in cache.sizes().items():
                self.cache_size.set(n, name)

        self.registry.add_collector(collect)

    def expose(self) -> str:
        return self.registry.expose()
