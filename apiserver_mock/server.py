"""The API server process core: etcd client, watch caches, gRPC server (mTLS, health, reflection).

`APIServer` is used as `async with APIServer(config) as server: ...`: entering connects to etcd,
starts one watch cache per kind and the gRPC server; exiting stops them in reverse order. Health is
NOT_SERVING until every cache has loaded, then SERVING; resource calls made before that wait for the
caches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
import grpc.aio
from cryptography import x509
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from apiserver_mock.audit import AuditLog
from apiserver_mock.auth.authn import Authenticator
from apiserver_mock.auth.authz import Authorizer
from apiserver_mock.fencing import Fencer
from apiserver_mock.flowcontrol import FlowControl, FlowControlConfig
from apiserver_mock.http.server import HTTPFrontDoor
from apiserver_mock.registry import Registry
from apiserver_mock.service import SERVICE, ResourcesService
from apiserver_mock.storage import Store
from apiserver_mock.storage.groupcommit import GroupCommitter
from apiserver_mock.storage.leases import LeaseManager
from apiserver_mock.systemnamespaces import RESYNC_INTERVAL_S, keep_system_namespaces
from apiserver_mock.systemnamespaces import ensure_once as ensure_system_namespaces
from apiserver_mock.watchcache.cache import WatchCache
from certs.source import Credentials, FileCredentialSource
from kse.etcdclient import EtcdClient, EtcdTLS
from kse.gctuning import freeze_now, keep_old_objects_frozen
from kse.objects.kinds import KINDS

SYSTEM_NAMESPACES_TIMEOUT_S = 5.0
log = logging.getLogger(__name__)

MAX_RECEIVE_BYTES = 16 * 1024 * 1024  # so oversized objects reach validation and get a named error
MAX_SEND_BYTES = 256 * 1024 * 1024
CONNECTION_AGE_GRACE_S = 10.0


@dataclass
class ServerConfig:
    etcd_endpoints: list[str]
    tls_cert: Path
    tls_key: Path
    client_ca: Path
    etcd_tls: EtcdTLS | None = None
    prefix: str = "/registry"
    listen: str = "127.0.0.1:0"
    watch_cache_capacity: int = 10_000
    watch_queue_length: int = 1000
    bookmark_interval: float = 1.0
    watch_send_timeout: float = 30.0
    max_connection_age: float = 300.0
    # etcd compaction every this many seconds (apiserver_mock.storage.compactor); 0: none.
    etcd_compaction_interval: float = 300.0
    # Leader fencing (apiserver_mock.fencing): check writes' fence tokens; users whose writes
    # (other than Lease writes) must carry one.
    fencing: bool = True
    require_fence_for: tuple[str, ...] = ()
    # Append one kse.audit.AuditRecord JSON line per write request here (apiserver_mock.audit).
    audit_log: Path | None = None
    audit_log_max_bytes: int = 0  # rotate past this size (--audit-log-maxsize); 0: never
    audit_log_max_backups: int = 0  # rotated files kept (--audit-log-maxbackup); 0: all
    # How often the etcd client looks at --etcd-ca/--etcd-cert/--etcd-key and, when they changed,
    # moves to new channels (kse.etcdclient.client, "Credential reload"); None: read them once.
    etcd_credential_reload_interval: float | None = 1.0
    # The Kubernetes HTTP API (apiserver_mock.http) on this HOST:PORT; None: gRPC only.
    http_listen: str | None = None
    http_max_inflight: int = 400
    # Seconds an Event lives after its last write (kube-apiserver's --event-ttl, 1 h); etcd deletes
    # it through a lease (apiserver_mock.storage.leases). 0: Events live until deleted.
    event_ttl_s: int = 3600
    # Batch txns in flight at once for group-committed writes (binds and creates,
    # apiserver_mock.storage.groupcommit); 0: every write is its own txn.
    group_commit_inflight: int = 2
    # Freeze the watch cache's objects out of full GC collections (kse.gctuning).
    gc_freeze: bool = False
    # The overload gate (apiserver_mock.flowcontrol): API Priority and Fairness by default.
    # HTTP/2 streams one client connection may have open at once (kube-apiserver's
    # --http2-max-streams-per-connection): a client past it waits on its own side, so a flood
    # cannot pile up more calls in the server than it can classify (see the README's overload part).
    http2_max_streams_per_connection: int = 100
    flowcontrol: FlowControlConfig = field(default_factory=FlowControlConfig)
    extra_options: list[tuple[str, Any]] = field(default_factory=list)


# See the server options in `APIServer.start`.
PENDING_CALLS_SOFT_LIMIT = 50_000
PENDING_CALLS_HARD_LIMIT = 100_000


def _stored_count(registry: Registry, resource: str) -> int:
    """How many objects of a resource the watch cache holds (a LIST's seats are sized by it)."""
    return len(registry.cache(registry.kind_for(resource)).objects)


def _cert_config(creds: Credentials) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(creds.key_pem, creds.cert_pem)], root_certificates=creds.ca_pem
    )


