"""`kse apiserver`: run the API server until SIGTERM / SIGINT (graceful stop, exit 0).

Exit codes: 0 after a clean stop, 1 when it cannot start (etcd unreachable, port taken, bad
certificates), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from apiserver_mock.flowcontrol import FlowControlConfig
from apiserver_mock.server import APIServer, ServerConfig
from certs.layout import ADMIN, APISERVER, APISERVER_ETCD_CLIENT, ca_bundle_path, cert_path, key_path
from kse.config import ConnectionFile
from kse.durations import DurationFlag, PositiveDuration
from kse.etcdclient import EtcdError, EtcdTLS
from kse.fileio import write_atomic
from kse.flags.argtypes import boolean as _go_bool
from kse.flags.argtypes import non_negative_int as _non_negative_int
from kse.flags.argtypes import positive_int as _positive_int
from kse.flags.failpoint_args import add_failpoint_flags, apply_failpoint_flags
from kse.flags.logging_args import add_log_level_flag, setup_logging

log = logging.getLogger("apiserver_mock")

STOP_GRACE_S = 2.0


def _listen(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (port 0 picks a free one), got {text!r}")
    return text


def _endpoints(text: str) -> list[str]:
    items = [e.strip() for e in text.split(",") if e.strip()]
    if not items:
        raise argparse.ArgumentTypeError("at least one etcd endpoint is required")
    return items


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kse apiserver", description="The kse API server: gRPC + mTLS over etcd."
    )
    etcd = p.add_argument_group("etcd")
    etcd.add_argument(
        "--etcd-endpoints",
        type=_endpoints,
        required=True,
        metavar="URL[,URL...]",
        help="etcd client URLs (http://host:port or https://host:port), comma separated",
    )
    etcd.add_argument("--etcd-ca", type=Path, help="CA bundle verifying etcd (https endpoints)")
    etcd.add_argument("--etcd-cert", type=Path, help="client certificate towards etcd")
    etcd.add_argument("--etcd-key", type=Path, help="client key towards etcd")
    etcd.add_argument(
        "--prefix", default="/registry", help="etcd key prefix of this cluster (default: %(default)s)"
    )
    etcd.add_argument(
        "--etcd-compaction-interval",
        action=DurationFlag,
        default=300.0,
        metavar="DURATION",
        help="the interval of compaction requests, as kube-apiserver's (each compacts etcd to the "
        "revision of one interval before); 0 disables them (default: 5m)",
    )
    etcd.add_argument(
        "--event-ttl",
        action=DurationFlag,
        default=3600.0,
        metavar="DURATION",
        help="how long Events are kept after their last write, as kube-apiserver's: etcd deletes "
        "them through a lease; 0 keeps them until deleted (default: 1h)",
    )
    etcd.add_argument(
        "--group-commit-inflight",
        type=int,
        default=2,
        metavar="N",
        help="binds and creates in flight at once are coalesced into batch etcd transactions, each "
        "write keeping its own compare, with at most N batches in flight; 0 sends every write as "
        "its own transaction (default: %(default)s)",
    )
    srv = p.add_argument_group("serving")
    srv.add_argument(
        "--listen",
        type=_listen,
        default="127.0.0.1:6443",
        metavar="HOST:PORT",
        help="address to serve on; port 0 picks a free port (default: %(default)s)",
    )
    srv.add_argument(
        "--http-listen",
        type=_listen,
        metavar="HOST:PORT",
        help="also serve the Kubernetes HTTP API (HTTPS, same certificates, for kubectl and the "
        "Kubernetes client libraries) on this address; port 0 picks a free port (default: off)",
    )
    srv.add_argument(
        "--http-max-inflight",
        type=_positive_int,
        default=400,
        metavar="N",
        help="concurrent non-watch HTTP requests before answering 429 (default: %(default)s)",
    )
    srv.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the watch cache's long-lived objects out of CPython's full collections, whose "
        "pauses set the watch tail (kse/gctuning.py; default: on)",
    )
    srv.add_argument("--tls-cert", type=Path, help="serving certificate")
    srv.add_argument("--tls-key", type=Path, help="serving key")
    srv.add_argument("--client-ca", type=Path, help="CA bundle client certificates must chain to")
    srv.add_argument(
        "--pki-dir",
        type=Path,
        help="a `kse certs init` directory: serving pair, client CA, etcd client pair from it",
    )
    srv.add_argument(
        "--ready-file", type=Path, help='written atomically once serving: {"address": "HOST:PORT", "pid": N}'
    )
    srv.add_argument(
        "--connection-file",
        type=Path,
        help="write a kse connection file (admin identity; needs --pki-dir) once serving",
    )
    srv.add_argument(
        "--max-connection-age",
        action=PositiveDuration,
        default=300.0,
        metavar="SECONDS",
        help="close connections after this age so clients re-handshake (default: %(default)s)",
    )
    wc = p.add_argument_group("watch cache")
    wc.add_argument(
        "--watch-cache-capacity",
        type=_positive_int,
        default=10_000,
        metavar="N",
        help="events kept per resource for watch resumption (default: %(default)s)",
    )
    wc.add_argument(
        "--watch-queue-length",
        type=_positive_int,
        default=1000,
        metavar="N",
        help="batches queued per watcher before it is closed as too slow (default: %(default)s)",
    )
    wc.add_argument(
        "--watch-send-timeout",
        action=PositiveDuration,
        default=30.0,
        metavar="SECONDS",
        help="close a watch whose client takes no data for this long (default: %(default)s)",
    )
    wc.add_argument(
        "--bookmark-interval",
        action=PositiveDuration,
        default=1.0,
        metavar="SECONDS",
        help="interval of BOOKMARK events to watchers that allow them (default: %(default)s)",
    )
    apf = p.add_argument_group("overload: API Priority and Fairness (apiserver_mock/flowcontrol)")
    apf.add_argument(
        "--enable-priority-and-fairness",
        type=_go_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="divide the server's concurrency among priority levels with fair queues, as "
        "kube-apiserver; false: the max-inflight limits alone (default: true)",
    )
    apf.add_argument(
        "--max-requests-inflight",
        type=_non_negative_int,
        default=400,
        metavar="N",
        help="non-mutating requests in flight (with priority and fairness: added to the next flag "
        "to make the server's concurrency); 0: no limit (default: %(default)s, as kube-apiserver)",
    )
    apf.add_argument(
        "--max-mutating-requests-inflight",
        type=_non_negative_int,
        default=200,
        metavar="N",
        help="mutating requests in flight; 0: no limit (default: %(default)s, as kube-apiserver)",
    )
    apf.add_argument(
        "--http2-max-streams-per-connection",
        type=_non_negative_int,
        default=100,
        metavar="N",
        help="gRPC calls one client connection may have open at once; past it a call is refused "
        "before the server reads it (HTTP/2 REFUSED_STREAM, which kse's client sends again); "
        "0: no limit (default: %(default)s; kube-apiserver's is 1000, see the README's overload part)",
    )
    fence = p.add_argument_group("fencing and audit")
    fence.add_argument(
        "--fencing",
        choices=("on", "off"),
        default="on",
        help="check the fence token a write carries against its Lease in the write's etcd transaction; "
        "off ignores tokens (and --require-fence-for), to demonstrate what fencing prevents "
        "(default: %(default)s)",
    )
    fence.add_argument(
        "--require-fence-for",
        action="append",
        default=[],
        metavar="USER",
        help="refuse (FAILED_PRECONDITION) this user's writes that carry no fence token, except its "
        "Lease writes; repeatable, e.g. system:kube-scheduler",
    )
    fence.add_argument(
        "--audit-log",
        type=Path,
        metavar="PATH",
        help="append one JSON line (kse.audit.AuditRecord) per write request to PATH, before answering",
    )
    fence.add_argument(
        "--audit-log-maxsize",
        type=_non_negative_int,
        default=0,
        metavar="MB",
        help="rotate the audit log once it would pass this many megabytes, as kube-apiserver's; "
        "0: never (default: %(default)s)",
    )
    fence.add_argument(
        "--audit-log-maxbackup",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="keep at most N rotated audit log files, the newest; 0: all (default: %(default)s)",
    )
    add_log_level_flag(p)
    add_failpoint_flags(p)
    return p


def config_from_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> ServerConfig:
    """Resolve flags into a ServerConfig; p.error() (exit 2) on inconsistent or missing files."""
    pki: Path | None = args.pki_dir
    tls_cert, tls_key, client_ca = args.tls_cert, args.tls_key, args.client_ca
    if pki is not None:
        tls_cert = tls_cert or cert_path(pki, APISERVER)
        tls_key = tls_key or key_path(pki, APISERVER)
        client_ca = client_ca or ca_bundle_path(pki)
    missing = [
        n
        for n, v in (("--tls-cert", tls_cert), ("--tls-key", tls_key), ("--client-ca", client_ca))
        if v is None
    ]
    if missing:
        p.error(f"{', '.join(missing)} required (or --pki-dir)")
    for flag, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key), ("--client-ca", client_ca)):
        if not Path(path).is_file():
            p.error(f"{flag}: no such file: {path}")
    if args.connection_file is not None and pki is None:
        p.error("--connection-file needs --pki-dir (it names the admin identity's files)")
    etcd_tls = None
    secure = any(e.startswith("https://") for e in args.etcd_endpoints)
    ca = args.etcd_ca or (ca_bundle_path(pki) if pki is not None and secure else None)
    cert = args.etcd_cert or (cert_path(pki, APISERVER_ETCD_CLIENT) if pki is not None and secure else None)
    key = args.etcd_key or (key_path(pki, APISERVER_ETCD_CLIENT) if pki is not None and secure else None)
    if (cert is None) != (key is None):
        p.error("--etcd-cert and --etcd-key go together")
    if ca is not None or cert is not None:
        if ca is None:
            p.error("--etcd-ca is required with --etcd-cert")
        for flag, path in (("--etcd-ca", ca), ("--etcd-cert", cert), ("--etcd-key", key)):
            if path is not None and not Path(path).is_file():
                p.error(f"{flag}: no such file: {path}")
        etcd_tls = EtcdTLS(ca, cert, key)
    if not args.prefix.startswith("/") or args.prefix.rstrip("/") == "":
        p.error(f"--prefix must be an absolute key prefix like /registry, got {args.prefix!r}")
    try:
        flowcontrol = FlowControlConfig(
            enable_priority_and_fairness=args.enable_priority_and_fairness,
            max_requests_inflight=args.max_requests_inflight,
            max_mutating_requests_inflight=args.max_mutating_requests_inflight,
        )
    except ValueError as e:
        p.error(str(e))
    return ServerConfig(
        etcd_endpoints=args.etcd_endpoints,
        etcd_tls=etcd_tls,
        prefix=args.prefix.rstrip("/"),
        listen=args.listen,
        tls_cert=Path(tls_cert),
        tls_key=Path(tls_key),
        client_ca=Path(client_ca),
        watch_cache_capacity=args.watch_cache_capacity,
        watch_queue_length=args.watch_queue_length,
        bookmark_interval=args.bookmark_interval,
        watch_send_timeout=args.watch_send_timeout,
        max_connection_age=args.max_connection_age,
        etcd_compaction_interval=args.etcd_compaction_interval,
        event_ttl_s=math.ceil(args.event_ttl),
        group_commit_inflight=max(0, args.group_commit_inflight),
        fencing=args.fencing == "on",
        require_fence_for=tuple(dict.fromkeys(u for u in args.require_fence_for if u)),
        audit_log=args.audit_log,
        audit_log_max_bytes=args.audit_log_maxsize * 1024 * 1024,
        audit_log_max_backups=args.audit_log_maxbackup,
        http_listen=args.http_listen,
        http_max_inflight=args.http_max_inflight,
        gc_freeze=args.gc_freeze,
        flowcontrol=flowcontrol,
        http2_max_streams_per_connection=args.http2_max_streams_per_connection,
    )


class _ClientGoneFilter(logging.Filter):
    """grpc logs a traceback (ERROR) when a client disconnects while a stream write is in flight; that is
    a normal event for a watch server, so it becomes one debug line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "ExecuteBatchError" in message:
            log.debug("a client went away during a write: %s", message.splitlines()[0])
            return False
        return True


