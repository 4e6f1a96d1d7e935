"""The API server's overload gate: API Priority and Fairness, or the older max-inflight limits.

Both front doors (gRPC and HTTP) reach the registry through `ResourcesService.call`, which asks
this gate for a seat first, so neither door can skip it. With priority and fairness on (upstream's
default, `--enable-priority-and-fairness`), the server's concurrency (`--max-requests-inflight` +
`--max-mutating-requests-inflight`, as upstream sums them) is divided among the priority levels of
`schemas`, each with its own queues (`queueset`): a flood of workload requests queues and is shed
in its own level while Lease renewals and node heartbeats keep their seats. With it off, the two
limits apply as upstream's `WithMaxInFlightLimit` does: one pool for reads and one for writes,
no queues, no priorities, so a flood of writes starves Lease renewals too (what the flood bench
shows). Watches are long-running and take no seat (upstream's APF lets a watch hold a seat only
while it initialises). `system:masters` is exempt in both modes, as upstream.

A refused request is `TooManyRequests` (429 / RESOURCE_EXHAUSTED) with Retry-After 1 s, raised
before the verb ran: a client may retry any verb, writes included (kse's client does, as
client-go does for a 429 with Retry-After).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apiserver_mock.errors import TooManyRequests
from apiserver_mock.flowcontrol.queueset import QueueSet, Rejected
from apiserver_mock.flowcontrol.schemas import EXEMPT_GROUP, LEVELS, classify, nominal_limits
from certs.identity import Identity
from kse.objects.kinds import BY_FIELD, UnknownKindError, lookup_resource

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 1
REJECT_MESSAGE = "Too many requests, please try again later."
MUTATING_METHODS = frozenset(("Create", "Update", "UpdateStatus", "Delete", "Bind", "Evict"))
# upstream's listWorkEstimator: one seat per 100 objects a LIST may touch, at most 10.
OBJECTS_PER_SEAT = 100
MAX_SEATS = 10
_VERBS = {
    "Get": "get",
    "List": "list",
    "Create": "create",
    "Update": "update",
    "UpdateStatus": "update",
    "Delete": "delete",
    "Bind": "create",
    "Evict": "create",
}


@dataclass(frozen=True)
class FlowControlConfig:
    """The gate's settings, named as kube-apiserver's flags."""

    enable_priority_and_fairness: bool = True
    # kube-apiserver's defaults. A seat here is a share of one event loop, so fewer seats (e.g.
    # 40 / 20) keep a flood's running requests from delaying Lease renewals as much, at some cost
    # to the bind path's throughput: the README's overload part has both measured.
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    # How long a request may wait in its queue before it is refused ("time-out"): upstream's
    # default request wait limit is 15 s.
    request_wait_limit: float = 15.0

    def __post_init__(self) -> None:
        if self.max_requests_inflight < 0 or self.max_mutating_requests_inflight < 0:
            raise ValueError("--max-requests-inflight and --max-mutating-requests-inflight must be >= 0")
        if self.enable_priority_and_fairness and self.server_concurrency < 1:
            raise ValueError(
                "with priority and fairness the server's concurrency (--max-requests-inflight + "
                "--max-mutating-requests-inflight) must be at least 1"
            )

    @property
    def server_concurrency(self) -> int:
        return self.max_requests_inflight + self.max_mutating_requests_inflight


def request_target(method: str, request: Any) -> tuple[str, str]:
    """(resource with subresource, namespace) a request names, for classification."""
    if method in ("Create", "Update", "UpdateStatus"):
        field = request.object.WhichOneof("kind")
        if field is None:
            return "", ""
        kind = BY_FIELD[field]
        meta = getattr(request.object, field).metadata
        resource = f"{kind.resource}/status" if method == "UpdateStatus" else kind.resource
        return resource, meta.namespace
    if method == "Bind":
        return "pods/binding", request.binding.metadata.namespace
    if method == "Evict":
        return "pods/eviction", request.namespace
    try:
        return lookup_resource(request.resource).resource, request.namespace
    except UnknownKindError:
        return request.resource, request.namespace


Seat = tuple[QueueSet, tuple[int, int]] | str | None


class FlowControl:
    """The gate (see the module doc). `list_size(resource)` counts a resource's stored objects, for
    a LIST's seats."""

    def __init__(self, config: FlowControlConfig, list_size: Callable[[str], int] | None = None) -> None:
        self.config = config
        self.list_size = list_size
        limits = nominal_limits(config.server_concurrency) if config.enable_priority_and_fairness else {}
        self.levels: dict[str, QueueSet] = {
            level.name: QueueSet(level, limits[level.name], config.request_wait_limit)
            for level in LEVELS
            if config.enable_priority_and_fairness
        }
        # max-inflight mode: requests running per pool, and refusals.
        self.inflight = {"readonly": 0, "mutating": 0}
        self.rejected_inflight = {"readonly": 0, "mutating": 0}
        self._last_warning: dict[str, float] = {}

    async def admit(self, ident: Identity, method: str, request: Any) -> Seat:
        """A seat for the request, to hand to `release` when it ends. Raises TooManyRequests."""
        if not self.config.enable_priority_and_fairness:
            return self._admit_inflight(ident, method)
        resource, namespace = request_target(method, request)
        c = classify(ident, _VERBS[method], resource, namespace)
        if c.level is None:
            return None
        queues = self.levels[c.level.name]
        width = self._width(method, request, resource) if method == "List" else 1
        try:
            ticket = await queues.acquire(c.flow, width)
        except Rejected as e:
            self._warn(e.level, f"priority level {e.level}: refusing requests ({e.reason}), e.g. {c.flow}")
            raise TooManyRequests(REJECT_MESSAGE, retry_after=RETRY_AFTER_SECONDS) from None
        return queues, ticket

    def release(self, seat: Seat) -> None:
        if seat is None:
            return
        if isinstance(seat, str):
            self.inflight[seat] -= 1
            return
        queues, ticket = seat
        queues.release(ticket)

    def _admit_inflight(self, ident: Identity, method: str) -> Seat:
        if EXEMPT_GROUP in ident.groups:
            return None
        pool, limit = (
            ("mutating", self.config.max_mutating_requests_inflight)
            if method in MUTATING_METHODS
            else ("readonly", self.config.max_requests_inflight)
        )
        if limit > 0 and self.inflight[pool] >= limit:  # 0: no limit, as upstream
            self.rejected_inflight[pool] += 1
            self._warn(pool, f"max-inflight: refusing {pool} requests ({limit} in flight)")
            raise TooManyRequests(REJECT_MESSAGE, retry_after=RETRY_AFTER_SECONDS)
        self.inflight[pool] += 1
        return pool

    def _width(self, method: str, request: Any, resource: str) -> int:
        if self.list_size is None:
            return 1
        try:
            n = self.list_size(resource)
        except Exception:  # an unknown resource: the verb itself will say so
            return 1
        if request.limit > 0 and not request.label_selector and not request.field_selector:
            n = min(n, request.limit)
        return max(1, min(MAX_SEATS, math.ceil(n / OBJECTS_PER_SEAT)))

    def _warn(self, key: str, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning.get(key, -math.inf) >= 5.0:  # once per 5 s per level
            self._last_warning[key] = now
            log.warning("%s", message)

    def dump(self) -> list[dict[str, Any]]:
        """Each level's state and counters (the HTTP door's /debug/api_priority_and_fairness)."""
        if not self.config.enable_priority_and_fairness:
            return [
                {
                    "pool": pool,
                    "limit": (
                        self.config.max_mutating_requests_inflight
                        if pool == "mutating"
                        else self.config.max_requests_inflight
                    ),
                    "executing": self.inflight[pool],
                    "rejected": self.rejected_inflight[pool],
                }
                for pool in ("readonly", "mutating")
            ]
        return [
            {
                "priorityLevel": name,
                "nominalConcurrencyLimit": q.limit,
                "executingSeats": q.executing,
                "waitingRequests": q.waiting,
                "dispatched": q.stats.dispatched,
                "queued": q.stats.queued,
                "maxWaiting": q.stats.max_waiting,
                "rejected": dict(q.stats.rejected),
            }
            for name, q in self.levels.items()
        ]
