"""Draining nodes as kubectl does: cordon/uncordon (`cordon`), the pod filters (`filters`), and the
evict-with-retry loop (`drainer`). A library with an async API and a progress callback, used by the
`kse cordon|uncordon|drain` commands and by anything else that drains (a rolling upgrade)."""

from kse.drain.cordon import CordonResult, cordon, set_unschedulable, uncordon
from kse.drain.drainer import Drainer, DrainError, DrainOptions, DrainOutcome, Progress

__all__ = [
    "CordonResult",
    "DrainError",
    "DrainOptions",
    "DrainOutcome",
    "Drainer",
    "Progress",
    "cordon",
    "set_unschedulable",
    "uncordon",
]
