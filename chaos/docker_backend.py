"""The docker fault backend: faults on the containers of the compose topology (docker-compose.yml).

Targets are compose service names ("scheduler-2", "apiserver", "etcd-1", "nodesim", "workload"); a
target's container is the one labelled `com.docker.compose.service=<target>` in the compose project
(`com.docker.compose.project`), leaving out one-off `docker-compose run` containers. The project is
the one given, else `$KSE_COMPOSE_PROJECT` / `$COMPOSE_PROJECT_NAME`, else that of the container
this process runs in (the `chaos` service), else the only project that has an `apiserver` service.

    kill       POST /containers/{id}/kill?signal=KILL      (a crash: no lease release)
    terminate  POST /containers/{id}/stop?t=GRACE          (SIGTERM, SIGKILL after GRACE; waits)
    pause      POST /containers/{id}/pause                 (cgroup freezer: as SIGSTOP, every thread)
    resume     POST /containers/{id}/unpause
    start      POST /containers/{id}/start, then waits until running and its healthcheck is healthy
    partition  POST /networks/{net}/disconnect for each network the replica shares with the API
               server: its connections to the API server black-hole, as a pulled cable would
    heal       POST /networks/{net}/connect, with the aliases it had

`restart=True` (the default): a scheduler replica is started again ~0.5 s after it stopped, in the
background, as compose's `restart: on-failure` would if Docker applied it to containers stopped
through the API (it does not: a kill or stop through the API marks the container "manually stopped",
moby daemon/kill.go). Other targets (API server, etcd members, ...) are started again before the
call returns, and awaited healthy, as the local backend does with its processes.

Clock skew reaches a replica through the file its `kse scheduler --clock-skew-file` re-reads,
`/var/lib/kse/run/clock-skew-<replica>.json` on the shared volume: written directly when this
process sees the volume (`run_dir`, in the chaos container), else through the Engine's archive API
into the replica's container (from the host).

The Engine API is spoken here directly (HTTP/1.1 over the unix socket, asyncio streams): the calls
needed are a dozen simple ones, the `docker` SDK is synchronous (every call would need a thread)
and would add requests/urllib3 to the image for that alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import re
import socket
import tarfile
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chaos.backend import BackendError
from chaos.local_backend import natural_key, write_clock_skew

__all__ = [
    "DEFAULT_DATA_DIR",
    "DockerBackend",
    "DockerEngine",
    "DockerError",
    "docker_socket_path",
]

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/run/docker.sock"
API_VERSION = "v1.41"  # Docker 20.10 (Debian bookworm's docker.io); later engines still serve it
DEFAULT_DATA_DIR = Path("/var/lib/kse")  # where the compose services mount the shared volume
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
ONEOFF_LABEL = "com.docker.compose.oneoff"
RESTART_DELAY_S = 0.5
ETCD_CLIENT_PORT = 2379
_SCHEDULER = re.compile(r"scheduler-\d+")
_ETCD = re.compile(r"etcd-\d+")
# `kse scheduler` logs this once per start (scheduler/cli.py `serve`), with its election identity.
_IDENTITY_LINE = re.compile(r"scheduler (\S+) starting: ")


class DockerError(BackendError):
    """The Engine refused or failed a call (`status` is the HTTP status, 0 when nothing answered)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def docker_socket_path() -> str:
    """The engine's unix socket: `$DOCKER_HOST` when it is a unix:// URL, else the default."""
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        return host[len("unix://") :]
    if host:
        raise DockerError(f"DOCKER_HOST={host!r}: only unix:// sockets are supported")
    return DEFAULT_SOCKET


# ---------------------------------------------------------------------------------------------- engine


