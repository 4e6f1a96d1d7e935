"""The connection file: how a CLI or a component finds the API server and which identity it uses.

It is the kubeconfig of kse, reduced to one cluster and one user: the server address, the CA bundle
that verifies the server, the client's cert and key, and the name the server's certificate is
checked against (the address is usually `127.0.0.1:PORT`, the serving cert names `localhost`).

Lookup order (`resolve`), as kubectl's: the `--config` flag, then `$KSE_CONFIG`, then
`~/.kse/config.json`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from kse.fileio import write_atomic

ENV_VAR = "KSE_CONFIG"
DEFAULT_PATH = Path("~/.kse/config.json")


class ConfigError(Exception):
    """No usable connection file: missing, unreadable, or malformed. The message says which and where."""


@dataclass(frozen=True)
class ConnectionFile:
    """Where the API server is and which client identity to present to it.

    Relative paths in the file are relative to the file's directory, so a data dir can be moved.
    """

    server: str
    ca_file: Path
    cert_file: Path
    key_file: Path
    tls_server_name: str = "localhost"
    # HOST:PORT of the Kubernetes HTTP API (`kse apiserver --http-listen`); "" when not served.
    http_address: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ConnectionFile:
        path = Path(path).expanduser()
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ConfigError(f"connection file {path} does not exist") from None
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read connection file {path}: {e}") from None
        if is_kubeconfig(text):
            raise ConfigError(
                f"{path} is a kubeconfig (for kubectl and the HTTP API); kse's own commands need a "
                f"connection file such as {DEFAULT_PATH} (`kse up` writes one into its data dir)"
            )
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"cannot read connection file {path}: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"connection file {path}: expected a JSON object")
        missing = [k for k in ("server", "ca_file", "cert_file", "key_file") if not raw.get(k)]
        if missing:
            raise ConfigError(f"connection file {path}: missing {', '.join(missing)}")
        base = path.parent

        def _path(value: object) -> Path:
            p = Path(str(value)).expanduser()
            return p if p.is_absolute() else (base / p)

        return cls(
            server=str(raw["server"]),
            ca_file=_path(raw["ca_file"]),
            cert_file=_path(raw["cert_file"]),
            key_file=_path(raw["key_file"]),
            tls_server_name=str(raw.get("tls_server_name") or "localhost"),
            http_address=str(raw.get("http_address") or ""),
        )

    @classmethod
    def for_identity(
        cls, server: str, cert_file: Path, key_file: Path, ca_file: Path, tls_server_name: str = "localhost"
    ) -> ConnectionFile:
        """A connection for one identity's files (e.g. a `certs.layout.CertPaths`' cert, key, bundle)."""
        return cls(server, Path(ca_file), Path(cert_file), Path(key_file), tls_server_name)

    def to_dict(self) -> dict[str, str]:
        out = {
            "server": self.server,
            "ca_file": str(self.ca_file),
            "cert_file": str(self.cert_file),
            "key_file": str(self.key_file),
            "tls_server_name": self.tls_server_name,
        }
        if self.http_address:  # only with an HTTP API, so the file is unchanged without one
            out["http_address"] = self.http_address
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (temp file in the same directory, then rename): readers see old or new."""
        path = Path(path).expanduser()
        write_atomic(path, json.dumps(self.to_dict(), indent=2) + "\n", durable=True)


def is_kubeconfig(text: str) -> bool:
    """Whether a file's text is a kubeconfig (YAML or JSON with `kind: Config` and `clusters`),
    which people pass where a connection file belongs now that kse writes both."""
    try:
        raw = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError:
        return False
    return (
        isinstance(raw, dict)
        and raw.get("kind") == "Config"
        and "clusters" in raw
        and raw.get("apiVersion", "v1") == "v1"
    )


def resolve(explicit: str | os.PathLike[str] | None) -> Path:
    """The connection file to use: `--config`, else `$KSE_CONFIG`, else `~/.kse/config.json`.

    Raises ConfigError naming every place looked at when none exists.
    """
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"connection file {path} (from --config) does not exist")
        return path
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"connection file {path} (from ${ENV_VAR}) does not exist")
        return path
    path = DEFAULT_PATH.expanduser()
    if path.is_file():
        return path
    raise ConfigError(
        f"no connection file: pass --config PATH, set ${ENV_VAR}, or create {path} "
        "(`kse up` and `kse apiserver --connection-file` write one)"
    )