def client_address(address: str) -> str:
    """Where a local client connects: a wildcard listen address becomes loopback."""
    host, _, port = address.rpartition(":")
    if host in ("0.0.0.0", "", "[::]", "::"):
        host = "127.0.0.1"
    return f"{host}:{port}"


async def serve(config: ServerConfig, args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with APIServer(config) as server:
        address = client_address(server.address)
        http = server.http_address
        http_address = client_address(http) if http is not None else ""
        if args.connection_file is not None:
            pki = args.pki_dir
            conn = ConnectionFile.for_identity(
                address, cert_path(pki, ADMIN), key_path(pki, ADMIN), ca_bundle_path(pki)
            )
            dataclasses.replace(conn, http_address=http_address).save(args.connection_file)
        if args.ready_file is not None:
            ready: dict[str, object] = {"address": address, "pid": os.getpid()}
            if http_address:
                ready["http_address"] = http_address
            write_atomic(args.ready_file, json.dumps(ready) + "\n")
        await stop.wait()
        log.info("signal received; stopping (grace %.0fs)", STOP_GRACE_S)
        await server.stop(STOP_GRACE_S)
    if args.ready_file is not None:
        args.ready_file.unlink(missing_ok=True)
    log.info("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging(args.log_level)
    try:
        apply_failpoint_flags(args)
    except ValueError as e:
        parser.error(f"--failpoints: {e}")
    # A logger *name* (where grpc's aio core logs), not an import of grpc's private modules.
    logging.getLogger("grpc._cython.cygrpc").addFilter(_ClientGoneFilter())
    config = config_from_args(parser, args)
    try:
        return asyncio.run(serve(config, args))
    except EtcdError as e:
        log.error("cannot start: etcd: %s", e)
        return 1
    except OSError as e:
        log.error("cannot start: %s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
