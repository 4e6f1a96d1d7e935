"""The docker fault backend over aiodocker, against a stand-in Docker Engine: an aiohttp server on a
unix socket that answers the Engine API calls the backend makes (v1.41 paths, multiplexed logs,
304s, JSON errors), so the calls, their arguments and the error mapping are checked without a
Docker daemon. The compose smoke test (tests/docker) runs the same backend against a real one."""

from __future__ import annotations

import io
import json
import struct
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from chaos.backend import BackendError
from chaos.docker_backend import API_VERSION, DockerBackend, DockerEngine, DockerError

PROJECT = "kse"


def _container(service: str, net: str = "kse_default") -> dict[str, Any]:
    labels = {"com.docker.compose.project": PROJECT, "com.docker.compose.service": service,
              "com.docker.compose.container-number": "1"}  # fmt: skip
    return {
        "Id": f"id-{service}",
        "Labels": labels,
        "Config": {"Tty": False, "Labels": labels},
        "State": {
            "Running": True, "Paused": False, "Status": "running",
            "StartedAt": "2026-12-01T10:00:00.123456789Z",
        },
        "NetworkSettings": {"Networks": {net: {"Aliases": [service, f"id-{service}"[:12]]}}},
    }


class FakeEngine:
    """Containers by id, the calls received (method, path without the version, query)."""

    def __init__(self) -> None:
        self.containers = {c["Id"]: c for c in map(_container, ["apiserver", "scheduler-1", "scheduler-2",
                                                                  "etcd-1"])}  # fmt: skip
        self.calls: list[tuple[str, str, dict[str, str]]] = []
        self.archives: dict[str, bytes] = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        prefix = f"/{API_VERSION}"
        assert request.path.startswith(prefix), request.path
        path = request.path[len(prefix):]
        if path == "/version":
            return web.json_response({"ApiVersion": API_VERSION[1:], "Version": "20.10.24"})
        self.calls.append((request.method, path, dict(request.query)))
        parts = path.strip("/").split("/")
        if parts == ["containers", "json"]:
            wanted = json.loads(request.query["filters"])["label"]
            found = [
                c for c in self.containers.values()
                if set(wanted) <= {f"{k}={v}" for k, v in c["Labels"].items()}
            ]
            return web.json_response([{"Id": c["Id"], "Labels": c["Labels"]} for c in found])
        if parts[0] == "containers":
            c = self.containers.get(parts[1])
            if c is None:
                return _error(404, f"No such container: {parts[1]}")
            state = c["State"]
            match parts[2], request.method:
                case "json", "GET":
                    return web.json_response(c)
                case "logs", "GET":
                    service = c["Labels"]["com.docker.compose.service"]
                    cm = service.startswith("controller-manager-")
                    component = "controller-manager" if cm else "scheduler"
                    line = f"{component} {service}_abc starting: x\n".encode()
                    return web.Response(body=struct.pack(">BxxxL", 2, len(line)) + line)
                case "kill" | "stop", "POST":
                    if not state["Running"]:
                        return web.Response(status=304)
                    state.update(Running=False, Status="exited")
                case "start", "POST":
                    if state["Running"]:
                        return web.Response(status=304)
                    state.update(Running=True, Status="running")
                case "pause", "POST":
                    state["Paused"] = True
                case "unpause", "POST":
                    state["Paused"] = False
                case "archive", "PUT":
                    self.archives[c["Id"]] = await request.read()
                    return web.Response(status=200)
            return web.Response(status=204)
        if parts[0] == "networks":
            body = await request.json()
            c = self.containers[body["Container"]]
            nets = c["NetworkSettings"]["Networks"]
            if parts[2] == "disconnect":
                del nets[parts[1]]
            else:
                nets[parts[1]] = {"Aliases": body["EndpointConfig"]["Aliases"]}
            return web.Response(status=200)
        return _error(404, "page not found")


