"""Connection files (kse.config): a kubeconfig given in their place is named as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kse.config import ConfigError, ConnectionFile, is_kubeconfig

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: kse
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: ca.crt}
users:
- name: admin
  user: {client-certificate: admin.crt, client-key: admin.key}
contexts:
- name: kse
  context: {cluster: kse, user: admin}
current-context: kse
"""


@pytest.mark.parametrize("as_json", [False, True])
def test_a_kubeconfig_is_named_as_such(tmp_path: Path, as_json: bool) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(yaml.safe_load(KUBECONFIG)) if as_json else KUBECONFIG)
    with pytest.raises(ConfigError) as info:
        ConnectionFile.load(path)
    message = str(info.value)
    assert message.startswith(f"{path} is a kubeconfig (for kubectl and the HTTP API); ")
    assert "kse's own commands need a connection file such as ~/.kse/config.json" in message


def test_a_connection_file_still_loads_and_garbage_still_says_so(tmp_path: Path) -> None:
    good = tmp_path / "config.json"
    ConnectionFile("127.0.0.1:1", Path("ca.crt"), Path("a.crt"), Path("a.key")).save(good)
    assert ConnectionFile.load(good).server == "127.0.0.1:1"
    bad = tmp_path / "bad.json"
    bad.write_text("kind: Config\n")  # YAML, but no clusters: not a kubeconfig either
    with pytest.raises(ConfigError, match="cannot read connection file"):
        ConnectionFile.load(bad)


def test_is_kubeconfig() -> None:
    assert is_kubeconfig(KUBECONFIG)
    assert not is_kubeconfig('{"server": "x", "ca_file": "c"}')
    assert not is_kubeconfig("apiVersion: v1\nkind: Pod\n")
    assert not is_kubeconfig(": : not yaml [")
