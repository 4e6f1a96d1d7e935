"""Informers, as client-go's SharedInformer: a reflector, a local store, and ordered event handlers.

    informer = Informer(cs.pods, field_selector="spec.nodeName=")
    informer.add_event_handler(on_add=queue_pod, on_update=update_pod, on_delete=forget_pod)
    async with informer.running():
        await informer.wait_for_sync(timeout=30)
        ...
    # or, structured by the caller: tg.create_task(informer.run())

Semantics:
* The store is keyed "namespace/name" ("name" for cluster-scoped kinds) and reflects everything the
  informer has delivered. Objects in it are shared: treat them as read-only (as client-go's cache).
  It is not thread-safe, but it is asyncio-safe: it only changes between awaits, on the informer's
  own coroutine.
* Handlers are synchronous callables, called on that coroutine in delivery order, never
  concurrently: `on_add(obj)`, `on_update(old, new)`, `on_delete(last_known)`. A handler that needs
  to do I/O should enqueue work (the scheduler's handlers feed its queue). A handler that raises is
  logged; the others still run and the informer goes on. A handler added to a running informer
  first receives an `on_add` for every object already in the store, as client-go does.
* A relist (the first list, or after OUT_OF_RANGE) is turned into the difference with the store:
  new objects are adds, changed ones (another resourceVersion) are updates (a different uid under
  the same name is a delete of the old then an add of the new), and objects that are no longer
  listed are deletes carrying their last known state: a relist never drops a deletion.
* `last_synced_resource_version` is the revision up to which everything has been delivered (list,
  events and bookmarks); `wait_for_revision(rv)` waits until it reaches `rv`.
* `history`, if given, receives one `HistoryRecord` per delivered change (and a LIST marker per
  list), in delivery order: the chaos checker compares these with etcd's history.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from kse.client.clientset import (
    ADDED,
    DELETED,
    MODIFIED,
    Clientset,
    ResourceClient,
    WatchEvent,
)
from kse.client.reflector import Backoff, Reflector
from kse.objects.kinds import Kind
from kse.objects.meta import key_of, object_key
from kse.tasks import background

T = TypeVar("T", bound=Message)

log = logging.getLogger(__name__)

LIST = "LIST"  # history marker: the state was replaced by a list at this revision


class InformerStoppedError(RuntimeError):
    """The informer stopped while a caller was waiting on it."""


def _rv_int(rv: str) -> int:
    return int(rv) if rv.isdigit() else 0


def _meta(obj: Message) -> Any:
    return obj.metadata  # type: ignore[attr-defined]


# ---------------------------------------------------------------- store


class Store(Generic[T]):
    """The informer's local cache: objects by "namespace/name" (see the module doc)."""

    def __init__(self) -> None:
        self._items: dict[str, T] = {}

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def get_by(self, namespace: str, name: str) -> T | None:
        return self._items.get(object_key(namespace, name))

    def list(self) -> list[T]:
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def items(self) -> builtins.list[tuple[str, T]]:
        return list(self._items.items())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    # Mutations: only the informer calls these.
    def _put(self, key: str, obj: T) -> T | None:
        old = self._items.get(key)
        self._items[key] = obj
        return old

    def _pop(self, key: str) -> T | None:
        return self._items.pop(key, None)


# ---------------------------------------------------------------- handlers and history


@dataclass(frozen=True)
class HistoryRecord:
    """One delivered change: type is ADDED/MODIFIED/DELETED (or LIST, a relist marker with key "").

    `source` is "watch" for watch events and "list" for changes a list produced. For a delete that a
    relist discovered, `resource_version` is the list's revision (the deleting revision is unknown).
    """

    resource: str
    type: str
    key: str
    resource_version: str
    source: str


@dataclass(eq=False)
class HandlerRegistration(Generic[T]):
    """A registered handler set; `remove()` stops deliveries to it."""

    informer: Informer[T]
    on_add: Callable[[T], object] | None = None
    on_update: Callable[[T, T], object] | None = None
    on_delete: Callable[[T], object] | None = None
    active: bool = field(default=True)

    def has_synced(self) -> bool:
        """True once this handler has received the initial list (handlers are fed in step)."""
        return self.active and self.informer.has_synced()

    def remove(self) -> None:
        self.active = False
        self.informer._remove_handler(self)


# ---------------------------------------------------------------- informer


