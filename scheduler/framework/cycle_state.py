"""CycleState: plugin-private data for one scheduling cycle, as upstream's framework.CycleState.

Plugins write what they precompute once per pod (in PreFilter / PreScore) under their own key and
read it many times (in Filter / Score). Keys are plain strings; by convention "PreFilter" + plugin
name, as upstream. The scheduling cycle is serial, so no locking is needed (upstream uses a
sync.Map because its Filter/Score run on goroutines).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class StateData(Protocol):
    """A value stored in CycleState. `clone` must return a copy that is safe to mutate
    independently (preemption simulates removing pods on a copy); immutable data may return self."""

    def clone(self) -> StateData: ...


class StateNotFoundError(KeyError):
    """Reading a key nobody wrote (upstream fwk.ErrNotFound); str() is upstream's "not found"."""

    def __str__(self) -> str:
        return "not found"


class CycleState:
    """Storage plus the per-cycle skip sets the framework fills from PreFilter / PreScore results."""

    __slots__ = (
        "_storage",
        "record_plugin_metrics",
        "skip_filter_plugins",
        "skip_pre_bind_plugins",
        "skip_score_plugins",
    )

    def __init__(self) -> None:
        self._storage: dict[str, StateData] = {}
        self.record_plugin_metrics = False
        # Plugins whose PreFilter / PreScore returned Skip: the framework does not run their
        # Filter / Score for this pod.
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        self.skip_pre_bind_plugins: set[str] = set()

    def read(self, key: str) -> StateData:
        try:
            return self._storage[key]
        except KeyError:
            raise StateNotFoundError(key) from None

    def write(self, key: str, value: StateData) -> None:
        self._storage[key] = value

    def delete(self, key: str) -> None:
        self._storage.pop(key, None)

    def clone(self) -> CycleState:
        """A copy whose values are cloned (upstream CycleState.Clone); the skip sets are shared
        because nobody mutates them after PreFilter / PreScore."""
        copy = CycleState()
        copy._storage = {k: v.clone() for k, v in self._storage.items()}
        copy.record_plugin_metrics = self.record_plugin_metrics
        copy.skip_filter_plugins = self.skip_filter_plugins
        copy.skip_score_plugins = self.skip_score_plugins
        copy.skip_pre_bind_plugins = self.skip_pre_bind_plugins
        return copy

    def __contains__(self, key: str) -> bool:
        return key in self._storage
