"""The typed client: one `Clientset`, one resource client per served kind, over gRPC.

    cs = Clientset(channel_source, qps=50, burst=100)
    pod = await cs.pods.get("default", "nginx")          # -> pb.Pod
    page = await cs.pods.list("default", label_selector="app=web")
    async with cs.pods.watch("default", resource_version=page.resource_version) as w:
        async for event in w: ...                       # WatchEvent[pb.Pod]
    await cs.pods.bind(binding, fence=token)
    node = await cs.nodes.get("node-1")                 # cluster-scoped: no namespace argument

The resource clients are generated from the kinds table (`kse.objects.kinds.KINDS`): every kind gets
the same generic verbs, namespaced kinds take a namespace, and the pods client adds the `binding`
and `eviction` subresources. Nothing here is written once per kind.

As client-go does:
* every unary call first takes a token from the client rate limiter (watch streams do not);
* errors are typed (`kse.client.errors`), keeping the gRPC code and the server's message;
* requests are counted per (verb, resource, code) for metrics (`RequestMetrics`);
* idempotent reads (get, list) are retried on UNAVAILABLE with exponential backoff until a
  deadline; writes are never retried blindly (a write whose answer was lost may have landed).

Certificate rotation: the clientset never holds a channel. It asks `channel_source.current()` for
every request and every new watch, so a credential reloader can build a new channel, swap it in and
close the old one. A watch stream whose channel is closed under it ends with `UnavailableError`
(code CANCELLED), which the reflector treats like any dropped stream: it re-watches from the last
revision it delivered, on the new channel.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar, cast

import grpc
from google.protobuf.message import Message

from kse.client.batcher import CallBatcher, bind_kind, create_kind
from kse.client.errors import (
    ApiError,
    TooManyRequestsError,
    UnavailableError,
    channel_closed_error,
    from_rpc_error,
    is_channel_close,
    is_refused_stream,
    revision_from_metadata,
)
from kse.client.ratelimit import RateLimiter, TokenBucketRateLimiter
from kse.objects.kinds import KINDS, Kind, lookup_resource, wrap
from kse.objects.meta import key_of as key_of  # re-export: callers of the client use it
from kse.objects.meta import object_key as object_key
from proto import kse_pb2 as pb
from proto import kse_pb2_grpc as pb_grpc

T = TypeVar("T", bound=Message)

DEFAULT_USER_AGENT = "kse-client/0.1"
USER_AGENT_METADATA_KEY = "x-kse-user-agent"

# Watch event types, as Kubernetes names them.
ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"


# ---------------------------------------------------------------- channels


class ChannelSource(Protocol):
    """Yields the channel to use *now*; a credential reloader swaps what it returns."""

    def current(self) -> grpc.aio.Channel: ...


class StaticChannelSource:
    """A channel source that always yields the same channel (no rotation)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel

    def current(self) -> grpc.aio.Channel:
        return self._channel


# ---------------------------------------------------------------- retries and metrics


@dataclass(frozen=True)
class RetryPolicy:
    """Retry of idempotent reads on UNAVAILABLE: exponential backoff with jitter, within `deadline`."""

    deadline: float = 30.0
    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    factor: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int) -> float:
        base = min(self.max_backoff, self.initial_backoff * self.factor**attempt)
        return base * (1.0 + self.jitter * random.random())


NO_RETRY = RetryPolicy(deadline=0.0)
# Requests the server shed (RESOURCE_EXHAUSTED with a retry-after) are sent again this many times.
MAX_SHED_RETRIES = 10


