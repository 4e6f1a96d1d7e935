"""Tasks with an owner: the one place outside a TaskGroup where kse starts an asyncio task.

DESIGN.md asks for structured concurrency: no task that nobody awaits or cancels. `asyncio.TaskGroup`
covers work a block waits for. Two shapes it does not cover, and what to use for them:

* An object that runs background work between `start()` / `__aenter__` and `close()` / `__aexit__`
  (a credential reload loop, a channel source's maintenance task), or that starts fire-and-forget
  work along the way (retiring an old channel after a credential swap): give it a `TaskSet`.
  `spawn()` starts a task the set owns; `aclose()` cancels every task still running and waits for
  them, so nothing outlives its owner. A finished task leaves the set by itself, so a long-lived
  owner does not accumulate them.

      self._tasks = TaskSet("etcd-client", logger=log)
      self._tasks.spawn(self._reload_loop(), name="etcd-credential-reload")
      ...
      await self._tasks.aclose()          # in close()

* A race ("wait for A or B") where the losers must not be left running: `async with
  TaskSet(...) as tasks:` around the `asyncio.wait`; leaving the block cancels and awaits whatever
  is still running, however the block is left (a result, an exception, a cancellation).

* A coroutine that runs beside a block and ends with it, whose crash should end the block:
  `background()` (a TaskGroup of one whose errors are not wrapped in an ExceptionGroup).

Failures never vanish: a task that raises is logged the moment it ends, with its traceback, at
`failure_level` (ERROR by default). Owners whose callers read every task's result (a race, or a
shared future every caller awaits) pass a lower level so the error is not reported twice; the
exception is still retrieved, so asyncio never prints "Task exception was never retrieved".
Errors the owner expects in normal operation (`expected`, e.g. an etcd member down under a write)
are logged without their traceback: a traceback in a log means a bug, and tests hold logs to that.
`tests/unit/test_structured_concurrency.py` fails when a task is started any other way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

_log = logging.getLogger(__name__)


class TaskSet:
    """Background tasks owned by one object; `aclose()` cancels and awaits those still running.

    Not a TaskGroup: a failing task does not cancel its siblings or its owner (a background loop's
    crash is logged, the owner decides what it means), and closing cancels rather than waits. Use a
    TaskGroup when the owner's caller should wait for the work or fail with it."""

    def __init__(
        self,
        name: str,
        *,
        logger: logging.Logger | None = None,
        failure_level: int = logging.ERROR,
        expected: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.name = name
        self._log = logger or _log
        self._failure_level = failure_level
        self._expected = expected
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self.failures = 0

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Start `coro` as a task this set owns (on the running loop).

        Raises RuntimeError once the set is closed: work started after its owner's close would have
        no owner left to end it."""
        if self._closed:
            coro.close()  # never started: no "coroutine was never awaited" warning
            raise RuntimeError(f"task set {self.name!r} is closed; cannot start {name or coro!r}")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()  # retrieved here, so asyncio does not report it again at GC
        if error is not None:
            self.failures += 1
            expected = isinstance(error, self._expected)
            self._log.log(
                self._failure_level,
                "%s: task %s failed: %r",
                self.name,
                task.get_name(),
                error,
                exc_info=None if expected else (type(error), error, error.__traceback__),
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        """How many of its tasks are still running."""
        return len(self._tasks)

    def cancel(self) -> None:
        """Cancel every running task without waiting (the set stays open); `aclose()` also waits."""
        for task in self._tasks:
            task.cancel()

    async def aclose(self, grace: float | None = None) -> None:
        """Refuse new tasks, cancel the running ones and wait until every one has ended.

        With a `grace`, the running tasks first get up to that many seconds to finish by
        themselves (a stop grace: in-flight writes complete, the rest is cut). Idempotent. Their
        exceptions were logged when they ended; none is raised here, so closing an owner in a
        `finally` never masks the error that is unwinding it."""
        self._closed = True
        if grace is not None and grace > 0 and self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        while self._tasks:
            pending = set(self._tasks)
            for task in pending:
                task.cancel()
            await asyncio.wait(pending)

    async def __aenter__(self) -> TaskSet:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<TaskSet {self.name} {state} running={len(self._tasks)}>"


@contextlib.asynccontextmanager
async def background(coro: Coroutine[Any, Any, None], *, name: str) -> AsyncIterator[asyncio.Task[None]]:
    """Run `coro` as a task for the duration of the block, then cancel it and wait for it.

    Structured like a TaskGroup of one, but an exception in the block propagates as itself (not
    wrapped in an ExceptionGroup). If the task crashes while the block runs, the block is cancelled
    and the task's exception is raised from the `async with`.
    """
    host = asyncio.current_task()
    task = asyncio.create_task(coro, name=name)
    cancelled_host = False

    def _on_done(t: asyncio.Task[None]) -> None:
        nonlocal cancelled_host
        if not t.cancelled() and t.exception() is not None and host is not None:
            cancelled_host = True
            host.cancel()

    task.add_done_callback(_on_done)
    try:
        yield task
    finally:
        task.remove_done_callback(_on_done)
        task.cancel()
        await asyncio.wait([task])
        if cancelled_host and host is not None:
            host.uncancel()
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
