"""Every thread's and every asyncio task's stack: what Go's ``/debug/pprof/goroutine?debug=2``
shows, for a Python process.

Threads come from ``sys._current_frames()`` (the innermost frame of each), named from
``threading.enumerate()``. A task's stack is its await chain: the task's coroutine, then what it
awaits (``cr_await``), down to the innermost coroutine or generator, and the future it waits on
(``Task.get_stack()`` would show only the outermost frame of a suspended coroutine).

``dump(debug=2)``: one block per thread and task, Go's shape::

    thread 140213 "MainThread" [running]:
      scheduler/scheduler.py:612 in _pop_loop
    task "scheduling-loop" [pending, awaiting <Future pending>]:
      scheduler/scheduler.py:601 in schedule_one

``dump(debug=1)``: identical stacks grouped, most frequent first, as ``N @ <stack>``.
"""

from __future__ import annotations

import asyncio
import linecache
import sys
import threading
from collections import defaultdict
from types import FrameType
from typing import Any

MAX_DEPTH = 256


def _frame_lines(frame: FrameType, line: int | None = None, *, source: bool) -> list[str]:
    code = frame.f_code
    lineno = line if line is not None else frame.f_lineno
    if lineno is None:  # a coroutine created but not started yet
        lineno = code.co_firstlineno
    out = [f"  {code.co_filename}:{lineno} in {code.co_qualname}"]
    if source:
        text = linecache.getline(code.co_filename, lineno).strip()
        if text:
            out.append(f"      {text}")
    return out


def _thread_frames(frame: FrameType | None) -> list[FrameType]:
    frames: list[FrameType] = []
    while frame is not None and len(frames) < MAX_DEPTH:
        frames.append(frame)
        frame = frame.f_back
    return frames  # innermost first, as Go prints goroutines


def _await_chain(coro: Any) -> tuple[list[FrameType], str]:
    """The frames of a coroutine's await chain (outermost first) and what the innermost awaits."""
    frames: list[FrameType] = []
    waiting = ""
    while coro is not None and len(frames) < MAX_DEPTH:
        frame = (
            getattr(coro, "cr_frame", None)
            or getattr(coro, "gi_frame", None)
            or getattr(coro, "ag_frame", None)
        )
        if frame is not None:
            frames.append(frame)
        nxt = (
            getattr(coro, "cr_await", None)
            or getattr(coro, "gi_yieldfrom", None)
            or getattr(coro, "ag_await", None)
        )
        if nxt is None and frame is None:
            break
        if (
            nxt is not None
            and not hasattr(nxt, "cr_frame")
            and not hasattr(nxt, "gi_frame")
            and not hasattr(nxt, "ag_frame")
        ):
            waiting = _short(repr(nxt))
            break
        coro = nxt
    return frames, waiting


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def thread_blocks(*, source: bool = False) -> list[tuple[str, list[str]]]:
    """(header, stack lines) for every thread."""
    names = {t.ident: t for t in threading.enumerate()}
    out = []
    for ident, frame in sorted(sys._current_frames().items()):
        t = names.get(ident)
        name = t.name if t is not None else "?"
        kind = (
            "main" if t is threading.main_thread() else ("daemon" if t is not None and t.daemon else "thread")
        )
        lines = [line for f in _thread_frames(frame) for line in _frame_lines(f, source=source)]
        out.append((f'thread {ident} "{name}" [{kind}]', lines))
    return out


def task_blocks(
    loop: asyncio.AbstractEventLoop | None = None, *, source: bool = False
) -> list[tuple[str, list[str]]]:
    """(header, stack lines) for every task of `loop` (the running one by default)."""
    try:
        tasks = asyncio.all_tasks(loop)
    except RuntimeError:  # no running loop
        return []
    out = []
    current = asyncio.current_task(loop) if loop is None else None
    for task in sorted(tasks, key=lambda t: t.get_name()):
        frames, waiting = _await_chain(task.get_coro())
        state = "running" if task is current else ("done" if task.done() else "pending")
        if waiting:
            state += f", awaiting {waiting}"
        lines = [line for f in reversed(frames) for line in _frame_lines(f, source=source)]
        out.append((f'task "{task.get_name()}" [{state}]', lines))
    return out


def dump(debug: int = 2, loop: asyncio.AbstractEventLoop | None = None) -> str:
    """The text of every thread and task: one block each (debug >= 2, with source lines) or
    identical stacks grouped with their count (debug 1)."""
    threads = thread_blocks(source=debug >= 2)
    tasks = task_blocks(loop, source=debug >= 2)
    blocks = threads + tasks
    head = f"{len(threads)} threads, {len(tasks)} asyncio tasks\n\n"
    if debug >= 2:
        return head + "\n\n".join(h + ":\n" + "\n".join(lines) for h, lines in blocks) + "\n"
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for header, lines in blocks:
        groups[tuple(lines)].append(header)
    parts = []
    for stack, headers in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        names = ", ".join(headers[:5]) + (f", ... ({len(headers) - 5} more)" if len(headers) > 5 else "")
        parts.append(f"{len(headers)} @ {names}\n" + "\n".join(stack))
    return head + "\n\n".join(parts) + "\n"
