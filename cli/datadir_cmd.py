"""`kse datadir init`: lay out a kse data dir for components that run elsewhere (containers).

`kse up` makes its data dir itself as it starts the processes: the PKI, one connection file per
client identity, the admin connection file, the audit and run dirs. In the compose topology the
processes are containers sharing one volume, and something has to write those files before any of
them starts: the one-shot `certs` service runs

    kse datadir init --data-dir /var/lib/kse --server apiserver:6443 --scheduler-replicas 3

which writes, under the data dir (the layout of `kse up`, `harness.up.plan`):

    pki/                      `kse certs init` (certs.pki.init_pki, the same code), API server SANs
                              plus the --server host and any --host; etcd-server's name etcd-1..3
    connections/<stem>.json   one connection file per client identity: admin, chaos, nodesim,
                              workload, scheduler-1..N (server = --server)
    config.json               the admin connection file (`kse --config` it)
    kubeconfig                with --kubeconfig-server URL: the admin kubeconfig for kubectl on the
                              host (server URL, e.g. https://localhost:6444, the port compose
                              publishes), its file paths relative to the data dir, so a copy of
                              kubeconfig + pki/ works wherever it lands
    audit/, run/              empty dirs for the API server's audit log and the run files
    run/cluster.json          the attach file `kse chaos run --attach DATA_DIR` reads (pki_dir,
                              connection_file, audit_log, run_dir, processes with their roles, no
                              pids: containers are reached through the Docker API; the scheduler
                              Lease and, with --lease-duration, its duration)

It is idempotent, so `docker compose up` after a `down` (volume kept) works: an existing CA is kept
(a new one would invalidate every certificate a running process holds, which is why `kse certs init`
refuses it), identities that are missing are issued from it, and the connection files are
rewritten (the server address may have changed). Exit 1 on a runtime failure, 2 on bad flags.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from kse.durations import DurationFlag, as_timedelta, positive_duration
from kse.fileio import write_atomic
from kse.flags.pki_args import add_hosts_flag, add_scheduler_replicas_flag, add_ttl_flag

CLUSTER_FILE = "cluster.json"  # under run/, as `kse up` writes it (contract B)
CLIENT_STEMS = ("admin", "chaos", "nodesim", "workload", "controller-manager")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `kse datadir init` to the `kse` command."""
    datadir = subparsers.add_parser(
        "datadir", help="lay out a data dir (PKI, connection files) for components that run elsewhere"
    )
    datadir.set_defaults(func=lambda _args: _usage(datadir))
    sub = datadir.add_subparsers(dest="datadir_command", metavar="SUBCOMMAND")
    init = sub.add_parser(
        "init",
        help="write the PKI, a connection file per identity and the admin config (idempotent)",
        description=(__doc__ or "").splitlines()[0],
    )
    init.add_argument("--data-dir", required=True, type=Path, help="the data dir (created if missing)")
    init.add_argument(
        "--server",
        required=True,
        type=_server,
        metavar="HOST:PORT",
        help="where the components reach the API server (written into every connection file)",
    )
    init.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="the name clients check in the API server's certificate (default: the --server host)",
    )
    add_scheduler_replicas_flag(init, help="scheduler identities and connection files (default 3)")
    add_hosts_flag(
        init,
        help="extra DNS name or IP the API server is reached by (repeatable; the --server host is added)",
    )
    add_ttl_flag(
        init, default=None, help="validity of the leaves issued now (default 365d, as `kse certs init`)"
    )
    init.add_argument(
        "--kubeconfig-server",
        type=_https_url,
        metavar="URL",
        help="also write DATA_DIR/kubeconfig (admin) for the Kubernetes HTTP API at URL, as kubectl "
        "reaches it (e.g. https://localhost:6444 from the host); paths relative to DATA_DIR",
    )
    init.add_argument(
        "--lease-duration",
        action=DurationFlag,
        convert=as_timedelta(positive_duration),
        default=None,
        metavar="DURATION",
        help="the schedulers' --leader-elect-lease-duration, recorded in run/cluster.json for the "
        "chaos checks (default: not recorded)",
    )
    init.set_defaults(func=_cmd_init)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _server(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def _https_url(text: str) -> str:
    from urllib.parse import urlsplit

    try:
        url = urlsplit(text)
        port = url.port
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected https://HOST:PORT, got {text!r}: {e}") from None
    if url.scheme != "https" or not url.hostname or port is None or url.path not in ("", "/"):
        raise argparse.ArgumentTypeError(f"expected https://HOST:PORT (kse serves HTTPS), got {text!r}")
    return text.rstrip("/")


def _server_host(server: str) -> str:
    return server.rpartition(":")[0].strip("[]")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a component starting at that moment reads old or new."""
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def ensure_pki(
    pki_dir: Path, *, scheduler_replicas: int, hosts: Sequence[str], ttl: timedelta | None
) -> list[str]:
    """Make the PKI, or complete an existing one from its own CA; what was done, one line each."""
    from certs.layout import CertPaths, leaf_specs
    from certs.pki import LEAF_TTL, init_pki, issue_spec, load_ca, write_pair

    leaf_ttl = ttl or LEAF_TTL
    if not (pki_dir / "ca.crt").is_file() or not (pki_dir / "ca.key").is_file():
        pki = init_pki(pki_dir, scheduler_replicas=scheduler_replicas, server_hosts=hosts, leaf_ttl=leaf_ttl)
        return [f"created the CA and {len(pki.leaves)} certificates in {pki_dir}"]
    ca = load_ca(pki_dir)
    done = []
    for spec in leaf_specs(scheduler_replicas=scheduler_replicas, server_hosts=hosts):
        paths = CertPaths.in_dir(pki_dir, spec.stem)
        if not paths.cert.is_file() or not paths.key.is_file():
            write_pair(paths, issue_spec(ca, spec, ttl=leaf_ttl))
            done.append(f"issued {spec.stem} (missing) from the existing CA")
    return done or [f"kept the PKI in {pki_dir}"]


def write_connections(
    data_dir: Path, *, server: str, tls_server_name: str, scheduler_replicas: int
) -> list[Path]:
    """A connection file per client identity (connections/<stem>.json) and config.json (admin)."""
    from certs.layout import CertPaths, scheduler_stem
    from kse.config import ConnectionFile

    pki_dir = data_dir / "pki"
    stems = [*CLIENT_STEMS, *(scheduler_stem(i) for i in range(1, scheduler_replicas + 1))]
    written = []
    for stem in stems:
        p = CertPaths.in_dir(pki_dir, stem)
        conn = ConnectionFile.for_identity(server, p.cert, p.key, p.ca_bundle, tls_server_name)
        path = data_dir / "connections" / f"{stem}.json"
        conn.save(path)
        written.append(path)
        if stem == "admin":
            conn.save(data_dir / "config.json")
            written.append(data_dir / "config.json")
    return written


def write_kubeconfig(data_dir: Path, server_url: str) -> Path:
    """DATA_DIR/kubeconfig: the admin identity on the HTTP API at `server_url`, paths relative to
    DATA_DIR (kubectl resolves them against the kubeconfig's own directory). tls-server-name is
    `localhost`, a name the serving certificate always carries, whatever host the URL names."""
    from certs.layout import CertPaths
    from kse.kubeconfig import write_identity_kubeconfig

    admin = CertPaths.in_dir(data_dir / "pki", "admin")
    return write_identity_kubeconfig(data_dir / "kubeconfig", server_url, admin, relative=True)


def cluster_info(
    data_dir: Path,
    *,
    scheduler_replicas: int,
    etcd_members: int = 3,
    lease_duration: timedelta | None = None,
    kubeconfig: Path | None = None,
) -> dict[str, Any]:
    """run/cluster.json for an attach: the files, the processes by role (no pids: containers) and,
    when known, the scheduler Lease and its duration, and the kubeconfig written."""
    processes: dict[str, dict[str, Any]] = {}
    for i in range(1, etcd_members + 1):
        processes[f"etcd-{i}"] = {"pid": None, "role": "etcd", "proxy": None}
    processes["apiserver"] = {"pid": None, "role": "apiserver", "proxy": None}
    for i in range(1, scheduler_replicas + 1):
        processes[f"scheduler-{i}"] = {"pid": None, "role": "scheduler", "identity": "", "proxy": None}
    processes["nodesim"] = {"pid": None, "role": "nodesim", "proxy": None}
    processes["workload"] = {"pid": None, "role": "workload", "proxy": None}
    lease: dict[str, Any] = {"namespace": "kube-system", "name": "kube-scheduler"}
    if lease_duration is not None:
        lease["duration_s"] = lease_duration.total_seconds()
    info: dict[str, Any] = {
        "pki_dir": str(data_dir / "pki"),
        "connection_file": str(data_dir / "config.json"),
        "audit_log": str(data_dir / "audit" / "audit.jsonl"),
        "run_dir": str(data_dir / "run"),
        "deployment": "compose",
        "lease": lease,
        "processes": processes,
    }
    if kubeconfig is not None:
        info["kubeconfig"] = str(kubeconfig)
    return info


def _cmd_init(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir.absolute()
    host = _server_host(args.server)
    hosts = list(dict.fromkeys([host, *args.hosts]))
    try:
        done = ensure_pki(
            data_dir / "pki", scheduler_replicas=args.scheduler_replicas, hosts=hosts, ttl=args.ttl
        )
        written = write_connections(
            data_dir,
            server=args.server,
            tls_server_name=args.tls_server_name or host,
            scheduler_replicas=args.scheduler_replicas,
        )
        kubeconfig = None
        if args.kubeconfig_server is not None:
            kubeconfig = write_kubeconfig(data_dir, args.kubeconfig_server)
        for sub in ("audit", "run"):
            (data_dir / sub).mkdir(parents=True, exist_ok=True)
        _write_json(
            data_dir / "run" / CLUSTER_FILE,
            cluster_info(
                data_dir,
                scheduler_replicas=args.scheduler_replicas,
                lease_duration=args.lease_duration,
                kubeconfig=kubeconfig,
            ),
        )
    except ValueError as e:
        print(f"kse datadir init: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kse datadir init: error: cannot write {data_dir}: {e}", file=sys.stderr)
        return 1
    for line in done:
        print(line)
    print(f"wrote {len(written)} connection files under {data_dir} (server {args.server}); admin: "
          f"{data_dir / 'config.json'}")  # fmt: skip
    if kubeconfig is not None:
        print(f"wrote {kubeconfig} (admin, {args.kubeconfig_server}; paths relative to {data_dir})")
    return 0
