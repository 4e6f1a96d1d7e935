"""The compose topology for real: build the image, `docker-compose up`, see pods scheduled and a
leader elected, kill the leader's container through the chaos docker backend, see a new leader, tear
everything down. Also the backend's other faults, cheaply, on a standby (pause, partition, clock skew).

Skipped, with the reason, only when no Docker engine answers or no compose is installed; a failing
image build or a cluster that does not come up is a failure. The API server's port is published on
an ephemeral loopback port and read from the host with the admin identity copied out of the volume;
so is the Kubernetes HTTP API, which the real kubectl reads with the kubeconfig the certs service
wrote (copied out with pki/, as the README says; skipped where kubectl is not installed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from chaos.docker_backend import DockerBackend, DockerEngine
from kse.client.channel import secure_channel
from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError
from kse.config import ConnectionFile
from tests.fixtures.kube import find_kubectl

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("KSE_IMAGE", "kse:latest")
# Small and fast: a 4 s lease so a failover takes seconds, few nodes and pods (2 cores shared with
# the rest of the suite).
COMPOSE_ENV = {
    "KSE_IMAGE": IMAGE,
    "KSE_API_ADDR": "127.0.0.1:",  # "127.0.0.1::6443": an ephemeral port on loopback
    "KSE_HTTP_ADDR": "127.0.0.1:",  # the Kubernetes HTTP API's, likewise
    "KSE_NODES": "5",
    "KSE_RATE": "2",
    "KSE_LEASE_DURATION": "4s",
    "KSE_RENEW_DEADLINE": "3s",
    "KSE_RETRY_PERIOD": "1s",
}
T = TypeVar("T")


def _compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


def _engine_answers() -> bool:
    try:
        return asyncio.run(DockerEngine().ping())
    except Exception:
        return False


def _run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    out = subprocess.run(
        argv,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if out.returncode != 0:
        raise AssertionError(
            f"`{' '.join(argv)}` failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    return out.stdout


async def _until(
    what: str, probe: Callable[[], Awaitable[T | None]], within: float, every: float = 0.25
) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + within
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = await probe()
        except (ApiError, OSError) as e:  # the API server may be restarting
            last = e
            value = None
        if value:
            return value
        await asyncio.sleep(every)
    raise AssertionError(f"{what}: not within {within:g}s" + (f" (last error: {last})" if last else ""))


@pytest.fixture(scope="module")
def compose() -> Iterator[tuple[list[str], str]]:
    """The image built, the project up; (compose command with -p, project) for the tests; down -v after."""
    cmd = _compose_command()
    if not _engine_answers():
        pytest.skip(f"no Docker engine answers on {DockerEngine().socket_path} (is dockerd running?)")
    if cmd is None:
        pytest.skip("neither docker-compose nor `docker compose` is installed")
    t0 = time.monotonic()
    _run(["make", "image"], env={"IMAGE": IMAGE}, timeout=600)
    built = time.monotonic() - t0
    project = f"ksesmoke{uuid.uuid4().hex[:8]}"
    base = [*cmd, "-p", project]
    try:
        t1 = time.monotonic()
        _run([*base, "up", "-d"], env=COMPOSE_ENV, timeout=300)
        print(f"\n[smoke] make image {built:.1f}s, compose up {time.monotonic() - t1:.1f}s")
        yield base, project
    finally:
        env = {**os.environ, **COMPOSE_ENV}
        with contextlib.suppress(Exception):
            logs = subprocess.run(
                [*base, "logs", "--no-color", "--tail", "15"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
            ).stdout  # fmt: skip
            print(f"[smoke] last log lines:\n{logs}")
        subprocess.run(
            [*base, "down", "-v", "--remove-orphans", "-t", "5"],
            cwd=ROOT, env=env, capture_output=True, timeout=300, check=False,
        )  # fmt: skip


@pytest.fixture
def admin(compose: tuple[list[str], str], tmp_path: Path) -> ConnectionFile:
    """The admin identity copied out of the volume, pointed at the API server's published port."""
    base, _ = compose
    address = _run([*base, "port", "apiserver", "6443"], env=COMPOSE_ENV).strip()
    cid = _run([*base, "ps", "-q", "apiserver"], env=COMPOSE_ENV).strip()
    _run(["docker", "cp", f"{cid}:/var/lib/kse/pki/.", str(tmp_path / "pki")])
    pki = tmp_path / "pki"
    return ConnectionFile.for_identity(
        address, pki / "admin.crt", pki / "admin.key", pki / "ca-bundle.crt", tls_server_name="apiserver"
    )


