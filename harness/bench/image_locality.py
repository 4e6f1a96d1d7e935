"""`kse bench image-locality`: does a higher ImageLocality weight make pods start sooner?

For each weight, a fresh cluster of real processes: etcd, `kse apiserver`, `kse nodesim` (the
registry pull model: every node pulls at `--node-bandwidth`, one image at a time, and all pulls
share the registry's `--registry-bandwidth`; each node starts with a seeded subset of the catalog,
each image with probability `--image-fraction`), and `kse scheduler --config` with ImageLocality
at that weight (0: disabled). This process creates the same seeded pods (`image_workload`) at
`--rate` pods/s as admin and watches them. Per weight it reports:

* start-up latency, created -> Running, as this process sees it (create answered -> the watch
  shows phase Running), p50/p90/p99 in ms;
* bytes pulled from the registry (nodesim's counter, written on exit with `--stats-file`);
* spread: the most pods on one node.

`--json` prints one JSON array, one object per weight with exactly the keys `JSON_KEYS`;
`--report DIR` writes `report.md`, `results.json` (every figure) and `latency.png` (percentiles
against weight, and bytes pulled).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from certs.pki import init_pki
from harness.bench.common import percentile, progress, work_dir
from harness.bench.image_workload import (
    NAMESPACE,
    SpecError,
    default_catalog,
    make_pods,
    parse_image_spec,
    scheduler_config,
)
from harness.bench.scheduler_e2e import SchedulerProcess
from harness.procs.apiserver import ApiServerProcess
from harness.procs.etcd import start_cluster
from harness.procs.launcher import Launcher, ManagedProcess, python_argv, ready_file_json
from kse.client.channel import secure_channel
from kse.client.clientset import Clientset
from kse.client.informer import Informer
from proto import kse_pb2 as pb

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

API_PREFIX = "/kse-bench-image"
JSON_KEYS = ("weight", "startup_ms_p50", "startup_ms_p99", "bytes_pulled", "max_pods_per_node")
Mi = 1024 * 1024


@dataclass
class ImageBenchConfig:
    nodes: int = 50
    weights: tuple[int, ...] = (0, 1, 2, 5, 10)
    pods: int | None = None  # default 3 per node
    rate: float = 20.0  # pods created per second
    images: dict[str, int] = field(default_factory=dict)  # empty: the seeded default catalog
    image_fraction: float = 0.3
    node_bandwidth: int = 100 * Mi
    registry_bandwidth: int = 1024 * Mi
    seed: int = 1
    node_cpu: str = "8"
    node_memory: str = "32Gi"
    timeout: float | None = None  # per weight, for every pod to run; default from the workload
    keep: bool = False

    @property
    def pod_count(self) -> int:
        return self.pods if self.pods is not None else 3 * self.nodes

    def catalog(self) -> dict[str, int]:
        return dict(self.images) if self.images else default_catalog(self.seed)


class StartWatcher:
    """When each pod of the namespace is first seen Running (monotonic clock)."""

    def __init__(self, cs: Clientset) -> None:
        self.informer: Informer[pb.Pod] = Informer(cs.pods, namespace=NAMESPACE, name="bench-image-pods")
        self.informer.add_event_handler(on_add=self._seen, on_update=lambda _o, new: self._seen(new))
        self.running_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self._changed = asyncio.Event()

    def _seen(self, pod: pb.Pod) -> None:
        name = pod.metadata.name
        if pod.spec.node_name:
            self.node_of[name] = pod.spec.node_name
        if pod.status.phase == "Running" and name not in self.running_at:
            self.running_at[name] = time.monotonic()
            self._changed.set()

    async def wait_running(self, names: set[str]) -> None:
        while not names <= self.running_at.keys():
            self._changed.clear()
            await self._changed.wait()


def _nodesim_argv(cfg: ImageBenchConfig, api: ApiServerProcess, pki_dir: Path, data: Path) -> list[str]:
    from certs.layout import PKI

    ident = PKI.from_dir(pki_dir).nodesim
    spec = ",".join(f"{name}={size}" for name, size in cfg.catalog().items())
    return python_argv(
        "nodesim",
        "--server", api.address,
        "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
        "--nodes", str(cfg.nodes),
        "--name-prefix", "img-node-",
        "--cpu", cfg.node_cpu, "--memory", cfg.node_memory,
        "--images", spec,
        "--image-fraction", f"{cfg.image_fraction:g}",
        "--seed", str(cfg.seed),
        "--image-pull-bandwidth", str(cfg.node_bandwidth),
        "--registry-bandwidth", str(cfg.registry_bandwidth),
        "--qps", "0",
        "--stats-file", str(data / "run" / "nodesim.stats.json"),
        "--ready-file", str(data / "run" / "nodesim.ready.json"),
        "--stats-interval", "0",
        "--log-level", "warning",
    )  # fmt: skip


def _default_timeout(cfg: ImageBenchConfig, pods: list[pb.Pod]) -> float:
    """Generous: every pod's images pulled from scratch through the registry, twice over, plus the
    creation time and a minute."""
    catalog = cfg.catalog()
    total = sum(catalog.get(c.image, 0) for p in pods for c in p.spec.containers)
    bandwidth = max(1, min(cfg.registry_bandwidth, cfg.node_bandwidth * cfg.nodes))
    return 60.0 + len(pods) / cfg.rate + 2.0 * total / bandwidth


async def _create_paced(cs: Clientset, pods: list[pb.Pod], rate: float, created_at: dict[str, float]) -> None:
    """Create `pods` at `rate` per second (on an absolute schedule, so a slow call does not slow
    the rest), recording when each create was answered."""
    t0 = time.monotonic()

    async def one(p: pb.Pod) -> None:
        await cs.pods.create(p)
        created_at[p.metadata.name] = time.monotonic()

    async with asyncio.TaskGroup() as tg:
        for i, p in enumerate(pods):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tg.create_task(one(p))


async def run_weight(cfg: ImageBenchConfig, weight: int, root: Path) -> dict[str, Any]:
    """One weight on a fresh cluster under `root`; the figures of `result_row`."""
    pods = make_pods(cfg.pod_count, cfg.catalog(), cfg.seed)
    data = root / "data"
    (data / "run").mkdir(parents=True, exist_ok=True)
    config_path = root / "scheduler-config.yaml"
    config_path.write_text(scheduler_config(weight))
    async with Launcher(data) as launcher:
        pki = init_pki(root / "pki", scheduler_replicas=1)
        cluster = await start_cluster(1, data / "etcd", fast=True, unsafe_no_fsync=True)
        for member in cluster.members:
            launcher.add(member.managed)
        api = ApiServerProcess(
            etcd_endpoints=cluster.endpoints, prefix=API_PREFIX, pki_dir=pki.dir, data_dir=data
        )
        await launcher.start(api)
        nodesim = ManagedProcess(
            "nodesim",
            _nodesim_argv(cfg, api, pki.dir, data),
            data_dir=data,
            ready_file=data / "run" / "nodesim.ready.json",
            ready_check=ready_file_json,
        )
        await launcher.start(nodesim)
        sched = SchedulerProcess(api, pki.dir, data, ("--config", str(config_path)))
        await launcher.start(sched)
        await sched.wait_synced()
        progress(f"weight {weight}: {cfg.nodes} nodes ready, scheduler synced; creating {len(pods)} pods")
        async with secure_channel(api.connection("admin")) as channel:
            cs = Clientset(channel, qps=0)
            watcher = StartWatcher(cs)
            created_at: dict[str, float] = {}
            names = {p.metadata.name for p in pods}
            timeout = cfg.timeout or _default_timeout(cfg, pods)
            t0 = time.monotonic()
            async with asyncio.TaskGroup() as tg:
                watch = tg.create_task(watcher.informer.run())
                try:
                    await watcher.informer.wait_for_sync()
                    async with asyncio.timeout(timeout):
                        await asyncio.gather(
                            _create_paced(cs, pods, cfg.rate, created_at), watcher.wait_running(names)
                        )
                except TimeoutError:
                    running = len(names & watcher.running_at.keys())
                    raise RuntimeError(
                        f"weight {weight}: only {running}/{len(names)} pods Running after {timeout:.0f} s; "
                        f"logs in {data / 'logs'} (use --keep)"
                    ) from None
                finally:
                    watch.cancel()
        elapsed = time.monotonic() - t0
        await nodesim.terminate()
    stats = json.loads((data / "run" / "nodesim.stats.json").read_text())
    startup = [watcher.running_at[n] - created_at[n] for n in names]
    per_node = Counter(watcher.node_of[n] for n in names)
    row = result_row(weight, startup, int(stats.get("bytes_pulled", 0)), per_node, cfg.nodes)
    row["elapsed_s"] = round(elapsed, 1)
    row["images_pulled"] = int(stats.get("images_pulled", 0))
    progress(
        f"weight {weight}: p50 {row['startup_ms_p50']:.0f} ms, p99 {row['startup_ms_p99']:.0f} ms, "
        f"{row['bytes_pulled'] / (1 << 30):.1f} GiB pulled, max {row['max_pods_per_node']} pods/node"
    )
    return row


def result_row(
    weight: int, startup_s: list[float], bytes_pulled: int, per_node: Counter[str], nodes: int
) -> dict[str, Any]:
    """Every figure of one weight (the JSON keys and the report's extra columns)."""

    def ms(q: float) -> float:
        v = percentile(startup_s, q)
        return round(v * 1000.0, 1) if not math.isnan(v) else math.nan

    return {
        "weight": weight,
        "startup_ms_p50": ms(50),
        "startup_ms_p90": ms(90),
        "startup_ms_p99": ms(99),
        "startup_ms_mean": round(sum(startup_s) / len(startup_s) * 1000.0, 1) if startup_s else math.nan,
        "bytes_pulled": bytes_pulled,
        "max_pods_per_node": max(per_node.values(), default=0),
        "nodes_used": len(per_node),
        "nodes": nodes,
        "pods": len(startup_s),
    }


async def run(cfg: ImageBenchConfig) -> list[dict[str, Any]]:
    rows = []
    with work_dir("kse-bench-image-", cfg.keep) as root:
        for weight in cfg.weights:
            rows.append(await run_weight(cfg, weight, root / f"weight-{weight}"))
    return rows


# ---------------------------------------------------------------------- CLI


def _weights(text: str) -> tuple[int, ...]:
    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            w = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"weights: {item!r} is not an integer") from None
        if w < 0:
            raise argparse.ArgumentTypeError(f"weights: {w} is negative (0 disables ImageLocality)")
        out.append(w)
    if not out or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"weights: want distinct integers, got {text!r}")
    return tuple(out)


