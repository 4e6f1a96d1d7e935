"""`kse kubeconfig --identity NAME`: a kubeconfig for any client identity of a PKI, for kubectl.

    kse kubeconfig --identity admin                       # ~/.kse's cluster, to stdout
    kse kubeconfig --identity node-a --out /tmp/node-a    # try authorization as a kubelet
    kse kubeconfig --identity workload --pki-dir pki --server https://127.0.0.1:6444

`kse up` writes D/kubeconfig for the admin; this writes one for any other identity of the PKI (a
scheduler replica, a node, the workload, nodesim, chaos), so what the API server's authorization
table lets each do can be tried with kubectl: a forbidden verb answers 403 with kube-apiserver's
message, `pods "x" is forbidden: User "system:node:a" cannot ...`.

The identity is a file stem of the PKI dir (`kse certs show --dir D/pki` lists them); its user is
the certificate's CN. The server is `--server`, else the running cluster's HTTP address from
D/run/cluster.json (`apiserver_http`), else the `http_address` the API server last wrote into the
admin connection file D/config.json. The certificate files are named by path (absolute, or with
`--relative` relative to the kubeconfig's directory), so a rotated pair is what the next kubectl
reads. Exit 0 when written, 1 when it cannot be (unknown identity, no HTTP address, unreadable
files), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from certs.layout import PKI

DEFAULT_DATA_DIR = Path("~/.kse")


class KubeconfigError(Exception):
    """What stops a kubeconfig from being written; the message says what to do instead."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `kse kubeconfig` to the `kse` command."""
    p = subparsers.add_parser(
        "kubeconfig",
        help="write a kubeconfig for a client identity (admin, scheduler-1, node-NAME, workload, ...)",
        description=(__doc__ or "").splitlines()[0],
    )
    p.add_argument(
        "--identity",
        required=True,
        metavar="NAME",
        help="file stem of a client identity in the PKI: admin, scheduler-1, node-NAME, workload, "
        "nodesim, chaos (`kse certs show` lists them)",
    )
    p.add_argument("--out", type=Path, metavar="FILE", help="write here (mode 0600) instead of stdout")
    p.add_argument(
        "--data-dir",
        type=Path,
        help="the cluster's data dir: its pki/, and its HTTP address from run/cluster.json or "
        "config.json (default ~/.kse)",
    )
    p.add_argument("--pki-dir", type=Path, help="the PKI dir (default: DATA_DIR/pki)")
    p.add_argument(
        "--server",
        metavar="URL",
        help="the Kubernetes HTTP API, https://HOST:PORT (default: the data dir's running cluster)",
    )
    p.add_argument(
        "--tls-server-name",
        default="localhost",
        metavar="NAME",
        help="the name checked in the API server's certificate (default: %(default)s, which it carries)",
    )
    p.add_argument(
        "--relative",
        action="store_true",
        help="name the certificate files relative to the kubeconfig's directory (needs --out), for "
        "a data dir that is copied elsewhere",
    )
    p.set_defaults(func=_cmd_kubeconfig)


def server_of(data_dir: Path) -> str:
    """The HTTP API of the cluster in `data_dir`: cluster.json while it runs, else the address the
    API server last wrote into config.json. Raises KubeconfigError saying where it looked."""
    from harness.clusterfile import ClusterFile, ClusterFileError, cluster_file_path
    from kse.config import ConfigError, ConnectionFile
    from kse.kubeconfig import server_url_of

    cluster_file = cluster_file_path(data_dir)
    if cluster_file.is_file():
        try:
            info = ClusterFile.read(cluster_file)
        except ClusterFileError as e:
            raise KubeconfigError(str(e)) from None
        if info.apiserver_http:
            return server_url_of(info.apiserver_http)
    conn_file = data_dir / "config.json"
    if conn_file.is_file():
        try:
            conn = ConnectionFile.load(conn_file)
        except ConfigError as e:
            raise KubeconfigError(str(e)) from None
        if conn.http_address:
            return server_url_of(conn.http_address)
    raise KubeconfigError(
        f"no HTTP address for the cluster in {data_dir}: neither {cluster_file} nor {conn_file} "
        "names one (is it running? `kse up` serves the HTTP API unless --no-http; `kse apiserver` "
        "needs --http-listen); pass --server https://HOST:PORT"
    )


def _client_stems(pki: PKI) -> list[str]:
    """The identities of a PKI that may authenticate as clients (clientAuth in their usage)."""
    return [p.stem for p in pki if _is_client(p.cert)]


def _is_client(cert_file: Path) -> bool:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    try:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    return ExtendedKeyUsageOID.CLIENT_AUTH in usage


def build(args: argparse.Namespace) -> tuple[str, Path | None]:
    """The kubeconfig's text and where it goes (None: stdout). Raises KubeconfigError."""
    from kse.kubeconfig import identity_kubeconfig, render, server_url_of

    if args.relative and args.out is None:
        raise KubeconfigError("--relative needs --out (paths relative to the kubeconfig's directory)")
    if args.pki_dir is not None and args.server is None and args.data_dir is None:
        raise KubeconfigError("--pki-dir needs --server (or --data-dir, whose cluster names it)")
    data_dir = (args.data_dir or DEFAULT_DATA_DIR).expanduser()
    pki_dir = (args.pki_dir or data_dir / "pki").expanduser()
    try:
        pki = PKI.from_dir(pki_dir)
    except FileNotFoundError as e:
        raise KubeconfigError(f"{e} (`kse up` or `kse certs init` makes one)") from None
    clients = _client_stems(pki)
    if args.identity not in clients:
        why = "a serving certificate, not a client one" if args.identity in pki else "not in the PKI"
        raise KubeconfigError(
            f"unknown identity {args.identity!r} ({why}, {pki_dir}); known identities: {', '.join(clients)}"
        )
    server = server_url_of(args.server) if args.server else server_of(data_dir)
    if not server.startswith("https://"):
        raise KubeconfigError(f"--server must be an https:// URL (kse serves HTTPS only), got {server!r}")
    out: Path | None = args.out.expanduser().absolute() if args.out is not None else None
    try:
        data = identity_kubeconfig(
            server,
            pki[args.identity],
            tls_server_name=args.tls_server_name or None,
            relative_to=out.parent if (args.relative and out is not None) else None,
        )
    except (OSError, ValueError) as e:
        raise KubeconfigError(f"cannot read identity {args.identity!r}: {e}") from None
    return render(data), out


def _cmd_kubeconfig(args: argparse.Namespace) -> int:
    import os

    from kse.fileio import write_atomic

    try:
        text, out = build(args)
    except KubeconfigError as e:
        print(f"kse kubeconfig: error: {e}", file=sys.stderr)
        return 1
    if out is None:
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(out, text)
        os.chmod(out, 0o600)
    except OSError as e:
        print(f"kse kubeconfig: error: cannot write {out}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {out} ({args.identity}); export KUBECONFIG={out}", file=sys.stderr)
    return 0
