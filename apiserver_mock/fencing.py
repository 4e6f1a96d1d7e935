"""Leader fencing: what a write carries into its etcd transaction when the request holds a `FenceToken`.

A scheduler leader's writes (binds, status updates, deletes) will carry its fencing token (the
Lease's namespace/name, holder and transition count). The API server turns it into a `Guard`: extra
compares on the Lease key inside the same etcd transaction as the write, so a deposed leader's write
cannot land whatever its clock or pauses. When the transaction fails, the failure branch also reads
the guard's keys, so `violated()` can tell a broken fence (FAILED_PRECONDITION) from an ordinary
conflict on the object, with no extra round trip.

For now a token is accepted and ignored: `guard_for` returns the empty guard. The write path already
threads a Guard through every transaction (`Store.create/update/delete`) and asks `violated()` after
every failed one, so enabling fencing changes this module only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kse.etcdclient import Compare, KeyValue
from proto import kse_pb2 as pb


@dataclass(frozen=True)
class Guard:
    """Extra compares for one write, and the keys whose current values explain a failure."""

    compares: tuple[Compare, ...] = ()
    keys: tuple[bytes, ...] = ()
    token: pb.FenceToken | None = field(default=None, compare=False)


NO_GUARD = Guard()


def guard_for(token: pb.FenceToken | None, prefix: bytes) -> Guard:
    """The guard that makes a write conditional on the token's Lease (none yet: tokens are ignored)."""
    del token, prefix
    return NO_GUARD


def violated(guard: Guard, current: Sequence[KeyValue | None]) -> str:
    """Why the guard failed, given the current values of `guard.keys` ("" when it held)."""
    del guard, current
    return ""