def _byte_size(text: str) -> int:
    from harness.bench.image_workload import parse_size

    try:
        return parse_size(text)
    except SpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return v


def _images(text: str) -> dict[str, int]:
    try:
        return parse_image_spec(text)
    except SpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    from kse.durations import PositiveDuration
    from kse.flags.argtypes import positive_float, positive_int

    p.add_argument("--nodes", type=positive_int, default=50, help="simulated nodes (default 50)")
    p.add_argument(
        "--weights", type=_weights, default=(0, 1, 2, 5, 10), metavar="W,W,...",
        help="ImageLocality score weights, one run each (0: disabled; default 0,1,2,5,10)",
    )  # fmt: skip
    p.add_argument("--pods", type=positive_int, default=None, help="pods per run (default 3 per node)")
    p.add_argument("--rate", type=positive_float, default=20.0, help="pods created per second (default 20)")
    p.add_argument(
        "--images", type=_images, default={}, metavar="SPEC",
        help="the image catalog: NAME=SIZE,... or a file of such items "
        "(default: a seeded mix of 14 small, medium and large images)",
    )  # fmt: skip
    p.add_argument(
        "--image-fraction", type=_fraction, default=0.3,
        help="probability that a node starts with each image cached (default 0.3)",
    )  # fmt: skip
    p.add_argument(
        "--node-bandwidth", type=_byte_size, default=100 * Mi, metavar="SIZE",
        help="bytes/s each node pulls at (default 100Mi)",
    )  # fmt: skip
    p.add_argument(
        "--registry-bandwidth", type=_byte_size, default=1024 * Mi, metavar="SIZE",
        help="bytes/s the registry serves all nodes together (default 1Gi)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=1, help="seed of the catalog, caches and pods (default 1)")
    p.add_argument(
        "--timeout", action=PositiveDuration, default=None, metavar="DURATION",
        help="per weight, for every pod to run (default: from the workload)",
    )  # fmt: skip
    p.add_argument("--report", type=Path, metavar="DIR", help="write report.md, results.json, latency.png")
    p.add_argument("--json", action="store_true", help="print one JSON array, an object per weight")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (data, certs, logs) and say where")
    p.set_defaults(func=_cli)


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "image-locality",
        help="pod start-up latency, bytes pulled and spread per ImageLocality weight",
        description=(__doc__ or "").split("\n\n", 1)[0],
    )
    add_arguments(p)


