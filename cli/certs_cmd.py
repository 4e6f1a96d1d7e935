"""`kse certs init|show|rotate|rotate-ca`: make a cluster's PKI directory, look inside, rotate.

Mistakes here are expensive later (a re-init silently invalidates every cert that running processes
hold), so init refuses an existing CA without `--force`, and every failure is one clear line on
stderr with exit code 1 (runtime) or 2 (usage), never a traceback.

    kse certs rotate --dir D --identity scheduler-1 [--ttl 10m]   new pair, same CA ("all": every leaf)
    kse certs rotate-ca --dir D --phase add      new CA made (ca-next.*), trusted beside the old one
    kse certs rotate-ca --dir D --phase switch   every leaf reissued from the new CA, both still trusted
    kse certs rotate-ca --dir D --phase remove   only the new CA trusted

Running processes pick the files up without a restart (see certs.rotation for the order and why).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from certs.layout import CA_BUNDLE_FILE, CA_NEXT_STEM, CA_PREV_STEM, CA_STEM, CERT_SUFFIX
from certs.pki import CA_TTL, LEAF_TTL, init_pki
from certs.rotation import (
    ALL,
    PHASES,
    CAPhase,
    RotationError,
    RotationOrderError,
    ca_rotation_status,
    rotate,
    rotate_ca,
)
from kse.durations import DurationFlag
from kse.flags.pki_args import add_hosts_flag, add_scheduler_replicas_flag, add_ttl_flag, cert_lifetime

# `kse certs --ttl`'s parser, under the name tests and callers know.
parse_duration = cert_lifetime


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `certs init|show|rotate|rotate-ca` to the `kse` command."""
    certs = subparsers.add_parser(
        "certs", help="create and inspect the cluster PKI (CA, server and client certs)"
    )
    certs.set_defaults(func=lambda _args: _usage(certs))
    sub = certs.add_subparsers(dest="certs_command", metavar="SUBCOMMAND")

    init = sub.add_parser("init", help="create a CA and every server and client cert in a directory")
    init.add_argument("--dir", required=True, type=Path, help="PKI directory (created if missing)")
    add_scheduler_replicas_flag(init, help="scheduler identities (default 3)")
    init.add_argument(
        "--node",
        dest="nodes",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="issue a system:node:NAME kubelet identity (repeatable)",
    )
    add_hosts_flag(init, help="extra DNS name or IP the API server is reached by (repeatable)")
    add_ttl_flag(init, default=LEAF_TTL, help="leaf validity (default 365d)")
    init.add_argument("--force", action="store_true", help="replace an existing CA (invalidates every cert)")
    init.set_defaults(func=_cmd_init)

    show = sub.add_parser("show", help="list the certs in a PKI directory")
    show.add_argument("--dir", required=True, type=Path, help="PKI directory")
    show.set_defaults(func=_cmd_show)

    rot = sub.add_parser(
        "rotate",
        help="give an identity a new key and cert from the same CA (running processes reload it)",
    )
    rot.add_argument("--dir", required=True, type=Path, help="PKI directory")
    rot.add_argument(
        "--identity",
        required=True,
        metavar="NAME",
        help=f"file stem of the identity (scheduler-1, apiserver, admin, node-a, ...) or '{ALL}'",
    )
    add_ttl_flag(
        rot, default=None, help="validity of the new cert (default: the lifetime the old one was issued with)"
    )
    rot.set_defaults(func=_cmd_rotate)

    rca = sub.add_parser(
        "rotate-ca",
        help="rotate the CA in three phases: add (trust new), switch (reissue all), remove (drop old)",
        description="Rotate the cluster CA as Kubernetes' manual CA rotation does. Run the phases in "
        "order, waiting between them until every process has picked up the files (a poll interval "
        "for clients; servers at their next handshake): add -> switch -> remove. Each phase is "
        "idempotent; one run out of order is refused.",
    )
    rca.add_argument("--dir", required=True, type=Path, help="PKI directory")
    rca.add_argument("--phase", required=True, choices=PHASES, help="the phase to run")
    add_ttl_flag(
        rca, default=None, help="switch: validity of the reissued leaves (default: the lifetime each had)"
    )
    rca.add_argument(
        "--ca-ttl",
        action=DurationFlag,
        convert=cert_lifetime,
        default=CA_TTL,
        metavar="DURATION",
        help="add: validity of the new CA (default 3650d)",
    )
    rca.set_defaults(func=_cmd_rotate_ca)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _error(message: str, code: int) -> int:
    print(f"kse certs: error: {message}", file=sys.stderr)
    return code


def _cmd_init(args: argparse.Namespace) -> int:
    try:
        pki = init_pki(
            args.dir,
            scheduler_replicas=args.scheduler_replicas,
            nodes=args.nodes,
            server_hosts=args.hosts,
            leaf_ttl=args.ttl,
            overwrite=args.force,
        )
    except FileExistsError as e:
        return _error(f"{e}; pass --force to replace it (every cert issued from it stops working)", 1)
    except ValueError as e:
        return _error(str(e), 2)
    except OSError as e:
        return _error(f"cannot write {args.dir}: {e}", 1)
    print(f"Created CA and {len(pki.leaves)} certificates in {pki.dir}")
    return _cmd_show(argparse.Namespace(dir=pki.dir))


