"""The ``/debug/pprof/`` routes (Go's ``net/http/pprof`` names, Python's content):

=============================  ==============================================================
``/debug/pprof/``              the index (this list)
``profile?seconds=N``          CPU profile of the next N s (default 30, at most 300): a pstats
                               file (``format=pstats``, the default), ``format=collapsed``
                               (flame graph input) or ``format=text``; ``hz=`` 1..1000 (100)
``goroutine?debug=1|2``        every thread's and asyncio task's stack; debug=2 one block each
                               with source lines, debug=1 (default) identical stacks grouped
``block``                      event-loop lag and the stacks that blocked the loop (only with
                               contention profiling); ``format=json``
``heap``                       live objects by type
``cmdline``                    the process's command line, NUL-separated (as Go's)
=============================  ==============================================================

A bad parameter gets 400 naming it; a CPU profile while one runs gets 409 (Go: 500 "cpu profiling
already in use"); ``block`` without contention profiling 404 with the flag to set.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from urllib.parse import parse_qs

from . import heap, stacks
from .contention import LoopWatch
from .sampler import ProfilerBusy, Sampler

PREFIX = "/debug/pprof"
MAX_SECONDS = 300
DEFAULT_SECONDS = 30

Answer = tuple[int, bytes, str]
_TEXT = "text/plain; charset=utf-8"

INDEX = """/debug/pprof/

profiles:
  profile?seconds=30[&format=pstats|collapsed|text][&hz=100]
      CPU profile of the event loop thread (sampled on process CPU time);
      pstats: python -m pstats FILE  (sort cumtime / stats 20)
  goroutine?debug=1|2
      stack of every thread and asyncio task (debug=2: one block each, with source lines)
  block[?format=json]
      event-loop lag and the stacks that blocked the loop ({block})
  heap
      live objects by type
  cmdline
      the command line, NUL-separated
"""


class BadParameter(ValueError):
    pass


def _int_param(query: Mapping[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    values = query.get(name)
    if not values:
        return default
    text = values[-1]
    if not text.isdigit() or not low <= int(text) <= high:
        raise BadParameter(f"{name}: must be an integer from {low} to {high}, got {text!r}")
    return int(text)


def _choice(query: Mapping[str, list[str]], name: str, default: str, choices: tuple[str, ...]) -> str:
    values = query.get(name)
    value = values[-1] if values else default
    if value not in choices:
        raise BadParameter(f"{name}: must be one of {', '.join(choices)}, got {value!r}")
    return value


class Pprof:
    """The routes over a process's profilers; `watch` is the LoopWatch when contention
    profiling is on."""

    def __init__(self, watch: LoopWatch | None = None) -> None:
        self.watch = watch

    def handles(self, path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    async def answer(self, method: str, path: str, query_string: str) -> Answer:
        if method not in ("GET", "HEAD"):
            return 405, b"method not allowed\n", _TEXT
        name = path[len(PREFIX) :].strip("/")
        query = parse_qs(query_string, keep_blank_values=True)
        try:
            if name == "":
                state = "on" if self.watch is not None else "off: run with --contention-profiling"
                return 200, INDEX.format(block=state).encode(), _TEXT
            if name == "profile":
                if method != "GET":  # a HEAD must not take (and discard) a profile
                    return 405, b"profile: GET only\n", _TEXT
                return await self._profile(query)
            if name == "goroutine":
                debug = _int_param(query, "debug", 1, 0, 2)
                return 200, stacks.dump(max(debug, 1)).encode(), _TEXT
            if name == "block":
                if self.watch is None:
                    return 404, b"contention profiling is off: run with --contention-profiling\n", _TEXT
                if _choice(query, "format", "text", ("text", "json")) == "json":
                    return 200, json.dumps(self.watch.report(), indent=2).encode() + b"\n", "application/json"
                return 200, self.watch.text().encode(), _TEXT
            if name == "cmdline":  # as Go's: the command line, NUL-separated
                return 200, "\x00".join(sys.argv).encode(), _TEXT
            if name == "heap":
                return 200, heap.by_type(_int_param(query, "limit", 50, 1, 10000)).encode(), _TEXT
        except BadParameter as e:
            return 400, f"{e}\n".encode(), _TEXT
        return 404, f"unknown profile {name!r}; see {PREFIX}/\n".encode(), _TEXT

    async def _profile(self, query: Mapping[str, list[str]]) -> Answer:
        seconds = _int_param(query, "seconds", DEFAULT_SECONDS, 1, MAX_SECONDS)
        fmt = _choice(query, "format", "pstats", ("pstats", "collapsed", "text"))
        hz = _int_param(query, "hz", 100, 1, 1000)
        sampler = Sampler(hz)
        try:
            sampler.start()
        except ProfilerBusy as e:
            return 409, f"Could not enable CPU profiling: {e}\n".encode(), _TEXT
        except RuntimeError as e:
            return 500, f"Could not enable CPU profiling: {e}\n".encode(), _TEXT
        try:
            await asyncio.sleep(seconds)  # the profile's duration: the loop runs the process meanwhile
        finally:
            profile = sampler.stop()
        if fmt == "collapsed":
            return 200, profile.collapsed().encode(), _TEXT
        if fmt == "text":
            return 200, profile.text().encode(), _TEXT
        return 200, profile.to_pstats(), "application/octet-stream"