def config_from_args(args: argparse.Namespace) -> ImageBenchConfig:
    return ImageBenchConfig(
        nodes=args.nodes,
        weights=args.weights,
        pods=args.pods,
        rate=args.rate,
        images=args.images,
        image_fraction=args.image_fraction,
        node_bandwidth=args.node_bandwidth,
        registry_bandwidth=args.registry_bandwidth,
        seed=args.seed,
        timeout=args.timeout,
        keep=args.keep,
    )


def _cli(args: argparse.Namespace) -> int:
    from harness.bench.image_report import print_table, write_report
    from harness.stoppable import Stopped, run_stoppable

    cfg = config_from_args(args)
    progress(
        f"image-locality: {cfg.nodes} nodes, {cfg.pod_count} pods at {cfg.rate:g}/s, weights "
        f"{','.join(map(str, cfg.weights))}, node {cfg.node_bandwidth / Mi:g} MiB/s, "
        f"registry {cfg.registry_bandwidth / Mi:g} MiB/s"
    )
    try:
        rows = run_stoppable(lambda: run(cfg))
    except Stopped as e:
        print(f"kse bench image-locality: {e.how}", file=sys.stderr)
        return e.exit_code
    except Exception as e:
        print(f"kse bench image-locality: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.report is not None:
        written = write_report(args.report, cfg, rows)
        progress(f"report: {', '.join(str(p) for p in written)}")
    if args.json:
        print(json.dumps([{k: r[k] for k in JSON_KEYS} for r in rows]))
    else:
        print_table(rows)
    return 0
