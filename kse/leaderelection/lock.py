"""The resource lock: a Lease read and written through a small client protocol.

Mirrors client-go's `tools/leaderelection/resourcelock` (interface.go, leaselock.go): the elector
works with a `LeaderElectionRecord` (holder, duration, acquire/renew times, transitions) and the
lock turns it into a `coordination.k8s.io/v1` Lease. Unlike client-go's LeaseLock, this lock caches
nothing: the elector keeps the newest Lease it knows (from a get, a write, or the watch) and hands
it back as the base of the next update, whose `metadata.resourceVersion` is the precondition.

`LeaseClient` is the boundary to the API: `ClientsetLeaseClient` implements it over the typed
clientset (`kse.client`); the tests' in-memory store (`tests/fixtures/leaderelection.py`) is the
other implementation.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from kse.client.clientset import Clientset, WatchEvent
from proto import kse_pb2 as pb

__all__ = [
    "ClientsetLeaseClient",
    "LeaderElectionRecord",
    "LeaseClient",
    "LeaseLock",
    "LeaseWatch",
    "resource_version_of",
]

LeaseWatch = AbstractAsyncContextManager[AsyncIterable[WatchEvent[pb.Lease]]]


class LeaseClient(Protocol):
    """The four Lease verbs leader election needs. Errors are `kse.client.errors` types:
    NotFoundError, AlreadyExistsError, ConflictError (stale resourceVersion), and any other ApiError
    for a failed call."""

    async def get(self, namespace: str, name: str) -> pb.Lease: ...

    async def create(self, lease: pb.Lease) -> pb.Lease: ...

    async def update(self, lease: pb.Lease) -> pb.Lease:
        """Replace the Lease if `lease.metadata.resource_version` is still current, else ConflictError."""
        ...

    def watch(self, namespace: str, name: str) -> LeaseWatch:
        """Events for this one Lease: first its current state (ADDED, if it exists) and a BOOKMARK,
        then every change (ADDED, MODIFIED, DELETED; BOOKMARKs may be interleaved). The iterator
        ends or raises when the stream breaks; the caller watches again."""
        ...


# ---------------------------------------------------------------- the record


@dataclass(frozen=True)
class LeaderElectionRecord:
    """client-go's LeaderElectionRecord: the election state a Lease spec holds.

    Equality is the change detector (client-go compares the record's JSON): any write by the holder
    changes at least renewTime. The times are MicroTime strings written by whichever machine wrote
    the record, on its clock; the elector never compares them with its own time.
    """

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    lease_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: pb.LeaseSpec) -> LeaderElectionRecord:
        return cls(
            holder_identity=spec.holder_identity if spec.HasField("holder_identity") else "",
            lease_duration_seconds=spec.lease_duration_seconds
            if spec.HasField("lease_duration_seconds")
            else 0,
            acquire_time=spec.acquire_time,
            renew_time=spec.renew_time,
            lease_transitions=spec.lease_transitions if spec.HasField("lease_transitions") else 0,
        )

    def to_spec(self) -> pb.LeaseSpec:
        """The whole spec, as client-go's LeaderElectionRecordToLeaseSpec (every field set)."""
        spec = pb.LeaseSpec(
            holder_identity=self.holder_identity,
            lease_duration_seconds=self.lease_duration_seconds,
            lease_transitions=self.lease_transitions,
        )
        if self.acquire_time:
            spec.acquire_time = self.acquire_time
        if self.renew_time:
            spec.renew_time = self.renew_time
        return spec


def resource_version_of(lease: pb.Lease | None) -> int:
    """The Lease's resourceVersion as an int (0 when absent or not a number)."""
    if lease is None:
        return 0
    rv = lease.metadata.resource_version
    return int(rv) if rv.isdigit() else 0


# ---------------------------------------------------------------- the lock


class LeaseLock:
    """The Lease `namespace/name` held under `identity`, read and written through `client`."""

    def __init__(self, client: LeaseClient, namespace: str, name: str, identity: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> pb.Lease:
        """The current Lease (NotFoundError if there is none)."""
        return await self.client.get(self.namespace, self.name)

    async def create(self, record: LeaderElectionRecord) -> pb.Lease:
        """Create the Lease holding `record` (AlreadyExistsError if someone was first)."""
        lease = pb.Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=pb.ObjectMeta(name=self.name, namespace=self.namespace),
            spec=record.to_spec(),
        )
        return await self.client.create(lease)

    async def update(self, base: pb.Lease, record: LeaderElectionRecord) -> pb.Lease:
        """Write `record` over `base`, on the condition that `base` is still the current version
        (its resourceVersion); ConflictError otherwise. Labels and annotations of `base` are kept."""
        if not base.metadata.resource_version:
            raise ValueError(f"lease {self.describe()}: an update needs the resourceVersion it replaces")
        lease = pb.Lease()
        lease.CopyFrom(base)
        lease.spec.CopyFrom(record.to_spec())
        return await self.client.update(lease)

    def watch(self) -> LeaseWatch:
        return self.client.watch(self.namespace, self.name)


# ---------------------------------------------------------------- over the typed clientset


class ClientsetLeaseClient:
    """`LeaseClient` over `Clientset.leases` (gRPC, mTLS, typed errors).

    Give the elector a Clientset of its own, as kube-scheduler gives leader election its own client:
    renewals must never wait behind binds for client rate-limiter tokens.
    """

    def __init__(self, clientset: Clientset, *, watch_timeout_seconds: int = 300) -> None:
        self._leases = clientset.leases
        # The server ends a watch after this long and the elector re-watches: bounds how long a
        # silently dead stream can go unnoticed (keepalive catches dead connections too).
        self._watch_timeout = watch_timeout_seconds

    async def get(self, namespace: str, name: str) -> pb.Lease:
        return await self._leases.get(namespace, name)

    async def create(self, lease: pb.Lease) -> pb.Lease:
        return await self._leases.create(lease)

    async def update(self, lease: pb.Lease) -> pb.Lease:
        return await self._leases.update(lease)

    def watch(self, namespace: str, name: str) -> LeaseWatch:
        return self._leases.watch(
            namespace,
            field_selector=f"metadata.name={name}",
            send_initial_events=True,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout,
        )


# ---------------------------------------------------------------- in memory


def _copy(lease: pb.Lease) -> pb.Lease:
    out = pb.Lease()
    out.CopyFrom(lease)
    return out