@dataclass(frozen=True)
class _Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class DockerEngine:
    """A minimal asynchronous Docker Engine API client: one HTTP/1.1 request per connection over
    the unix socket (`Connection: close`, so a response ends at EOF or its declared length)."""

    def __init__(self, socket_path: str | None = None, *, timeout: float = 30.0) -> None:
        self.socket_path = socket_path or docker_socket_path()
        self.timeout = timeout

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        raw_body: bytes | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,  # noqa: ASYNC109  (the whole exchange's deadline)
        ok: tuple[int, ...] = (),
    ) -> _Response:
        """Send one request; DockerError unless the status is 2xx or in `ok`."""
        url = f"/{API_VERSION}{path}"
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = raw_body if raw_body is not None else (b"" if body is None else json.dumps(body).encode())
        head = [
            f"{method} {url} HTTP/1.1",
            "Host: docker",
            "Connection: close",
            "User-Agent: kse-chaos",
            f"Content-Length: {len(data)}",
        ]
        if data:
            head.append(f"Content-Type: {content_type}")
        try:
            async with asyncio.timeout(timeout or self.timeout):
                reader, writer = await asyncio.open_unix_connection(self.socket_path)
                try:
                    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
                    await writer.drain()
                    resp = await _read_response(reader)
                finally:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
        except TimeoutError:
            raise DockerError(f"{method} {path}: no answer from {self.socket_path} within "
                              f"{timeout or self.timeout:g}s") from None  # fmt: skip
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            raise DockerError(f"{method} {path}: cannot talk to the Docker engine at "
                              f"{self.socket_path}: {e}") from None  # fmt: skip
        if not (200 <= resp.status < 300 or resp.status in ok):
            try:
                message = str(json.loads(resp.body).get("message", ""))
            except (ValueError, AttributeError):
                message = resp.body[:500].decode(errors="replace")
            raise DockerError(f"{method} {path}: HTTP {resp.status}: {message}", resp.status)
        return resp

    async def ping(self) -> bool:
        """Whether an engine answers on the socket."""
        try:
            await self.request("GET", "/_ping", timeout=5.0)
        except DockerError:
            return False
        return True

    async def containers(self, labels: Mapping[str, str], *, all: bool = True) -> list[dict[str, Any]]:
        """Containers carrying every label (running or not with `all`)."""
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        resp = await self.request(
            "GET", "/containers/json", query={"all": int(all), "filters": json.dumps(filters)}
        )
        return list(resp.json() or [])

    async def inspect(self, container: str) -> dict[str, Any]:
        return dict((await self.request("GET", f"/containers/{container}/json")).json())

    async def logs(self, container: str, *, since: str | None = None, tail: int | None = None) -> str:
        """stdout + stderr of the container (demultiplexed), from `since` (UNIX seconds[.nanos])."""
        resp = await self.request(
            "GET",
            f"/containers/{container}/logs",
            query={"stdout": 1, "stderr": 1, "since": since, "tail": tail if tail is not None else "all"},
        )
        return _demux(resp.body).decode(errors="replace")

    async def put_file(self, container: str, directory: str, name: str, data: bytes) -> None:
        """Write one file into a container's file system (its volumes included): the archive API."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        await self.request(
            "PUT",
            f"/containers/{container}/archive",
            query={"path": directory},
            raw_body=buf.getvalue(),
            content_type="application/x-tar",
        )


async def _read_response(reader: asyncio.StreamReader) -> _Response:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ValueError(f"not an HTTP response: {lines[0]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if status in (204, 304) or 100 <= status < 200:
        return _Response(status, headers, b"")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        return _Response(status, headers, b"".join(chunks))
    if "content-length" in headers:
        return _Response(status, headers, await reader.readexactly(int(headers["content-length"])))
    return _Response(status, headers, await reader.read())


def _demux(data: bytes) -> bytes:
    """The payload of Docker's multiplexed log stream (8-byte frame headers: stream, 0, 0, 0, size)
    for a container without a TTY; data that is not framed so is returned as it is."""
    out: list[bytes] = []
    i = 0
    while i + 8 <= len(data):
        if data[i] not in (0, 1, 2) or data[i + 1 : i + 4] != b"\0\0\0":
            return data if i == 0 else b"".join(out) + data[i:]
        size = int.from_bytes(data[i + 4 : i + 8], "big")
        out.append(data[i + 8 : i + 8 + size])
        i += 8 + size
    return b"".join(out) if i else data


def _since(started_at: str) -> str | None:
    """Docker's `State.StartedAt` (RFC 3339, nanoseconds) as `seconds.nanoseconds` for `since=`."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", started_at)
    if not m or started_at.startswith("0001-"):
        return None
    seconds = int(datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp())
    nanos = (m[2] or "0")[:9].ljust(9, "0")
    return f"{seconds}.{nanos}"


