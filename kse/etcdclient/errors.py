"""Errors of the etcd client, shaped by what a caller can do about each.

* `CompactedError`: the revision asked for is gone; re-list (Kubernetes' "410 Gone").
* `EtcdUnavailableError`: no endpoint answered within the deadline; nothing was applied.
* `EtcdOutcomeUnknownError` (an `EtcdUnavailableError`): a write was sent and the connection or the
  deadline failed before an answer came. It may or may not have been applied, so the client never
  retries it blindly; the caller re-reads and decides (a CAS txn makes that safe: re-read the key and
  compare).
* `EtcdError`: anything else etcd refused (bad request, permission, too large, ...).
"""

from __future__ import annotations


class EtcdError(Exception):
    """An etcd request failed. `code` is the gRPC status code name when there was one."""

    def __init__(self, message: str, *, code: str | None = None, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.endpoint = endpoint


class CompactedError(EtcdError):
    """A range or watch asked for a revision that compaction has removed.

    `compact_revision` is etcd's compaction point (the oldest revision still readable), 0 when etcd
    did not say and it could not be looked up; `requested_revision` is what was asked for.
    """

    def __init__(
        self, compact_revision: int, requested_revision: int, *, endpoint: str | None = None
    ) -> None:
        super().__init__(
            f"etcd revision {requested_revision} has been compacted (compact revision {compact_revision})",
            code="OUT_OF_RANGE",
            endpoint=endpoint,
        )
        self.compact_revision = compact_revision
        self.requested_revision = requested_revision


class FutureRevisionError(EtcdError):
    """A range asked for a revision etcd has not reached yet."""

    def __init__(self, requested_revision: int, *, endpoint: str | None = None) -> None:
        super().__init__(
            f"etcd revision {requested_revision} is in the future", code="OUT_OF_RANGE", endpoint=endpoint
        )
        self.requested_revision = requested_revision


class EtcdUnavailableError(EtcdError):
    """No endpoint could serve the request before the deadline (all down, no leader, or too slow)."""


class EtcdOutcomeUnknownError(EtcdUnavailableError):
    """A write (put, delete, txn) was sent but no answer came back: it may have been applied.

    Not retried by the client, because a blind retry of a txn that did apply could apply it twice or
    fail its compare against its own first write. Re-read and decide.
    """


class EtcdClosedError(EtcdError):
    """The client (or the watch) was closed while the call was in flight."""