def describe_credentials(creds: Credentials) -> str:
    """One log line's worth: the serving cert's serial, issuer and expiry, and the trusted client CAs."""
    try:
        cert = x509.load_pem_x509_certificate(creds.cert_pem)
        cas = x509.load_pem_x509_certificates(creds.ca_pem)
    except ValueError as e:  # pragma: no cover - the source only accepts parsable credentials
        return f"unparsable: {e}"
    trusted = ", ".join(_common_name(c) for c in cas)
    return (
        f"serving cert serial {cert.serial_number:x} from {_common_name(cert, issuer=True)}, expires "
        f"{cert.not_valid_after_utc.isoformat()}; client CAs: {trusted}"
    )


def _common_name(cert: x509.Certificate, *, issuer: bool = False) -> str:
    name = cert.issuer if issuer else cert.subject
    attrs = name.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    value = attrs[0].value if attrs else name.rfc4514_string()
    return value.decode() if isinstance(value, bytes) else value


def server_credentials(source: FileCredentialSource) -> grpc.ServerCredentials:
    """mTLS credentials that re-read the serving pair and the client CA bundle when they change.

    grpc calls the fetcher on every new handshake (on a core thread); `poll()` is a few stats when
    nothing changed. The source's change check covers all three files (stat and content digest of
    cert, key AND bundle), so a CA rotation that only rewrites the bundle is picked up too. Existing
    connections keep the config they were handshaken with until max connection age ends them.
    """
    reported: list[str | None] = [None]  # the last "not reloaded because" logged, to say it once

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        try:
            creds = source.poll()
        except Exception:  # never fail a handshake because of the reload path
            log.exception("reloading TLS credentials failed; keeping the current ones")
            return None
        if creds is None:
            error = source.last_error
            if error is not None and error != reported[0]:
                log.warning(
                    "TLS credential files changed but were not reloaded (%s); keeping the "
                    "current ones until they are consistent",
                    error,
                )
            reported[0] = error
            return None
        reported[0] = None
        log.info(
            "serving TLS credentials reloaded (version %d): %s", creds.version, describe_credentials(creds)
        )
        return _cert_config(creds)

    return grpc.dynamic_ssl_server_credentials(
        _cert_config(source.load()), fetch, require_client_authentication=True
    )


