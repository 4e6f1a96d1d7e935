"""The commands the compose services run, against real processes: `kse health` (the healthchecks)
and `kse etcd-member` (one etcd member per container, over mTLS)."""

from __future__ import annotations

import asyncio
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from certs.layout import PKI
from harness.procs.ports import free_ports
from kse.config import ConnectionFile
from kse.etcdclient import EtcdClient, EtcdError, EtcdTLS

pytestmark = pytest.mark.integration


def kse(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kse", *argv], capture_output=True, text=True, timeout=timeout, check=False
    )


async def test_health_reports_the_api_server_serving_over_mtls(apiserver, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    conn_file = tmp_path / "admin.json"
    apiserver.connection("admin").save(conn_file)
    out = await asyncio.to_thread(kse, "health", "--connection-file", str(conn_file))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "server: SERVING"
    out = await asyncio.to_thread(
        kse, "health", "-q", "--connection-file", str(conn_file), "--service", "kse.v1.Resources"
    )
    assert (out.returncode, out.stdout) == (0, ""), out.stderr
    # --server overrides the file's address (the probe inside the API server's own container).
    [closed] = free_ports(1)
    out = await asyncio.to_thread(
        kse,
        "health",
        "--connection-file",
        str(conn_file),
        "--server",
        f"127.0.0.1:{closed}",
        "--timeout",
        "1",
    )
    assert out.returncode == 1
    assert f"127.0.0.1:{closed}: UNAVAILABLE" in out.stderr


def test_health_names_a_missing_connection_file_and_bad_flags(tmp_path: Path) -> None:
    out = kse("health", "--connection-file", str(tmp_path / "nope.json"))
    assert out.returncode == 1
    assert "nope.json does not exist" in out.stderr
    out = kse("health", "--http", "http://127.0.0.1:1/healthz", "--service", "x")
    assert out.returncode == 2
    assert "--server and --service go with --connection-file" in out.stderr


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 500)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_health_http_wants_a_2xx(http_server: str) -> None:
    out = kse("health", "--http", f"{http_server}/healthz")
    assert out.returncode == 0, out.stderr
    out = kse("health", "--http", f"{http_server}/broken")
    assert out.returncode == 1
    assert "HTTP 500" in out.stderr
    [closed] = free_ports(1)
    out = kse("health", "--http", f"http://127.0.0.1:{closed}/healthz", "--timeout", "1")
    assert out.returncode == 1
    assert "refused" in out.stderr.lower()


async def test_etcd_member_becomes_an_etcd_serving_clients_over_mtls(pki: PKI, tmp_path: Path) -> None:
    client_port, peer_port = free_ports(2)
    argv = [
        sys.executable, "-m", "kse", "etcd-member",
        "--name", "m1",
        "--data-dir", str(tmp_path / "m1"),
        "--pki-dir", str(pki.dir),
        "--listen-host", "127.0.0.1",
        "--advertise-host", "localhost",  # a name etcd-server.crt carries
        "--client-port", str(client_port),
        "--peer-port", str(peer_port),
        "--initial-cluster", f"m1=https://localhost:{peer_port}",
        "--fast",
    ]  # fmt: skip
    log = (tmp_path / "m1.log").open("wb")
    proc = _spawn(argv, log)
    tls = EtcdTLS(pki.ca_bundle, pki.apiserver_etcd_client.cert, pki.apiserver_etcd_client.key)
    try:
        deadline = time.monotonic() + 30
        status = None
        while status is None:
            assert proc.poll() is None, (tmp_path / "m1.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "etcd-member not healthy within 30 s"
            try:
                client = await EtcdClient.connect([f"https://localhost:{client_port}"], tls=tls, timeout=1.0)
                try:
                    status = await client.status()
                    await client.put(b"/k", b"v")
                finally:
                    await client.close()
            except EtcdError:
                await asyncio.sleep(0.05)
        assert status["leader"]
        # The process became etcd (exec): its command line is etcd's, so signals reach etcd itself.
        assert _program(proc.pid) == "etcd"
        # Plain TCP to the client port without a client certificate is refused by the TLS layer.
        anonymous = EtcdTLS(pki.ca_bundle)
        with pytest.raises(EtcdError):
            c = await EtcdClient.connect([f"https://localhost:{client_port}"], tls=anonymous, timeout=1.0)
            try:
                await c.status()
            finally:
                await c.close()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        log.close()


def _spawn(argv: list[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _program(pid: int) -> str:
    return Path(os.fsdecode(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0])).name


def test_etcd_member_refuses_a_cluster_that_does_not_list_it_or_mixes_schemes(
    pki: PKI, tmp_path: Path
) -> None:
    base = ["etcd-member", "--data-dir", str(tmp_path / "d"), "--print"]
    out = kse(
        *base,
        "--name",
        "etcd-9",
        "--pki-dir",
        str(pki.dir),
        "--initial-cluster",
        "etcd-1=https://etcd-1:2380",
    )
    assert out.returncode == 2
    assert "does not list this member (etcd-9)" in out.stderr
    out = kse(
        *base, "--name", "etcd-1", "--pki-dir", str(pki.dir), "--initial-cluster", "etcd-1=http://etcd-1:2380"
    )
    assert out.returncode == 2
    assert "not https://" in out.stderr
    out = kse(*base, "--name", "etcd-1", "--initial-cluster", "etcd-1=etcd-1:2380")
    assert out.returncode == 2
    assert "bad entry 'etcd-1=etcd-1:2380'" in out.stderr
    out = kse(
        *base,
        "--name",
        "etcd-1",
        "--pki-dir",
        str(pki.dir),
        "--initial-cluster",
        "etcd-1=https://etcd-1:2380",
    )
    assert out.returncode == 0, out.stderr
    assert "--peer-client-cert-auth" in out.stdout and "--client-cert-auth" in out.stdout


def test_datadir_init_writes_connection_files_naming_the_server(tmp_path: Path) -> None:
    out = kse(
        "datadir", "init", "--data-dir", str(tmp_path), "--server", "apiserver:6443", "--lease-duration", "4s"
    )
    assert out.returncode == 0, out.stderr
    conn = ConnectionFile.load(tmp_path / "connections" / "scheduler-2.json")
    assert (conn.server, conn.tls_server_name) == ("apiserver:6443", "apiserver")
    assert conn.cert_file == tmp_path / "pki" / "scheduler-2.crt"
    assert ConnectionFile.load(tmp_path / "config.json").cert_file.name == "admin.crt"
    import json

    cluster = json.loads((tmp_path / "run" / "cluster.json").read_text())
    assert cluster["lease"]["duration_s"] == 4.0
    assert cluster["processes"]["scheduler-3"]["role"] == "scheduler"
    # A second run keeps the CA and reissues only what is missing.
    ca = (tmp_path / "pki" / "ca.crt").read_bytes()
    (tmp_path / "pki" / "nodesim.key").unlink()
    out = kse("datadir", "init", "--data-dir", str(tmp_path), "--server", "apiserver:6443")
    assert out.returncode == 0, out.stderr
    assert "issued nodesim (missing) from the existing CA" in out.stdout
    assert (tmp_path / "pki" / "ca.crt").read_bytes() == ca
    out = kse("datadir", "init", "--data-dir", str(tmp_path), "--server", "apiserver")
    assert out.returncode == 2
    assert "expected HOST:PORT" in out.stderr
