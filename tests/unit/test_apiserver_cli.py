"""`kse apiserver` flag handling and the connection file (no server started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver_mock import cli
from kse.config import ConfigError, ConnectionFile, resolve


def run_main(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    return int(e.value.code), capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "--etcd-endpoints"),
        (["--etcd-endpoints", "http://x:1", "--listen", "nope"], "expected HOST:PORT"),
        (["--etcd-endpoints", "http://x:1", "--watch-cache-capacity", "0"], "must be >= 1"),
        (["--etcd-endpoints", "http://x:1", "--bookmark-interval", "-1"], "must be > 0"),
        (["--etcd-endpoints", "http://x:1"], "--tls-cert, --tls-key, --client-ca required"),
        (
            [
                "--etcd-endpoints",
                "http://x:1",
                "--tls-cert",
                "/nope.crt",
                "--tls-key",
                "/k",
                "--client-ca",
                "/c",
            ],
            "no such file",
        ),
        (["--etcd-endpoints", "http://x:1", "--log-level", "loud"], "invalid choice"),
        (["--etcd-endpoints", "http://x:1", "--audit-log-maxsize", "-1"], "--audit-log-maxsize"),
        (
            ["--etcd-endpoints", "http://x:1", "--etcd-compaction-interval", "soon"],
            "--etcd-compaction-interval",
        ),
    ],
)
def test_bad_flags_exit_2(argv, needle, capsys):
    code, err = run_main(argv, capsys)
    assert code == 2
    assert needle in err


def test_connection_file_needs_pki_dir(tmp_path, capsys):
    for name in ("a.crt", "a.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    code, err = run_main(
        [
            "--etcd-endpoints",
            "http://x:1",
            "--tls-cert",
            str(tmp_path / "a.crt"),
            "--tls-key",
            str(tmp_path / "a.key"),
            "--client-ca",
            str(tmp_path / "ca.crt"),
            "--connection-file",
            str(tmp_path / "c.json"),
        ],
        capsys,
    )
    assert code == 2 and "--connection-file needs --pki-dir" in err


def test_pki_dir_fills_in_paths(pki):
    parser = cli.build_parser()
    args = parser.parse_args(
        ["--etcd-endpoints", "https://127.0.0.1:1", "--pki-dir", str(pki.dir), "--prefix", "/x/"]
    )
    cfg = cli.config_from_args(parser, args)
    assert cfg.tls_cert == pki.apiserver.cert and cfg.client_ca == pki.ca_bundle
    assert cfg.etcd_tls is not None and cfg.etcd_tls.cert_file == pki.apiserver_etcd_client.cert
    assert cfg.prefix == "/x"


def test_fencing_and_audit_flags(pki, tmp_path: Path):
    parser = cli.build_parser()
    base = ["--etcd-endpoints", "http://127.0.0.1:1", "--pki-dir", str(pki.dir)]
    cfg = cli.config_from_args(parser, parser.parse_args(base))
    assert cfg.fencing is True and cfg.require_fence_for == () and cfg.audit_log is None
    args = parser.parse_args(
        [
            *base,
            "--fencing",
            "off",
            "--require-fence-for",
            "system:kube-scheduler",
            "--require-fence-for",
            "kse:other",
            "--require-fence-for",
            "system:kube-scheduler",
            "--audit-log",
            str(tmp_path / "audit.jsonl"),
        ]
    )
    cfg = cli.config_from_args(parser, args)
    assert cfg.fencing is False
    assert cfg.require_fence_for == ("system:kube-scheduler", "kse:other")
    assert cfg.audit_log == tmp_path / "audit.jsonl"
    assert cfg.audit_log_max_bytes == 0 and cfg.audit_log_max_backups == 0  # upstream's: never rotate
    args = parser.parse_args([*base, "--audit-log-maxsize", "100", "--audit-log-maxbackup", "3"])
    cfg = cli.config_from_args(parser, args)
    assert cfg.audit_log_max_bytes == 100 * 1024 * 1024 and cfg.audit_log_max_backups == 3


def test_etcd_compaction_interval_flag(pki):
    parser = cli.build_parser()
    base = ["--etcd-endpoints", "http://127.0.0.1:1", "--pki-dir", str(pki.dir)]
    assert cli.config_from_args(parser, parser.parse_args(base)).etcd_compaction_interval == 300.0
    args = parser.parse_args([*base, "--etcd-compaction-interval", "0"])
    assert cli.config_from_args(parser, args).etcd_compaction_interval == 0.0


def test_fencing_flag_takes_on_or_off(capsys):
    code, err = run_main(["--etcd-endpoints", "http://x:1", "--fencing", "maybe"], capsys)
    assert code == 2 and "invalid choice" in err


def test_client_address():
    assert cli.client_address("0.0.0.0:1234") == "127.0.0.1:1234"
    assert cli.client_address("127.0.0.1:5") == "127.0.0.1:5"


def test_connection_file_round_trip(tmp_path: Path):
    conn = ConnectionFile("127.0.0.1:1", tmp_path / "ca.crt", tmp_path / "a.crt", tmp_path / "a.key")
    conn.save(tmp_path / "sub" / "config.json")
    assert ConnectionFile.load(tmp_path / "sub" / "config.json") == conn
    (tmp_path / "rel.json").write_text(
        '{"server": "h:1", "ca_file": "ca.crt", "cert_file": "a.crt", "key_file": "a.key"}'
    )
    rel = ConnectionFile.load(tmp_path / "rel.json")
    assert rel.ca_file == tmp_path / "ca.crt" and rel.tls_server_name == "localhost"


def test_connection_file_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        ConnectionFile.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"server": "h:1"}')
    with pytest.raises(ConfigError, match="missing ca_file, cert_file, key_file"):
        ConnectionFile.load(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{")
    with pytest.raises(ConfigError, match="cannot read"):
        ConnectionFile.load(tmp_path / "junk.json")


def test_resolve_order(tmp_path: Path, monkeypatch):
    flag = tmp_path / "flag.json"
    env = tmp_path / "env.json"
    home = tmp_path / "home"
    for p in (flag, env):
        p.write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KSE_CONFIG", str(env))
    assert resolve(str(flag)) == flag
    assert resolve(None) == env
    monkeypatch.delenv("KSE_CONFIG")
    with pytest.raises(ConfigError, match="no connection file: pass --config PATH"):
        resolve(None)
    (home / ".kse").mkdir(parents=True)
    (home / ".kse" / "config.json").write_text("{}")
    assert resolve(None) == home / ".kse" / "config.json"
    with pytest.raises(ConfigError, match="from --config"):
        resolve(str(tmp_path / "nope.json"))


def test_http_listen_flag(pki, capsys):
    parser = cli.build_parser()
    base = ["--etcd-endpoints", "http://127.0.0.1:1", "--pki-dir", str(pki.dir)]
    cfg = cli.config_from_args(parser, parser.parse_args(base))
    assert cfg.http_listen is None and cfg.http_max_inflight == 400
    cfg = cli.config_from_args(
        parser, parser.parse_args([*base, "--http-listen", "127.0.0.1:0", "--http-max-inflight", "7"])
    )
    assert cfg.http_listen == "127.0.0.1:0" and cfg.http_max_inflight == 7
    code, err = run_main([*base, "--http-listen", "nope"], capsys)
    assert code == 2 and "expected HOST:PORT" in err


def test_connection_file_http_address_only_when_served(tmp_path: Path):
    conn = ConnectionFile("127.0.0.1:1", tmp_path / "ca.crt", tmp_path / "a.crt", tmp_path / "a.key")
    assert "http_address" not in conn.to_dict()
    with_http = ConnectionFile(
        "127.0.0.1:1", tmp_path / "ca.crt", tmp_path / "a.crt", tmp_path / "a.key", http_address="127.0.0.1:2"
    )
    with_http.save(tmp_path / "c.json")
    assert ConnectionFile.load(tmp_path / "c.json") == with_http