def _error(status: int, message: str) -> web.Response:
    """As the Engine answers: `application/json` without a charset."""
    body = json.dumps({"message": message}).encode()
    return web.Response(status=status, body=body, headers={"Content-Type": "application/json"})


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[tuple[FakeEngine, str]]:
    fake = FakeEngine()
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    sock = str(tmp_path / "docker.sock")
    await web.UnixSite(runner, sock).start()
    try:
        yield fake, sock
    finally:
        await runner.cleanup()


async def test_faults_reach_the_engine_as_its_api_calls(engine: tuple[FakeEngine, str]) -> None:
    fake, sock = engine
    backend = DockerBackend(project=PROJECT, engine=DockerEngine(sock), restart_delay=0.0)
    try:
        assert await backend.replicas() == ["scheduler-1", "scheduler-2"]
        assert await backend.etcd_members() == ["etcd-1"]
        # The identity from the demultiplexed log since the container's start.
        assert await backend.identity("scheduler-1") == "scheduler-1_abc"
        fake.containers["id-controller-manager-1"] = _container("controller-manager-1")
        assert await backend.controller_managers() == ["controller-manager-1"]
        assert await backend.identity("controller-manager-1") == "controller-manager-1_abc"
        del fake.containers["id-controller-manager-1"]
        logs = next(q for m, p, q in fake.calls if p.endswith("/logs"))
        assert logs["since"] == "1796119200.123456789" and logs["stdout"] == logs["stderr"] == "1"

        await backend.terminate("scheduler-2", restart=False)
        assert ("POST", "/containers/id-scheduler-2/stop", {"t": "10"}) in fake.calls
        await backend.terminate("scheduler-2", restart=False)  # stopped already: the Engine's 304
        await backend.start("scheduler-2")
        assert fake.containers["id-scheduler-2"]["State"]["Running"]

        await backend.kill("etcd-1")  # not a replica: started again before the call returns
        assert ("POST", "/containers/id-etcd-1/kill", {"signal": "KILL"}) in fake.calls
        assert fake.calls[-2][:2] == ("POST", "/containers/id-etcd-1/start")
        assert fake.containers["id-etcd-1"]["State"]["Running"]

        await backend.pause("scheduler-1")
        assert fake.containers["id-scheduler-1"]["State"]["Paused"]
        await backend.resume("scheduler-1")
        assert not fake.containers["id-scheduler-1"]["State"]["Paused"]

        await backend.partition("scheduler-1")
        assert fake.containers["id-scheduler-1"]["NetworkSettings"]["Networks"] == {}
        await backend.heal("scheduler-1")
        assert fake.containers["id-scheduler-1"]["NetworkSettings"]["Networks"] == {
            "kse_default": {"Aliases": ["scheduler-1"]}  # the short-id alias is the Engine's own
        }

        await backend.set_clock_skew("scheduler-1", 1.5, 1.0)  # no shared run dir: the archive API
        with tarfile.open(fileobj=io.BytesIO(fake.archives["id-scheduler-1"])) as tar:
            member = tar.extractfile("clock-skew-scheduler-1.json")
            assert member is not None and json.loads(member.read()) == {"offset_s": 1.5, "rate": 1.0}
        assert fake.calls[-1][2] == {"path": "/var/lib/kse/run"}
    finally:
        await backend.aclose()


async def test_refusals_and_silence_are_backend_errors_naming_the_call(
    engine: tuple[FakeEngine, str], tmp_path: Path
) -> None:
    _, sock = engine
    real = DockerEngine(sock)
    try:
        assert await real.ping()
        with pytest.raises(DockerError, match="GET /containers/nope/json: HTTP 404: No such container") as e:
            await real.inspect("nope")
        assert e.value.status == 404
        backend = DockerBackend(project=PROJECT, engine=real)
        with pytest.raises(BackendError, match=r"no container for 'scheduler-9'.*have: apiserver, etcd-1"):
            await backend.kill("scheduler-9")
    finally:
        await real.aclose()
    nobody = DockerEngine(str(tmp_path / "absent.sock"), timeout=5.0)
    try:
        assert not await nobody.ping()
        with pytest.raises(DockerError, match="cannot talk to the Docker engine") as e:
            await nobody.containers({})
        assert e.value.status == 0
    finally:
        await nobody.aclose()
