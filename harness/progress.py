"""Progress of long runs (`kse chaos run`, `kse bench ...`) on stderr.

Not a terminal (CI, a pipe, a log file): exactly the plain ``[prefix] message`` lines these
commands have always printed, one per call, so logs and the tests that read them do not change.
A terminal: the same lines, and while a `phase` runs, a live bar below them (``rich.progress``)
saying what is running, for how long, how long is left and how many faults are through so far.

stdout stays the commands' own (the result table or the JSON object): nothing here writes to it.
One live display at a time per process: a phase opened while another runs shows nothing more,
and every `Reporter` prints through the display that is up, so lines never tear the bar.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressBar,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

_live: Progress | None = None  # the display that is up, if any (see the module doc)


class Phase:
    """A running phase: count its faults with `fault()`; a no-op when nothing is displayed."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self._progress = progress
        self._task = task
        self.faults = 0

    def fault(self) -> None:
        """One more fault is through (injected, or failed to be)."""
        self.faults += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, faults=self.faults)


class _ClockBar(BarColumn):
    """The bar of a phase of known length fills with the wall clock, not with work done."""

    def render(self, task: Task) -> ProgressBar:
        total = task.total
        done = None if total is None else min(task.elapsed or 0.0, total)
        return ProgressBar(
            total=total,
            completed=done or 0.0,
            width=None if self.bar_width is None else max(1, self.bar_width),
            pulse=total is None,
            animation_time=task.get_time(),
            style=self.style,
            complete_style=self.complete_style,
            finished_style=self.finished_style,
            pulse_style=self.pulse_style,
        )


class _Remaining(ProgressColumn):
    """``12s left`` of a phase of known length (rich's own column estimates from work done)."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        left = max(0.0, task.total - (task.elapsed or 0.0))
        return Text(f"{left:.0f}s left", style="progress.remaining")


class _Faults(ProgressColumn):
    def render(self, task: Task) -> Text:
        total = task.fields.get("total_faults")
        if total is None:
            return Text("")
        return Text(f"faults {task.fields.get('faults', 0)}/{total}")


class Reporter:
    """``reporter(message)`` prints one progress line; ``with reporter.phase(...)`` shows a live
    bar meanwhile when `stream()` (default: the current ``sys.stderr``) is a terminal."""

    def __init__(self, prefix: str, stream: Callable[[], TextIO] = lambda: sys.stderr) -> None:
        self.prefix = prefix
        self._stream = stream

    def __call__(self, message: str) -> None:
        line = f"[{self.prefix}] {message}"
        if _live is not None:
            _live.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
        else:
            print(line, file=self._stream(), flush=True)

    @contextlib.contextmanager
    def phase(self, what: str, *, total_s: float | None = None, faults: int | None = None) -> Iterator[Phase]:
        """Show `what` as running (with elapsed time; time left when `total_s` is known; ``faults
        n/faults`` when given) until the block ends. Nothing at all off a terminal."""
        global _live
        stream = self._stream()
        if _live is not None or not _isatty(stream):
            yield Phase()
            return
        console = Console(file=stream, stderr=stream is sys.stderr)
        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", style="bold", markup=False),
            _ClockBar(bar_width=30),
            TimeElapsedColumn(),
            _Remaining(),
            _Faults(),
            console=console,
            transient=True,
            refresh_per_second=4,
            get_time=time.monotonic,
        )
        task = progress.add_task(f"[{self.prefix}] {what}", total=total_s, faults=0, total_faults=faults)
        _live = progress
        try:
            with progress:
                yield Phase(progress, task)
        finally:
            _live = None


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-less stream
        return False