@dataclass
class RequestMetrics:
    """Requests per (verb, resource, code), and their summed latency (client-go's rest_client_*).

    `verb` is the Kubernetes verb (get, list, watch, create, update, delete); `resource` includes
    the subresource as the API server's metrics name it ("pods/status", "pods/binding"); `code` is
    the gRPC code name ("OK", "NOT_FOUND", ...). Each retry attempt counts as a request.
    """

    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    latency_seconds: defaultdict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    observers: list[Callable[[str, str, str, float], None]] = field(default_factory=list)

    def observe(self, verb: str, resource: str, code: str, seconds: float) -> None:
        self.requests[(verb, resource, code)] += 1
        self.latency_seconds[(verb, resource)] += seconds
        for observer in self.observers:
            observer(verb, resource, code, seconds)

    def count(self, verb: str | None = None, resource: str | None = None, code: str | None = None) -> int:
        """Requests matching every given label."""
        return sum(
            n
            for (v, r, c), n in self.requests.items()
            if (verb is None or v == verb)
            and (resource is None or r == resource)
            and (code is None or c == code)
        )


# ---------------------------------------------------------------- typed results


@dataclass(frozen=True)
class ListResult(Generic[T]):
    """A typed list: the items and the revision the list reflects (resume a watch from it)."""

    items: list[T]
    resource_version: str
    continue_token: str = ""
    remaining_item_count: int | None = None


@dataclass(frozen=True)
class WatchEvent(Generic[T]):
    """One watch event. For BOOKMARK, `object` is None and `resource_version` is safe to resume from."""

    type: str
    object: T | None
    resource_version: str


class WatchStream(Generic[T]):
    """One server watch stream: an async context manager and an async iterator of events.

    Iterating yields `WatchEvent[T]` one by one; `next_batch()` yields the server's batches (all
    events of one revision travel together). The stream ends (StopAsyncIteration / None) when the
    server ends it; a transport failure raises a typed error, a closed channel `UnavailableError`.
    Leaving the `async with` block (or `close()`) cancels the call.
    """

    def __init__(self, client: ResourceClient[T], request: pb.WatchRequest) -> None:
        self._client = client
        self._request = request
        self._call: Any = None
        self._done = False
        self._started_at = 0.0

    @property
    def request(self) -> pb.WatchRequest:
        return self._request

    def _start(self) -> None:
        if self._call is None:
            self._started_at = asyncio.get_running_loop().time()
            try:
                self._call = self._client._clientset._stub().Watch(
                    self._request, metadata=self._client._clientset._metadata
                )
            except grpc.aio.UsageError:
                # The source handed out a channel that has been closed since (a swap raced us).
                self._done = True
                raise channel_closed_error() from None

    async def __aenter__(self) -> WatchStream[T]:
        self._start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._call is not None and not self._done:
            self._call.cancel()
        self._done = True

    def _finish(self, code: str) -> None:
        if not self._done:
            self._done = True
            elapsed = asyncio.get_running_loop().time() - self._started_at
            self._client._clientset.metrics.observe("watch", self._client.resource, code, elapsed)

    async def next_batch(self) -> list[WatchEvent[T]] | None:
        """The next batch of events, or None when the server ended the stream."""
        if self._done:
            return None
        self._start()
        try:
            message = await self._call.read()
        except grpc.aio.AioRpcError as e:
            err = from_rpc_error(e)
            self._finish(err.code_name)
            raise err from e
        except asyncio.CancelledError as e:
            if not is_channel_close(e):
                self.close()
                raise
            closed = channel_closed_error()
            self._finish(closed.code_name)
            raise closed from None
        if message is grpc.aio.EOF:
            self._finish("OK")
            return None
        return [self._client._event(ev) for ev in message.events]

    def __aiter__(self) -> AsyncIterator[WatchEvent[T]]:
        return self._events()

    async def _events(self) -> AsyncIterator[WatchEvent[T]]:
        while True:
            batch = await self.next_batch()
            if batch is None:
                return
            for event in batch:
                yield event


# ---------------------------------------------------------------- resource clients


