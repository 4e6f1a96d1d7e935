"""Rotation in certs/ (leaves, the three CA phases, renewal) and the client's reloading channel source.

Everything here rewrites a PKI of its own (`own_pki`): the session `pki` is shared and read-only.
The channel-source tests use an in-process grpc server with dynamic credentials (as the API server
has) whose one method answers with the serial of the client cert it saw, so a test can tell which
credentials a channel presents.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import grpc.aio
import pytest
from cryptography import x509

from certs.layout import PKI, CertPaths
from certs.pki import (
    CLOCK_SKEW,
    atomic_write,
    init_pki,
    issue_leaf,
    leaf_backdate,
    leaf_ttl,
    load_ca,
    load_pair,
    make_ca,
    write_pair,
)
from certs.rotation import (
    CAPhase,
    CertRenewer,
    RotationError,
    RotationOrderError,
    ca_rotation_status,
    issued_by,
    rotate,
    rotate_ca,
    rotate_ca_add,
    rotate_ca_remove,
    rotate_ca_switch,
    rotation_deadline,
)
from certs.source import Credentials, FileCredentialSource
from cli.main import main as kse_main
from kse.client.channel import channel_source_from_connection
from kse.client.clientset import Clientset
from kse.client.credentials import ClientCredentialsError, ReloadingChannelSource
from kse.client.errors import is_channel_close
from kse.config import ConnectionFile
from tests.fixtures.polling import until

DEADLINE = 10.0


@pytest.fixture
def own_pki(tmp_path: Path) -> PKI:
    """A PKI this test may rewrite."""
    return init_pki(tmp_path / "pki", scheduler_replicas=2, nodes=["node-a"])


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _bundle(pki: PKI) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pki.ca_bundle.read_bytes())


def _files(d: Path) -> dict[str, bytes]:
    """Every file of a PKI dir and its content (not the lock file)."""
    return {p.name: p.read_bytes() for p in d.iterdir() if not p.name.startswith(".")}


def _lifetime(cert: x509.Certificate) -> timedelta:
    return cert.not_valid_after_utc - cert.not_valid_before_utc


# ---------------------------------------------------------------------------------------------- leaves


def test_rotate_one_identity_new_key_same_ca_same_lifetime(own_pki: PKI) -> None:
    before = _cert(own_pki.scheduler(1).cert)
    other = own_pki.scheduler(2).cert.read_bytes()
    [leaf] = rotate(own_pki.dir, "scheduler-1")
    after = _cert(own_pki.scheduler(1).cert)
    assert leaf.stem == "scheduler-1" and leaf.serial == after.serial_number != before.serial_number
    assert after.subject == before.subject
    assert issued_by(after, _cert(own_pki.ca_cert))
    assert abs(_lifetime(after) - _lifetime(before)) <= timedelta(seconds=2)
    assert own_pki.scheduler(2).cert.read_bytes() == other


def test_rotate_with_ttl_and_all(own_pki: PKI) -> None:
    rotated = rotate(own_pki.dir, "all", ttl=timedelta(minutes=5))
    assert sorted(r.stem for r in rotated) == sorted(own_pki.leaves)
    for paths in own_pki:
        cert = _cert(paths.cert)
        assert leaf_ttl(cert) == timedelta(minutes=5)
        assert issued_by(cert, _cert(own_pki.ca_cert))
    # A short-lived identity stays short-lived when rotated without --ttl.
    rotate(own_pki.dir, "admin")
    assert leaf_ttl(_cert(own_pki.admin.cert)) == timedelta(minutes=5)


def test_rotate_refuses_unknown_and_ca(own_pki: PKI) -> None:
    with pytest.raises(RotationError, match=r"no identity 'nope'.*scheduler-1"):
        rotate(own_pki.dir, "nope")
    for stem in ("ca", "ca-next", "ca-prev"):
        with pytest.raises(RotationError, match="rotate-ca"):
            rotate(own_pki.dir, stem)


def test_short_lived_leaves_are_backdated_by_a_fraction_of_their_lifetime() -> None:
    assert leaf_backdate(timedelta(days=1)) == CLOCK_SKEW
    assert leaf_backdate(timedelta(minutes=2)) == timedelta(seconds=12)
    assert leaf_backdate(timedelta(seconds=3)) == timedelta(seconds=1)
    ca = make_ca()
    for ttl in (
        timedelta(seconds=1),
        timedelta(seconds=3),
        timedelta(seconds=11),
        timedelta(minutes=2),
        timedelta(hours=3),
        timedelta(days=365),
    ):
        assert leaf_ttl(issue_leaf(ca, "u", ttl=ttl).certificate) == ttl


def test_rotation_deadline_is_70_to_90_percent_of_the_lifetime() -> None:
    cert = issue_leaf(make_ca(), "u", ttl=timedelta(hours=10)).certificate
    start, life = cert.not_valid_before_utc, _lifetime(cert)
    rng = random.Random(7)
    fractions = [(rotation_deadline(cert, rng) - start) / life for _ in range(500)]
    assert all(0.7 <= f <= 0.9 for f in fractions)
    assert min(fractions) < 0.72 and max(fractions) > 0.88  # jittered over the whole range


# ---------------------------------------------------------------------------------------------- CA phases


def test_ca_rotation_phases_in_order(own_pki: PKI) -> None:
    d = own_pki.dir
    old_ca = _cert(own_pki.ca_cert)
    lifetimes = {p.stem: leaf_ttl(_cert(p.cert)) for p in own_pki}
    leaves_before = {p.stem: p.cert.read_bytes() for p in own_pki}
    assert ca_rotation_status(d).phase is CAPhase.IDLE

    added = rotate_ca_add(d)
    new_ca = _cert(d / "ca-next.crt")
    assert added.changed and added.status.phase is CAPhase.ADDED
    assert [c.serial_number for c in _bundle(own_pki)] == [old_ca.serial_number, new_ca.serial_number]
    assert _cert(own_pki.ca_cert) == old_ca
    assert {p.stem: p.cert.read_bytes() for p in own_pki} == leaves_before  # nothing reissued yet
    assert sorted(PKI.from_dir(d).leaves) == sorted(own_pki.leaves)  # CA files are not identities

    switched = rotate_ca_switch(d)
    assert switched.changed and switched.status.phase is CAPhase.SWITCHED
    assert _cert(own_pki.ca_cert) == new_ca and load_ca(d).certificate == new_ca
    assert _cert(d / "ca-prev.crt") == old_ca
    assert not (d / "ca-next.crt").exists() and not (d / "ca-next.key").exists()
    assert not (d / "ca-prev.key").exists()
    assert [c.serial_number for c in _bundle(own_pki)] == [old_ca.serial_number, new_ca.serial_number]
    for paths in own_pki:
        cert = _cert(paths.cert)
        assert issued_by(cert, new_ca) and not issued_by(cert, old_ca), paths.stem
        assert leaf_ttl(cert) == lifetimes[paths.stem]
    assert switched.status.leaves_not_on_ca == ()

    removed = rotate_ca_remove(d)
    assert removed.changed and removed.status.phase is CAPhase.IDLE
    assert [c.serial_number for c in _bundle(own_pki)] == [new_ca.serial_number]
    assert not (d / "ca-prev.crt").exists()


def test_each_phase_is_idempotent(own_pki: PKI) -> None:
    d = own_pki.dir
    rotate_ca_add(d)
    snapshot = _files(d)
    again = rotate_ca_add(d)
    assert not again.changed
    assert _files(d) == snapshot

    rotate_ca_switch(d)
    snapshot = _files(d)
    assert not rotate_ca_switch(d).changed
    assert _files(d) == snapshot

    rotate_ca_remove(d)
    snapshot = _files(d)
    assert not rotate_ca_remove(d).changed
    assert _files(d) == snapshot


def test_phases_out_of_order_are_refused_and_change_nothing(own_pki: PKI) -> None:
    d = own_pki.dir

    before = _files(d)
    with pytest.raises(RotationOrderError, match="run `--phase add` first"):
        rotate_ca_switch(d)
    assert _files(d) == before
    rotate_ca_add(d)
    before = _files(d)
    with pytest.raises(RotationOrderError, match="run `--phase switch` first"):
        rotate_ca_remove(d)
    assert _files(d) == before
    rotate_ca_switch(d)
    before = _files(d)
    with pytest.raises(RotationOrderError, match="run `--phase remove`"):
        rotate_ca_add(d)
    assert _files(d) == before


def test_interrupted_switch_is_finished_by_running_switch_again(own_pki: PKI) -> None:
    d = own_pki.dir
    rotate_ca_add(d)
    old_ca, new_ca = load_ca(d), load_pair(d / "ca-next.crt", d / "ca-next.key")
    # The switch died after keeping the old CA and installing the new one, before cleaning up.
    atomic_write(d / "ca-prev.crt", old_ca.cert_pem)
    write_pair(CertPaths.in_dir(d, "ca"), new_ca)
    assert ca_rotation_status(d).phase is CAPhase.SWITCHING
    with pytest.raises(RotationOrderError, match="interrupted"):
        rotate_ca_remove(d)
    with pytest.raises(RotationOrderError, match="interrupted"):
        rotate_ca_add(d)
    result = rotate_ca_switch(d)
    assert result.status.phase is CAPhase.SWITCHED and result.status.leaves_not_on_ca == ()
    assert _cert(own_pki.ca_cert) == new_ca.certificate and _cert(d / "ca-prev.crt") == old_ca.certificate
    rotate_ca_remove(d)
    assert [c.serial_number for c in _bundle(own_pki)] == [new_ca.certificate.serial_number]


def test_interrupted_add_makes_a_whole_new_ca(own_pki: PKI) -> None:
    d = own_pki.dir
    atomic_write(d / "ca-next.key", make_ca().key_pem)  # the key landed, the cert did not
    result = rotate_ca_add(d)
    assert result.changed
    nxt = load_pair(d / "ca-next.crt", d / "ca-next.key")
    assert nxt.certificate.public_key() == nxt.private_key.public_key()
    assert len(_bundle(own_pki)) == 2


def test_remove_refuses_while_a_leaf_is_on_the_old_ca(own_pki: PKI) -> None:
    d = own_pki.dir
    old_pair = load_pair(own_pki.scheduler(1).cert, own_pki.scheduler(1).key)
    rotate_ca_add(d)
    rotate_ca_switch(d)
    write_pair(own_pki.scheduler(1), old_pair)  # e.g. restored from a backup
    assert ca_rotation_status(d).leaves_not_on_ca == ("scheduler-1",)
    with pytest.raises(RotationError, match="still signed by the old CA: scheduler-1"):
        rotate_ca_remove(d)
    assert rotate_ca_switch(d).changed  # reissues it
    assert rotate_ca_remove(d).changed


def test_remove_without_rotation_leaves_a_foreign_bundle_alone(own_pki: PKI) -> None:
    extra = make_ca("someone-else").cert_pem
    atomic_write(own_pki.ca_bundle, own_pki.ca_cert.read_bytes() + extra)
    with pytest.raises(RotationError, match="not touching"):
        rotate_ca_remove(own_pki.dir)
    with pytest.raises(ValueError, match="unknown CA rotation phase"):
        rotate_ca(own_pki.dir, "finish")


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_rotate_and_rotate_ca(own_pki: PKI, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(own_pki.dir)
    before = _cert(own_pki.scheduler(1).cert).serial_number
    assert kse_main(["certs", "rotate", "--dir", d, "--identity", "scheduler-1", "--ttl", "10m"]) == 0
    out = capsys.readouterr().out
    after = _cert(own_pki.scheduler(1).cert)
    assert after.serial_number != before and f"rotated scheduler-1: serial {after.serial_number:x}" in out
    assert leaf_ttl(after) == timedelta(minutes=10)

    assert kse_main(["certs", "rotate", "--dir", d, "--identity", "nobody"]) == 1
    err = capsys.readouterr().err
    assert "no identity 'nobody'" in err and "Traceback" not in err

    assert kse_main(["certs", "rotate-ca", "--dir", d, "--phase", "remove"]) == 0
    assert "already done" in capsys.readouterr().out
    assert kse_main(["certs", "rotate-ca", "--dir", d, "--phase", "switch"]) == 1
    err = capsys.readouterr().err
    assert "--phase switch refused" in err and "--phase add` first" in err
    for phase in ("add", "add", "switch"):
        assert kse_main(["certs", "rotate-ca", "--dir", d, "--phase", phase]) == 0
    out = capsys.readouterr().out
    assert "add: new CA" in out and "add: already done" in out and "switch: reissued" in out
    assert "next: --phase remove" in out
    assert kse_main(["certs", "show", "--dir", d]) == 0
    out = capsys.readouterr().out
    assert "ca-prev.crt" in out and "next: --phase remove" in out
    assert kse_main(["certs", "rotate-ca", "--dir", d, "--phase", "remove"]) == 0
    assert "no CA rotation in progress" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- renewal


async def test_cert_renewer_renews_within_70_to_90_percent(own_pki: PKI) -> None:
    paths = own_pki.scheduler(1)
    rotate(own_pki.dir, "scheduler-1", ttl=timedelta(seconds=3))
    first = _cert(paths.cert)
    async with CertRenewer(own_pki.dir, "scheduler-1", rng=random.Random(1)) as renewer:
        await until(lambda: len(renewer.history) >= 1, "a renewal")
    [(serial, deadline, renewed_at), *_] = renewer.history
    assert serial == first.serial_number
    start, life = first.not_valid_before_utc, _lifetime(first)
    assert 0.7 <= (deadline - start) / life <= 0.9
    assert deadline <= renewed_at < first.not_valid_after_utc
    second = _cert(paths.cert)
    assert leaf_ttl(second) == timedelta(seconds=3) and renewer.renewals >= 1
    with pytest.raises(ValueError):
        CertRenewer(own_pki.dir, "ca")


# ------------------------------------------------------------------------------------------ channel source

SERIAL = "/kse.test.Rotation/Serial"  # unary: the serial of the client cert, in hex
SLOW = "/kse.test.Rotation/Slow"  # unary: answers once the test releases it
STREAM = "/kse.test.Rotation/Stream"  # server stream: never ends by itself


class _Server:
    def __init__(self, pki: PKI) -> None:
        self.pki = pki
        self.release = asyncio.Event()
        self.slow_started = 0
        self.server = grpc.aio.server()
        self.port = 0

    async def _serial(self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        pem = context.auth_context()["x509_pem_cert"][0]
        return f"{x509.load_pem_x509_certificate(pem).serial_number:x}".encode()

    async def _slow(self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        self.slow_started += 1
        await self.release.wait()
        return await self._serial(request, context)

    async def _stream(
        self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        yield b"first"
        await asyncio.Event().wait()

    async def __aenter__(self) -> _Server:
        source = FileCredentialSource.from_paths(self.pki.apiserver)

        def config(creds: Credentials) -> grpc.ServerCertificateConfiguration:
            return grpc.ssl_server_certificate_configuration([(creds.key_pem, creds.cert_pem)], creds.ca_pem)

        def fetch() -> grpc.ServerCertificateConfiguration | None:
            creds = source.poll()
            return None if creds is None else config(creds)

        handlers = {
            "Serial": grpc.unary_unary_rpc_method_handler(self._serial),
            "Slow": grpc.unary_unary_rpc_method_handler(self._slow),
            "Stream": grpc.unary_stream_rpc_method_handler(self._stream),
        }
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("kse.test.Rotation", handlers)]
        )
        creds = grpc.dynamic_ssl_server_credentials(config(source.load()), fetch, True)
        self.port = self.server.add_secure_port("127.0.0.1:0", creds)
        await self.server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await self.server.stop(None)

    def source(self, identity: str = "scheduler-1", **kwargs: object) -> ReloadingChannelSource:
        p = self.pki[identity]
        conn = ConnectionFile.for_identity(f"127.0.0.1:{self.port}", p.cert, p.key, p.ca_bundle)
        return channel_source_from_connection(conn, **kwargs)


async def _serial_of(channel: grpc.aio.Channel, method: str = SERIAL) -> int:
    return int(await channel.unary_unary(method)(b"", timeout=DEADLINE), 16)


async def test_source_swaps_channel_when_files_change(own_pki: PKI) -> None:
    async with _Server(own_pki) as server, server.source(poll_interval=None) as source:
        first = source.current()
        assert await _serial_of(first) == _cert(own_pki.scheduler(1).cert).serial_number
        assert source.reload() is False and source.current() is first

        [leaf] = rotate(own_pki.dir, "scheduler-1")
        assert source.reload() is True
        second = source.current()
        assert second is not first and source.credentials.version == 2
        assert source.certificate.serial_number == leaf.serial
        assert await _serial_of(second) == leaf.serial
        await until(lambda: source.stats.retired == 1, "the idle old channel closed")
        with pytest.raises(grpc.aio.UsageError):
            await _serial_of(first)
    assert source.closed
    with pytest.raises(grpc.aio.UsageError):
        source.current()


async def test_a_source_first_used_after_a_rotation_starts_on_the_new_files(own_pki: PKI) -> None:
    """The controller manager builds its main connection at start and uses it only once it leads:
    the first call must not go out on the credentials read at construction."""
    async with _Server(own_pki) as server:
        source = server.source(poll_interval=None)  # built, not yet used (nothing polls)
        try:
            [leaf] = rotate(own_pki.dir, "scheduler-1")
            assert await _serial_of(source.current()) == leaf.serial
            assert source.credentials.version == 2
        finally:
            await source.close()


async def test_source_polls_and_ignores_torn_pairs(own_pki: PKI) -> None:
    paths = own_pki.scheduler(1)
    async with _Server(own_pki) as server, server.source(poll_interval=0.02) as source:
        first = source.current()
        pair = issue_leaf(load_ca(own_pki.dir), "system:kube-scheduler")
        atomic_write(paths.key, pair.key_pem, 0o600)  # key first: a torn pair until the cert lands
        await until(lambda: "does not match" in (source.reload_error or ""), "the torn pair seen")
        assert source.current() is first and source.stats.swaps == 0
        atomic_write(paths.cert, pair.cert_pem)
        await until(lambda: source.current() is not first, "the poll picked the pair up")
        assert await _serial_of(source.current()) == pair.serial


async def test_in_flight_unary_call_survives_the_swap_and_streams_end(own_pki: PKI) -> None:
    async with _Server(own_pki) as server, server.source(poll_interval=None, close_grace=DEADLINE) as source:
        old = source.current()
        stream = old.unary_stream(STREAM)(b"")
        assert await stream.read() == b"first"
        slow = asyncio.create_task(_serial_of(old, SLOW))
        await until(lambda: server.slow_started == 1, "the slow call reached the server")

        rotate(own_pki.dir, "scheduler-1")
        assert source.reload()
        new = source.current()
        assert await _serial_of(new) == source.certificate.serial_number
        # The old channel stays open while its unary call runs (the stream does not hold it).
        await until(lambda: source.stats.drained_calls == 1, "the retirement waiting for the call")
        assert source.retiring == 1 and not slow.done()

        server.release.set()
        assert await slow  # answered on the old channel, with the old cert
        await until(lambda: source.stats.retired == 1, "the old channel closed after its call")
        assert source.stats.drained_calls == 1 and source.stats.cut_calls == 0
        try:
            await stream.read()
        except asyncio.CancelledError as e:  # how grpc.aio ends a stream whose channel closed
            assert is_channel_close(e)
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.CANCELLED
        else:
            raise AssertionError("the stream on the retired channel did not end")


async def test_renewal_point_calls_the_renewer_and_swaps_before_expiry(
    own_pki: PKI, caplog: pytest.LogCaptureFixture
) -> None:
    rotate(own_pki.dir, "scheduler-1", ttl=timedelta(seconds=3))
    renewer = CertRenewer(own_pki.dir, "scheduler-1")
    async with (
        _Server(own_pki) as server,
        server.source(poll_interval=None, renew=renewer.renew_now) as source,
    ):
        cs = Clientset(source)
        assert cs.channel_source is source
        first = source.certificate
        renew_at = source.renew_at
        assert 0.7 <= (renew_at - first.not_valid_before_utc) / _lifetime(first) <= 0.9
        await until(lambda: source.stats.swaps == 1, "renewed at the renewal point")
        assert renew_at < first.not_valid_after_utc
        assert source.stats.renewal_points == 1 and renewer.renewals == 1
        assert await _serial_of(source.current()) == source.certificate.serial_number != first.serial_number

    # Without a renewer, nothing rewrites the files: the renewal point passes (a warning, unless the
    # cert is already expired by then), then an error once it has expired.
    rotate(own_pki.dir, "scheduler-1", ttl=timedelta(seconds=1))
    caplog.set_level(logging.WARNING, logger="kse.client.credentials")
    async with _Server(own_pki) as server, server.source(poll_interval=None) as source:
        expires = source.certificate.not_valid_after_utc
        await until(lambda: "expired at" in caplog.text, "the expiry error", within=5)
        assert datetime.now(UTC) >= expires
        assert source.stats.renewal_points == 1 and source.stats.swaps == 0


async def test_missing_files_are_an_os_error(tmp_path: Path, own_pki: PKI) -> None:
    conn = ConnectionFile.for_identity(
        "127.0.0.1:1", tmp_path / "no.crt", tmp_path / "no.key", own_pki.ca_bundle
    )
    with pytest.raises(ClientCredentialsError) as e:
        channel_source_from_connection(conn)
    assert isinstance(e.value, OSError)


async def test_source_accepts_a_connection_file_path_and_closes_like_a_channel(
    own_pki: PKI, tmp_path: Path
) -> None:
    async with _Server(own_pki) as server:
        p = own_pki.admin
        path = tmp_path / "conn.json"
        ConnectionFile.for_identity(f"127.0.0.1:{server.port}", p.cert, p.key, p.ca_bundle).save(path)
        source = channel_source_from_connection(path)
        await source.channel_ready()
        assert await _serial_of(source.current()) == _cert(p.cert).serial_number
        await source.close(grace=None)
        await source.close()  # idempotent, as grpc's
        assert source.closed
        with pytest.raises(grpc.aio.UsageError):
            source.current()
