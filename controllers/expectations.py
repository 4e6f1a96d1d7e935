"""Controller expectations, as upstream's `pkg/controller/controller_utils.go`
(ControllerExpectations, UIDTrackingControllerExpectations).

Why: a controller's informer lags its own writes. Having created 3 pods, a sync that ran before the
watch delivered them would count too few pods and create 3 more. So before writing, the controller
records what it expects to observe (`expect_creations(key, 3)`, `expect_deletions(key, pod_keys)`);
the informer's handlers count them off as the events arrive (`creation_observed`,
`deletion_observed`); and `satisfied(key)` stays False, so syncs skip `manageReplicas`, until
everything expected has been seen. A write that failed is counted off at once by the controller
(it will never be observed). An expectation older than `EXPECTATIONS_TIMEOUT_S` (upstream: 5 min)
is considered satisfied, so a lost event cannot wedge a controller forever.

Deletions are tracked by pod key (the UID-tracking variant), so a deletion observed twice (a
terminating update, then the delete) is counted once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

EXPECTATIONS_TIMEOUT_S = 5 * 60.0


@dataclass
class Expectation:
    add: int = 0
    delete: int = 0
    timestamp: float = 0.0
    deletion_keys: set[str] = field(default_factory=set)

    def fulfilled(self) -> bool:
        # Below zero: more was observed than expected (e.g. adoption races); still fulfilled.
        return self.add <= 0 and self.delete <= 0


class ControllerExpectations:
    """Expected creations and deletions per controller key ("namespace/name")."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._by_key: dict[str, Expectation] = {}

    def get(self, key: str) -> Expectation | None:
        return self._by_key.get(key)

    def satisfied(self, key: str) -> bool:
        """True when the controller may act on its cache: nothing outstanding, nothing recorded
        (a new controller, or expectations deleted), or the record expired."""
        exp = self._by_key.get(key)
        if exp is None:
            return True
        if exp.fulfilled():
            return True
        if self._clock() - exp.timestamp > EXPECTATIONS_TIMEOUT_S:
            log.info("expectations of %s expired (add %d, del %d outstanding)", key, exp.add, exp.delete)
            return True
        return False

    def expect_creations(self, key: str, adds: int) -> None:
        self._by_key[key] = Expectation(add=adds, timestamp=self._clock())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        keys = set(pod_keys)
        self._by_key[key] = Expectation(delete=len(keys), timestamp=self._clock(), deletion_keys=keys)

    def creation_observed(self, key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.add -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        """A pod of `key` was seen deleted (or terminating): counted once per pod key."""
        exp = self._by_key.get(key)
        if exp is not None and pod_key in exp.deletion_keys:
            exp.deletion_keys.discard(pod_key)
            exp.delete -= 1

    def delete(self, key: str) -> None:
        """Forget `key` (its controller object was deleted)."""
        self._by_key.pop(key, None)
