"""`kse nodesim`: simulate N kubelets in one process until SIGTERM / SIGINT.

    kse nodesim --connection-file nodesim.json --nodes 500 --zones zone-a,zone-b,zone-c \\
        --taint dedicated=gpu:NoSchedule --taint-fraction 0.1 --images nginx=150Mi,redis=110Mi \\
        --ready-file /tmp/nodesim.ready

The identity is the PKI's `nodesim` client (CN kse:nodesim, O kse:nodesims), which may act for any
node: give a connection file, or `--server` with `--ca/--cert/--key`, or `--server` with `--pki-dir`
(the `nodesim` pair in it). Those files are followed while it runs (a rotated pair or CA bundle
swaps the channel, no call fails); `--rpc-error-log PATH` logs every failed RPC as a JSON line.
With `--control-file PATH`, SIGHUP re-reads PATH and stops or starts the kubelets of the nodes it
names (`{"stopped": ["node-3"], "kubeletVersions": {"node-3": "v1.35.0"}}`): a stopped kubelet
writes nothing, so its Lease goes stale; a restarted one posts its status at once, with the new
kubeletVersion if one is given.
Exit codes: 0 after a clean stop, 1 when it cannot start or the API server refuses it, 2 for bad
flags.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kse.config import ConnectionFile
from kse.durations import DurationError, DurationFlag, PositiveDuration, non_negative_duration
from kse.durations import positive_duration as positive_duration  # re-export (tests)
from kse.fileio import write_atomic
from kse.flags.argtypes import boolean, non_negative_float, non_negative_int, positive_int
from kse.flags.connection_args import (
    add_connection_flags,
    connection_from_args,
    connection_source,
    rpc_error_log_from_args,
)
from kse.flags.logging_args import add_log_level_flag, setup_logging
from kse.tasks import TaskSet

if TYPE_CHECKING:
    from kse.client.clientset import ChannelSource

log = logging.getLogger("nodesim")


# ---------------------------------------------------------------- argparse types (shared with workload_cli)


# Re-exported for workload_cli and the tests: one duration parser for every command (kse.durations).
duration = non_negative_duration


def whole_seconds(text: str) -> int:
    """A positive duration that is a whole number of seconds ("40", "40s", "1m"), as an int: a
    Lease's leaseDurationSeconds is an integer."""
    value = positive_duration(text)
    if value != int(value):
        raise DurationError(f"must be a whole number of seconds, got {text}")
    return int(value)