def _cmd_rotate(args: argparse.Namespace) -> int:
    try:
        rotated = rotate(args.dir, args.identity, ttl=args.ttl)
    except RotationError as e:
        return _error(str(e), 1)
    except FileNotFoundError as e:
        return _error(f"{e}", 1)
    except (OSError, ValueError) as e:
        return _error(f"cannot rotate in {args.dir}: {e}", 1)
    for leaf in rotated:
        print(
            f"rotated {leaf.stem}: serial {leaf.serial:x}, expires "
            f"{leaf.not_after.strftime('%Y-%m-%dT%H:%M:%SZ')}, issuer {leaf.issuer}"
        )
    return 0


def _cmd_rotate_ca(args: argparse.Namespace) -> int:
    try:
        result = rotate_ca(args.dir, args.phase, ttl=args.ttl, ca_ttl=args.ca_ttl)
    except RotationOrderError as e:
        return _error(f"--phase {args.phase} refused: {e}", 1)
    except RotationError as e:
        return _error(str(e), 1)
    except FileNotFoundError as e:
        return _error(f"{e}", 1)
    except (OSError, ValueError) as e:
        return _error(f"cannot rotate the CA in {args.dir}: {e}", 1)
    if result.changed:
        for action in result.actions:
            print(f"{args.phase}: {action}")
    else:
        print(f"{args.phase}: already done, nothing changed")
    print(result.status.describe())
    if args.phase in ETCD_RELOAD_PHASES and result.changed:
        return _reload_etcd_trust(args.dir, args.phase)
    return 0


# etcd 3.5 reads --trusted-ca-file only at start: after these phases every member must restart.
ETCD_RELOAD_PHASES = ("add", "remove")


def _reload_etcd_trust(pki_dir: Path, phase: str) -> int:
    """On a running `kse up`: restart its etcd members one at a time now. Elsewhere: say how."""
    import asyncio

    from harness.up.etcd_restarts import EtcdRestartError, restart_etcd_members, running_cluster_for_pki

    cf = running_cluster_for_pki(pki_dir)
    if cf is None:
        print(
            f"next: etcd reads its trusted CA only at start. Restart each etcd member now, one at a "
            f"time, each healthy before the next (compose: `docker compose restart etcd-1`, then etcd-2, "
            f"etcd-3), before the phase after {phase}."
        )
        return 0
    print(f"{phase}: restarting the etcd members of the running kse up (pid {cf.owner_pid}) one at a time")
    try:
        names = asyncio.run(restart_etcd_members(cf.data_dir, lambda m: print(f"{phase}: {m}", flush=True)))
    except EtcdRestartError as e:
        return _error(f"{e}; restart the remaining etcd members by hand before the next phase", 1)
    print(f"{phase}: every etcd member ({', '.join(names)}) now trusts the new bundle")
    return 0


@dataclass(frozen=True)
class _Row:
    file: str
    cn: str
    o: str
    not_after: str
    issuer: str


def _cmd_show(args: argparse.Namespace) -> int:
    pki_dir: Path = args.dir
    if not pki_dir.is_dir():
        return _error(f"no such directory: {pki_dir}", 1)
    files = sorted(pki_dir.glob(f"*{CERT_SUFFIX}"), key=_show_order)
    if not files:
        return _error(f"no certificates in {pki_dir}", 1)
    rows: list[_Row] = []
    failed = False
    now = datetime.now(UTC)
    for path in files:
        try:
            certs = x509.load_pem_x509_certificates(path.read_bytes())
        except (OSError, ValueError) as e:
            rows.append(_Row(path.name, f"<unreadable: {e}>", "", "", ""))
            failed = True
            continue
        rows += [_row(path.name, cert, now) for cert in certs]
    _print_table(rows)
    try:
        status = ca_rotation_status(pki_dir)
    except (OSError, ValueError):
        status = None  # no CA (or an unreadable one): the table already says so
    if status is not None and status.phase is not CAPhase.IDLE:
        print(status.describe())
    return 1 if failed else 0


def _show_order(path: Path) -> tuple[int, str]:
    # CA first, then the trust bundle, then the leaves by name: the order one reads a chain in.
    first = {
        f"{CA_STEM}{CERT_SUFFIX}": 0,
        f"{CA_NEXT_STEM}{CERT_SUFFIX}": 1,
        f"{CA_PREV_STEM}{CERT_SUFFIX}": 2,
        CA_BUNDLE_FILE: 3,
    }
    return (first.get(path.name, 4), path.name)


def _row(file: str, cert: x509.Certificate, now: datetime) -> _Row:
    not_after = cert.not_valid_after_utc
    expiry = not_after.strftime("%Y-%m-%dT%H:%M:%SZ") + (" (EXPIRED)" if not_after <= now else "")
    return _Row(
        file,
        _attr(cert.subject, NameOID.COMMON_NAME),
        _attr(cert.subject, NameOID.ORGANIZATION_NAME),
        expiry,
        _attr(cert.issuer, NameOID.COMMON_NAME),
    )


def _attr(name: x509.Name, oid: x509.ObjectIdentifier) -> str:
    values = [a.value for a in name.get_attributes_for_oid(oid)]
    return ",".join(v.decode() if isinstance(v, bytes) else v for v in values) or "-"


def _print_table(rows: Sequence[_Row]) -> None:
    header = _Row("FILE", "CN", "O", "NOT-AFTER", "ISSUER")
    table = [header, *rows]
    widths = [max(len(getattr(r, f)) for r in table) for f in ("file", "cn", "o", "not_after")]
    for r in table:
        cells = (r.file, r.cn, r.o, r.not_after)
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  " + r.issuer)