class ResourceClient(Generic[T]):
    """The verbs every kind has. `get_in`/`delete_in` take a namespace for every kind (generic code
    uses them); the scoped subclasses add `get`/`delete` with the natural signature."""

    def __init__(self, clientset: Clientset, kind: Kind) -> None:
        self._clientset = clientset
        self.kind = kind
        self.resource = kind.resource

    # -- conversions

    def _unwrap(self, obj: pb.Object) -> T:
        which = obj.WhichOneof("kind")
        if which != self.kind.field:
            raise ApiError(f"server returned a {which or 'empty'} object for resource {self.resource}")
        return cast(T, getattr(obj, self.kind.field))

    def _event(self, ev: pb.WatchEvent) -> WatchEvent[T]:
        obj = self._unwrap(ev.object) if ev.HasField("object") and ev.object.WhichOneof("kind") else None
        return WatchEvent(ev.type, obj, ev.resource_version)

    def _check_namespace(self, namespace: str) -> None:
        if namespace and not self.kind.namespaced:
            raise ValueError(f"{self.resource} are cluster-scoped: no namespace (got {namespace!r})")

    # -- reads

    async def get_in(self, namespace: str, name: str) -> T:
        self._check_namespace(namespace)
        req = pb.GetRequest(resource=self.resource, namespace=namespace, name=name)
        obj = await self._clientset._unary("get", self.resource, "Get", req, idempotent=True)
        return self._unwrap(obj)

    async def list(
        self,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> ListResult[T]:
        """One List call ("" namespace: all namespaces). With `limit`, follow `continue_token`."""
        self._check_namespace(namespace)
        req = pb.ListRequest(
            resource=self.resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            limit=limit,
            **{"continue": continue_token},
        )
        out = await self._clientset._unary("list", self.resource, "List", req, idempotent=True)
        meta = out.metadata
        return ListResult(
            items=[self._unwrap(o) for o in out.items],
            resource_version=meta.resource_version,
            continue_token=getattr(meta, "continue"),
            remaining_item_count=meta.remaining_item_count if meta.HasField("remaining_item_count") else None,
        )

    async def list_all(
        self,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = 500,
    ) -> ListResult[T]:
        """Every item, fetched in pages of `page_size` (0: one call). The server pins the first page's
        revision in the continue token, so all pages show the same consistent state; a GoneError
        means that revision was compacted meanwhile (start again, or list without pages)."""
        if page_size <= 0:
            return await self.list(namespace, label_selector=label_selector, field_selector=field_selector)
        items: list[T] = []
        token = ""
        first_rv = ""
        while True:
            page = await self.list(
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            items.extend(page.items)
            first_rv = first_rv or page.resource_version
            token = page.continue_token
            if not token:
                return ListResult(items=items, resource_version=first_rv)

    def watch(
        self,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str = "",
        allow_watch_bookmarks: bool = True,
        send_initial_events: bool = False,
        timeout_seconds: int = 0,
    ) -> WatchStream[T]:
        """A watch of events strictly after `resource_version` ("": from now). Not rate limited."""
        self._check_namespace(namespace)
        req = pb.WatchRequest(
            resource=self.resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            allow_watch_bookmarks=allow_watch_bookmarks,
            send_initial_events=send_initial_events,
            timeout_seconds=timeout_seconds,
        )
        return WatchStream(self, req)

    # -- writes (never retried)

    async def _write(
        self, verb: str, label: str, method: str, obj: T, fence: pb.FenceToken | None, dry_run: bool
    ) -> T:
        req = _write_request(obj, fence, dry_run)
        out = await self._clientset._unary(verb, label, method, req, idempotent=False)
        return self._unwrap(out)

    async def create(self, obj: T, *, fence: pb.FenceToken | None = None, dry_run: bool = False) -> T:
        batcher = None if dry_run else self._clientset.create_batcher(self.resource)
        if batcher is None:
            return await self._write("create", self.resource, "Create", obj, fence, dry_run)
        # Coalesced with the other creates of this resource in flight (kse.client.batcher).
        req = _write_request(obj, fence, dry_run=False)
        await self._clientset.rate_limiter.acquire()  # one token per create, as a unary call takes
        return self._unwrap(await batcher.send(req))

    async def update(self, obj: T, *, fence: pb.FenceToken | None = None, dry_run: bool = False) -> T:
        """Replace the object; `metadata.resource_version` is the precondition (ConflictError if stale)."""
        return await self._write("update", self.resource, "Update", obj, fence, dry_run)

    async def update_status(self, obj: T, *, fence: pb.FenceToken | None = None, dry_run: bool = False) -> T:
        """Write only `.status` (the status subresource)."""
        return await self._write("update", f"{self.resource}/status", "UpdateStatus", obj, fence, dry_run)

    async def delete_in(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str = "",
        uid: str = "",
        fence: pb.FenceToken | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> T:
        """Delete; returns the object as deleted (its resourceVersion is the deleting revision).

        A scheduled, running pod is deleted gracefully (`grace_period_seconds`, else its
        terminationGracePeriodSeconds): the answer is the pod with its deletionTimestamp set, and
        it goes when its kubelet has stopped it. `grace_period_seconds=0` removes it at once."""
        self._check_namespace(namespace)
        req = pb.DeleteRequest(
            resource=self.resource, namespace=namespace, name=name, resource_version=resource_version, uid=uid
        )
        if grace_period_seconds is not None:
            req.grace_period_seconds = grace_period_seconds
        req.dry_run = dry_run  # every check, nothing written (DeleteOptions.dryRun=All)
        if fence is not None:
            req.fence.CopyFrom(fence)
        out = await self._clientset._unary("delete", self.resource, "Delete", req, idempotent=False)
        return self._unwrap(out)


class NamespacedResourceClient(ResourceClient[T]):
    """A namespaced kind: `get(namespace, name)`, `delete(namespace, name)`."""

    async def get(self, namespace: str, name: str) -> T:
        return await self.get_in(namespace, name)

    async def delete(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str = "",
        uid: str = "",
        fence: pb.FenceToken | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> T:
        return await self.delete_in(
            namespace,
            name,
            resource_version=resource_version,
            uid=uid,
            fence=fence,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
        )


class ClusterResourceClient(ResourceClient[T]):
    """A cluster-scoped kind: `get(name)`, `delete(name)`."""

    async def get(self, name: str) -> T:
        return await self.get_in("", name)

    async def delete(
        self,
        name: str,
        *,
        resource_version: str = "",
        uid: str = "",
        fence: pb.FenceToken | None = None,
        grace_period_seconds: int | None = None,
    ) -> T:
        return await self.delete_in(
            "",
            name,
            resource_version=resource_version,
            uid=uid,
            fence=fence,
            grace_period_seconds=grace_period_seconds,
        )


def _write_request(obj: Message, fence: pb.FenceToken | None, dry_run: bool) -> pb.WriteRequest:
    req = pb.WriteRequest(object=wrap(obj), dry_run=dry_run)
    if fence is not None:
        req.fence.CopyFrom(fence)
    return req


class PodsClient(NamespacedResourceClient[pb.Pod]):
    """Pods, plus the binding and eviction subresources."""

    async def bind(self, binding: pb.Binding, fence: pb.FenceToken | None = None) -> pb.Pod:
        """pods/binding: place the pod (`binding.metadata` names it; its uid/resourceVersion, when
        set, are preconditions). Returns the bound pod. ConflictError if already bound or stale."""
        req = pb.BindRequest(binding=binding)
        if fence is not None:
            req.fence.CopyFrom(fence)
        cs = self._clientset
        if cs.bind_batcher is None:
            out = await cs._unary("create", "pods/binding", "Bind", req, idempotent=False)
        else:  # coalesced with the other binds in flight (kse.client.batcher); one token per bind
            await cs.rate_limiter.acquire()
            out = await cs.bind_batcher.send(req)
        return self._unwrap(out)

    async def evict(
        self,
        namespace: str,
        name: str,
        fence: pb.FenceToken | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str = "",
        resource_version: str = "",
        dry_run: bool = False,
    ) -> pb.Pod:
        """pods/eviction: delete the pod if its PodDisruptionBudget allows; returns it as deleted
        (or terminating, for a graceful delete). TooManyRequestsError (RESOURCE_EXHAUSTED) when
        the budget does not allow it now."""
        req = pb.EvictRequest(
            namespace=namespace, name=name, uid=uid, resource_version=resource_version, dry_run=dry_run
        )
        if grace_period_seconds is not None:
            req.grace_period_seconds = grace_period_seconds
        if fence is not None:
            req.fence.CopyFrom(fence)
        out = await self._clientset._unary("create", "pods/eviction", "Evict", req, idempotent=False)
        return self._unwrap(out)


# Kinds whose client adds subresources; every other kind gets the generic scoped client.
_SPECIAL_CLIENTS: dict[str, type[ResourceClient[Any]]] = {"pods": PodsClient}


def attribute_name(kind: Kind) -> str:
    """The clientset attribute of a kind: the snake_case plural of its oneof field ("priority_classes")."""
    f = kind.field
    if f.endswith(("s", "x", "ch", "sh")):
        return f + "es"
    if f.endswith("y") and f[-2:-1] not in "aeiou":
        return f[:-1] + "ies"
    return f + "s"


def _client_class(kind: Kind) -> type[ResourceClient[Any]]:
    special = _SPECIAL_CLIENTS.get(kind.resource)
    if special is not None:
        return special
    return NamespacedResourceClient if kind.namespaced else ClusterResourceClient


# ---------------------------------------------------------------- the clientset


class Clientset:
    """Typed access to every served kind (see the module doc)."""

    # One attribute per row of KINDS, set in __init__ from the table; the annotations are for typing.
    pods: PodsClient
    nodes: ClusterResourceClient[pb.Node]
    leases: NamespacedResourceClient[pb.Lease]
    events: NamespacedResourceClient[pb.Event]
    priority_classes: ClusterResourceClient[pb.PriorityClass]
    namespaces: ClusterResourceClient[pb.Namespace]
    services: NamespacedResourceClient[pb.Service]
    replica_sets: NamespacedResourceClient[pb.ReplicaSet]
    deployments: NamespacedResourceClient[pb.Deployment]
    daemon_sets: NamespacedResourceClient[pb.DaemonSet]
    pod_disruption_budgets: NamespacedResourceClient[pb.PodDisruptionBudget]

    def __init__(
        self,
        channel_source: ChannelSource | grpc.aio.Channel,
        *,
        qps: float = 50.0,
        burst: int = 100,
        user_agent: str = DEFAULT_USER_AGENT,
        rate_limiter: RateLimiter | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy = RetryPolicy(),
        metrics: RequestMetrics | None = None,
        batch_binds: bool = True,
        batch_creates: bool = False,
    ) -> None:
        """`batch_binds`: binds in flight at once go as one BindBatch call (kse.client.batcher);
        False: one Bind call per pod. `batch_creates`: creates of one resource in flight at once
        (not dry runs) go as one CreateBatch call; off by default, for a client that creates many
        objects at once and wants the throughput (the scheduler's event recorder, the benchmarks'
        pod creators): the overload gate admits a batch as one request."""
        if isinstance(channel_source, grpc.aio.Channel):
            channel_source = StaticChannelSource(channel_source)
        self.channel_source: ChannelSource = channel_source
        self.rate_limiter: RateLimiter = rate_limiter or TokenBucketRateLimiter(qps, burst)
        self.user_agent = user_agent
        self.timeout = timeout
        self.retry = retry
        self.metrics = metrics or RequestMetrics()
        # The highest `x-kse-revision` seen in any response: the client's causal floor.
        self.observed_revision = 0
        self._metadata = ((USER_AGENT_METADATA_KEY, user_agent),)
        self._stub_channel: grpc.aio.Channel | None = None
        self._stub_cache: pb_grpc.ResourcesStub | None = None
        self.bind_batcher: CallBatcher | None = CallBatcher(self, bind_kind()) if batch_binds else None
        self.batch_creates = batch_creates
        self._create_batchers: dict[str, CallBatcher] = {}
        self._clients: dict[str, ResourceClient[Any]] = {}
        for kind in KINDS:
            client = _client_class(kind)(self, kind)
            self._clients[kind.resource] = client
            setattr(self, attribute_name(kind), client)

    def create_batcher(self, resource: str) -> CallBatcher | None:
        """The batcher of `resource`'s creates; None unless the clientset batches creates."""
        if not self.batch_creates:
            return None
        batcher = self._create_batchers.get(resource)
        if batcher is None:
            batcher = self._create_batchers[resource] = CallBatcher(self, create_kind(resource))
        return batcher

    def resource(self, name: str | Kind) -> ResourceClient[Any]:
        """The client for a kind, by Kind or by any name kubectl accepts ("po", "pods", "Pod")."""
        kind = name if isinstance(name, Kind) else lookup_resource(name)
        return self._clients[kind.resource]

    def clients(self) -> dict[str, ResourceClient[Any]]:
        """Every resource client, by plural resource name."""
        return dict(self._clients)

    def _stub(self) -> pb_grpc.ResourcesStub:
        channel = self.channel_source.current()
        if channel is not self._stub_channel or self._stub_cache is None:
            self._stub_cache = pb_grpc.ResourcesStub(channel)
            self._stub_channel = channel
        return self._stub_cache

    def _note_revision(self, revision: str) -> None:
        if revision.isdigit():
            self.observed_revision = max(self.observed_revision, int(revision))

    async def _unary(
        self,
        verb: str,
        resource: str,
        method: str,
        request: Message,
        *,
        idempotent: bool,
        limited: bool = True,
        observed: bool = True,
    ) -> Any:
        """One rate-limited unary call with typed errors, metrics and (for reads) retries.
        `limited=False`: the caller took its rate-limiter tokens itself; `observed=False`: the
        caller records the request metrics itself (a batch of binds: one request per bind)."""
        loop = asyncio.get_running_loop()
        retry = self.retry if idempotent else NO_RETRY
        began = loop.time()
        deadline = began + retry.deadline
        attempt = 0
        shed = 0
        while True:
            if limited:
                await self.rate_limiter.acquire()
            timeout = self.timeout
            if idempotent and retry.deadline > 0:
                timeout = max(0.001, min(timeout, deadline - loop.time()))
            start = loop.time()
            cause: BaseException
            try:
                call = getattr(self._stub(), method)(request, timeout=timeout, metadata=self._metadata)
                response = await call
            except grpc.aio.AioRpcError as e:
                err, cause = from_rpc_error(e), e
            except grpc.aio.UsageError as e:
                # The source handed out a channel that has been closed since (a swap raced us).
                err, cause = channel_closed_error(), e
            except asyncio.CancelledError as e:
                if not is_channel_close(e):
                    raise
                err, cause = channel_closed_error(), e
            else:
                if observed:
                    self.metrics.observe(verb, resource, "OK", loop.time() - start)
                try:
                    self._note_revision(revision_from_metadata(await call.trailing_metadata()))
                except Exception:  # pragma: no cover - the revision is advisory
                    pass
                return response
            if observed:
                self.metrics.observe(verb, resource, err.code_name, loop.time() - start)
            self._note_revision(err.revision)
            if isinstance(err, TooManyRequestsError) and err.retry_after > 0 and shed < MAX_SHED_RETRIES:
                # Shed by the server's overload gate before it ran: any verb may go again, after
                # the Retry-After it named (client-go's rest client, maxRetries 10).
                shed += 1
                await asyncio.sleep(err.retry_after * (1.0 + retry.jitter * random.random()))
                continue
            if isinstance(err, UnavailableError) and (idempotent or is_refused_stream(err)):
                # A refused stream never reached the server: a write may go again too, within the
                # read retry policy's deadline.
                delay = self.retry.delay(attempt)
                if loop.time() + delay < began + self.retry.deadline:
                    attempt += 1
                    await asyncio.sleep(delay)
                    continue
            if isinstance(cause, asyncio.CancelledError | grpc.aio.UsageError):
                raise err from None
            raise err from cause
