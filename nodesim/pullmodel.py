"""Image pulls that share a registry: a fleet-wide fluid model of every pull in flight.

`nodesim.images` models each node alone (its own link, pulls one after another). Behind a real
cluster sits a registry (or a mirror) whose bandwidth all nodes share, so a pull takes longer when
many nodes pull at once. `PullEngine` models that, event by event, in the loop's clock:

* Each node has a link of `node_bandwidth` bytes/s; the registry serves `registry_bandwidth` bytes/s
  in all (0 or less: that limit is off).
* With `serialize=True` (kubelet's default `serializeImagePulls: true`) a node pulls one image at a
  time, the others wait in a FIFO behind it; with `serialize=False` every requested pull of the node
  is in flight at once and they split the node's link equally (kubelet's parallel pulls, no
  `maxParallelImagePulls` limit).
* Between two events (a pull starts or ends) rates are constant: the registry's bandwidth is shared
  max-min fairly ("water-filling") among the pulls in flight, each capped by its share of its
  node's link. A pull of S bytes ends once S bytes have flowed. With the registry limit off and
  serial pulls this is exactly `nodesim.images`' arithmetic: size / node bandwidth, one after another.

Layers are not modelled: an image is pulled whole (no layer is shared between images), as the
task's "layer-free sizes" asks. The engine does no I/O and keeps no timers; its owner calls
`advance(now)` when `next_completion()` is due and after anything changed:

    engine = PullEngine(node_bandwidth=100 * Mi, registry_bandwidth=1024 * Mi)
    engine.advance(now)                                      # first: what finished by now
    engine.request("node-1", "nginx:1.27", 150 * Mi, now)   # False if already pulling there
    for pull in engine.advance(later):                        # the pulls finished by `later`
        ...
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

EPSILON_BYTES = 1e-6


@dataclass
class Pull:
    """One image being pulled (or queued) on one node."""

    node: str
    image: str
    size: int
    requested_at: float
    remaining: float = 0.0
    started_at: float | None = None  # None while queued behind the node's current pull
    finished_at: float | None = None
    rate: float = 0.0  # bytes/s since the last event

    def __post_init__(self) -> None:
        self.remaining = float(self.size)


def max_min_shares(caps: list[float], total: float) -> list[float]:
    """Split `total` among flows capped at `caps` max-min fairly: no flow gets more than its cap,
    and no flow could get more without another flow with less getting less (water-filling).
    `total` of inf (no shared limit) gives every flow its cap."""
    if not caps:
        return []
    if math.isinf(total):
        return list(caps)
    out = [0.0] * len(caps)
    left = total
    order = sorted(range(len(caps)), key=lambda i: caps[i])
    for k, i in enumerate(order):
        fair = left / (len(caps) - k)
        out[i] = min(caps[i], fair)
        left -= out[i]
    return out


class PullEngine:
    """Every node's pulls, in flight and queued (see the module doc)."""

    def __init__(
        self, node_bandwidth: float, registry_bandwidth: float = 0.0, *, serialize: bool = True
    ) -> None:
        self.node_bandwidth = node_bandwidth if node_bandwidth > 0 else math.inf
        self.registry_bandwidth = registry_bandwidth if registry_bandwidth > 0 else math.inf
        self.serialize = serialize
        self.now = float("-inf")
        self._active: dict[tuple[str, str], Pull] = {}
        self._queued: dict[str, deque[Pull]] = {}
        self.bytes_pulled = 0
        self.pulls_done = 0

    # -- queries

    def pulling(self, node: str, image: str) -> bool:
        """Whether `image` is in flight or queued on `node`."""
        if (node, image) in self._active:
            return True
        return any(p.image == image for p in self._queued.get(node, ()))

    def in_flight(self) -> list[Pull]:
        return list(self._active.values())

    def busy_nodes(self) -> set[str]:
        return {n for n, _ in self._active} | {n for n, q in self._queued.items() if q}

    # -- changes

    def request(self, node: str, image: str, size: int, now: float) -> bool:
        """Ask for `image` on `node` at `now`; False when it is already being pulled there (the
        caller waits for that pull). Call `advance(now)` first (and handle what it returns): a
        request never moves the clock past pulls in flight."""
        if self._active and now > self.now + 1e-9:
            raise RuntimeError(f"advance({now}) before requesting a pull (the model is at {self.now})")
        self.now = max(self.now, now)
        if self.pulling(node, image):
            return False
        pull = Pull(node, image, max(0, int(size)), now)
        if self.serialize and self._node_active(node):
            self._queued.setdefault(node, deque()).append(pull)
        else:
            self._start(pull, now)
        self._rerate()
        return True

    def advance(self, now: float) -> list[Pull]:
        """Move the model to `now`; the pulls that finished meanwhile, in the order they did (each
        with its `finished_at`). Queued pulls start as their node's link frees up."""
        if self.now == float("-inf"):
            self.now = now
        done: list[Pull] = []
        while True:
            done.extend(self._complete_finished())
            times = {k: p.remaining / p.rate for k, p in self._active.items() if p.rate > 0}
            if not times:
                break
            step = min(times.values())
            if self.now + step > now:
                self._flow(now - self.now)
                break
            self._flow(step)
            for k, t in times.items():  # those due now end exactly now, whatever the rounding
                if t - step <= 1e-9:
                    self._active[k].remaining = 0.0
            self.now += step
        self.now = max(self.now, now)
        return done

    def next_completion(self) -> float | None:
        """When the next pull in flight ends if nothing changes (None: nothing in flight)."""
        best = math.inf
        for p in self._active.values():
            if p.remaining <= EPSILON_BYTES:
                return self.now
            if p.rate > 0:
                best = min(best, self.now + p.remaining / p.rate)
        return None if math.isinf(best) else best

    # -- internals

    def _node_active(self, node: str) -> bool:
        return any(n == node for n, _ in self._active)

    def _start(self, pull: Pull, now: float) -> None:
        pull.started_at = now
        self._active[(pull.node, pull.image)] = pull

    def _flow(self, dt: float) -> None:
        if dt <= 0:
            return
        for p in self._active.values():
            p.remaining = max(0.0, p.remaining - p.rate * dt)

    def _complete_finished(self) -> list[Pull]:
        finished = [p for p in self._active.values() if p.remaining <= EPSILON_BYTES]
        if not finished:
            return []
        for p in finished:
            del self._active[(p.node, p.image)]
            p.remaining = 0.0
            p.finished_at = self.now
            self.bytes_pulled += p.size
            self.pulls_done += 1
            queue = self._queued.get(p.node)
            if queue and self.serialize and not self._node_active(p.node):
                self._start(queue.popleft(), self.now)
        self._rerate()
        return finished

    def _rerate(self) -> None:
        """New rates for the pulls in flight: node links split equally among their pulls, then
        the registry water-filled over those caps."""
        pulls = list(self._active.values())
        per_node: dict[str, int] = {}
        for p in pulls:
            per_node[p.node] = per_node.get(p.node, 0) + 1
        caps = [self.node_bandwidth / per_node[p.node] for p in pulls]
        for p, rate in zip(pulls, max_min_shares(caps, self.registry_bandwidth), strict=True):
            p.rate = rate
        for p in pulls:
            if math.isinf(p.rate):  # no limit at all: the pull is instant
                p.rate = 0.0
                p.remaining = 0.0
