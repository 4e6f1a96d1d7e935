"""The controller-manager's metrics, on `prometheus_client`, under upstream's names.

* `leader_election_master_status{name="kube-controller-manager"}` (component-base's leader
  election metric: 1 while this replica leads);
* client-go's work queue metrics by queue name (= the controller's name): `workqueue_depth`,
  `workqueue_adds_total`, `workqueue_retries_total`, `workqueue_queue_duration_seconds` and
  `workqueue_work_duration_seconds` (the latter is each controller's sync duration);
* `rest_client_requests_total{code,method,host,resource}` as the scheduler exports it (`code` is the
  gRPC status name).

Each instance has its own registry (tests run several managers in one process). `*_created`
series (OpenMetrics only) are left out, as upstream's Go client does not expose them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kse.healthserver import CONTENT_TYPE

__all__ = ["CONTENT_TYPE", "ControllerManagerMetrics"]

# client-go's workqueue buckets: ExponentialBuckets(10e-9, 10, 12) — 10 ns to 1000 s.
WORKQUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))
# HTTP verbs of the Kubernetes verbs (rest_client_requests_total's method label).
_METHOD = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "delete": "DELETE"}


class ControllerManagerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=r,
        )
        self._depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"], registry=r)
        self._adds = Counter(
            "workqueue_adds", "Total number of adds handled by workqueue", ["name"], registry=r
        )
        self._retries = Counter(
            "workqueue_retries", "Total number of retries handled by workqueue", ["name"], registry=r
        )
        self._latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self._work = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self._requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host", "resource"],
            registry=r,
        )
        self._lease_name = ""

    # -- leader election

    def enable_leader_election(self, name: str) -> None:
        self._lease_name = name
        self._leader.labels(name).set(0)

    def set_leader(self, leading: bool) -> None:
        if self._lease_name:
            self._leader.labels(self._lease_name).set(1 if leading else 0)

    # -- WorkqueueMetrics

    def depth(self, name: str, value: int) -> None:
        self._depth.labels(name).set(value)

    def add(self, name: str) -> None:
        self._adds.labels(name).inc()

    def retry(self, name: str) -> None:
        self._retries.labels(name).inc()

    def queue_latency(self, name: str, seconds: float) -> None:
        self._latency.labels(name).observe(seconds)

    def work_duration(self, name: str, seconds: float) -> None:
        self._work.labels(name).observe(seconds)

    # -- client

    def observe_request(self, host: str, verb: str, resource: str, code: str, seconds: float) -> None:
        self._requests.labels(code, _METHOD.get(verb, verb.upper()), host, resource).inc()

    def expose(self) -> str:
        text = generate_latest(self.registry).decode()
        return "".join(line + "\n" for line in text.splitlines() if not _is_created(line))


def _is_created(line: str) -> bool:
    """A `*_created` sample or its HELP/TYPE line."""
    if line.startswith("# "):
        parts = line.split(" ", 3)
        return len(parts) > 2 and parts[2].endswith("_created")
    name = line.split("{", 1)[0].split(" ", 1)[0]
    return name.endswith("_created")
