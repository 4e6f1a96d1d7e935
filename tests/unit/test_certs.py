"""certs: CA and leaves, the layout, identities, atomic writes, rotation, the CLI, and real mTLS."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import stat
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import verification
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from certs.identity import Identity, identity_from_auth_context, identity_from_pem
from certs.layout import PKI, CertPaths, leaf_specs
from certs.pki import (
    CLOCK_SKEW,
    atomic_write,
    init_pki,
    issue_leaf,
    key_matches_cert,
    load_ca,
    make_ca,
    rotate_leaf,
)
from cli.certs_cmd import parse_duration
from cli.main import main
from tests.fixtures.pki import expired_client

# stem -> (CN, O) for the session fixture (nodes node-a, node-b).
EXPECTED_IDENTITIES = {
    "apiserver": ("kube-apiserver", ()),
    "etcd-server": ("etcd-server", ()),
    "apiserver-etcd-client": ("kube-apiserver-etcd-client", ()),
    "scheduler-1": ("system:kube-scheduler", ()),
    "scheduler-2": ("system:kube-scheduler", ()),
    "scheduler-3": ("system:kube-scheduler", ()),
    "controller-manager": ("system:kube-controller-manager", ()),
    "admin": ("kse:admin", ("system:masters",)),
    "chaos": ("kse:chaos", ("kse:chaos",)),
    "workload": ("kse:workload", ("kse:workloads",)),
    "nodesim": ("kse:nodesim", ("kse:nodesims",)),
    "node-node-a": ("system:node:node-a", ("system:nodes",)),
    "node-node-b": ("system:node:node-b", ("system:nodes",)),
}


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _store(pki: PKI) -> verification.Store:
    return verification.Store(x509.load_pem_x509_certificates(pki.ca_bundle.read_bytes()))


def _eku(cert: x509.Certificate) -> set[x509.ObjectIdentifier]:
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def _sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), {
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    }


# --- CA and leaves ---------------------------------------------------------------------------------


def test_ca_is_a_p256_ca_valid_ten_years(pki: PKI) -> None:
    ca = _cert(pki.ca_cert)
    assert identity_from_pem(pki.ca_cert.read_bytes()).user == "kse-ca"
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    key = ca.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert timedelta(days=3649) < lifetime < timedelta(days=3651)
    assert pki.ca_bundle.read_bytes() == pki.ca_cert.read_bytes()


def test_layout_has_exactly_the_expected_identities(pki: PKI) -> None:
    assert set(pki.leaves) == set(EXPECTED_IDENTITIES)
    for stem, (cn, orgs) in EXPECTED_IDENTITIES.items():
        assert identity_from_pem(pki[stem].cert.read_bytes()) == Identity(cn, orgs), stem
        assert pki[stem].ca_bundle == pki.ca_bundle


def test_every_leaf_chains_to_the_ca(pki: PKI) -> None:
    ca = _cert(pki.ca_cert)
    for paths in pki:
        leaf = _cert(paths.cert)
        leaf.verify_directly_issued_by(ca)
        assert key_matches_cert(paths.cert.read_bytes(), paths.key.read_bytes())
        ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
        aki = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
        assert aki == ski
        assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_server_certs_verify_for_their_names(pki: PKI) -> None:
    policy = verification.PolicyBuilder().store(_store(pki))
    for name in ["localhost", "apiserver"]:
        policy.build_server_verifier(x509.DNSName(name)).verify(_cert(pki.apiserver.cert), [])
    for ip in ["127.0.0.1", "::1"]:
        subject = x509.IPAddress(ipaddress.ip_address(ip))
        policy.build_server_verifier(subject).verify(_cert(pki.apiserver.cert), [])
    for name in ["localhost", "etcd", "etcd-1", "etcd-2", "etcd-3"]:
        policy.build_server_verifier(x509.DNSName(name)).verify(_cert(pki.etcd_server.cert), [])
    with pytest.raises(verification.VerificationError):
        policy.build_server_verifier(x509.DNSName("elsewhere")).verify(_cert(pki.apiserver.cert), [])


def test_ekus_match_roles(pki: PKI) -> None:
    server, client = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    assert _eku(_cert(pki.apiserver.cert)) == {server}
    assert _eku(_cert(pki.etcd_server.cert)) == {server, client}
    for stem in EXPECTED_IDENTITIES.keys() - {"apiserver", "etcd-server"}:
        assert _eku(_cert(pki[stem].cert)) == {client}, stem
    # A client cert cannot serve: the verifier checks the serverAuth EKU.
    with pytest.raises(verification.VerificationError):
        verification.PolicyBuilder().store(_store(pki)).build_server_verifier(
            x509.DNSName("localhost")
        ).verify(_cert(pki.admin.cert), [])


def test_sans(tmp_path: Path) -> None:
    pki = init_pki(tmp_path / "p", scheduler_replicas=1, server_hosts=["kse.example", "10.1.2.3", "fd00::1"])
    assert _sans(_cert(pki.apiserver.cert)) == (
        {"localhost", "apiserver", "kse.example"},
        {"127.0.0.1", "::1", "10.1.2.3", "fd00::1"},
    )
    assert _sans(_cert(pki.etcd_server.cert)) == (
        {"localhost", "etcd", "etcd-1", "etcd-2", "etcd-3"},
        {"127.0.0.1", "::1"},
    )
    with pytest.raises(x509.ExtensionNotFound):
        _cert(pki.admin.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_schedulers_each_have_their_own_key_and_serial(pki: PKI) -> None:
    schedulers = pki.schedulers
    assert [p.stem for p in schedulers] == ["scheduler-1", "scheduler-2", "scheduler-3"]
    assert len({_cert(p.cert).serial_number for p in schedulers}) == 3
    assert len({p.key.read_bytes() for p in schedulers}) == 3


def test_file_modes(pki: PKI) -> None:
    assert stat.S_IMODE(pki.ca_key.stat().st_mode) == 0o600
    for paths in pki:
        assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
        assert stat.S_IMODE(paths.cert.stat().st_mode) == 0o644
    assert not list(pki.dir.glob("*.tmp"))


def test_leaf_validity_is_backdated_for_clock_skew() -> None:
    now = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    ca = make_ca(now=now)
    leaf = issue_leaf(ca, "u", ttl=timedelta(hours=2), now=now).certificate
    assert leaf.not_valid_before_utc == now - CLOCK_SKEW
    assert leaf.not_valid_after_utc == now + timedelta(hours=2)


def test_issue_leaf_rejects_nonsense() -> None:
    ca = make_ca()
    with pytest.raises(ValueError, match="server or client"):
        issue_leaf(ca, "x", server=False, client=False)
    with pytest.raises(ValueError, match="SAN"):
        issue_leaf(ca, "x", server=True)
    with pytest.raises(ValueError, match="timezone"):
        issue_leaf(ca, "x", now=datetime(2030, 1, 1))


def test_leaf_specs_validate_node_names() -> None:
    with pytest.raises(ValueError, match="invalid node name"):
        leaf_specs(nodes=["Bad_Name"])
    with pytest.raises(ValueError, match="invalid node name"):
        leaf_specs(nodes=["../escape"])
    with pytest.raises(ValueError, match="duplicate"):
        leaf_specs(nodes=["a", "a"])


# --- layout lookups --------------------------------------------------------------------------------


def test_lookups_and_from_dir(pki: PKI) -> None:
    assert pki.node("node-a") == CertPaths.in_dir(pki.dir, "node-node-a")
    assert pki.scheduler(2).cert == pki.dir / "scheduler-2.crt"
    assert pki.admin.key == pki.dir / "admin.key"
    assert "chaos" in pki and "nope" not in pki
    with pytest.raises(KeyError, match="have: "):
        pki.get("nope")
    assert PKI.from_dir(pki.dir) == pki
    with pytest.raises(FileNotFoundError):
        PKI.from_dir(pki.dir / "missing")


# --- identity ----------------------------------------------------------------------------------------


def test_identity_cn_is_user_and_o_are_groups() -> None:
    ca = make_ca()
    pair = issue_leaf(ca, "jane", ["devs", "system:masters"])
    assert identity_from_pem(pair.cert_pem) == Identity("jane", ("devs", "system:masters"))
    assert identity_from_pem(pair.cert_pem.decode()).in_group("devs")
    assert identity_from_auth_context({"x509_pem_cert": [pair.cert_pem]}) == Identity(
        "jane", ("devs", "system:masters")
    )
    assert identity_from_auth_context({"transport_security_type": [b"ssl"]}) is None
    no_cn = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "devs")]))
        .issuer_name(ca.certificate.subject)
        .public_key(ca.private_key.public_key())
        .serial_number(1)
        .not_valid_before(datetime.now(UTC))
        .not_valid_after(datetime.now(UTC) + timedelta(hours=1))
        .sign(ca.private_key, hashes.SHA256())
    )
    with pytest.raises(ValueError, match="CN"):
        identity_from_pem(no_cn.public_bytes(serialization.Encoding.PEM))
    with pytest.raises(ValueError, match="common name"):
        issue_leaf(ca, "")


# --- atomic writes and rotation -------------------------------------------------------------------------


def test_atomic_write_never_shows_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "f.crt"
    versions = [bytes([65 + i]) * 1_000_000 for i in range(4)]
    atomic_write(path, versions[0])
    stop = threading.Event()
    torn: list[int] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            data = path.read_bytes()
            reads += 1
            if data not in versions:
                torn.append(len(data))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(40):
            atomic_write(path, versions[i % len(versions)])
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert reads > 0 and torn == []
    assert path.read_bytes() == versions[39 % len(versions)]
    assert [p.name for p in tmp_path.iterdir()] == ["f.crt"]


def test_atomic_write_failure_leaves_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "k.key"
    atomic_write(path, b"old", 0o600)

    def boom(src: str, dst: str) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        atomic_write(path, b"new", 0o600)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["k.key"]


def test_rotate_leaf_new_key_and_serial_same_ca_and_subject(tmp_path: Path) -> None:
    pki = init_pki(tmp_path / "p", scheduler_replicas=1)
    before_cert, before_key = _cert(pki.apiserver.cert), pki.apiserver.key.read_bytes()
    ca_before = pki.ca_cert.read_bytes()
    pair = rotate_leaf(pki.dir, "apiserver", ttl=timedelta(days=2))
    after = _cert(pki.apiserver.cert)
    assert after.serial_number == pair.serial != before_cert.serial_number
    assert pki.apiserver.key.read_bytes() != before_key
    assert key_matches_cert(pki.apiserver.cert.read_bytes(), pki.apiserver.key.read_bytes())
    assert after.subject == before_cert.subject and after.issuer == before_cert.issuer
    assert _sans(after) == _sans(before_cert) and _eku(after) == _eku(before_cert)
    after.verify_directly_issued_by(_cert(pki.ca_cert))
    assert pki.ca_cert.read_bytes() == ca_before
    assert (
        timedelta(days=2)
        <= after.not_valid_after_utc - after.not_valid_before_utc
        <= timedelta(days=2, minutes=2)
    )
    assert stat.S_IMODE(pki.apiserver.key.stat().st_mode) == 0o600


def test_rotate_leaf_can_expire_and_refuses_ca_and_unknown(tmp_path: Path) -> None:
    pki = init_pki(tmp_path / "p", scheduler_replicas=1)
    now = datetime.now(UTC)
    rotate_leaf(pki.dir, "scheduler-1", ttl=timedelta(minutes=5), now=now - timedelta(hours=1))
    assert _cert(pki.scheduler(1).cert).not_valid_after_utc < now
    with pytest.raises(ValueError):
        rotate_leaf(pki.dir, "ca")
    with pytest.raises(FileNotFoundError):
        rotate_leaf(pki.dir, "scheduler-9")


def test_init_refuses_existing_ca_and_force_replaces_and_prunes(tmp_path: Path) -> None:
    first_ca = init_pki(tmp_path / "p", scheduler_replicas=3).ca_cert.read_bytes()
    with pytest.raises(FileExistsError):
        init_pki(tmp_path / "p")
    assert (tmp_path / "p" / "ca.crt").read_bytes() == first_ca
    second = init_pki(tmp_path / "p", scheduler_replicas=1, overwrite=True)
    assert second.ca_cert.read_bytes() != first_ca
    assert not (tmp_path / "p" / "scheduler-2.crt").exists()
    assert PKI.from_dir(tmp_path / "p") == second


def test_load_ca_signs_more_leaves(pki: PKI) -> None:
    leaf = issue_leaf(load_ca(pki.dir), "extra").certificate
    leaf.verify_directly_issued_by(_cert(pki.ca_cert))


# --- CLI ---------------------------------------------------------------------------------------------------


def test_cli_init_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "pki"
    rc = main(["certs", "init", "--dir", str(d), "--scheduler-replicas", "2", "--node", "n1", "n2",
               "--host", "10.0.0.9", "--ttl", "30d"])  # fmt: skip
    assert rc == 0
    assert (d / "node-n2.crt").is_file() and not (d / "scheduler-3.crt").exists()
    leaf = _cert(d / "scheduler-1.crt")
    assert (
        timedelta(days=30)
        <= leaf.not_valid_after_utc - leaf.not_valid_before_utc
        <= timedelta(days=30, minutes=2)
    )
    capsys.readouterr()

    assert main(["certs", "show", "--dir", str(d)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["FILE", "CN", "O", "NOT-AFTER", "ISSUER"]
    assert lines[1].startswith("ca.crt") and lines[2].startswith("ca-bundle.crt")
    node_line = next(line for line in lines if line.startswith("node-n1.crt"))
    assert node_line.split()[1:3] == ["system:node:n1", "system:nodes"]
    assert node_line.split()[-1] == "kse-ca"
    assert len(lines) == 1 + 2 + len(PKI.from_dir(d).leaves)


def test_cli_refuses_existing_ca_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "pki"
    assert main(["certs", "init", "--dir", str(d)]) == 0
    capsys.readouterr()
    assert main(["certs", "init", "--dir", str(d)]) == 1
    err = capsys.readouterr().err
    assert "already holds a CA" in err and "--force" in err and "Traceback" not in err
    assert main(["certs", "init", "--dir", str(d), "--force"]) == 0


def test_cli_errors_are_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "show", "--dir", str(tmp_path / "missing")]) == 1
    assert "no such directory" in capsys.readouterr().err
    assert main(["certs", "init", "--dir", str(tmp_path / "x"), "--node", "Bad_Name"]) == 2
    assert "invalid node name" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    with pytest.raises(SystemExit) as exc:
        main(["certs", "init", "--dir", str(tmp_path / "y"), "--ttl", "soon"])
    assert exc.value.code == 2
    assert "invalid duration" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "junk.crt").write_text("not a cert")
    assert main(["certs", "show", "--dir", str(tmp_path / "bad")]) == 1
    assert "unreadable" in capsys.readouterr().out


def test_cli_show_flags_expired(pki: PKI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expired_client(pki, tmp_path)
    assert main(["certs", "show", "--dir", str(tmp_path)]) == 0
    assert "(EXPIRED)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("365d", timedelta(days=365)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("90s", timedelta(seconds=90)),
        ("2w", timedelta(weeks=2)),
        ("1.5h", timedelta(minutes=90)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "10", "d", "1x", "0s", "1h 2m"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(Exception, match="duration"):
        parse_duration(text)


# --- real mTLS through grpc ------------------------------------------------------------------------------

WHOAMI = "/kse.test.Whoami/Get"


async def _whoami(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    ident = identity_from_auth_context(context.auth_context())
    assert ident is not None
    return ("|".join([ident.user, *ident.groups])).encode()


def _server_creds(pki: PKI) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials(
        [(pki.apiserver.key.read_bytes(), pki.apiserver.cert.read_bytes())],
        root_certificates=pki.ca_bundle.read_bytes(),
        require_client_auth=True,
    )


@contextlib.asynccontextmanager
async def _mtls_server(pki: PKI) -> AsyncIterator[int]:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "kse.test.Whoami", {"Get": grpc.unary_unary_rpc_method_handler(_whoami)}
            )
        ]
    )
    port = server.add_secure_port("127.0.0.1:0", _server_creds(pki))
    await server.start()
    try:
        yield port
    finally:
        await server.stop(None)


def _client_creds(server_ca: Path, client: CertPaths | None) -> grpc.ChannelCredentials:
    if client is None:
        return grpc.ssl_channel_credentials(root_certificates=server_ca.read_bytes())
    return grpc.ssl_channel_credentials(
        root_certificates=server_ca.read_bytes(),
        private_key=client.key.read_bytes(),
        certificate_chain=client.cert.read_bytes(),
    )


async def _health(port: int, creds: grpc.ChannelCredentials) -> int:
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return int(reply.status)


async def test_mtls_accepts_cluster_client_and_reports_identity(pki: PKI) -> None:
    async with _mtls_server(pki) as port:
        creds = _client_creds(pki.ca_bundle, pki.scheduler(1))
        assert await _health(port, creds) == health_pb2.HealthCheckResponse.SERVING
        async with grpc.aio.secure_channel(
            f"127.0.0.1:{port}", _client_creds(pki.ca_bundle, pki.node("node-a"))
        ) as ch:
            who = await ch.unary_unary(WHOAMI)(b"", timeout=10)
        assert who == b"system:node:node-a|system:nodes"


async def test_mtls_refuses_foreign_missing_and_expired_client_certs(
    pki: PKI, foreign_pki: PKI, expired_client_cert: CertPaths
) -> None:
    async with _mtls_server(pki) as port:
        for client in (foreign_pki.scheduler(1), None, expired_client_cert):
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await _health(port, _client_creds(pki.ca_bundle, client))
            assert exc.value.code() == grpc.StatusCode.UNAVAILABLE, client


async def test_client_refuses_server_from_foreign_ca(pki: PKI, foreign_pki: PKI) -> None:
    async with _mtls_server(pki) as port:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await _health(port, _client_creds(foreign_pki.ca_bundle, foreign_pki.scheduler(1)))
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() - started < 10
