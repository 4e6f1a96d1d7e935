"""kubeconfig files for kubectl and the Kubernetes client libraries, pointing at kse's HTTP API.

The certificate files are referenced BY PATH (`certificate-authority`, `client-certificate`,
`client-key`), never embedded: a rotated pair is picked up by the next kubectl invocation (or the
next connection of a long-running client that re-reads its files). One cluster, one user, one
context, made current; `tls-server-name` is set when the server's certificate names a host other
than the one in the URL (kse's serving certificate names `localhost`, the URL is usually
`https://127.0.0.1:PORT`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from kse.fileio import write_atomic


def _absolute(path: str | os.PathLike[str]) -> str:
    return str(Path(path).expanduser().resolve())


def kubeconfig_dict(
    server_url: str,
    ca_file: str | os.PathLike[str],
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    user: str,
    cluster_name: str = "kse",
    tls_server_name: str | None = "localhost",
) -> dict[str, Any]:
    """The kubeconfig (clientcmd v1 Config) as a dict; paths made absolute."""
    cluster: dict[str, Any] = {"server": server_url, "certificate-authority": _absolute(ca_file)}
    if tls_server_name:
        cluster["tls-server-name"] = tls_server_name
    context = f"{user}@{cluster_name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": _absolute(cert_file),
                    "client-key": _absolute(key_file),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | os.PathLike[str],
    server_url: str,
    ca_file: str | os.PathLike[str],
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    user: str,
    cluster_name: str = "kse",
    *,
    tls_server_name: str | None = "localhost",
) -> Path:
    """Write a kubeconfig atomically (mode 0600, as kubectl writes its own); returns its path.

    `server_url` is `https://HOST:PORT`; a bare `HOST:PORT` gets the scheme added."""
    if "://" not in server_url:
        server_url = f"https://{server_url}"
    out = Path(path).expanduser()
    data = kubeconfig_dict(server_url, ca_file, cert_file, key_file, user, cluster_name, tls_server_name)
    write_atomic(out, yaml.safe_dump(data, sort_keys=False))
    os.chmod(out, 0o600)
    return out