# ---------------------------------------------------------------------------------------------- backend


class DockerBackend:
    """Faults on the containers of one compose project (see the module doc)."""

    name = "docker"

    def __init__(
        self,
        *,
        project: str | None = None,
        pki_dir: Path = DEFAULT_DATA_DIR / "pki",
        run_dir: Path | None = None,
        engine: DockerEngine | None = None,
        grace: float = 10.0,
        ready_timeout: float = 90.0,
        restart_delay: float = RESTART_DELAY_S,
        container_run_dir: str = str(DEFAULT_DATA_DIR / "run"),
    ) -> None:
        self.pki_dir = Path(pki_dir)
        self.run_dir = run_dir
        self.engine = engine or DockerEngine()
        self.grace = grace
        self.ready_timeout = ready_timeout
        self.restart_delay = restart_delay
        self.container_run_dir = container_run_dir
        self._project = (
            project or os.environ.get("KSE_COMPOSE_PROJECT") or os.environ.get("COMPOSE_PROJECT_NAME")
        )
        self._restarts: dict[str, asyncio.Task[None]] = {}
        self._partitions: dict[str, list[tuple[str, list[str]]]] = {}

    @classmethod
    def from_data_dir(cls, data_dir: Path | str = DEFAULT_DATA_DIR, **kwargs: Any) -> DockerBackend:
        """For a process that mounts the shared volume at `data_dir` (the chaos service)."""
        data_dir = Path(data_dir)
        kwargs.setdefault("pki_dir", data_dir / "pki")
        kwargs.setdefault("run_dir", data_dir / "run")
        return cls(**kwargs)

    # -- lookup

    async def project(self) -> str:
        """The compose project whose containers are the targets (found once, see the module doc)."""
        if self._project:
            return self._project
        own = socket.gethostname()
        with contextlib.suppress(DockerError):
            labels = (await self.engine.inspect(own)).get("Config", {}).get("Labels") or {}
            if labels.get(PROJECT_LABEL):
                self._project = str(labels[PROJECT_LABEL])
                return self._project
        found = await self.engine.containers({SERVICE_LABEL: "apiserver"})
        projects = sorted({str(c["Labels"].get(PROJECT_LABEL)) for c in found if c.get("Labels")})
        if len(projects) != 1:
            raise BackendError(
                "cannot tell which compose project to act on: "
                + (f"several have an apiserver ({', '.join(projects)})" if projects else "none is running")
                + "; pass project= or set KSE_COMPOSE_PROJECT"
            )
        self._project = projects[0]
        return self._project

    async def _services(self) -> dict[str, dict[str, Any]]:
        """Service name -> its container (the lowest container number), this project's only."""
        found = await self.engine.containers({PROJECT_LABEL: await self.project()})
        services: dict[str, dict[str, Any]] = {}
        for c in sorted(found, key=lambda c: str(c["Labels"].get("com.docker.compose.container-number", ""))):
            labels = c.get("Labels") or {}
            if str(labels.get(ONEOFF_LABEL, "False")).lower() == "true":
                continue
            service = labels.get(SERVICE_LABEL)
            if service and service not in services:
                services[str(service)] = c
        return services

    async def _container(self, target: str) -> str:
        services = await self._services()
        c = services.get(target)
        if c is None:
            have = ", ".join(sorted(services, key=natural_key)) or "none"
            raise BackendError(
                f"no container for {target!r} in compose project {self._project!r} (have: {have})"
            )
        return str(c["Id"])

    async def replicas(self) -> list[str]:
        return sorted((s for s in await self._services() if _SCHEDULER.fullmatch(s)), key=natural_key)

    async def etcd_members(self) -> list[str]:
        return sorted((s for s in await self._services() if _ETCD.fullmatch(s)), key=natural_key)

    async def identity(self, replica: str) -> str:
        """The election identity the replica's current start logged ("" before it has, or when it
        is not running): `kse scheduler` logs it once per start, and with compose's `hostname:` it is
        `<replica>_<uuid>`, new at every start, as kube-scheduler's."""
        if not _SCHEDULER.fullmatch(replica):
            raise BackendError(f"{replica!r} is not a scheduler replica")
        cid = await self._container(replica)
        state = (await self.engine.inspect(cid)).get("State") or {}
        if not state.get("Running"):
            return ""
        text = await self.engine.logs(cid, since=_since(str(state.get("StartedAt", ""))))
        found = _IDENTITY_LINE.findall(text)
        return str(found[-1]) if found else ""

    async def pid(self, target: str) -> int | None:
        """None: a container's processes have no pid the caller could signal."""
        await self._container(target)
        return None

    async def etcd_leader(self) -> str:
        """The etcd member that is leader now, asked of each member over mTLS (needs the compose
        network: from the chaos container). Not part of the protocol; the nemesis asks if it can."""
        from certs.layout import APISERVER_ETCD_CLIENT, ca_bundle_path, cert_path, key_path
        from kse.etcdclient import EtcdClient, EtcdError, EtcdTLS

        tls = EtcdTLS(
            ca_bundle_path(self.pki_dir),
            cert_path(self.pki_dir, APISERVER_ETCD_CLIENT),
            key_path(self.pki_dir, APISERVER_ETCD_CLIENT),
        )
        problems = []
        for member in await self.etcd_members():
            try:
                client = await EtcdClient.connect(
                    [f"https://{member}:{ETCD_CLIENT_PORT}"], tls=tls, timeout=2.0
                )
            except (EtcdError, OSError) as e:
                problems.append(f"{member}: {e}")
                continue
            try:
                if (await client.status())["is_leader"]:
                    return member
            except EtcdError as e:
                problems.append(f"{member}: {e}")
            finally:
                await client.close()
        raise BackendError("no etcd leader found" + (f" ({'; '.join(problems)})" if problems else ""))

    # -- faults

    async def kill(self, target: str, *, restart: bool = True) -> None:
        cid = await self._container(target)
        self._cancel_restart(target)
        await self.engine.request("POST", f"/containers/{cid}/kill", query={"signal": "KILL"})
        await self._wait_stopped(target, cid)
        await self._after_stop(target, cid, restart)

    async def terminate(self, target: str, *, restart: bool = True) -> None:
        cid = await self._container(target)
        self._cancel_restart(target)
        grace = int(max(1, round(self.grace)))
        await self.engine.request(
            "POST", f"/containers/{cid}/stop", query={"t": grace}, timeout=grace + 30.0, ok=(304,)
        )
        await self._wait_stopped(target, cid)
        await self._after_stop(target, cid, restart)

    async def _after_stop(self, target: str, cid: str, restart: bool) -> None:
        if not restart:
            return
        if _SCHEDULER.fullmatch(target):
            self._restarts[target] = asyncio.create_task(self._restart_later(target, cid))
            return
        await asyncio.sleep(self.restart_delay)
        await self._start(target, cid)

    async def _restart_later(self, target: str, cid: str) -> None:
        await asyncio.sleep(self.restart_delay)
        try:
            await self.engine.request("POST", f"/containers/{cid}/start", ok=(304,))
        except DockerError as e:
            log.error("restarting %s failed: %s", target, e)

    def _cancel_restart(self, target: str) -> None:
        task = self._restarts.pop(target, None)
        if task is not None and not task.done():
            task.cancel()

    async def pause(self, target: str) -> None:
        cid = await self._container(target)
        await self.engine.request("POST", f"/containers/{cid}/pause")

    async def resume(self, target: str) -> None:
        cid = await self._container(target)
        await self.engine.request("POST", f"/containers/{cid}/unpause")

    async def start(self, target: str) -> None:
        cid = await self._container(target)
        self._cancel_restart(target)
        await self._start(target, cid)

    async def _start(self, target: str, cid: str) -> None:
        """Start the container (if it is not running) and wait until it is running and, when it has
        a healthcheck, healthy."""
        await self.engine.request("POST", f"/containers/{cid}/start", ok=(304,))
        deadline = time.monotonic() + self.ready_timeout
        status = "?"
        while time.monotonic() < deadline:
            state = (await self.engine.inspect(cid)).get("State") or {}
            health = (state.get("Health") or {}).get("Status")
            if state.get("Running") and health in (None, "healthy"):
                return
            if not state.get("Running") and not state.get("Restarting") and state.get("Status") == "exited":
                tail = await self.engine.logs(cid, tail=20)
                raise BackendError(
                    f"{target} exited with code {state.get('ExitCode')} after a start:\n{tail}"
                )
            status = f"{state.get('Status')}, health {health}"
            await asyncio.sleep(0.2)
        raise BackendError(f"{target} not ready within {self.ready_timeout:g}s ({status})")

    async def _wait_stopped(self, target: str, cid: str, within: float = 30.0) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not ((await self.engine.inspect(cid)).get("State") or {}).get("Running"):
                return
            await asyncio.sleep(0.02)
        raise BackendError(f"{target} still running {within:g}s after it was stopped")

    async def partition(
        self, replica: str, mode: str = "blackhole", *, delay: float = 0.0, loss: float = 0.0
    ) -> None:
        if mode != "blackhole":
            # Delay and loss would need netem (`tc`, NET_ADMIN) inside the container; the image
            # has neither, so only the black hole (a network disconnect) is offered here.
            raise BackendError(
                f"partition {replica}: mode {mode!r} is not available with the docker backend "
                "(only blackhole, by disconnecting the container from the network); run it locally"
            )
        if replica in self._partitions:
            return
        cid = await self._container(replica)
        api = await self.engine.inspect(await self._container("apiserver"))
        mine = await self.engine.inspect(cid)
        shared = sorted(
            set((mine.get("NetworkSettings") or {}).get("Networks") or {})
            & set((api.get("NetworkSettings") or {}).get("Networks") or {})
        )
        if not shared:
            raise BackendError(f"{replica} shares no network with the API server")
        saved = []
        short_id = cid[:12]
        for net in shared:
            endpoint = mine["NetworkSettings"]["Networks"][net] or {}
            aliases = [a for a in endpoint.get("Aliases") or [] if a != short_id] or [replica]
            await self.engine.request("POST", f"/networks/{net}/disconnect", body={"Container": cid})
            saved.append((net, aliases))
        self._partitions[replica] = saved

    async def heal(self, replica: str) -> None:
        saved = self._partitions.pop(replica, None)
        if not saved:
            return
        cid = await self._container(replica)
        for net, aliases in saved:
            await self.engine.request(
                "POST",
                f"/networks/{net}/connect",
                body={"Container": cid, "EndpointConfig": {"Aliases": aliases}},
            )

    async def set_clock_skew(self, replica: str, offset_s: float, rate: float) -> None:
        if replica not in await self.replicas():
            raise BackendError(f"no replica {replica!r}; have: {', '.join(await self.replicas())}")
        name = f"clock-skew-{replica}.json"
        if self.run_dir is not None and self.run_dir.is_dir():
            write_clock_skew(self.run_dir / name, offset_s, rate)
            return
        if rate <= 0:
            raise BackendError(f"clock rate must be > 0, got {rate!r}")
        data = (json.dumps({"offset_s": float(offset_s), "rate": float(rate)}) + "\n").encode()
        await self.engine.put_file(await self._container(replica), self.container_run_dir, name, data)

    async def aclose(self) -> None:
        """Let pending restarts happen (the deployment is left whole) and heal open partitions."""
        tasks = [t for t in self._restarts.values() if not t.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=self.restart_delay + 30.0)
        self._restarts.clear()
        for replica in list(self._partitions):
            try:
                await self.heal(replica)
            except BackendError as e:
                log.error("healing %s failed: %s", replica, e)
