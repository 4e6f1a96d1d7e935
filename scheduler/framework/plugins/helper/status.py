"""The Error statuses of a plugin that finds no state of its own in CycleState."""

from __future__ import annotations

from scheduler.framework.types import Status


def state_read_status(key: str, err: BaseException, prefix: str = "reading") -> Status:
    """The Error status of a plugin that finds no state of its own in CycleState, with upstream's
    wording: fmt.Errorf("<prefix> %q from cycleState: %w", key, err)."""
    return Status.error(f'{prefix} "{key}" from cycleState: {err}')