class Informer(Generic[T]):
    """A shared informer for one resource (and optional namespace / selectors)."""

    def __init__(
        self,
        client: ResourceClient[T],
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        history: Callable[[HistoryRecord], None] | None = None,
        backoff: Backoff | None = None,
        watch_timeout_seconds: Callable[[], int] | int | None = None,
        page_size: int = 500,
        name: str = "",
    ) -> None:
        self.client = client
        self.resource = client.resource
        self.name = name or client.resource
        self.store: Store[T] = Store()
        self._history = history
        self._handlers: list[HandlerRegistration[T]] = []
        self._synced = False
        self._last_rv = ""
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._sync_waiters: list[asyncio.Future[None]] = []
        self._running = False
        self.handler_errors = 0
        self.reflector: Reflector[T] = Reflector(
            client,
            self,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            backoff=backoff,
            watch_timeout_seconds=watch_timeout_seconds,
            page_size=page_size,
            name=self.name,
        )

    # -- public state

    def has_synced(self) -> bool:
        """True once the first list has been delivered to the store and every handler."""
        return self._synced

    @property
    def last_synced_resource_version(self) -> str:
        return self._last_rv

    def add_event_handler(
        self,
        on_add: Callable[[T], object] | None = None,
        on_update: Callable[[T, T], object] | None = None,
        on_delete: Callable[[T], object] | None = None,
    ) -> HandlerRegistration[T]:
        reg = HandlerRegistration(self, on_add, on_update, on_delete)
        # Replay the current state to the newcomer, then it is in step with the others.
        if on_add is not None:
            for obj in self.store.list():
                self._call(reg.on_add, obj)
        self._handlers.append(reg)
        return reg

    def _remove_handler(self, reg: HandlerRegistration[T]) -> None:
        if reg in self._handlers:
            self._handlers.remove(reg)

    async def wait_for_sync(self) -> None:
        """Wait until the first list has been delivered (bound it with `asyncio.timeout`)."""
        if self._synced:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sync_waiters.append(fut)
        try:
            await fut
        finally:
            if fut in self._sync_waiters:
                self._sync_waiters.remove(fut)

    async def wait_for_revision(self, resource_version: str | int) -> None:
        """Wait until the informer has delivered everything up to `resource_version`.

        It advances with events and bookmarks, so for a revision written to another resource it
        completes at the next bookmark past it. Bound it with `asyncio.timeout`.
        """
        target = int(resource_version)
        if _rv_int(self._last_rv) >= target:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (target, fut)
        self._waiters.append(entry)
        try:
            await fut
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    # -- lifetime

    async def run(self) -> None:
        """Run the informer until cancelled."""
        if self._running:
            raise RuntimeError(f"informer {self.name} is already running")
        self._running = True
        try:
            await self.reflector.run()
        finally:
            self._running = False
            self._fail_waiters(InformerStoppedError(f"informer {self.name} stopped"))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Informer[T]]:
        """Run the informer for the duration of the block; leaving it stops the informer and waits
        for it. If the informer crashes, the block is cancelled and the crash is raised."""
        async with background(self.run(), name=f"informer-{self.name}"):
            yield self

    def _fail_waiters(self, exc: BaseException) -> None:
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(exc)
        for fut in self._sync_waiters:
            if not fut.done():
                fut.set_exception(exc)
        self._waiters.clear()
        self._sync_waiters.clear()

    # -- the reflector's sink

    def replace(self, items: list[T], resource_version: str) -> None:
        new: dict[str, T] = {}
        for obj in items:
            new[key_of(obj)] = obj
        self._record(LIST, "", resource_version, "list")
        for key, obj in new.items():
            old = self.store.get(key)
            if old is None:
                self.store._put(key, obj)
                self._record(ADDED, key, _meta(obj).resource_version, "list")
                self._notify_add(obj)
            elif _meta(old).uid != _meta(obj).uid and _meta(old).uid and _meta(obj).uid:
                # Deleted and recreated while we were not watching: two distinct objects.
                self.store._pop(key)
                self._record(DELETED, key, resource_version, "list")
                self._notify_delete(old)
                self.store._put(key, obj)
                self._record(ADDED, key, _meta(obj).resource_version, "list")
                self._notify_add(obj)
            elif _meta(old).resource_version != _meta(obj).resource_version:
                self.store._put(key, obj)
                self._record(MODIFIED, key, _meta(obj).resource_version, "list")
                self._notify_update(old, obj)
        for key in sorted(set(self.store.keys()) - new.keys()):
            gone = self.store._pop(key)
            assert gone is not None
            self._record(DELETED, key, resource_version, "list")
            self._notify_delete(gone)
        if not self._synced:
            self._synced = True
            for fut in self._sync_waiters:
                if not fut.done():
                    fut.set_result(None)

    def apply(self, events: list[WatchEvent[T]]) -> None:
        for event in events:
            obj = event.object
            if obj is None:
                continue
            key = key_of(obj)
            self._record(event.type, key, event.resource_version, "watch")
            if event.type == DELETED:
                # The event carries the final state (its resourceVersion is the deleting revision).
                self.store._pop(key)
                self._notify_delete(obj)
            else:
                old = self.store._put(key, obj)
                if old is None:
                    self._notify_add(obj)
                else:
                    self._notify_update(old, obj)

    def rejected(self, events: list[WatchEvent[T]]) -> None:
        """Recorded in the history (as delivered), not applied: the reflector refused a duplicate."""
        for event in events:
            if event.object is not None:
                self._record(event.type, key_of(event.object), event.resource_version, "watch")

    def advance(self, resource_version: str) -> None:
        rv = _rv_int(resource_version)
        if rv < _rv_int(self._last_rv):
            return
        self._last_rv = resource_version
        if self._waiters:
            still: list[tuple[int, asyncio.Future[None]]] = []
            for target, fut in self._waiters:
                if target <= rv:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((target, fut))
            self._waiters = still

    # -- delivery

    def _record(self, type_: str, key: str, rv: str, source: str) -> None:
        if self._history is not None:
            self._history(HistoryRecord(self.resource, type_, key, rv, source))

    def _call(self, fn: Callable[..., object] | None, *args: T) -> None:
        if fn is None:
            return
        try:
            fn(*args)
        except Exception:
            self.handler_errors += 1
            log.exception("%s: event handler %r failed", self.name, fn)

    def _notify_add(self, obj: T) -> None:
        for reg in list(self._handlers):
            self._call(reg.on_add, obj)

    def _notify_update(self, old: T, new: T) -> None:
        for reg in list(self._handlers):
            self._call(reg.on_update, old, new)

    def _notify_delete(self, obj: T) -> None:
        for reg in list(self._handlers):
            self._call(reg.on_delete, obj)


