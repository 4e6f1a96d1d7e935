"""kubeconfig files for kubectl and the Kubernetes client libraries, pointing at kse's HTTP API.

The certificate files are referenced BY PATH (`certificate-authority`, `client-certificate`,
`client-key`), never embedded: a rotated pair is picked up by the next kubectl invocation (or the
next connection of a long-running client that re-reads its files). One cluster, one user, one
context, made current; `tls-server-name` is set when the server's certificate names a host other
than the one in the URL (kse's serving certificate names `localhost`, the URL is usually
`https://127.0.0.1:PORT`).

With `relative_to=DIR` the paths are written relative to DIR, the directory the kubeconfig itself
lives in: kubectl (client-go's clientcmd) and the official Python client resolve a relative path
against the kubeconfig's own directory, so a data dir copied out of a container volume (compose)
still works wherever it lands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from certs.identity import identity_from_pem
from certs.layout import CertPaths
from kse.fileio import write_atomic


def _absolute(path: str | os.PathLike[str]) -> str:
    return str(Path(path).expanduser().resolve())


def _path_for(path: str | os.PathLike[str], relative_to: str | os.PathLike[str] | None) -> str:
    if relative_to is None:
        return _absolute(path)
    return os.path.relpath(_absolute(path), _absolute(relative_to))


def kubeconfig_dict(
    server_url: str,
    ca_file: str | os.PathLike[str],
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    user: str,
    cluster_name: str = "kse",
    tls_server_name: str | None = "localhost",
    *,
    relative_to: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The kubeconfig (clientcmd v1 Config) as a dict; paths made absolute, or relative to
    `relative_to` (the kubeconfig's directory)."""
    cluster: dict[str, Any] = {
        "server": server_url,
        "certificate-authority": _path_for(ca_file, relative_to),
    }
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
                    "client-certificate": _path_for(cert_file, relative_to),
                    "client-key": _path_for(key_file, relative_to),
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
    relative: bool = False,
) -> Path:
    """Write a kubeconfig atomically (mode 0600, as kubectl writes its own); returns its path.

    `server_url` is `https://HOST:PORT`; a bare `HOST:PORT` gets the scheme added. `relative`:
    the file paths relative to the kubeconfig's directory (see the module doc)."""
    out = Path(path).expanduser()
    data = kubeconfig_dict(
        server_url_of(server_url), ca_file, cert_file, key_file, user, cluster_name, tls_server_name,
        relative_to=out.parent if relative else None,
    )  # fmt: skip
    write_atomic(out, render(data))
    os.chmod(out, 0o600)
    return out


def server_url_of(address: str) -> str:
    """`https://HOST:PORT` from a bare `HOST:PORT` (as ready and connection files hold it)."""
    return address if "://" in address else f"https://{address}"


def render(data: dict[str, Any]) -> str:
    """The kubeconfig's text (YAML, keys in kubectl's order)."""
    return yaml.safe_dump(data, sort_keys=False)


def user_of(paths: CertPaths) -> str:
    """The user an identity's certificate names (its CN), the kubeconfig's user entry: what
    `kubectl auth whoami` would print and what a 403 names. Raises OSError / ValueError."""
    return identity_from_pem(paths.cert.read_bytes()).user


def identity_kubeconfig(
    server_url: str,
    paths: CertPaths,
    *,
    cluster_name: str = "kse",
    tls_server_name: str | None = "localhost",
    relative_to: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """A kubeconfig for one identity of a PKI dir (a `certs.layout.CertPaths`: the pair and the
    trust bundle), its user named by the certificate's CN."""
    return kubeconfig_dict(
        server_url_of(server_url), paths.ca_bundle, paths.cert, paths.key, user_of(paths), cluster_name,
        tls_server_name, relative_to=relative_to,
    )  # fmt: skip


def write_identity_kubeconfig(
    path: str | os.PathLike[str],
    server_url: str,
    paths: CertPaths,
    *,
    cluster_name: str = "kse",
    tls_server_name: str | None = "localhost",
    relative: bool = False,
) -> Path:
    """`identity_kubeconfig` written atomically with mode 0600; returns its path."""
    out = Path(path).expanduser()
    data = identity_kubeconfig(
        server_url, paths, cluster_name=cluster_name, tls_server_name=tls_server_name,
        relative_to=out.parent if relative else None,
    )  # fmt: skip
    write_atomic(out, render(data))
    os.chmod(out, 0o600)
    return out
