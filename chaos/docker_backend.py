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

The Engine API is spoken through `aiodocker` (aio-libs' asyncio client, on aiohttp, which kse
uses for HTTP anyway); `DockerEngine` is the small face of it this backend needs: the dozen calls
above, a deadline on each, and the Engine's refusals as `DockerError` (a `BackendError`) naming the
call. The `docker` SDK was not an option: it is synchronous (every call would need a thread) and
would add requests/urllib3 to the image.
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
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
from aiodocker.networks import DockerNetwork

from chaos.backend import BackendError
from chaos.local_backend import natural_key, write_clock_skew
from kse.tasks import TaskSet

__all__ = [
    "DEFAULT_DATA_DIR",
    "DockerBackend",
    "DockerEngine",
    "DockerError",
    "docker_socket_path",
]

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/run/docker.sock"
_NO_ANSWER = 900  # aiodocker's status for "could not connect"
API_VERSION = "v1.41"  # Docker 20.10 (Debian bookworm's docker.io); later engines still serve it
DEFAULT_DATA_DIR = Path("/var/lib/kse")  # where the compose services mount the shared volume
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
ONEOFF_LABEL = "com.docker.compose.oneoff"
RESTART_DELAY_S = 0.5
ETCD_CLIENT_PORT = 2379
_SCHEDULER = re.compile(r"scheduler-\d+")
_CONTROLLER_MANAGER = re.compile(r"controller-manager-\d+")
_ETCD = re.compile(r"etcd-\d+")
# `kse scheduler` logs this once per start (scheduler/cli.py `serve`), with its election identity.
_IDENTITY_LINE = re.compile(r"scheduler (\S+) starting: ")
_CM_IDENTITY_LINE = re.compile(r"controller-manager (\S+) starting: ")


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


