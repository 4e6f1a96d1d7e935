"""Our etcd v3 client: a thin layer over etcd's generated stubs on our own `grpc.aio` channels.

Why our own (DEPENDENCIES.md): every Python etcd client fails one of the storage layer's needs
(watch resume without loss, compaction as an error, several endpoints, mTLS, large messages).

Shape, chosen for the API server's hot path (every bind is a txn):

* one channel per endpoint, its stub methods bound once; a call is one request message and one
  `await` on the current endpoint, with grpc's own deadline (no wrapper tasks, no `wait_for`);
* the client talks to one endpoint at a time and moves to the next only when that one fails.

Retries (the rule clientv3 follows, `client/v3/retry.go`):

* **Reads and other idempotent calls** (range, get, status, compact) are retried on UNAVAILABLE on the
  next endpoint, with a short backoff once every endpoint has failed, until `timeout` has passed since
  the call started; then `EtcdUnavailableError`. A stream the transport lost counts as UNAVAILABLE
  (grpc-core reports some as UNKNOWN "No status received" or INTERNAL "RST_STREAM":
  `kse.etcdclient.retry`); that is what a member being SIGTERMed or SIGKILLed produces.
* **Writes** (put, delete, txn) are retried only on failures that prove they were not applied: grpc
  never had a connection to send them on ("failed to connect to all addresses": refused, unreachable,
  TLS handshake failed), or etcd refused them before proposing ("no leader", "raft proposal dropped",
  "too many requests"); each is justified from etcd's source in `kse.etcdclient.retry`. Once a write
  may have reached raft, a failure (stream lost, deadline, "server stopped", "request timed out")
  moves the client off that member and raises `EtcdOutcomeUnknownError`, a subclass of
  `EtcdUnavailableError`: the write may have been applied, or may still be, and only the caller knows
  how to check (re-read the key; a CAS txn then tells: apiserver_mock/storage/store.py does). A blind
  retry could apply a txn twice, or make it fail against its own first write.
* **Staying put.** The client moves off a member only when a call to it fails (and only the first
  of the concurrent failures moves it); it never moves back on its own, so a restarted member rejoins
  without traffic thrashing between members.
* Cancelling a call (the caller's task, a timeout around it) cancels the RPC; for a write that
  leaves the outcome unknown, exactly like EtcdOutcomeUnknownError.
* Compaction surfaces as `CompactedError`, never as an empty result.

Watches: see `kse.etcdclient.watch`.

Credential reload (`credential_reload_interval`, used by the API server): with a client pair, the
client looks at its cert, key and CA bundle files every interval (kse.etcdclient.credentials; three
`stat`s when nothing changed). When they changed to a consistent new set it builds a new channel
per endpoint and swaps the endpoint table in one step on the loop thread, so every call started
after that uses the new credentials. The old channels are retired as the API-server clients retire
theirs (kse.client.credentials.retire_channel): each closes once the unary calls in flight on it
have finished (they end within `timeout`, their deadline), and watch streams still open on it end
and resume on the new channel from the last revision they delivered. No request fails because of
a rotation. A failure seen on a retired endpoint is never taken as that member failing (no
failover).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

import grpc

from kse.etcdclient import _proto as pb
from kse.etcdclient.credentials import EtcdCredentialSource, static_credentials
from kse.etcdclient.errors import (
    CompactedError,
    EtcdClosedError,
    EtcdError,
    EtcdOutcomeUnknownError,
    EtcdUnavailableError,
    FutureRevisionError,
)
from kse.etcdclient.model import (
    Compare,
    EtcdTLS,
    KeyValue,
    Op,
    RangeResult,
    TxnResult,
    range_result_from_pb,
    txn_response_from_pb,
)
from kse.etcdclient.retry import not_applied, transient
from kse.etcdclient.watch import Watch, _being_cancelled, progress_request_is_ordered
from kse.tasks import TaskSet

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES: Final = 64 * 2**20
DEFAULT_TIMEOUT: Final = 5.0

# Indexes into _Endpoint.calls.
_RANGE, _PUT, _DELETE, _TXN, _COMPACT, _STATUS, _LEASE_GRANT = range(7)
_METHOD_NAMES: Final = ("Range", "Put", "DeleteRange", "Txn", "Compact", "Status", "LeaseGrant")

_BACKOFF_START: Final = 0.025
_BACKOFF_MAX: Final = 0.5


def _channel_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    return [
        # Large ranges and catch-up watch responses (etcd sends up to 2 GiB, grpc's default cap is 4 MiB).
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # Our retry rules are etcd-specific (see module doc); grpc's transparent retries buffer every
        # request for nothing.
        ("grpc.enable_retries", 0),
        ("grpc.enable_http_proxy", 0),
        # A restarted member is found within ~1 s instead of grpc's default backoff (up to 120 s).
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        # Detect a dead peer under a long-lived watch. etcd's --grpc-keepalive-min-time defaults to
        # 5 s and it tolerates pings only while a stream is open (permit_without_calls off).
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def _channel(
    target: str, credentials: grpc.ChannelCredentials | None, options: Sequence[tuple[str, Any]]
) -> grpc.aio.Channel:
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=list(options))
    return grpc.aio.secure_channel(target, credentials, options=list(options))


def _parse_endpoint(endpoint: str, tls: EtcdTLS | None) -> tuple[str, str]:
    """'http://h:p', 'https://h:p' or 'h:p' -> (URL as shown in errors, grpc target 'h:p')."""
    if "://" in endpoint:
        parts = urlsplit(endpoint)
        scheme, hostport = parts.scheme, parts.netloc
        if scheme not in ("http", "https") or not hostport or parts.path not in ("", "/"):
            raise ValueError(
                f"etcd endpoint {endpoint!r}: expected http://HOST:PORT, https://HOST:PORT or HOST:PORT"
            )
        if scheme == "https" and tls is None:
            raise ValueError(f"etcd endpoint {endpoint!r} is https but no tls=EtcdTLS(...) was given")
        if scheme == "http" and tls is not None:
            raise ValueError(f"etcd endpoint {endpoint!r} is http but tls was given")
    else:
        hostport = endpoint
    if not hostport.rpartition(":")[2].isdigit():
        raise ValueError(f"etcd endpoint {endpoint!r} has no port")
    return f"{'https' if tls else 'http'}://{hostport}", hostport


class _Endpoint:
    """One etcd member: its channel and the stub methods bound to it."""

    __slots__ = ("calls", "channel", "index", "target", "url", "version", "watch")

    def __init__(self, index: int, url: str, target: str, channel: grpc.aio.Channel) -> None:
        self.index = index
        self.url = url
        self.target = target
        self.channel = channel
        kv = pb.KVStub(channel)
        maintenance = pb.MaintenanceStub(channel)
        self.calls: tuple[Any, ...] = (
            kv.Range,
            kv.Put,
            kv.DeleteRange,
            kv.Txn,
            kv.Compact,
            maintenance.Status,
            pb.LeaseStub(channel).LeaseGrant,
        )
        self.watch: Any = pb.WatchStub(channel).Watch
        self.version: str | None = None  # etcd server version, learned from Status


class EtcdClient:
    """An etcd v3 client over one or more endpoints (members of one cluster).

    Make one with `await EtcdClient.connect(...)`, share it (it is safe for any number of concurrent
    calls and watches in one event loop), and close it with `await client.close()` or `async with`.
    """

    def __init__(
        self,
        endpoints: list[_Endpoint],
        *,
        timeout: float,
        watch_reconnect_timeout: float | None,
        options: Sequence[tuple[str, Any]] = (),
        credentials: EtcdCredentialSource | None = None,
        credential_reload_interval: float | None = None,
    ) -> None:
        self._endpoints = endpoints
        self._current = 0
        self._timeout = timeout
        self._watch_reconnect_timeout = watch_reconnect_timeout
        self._watches: weakref.WeakSet[Watch] = weakref.WeakSet()
        self._closed = False
        self._options = list(options)
        self._credentials = credentials
        self._reload_interval = credential_reload_interval
        # The reload loop and the retirement of swapped-out channels; close() ends them.
        self._tasks = TaskSet("etcd-client", logger=log)
        self._retiring: dict[asyncio.Task[None], grpc.aio.Channel] = {}
        self.credential_swaps = 0
        """How many times new credentials were swapped in (for logs, metrics and tests)."""
        self.retired_channels = 0
        """Old channels closed after a swap."""

    @classmethod
    async def connect(
        cls,
        endpoints: Sequence[str],
        *,
        tls: EtcdTLS | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109  (every call's deadline, not just connect's)
        watch_reconnect_timeout: float | None = None,
        credential_reload_interval: float | None = None,
    ) -> EtcdClient:
        """Open a channel per endpoint and check that at least one member answers within `timeout`.

        `timeout` is also every call's deadline, retries included. `watch_reconnect_timeout`: how long
        a watch keeps trying to re-create a broken stream before raising EtcdUnavailableError (None:
        for ever, like clientv3; the watch still ends when it or the client is closed).
        `credential_reload_interval`: with `tls` holding a client pair, look at its files this often
        and move to new channels when they change (see the module doc); None: read them once.
        Raises EtcdUnavailableError when no endpoint answers.
        """
        if isinstance(endpoints, str):
            raise TypeError("endpoints is a sequence of strings, not one string")
        if not endpoints:
            raise ValueError("no etcd endpoints given")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if credential_reload_interval is not None and credential_reload_interval <= 0:
            raise ValueError(f"credential_reload_interval must be > 0, got {credential_reload_interval}")
        source: EtcdCredentialSource | None = None
        credentials = None
        if tls is not None:
            if credential_reload_interval is not None and tls.cert_file is not None:
                source = EtcdCredentialSource(tls)
                credentials = source.channel_credentials()
            else:
                credentials = static_credentials(tls)
        options = _channel_options(max_message_bytes)
        if source is not None:
            # Each generation of channels gets its own connections: grpc could otherwise share a
            # subchannel (a TLS connection handshaken with the old pair) between channels.
            options.append(("grpc.use_local_subchannel_pool", 1))
        eps: list[_Endpoint] = []
        for index, endpoint in enumerate(endpoints):
            url, target = _parse_endpoint(endpoint, tls)
            eps.append(_Endpoint(index, url, target, _channel(target, credentials, options)))
        client = cls(
            eps,
            timeout=timeout,
            watch_reconnect_timeout=watch_reconnect_timeout,
            options=options,
            credentials=source,
            credential_reload_interval=credential_reload_interval,
        )
        try:
            await client._probe(timeout)
        except BaseException:
            await client.close()
            raise
        if source is not None:
            client._tasks.spawn(client._reload_loop(), name="etcd-credential-reload")
        return client

    # ------------------------------------------------------------------ credential reload

    @property
    def credentials_version(self) -> int | None:
        """The version of the credentials in use (1 at start, +1 per accepted change); None when the
        client does not follow its files."""
        return None if self._credentials is None else self._credentials.credentials.version

    def reload_credentials(self) -> bool:
        """Look at the credential files now; on a consistent change, move to new channels (see the
        module doc). Returns whether it swapped. Call it on the client's event loop."""
        if self._closed or self._credentials is None:
            return False
        creds = self._credentials.poll()
        if creds is None:
            return False
        credentials = self._credentials.channel_credentials()
        old = self._endpoints
        new: list[_Endpoint] = []
        for ep in old:
            fresh = _Endpoint(ep.index, ep.url, ep.target, _channel(ep.target, credentials, self._options))
            fresh.version = ep.version
            new.append(fresh)
        self._endpoints = new  # one assignment: every call from here on starts on the new channels
        self.credential_swaps += 1
        log.info(
            "etcd client TLS credentials reloaded (version %d): new channels to %s; the old ones close "
            "once their in-flight calls are done",
            creds.version,
            ", ".join(ep.url for ep in new),
        )
        for ep in old:
            task = self._tasks.spawn(self._retire(ep.channel), name=f"etcd-retire-{ep.url}")
            self._retiring[task] = ep.channel  # closed by close() if it is cut short
            task.add_done_callback(self._retired)
        return True

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.pop(task, None)

    def _is_retired(self, ep: _Endpoint) -> bool:
        """Whether `ep` belongs to an endpoint table replaced by a credential swap."""
        return self._endpoints[ep.index] is not ep

    async def _retire(self, channel: grpc.aio.Channel) -> None:
        from kse.client.credentials import retire_channel

        # Every call's deadline is `timeout` (retries included), so this never cuts one short.
        await retire_channel(channel, self._timeout + 1.0)
        self.retired_channels += 1

    async def _reload_loop(self) -> None:
        assert self._reload_interval is not None and self._credentials is not None
        reported: str | None = None
        while not self._closed:
            await asyncio.sleep(self._reload_interval)
            try:
                self.reload_credentials()
            except Exception as e:  # keep following the files whatever one look did
                log.error("reloading the etcd client credentials failed: %r", e)
                continue
            error = self._credentials.last_error
            if error is not None and error != reported:
                log.warning("etcd client TLS files changed but were not reloaded yet: %s", error)
            reported = error

    async def _probe(self, budget: float) -> None:
        """Status every endpoint (in parallel) until one answers; it becomes the current one."""
        deadline = time.monotonic() + budget
        backoff = _BACKOFF_START
        while True:
            attempt = max(0.05, min(deadline - time.monotonic(), 1.0))
            results = await asyncio.gather(
                *(self._status_once(ep, attempt) for ep in self._endpoints), return_exceptions=True
            )
            for ep, result in zip(self._endpoints, results, strict=True):
                if not isinstance(result, BaseException):
                    self._current = ep.index
                    return
            for result in results:
                if not isinstance(result, grpc.aio.AioRpcError):
                    raise result
            now = time.monotonic()
            if now + backoff >= deadline:
                errors = "; ".join(
                    f"{ep.url}: {r.code().name}: {r.details()}"
                    for ep, r in zip(self._endpoints, results, strict=True)
                    if isinstance(r, grpc.aio.AioRpcError)
                )
                raise EtcdUnavailableError(f"no etcd endpoint answered within {budget:g} s ({errors})")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX)

    async def _status_once(self, ep: _Endpoint, budget: float) -> Any:
        resp = await ep.calls[_STATUS](pb.StatusRequest(), timeout=budget)
        ep.version = resp.version
        return resp

    async def _endpoint_version(self, ep: _Endpoint) -> str | None:
        """The server version of `ep`, asking it once if unknown (None if it does not answer)."""
        if ep.version is None:
            try:
                await self._status_once(ep, min(self._timeout, 2.0))
            except grpc.aio.AioRpcError:
                return None
        return ep.version

    # ------------------------------------------------------------------ properties

    @property
    def endpoints(self) -> list[str]:
        """The endpoint URLs, in the order given."""
        return [ep.url for ep in self._endpoints]

    @property
    def current_endpoint(self) -> str:
        """The endpoint calls go to now (it changes when that member fails)."""
        return self._endpoints[self._current].url

    @property
    def timeout(self) -> float:
        return self._timeout

    @property
    def server_versions(self) -> dict[str, str | None]:
        """The etcd version of each endpoint as last seen (None: not asked yet or never answered)."""
        return {ep.url: ep.version for ep in self._endpoints}

    @property
    def progress_request_supported(self) -> bool:
        """Whether `request_progress()` yields safe bookmarks: every member seen runs etcd >= 3.5.8
        (or 3.4.25). Otherwise it is a no-op; see `kse.etcdclient.watch`."""
        versions = [ep.version for ep in self._endpoints if ep.version is not None]
        return bool(versions) and all(progress_request_is_ordered(v) for v in versions)

    # ------------------------------------------------------------------ calls

    async def _unary(self, method: int, request: Any, idempotent: bool) -> Any:
        """Send `request` to the current endpoint; on failure, retry by the rules in the module doc."""
        if self._closed:
            raise EtcdClosedError("etcd client is closed")
        ep = self._endpoints[self._current]
        start = time.monotonic()
        try:
            return await ep.calls[method](request, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            return await self._retry(method, request, idempotent, start, ep, err)
        except asyncio.CancelledError:
            self._raise_if_closed()
            raise

    def _raise_if_closed(self) -> None:
        # grpc surfaces "channel closed under an in-flight call" as CancelledError in the caller.
        if self._closed and not _being_cancelled():
            raise EtcdClosedError("etcd client closed during the call") from None

    async def _retry(
        self,
        method: int,
        request: Any,
        idempotent: bool,
        start: float,
        ep: _Endpoint,
        err: grpc.aio.AioRpcError,
    ) -> Any:
        deadline = start + self._timeout
        backoff = _BACKOFF_START
        attempts = 1
        while True:
            self._check_retriable(method, request, idempotent, ep, err)
            ep = self._failover(ep)
            now = time.monotonic()
            if now < deadline and attempts % len(self._endpoints) == 0:
                # Every endpoint failed in a row: give the members (and grpc's reconnect) a moment.
                await asyncio.sleep(min(backoff, deadline - now))
                backoff = min(backoff * 2, _BACKOFF_MAX)
                ep = self._endpoints[self._current]
                now = time.monotonic()
            if now >= deadline:
                raise EtcdUnavailableError(
                    f"etcd {_METHOD_NAMES[method]}: no endpoint answered within {self._timeout:g} s "
                    f"(last: {ep.url}: {err.code().name}: {err.details()})",
                    code=err.code().name,
                    endpoint=ep.url,
                ) from err
            attempts += 1
            try:
                return await ep.calls[method](request, timeout=deadline - now)
            except grpc.aio.AioRpcError as e:
                err = e
            except asyncio.CancelledError:
                self._raise_if_closed()
                raise

    def _check_retriable(
        self, method: int, request: Any, idempotent: bool, ep: _Endpoint, err: grpc.aio.AioRpcError
    ) -> None:
        """Return if `err` may be retried on another endpoint; else raise what the caller gets."""
        code = err.code()
        name = _METHOD_NAMES[method]
        if not_applied(err):
            return
        lost = transient(err)
        if idempotent and lost:
            return
        if lost or code == grpc.StatusCode.DEADLINE_EXCEEDED:
            if idempotent:
                raise EtcdUnavailableError(
                    f"etcd {name}: no answer from {ep.url} within {self._timeout:g} s ({err.details()})",
                    code=code.name,
                    endpoint=ep.url,
                ) from err
            # The member failed under a write: move off it now, so that whatever the caller does to
            # find out the outcome (a read-back, a CAS re-issue) goes to a member that answers.
            self._failover(ep)
            raise EtcdOutcomeUnknownError(
                f"etcd {name} sent to {ep.url} got no answer ({code.name}: {err.details()}); "
                "it may or may not have been applied: re-read before retrying",
                code=code.name,
                endpoint=ep.url,
            ) from err
        if code == grpc.StatusCode.CANCELLED and self._closed:
            raise EtcdClosedError(
                "etcd client closed during the call", code=code.name, endpoint=ep.url
            ) from err
        details = err.details() or ""
        if code == grpc.StatusCode.OUT_OF_RANGE:
            requested = int(getattr(request, "revision", 0))
            if "compacted" in details:
                raise CompactedError(0, requested, endpoint=ep.url) from err
            if "future revision" in details:
                raise FutureRevisionError(requested, endpoint=ep.url) from err
        raise EtcdError(
            f"etcd {name} failed: {code.name}: {details}", code=code.name, endpoint=ep.url
        ) from err

    def _failover(self, failed: _Endpoint) -> _Endpoint:
        """Move off `failed` (unless another caller already did, or `failed` was retired by a
        credential swap: then its failure says nothing about the member) to the next endpoint that
        is not known to be down; return the endpoint to use next."""
        eps = self._endpoints
        if len(eps) == 1 or self._current != failed.index or self._is_retired(failed):
            return eps[self._current]
        chosen = eps[(failed.index + 1) % len(eps)]
        for offset in range(1, len(eps)):
            candidate = eps[(failed.index + offset) % len(eps)]
            if candidate.channel.get_state(try_to_connect=True) != grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                chosen = candidate
                break
        self._current = chosen.index
        log.info("etcd client: %s failed, switching to %s", failed.url, chosen.url)
        return chosen

    # ------------------------------------------------------------------ KV

    async def get(self, key: bytes) -> tuple[KeyValue | None, int]:
        """One key (None if absent) and the store revision the read reflects. Linearizable."""
        resp = await self._unary(_RANGE, pb.RangeRequest(key=key), True)
        kvs = resp.kvs
        if not kvs:
            return None, resp.header.revision
        kv = kvs[0]
        return KeyValue(
            kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease
        ), resp.header.revision

    async def range(
        self,
        key: bytes,
        range_end: bytes | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
    ) -> RangeResult:
        """Keys in [key, range_end) (only `key` when range_end is None) sorted by key, as of
        `revision` (0: latest). `limit` caps the keys returned (`more` says whether it cut);
        `count` is always the full count. Raises CompactedError if `revision` was compacted."""
        request = pb.RangeRequest(
            key=key,
            range_end=range_end or b"",
            revision=revision,
            limit=limit,
            keys_only=keys_only,
            count_only=count_only,
        )
        try:
            resp = await self._unary(_RANGE, request, True)
        except CompactedError as err:
            compacted = await self._compact_revision()
            raise CompactedError(compacted, revision, endpoint=err.endpoint) from err.__cause__
        return range_result_from_pb(resp)

    async def put(self, key: bytes, value: bytes, *, repeatable: bool = False) -> int:
        """Write `key`; returns the revision of the write. Not retried once sent (see module doc),
        unless the caller says applying it twice is harmless (`repeatable`, e.g. a progress marker
        whose only use is its revision): then it is retried like a read."""
        resp = await self._unary(_PUT, pb.PutRequest(key=key, value=value), repeatable)
        return int(resp.header.revision)

    async def grant_lease(self, ttl_s: int) -> tuple[int, int]:
        """A new etcd lease of `ttl_s` seconds: (its ID, the TTL etcd granted). Keys put with it
        are deleted by etcd when it expires. Retried like a read: a grant sent twice leaves one
        lease nobody uses, which expires by itself."""
        resp = await self._unary(_LEASE_GRANT, pb.LeaseGrantRequest(TTL=ttl_s), True)
        if resp.error:
            raise EtcdError(f"etcd LeaseGrant: {resp.error}")
        return int(resp.ID), int(resp.TTL)

    async def delete(self, key: bytes, *, range_end: bytes | None = None) -> int:
        """Delete `key` (or [key, range_end)); returns the store revision after it (a new revision only
        if something was deleted). Not retried once sent."""
        resp = await self._unary(_DELETE, pb.DeleteRangeRequest(key=key, range_end=range_end or b""), False)
        return int(resp.header.revision)

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        """If every compare holds, run `success`, else `failure`, atomically, as one revision.

        Not retried once sent: on EtcdOutcomeUnknownError, re-read and decide.
        """
        request = pb.TxnRequest(
            compare=[c.pb for c in compare],
            success=[op.pb for op in success],
            failure=[op.pb for op in failure],
        )
        resp = await self._unary(_TXN, request, False)
        return TxnResult(
            resp.succeeded, resp.header.revision, txn_response_from_pb(resp) if resp.responses else []
        )

    async def compact(self, revision: int, physical: bool = True) -> None:
        """Drop history before `revision`. With `physical`, return once the space is reclaimed.

        Compacting to exactly the revision already compacted to succeeds (so a retried compaction
        that had applied is not an error); an older revision raises CompactedError.
        """
        try:
            await self._unary(_COMPACT, pb.CompactionRequest(revision=revision, physical=physical), True)
        except CompactedError as err:
            compacted = await self._compact_revision()
            if compacted == revision:
                return
            raise CompactedError(compacted, revision, endpoint=err.endpoint) from err.__cause__

    async def _compact_revision(self) -> int:
        """etcd's current compaction point, called once a compaction is known to have happened
        (0 if it cannot be found out).

        etcd's range error does not say it; a watch from revision 1 (older than any compaction) is
        canceled with it within one watch sync pass (100 ms). One short-lived stream, on this error
        path only.
        """
        ep = self._endpoints[self._current]
        call = ep.watch()
        try:
            await call.write(
                pb.WatchRequest(
                    create_request=pb.WatchCreateRequest(key=b"\x00kse-compaction-probe", start_revision=1)
                )
            )
            async with asyncio.timeout(min(self._timeout, 2.0)):
                while True:
                    resp = await call.read()
                    if resp is grpc.aio.EOF:
                        return 0
                    if resp.canceled:
                        return int(resp.compact_revision)
        except (grpc.aio.AioRpcError, TimeoutError):
            return 0
        finally:
            call.cancel()

    # ------------------------------------------------------------------ watch

    def watch(
        self,
        key: bytes,
        range_end: bytes | None = None,
        *,
        start_revision: int,
        prev_kv: bool = True,
        progress_notify: bool = True,
    ) -> Watch:
        """Watch [key, range_end) (only `key` when range_end is None) from `start_revision` (0: from
        the current revision + 1). Iterate the result for `WatchBatch`es; see `Watch`."""
        if self._closed:
            raise EtcdClosedError("etcd client is closed")
        w = Watch(self, key, range_end, start_revision, prev_kv, progress_notify)
        self._watches.add(w)
        return w

    async def request_progress(self) -> None:
        """Ask every open watch's stream for a progress notification (etcd WatchProgressRequest).

        The answer arrives as a `WatchBatch(progress=True)` on each watch that etcd considers synced.
        A no-op on members older than 3.5.8, whose answers are not safe bookmarks
        (`progress_request_supported`).
        """
        for w in list(self._watches):
            await w.request_progress()

    # ------------------------------------------------------------------ maintenance

    async def status(self, endpoint: str | None = None) -> dict[str, Any]:
        """Status of the current member, or of `endpoint` (one of `endpoints`, no failover then):
        version, leader, raft term/index, revision, db size, member id, errors."""
        if endpoint is None:
            resp = await self._unary(_STATUS, pb.StatusRequest(), True)
            ep = self._endpoints[self._current]
        else:
            ep = self._endpoint_named(endpoint)
            try:
                resp = await self._status_once(ep, self._timeout)
            except grpc.aio.AioRpcError as err:
                raise EtcdUnavailableError(
                    f"etcd Status: {ep.url}: {err.code().name}: {err.details()}",
                    code=err.code().name,
                    endpoint=ep.url,
                ) from err
        ep.version = resp.version
        return {
            "endpoint": ep.url,
            "version": resp.version,
            "cluster_id": resp.header.cluster_id,
            "member_id": resp.header.member_id,
            "leader": resp.leader,
            "is_leader": resp.leader != 0 and resp.leader == resp.header.member_id,
            "raft_term": resp.raftTerm,
            "raft_index": resp.raftIndex,
            "raft_applied_index": resp.raftAppliedIndex,
            "revision": resp.header.revision,
            "db_size": resp.dbSize,
            "db_size_in_use": resp.dbSizeInUse,
            "is_learner": resp.isLearner,
            "errors": list(resp.errors),
        }

    def _endpoint_named(self, endpoint: str) -> _Endpoint:
        """The member `endpoint` names (its URL or its host:port); ValueError for a stranger."""
        for e in self._endpoints:
            if endpoint in (e.url, e.target):
                return e
        raise ValueError(f"{endpoint!r} is not one of this client's endpoints {self.endpoints}")

    async def defragment(self, endpoint: str, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Defragment one member (`endpoint`, no failover): it rewrites its database without the
        pages compaction freed, blocking its own reads and writes meanwhile (seconds per 100 MB),
        so defragment members one at a time. EtcdUnavailableError when it fails."""
        ep = self._endpoint_named(endpoint)
        try:
            await pb.MaintenanceStub(ep.channel).Defragment(pb.DefragmentRequest(), timeout=timeout)
        except grpc.aio.AioRpcError as err:
            raise EtcdUnavailableError(
                f"etcd Defragment: {ep.url}: {err.code().name}: {err.details()}",
                code=err.code().name,
                endpoint=ep.url,
            ) from err

    # ------------------------------------------------------------------ lifetime

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Close every watch and channel; in-flight calls fail with EtcdClosedError."""
        if self._closed:
            return
        self._closed = True
        retiring = dict(self._retiring)
        await self._tasks.aclose()
        for w in list(self._watches):
            w.close_nowait()
        channels = [*retiring.values(), *(ep.channel for ep in self._endpoints)]
        await asyncio.gather(*(ch.close() for ch in channels), return_exceptions=True)

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<EtcdClient {self.endpoints} current={self.current_endpoint} closed={self._closed}>"