def fraction(text: str) -> float:
    value = non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def byte_size(text: str) -> int:
    from nodesim.template import TemplateError, parse_size

    try:
        return parse_size(text)
    except TemplateError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# ---------------------------------------------------------------- kse nodesim


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse nodesim", description="Run simulated kubelets.")
    fleet = p.add_argument_group("nodes")
    fleet.add_argument("--nodes", type=non_negative_int, default=100, help="how many nodes (default 100)")
    fleet.add_argument(
        "--node-template",
        type=Path,
        metavar="FILE",
        help="a Node manifest to start from (its generateName is the default name prefix)",
    )
    fleet.add_argument(
        "--name-prefix",
        help="node names are PREFIX<index> (default: the template's generateName, else nodesim-)",
    )
    fleet.add_argument(
        "--first-index",
        type=non_negative_int,
        default=0,
        help="index of the first node (names, IPs): run several processes side by side",
    )
    fleet.add_argument("--cpu", help="CPU capacity (default: the template's, else 4)")
    fleet.add_argument("--memory", help="memory capacity (default: the template's, else 32Gi)")
    fleet.add_argument("--pods", help="pod capacity (default: the template's, else 110)")
    fleet.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="NAME=QTY",
        help="extra capacity, e.g. example.com/gpu=2 (repeatable)",
    )
    fleet.add_argument(
        "--label", action="append", default=[], metavar="KEY=VALUE", help="extra node label (repeatable)"
    )
    fleet.add_argument(
        "--zones", default="", help="comma-separated zones, spread round-robin (e.g. zone-a,zone-b)"
    )
    fleet.add_argument(
        "--region", default="region-1", help="region label of zoned nodes (default %(default)s)"
    )
    fleet.add_argument(
        "--taint",
        action="append",
        default=[],
        metavar="KEY=VALUE:EFFECT",
        help="taint (repeatable), applied to --taint-fraction of the nodes",
    )
    fleet.add_argument(
        "--taint-fraction",
        type=fraction,
        default=1.0,
        help="fraction of nodes that get the --taint taints (default 1)",
    )
    img = p.add_argument_group("images")
    img.add_argument(
        "--images",
        default="",
        metavar="NAME=SIZE,...",
        help="images with sizes; each node starts with a random subset",
    )
    img.add_argument(
        "--image-fraction",
        type=fraction,
        default=0.5,
        help="probability that a node starts with each image (default 0.5)",
    )
    img.add_argument("--seed", type=int, default=0, help="seed of the taint and image choices (default 0)")
    img.add_argument(
        "--image-pull-bandwidth",
        type=byte_size,
        default=byte_size("100Mi"),
        metavar="SIZE",
        help="bytes per second a node pulls (default 100Mi; 0: pulls are instant)",
    )
    img.add_argument(
        "--default-image-size",
        type=byte_size,
        default=byte_size("100Mi"),
        metavar="SIZE",
        help="size of an image not in --images (default 100Mi)",
    )
    reg = p.add_argument_group(
        "registry pull model (on with --registry-bandwidth or --serialize-image-pulls=false)"
    )
    reg.add_argument(
        "--registry-bandwidth",
        type=byte_size,
        default=0,
        metavar="SIZE",
        help="bytes per second the registry serves to all nodes together, shared max-min fairly "
        "among the pulls in flight (default 0: no shared limit, and the per-node model)",
    )
    reg.add_argument(
        "--serialize-image-pulls",
        type=boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="pull one image at a time per node (default true, as kubelet); false: in parallel",
    )
    reg.add_argument(
        "--always-pull-check",
        action=DurationFlag,
        default=0.1,
        metavar="DURATION",
        help="cost of imagePullPolicy Always on an image already present (default 100ms)",
    )
    img.add_argument(
        "--pre-pull-events",
        action="store_true",
        help="watch Events and pull what PrePullImages events ask of our nodes "
        "(the ImagePrePull sample Permit plugin's requests)",
    )
    kub = p.add_argument_group("kubelet behaviour")
    kub.add_argument(
        "--heartbeat-interval",
        action=PositiveDuration,
        default=10.0,
        metavar="DURATION",
        help="node Lease renew interval (default 10s, as kubelet)",
    )
    kub.add_argument(
        "--lease-duration",
        action=DurationFlag,
        convert=whole_seconds,
        default=40,
        metavar="SECONDS",
        help="leaseDurationSeconds of the node Leases (default 40)",
    )
    kub.add_argument(
        "--node-status-report-interval",
        action=PositiveDuration,
        default=300.0,
        metavar="DURATION",
        help="Ready heartbeat in the node status (default 5m, as kubelet)",
    )
    kub.add_argument(
        "--node-status-batch-interval",
        action=PositiveDuration,
        default=1.0,
        metavar="DURATION",
        help="changed node status (images) is written at most this often per node (default 1s)",
    )
    kub.add_argument(
        "--termination-delay",
        action=DurationFlag,
        default=None,
        metavar="DURATION",
        help="how long a pod being deleted takes to stop: min(its grace period, this) "
        "(default: the grace period, as containers that ignore SIGTERM)",
    )
    kub.add_argument(
        "--delete-nodes-on-exit",
        action="store_true",
        help="delete the nodes and their leases on SIGTERM / SIGINT",
    )
    add_connection_flags(p, "nodesim", pki_stem="nodesim")
    lim = p.add_argument_group("client")
    lim.add_argument(
        "--qps",
        type=non_negative_float,
        default=None,
        help="QPS of node status, pod status and registration writes "
        "(default max(100, nodes/2); 0: unlimited)",
    )
    lim.add_argument("--burst", type=positive_int, default=None, help="burst (default 2 x qps)")
    lim.add_argument(
        "--heartbeat-qps",
        type=non_negative_float,
        default=0.0,
        help="QPS of the lease heartbeat client (default 0: unlimited, as kubelet's)",
    )
    lim.add_argument(
        "--concurrency",
        type=positive_int,
        default=64,
        help="API calls in flight per kind of work (default 64)",
    )
    p.add_argument(
        "--control-file",
        type=Path,
        help='JSON {"stopped": [NODE...], "kubeletVersions": {NODE: VERSION}}, read at start and on SIGHUP',
    )
    p.add_argument(
        "--ready-file", type=Path, help='written once every node is registered: {"nodes": N, "pid": N}'
    )
    p.add_argument(
        "--stats-file",
        type=Path,
        help="written on exit: the simulator's counters as one JSON object (bytes_pulled, ...)",
    )
    p.add_argument(
        "--stats-interval",
        action=DurationFlag,
        default=30.0,
        metavar="DURATION",
        help="log a stats line this often (default 30s; 0: never)",
    )
    add_log_level_flag(p)
    return p


