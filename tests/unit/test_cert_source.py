"""FileCredentialSource: notices changes, never serves a torn pair, and drives grpc's dynamic creds."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from certs.layout import PKI, CertPaths
from certs.pki import (
    CERT_MODE,
    atomic_write,
    init_pki,
    issue_leaf,
    key_matches_cert,
    load_ca,
    rotate_leaf,
    write_ca_bundle,
)
from certs.source import CredentialError, Credentials, FileCredentialSource


@pytest.fixture
def own_pki(tmp_path: Path) -> PKI:
    """A PKI this test may rewrite (the session `pki` is shared and read-only)."""
    return init_pki(tmp_path / "pki", scheduler_replicas=1)


def test_load_then_poll_reports_no_change(own_pki: PKI) -> None:
    source = FileCredentialSource.from_paths(own_pki.scheduler(1))
    creds = source.load()
    assert creds.version == 1
    assert creds.cert_pem == own_pki.scheduler(1).cert.read_bytes()
    assert creds.key_pem == own_pki.scheduler(1).key.read_bytes()
    assert creds.ca_pem == own_pki.ca_bundle.read_bytes()
    assert source.poll() is None
    assert source.load() is creds


def test_first_poll_returns_initial_credentials(own_pki: PKI) -> None:
    source = FileCredentialSource.from_paths(own_pki.apiserver)
    first = source.poll()
    assert first is not None and first.version == 1
    assert source.poll() is None
    assert source.current is first


def test_rotation_is_detected_once(own_pki: PKI) -> None:
    source = FileCredentialSource.from_paths(own_pki.scheduler(1))
    old = source.load()
    rotate_leaf(own_pki.dir, "scheduler-1")
    new = source.poll()
    assert new is not None and new.version == 2
    assert new.cert_pem != old.cert_pem and new.key_pem != old.key_pem
    assert key_matches_cert(new.cert_pem, new.key_pem)
    assert source.poll() is None


def test_rewrite_with_same_content_is_not_a_change(own_pki: PKI) -> None:
    paths = own_pki.scheduler(1)
    source = FileCredentialSource.from_paths(paths)
    source.load()
    atomic_write(paths.cert, paths.cert.read_bytes(), CERT_MODE)  # new inode, same bytes
    assert source.poll() is None


def test_torn_pair_is_ignored_until_the_key_lands(own_pki: PKI) -> None:
    paths = own_pki.scheduler(1)
    source = FileCredentialSource.from_paths(paths)
    old = source.load()
    new_pair = issue_leaf(load_ca(own_pki.dir), "system:kube-scheduler")

    atomic_write(paths.cert, new_pair.cert_pem)  # new cert, old key: a writer between its renames
    assert source.poll() is None
    assert source.load() is old
    assert "does not match" in (source.last_error or "")

    atomic_write(paths.key, new_pair.key_pem, 0o600)
    new = source.poll()
    assert new is not None and new.cert_pem == new_pair.cert_pem and new.version == 2
    assert source.last_error is None


def test_unparsable_files_keep_previous(own_pki: PKI) -> None:
    paths = own_pki.scheduler(1)
    source = FileCredentialSource.from_paths(paths)
    old = source.load()
    atomic_write(paths.ca_bundle, b"garbage")
    assert source.poll() is None
    assert source.load() is old
    assert "CA bundle" in (source.last_error or "") or "unparsable" in (source.last_error or "")
    atomic_write(paths.cert, b"")
    assert source.poll() is None
    os.unlink(paths.key)
    assert source.poll() is None
    assert source.current is old


def test_ca_bundle_change_is_detected(own_pki: PKI, foreign_pki: PKI) -> None:
    source = FileCredentialSource.from_paths(own_pki.apiserver)
    source.load()
    both = [own_pki.ca_cert.read_bytes(), foreign_pki.ca_cert.read_bytes()]
    write_ca_bundle(own_pki.dir, both)
    new = source.poll()
    assert new is not None and new.ca_pem == b"".join(both)


def test_load_without_any_valid_credentials_raises(tmp_path: Path, own_pki: PKI) -> None:
    missing = FileCredentialSource(tmp_path / "no.crt", tmp_path / "no.key", own_pki.ca_bundle)
    with pytest.raises(CredentialError, match="no usable credentials"):
        missing.load()
    assert missing.poll() is None
    torn = FileCredentialSource(own_pki.apiserver.cert, own_pki.scheduler(1).key, own_pki.ca_bundle)
    with pytest.raises(CredentialError, match="does not match"):
        torn.load()


def test_concurrent_polls_see_only_consistent_pairs_each_version_once(own_pki: PKI) -> None:
    paths = own_pki.scheduler(1)
    source = FileCredentialSource.from_paths(paths)
    initial = source.load()
    rotations = 30
    done = threading.Event()
    results: list[Credentials] = []
    results_lock = threading.Lock()
    errors: list[BaseException] = []

    def poller() -> None:
        try:
            while not done.is_set():
                creds = source.poll()
                if creds is not None:
                    assert key_matches_cert(creds.cert_pem, creds.key_pem)
                    with results_lock:
                        results.append(creds)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=poller) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        last = None
        for _ in range(rotations):
            last = rotate_leaf(own_pki.dir, "scheduler-1")
    finally:
        done.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors and not any(t.is_alive() for t in threads)
    versions = [c.version for c in results]
    assert len(versions) == len(set(versions))  # each change handed out exactly once
    final = source.load()
    assert last is not None and final.cert_pem == last.cert_pem and final.key_pem == last.key_pem
    assert final.version > initial.version


# --- the consumer it exists for: grpc dynamic server credentials -----------------------------------------


def _config(creds: Credentials) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration([(creds.key_pem, creds.cert_pem)], creds.ca_pem)


def _client(server_ca: Path, client: CertPaths) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=server_ca.read_bytes(),
        private_key=client.key.read_bytes(),
        certificate_chain=client.cert.read_bytes(),
    )


async def _check(port: int, creds: grpc.ChannelCredentials) -> grpc.StatusCode:
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds) as channel:
        try:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        except grpc.aio.AioRpcError as e:
            return e.code()
    return grpc.StatusCode.OK


async def test_grpc_dynamic_credentials_reload_client_ca_from_source(own_pki: PKI, foreign_pki: PKI) -> None:
    source = FileCredentialSource.from_paths(own_pki.apiserver)

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        creds = source.poll()
        return None if creds is None else _config(creds)

    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server_creds = grpc.dynamic_ssl_server_credentials(
        _config(source.load()), fetch, require_client_authentication=True
    )
    port = server.add_secure_port("127.0.0.1:0", server_creds)
    await server.start()
    try:
        ours, theirs = own_pki.scheduler(1), foreign_pki.scheduler(1)
        assert await _check(port, _client(own_pki.ca_bundle, ours)) == grpc.StatusCode.OK
        assert await _check(port, _client(own_pki.ca_bundle, theirs)) == grpc.StatusCode.UNAVAILABLE

        # Trust the foreign CA instead: the next handshake must use the new bundle.
        write_ca_bundle(own_pki.dir, [foreign_pki.ca_cert.read_bytes()])
        assert await _check(port, _client(own_pki.ca_cert, theirs)) == grpc.StatusCode.OK
        assert await _check(port, _client(own_pki.ca_cert, ours)) == grpc.StatusCode.UNAVAILABLE
        assert source.current is not None and source.current.version == 2
    finally:
        await server.stop(None)