async def test_compose_up_schedules_elects_and_fails_over_through_the_docker_backend(
    compose: tuple[list[str], str], admin: ConnectionFile
) -> None:
    _, project = compose
    channel = secure_channel(admin)
    cs = Clientset(channel, qps=0, burst=1000, user_agent="kse-smoke")
    backend = DockerBackend(project=project)
    try:

        async def holder() -> str:
            try:
                lease = await cs.leases.get("kube-system", "kube-scheduler")
            except NotFoundError:
                return ""
            return str(lease.spec.holder_identity)

        async def bound() -> int:
            pods = await cs.pods.list("default")
            return sum(1 for p in pods.items if p.spec.node_name)

        t0 = time.monotonic()
        first = await _until("a scheduler leader", holder, within=120)
        await _until("3 pods scheduled", lambda: _at_least(bound, 3), within=120)
        print(f"[smoke] leader {first} and 3 pods bound {time.monotonic() - t0:.1f}s after up")

        replicas = await backend.replicas()
        assert replicas == ["scheduler-1", "scheduler-2", "scheduler-3"]
        assert await backend.etcd_members() == ["etcd-1", "etcd-2", "etcd-3"]
        identities = {r: await backend.identity(r) for r in replicas}
        leader = next((r for r, ident in identities.items() if ident == first), None)
        assert leader is not None, f"no replica has the lease holder's identity {first}: {identities}"
        assert first.startswith(f"{leader}_"), "identity is <hostname>_<uuid>, hostname = service"

        # Kill the leader's container (SIGKILL: no lease release); the backend restarts it after ~0.5 s.
        before = await bound()
        t1 = time.monotonic()
        await backend.kill(leader)

        async def new_holder() -> str:
            h = await holder()
            return h if h and h != first else ""

        second = await _until("a new leader after the kill", new_holder, within=60)
        failover = time.monotonic() - t1
        await _until("pods scheduled by the new leader", lambda: _at_least(bound, before + 2), within=60)
        restarted = await _until(
            f"{leader} back with a new identity",
            lambda: _differs(backend.identity(leader), first),
            within=60,
        )
        print(
            f"[smoke] killed {leader}; new leader {second} after {failover:.1f}s; {leader} is now {restarted}"
        )

        # The other faults, on a standby, through the same engine API.
        standby = next(r for r in replicas if r != leader and not second.startswith(f"{r}_"))
        engine = backend.engine
        cid = await backend._container(standby)
        await backend.pause(standby)
        assert (await engine.inspect(cid))["State"]["Paused"] is True
        await backend.resume(standby)
        assert (await engine.inspect(cid))["State"]["Paused"] is False
        nets = set((await engine.inspect(cid))["NetworkSettings"]["Networks"])
        await backend.partition(standby)
        assert not set((await engine.inspect(cid))["NetworkSettings"]["Networks"]) & nets
        await backend.heal(standby)
        assert set((await engine.inspect(cid))["NetworkSettings"]["Networks"]) == nets
        await backend.set_clock_skew(standby, 0.0, 1.0)  # from the host: through the archive API
        skew = _run(["docker", "exec", cid, "cat", f"/var/lib/kse/run/clock-skew-{standby}.json"])
        assert '"offset_s": 0.0' in skew and '"rate": 1.0' in skew, skew
    finally:
        await backend.aclose()
        await channel.close()


def test_kubectl_reads_the_compose_cluster_with_the_volumes_kubeconfig(
    compose: tuple[list[str], str], tmp_path: Path
) -> None:
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("kubectl is not installed (see the README's kubectl section for how to get one)")
    base, _ = compose
    cid = _run([*base, "ps", "-q", "apiserver"], env=COMPOSE_ENV).strip()
    _run(["docker", "cp", f"{cid}:/var/lib/kse/kubeconfig", str(tmp_path / "kubeconfig")])
    _run(["docker", "cp", f"{cid}:/var/lib/kse/pki/.", str(tmp_path / "pki")])
    # The smoke publishes on an ephemeral port, not the default 6444 the kubeconfig names.
    port = _run([*base, "port", "apiserver", "6444"], env=COMPOSE_ENV).strip().rpartition(":")[2]
    kubeconfig = str(tmp_path / "kubeconfig")
    _run(
        [
            kubectl,
            "--kubeconfig",
            kubeconfig,
            "config",
            "set-cluster",
            "kse",
            f"--server=https://localhost:{port}",
        ]
    )
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, "get", "leases", "-n", "kube-system", "-o", "name"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if out.returncode == 0 and "lease.coordination.k8s.io/kube-scheduler" in out.stdout.split():
            break
        assert time.monotonic() < deadline, (
            f"kubectl get leases: {out.returncode}\n{out.stdout}\n{out.stderr}"
        )
        time.sleep(0.5)
    pods = _run([kubectl, "--kubeconfig", kubeconfig, "get", "pods", "-o", "wide"])
    assert pods.splitlines()[0].split()[:2] == ["NAME", "READY"], pods


async def _at_least(count: Callable[[], Awaitable[int]], n: int) -> bool:
    return await count() >= n


async def _differs(value: Awaitable[str], old: str) -> str:
    v = await value
    return v if v and v != old else ""
