"""Running a command that owns a cluster until it ends or is stopped (`kse chaos run`, `kse bench ...`).

Such a command must stop what it started, in order, however it ends. Ctrl-C does that by itself
(asyncio cancels the main task, whose `async with` blocks then shut the cluster down); SIGTERM, what
a CI job or `timeout` sends, by default kills the Python process on the spot and leaves every child
process running. `run_stoppable` makes SIGTERM cancel the run exactly as Ctrl-C does, and reports
either as `Stopped`, with the shell's exit status for it (128 + the signal number).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["Stopped", "run_stoppable"]

T = TypeVar("T")


class Stopped(BaseException):
    """The run was stopped by Ctrl-C (`how` "interrupted", exit status 130) or SIGTERM
    ("terminated", 143) and has cleaned up. A BaseException, as KeyboardInterrupt is, so that an
    `except Exception` around the run does not take it for the run's own failure."""

    def __init__(self, how: str, exit_code: int) -> None:
        super().__init__(how)
        self.how = how
        self.exit_code = exit_code


def run_stoppable(main: Callable[[], Awaitable[T]]) -> T:
    """`asyncio.run(main())`, with SIGTERM cancelling the run as Ctrl-C does; raises `Stopped`
    when either ended it."""

    async def run() -> T:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await main()

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:
        raise Stopped("interrupted", 128 + signal.SIGINT) from None
    except asyncio.CancelledError:
        raise Stopped("terminated", 128 + signal.SIGTERM) from None
