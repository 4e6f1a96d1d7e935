"""Profiling a live process, as Go's ``net/http/pprof`` lets one profile a live kube-scheduler:

* ``sampler``: a CPU profile of the event-loop thread, taken by sampling its stack on SIGPROF
  (process CPU time), written as a ``pstats`` file (``python -m pstats``), as collapsed stacks
  (flame graphs) or as a text summary;
* ``stacks``: the stack of every thread and every asyncio task (``goroutine?debug=2``);
* ``contention``: event-loop lag and the stacks that blocked the loop (the ``block`` profile),
  recorded by a watchdog thread, with no cost per callback;
* ``heap``: live objects by type;
* ``handler``: the ``/debug/pprof/...`` routes over all of them (served by the scheduler's metrics
  server, ``scheduler.server``).
"""

from __future__ import annotations

from .contention import LoopWatch
from .handler import Pprof

__all__ = ["LoopWatch", "Pprof"]