class DockerEngine:
    """The Engine calls the backend makes, over one `aiodocker.Docker` client (opened at the first
    call, closed by `aclose`). Each call has a deadline (`timeout`, or the call's own) and raises
    DockerError, with the Engine's HTTP status (0: nothing answered), when it fails."""

    def __init__(self, socket_path: str | None = None, *, timeout: float = 30.0) -> None:
        self.socket_path = socket_path or docker_socket_path()
        self.timeout = timeout
        self._client: aiodocker.Docker | None = None

    def _new_client(self) -> aiodocker.Docker:
        # The API version pinned: "auto" would ask /version before the first call.
        return aiodocker.Docker(url=f"unix://{self.socket_path}", api_version=API_VERSION)

    @contextlib.asynccontextmanager
    async def _call(self, what: str, within: float | None = None) -> AsyncIterator[aiodocker.Docker]:
        """The client, inside `what`'s deadline (`within`, default `timeout`), with aiodocker's
        errors turned into DockerError."""
        if self._client is None:
            self._client = self._new_client()
        within = within or self.timeout
        try:
            async with asyncio.timeout(within):
                yield self._client
        except TimeoutError:
            raise DockerError(f"{what}: no answer from {self.socket_path} within {within:g}s") from None
        except aiodocker.DockerError as e:
            if e.status == _NO_ANSWER:
                raise DockerError(f"{what}: cannot talk to the Docker engine at {self.socket_path}: "
                                  f"{e.message}") from None  # fmt: skip
            raise DockerError(f"{what}: HTTP {e.status}: {_engine_message(e.message)}", e.status) from None
        except (OSError, aiohttp.ClientError, ValueError) as e:
            raise DockerError(
                f"{what}: cannot talk to the Docker engine at {self.socket_path}: {e}"
            ) from None

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def ping(self) -> bool:
        """Whether an engine answers on the socket (its own short-lived client: a probe)."""
        client = self._new_client()
        try:
            async with asyncio.timeout(5.0):
                await client.version()
        except (TimeoutError, OSError, aiohttp.ClientError, aiodocker.DockerError):
            return False
        finally:
            await client.close()
        return True

    async def containers(self, labels: Mapping[str, str], *, all: bool = True) -> list[dict[str, Any]]:
        """Containers carrying every label (running or not with `all`): their Id and Labels."""
        filters = json.dumps({"label": [f"{k}={v}" for k, v in labels.items()]})
        async with self._call("GET /containers/json") as docker:
            found = await docker.containers.list(all=all, filters=filters)
        return [{"Id": c.id, "Labels": (c["Labels"] if "Labels" in c else None) or {}} for c in found]

    async def inspect(self, container: str) -> dict[str, Any]:
        async with self._call(f"GET /containers/{container}/json") as docker:
            return await docker.containers.container(container).show()

    async def logs(self, container: str, *, since: str | None = None, tail: int | None = None) -> str:
        """stdout + stderr of the container (aiodocker demultiplexes them), from `since` (UNIX
        seconds[.nanos])."""
        query: dict[str, Any] = {"tail": tail if tail is not None else "all"}
        if since is not None:
            query["since"] = since
        async with self._call(f"GET /containers/{container}/logs") as docker:
            lines = await docker.containers.container(container).log(stdout=True, stderr=True, **query)
        return "".join(lines)

    async def kill(self, container: str, signal: str = "KILL") -> None:
        async with self._call(f"POST /containers/{container}/kill") as docker:
            await docker.containers.container(container).kill(signal=signal)

    async def stop(self, container: str, grace: int) -> None:
        """SIGTERM, SIGKILL after `grace` seconds; returns once it stopped (or was not running:
        the Engine's 304 is no error)."""
        async with self._call(f"POST /containers/{container}/stop", grace + 30.0) as docker:
            await docker.containers.container(container).stop(t=grace)

    async def start(self, container: str) -> None:
        """Start it (a 304, already running, is no error)."""
        async with self._call(f"POST /containers/{container}/start") as docker:
            await docker.containers.container(container).start()

    async def pause(self, container: str) -> None:
        async with self._call(f"POST /containers/{container}/pause") as docker:
            await docker.containers.container(container).pause()

    async def unpause(self, container: str) -> None:
        async with self._call(f"POST /containers/{container}/unpause") as docker:
            await docker.containers.container(container).unpause()

    async def disconnect(self, network: str, container: str) -> None:
        async with self._call(f"POST /networks/{network}/disconnect") as docker:
            await DockerNetwork(docker, network).disconnect({"Container": container})

    async def connect(self, network: str, container: str, aliases: list[str]) -> None:
        config = {"Container": container, "EndpointConfig": {"Aliases": aliases}}
        async with self._call(f"POST /networks/{network}/connect") as docker:
            await DockerNetwork(docker, network).connect(config)

    async def put_file(self, container: str, directory: str, name: str, data: bytes) -> None:
        """Write one file into a container's file system (its volumes included): the archive API."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        async with self._call(f"PUT /containers/{container}/archive") as docker:
            await docker.containers.container(container).put_archive(directory, buf.getvalue())


def _engine_message(text: str) -> str:
    """The Engine's error message; aiodocker unwraps its ``{"message": ...}`` only when the reply's
    content type is exactly ``application/json``."""
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(text).get("message", text))
    return text


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
        self._restarts: dict[str, asyncio.Task[None]] = {}  # by target, to cancel one
        self._restart_tasks = TaskSet("docker-restarts", logger=log)
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

    async def controller_managers(self) -> list[str]:
        """The controller-manager services (not part of the protocol: the nemesis asks if it can)."""
        services = await self._services()
        return sorted((s for s in services if _CONTROLLER_MANAGER.fullmatch(s)), key=natural_key)

    async def identity(self, replica: str) -> str:
        """The election identity the replica's current start logged ("" before it has, or when it
        is not running): `kse scheduler` logs it once per start, and with compose's `hostname:` it is
        `<replica>_<uuid>`, new at every start, as kube-scheduler's."""
        cm = _CONTROLLER_MANAGER.fullmatch(replica) is not None
        if not (cm or _SCHEDULER.fullmatch(replica)):
            raise BackendError(f"{replica!r} is not a scheduler or controller-manager replica")
        cid = await self._container(replica)
        state = (await self.engine.inspect(cid)).get("State") or {}
        if not state.get("Running"):
            return ""
        text = await self.engine.logs(cid, since=_since(str(state.get("StartedAt", ""))))
        found = (_CM_IDENTITY_LINE if cm else _IDENTITY_LINE).findall(text)
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
        await self.engine.kill(cid, "KILL")
        await self._wait_stopped(target, cid)
        await self._after_stop(target, cid, restart)

    async def terminate(self, target: str, *, restart: bool = True) -> None:
        cid = await self._container(target)
        self._cancel_restart(target)
        grace = int(max(1, round(self.grace)))
        await self.engine.stop(cid, grace)
        await self._wait_stopped(target, cid)
        await self._after_stop(target, cid, restart)

    async def _after_stop(self, target: str, cid: str, restart: bool) -> None:
        if not restart:
            return
        if _SCHEDULER.fullmatch(target) or _CONTROLLER_MANAGER.fullmatch(target):
            self._restarts[target] = self._restart_tasks.spawn(
                self._restart_later(target, cid), name=f"restart-{target}"
            )
            return
        await asyncio.sleep(self.restart_delay)
        await self._start(target, cid)

    async def _restart_later(self, target: str, cid: str) -> None:
        await asyncio.sleep(self.restart_delay)
        try:
            await self.engine.start(cid)
        except DockerError as e:
            log.error("restarting %s failed: %s", target, e)

    def _cancel_restart(self, target: str) -> None:
        task = self._restarts.pop(target, None)
        if task is not None and not task.done():
            task.cancel()

    async def pause(self, target: str) -> None:
        cid = await self._container(target)
        await self.engine.pause(cid)

    async def resume(self, target: str) -> None:
        cid = await self._container(target)
        await self.engine.unpause(cid)

    async def start(self, target: str) -> None:
        cid = await self._container(target)
        self._cancel_restart(target)
        await self._start(target, cid)

    async def _start(self, target: str, cid: str) -> None:
        """Start the container (if it is not running) and wait until it is running and, when it has
        a healthcheck, healthy."""
        await self.engine.start(cid)
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
            await self.engine.disconnect(net, cid)
            saved.append((net, aliases))
        self._partitions[replica] = saved

    async def heal(self, replica: str) -> None:
        saved = self._partitions.pop(replica, None)
        if not saved:
            return
        cid = await self._container(replica)
        for net, aliases in saved:
            await self.engine.connect(net, cid, aliases)

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
        await self._restart_tasks.aclose(grace=self.restart_delay + 30.0)
        self._restarts.clear()
        for replica in list(self._partitions):
            try:
                await self.heal(replica)
            except BackendError as e:
                log.error("healing %s failed: %s", replica, e)
        await self.engine.aclose()
