"""`kse kubeconfig`: a kubeconfig for any client identity of a PKI (no server needed to write one).

* the user is the certificate's CN, the files are named by absolute path (or, with --relative,
  relative to the kubeconfig's directory, as kubectl resolves them), the file is mode 0600;
* the server comes from --server, else the data dir's cluster.json (`apiserver_http`), else the
  `http_address` of its config.json; with none, the error says where it looked;
* an unknown identity, or a serving-only one, is refused listing the known client identities.
"""

from __future__ import annotations

import contextlib
import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.layout import PKI
from certs.pki import init_pki
from cli import main as kse_main
from harness.clusterfile import ClusterFile, cluster_file_path
from kse.config import ConnectionFile


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("kse")
    init_pki(d / "pki", scheduler_replicas=1, nodes=["a"])
    return d


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = kse_main.main(["kubeconfig", *argv])
    return code, out.getvalue(), err.getvalue()


def _user(cfg: dict[str, Any]) -> dict[str, Any]:
    (user,) = cfg["users"]
    return user  # type: ignore[no-any-return]


def test_stdout_names_the_cn_and_the_files_by_absolute_path(data_dir: Path) -> None:
    code, out, err = run("--identity", "node-a", "--data-dir", str(data_dir), "--server", "127.0.0.1:6444")
    assert code == 0, err
    cfg = yaml.safe_load(out)
    assert cfg["kind"] == "Config" and cfg["current-context"] == "system:node:a@kse"
    (cluster,) = cfg["clusters"]
    assert cluster["cluster"]["server"] == "https://127.0.0.1:6444"
    assert cluster["cluster"]["tls-server-name"] == "localhost"
    assert cluster["cluster"]["certificate-authority"] == str(data_dir / "pki" / "ca-bundle.crt")
    user = _user(cfg)
    assert user["name"] == "system:node:a"
    assert user["user"] == {
        "client-certificate": str(data_dir / "pki" / "node-a.crt"),
        "client-key": str(data_dir / "pki" / "node-a.key"),
    }


def test_out_is_private_and_relative_paths_resolve_from_its_directory(data_dir: Path, tmp_path: Path) -> None:
    out = data_dir / "kubeconfig-workload"
    code, _, err = run("--identity", "workload", "--data-dir", str(data_dir), "--server",
                       "https://localhost:6444", "--out", str(out), "--relative")  # fmt: skip
    assert code == 0, err
    assert f"export KUBECONFIG={out}" in err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    user = _user(yaml.safe_load(out.read_text()))
    assert user["name"] == "kse:workload"
    assert user["user"]["client-certificate"] == "pki/workload.crt"
    assert (out.parent / user["user"]["client-key"]).is_file()
    code, _, err = run("--identity", "workload", "--data-dir", str(data_dir), "--server", "h:1", "--relative")
    assert code == 1 and "--relative needs --out" in err


def test_the_server_comes_from_the_running_cluster_then_the_connection_file(tmp_path: Path) -> None:
    d = tmp_path / "kse"
    init_pki(d / "pki", scheduler_replicas=1)
    code, _, err = run("--identity", "admin", "--data-dir", str(d))
    assert code == 1
    assert "no HTTP address" in err and "cluster.json" in err and "config.json" in err and "--server" in err
    pki = PKI.from_dir(d / "pki")
    conn = ConnectionFile.for_identity("127.0.0.1:1", pki.admin.cert, pki.admin.key, pki.ca_bundle)
    ConnectionFile(**{**conn.__dict__, "http_address": "127.0.0.1:2"}).save(d / "config.json")
    code, out, err = run("--identity", "admin", "--data-dir", str(d))
    assert code == 0, err
    assert yaml.safe_load(out)["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:2"
    running = ClusterFile(
        data_dir=d, pki_dir=d / "pki", run_dir=d / "run", logs_dir=d / "logs",
        connection_file=d / "config.json", connections_dir=d / "connections",
        apiserver="127.0.0.1:1", apiserver_http="127.0.0.1:3",
    )  # fmt: skip
    running.write(cluster_file_path(d))
    code, out, err = run("--identity", "admin", "--data-dir", str(d))
    assert code == 0, err
    assert yaml.safe_load(out)["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:3"
    code, out, _ = run("--identity", "admin", "--data-dir", str(d), "--server", "https://x:4")
    assert yaml.safe_load(out)["clusters"][0]["cluster"]["server"] == "https://x:4"
    # A cluster.json of the wrong shape is named, not a traceback.
    cluster_file_path(d).write_text(json.dumps({"processes": {}, "apiserver_http": 7}))
    code, _, err = run("--identity", "admin", "--data-dir", str(d))
    assert code == 1 and "apiserver_http" in err


@pytest.mark.parametrize(
    ("identity", "why"), [("nope", "not in the PKI"), ("apiserver", "a serving certificate")]
)
def test_an_unknown_identity_lists_the_known_ones(data_dir: Path, identity: str, why: str) -> None:
    code, out, err = run("--identity", identity, "--data-dir", str(data_dir), "--server", "h:1")
    assert code == 1 and out == ""
    assert f"unknown identity {identity!r}" in err and why in err
    known = err.split("known identities: ", 1)[1].strip().split(", ")
    assert {"admin", "node-a", "scheduler-1", "workload", "nodesim", "chaos"} <= set(known)
    assert "apiserver" not in known


def test_bad_combinations_are_named(data_dir: Path, tmp_path: Path) -> None:
    code, _, err = run("--identity", "admin", "--pki-dir", str(data_dir / "pki"))
    assert code == 1 and "--pki-dir needs --server" in err
    code, _, err = run("--identity", "admin", "--data-dir", str(tmp_path / "none"), "--server", "h:1")
    assert code == 1 and "no CA in" in err
    code, _, err = run("--identity", "admin", "--data-dir", str(data_dir), "--server", "http://h:1")
    assert code == 1 and "https://" in err


def test_datadir_init_writes_a_relative_kubeconfig_only_when_asked(tmp_path: Path) -> None:
    base = ["datadir", "init", "--data-dir", str(tmp_path), "--server", "apiserver:6443"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert kse_main.main(base) == 0
    assert not (tmp_path / "kubeconfig").exists()
    assert "kubeconfig" not in json.loads((tmp_path / "run" / "cluster.json").read_text())
    with contextlib.redirect_stdout(io.StringIO()):
        assert kse_main.main([*base, "--kubeconfig-server", "https://localhost:6444"]) == 0
    cfg = yaml.safe_load((tmp_path / "kubeconfig").read_text())
    assert cfg["clusters"][0]["cluster"] == {
        "server": "https://localhost:6444",
        "certificate-authority": "pki/ca-bundle.crt",
        "tls-server-name": "localhost",
    }
    assert _user(cfg)["user"]["client-key"] == "pki/admin.key"
    assert stat.S_IMODE((tmp_path / "kubeconfig").stat().st_mode) == 0o600


@pytest.mark.parametrize("url", ["http://h:1", "https://h", "h:1", "https://h:1/x", "https://h:99999"])
def test_datadir_init_refuses_a_bad_kubeconfig_server(tmp_path: Path, url: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        kse_main.main(
            ["datadir", "init", "--data-dir", str(tmp_path), "--server", "a:1", "--kubeconfig-server", url]
        )
    assert e.value.code == 2 and "--kubeconfig-server" in err.getvalue()
    assert not tmp_path.joinpath("pki").exists()
