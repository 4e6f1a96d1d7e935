"""One priority level's seats and queues: shuffle-sharded fair queuing, as kube-apiserver's APF.

Upstream: `staging/src/k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset/queueset.go`.
What is kept, and what is simpler here:

* A request needs `width` seats (1, or more for a large LIST). It runs at once when nobody waits in
  this level and the seats are free; else it joins a queue.
* The queue is chosen by shuffle sharding: the flow's key deals a fixed hand of `hand_size` queues
  out of `queues`, and the request joins the one with the fewest requests waiting plus executing
  from it. A noisy flow fills its own hand; another flow shares all of its hand with it only
  rarely, so it keeps moving.
* A queue already holding `queue_length_limit` requests refuses the request (reason "queue-full"),
  and a request that waits longer than the wait limit leaves its queue refused ("time-out"):
  both are 429 / RESOURCE_EXHAUSTED, sent before the request did anything.
* When seats free, the queues are served round-robin, one request each turn. Upstream orders them
  by virtual finish time (fair queuing that also weighs each request's measured duration); with
  the unit widths nearly every kse request has, round-robin gives each backlogged queue the same
  share of dispatches, which is the fairness the tests and the flood bench check.
* A waiting request whose caller goes away (deadline, cancellation) leaves its queue.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import deque
from dataclasses import dataclass, field

from apiserver_mock.flowcontrol.schemas import PriorityLevel

# Flow keys whose hands are kept; a level with more distinct flows recomputes (a hash) for the rest.
_HAND_CACHE_LIMIT = 4096


class Rejected(Exception):
    """The level refused the request: `reason` is upstream's label ("queue-full", "time-out")."""

    def __init__(self, level: str, reason: str) -> None:
        super().__init__(f"{level}: {reason}")
        self.level = level
        self.reason = reason


@dataclass
class _Waiter:
    width: int
    queue: int
    future: asyncio.Future[None]


@dataclass
class LevelStats:
    """Counters of one level, as upstream's apiserver_flowcontrol_* metrics count them."""

    dispatched: int = 0
    queued: int = 0  # requests that waited in a queue before running (or being refused)
    rejected: dict[str, int] = field(default_factory=dict)
    max_waiting: int = 0


class QueueSet:
    """The seats and queues of one priority level (see the module doc)."""

    def __init__(self, level: PriorityLevel, limit: int, wait_limit: float) -> None:
        self.level = level
        self.limit = limit
        self.wait_limit = wait_limit
        self.executing = 0  # seats in use
        self.waiting = 0  # requests in queues
        self._queues: list[deque[_Waiter]] = [deque() for _ in range(max(1, level.queues))]
        self._from_queue = [0] * len(self._queues)  # requests executing that came from each queue
        self._next = 0  # the queue the round-robin looks at first
        self._hands: dict[str, tuple[int, ...]] = {}
        self.stats = LevelStats()

    def hand(self, flow: str) -> tuple[int, ...]:
        """The queues a flow may join: a fixed pseudo-random draw seeded by the flow's key."""
        hand = self._hands.get(flow)
        if hand is None:
            seed = int.from_bytes(hashlib.blake2b(flow.encode(), digest_size=8).digest(), "big")
            size = min(self.level.hand_size, len(self._queues))
            hand = tuple(random.Random(seed).sample(range(len(self._queues)), size))
            if len(self._hands) >= _HAND_CACHE_LIMIT:
                self._hands.clear()
            self._hands[flow] = hand
        return hand

    def _choose_queue(self, flow: str) -> int:
        queues, from_queue = self._queues, self._from_queue
        return min(self.hand(flow), key=lambda q: len(queues[q]) + from_queue[q])

    async def acquire(self, flow: str, width: int = 1) -> tuple[int, int]:
        """Wait for seats; returns the ticket (queue, width) to `release`. Raises `Rejected`."""
        width = max(1, min(width, self.limit))
        queue = self._choose_queue(flow)
        if self.waiting == 0 and self.executing + width <= self.limit:
            self._start(queue, width)
            return queue, width
        if len(self._queues[queue]) >= self.level.queue_length_limit:
            self._reject("queue-full")
        waiter = _Waiter(width, queue, asyncio.get_running_loop().create_future())
        self._queues[queue].append(waiter)
        self.waiting += 1
        self.stats.queued += 1
        self.stats.max_waiting = max(self.stats.max_waiting, self.waiting)
        try:
            async with asyncio.timeout(self.wait_limit):
                await asyncio.shield(waiter.future)
        except BaseException as e:
            if waiter.future.done() and not waiter.future.cancelled():
                if isinstance(e, TimeoutError):  # dispatched just as the wait limit passed: run
                    return queue, width
                # Dispatched as the caller left: give the seats back, and let the next one run.
                self.release((queue, width))
            else:
                waiter.future.cancel()
                self._forget(waiter)
            if isinstance(e, TimeoutError):
                self._reject("time-out")
            raise
        return queue, width

    def release(self, ticket: tuple[int, int]) -> None:
        """Give back a request's seats and start whoever they let run."""
        queue, width = ticket
        self.executing -= width
        self._from_queue[queue] -= 1
        if self.waiting:
            self._dispatch()

    def _start(self, queue: int, width: int) -> None:
        self.executing += width
        self._from_queue[queue] += 1
        self.stats.dispatched += 1

    def _reject(self, reason: str) -> None:
        self.stats.rejected[reason] = self.stats.rejected.get(reason, 0) + 1
        raise Rejected(self.level.name, reason)

    def _forget(self, waiter: _Waiter) -> None:
        try:
            self._queues[waiter.queue].remove(waiter)
        except ValueError:
            return
        self.waiting -= 1

    def _dispatch(self) -> None:
        """Start queued requests round-robin while their seats are free."""
        queues, n = self._queues, len(self._queues)
        while self.waiting:
            for step in range(n):
                q = (self._next + step) % n
                if queues[q]:
                    break
            else:  # pragma: no cover - `waiting` counts exactly the queued waiters
                return
            head = queues[q][0]
            if self.executing + head.width > self.limit:
                return
            queues[q].popleft()
            self.waiting -= 1
            self._next = (q + 1) % n
            if head.future.done():  # its caller left while it was the head
                continue
            self._start(q, head.width)
            head.future.set_result(None)