# ---------------------------------------------------------------- factory


class InformerFactory:
    """Shared informers for one clientset, as client-go's SharedInformerFactory: one informer per
    (resource, namespace, selectors), run together in one task group."""

    def __init__(
        self,
        clientset: Clientset,
        *,
        namespace: str = "",
        history: Callable[[HistoryRecord], None] | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.clientset = clientset
        self.namespace = namespace
        self._history = history
        self._backoff = backoff
        self._informers: dict[tuple[str, str, str, str], Informer[Any]] = {}
        self._tg: asyncio.TaskGroup | None = None

    def informer(
        self, resource: str | Kind, *, label_selector: str = "", field_selector: str = ""
    ) -> Informer[Any]:
        """The shared informer for a resource by name ("pods", "po", a Kind)."""
        return self.informer_for(
            self.clientset.resource(resource), label_selector=label_selector, field_selector=field_selector
        )

    def informer_for(
        self, client: ResourceClient[T], *, label_selector: str = "", field_selector: str = ""
    ) -> Informer[T]:
        """The shared informer for a resource client, typed: `factory.informer_for(cs.pods)` is an
        `Informer[pb.Pod]`. A running factory starts a new informer at once."""
        key = (client.resource, self.namespace, label_selector, field_selector)
        inf = self._informers.get(key)
        if inf is None:
            inf = Informer(
                client,
                namespace=self.namespace if client.kind.namespaced else "",
                label_selector=label_selector,
                field_selector=field_selector,
                history=self._history,
                backoff=self._backoff,
            )
            self._informers[key] = inf
            if self._tg is not None:
                self._tg.create_task(inf.run(), name=f"informer-{inf.name}")
        return inf

    def informers(self) -> list[Informer[Any]]:
        return list(self._informers.values())

    def has_synced(self) -> bool:
        return all(i.has_synced() for i in self._informers.values())

    async def wait_for_sync(self) -> None:
        for inf in list(self._informers.values()):
            await inf.wait_for_sync()

    async def wait_for_revision(self, resource_version: str | int) -> None:
        for inf in list(self._informers.values()):
            await inf.wait_for_revision(resource_version)

    async def run(self) -> None:
        """Run every informer (and any created meanwhile) until cancelled."""
        if self._tg is not None:
            raise RuntimeError("informer factory is already running")
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            try:
                for inf in list(self._informers.values()):
                    tg.create_task(inf.run(), name=f"informer-{inf.name}")
                await asyncio.get_running_loop().create_future()  # until cancelled
            finally:
                self._tg = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[InformerFactory]:
        """Run every informer for the duration of the block (see `Informer.running`)."""
        async with background(self.run(), name="informer-factory"):
            yield self
