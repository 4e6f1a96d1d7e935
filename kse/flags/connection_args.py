"""The API-server connection flags every component process takes, and their resolution.

`--connection-file` (alias `--kubeconfig`) or its parts `--server --ca --cert --key`; processes that
act as one fixed PKI identity (nodesim, workload) may also take `--server --pki-dir D` and use that
identity's pair from the PKI. One definition so every component accepts and refuses the same
combinations with the same words.

Every component follows its credential files while it runs (`connection_source`: a new pair or CA
bundle on disk means a new channel, callers moved over, no failed call), and may log every failed
RPC it sees (`--rpc-error-log PATH`, kse.client.rpc_errors) for the chaos checker.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kse.config import ConfigError, ConnectionFile

if TYPE_CHECKING:
    from kse.client.credentials import ReloadingChannelSource
    from kse.client.rpc_errors import RpcErrorLog


def add_connection_flags(
    p: argparse.ArgumentParser, identity: str, *, pki_stem: str | None = None
) -> argparse._ArgumentGroup:
    """Add the connection group (returned, for callers' own client flags); `pki_stem` (a
    certs/layout file stem) also offers `--pki-dir`."""
    conn = p.add_argument_group("API server connection")
    conn.add_argument(
        "--connection-file",
        "--kubeconfig",
        dest="connection_file",
        type=Path,
        help="a kse connection file (server, CA bundle, client cert and key); or give the parts below",
    )
    conn.add_argument("--server", help="API server address HOST:PORT")
    conn.add_argument("--ca", type=Path, help="CA bundle verifying the API server")
    conn.add_argument("--cert", type=Path, help=f"client certificate (the {identity} identity)")
    conn.add_argument("--key", type=Path, help="client key")
    if pki_stem is not None:
        conn.add_argument(
            "--pki-dir", type=Path, help=f"with --server: use the {pki_stem!r} pair and CA bundle of this PKI"
        )
    conn.add_argument("--tls-server-name", default="localhost", help="name checked in the server cert")
    conn.add_argument(
        "--rpc-error-log",
        type=Path,
        metavar="PATH",
        help="append one JSON line (chaos.history.RpcErrorRecord) per failed RPC this process sees; "
        "the client name recorded is the file stem after 'rpc-errors-' (rpc-errors-NAME.jsonl)",
    )
    return conn


def rpc_error_log_from_args(args: argparse.Namespace) -> RpcErrorLog | None:
    """The `--rpc-error-log` writer (the caller closes it), or None without the flag."""
    from kse.client.rpc_errors import open_rpc_error_log

    return open_rpc_error_log(getattr(args, "rpc_error_log", None))


def connection_source(
    conn: ConnectionFile,
    errors: RpcErrorLog | None = None,
    *,
    options: list[tuple[str, Any]] | None = None,
) -> ReloadingChannelSource:
    """The channel source a component talks to the API server through: it follows the cert, key
    and CA bundle files (rotation, renewal, CA phases) and, with `errors`, logs failed RPCs on
    every channel it builds. Create it on the running loop; close it with `await src.close()`.
    Raises OSError when the files cannot be read."""
    from kse.client.channel import channel_source_from_connection

    return channel_source_from_connection(
        conn, options=options or (), interceptors=errors.interceptors if errors is not None else None
    )


def connection_from_args(
    p: argparse.ArgumentParser, args: argparse.Namespace, pki_stem: str | None = None
) -> ConnectionFile:
    """The ConnectionFile the flags name; `p.error()` (exit 2) on a missing or contradictory set."""
    parts = (args.server, args.ca, args.cert, args.key)
    pki_dir: Path | None = getattr(args, "pki_dir", None)
    with_pki = " or --pki-dir" if pki_stem is not None else ""
    if args.connection_file is not None:
        if any(x is not None for x in parts) or pki_dir is not None:
            p.error(f"give either --connection-file or --server with --ca/--cert/--key{with_pki}, not both")
        try:
            return ConnectionFile.load(args.connection_file)
        except ConfigError as e:
            p.error(str(e))
    if args.server and pki_dir is not None and pki_stem is not None:
        if any(x is not None for x in parts[1:]):
            p.error("give either --pki-dir or --ca/--cert/--key, not both")
        from certs.layout import CertPaths

        paths = CertPaths.in_dir(pki_dir, pki_stem)
        for path in (paths.cert, paths.key, paths.ca_bundle):
            if not path.is_file():
                p.error(f"--pki-dir: no such file: {path}")
        return ConnectionFile.for_identity(
            args.server, paths.cert, paths.key, paths.ca_bundle, args.tls_server_name
        )
    if not all(x is not None for x in parts):
        p.error(
            "an API server connection is required: --connection-file, or --server with --ca, --cert "
            f"and --key{' (or with --pki-dir)' if pki_stem is not None else ''}"
        )
    for flag, path in (("--ca", args.ca), ("--cert", args.cert), ("--key", args.key)):
        if not Path(path).is_file():
            p.error(f"{flag}: no such file: {path}")
    return ConnectionFile.for_identity(args.server, args.cert, args.key, args.ca, args.tls_server_name)
