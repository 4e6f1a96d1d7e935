"""Certificate rotation on the HTTPS front door, without a restart: the serving pair and the client CA
bundle are reloaded from the same files as the gRPC side (apiserver_mock/http/tls.py), and a
kubeconfig that references the admin's files by path keeps working after they are rotated."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from certs.layout import PKI, CertPaths
from certs.pki import init_pki
from certs.rotation import rotate, rotate_ca_add, rotate_ca_remove, rotate_ca_switch
from tests.fixtures.apiserver import ApiServer, ApiServerFactory
from tests.fixtures.kube import client_context, kubectl

pytestmark = pytest.mark.integration


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    """Each test's own PKI (rotation rewrites files)."""
    return init_pki(tmp_path / "pki", scheduler_replicas=1)


async def served_cert(server: ApiServer, client: CertPaths | None = None) -> x509.Certificate:
    """The certificate a new HTTPS handshake is served (raises ssl.SSLError if refused)."""
    paths = client or server.pki["admin"]
    ctx = client_context(paths, server.pki.ca_bundle)
    host, _, port = server.http_address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port), ssl=ctx, server_hostname="localhost")
    try:
        # TLS 1.3 sends the server's verdict on the client cert after the handshake: ask something.
        writer.write(b"GET /version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        await writer.drain()
        status = await reader.readline()
        if not status.startswith(b"HTTP/1.1 200"):
            raise ssl.SSLError(f"not served: {status!r}")
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()


async def refused(server: ApiServer, client: CertPaths) -> bool:
    try:
        await served_cert(server, client)
    except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
        return True
    return False


async def test_serving_pair_and_ca_rotated_without_restart(
    apiserver_factory: ApiServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = await apiserver_factory()
    kubeconfig = server.kubeconfig(tmp_path / "kubeconfig", "admin")
    old = await served_cert(server)
    [leaf] = rotate(pki.dir, "apiserver")
    new = await served_cert(server)
    assert new.serial_number == leaf.serial != old.serial_number

    old_dir = tmp_path / "old"
    old_dir.mkdir()
    for f in (pki["admin"].cert, pki["admin"].key):
        shutil.copy2(f, old_dir / f.name)
    old_admin = CertPaths("old", old_dir / "admin.crt", old_dir / "admin.key", pki.ca_bundle)

    rotate_ca_add(pki.dir)
    assert not await refused(server, pki["admin"])
    rotate_ca_switch(pki.dir)  # every leaf reissued from the new CA, the admin's files in place
    switched = await served_cert(server)
    assert switched.issuer != old.issuer
    assert "pods" in kubectl(kubeconfig, "api-resources", "--no-headers").stdout  # same kubeconfig
    assert not await refused(server, old_admin)  # the old CA is still trusted
    rotate_ca_remove(pki.dir)
    assert await refused(server, old_admin)
    assert not await refused(server, pki["admin"])
    assert server.running
