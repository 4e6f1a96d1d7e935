"""Fault backends: where fault targets live and how to hit them.

The nemesis (`chaos.nemesis`) decides *what* to break and *when*; a backend says *how* for one kind
of deployment. Two implementations exist:

- `chaos.local_backend.LocalBackend`: processes on this host, either a `harness.up.Cluster` the run
  started itself or a running `kse up` found through `<data_dir>/run/cluster.json` (attached).
- `chaos.docker_backend.DockerBackend`: the containers of the compose deployment (found by their
  `com.docker.compose.service` label).

Targets are component names: "scheduler-N", "apiserver", "etcd-N", "nodesim", "workload". Leader and
lease reads do not go through the backend: they go through the API (the admin clientset), which is
the same for every deployment.

Optional, outside the protocol (asked with getattr, where a backend can tell): `etcd_leader()` (the
nemesis' `etcd-leader` target), `ready(replica)` and `leading(replica)` (a replica's /readyz and its
own leader_election_master_status, for the driver's waits in `chaos.waits`). The local backend
offers all three.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

__all__ = ["BackendError", "FaultBackend"]


class BackendError(RuntimeError):
    """A fault the backend cannot apply (unknown target, unsupported operation in this mode, ...)."""


class FaultBackend(Protocol):
    """Where fault targets live and how to hit them: local processes or docker containers."""

    name: str  # "local" | "docker"
    pki_dir: Path  # the PKI the cluster's components read

    async def replicas(self) -> list[str]: ...  # scheduler replica names, sorted ("scheduler-1", ...)

    async def identity(self, replica: str) -> str: ...  # its current lease identity ("" if unknown)

    async def etcd_members(self) -> list[str]: ...  # "etcd-1", ...

    async def pid(self, target: str) -> int | None: ...  # host pid (local) or None (docker)

    async def kill(self, target: str, *, restart: bool = True) -> None: ...  # SIGKILL

    async def terminate(self, target: str, *, restart: bool = True) -> None: ...  # SIGTERM, waits for exit

    async def pause(self, target: str) -> None: ...  # SIGSTOP / docker pause

    async def resume(self, target: str) -> None: ...  # SIGCONT / docker unpause

    async def start(self, target: str) -> None: ...  # start a target stopped with restart=False; waits ready

    # Black-hole its link to the API server; or (mode "delay" / "loss") slow it or lose a fraction
    # of its segments (harness.proxy). A backend that cannot do a mode raises BackendError.
    async def partition(
        self, replica: str, mode: str = "blackhole", *, delay: float = 0.0, loss: float = 0.0
    ) -> None: ...

    async def heal(self, replica: str) -> None: ...

    async def set_clock_skew(self, replica: str, offset_s: float, rate: float) -> None: ...

    async def aclose(self) -> None: ...