def config_from_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> object:
    from nodesim.simulator import NodeSimConfig
    from nodesim.template import (
        FleetConfig,
        TemplateError,
        load_node_template,
        parse_images,
        parse_labels,
        parse_resources,
        parse_taint,
    )

    try:
        template = load_node_template(args.node_template) if args.node_template else None
        fleet = FleetConfig(
            count=args.nodes,
            name_prefix=args.name_prefix,
            first_index=args.first_index,
            cpu=args.cpu,
            memory=args.memory,
            pods=args.pods,
            resources=parse_resources(args.resource),
            labels=parse_labels(args.label),
            zones=tuple(z.strip() for z in args.zones.split(",") if z.strip()),
            region=args.region,
            taints=tuple(parse_taint(t) for t in args.taint),
            taint_fraction=args.taint_fraction,
            images=parse_images(args.images),
            image_fraction=args.image_fraction,
            seed=args.seed,
            template=template,
        )
        return NodeSimConfig(
            fleet=fleet,
            heartbeat_interval=args.heartbeat_interval,
            lease_duration_seconds=args.lease_duration,
            node_status_report_interval=args.node_status_report_interval,
            node_status_batch_interval=args.node_status_batch_interval,
            default_image_size=args.default_image_size,
            image_pull_bandwidth=float(args.image_pull_bandwidth),
            registry_bandwidth=float(args.registry_bandwidth),
            serialize_image_pulls=args.serialize_image_pulls,
            always_pull_check_s=args.always_pull_check,
            pre_pull_events=args.pre_pull_events,
            register_concurrency=args.concurrency,
            write_concurrency=args.concurrency,
            heartbeat_concurrency=args.concurrency,
            heartbeat_qps=args.heartbeat_qps,
            delete_nodes_on_exit=args.delete_nodes_on_exit,
            stats_interval=args.stats_interval,
            termination_delay=args.termination_delay,
        )
    except (TemplateError, ValueError, OSError) as e:
        p.error(str(e))


def client_limits(args: argparse.Namespace) -> tuple[float, int]:
    qps = args.qps if args.qps is not None else max(100.0, args.nodes / 2)
    burst = args.burst if args.burst is not None else max(1, int(2 * qps))
    return float(qps), int(burst)