class APIServer:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.etcd: EtcdClient | None = None
        self.caches: dict[str, WatchCache] = {}
        self.server: grpc.aio.Server | None = None
        self.health = health.aio.HealthServicer()
        self.port = 0
        # The server's background tasks (one per watch cache, the progress loop) belong to a
        # TaskGroup entered by start() and exited by stop(), in the task that runs
        # `async with APIServer(...)`: a crash of one tears the server down and is raised from the
        # `async with` instead of leaving a cache silently stale. `_tasks` lets stop() cancel them.
        self._stack: contextlib.AsyncExitStack | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._service: ResourcesService | None = None
        self.audit: AuditLog | None = None
        self.http: HTTPFrontDoor | None = None
        self.group_commit: GroupCommitter | None = None

    @property
    def address(self) -> str:
        host = self.config.listen.rpartition(":")[0] or "127.0.0.1"
        return f"{host}:{self.port}"

    @property
    def http_address(self) -> str | None:
        """HOST:PORT of the Kubernetes HTTP API, or None when it is not served."""
        return self.http.address if self.http is not None else None

    async def __aenter__(self) -> APIServer:
        try:
            await self.start()
        except BaseException:
            await self._stop(0, sys.exc_info())
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop(2.0, (exc_type, exc, tb))

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        assert self._tg is not None, "start() enters the task group first"
        self._tasks.append(self._tg.create_task(coro, name=name))

    async def start(self) -> None:
        """Connect, start the caches and the gRPC server; call stop() from the same task."""
        cfg = self.config
        self._stack = contextlib.AsyncExitStack()
        self._tg = await self._stack.enter_async_context(asyncio.TaskGroup())
        self.etcd = await EtcdClient.connect(
            cfg.etcd_endpoints,
            tls=cfg.etcd_tls,
            credential_reload_interval=cfg.etcd_credential_reload_interval,
        )
        prefix = cfg.prefix.rstrip("/").encode()
        for kind in KINDS:
            self.caches[kind.field] = WatchCache(
                kind,
                self.etcd,
                prefix,
                capacity=cfg.watch_cache_capacity,
                queue_limit=cfg.watch_queue_length,
                bookmark_interval=cfg.bookmark_interval,
            )
        for cache in self.caches.values():
            self._spawn(cache.run(), name=f"watchcache-{cache.kind.resource}")
        if cfg.group_commit_inflight > 0:
            self.group_commit = GroupCommitter(self.etcd, max_inflight=cfg.group_commit_inflight)
        store = Store(self.etcd, group_commit=self.group_commit)
        fencer = Fencer(self.caches["lease"], store, enabled=cfg.fencing, require_for=cfg.require_fence_for)
        registry = Registry(
            store,
            self.caches,
            Authorizer(),
            prefix,
            fencer,
            ttls={"events": cfg.event_ttl_s},
            leases=LeaseManager(self.etcd),
        )
        if cfg.audit_log is not None:
            self.audit = AuditLog(
                cfg.audit_log, max_size_bytes=cfg.audit_log_max_bytes, max_backups=cfg.audit_log_max_backups
            )
        self.flowcontrol = FlowControl(cfg.flowcontrol, list_size=partial(_stored_count, registry))
        self._service = ResourcesService(
            registry,
            Authenticator(),
            send_timeout=cfg.watch_send_timeout,
            audit=self.audit,
            flowcontrol=self.flowcontrol,
        )

        age_ms = int(cfg.max_connection_age * 1000)
        grace_ms = int(min(CONNECTION_AGE_GRACE_S, cfg.max_connection_age) * 1000)
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
            ("grpc.max_send_message_length", MAX_SEND_BYTES),
            ("grpc.max_connection_age_ms", age_ms),
            (
                "grpc.max_connection_age_grace_ms",
                grace_ms,
            ),
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
            ("grpc.so_reuseport", 0),
            # grpc core refuses calls the application has not picked up yet once more than 1000
            # wait (random early detection up to 3000, then all: `pending_backlog_protector_` in
            # grpc's src/core/server/server.h): blind to priority, so a flood got Lease renewals
            # cancelled that way. The backlog is bounded by the stream cap below instead, and what
            # gets in is classified and shed by priority and fairness (apiserver_mock.flowcontrol).
            ("grpc.server.max_pending_requests", PENDING_CALLS_SOFT_LIMIT),
            ("grpc.server.max_pending_requests_hard_limit", PENDING_CALLS_HARD_LIMIT),
            *(
                (("grpc.max_concurrent_streams", cfg.http2_max_streams_per_connection),)
                if cfg.http2_max_streams_per_connection
                else ()
            ),
            # Count streams as HTTP/2 does, not until grpc has freed them ("overload protection",
            # on by default): else a client that keeps within the advertised limit still has calls
            # refused (REFUSED_STREAM), which `kse bench apiserver`'s setup hit at 64 in flight.
            ("grpc.http.overload_protection", 0),
            *cfg.extra_options,
        ]
        server = grpc.aio.server(options=options)
        self.server = server
        server.add_generic_rpc_handlers((self._service.handlers(),))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection((SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.health.set(SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        source = FileCredentialSource(cfg.tls_cert, cfg.tls_key, cfg.client_ca)
        self.port = server.add_secure_port(cfg.listen, server_credentials(source))
        log.info(
            "TLS: %s; reloaded on the first handshake after the files change; connections re-handshake "
            "after %gs (max connection age) + %gs grace",
            describe_credentials(source.load()),
            cfg.max_connection_age,
            min(CONNECTION_AGE_GRACE_S, cfg.max_connection_age),
        )
        if self.port == 0:
            raise OSError(f"cannot listen on {cfg.listen}")
        await server.start()
        if cfg.http_listen is not None:
            door = HTTPFrontDoor(
                self._service,
                cfg.http_listen,
                cfg.tls_cert,
                cfg.tls_key,
                cfg.client_ca,
                max_inflight=cfg.http_max_inflight,
            )
            await door.__aenter__()
            self.http = door
        log.info("listening on %s; loading watch caches", self.address)
        await self._wait_caches()
        self._spawn(self._progress_loop(), name="progress")
        if cfg.etcd_compaction_interval > 0:
            from apiserver_mock.storage.compactor import run_compactor

            assert self.etcd is not None
            self._spawn(run_compactor(self.etcd, cfg.etcd_compaction_interval), name="etcd-compactor")
        # The system namespaces exist before the server reports SERVING (kubectl get ns on a fresh
        # cluster lists them); if etcd fails now, the background loop keeps trying.
        first_wait = RESYNC_INTERVAL_S
        try:
            await asyncio.wait_for(ensure_system_namespaces(self._service), SYSTEM_NAMESPACES_TIMEOUT_S)
        except Exception as e:
            log.warning("system namespaces not created yet: %s", e)
            first_wait = 0.0
        self._spawn(keep_system_namespaces(self._service, first_wait=first_wait), name="system-namespaces")
        if cfg.gc_freeze:
            log.info("watch caches loaded: %d objects frozen out of full collections", freeze_now())
            self._spawn(keep_old_objects_frozen(), name="gc-freeze")
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self.health.set(SERVICE, health_pb2.HealthCheckResponse.SERVING)
        log.info("serving on %s (etcd %s, prefix %s)", self.address, ",".join(cfg.etcd_endpoints), cfg.prefix)
        required = ", ".join(cfg.require_fence_for) or "nobody"
        fencing = f"on (required for {required})" if cfg.fencing else "OFF (fence tokens are ignored)"
        log.info("fencing %s; audit log %s", fencing, cfg.audit_log or "off")

    async def _wait_caches(self) -> None:
        await asyncio.gather(*(c.ready.wait() for c in self.caches.values()))
        assert self._service is not None
        self._service.ready.set()

    async def _progress_loop(self) -> None:
        """Every bookmark interval, ask caches with bookmark-watchers for progress (see WatchCache)."""
        interval = self.config.bookmark_interval
        while True:
            await asyncio.sleep(interval)
            wanting = [c for c in self.caches.values() if c.wants_bookmarks]
            if not wanting:
                continue
            results = await asyncio.gather(*(c.request_progress() for c in wanting), return_exceptions=True)
            for r in results:
                if isinstance(r, Exception):
                    log.debug("progress request failed: %s", r)

    async def stop(self, grace: float = 2.0) -> None:
        """Stop serving, then the caches and etcd (idempotent). Raises, as an ExceptionGroup, what
        a background task crashed with."""
        await self._stop(grace, (None, None, None))

    async def _stop(
        self,
        grace: float,
        exc_info: tuple[type[BaseException] | None, BaseException | None, TracebackType | None],
    ) -> None:
        # exc_info: what is unwinding the `async with`. A cancellation is handed to the TaskGroup,
        # which tells its own (a task crashed: raised as an ExceptionGroup) from one that came from
        # outside (propagated). Any other error stays as itself, not wrapped in an ExceptionGroup.
        if not isinstance(exc_info[1], asyncio.CancelledError):
            exc_info = (None, None, None)
        with contextlib.suppress(Exception):
            await self.health.enter_graceful_shutdown()
        for cache in self.caches.values():
            cache.close_all("the API server is shutting down; resume the watch")
        if self.server is not None:
            await self.server.stop(grace)
            self.server = None
        if self.http is not None:
            door, self.http = self.http, None
            await door.__aexit__(None, None, None)
        # Writes whose callers went away are not the server's handlers: let them end and record.
        if self._service is not None:
            await self._service.finish_writes(grace)
        if self.group_commit is not None:  # after the writes: nothing is left to commit
            await self.group_commit.aclose()
        if self.audit is not None:  # after the server: in-flight writes have recorded themselves
            self.audit.close()
            self.audit = None
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        stack, self._stack, self._tg = self._stack, None, None
        try:
            if stack is not None:
                await stack.__aexit__(*exc_info)  # the TaskGroup: waits for the cancelled tasks
        finally:
            if self.etcd is not None:
                await self.etcd.close()
                self.etcd = None
