"""`kse etcd`: run a local etcd (1 or 3 members) in the foreground until Ctrl-C or SIGTERM.

It prints the endpoints (and an etcdctl line that reaches them), keeps everything under --data-dir,
and a second run on the same --data-dir continues the same cluster on the same ports (recorded in
`etcd-cluster.json`; a member's peer URLs live in its data). The members run in their own process
groups, so Ctrl-C reaches only `kse`, which then stops them gracefully (leader last). Exit code 0
after Ctrl-C/SIGTERM, 1 if etcd fails to start or a member dies on its own, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from harness.procs.etcd import (
    CLUSTER_FILE,
    EtcdCluster,
    EtcdLaunchError,
    EtcdServerTLS,
    find_etcd_binary,
    start_cluster,
)
from kse.durations import PositiveDuration
from kse.flags.argtypes import port

DEFAULT_PROGRESS_NOTIFY_INTERVAL = 5.0
_LIVENESS_POLL = 0.2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `kse etcd` to the `kse` command."""
    p = subparsers.add_parser(
        "etcd",
        help="run a local etcd cluster (1 or 3 members) in the foreground",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument("--data-dir", required=True, type=Path, help="member data and logs (created if missing)")
    p.add_argument("--members", type=int, choices=(1, 3), default=1, help="cluster size (default 1)")
    p.add_argument(
        "--client-port",
        type=port,
        metavar="P",
        help="client port of the first member; member i gets P+i (default: free ports, reused on restart)",
    )
    p.add_argument(
        "--peer-port", type=port, metavar="P", help="peer port of the first member; member i gets P+i"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--tls-dir",
        type=Path,
        metavar="PKI_DIR",
        help="a `kse certs init` directory: serve https with etcd-server.crt and require client certs",
    )
    p.add_argument(
        "--fast", action="store_true", help="test timings: 10 ms heartbeat, 100 ms election timeout"
    )
    p.add_argument(
        "--progress-notify-interval",
        action=PositiveDuration,
        default=DEFAULT_PROGRESS_NOTIFY_INTERVAL,
        metavar="SECONDS",
        help="etcd's periodic watch progress notifications, the safe watch bookmarks on etcd < 3.5.8 "
        f"(default {DEFAULT_PROGRESS_NOTIFY_INTERVAL:g}; etcd's own default is 600)",
    )
    p.set_defaults(func=_cmd_etcd)


def _error(message: str, code: int) -> int:
    print(f"kse etcd: error: {message}", file=sys.stderr)
    return code


def _cmd_etcd(args: argparse.Namespace) -> int:
    n: int = args.members
    client_ports = None if args.client_port is None else [args.client_port + i for i in range(n)]
    peer_ports = None if args.peer_port is None else [args.peer_port + i for i in range(n)]
    for ports in (client_ports, peer_ports):
        if ports is not None and ports[-1] > 65535:
            return _error(f"ports {ports[0]}..{ports[-1]} run past 65535", 2)
    if client_ports and peer_ports and set(client_ports) & set(peer_ports):
        return _error(f"client ports {client_ports} and peer ports {peer_ports} overlap", 2)
    tls = None
    if args.tls_dir is not None:
        tls = EtcdServerTLS.from_pki_dir(args.tls_dir)
        missing = [
            str(path)
            for path in (tls.ca_file, tls.cert_file, tls.key_file, tls.client_cert_file, tls.client_key_file)
            if path is not None and not path.is_file()
        ]
        if missing:
            return _error(f"{args.tls_dir} lacks {', '.join(missing)} (make it with `kse certs init`)", 1)
    try:
        return asyncio.run(_run(args, client_ports, peer_ports, tls))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping: the launcher kills what is left
        return 130


async def _run(
    args: argparse.Namespace,
    client_ports: list[int] | None,
    peer_ports: list[int] | None,
    tls: EtcdServerTLS | None,
) -> int:
    data_dir: Path = args.data_dir
    try:
        binary = find_etcd_binary()
        cluster = await start_cluster(
            args.members,
            data_dir,
            fast=args.fast,
            tls=tls,
            binary=binary,
            host=args.host,
            client_ports=client_ports,
            peer_ports=peer_ports,
            progress_notify_interval=args.progress_notify_interval,
        )
    except (EtcdLaunchError, OSError, ValueError) as e:
        return _error(str(e), 1)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # Only now: the banner promises that SIGTERM stops the members cleanly, and a caller that
    # reads the endpoints may signal at once (the default action would kill this process with
    # the members left running).
    _print_banner(cluster, binary, data_dir, tls)
    died: list[str] = []
    try:
        while not stop.is_set():
            died = [f"{m.name} (exit code {m.returncode})" for m in cluster.members if not m.running]
            if died:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_LIVENESS_POLL):
                    await stop.wait()
    finally:
        print("kse etcd: stopping", flush=True)
        await cluster.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if died:
        logs = ", ".join(str(m.log_path) for m in cluster.members)
        return _error(f"etcd member {', '.join(died)} died; logs: {logs}", 1)
    print("kse etcd: stopped", flush=True)
    return 0


def _print_banner(cluster: EtcdCluster, binary: Path, data_dir: Path, tls: EtcdServerTLS | None) -> None:
    endpoints = ",".join(cluster.endpoints)
    etcdctl = binary.with_name("etcdctl")
    ctl = [str(etcdctl) if etcdctl.is_file() else "etcdctl", f"--endpoints={endpoints}"]
    if tls is not None:
        ctl += [f"--cacert={tls.ca_file}", f"--cert={tls.client_cert_file}", f"--key={tls.client_key_file}"]
    print(f"kse etcd: {len(cluster.members)} member(s) running ({binary})")
    print(f"endpoints: {endpoints}")
    print(f"data: {data_dir} (ports recorded in {data_dir / CLUSTER_FILE})")
    print(f"logs: {', '.join(str(m.log_path) for m in cluster.members)}")
    print(f"try: {' '.join(ctl)} endpoint status -w table")
    print("Ctrl-C or SIGTERM stops it.", flush=True)