@contextlib.asynccontextmanager
async def client_channel(args: argparse.Namespace, conn: ConnectionFile) -> AsyncIterator[ChannelSource]:
    """The channel source of a client component (nodesim, workload): it follows the credential
    files (rotation, renewal), its clientsets ask it for the current channel on every call and
    watch, and with `--rpc-error-log` every failed RPC is logged. Closed (and the log) on exit."""
    errors = rpc_error_log_from_args(args)
    channel = connection_source(conn, errors)
    try:
        yield channel
    finally:
        await channel.close()
        if errors is not None:
            errors.close()


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], object]) -> Iterator[None]:
    """SIGTERM and SIGINT call `stop` (a graceful stop) while the block runs."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    try:
        yield
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def run_component(
    argv: Sequence[str] | None,
    parser: argparse.ArgumentParser,
    stem: str,
    config_from_args: Callable[[argparse.ArgumentParser, argparse.Namespace], object],
    serve: Callable[[argparse.Namespace, object, ConnectionFile], Coroutine[Any, Any, int]],
    *,
    interrupted: int,
) -> int:
    """The `main` of a client component: parse, log, find its connection (`stem`'s identity in a
    PKI dir) and its config, run `serve`; `interrupted` is the exit status of a Ctrl-C that reached
    Python before the signal handlers were installed."""
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging(args.log_level)
    conn = connection_from_args(parser, args, stem)
    config = config_from_args(parser, args)
    try:
        return asyncio.run(serve(args, config, conn))
    except KeyboardInterrupt:
        return interrupted
    except OSError as e:
        logging.getLogger(stem).error("cannot start: %s", e)
        return 1


async def serve(args: argparse.Namespace, config: object, conn: ConnectionFile) -> int:
    from kse.client.clientset import Clientset
    from kse.client.errors import ApiError
    from nodesim.simulator import NodeSimConfig, NodeSimulator

    assert isinstance(config, NodeSimConfig)
    qps, burst = client_limits(args)
    async with client_channel(args, conn) as channel:
        sim = NodeSimulator(Clientset(channel, qps=qps, burst=burst, user_agent="kse-nodesim/0.1"), config)
        if args.control_file is not None:
            if not load_control(args.control_file, sim):
                return 1
        with stop_on_signals(sim.stop), reload_on_sighup(args.control_file, sim):
            # Neither task outlives this block; the outcome of `run` is read below.
            async with TaskSet("nodesim", logger=log, failure_level=logging.DEBUG) as tasks:
                run = tasks.spawn(sim.run(), name="nodesim")
                reg = tasks.spawn(sim.wait_registered(), name="nodesim-registered")
                await asyncio.wait([run, reg], return_when=asyncio.FIRST_COMPLETED)
                reg.cancel()
                if sim.registered and args.ready_file is not None:
                    ready = {"nodes": len(sim.nodes), "pid": os.getpid()}
                    write_atomic(args.ready_file, json.dumps(ready) + "\n")
                    log.info("ready: %d nodes registered (ready file %s)", len(sim.nodes), args.ready_file)
                try:
                    await run
                except ApiError as e:
                    log.error("the API server refused the simulator: %s", e.kubectl_message())
                    return 1
                log.info("stopped; %s", json.dumps(sim.stats.as_dict()))
                if args.stats_file is not None:
                    write_atomic(args.stats_file, json.dumps(sim.stats.as_dict()) + "\n")
                return 0


def load_control(path: Path, sim: Any) -> bool:
    """Read the control file and apply it to the simulator; False (logged) if it is unusable."""
    from nodesim.simulator import KubeletControl

    try:
        control = KubeletControl.from_json(json.loads(path.read_text()))
    except (OSError, ValueError) as e:
        log.error("control file %s not applied: %s", path, e)
        return False
    sim.apply_control(control)
    log.info("control file %s applied: stopped kubelets %s", path, sim.stopped_kubelets() or "none")
    return True


@contextlib.contextmanager
def reload_on_sighup(path: Path | None, sim: Any) -> Iterator[None]:
    """SIGHUP re-reads the control file while the block runs (nothing without one)."""
    if path is None:
        yield
        return
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, load_control, path, sim)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGHUP)


def main(argv: Sequence[str] | None = None) -> int:
    return run_component(argv, build_parser(), "nodesim", config_from_args, serve, interrupted=0)
