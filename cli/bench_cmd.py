"""`kse bench ...`: benchmarks that start what they measure, print a table (or one JSON object with
`--json`) on stdout, progress on stderr, and leave no process or temp dir behind.

Each benchmark is one `_add_<name>(sub)` function in `BENCHMARKS`: it adds its subparser and flags
and sets `func`. The benchmark's module is imported only when it runs, so `kse --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from kse.durations import PositiveDuration
from kse.flags.argtypes import positive_float as _positive_float
from kse.flags.argtypes import positive_int as _positive_int

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _procs(text: str) -> int | None:
    return None if text == "auto" else _positive_int(text)


def _common_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout instead of a table"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temp dir (data, certs, logs) and say where"
    )


# ---------------------------------------------------------------------- apiserver


def _add_apiserver(sub: SubParsers) -> None:
    from harness.bench.config import ApiServerBenchConfig

    d = ApiServerBenchConfig()

    p = sub.add_parser(
        "apiserver",
        help="etcd CAS ceiling vs. binds through the API server, and watch delivery latency",
        description="Starts its own etcd (1 member, fsync on) and one API server under a temp dir, then "
        "measures (a) etcd CAS txns/s from Python, (b) binds/s through the API server over gRPC and "
        "over HTTP, (c) watch delivery latency at a steady write rate to gRPC and to HTTP watchers, "
        "(d) the time of a LIST of 5000 pods over HTTP.",
    )
    p.add_argument(
        "--duration",
        action=PositiveDuration,
        default=d.duration,
        metavar="S",
        help=f"seconds of the etcd phase and of the watch phase (default {d.duration:g})",
    )
    p.add_argument(
        "--pods",
        type=_positive_int,
        default=d.pods,
        metavar="N",
        help=f"pods pre-created and then bound (default {d.pods})",
    )
    p.add_argument(
        "--inflight",
        type=_positive_int,
        default=d.inflight,
        metavar="N",
        help=f"concurrent calls in the etcd and bind phases (default {d.inflight})",
    )
    p.add_argument(
        "--watchers",
        type=_positive_int,
        default=d.watchers,
        metavar="N",
        help=f"watching clients in the watch phase (default {d.watchers})",
    )
    p.add_argument(
        "--rate",
        type=_positive_float,
        default=d.rate,
        metavar="W",
        help=f"writes per second in the watch phase (default {d.rate:g})",
    )
    p.add_argument(
        "--client-procs",
        type=_procs,
        default=d.client_procs,
        metavar="N|auto",
        help="processes generating the etcd and bind load, inflight split among them (default auto: "
        "one, and a phase whose client process saturates a core is repeated with two)",
    )
    p.add_argument(
        "--bind-call",
        choices=("batch", "unary"),
        default=d.bind_call,
        help="how the bind phase binds: 'batch' through the clientset as the scheduler does (binds in "
        "flight coalesced into BindBatch calls), 'unary' one Bind call per pod (default %(default)s)",
    )
    p.add_argument(
        "--write-call",
        choices=("batch", "unary"),
        default=d.write_call,
        help="how the watch phase's writer creates: 'batch' through a clientset that coalesces the "
        "creates in flight into CreateBatch calls, 'unary' one Create call per write (default %(default)s)",
    )
    p.add_argument(
        "--list-pods",
        type=_positive_int,
        default=d.list_pods,
        metavar="N",
        help=f"pods in the namespace listed over HTTP (default {d.list_pods})",
    )
    p.add_argument(
        "--list-repeats",
        type=_positive_int,
        default=d.list_repeats,
        metavar="N",
        help=f"HTTP LISTs timed, http_list_ms_p50 is their median (default {d.list_repeats})",
    )
    p.add_argument(
        "--apiserver-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="pass ARG to the API server (repeatable; e.g. --apiserver-arg=--no-gc-freeze to compare)",
    )
    _common_flags(p)
    p.set_defaults(func=_run_apiserver)


def _run_apiserver(args: argparse.Namespace) -> int:
    from harness.bench import apiserver

    try:
        cfg = apiserver.Config(
            duration=args.duration,
            pods=args.pods,
            inflight=args.inflight,
            watchers=args.watchers,
            rate=args.rate,
            client_procs=args.client_procs,
            bind_call=args.bind_call,
            write_call=args.write_call,
            list_pods=args.list_pods,
            list_repeats=args.list_repeats,
            keep=args.keep,
            apiserver_args=tuple(args.apiserver_arg),
        )
    except ValueError as e:
        print(f"kse bench apiserver: error: {e}", file=sys.stderr)
        return 2
    return _run(lambda: apiserver.run(cfg), lambda r: apiserver.print_report(r, args.json), "apiserver")


# ---------------------------------------------------------------------- plumbing


def _add_throughput(sub: SubParsers) -> None:
    """`kse bench throughput`: its flags are the scheduler's; `--e2e` runs the cluster version, which
    drives processes and so lives in the harness, not in the scheduler."""
    from scheduler.bench import register_throughput

    register_throughput(sub).set_defaults(func=_run_throughput)


def _run_throughput(args: argparse.Namespace) -> int:
    if args.e2e:
        if args.workload != "basic":
            print("kse bench throughput: --workload is in-process only (not with --e2e)", file=sys.stderr)
            return 2
        from harness.bench.scheduler_e2e import run_e2e

        return run_e2e(args)
    from scheduler.bench.throughput import main

    return main(args)


def _add_failover(sub: SubParsers) -> None:
    from chaos.failover_bench import register

    register(sub)


def _add_image_locality(sub: SubParsers) -> None:
    from harness.bench.image_locality import register

    register(sub)


def _add_drain(sub: SubParsers) -> None:
    from chaos.drain_bench import register

    register(sub)


def _add_scheduler_perf(sub: SubParsers) -> None:
    from cli.bench_scheduler_perf import register

    register(sub)


def _add_overload(sub: SubParsers) -> None:
    from cli.bench_overload import register

    register(sub)


BENCHMARKS: tuple[Callable[[SubParsers], None], ...] = (
    _add_apiserver,
    _add_throughput,
    _add_failover,
    _add_image_locality,
    _add_drain,
    _add_scheduler_perf,
    _add_overload,
)


def _run(
    bench: Callable[[], Coroutine[Any, Any, dict[str, Any]]],
    report: Callable[[dict[str, Any]], None],
    name: str,
) -> int:
    from harness.stoppable import Stopped, run_stoppable

    try:
        result = run_stoppable(bench)  # SIGTERM stops every child process, as Ctrl-C does
    except Stopped as e:
        print(f"kse bench {name}: {e.how}", file=sys.stderr)
        return e.exit_code
    except Exception as e:
        print(f"kse bench {name}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    report(result)
    return 0


def register(subparsers: SubParsers) -> None:
    """Add `kse bench <benchmark>` for every entry of BENCHMARKS."""
    bench = subparsers.add_parser("bench", help="benchmarks (each starts what it measures)")
    bench.set_defaults(func=lambda _args: _usage(bench))
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    for add in BENCHMARKS:
        add(sub)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2
