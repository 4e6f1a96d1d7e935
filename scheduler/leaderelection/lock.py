"""The resource lock: a Lease read and written through a small client protocol.

Mirrors client-go's `tools/leaderelection/resourcelock` (interface.go, leaselock.go): the elector
works with a `LeaderElectionRecord` (holder, duration, acquire/renew times, transitions) and the
lock turns it into a `coordination.k8s.io/v1` Lease. Unlike client-go's LeaseLock, this lock caches
nothing: the elector keeps the newest Lease it knows (from a get, a write, or the watch) and hands
it back as the base of the next update, whose `metadata.resourceVersion` is the precondition.

`LeaseClient` is the boundary to the API: `ClientsetLeaseClient` implements it over the typed
clientset (`kse.client`), `InMemoryLeaseStore` in memory for tests and simulations (one revision
counter, compare-and-swap on resourceVersion, watches, injectable faults).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from kse.client.clientset import ADDED, BOOKMARK, DELETED, MODIFIED, Clientset, WatchEvent
from kse.client.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    NotFoundError,
    UnavailableError,
)
from proto import kse_pb2 as pb

__all__ = [
    "ClientsetLeaseClient",
    "InMemoryLeaseStore",
    "LeaderElectionRecord",
    "LeaseClient",
    "LeaseLock",
    "LeaseWatch",
    "MemoryLeaseClient",
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


Fault = Callable[[str], Awaitable[None]]


class InMemoryLeaseStore:
    """Leases in memory with the API server's semantics: one global revision counter (every write
    gets the next one, as etcd's mod_revision), create-if-absent, update with a resourceVersion
    precondition, and watches. Each candidate talks through its own `client(name)`, whose faults
    (errors, hangs) and watch can be controlled separately, as a network partition would."""

    def __init__(self) -> None:
        self._revision = 0
        self._leases: dict[tuple[str, str], pb.Lease] = {}
        self._watchers: list[tuple[str, str, asyncio.Queue[WatchEvent[pb.Lease] | BaseException]]] = []
        self.writes: list[tuple[str, str, pb.Lease]] = []  # (client, verb, lease as stored)

    @property
    def revision(self) -> int:
        return self._revision

    def client(self, name: str = "") -> MemoryLeaseClient:
        return MemoryLeaseClient(self, name)

    # -- direct access (tests)

    def lease(self, namespace: str, name: str) -> pb.Lease | None:
        obj = self._leases.get((namespace, name))
        return _copy(obj) if obj is not None else None

    def put(self, lease: pb.Lease, *, by: str = "test") -> pb.Lease:
        """Store `lease` unconditionally (create or overwrite) at the next revision."""
        key = (lease.metadata.namespace, lease.metadata.name)
        existed = key in self._leases
        stored = self._store(lease, by, "put")
        self._notify(MODIFIED if existed else ADDED, stored)
        return _copy(stored)

    def delete(self, namespace: str, name: str) -> None:
        lease = self._leases.pop((namespace, name))
        self._revision += 1
        gone = _copy(lease)
        gone.metadata.resource_version = str(self._revision)
        self._notify(DELETED, gone)

    def break_watches(self, error: BaseException | None = None) -> None:
        """End every open watch stream with `error` (UnavailableError by default)."""
        for _, _, q in self._watchers:
            q.put_nowait(error or UnavailableError("watch stream broken (test)"))

    # -- the verbs, through a client

    async def _get(self, namespace: str, name: str) -> pb.Lease:
        obj = self._leases.get((namespace, name))
        if obj is None:
            raise NotFoundError(f'leases.coordination.k8s.io "{name}" not found')
        return _copy(obj)

    async def _create(self, by: str, lease: pb.Lease) -> pb.Lease:
        key = (lease.metadata.namespace, lease.metadata.name)
        if not key[1]:
            raise InvalidError("Lease.coordination.k8s.io is invalid: metadata.name: Required value")
        if key in self._leases:
            raise AlreadyExistsError(f'leases.coordination.k8s.io "{key[1]}" already exists')
        stored = self._store(lease, by, "create")
        self._notify(ADDED, stored)
        return _copy(stored)

    async def _update(self, by: str, lease: pb.Lease) -> pb.Lease:
        key = (lease.metadata.namespace, lease.metadata.name)
        current = self._leases.get(key)
        if current is None:
            raise NotFoundError(f'leases.coordination.k8s.io "{key[1]}" not found')
        if lease.metadata.resource_version != current.metadata.resource_version:
            raise ConflictError(
                f'Operation cannot be fulfilled on leases.coordination.k8s.io "{key[1]}": the object has '
                "been modified; please apply your changes to the latest version and try again"
            )
        stored = self._store(lease, by, "update", uid=current.metadata.uid)
        self._notify(MODIFIED, stored)
        return _copy(stored)

    def _store(self, lease: pb.Lease, by: str, verb: str, uid: str = "") -> pb.Lease:
        self._revision += 1
        stored = _copy(lease)
        stored.metadata.resource_version = str(self._revision)
        stored.metadata.uid = uid or stored.metadata.uid or str(uuid.uuid4())
        self._leases[(stored.metadata.namespace, stored.metadata.name)] = stored
        self.writes.append((by, verb, _copy(stored)))
        return stored

    def _notify(self, type_: str, lease: pb.Lease) -> None:
        event = WatchEvent(type_, _copy(lease), lease.metadata.resource_version)
        for ns, name, q in self._watchers:
            if (ns, name) == (lease.metadata.namespace, lease.metadata.name):
                q.put_nowait(event)

    @contextlib.asynccontextmanager
    async def _watch(self, namespace: str, name: str) -> AsyncIterator[AsyncIterable[WatchEvent[pb.Lease]]]:
        q: asyncio.Queue[WatchEvent[pb.Lease] | BaseException] = asyncio.Queue()
        current = self._leases.get((namespace, name))
        if current is not None:
            q.put_nowait(WatchEvent(ADDED, _copy(current), current.metadata.resource_version))
        q.put_nowait(WatchEvent(BOOKMARK, None, str(self._revision)))
        entry = (namespace, name, q)
        self._watchers.append(entry)

        async def events() -> AsyncIterator[WatchEvent[pb.Lease]]:
            while True:
                item = await q.get()
                if isinstance(item, BaseException):
                    raise item
                yield item

        try:
            yield events()
        finally:
            self._watchers.remove(entry)


class MemoryLeaseClient:
    """One candidate's view of an `InMemoryLeaseStore` (implements `LeaseClient`).

    Every call first yields to the event loop (as a network call would), then runs `fault(verb)` if
    set: a fault may raise (an error answer), or block (a hang, a partition). `watch_available =
    False` makes new watches fail with UnavailableError.
    """

    _ids = itertools.count()

    def __init__(self, store: InMemoryLeaseStore, name: str) -> None:
        self.store = store
        self.name = name or f"client-{next(self._ids)}"
        self.fault: Fault | None = None
        self.watch_available = True
        self.calls: list[str] = []

    async def _enter(self, verb: str) -> None:
        self.calls.append(verb)
        await asyncio.sleep(0)
        if self.fault is not None:
            await self.fault(verb)

    async def get(self, namespace: str, name: str) -> pb.Lease:
        await self._enter("get")
        return await self.store._get(namespace, name)

    async def create(self, lease: pb.Lease) -> pb.Lease:
        await self._enter("create")
        return await self.store._create(self.name, lease)

    async def update(self, lease: pb.Lease) -> pb.Lease:
        await self._enter("update")
        return await self.store._update(self.name, lease)

    def watch(self, namespace: str, name: str) -> LeaseWatch:
        return self._watch(namespace, name)

    @contextlib.asynccontextmanager
    async def _watch(self, namespace: str, name: str) -> AsyncIterator[AsyncIterable[WatchEvent[pb.Lease]]]:
        await self._enter("watch")
        if not self.watch_available:
            raise UnavailableError("watch unavailable (test)")
        async with self.store._watch(namespace, name) as events:
            yield events


def _copy(lease: pb.Lease) -> pb.Lease:
    out = pb.Lease()
    out.CopyFrom(lease)
    return out
