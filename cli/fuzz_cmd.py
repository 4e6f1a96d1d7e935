"""`kse fuzz apiserver`: the seeded structured fuzzer of `chaos.fuzz` against its own etcd and API
server. The CLI hands it the API server's own validation (`apiserver_mock.validation`) for the final
check of what is stored in etcd, since chaos may not import the server (DESIGN.md's layer table).

Exit status: 0 with no finding, 1 with findings (or a run that failed), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf.message import Message

from kse.durations import DurationFlag, positive_duration
from kse.flags.argtypes import positive_int
from kse.objects.kinds import Kind

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _index_list(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated request indexes, got {text!r}") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative request indexes, got {text!r}")
    return out


def register(subparsers: SubParsers) -> None:
    fuzz = subparsers.add_parser(
        "fuzz", help="fuzz a component with a seeded stream of bad and good requests"
    )
    sub = fuzz.add_subparsers(dest="fuzz_command", metavar="TARGET")
    fuzz.set_defaults(func=lambda _args: _usage(fuzz))
    p = sub.add_parser(
        "apiserver",
        help="fuzz every RPC and HTTP route of an API server it starts (with its own etcd)",
        description="Starts its own etcd and API server under a temp dir and sends a seeded stream of "
        "valid, mutated and malformed requests through the gRPC and HTTP doors as several identities. "
        "Findings: INTERNAL/5xx answers, hangs, crashes, error bodies that are not a Status, invalid "
        "objects in etcd (read directly). Request I of seed S is the same in every run (--only I).",
    )
    p.add_argument(
        "--requests", type=positive_int, default=10_000, metavar="N", help="requests to send (default 10000)"
    )
    p.add_argument("--seed", type=int, default=1, metavar="S", help="seed of the request stream (default 1)")
    p.add_argument(
        "--concurrency", type=positive_int, default=4, metavar="N", help="requests in flight (default 4)"
    )
    p.add_argument(
        "--deadline",
        action=DurationFlag,
        convert=positive_duration,
        default=20.0,
        metavar="S",
        help="per-request deadline in seconds (default 20)",
    )
    p.add_argument(
        "--only", type=_index_list, default=(), metavar="I,J", help="replay only these request indexes"
    )
    p.add_argument("--report", type=Path, metavar="DIR", help="write summary.json and findings.jsonl to DIR")
    p.add_argument(
        "--attach",
        type=Path,
        metavar="D",
        help="fuzz the API server of the running `kse up` cluster in data dir D instead of starting one "
        "(it writes objects into namespace fuzz and a node fuzz-node-0)",
    )
    p.add_argument(
        "--prefix",
        default="/registry",
        help="with --attach: the cluster's etcd key prefix (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print the JSON summary instead of text")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (data, certs, logs) and say where")
    p.add_argument(
        "--apiserver-arg", action="append", default=[], metavar="ARG", help="pass ARG to the API server"
    )
    p.set_defaults(func=_run)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _validate(kind: Kind, msg: Message) -> Sequence[str]:
    from apiserver_mock.validation import validate_object

    return list(validate_object(kind, msg).items)


def _run(args: argparse.Namespace) -> int:
    from chaos.fuzz.runner import FuzzConfig, print_summary, run
    from harness.stoppable import Stopped, run_stoppable

    try:
        cfg = FuzzConfig(
            requests=args.requests,
            seed=args.seed,
            concurrency=args.concurrency,
            deadline=args.deadline,
            report_dir=args.report,
            keep=args.keep,
            only=args.only,
            apiserver_args=tuple(args.apiserver_arg),
            attach=args.attach,
            prefix=args.prefix,
        )
    except ValueError as e:
        print(f"kse fuzz apiserver: error: {e}", file=sys.stderr)
        return 2
    try:
        summary = run_stoppable(lambda: run(cfg, _validate))
    except Stopped as e:
        print(f"kse fuzz apiserver: {e.how}", file=sys.stderr)
        return e.exit_code
    except Exception as e:
        print(f"kse fuzz apiserver: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print_summary(summary, args.json)
    return 1 if summary["findings"] else 0
