"""`ApiServerProcess`: a `kse apiserver` child, built from what a caller knows (etcd, prefix, PKI).

The API server writes `{"address": "127.0.0.1:PORT", "pid": N}` to its ready file once it serves;
`.address` reads it. With `--listen 127.0.0.1:0` the OS picks the port; a restart reuses the port
of the first start (`keep_address=True`) so clients holding the address reconnect to the same place,
as they would to a restarted real API server.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from certs.layout import PKI, CertPaths
from harness.procs.launcher import (
    DEFAULT_GRACE,
    DEFAULT_READY_TIMEOUT,
    LaunchError,
    ManagedProcess,
    ready_file_json,
)
from kse.config import ConnectionFile


class ApiServerProcess(ManagedProcess):
    """`python -m kse apiserver` with --etcd-endpoints, --prefix, --listen, --pki-dir, --ready-file."""

    def __init__(
        self,
        *,
        etcd_endpoints: Sequence[str],
        prefix: str,
        pki_dir: Path,
        data_dir: Path,
        name: str = "apiserver",
        listen: str = "127.0.0.1:0",
        extra_args: Sequence[str] = (),
        keep_address: bool = True,
        python: str = sys.executable,
        env: Mapping[str, str | None] | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        if not etcd_endpoints:
            raise ValueError("ApiServerProcess needs at least one etcd endpoint")
        self.etcd_endpoints = tuple(etcd_endpoints)
        self.prefix = prefix
        self.pki_dir = Path(pki_dir)
        self.listen = listen
        self.extra_args = tuple(extra_args)
        self.keep_address = keep_address
        self.python = python
        self._bound: str | None = None
        data_dir = Path(data_dir)
        super().__init__(
            name,
            self._argv(listen, data_dir / "run" / f"{name}.ready.json"),
            data_dir=data_dir,
            env=env,
            ready_file=data_dir / "run" / f"{name}.ready.json",
            ready_check=ready_file_json,
            ready_timeout=ready_timeout,
            grace=grace,
        )

    def _argv(self, listen: str, ready_file: Path) -> list[str]:
        return [
            self.python,
            "-m",
            "kse",
            "apiserver",
            "--etcd-endpoints",
            ",".join(self.etcd_endpoints),
            "--prefix",
            self.prefix,
            "--listen",
            listen,
            "--pki-dir",
            str(self.pki_dir),
            "--ready-file",
            str(ready_file),
            *self.extra_args,
        ]

    def command_line(self) -> list[str]:
        assert self.ready_file is not None
        listen = self._bound if (self.keep_address and self._bound) else self.listen
        return self._argv(listen, self.ready_file)

    async def wait_ready(self, ready_timeout: float | None = None) -> dict[str, object]:
        info = await super().wait_ready(ready_timeout)
        return self._note_address(info)

    def wait_ready_sync(self, ready_timeout: float | None = None) -> dict[str, object]:
        return self._note_address(super().wait_ready_sync(ready_timeout))

    def _note_address(self, info: dict[str, object]) -> dict[str, object]:
        address = info.get("address")
        if not isinstance(address, str) or not address:
            raise LaunchError(f"{self.name}: ready file {self.ready_file} has no address: {info}")
        self._bound = address
        return info

    @property
    def address(self) -> str:
        """`host:port` the server listens on (from its ready file); LaunchError before it is ready."""
        if not self.ready_info or not self.running:
            raise LaunchError(f"{self.name} is not serving (not started, not ready yet, or exited)")
        return str(self.ready_info["address"])

    def connection(self, identity: CertPaths | str = "admin") -> ConnectionFile:
        """A connection to this server as `identity` (a `CertPaths`, or a stem in `pki_dir`)."""
        paths = identity if isinstance(identity, CertPaths) else PKI.from_dir(self.pki_dir)[identity]
        return ConnectionFile.for_identity(self.address, paths.cert, paths.key, paths.ca_bundle)
