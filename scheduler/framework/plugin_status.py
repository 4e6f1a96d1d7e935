"""How the framework words what a plugin returned or raised into the status it reports
(upstream frameworkImpl's inline `AsStatus(fmt.Errorf("running X plugin %q: %w", ...))`).

Shared by the runtime (`runtime.py`) and the batch engine (`batch.py`), so that both paths give
byte-identical statuses: the tests compare them.
"""

from __future__ import annotations

from scheduler.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE
from scheduler.framework.types import Code, Status


def failed(status: Status | None) -> bool:
    """Anything but success (None is success, as upstream's nil)."""
    return status is not None and status.code != Code.SUCCESS


def with_plugin(status: Status, plugin: str) -> Status:
    """The status naming `plugin` (a copy: plugins may return shared Status objects)."""
    if status.plugin == plugin:
        return status
    return Status(status.code, status.reasons, plugin, status.err)


def error_status(message: str, plugin: str = "", err: BaseException | None = None) -> Status:
    """An Error status worded by the framework; `err` is the error it wraps (Go's `%w`)."""
    return Status(Code.ERROR, [message], plugin, err)


def exception_status(exc: BaseException) -> Status:
    """What a plugin that raised returns: an Error carrying the exception (upstream AsStatus)."""
    return Status(Code.ERROR, [str(exc) or type(exc).__name__], err=exc)


def filter_failure(name: str, status: Status) -> Status:
    """A failed Filter status of plugin `name`: a rejection names the plugin; anything else is an
    Error, since Filter plugins may only succeed or reject (upstream RunFilterPlugins)."""
    if status.is_rejected():
        return with_plugin(status, name)
    return error_status(f'running "{name}" filter plugin: {status.message()}', name, status.err)


def score_failure(name: str, status: Status) -> Status:
    """The Error of Score plugin `name` failing on a node (upstream RunScorePlugins)."""
    return error_status(
        f'running Score plugins: plugin "{name}" failed with: {status.message()}', err=status.err
    )


def normalize_failure(name: str, status: Status) -> Status:
    """The Error of Score plugin `name` failing in NormalizeScore (upstream RunScorePlugins)."""
    return error_status(
        f'running Normalize on Score plugins: plugin "{name}" failed with: {status.message()}',
        err=status.err,
    )


def invalid_score(plugin: str, score: int) -> Status:
    """The Error of a score outside [MIN_NODE_SCORE, MAX_NODE_SCORE] after NormalizeScore."""
    return error_status(
        f'applying score defaultWeights on Score plugins: plugin "{plugin}" returns an invalid score '
        f"{score}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
    )
