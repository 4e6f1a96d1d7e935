"""`kse bench throughput --e2e`: scheduler_perf's SchedulingBasic through the real processes.

etcd (one member, fsync on), a `kse apiserver` and a `kse scheduler --leader-elect=false`
process, all on this machine; this process creates the nodes and pods through the API (as admin)
and watches pods to see them bound. The workload is the in-process benchmark's
(``kse.objects.synthetic.make_nodes`` / ``make_pods``): NODES nodes, INIT_PODS pods
scheduled first and not measured, then PODS measured pods.

Measured, as the issue defines it: **pods/s from the first measured pod created to the last one
bound** (seen bound on the watch). Also reported, to show where the time goes:

* the scheduler's own view, from its /metrics: attempt latency percentiles (pop to bound, the
  same quantity the in-process benchmark reports as ``attempt_ms_*``), algorithm latency,
  snapshot update time, binding RPC latency, client rate-limiter waits;
* create-to-bound latency of each measured pod as this process sees it;
* CPU use of each process (scheduler, apiserver, etcd, this one) over the measured window, as a
  percentage of one core: on 2 cores, whoever is at 100 % is the bottleneck.

The scheduler runs with ``--kube-api-qps 5000 --kube-api-burst 5000`` (scheduler_perf's client
settings): the default 50 QPS would cap binding at 50 pods/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certs.pki import init_pki
from harness.bench.common import CpuMeter, percentile, progress, work_dir
from harness.procs.apiserver import ApiServerProcess
from harness.procs.etcd import start_cluster
from harness.procs.launcher import Launcher, ManagedProcess, python_argv, ready_file_json
from harness.procs.proctable import peak_rss_mib
from kse.benchsweep import report
from kse.client.channel import secure_channel
from kse.client.clientset import Clientset, ResourceClient
from kse.client.informer import Informer
from kse.objects.synthetic import THROUGHPUT_JSON_KEYS
from kse.scrape import Samples, histogram_quantile, http_get, parse_exposition, sample_sum
from proto import kse_pb2 as pb

API_PREFIX = "/kse-bench-e2e"
CREATE_INFLIGHT = 64
SCHEDULER_QPS = "5000"


@dataclass
class E2EConfig:
    nodes: int = 5000
    init_pods: int = 1000
    pods: int = 10000
    keep: bool = False
    fsync: bool = True
    scheduler_args: tuple[str, ...] = ()
    apiserver_args: tuple[str, ...] = ()
    # "batch": this process's creates in flight go as CreateBatch calls; "unary": one Create each.
    create_call: str = "batch"
    timeout: float | None = None  # for the measured pods; default scales with their number
    profile: Path | None = None  # write a cProfile of the scheduler process here


class BoundWatcher:
    """Records when each pod of a namespace is first seen bound. An Informer underneath, so a
    watch that falls too far behind (OUT_OF_RANGE) relists instead of retrying forever; a pod
    first seen bound in a relist is stamped with the relist's time."""

    def __init__(self, client: ResourceClient[pb.Pod], namespace: str) -> None:
        self.informer: Informer[pb.Pod] = Informer(client, namespace=namespace, name="bench-pods")
        self.informer.add_event_handler(on_add=self._seen, on_update=lambda _old, new: self._seen(new))
        self.bound_at: dict[str, float] = {}
        self._waiters: list[tuple[set[str], asyncio.Future[None]]] = []

    def _seen(self, pod: pb.Pod) -> None:
        if pod.spec.node_name and pod.metadata.name not in self.bound_at:
            self.bound_at[pod.metadata.name] = time.monotonic()
            if self._waiters:
                self._wake()

    async def run(self) -> None:
        await self.informer.run()

    def _wake(self) -> None:
        still = []
        for names, fut in self._waiters:
            if names <= self.bound_at.keys():
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((names, fut))
        self._waiters = still

    async def wait_bound(self, names: set[str]) -> None:
        if names <= self.bound_at.keys():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((names, fut))
        await fut


async def create_all(
    client: ResourceClient[Any], objects: list[Any], created_at: dict[str, float] | None = None
) -> None:
    """Create every object, CREATE_INFLIGHT at a time; records each pod's creation time."""
    it = iter(objects)

    async def worker() -> None:
        for obj in it:
            await client.create(obj)
            if created_at is not None:
                created_at[obj.metadata.name] = time.monotonic()

    async with asyncio.TaskGroup() as tg:
        for _ in range(CREATE_INFLIGHT):
            tg.create_task(worker())


class SchedulerProcess(ManagedProcess):
    """`kse scheduler --leader-elect=false` as the benchmark runs it."""

    def __init__(
        self,
        api: ApiServerProcess,
        pki_dir: Path,
        data_dir: Path,
        extra: tuple[str, ...],
        profile: Path | None = None,
    ) -> None:
        from certs.layout import PKI

        ident = PKI.from_dir(pki_dir).scheduler(1)
        ready = data_dir / "run" / "scheduler.ready.json"
        argv = python_argv(
            "scheduler",
            "--leader-elect=false",
            "--server", api.address,
            "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
            "--kube-api-qps", SCHEDULER_QPS, "--kube-api-burst", SCHEDULER_QPS,
            "--metrics-bind-address", "127.0.0.1:0",
            "--ready-file", str(ready),
            "--identity", "bench-scheduler",
            "--log-level", "warning",
            *extra,
        )  # fmt: skip
        if profile is not None:
            argv[1:1] = ["-m", "cProfile", "-o", str(profile)]
        super().__init__("scheduler", argv, data_dir=data_dir, ready_file=ready, ready_check=ready_file_json)

    @property
    def metrics_address(self) -> str:
        return str(self.ready_info["metrics"])

    async def scrape(self) -> Samples:
        status, text = await http_get(self.metrics_address, "/metrics")
        if status != 200:
            raise RuntimeError(f"scheduler /metrics answered {status}")
        return parse_exposition(text)

    async def wait_synced(self, within: float = 120.0) -> None:
        deadline = time.monotonic() + within
        delay = 0.05
        while True:
            try:
                status, _ = await http_get(self.metrics_address, "/readyz")
                if status == 200:
                    return
            except OSError:
                pass
            if not self.running:
                raise RuntimeError(f"the scheduler exited with {self.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the scheduler's informers did not sync in {within:.0f} s")
            await asyncio.sleep(delay)
            delay = min(0.5, delay * 1.5)


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3) if not math.isnan(seconds) else math.nan


def _delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return sample_sum(after, name, **labels) - sample_sum(before, name, **labels)


def _delta_samples(after: Samples, before: Samples) -> Samples:
    """after - before for every counter-like sample (histograms included): the measured window."""
    out: Samples = {}
    for name, series in after.items():
        prior = {tuple(sorted(lbl.items())): v for lbl, v in before.get(name, [])}
        out[name] = [(lbl, v - prior.get(tuple(sorted(lbl.items())), 0.0)) for lbl, v in series]
    return out


async def run(cfg: E2EConfig) -> dict[str, Any]:
    from kse.objects.synthetic import make_nodes, make_pods

    with work_dir("kse-bench-e2e-", cfg.keep) as root:
        data = root / "data"
        async with Launcher(data) as launcher:
            progress(f"work dir {root}; PKI")
            pki = init_pki(root / "pki", scheduler_replicas=1)
            progress("starting etcd")
            cluster = await start_cluster(1, data / "etcd", fast=False, unsafe_no_fsync=not cfg.fsync)
            for member in cluster.members:
                launcher.add(member.managed)
            api = ApiServerProcess(
                etcd_endpoints=cluster.endpoints,
                prefix=API_PREFIX,
                pki_dir=pki.dir,
                data_dir=data,
                extra_args=cfg.apiserver_args,
            )
            await launcher.start(api)
            progress(f"API server at {api.address}")
            async with secure_channel(api.connection("admin")) as channel:
                cs = Clientset(channel, qps=0, batch_creates=cfg.create_call == "batch")
                t = time.monotonic()
                await create_all(cs.nodes, make_nodes(cfg.nodes))
                progress(f"{cfg.nodes} nodes created in {time.monotonic() - t:.1f} s; starting the scheduler")
                sched = SchedulerProcess(api, pki.dir, data, cfg.scheduler_args, cfg.profile)
                await launcher.start(sched)
                await sched.wait_synced()
                progress(f"scheduler synced (metrics at {sched.metrics_address})")

                watcher = BoundWatcher(cs.pods, "default")
                async with asyncio.TaskGroup() as tg:
                    watch_task = tg.create_task(watcher.run())
                    await watcher.informer.wait_for_sync()
                    try:
                        result = await _measure(
                            cfg, cs, sched, watcher, api, cluster.members[0].pid, make_pods
                        )
                        # peak resident set of each process over the whole run (VmHWM), read
                        # while they are alive: what a --nodes sweep plots
                        result["rss_mib"] = peak_rss_mib(sched.pid)
                        result["apiserver_rss_mib"] = peak_rss_mib(api.pid)
                        result["etcd_rss_mib"] = peak_rss_mib(cluster.members[0].pid)
                    finally:
                        watch_task.cancel()
            result["work_dir"] = str(root) if cfg.keep else None
            return result


async def _measure(
    cfg: E2EConfig,
    cs: Clientset,
    sched: SchedulerProcess,
    watcher: BoundWatcher,
    api: ApiServerProcess,
    etcd_pid: int | None,
    make_pods: Any,
) -> dict[str, Any]:
    if cfg.init_pods:
        init = make_pods("init-pod", cfg.init_pods)
        t = time.monotonic()
        init_names = {p.metadata.name for p in init}
        try:
            async with asyncio.timeout(60.0 + cfg.init_pods / 20.0):
                await asyncio.gather(create_all(cs.pods, init), watcher.wait_bound(init_names))
        except TimeoutError:
            raise RuntimeError(await _stuck(sched, watcher, init_names, "init")) from None
        progress(f"{cfg.init_pods} init pods bound in {time.monotonic() - t:.1f} s")
    measured = make_pods("pod", cfg.pods)
    names = {p.metadata.name for p in measured}
    before = await _settled_metrics(sched, cfg.init_pods)
    meter = CpuMeter({"scheduler": sched.pid, "apiserver": api.pid, "etcd": etcd_pid})
    created_at: dict[str, float] = {}
    timeout = cfg.timeout or 60.0 + cfg.pods / 20.0
    progress(f"creating {cfg.pods} measured pods (timeout {timeout:.0f} s)")
    t0 = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(create_all(cs.pods, measured, created_at), watcher.wait_bound(names))
    except TimeoutError:
        raise RuntimeError(await _stuck(sched, watcher, names, "measured")) from None
    cpu = meter.percent()
    window = time.monotonic() - t0
    created_all = max(created_at.values())
    first_created = min(created_at.values())
    last_bound = max(watcher.bound_at[n] for n in names)
    elapsed = last_bound - first_created
    after = await _settled_metrics(sched, cfg.init_pods + cfg.pods)
    win = _delta_samples(after, before)
    e2e = [watcher.bound_at[n] - created_at[n] for n in names]
    attempt = "scheduler_scheduling_attempt_duration_seconds"
    bind_rpc = "rest_client_request_duration_seconds"
    return {
        "mode": "e2e",
        "create_call": cfg.create_call,
        "nodes": cfg.nodes,
        "pods": cfg.pods,
        "pods_per_s": round(cfg.pods / elapsed, 1) if elapsed > 0 else 0.0,
        "attempt_ms_p50": _ms(histogram_quantile(0.5, win, attempt, result="scheduled")),
        "attempt_ms_p99": _ms(histogram_quantile(0.99, win, attempt, result="scheduled")),
        "init_pods": cfg.init_pods,
        "bound": len(names & watcher.bound_at.keys()),
        "elapsed_s": round(elapsed, 3),
        "create_s": round(created_all - t0, 3),
        "create_per_s": round(cfg.pods / max(created_all - first_created, 1e-9), 1),
        "create_to_bound_ms_p50": _ms(percentile(e2e, 50)),
        "create_to_bound_ms_p99": _ms(percentile(e2e, 99)),
        "algorithm_ms_p50": _ms(
            histogram_quantile(0.5, win, "scheduler_scheduling_algorithm_duration_seconds")
        ),
        "snapshot_update_ms_p50": _ms(
            histogram_quantile(0.5, win, "scheduler_snapshot_update_duration_seconds")
        ),
        "snapshot_update_ms_p99": _ms(
            histogram_quantile(0.99, win, "scheduler_snapshot_update_duration_seconds")
        ),
        "api_post_ms_p50": _ms(histogram_quantile(0.5, win, bind_rpc, verb="CREATE")),
        "api_post_ms_p99": _ms(histogram_quantile(0.99, win, bind_rpc, verb="CREATE")),
        "rate_limiter_wait_s": round(
            _delta(after, before, "rest_client_rate_limiter_duration_seconds_sum"), 3
        ),
        "attempts": {
            r: int(_delta(after, before, "scheduler_schedule_attempts_total", result=r))
            for r in ("scheduled", "unschedulable", "error")
        },
        "binds_ok": int(
            _delta(after, before, "rest_client_requests_total", resource="pods/binding", code="OK")
        ),
        "cpu_percent": cpu,
        # CPU time per measured pod of each process: what the pipeline costs, whatever else runs
        # on the machine. With a core per busiest process and `cores` in all, throughput is at
        # most min(cores / total, 1 / busiest).
        "cpu_ms_per_pod": {
            k: round(v / 100.0 * window / cfg.pods * 1000.0, 3) for k, v in cpu.items() if k != "other"
        },
        "projected_pods_per_s_2_cores": _projection(cpu, window, cfg.pods, cores=2),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "fsync": cfg.fsync,
    }


async def _settled_metrics(sched: SchedulerProcess, scheduled: int) -> Samples:
    """The scheduler's metrics once it has counted `scheduled` pods: the watch may see a bind
    before the scheduler has handled its answer, so a window starting or ending on what the watch
    saw must wait for the counters (a few ms) to hold exactly its pods."""
    deadline = time.monotonic() + 10.0
    while True:
        samples = await sched.scrape()
        done = sample_sum(samples, "scheduler_schedule_attempts_total", result="scheduled") >= scheduled
        if done or time.monotonic() > deadline:
            return samples
        await asyncio.sleep(0.05)


async def _stuck(sched: SchedulerProcess, watcher: BoundWatcher, names: set[str], phase: str) -> str:
    """Why a phase timed out: what the watch saw, and the scheduler's own account."""
    bound = len(names & watcher.bound_at.keys())
    try:
        s = await sched.scrape()
        queue = {lbl["queue"]: int(v) for lbl, v in s.get("scheduler_pending_pods", [])}
        attempts = {lbl["result"]: int(v) for lbl, v in s.get("scheduler_schedule_attempts_total", [])}
        binding = int(sample_sum(s, "scheduler_goroutines", operation="binding"))
        state = f"scheduler: pending {queue}, attempts {attempts}, binds in flight {binding}"
    except (OSError, RuntimeError, TimeoutError) as e:
        state = f"scheduler metrics unavailable: {e!r}"
    return f"{phase} phase stuck: {bound}/{len(names)} pods seen bound; {state}; log {sched.log_path}"


def _projection(cpu: dict[str, float], window: float, pods: int, cores: int) -> float:
    # "other" is the rest of the machine (CpuMeter): not part of the pipeline's cost.
    per_pod = {k: v / 100.0 * window / pods for k, v in cpu.items() if k != "other"}
    total = sum(per_pod.values())
    busiest = max(per_pod.values(), default=0.0)
    if total <= 0 or busiest <= 0:
        return 0.0
    return round(min(cores / total, 1.0 / busiest), 1)


def print_report(result: dict[str, Any], as_json: bool) -> None:

    if as_json:
        print(json.dumps({k: result[k] for k in THROUGHPUT_JSON_KEYS}))
        return

    def pair(a: str, b: str, digits: int = 1) -> str:
        return f"{result[a]:.{digits}f} / {result[b]:.{digits}f} ms"

    rows = [
        ("mode", result["mode"]),
        ("creates (this process)", "CreateBatch" if result.get("create_call") == "batch" else "Create"),
        ("nodes", result["nodes"]),
        ("init pods", result["init_pods"]),
        ("measured pods", result["pods"]),
        ("bound", result["bound"]),
        ("pods/s (first created .. last bound)", f"{result['pods_per_s']:.1f}"),
        ("attempt p50 / p99 (scheduler)", pair("attempt_ms_p50", "attempt_ms_p99")),
        ("create -> bound p50 / p99", pair("create_to_bound_ms_p50", "create_to_bound_ms_p99")),
        ("pod creation rate", f"{result['create_per_s']:.1f} /s"),
        ("algorithm p50", f"{result['algorithm_ms_p50']:.3f} ms"),
        ("snapshot update p50 / p99", pair("snapshot_update_ms_p50", "snapshot_update_ms_p99", 3)),
        ("API POST p50 / p99 (bind, events)", pair("api_post_ms_p50", "api_post_ms_p99")),
        ("client rate limiter wait (sum)", f"{result['rate_limiter_wait_s']:.3f} s"),
        ("attempts", json.dumps(result["attempts"])),
        ("CPU % of one core (other: the rest of the machine)", json.dumps(result["cpu_percent"])),
        ("CPU ms per pod", json.dumps(result["cpu_ms_per_pod"])),
        (
            "peak RSS MiB scheduler / API server / etcd",
            f"{result['rss_mib']} / {result['apiserver_rss_mib']} / {result['etcd_rss_mib']}",
        ),
        ("projected pods/s, 2 idle cores", f"{result['projected_pods_per_s_2_cores']:.1f}"),
        ("load average (1 min)", f"{result['loadavg_1m']:.2f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def run_e2e(args: argparse.Namespace) -> int:
    """The `--e2e` entry point for `kse bench throughput` (its parsed arguments). A list of node
    counts runs one cluster per point and reports them as a sweep (kse.benchsweep)."""
    nodes = args.nodes if isinstance(args.nodes, list) else [args.nodes]
    if len(nodes) > 1:
        return _run_e2e_sweep(args, nodes)
    cfg = E2EConfig(
        nodes=nodes[0],
        init_pods=args.init_pods,
        pods=args.pods,
        keep=bool(getattr(args, "keep", False)),
        fsync=not getattr(args, "no_fsync", False),
        profile=getattr(args, "profile", None),
        scheduler_args=tuple(getattr(args, "scheduler_arg", ())),
        apiserver_args=tuple(getattr(args, "apiserver_arg", ())),
        create_call=getattr(args, "create_call", "batch"),
    )
    progress(f"e2e: {cfg.nodes} nodes, {cfg.init_pods} init pods, {cfg.pods} measured pods")
    try:
        result = asyncio.run(run(cfg))
    except KeyboardInterrupt:
        print("kse bench throughput: interrupted", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"kse bench throughput --e2e: {e}", file=sys.stderr)
        return 1
    print_report(result, bool(getattr(args, "json", False)))
    return 0


def _run_e2e_sweep(args: argparse.Namespace, nodes: list[int]) -> int:
    points = []
    for n in nodes:
        cfg = E2EConfig(
            nodes=n,
            init_pods=args.init_pods,
            pods=args.pods,
            keep=bool(getattr(args, "keep", False)),
            fsync=not getattr(args, "no_fsync", False),
            scheduler_args=tuple(getattr(args, "scheduler_arg", ())),
            apiserver_args=tuple(getattr(args, "apiserver_arg", ())),
            create_call=getattr(args, "create_call", "batch"),
        )
        progress(f"e2e sweep: {n} nodes, {cfg.init_pods} init pods, {cfg.pods} measured pods")
        try:
            points.append(asyncio.run(run(cfg)))
        except KeyboardInterrupt:
            print("kse bench throughput: interrupted", file=sys.stderr)
            return 130
        except RuntimeError as e:
            print(f"kse bench throughput --e2e: {n} nodes: {e}", file=sys.stderr)
            return 1
    png = getattr(args, "png", "kse-throughput-nodes.png")
    report(points, THROUGHPUT_JSON_KEYS, bool(getattr(args, "json", False)), png,
           f"kse bench throughput --e2e, {args.pods} pods")  # fmt: skip
    return 0


if __name__ == "__main__":  # python -m harness.bench.scheduler_e2e NODES INIT PODS
    n, i, p = (int(x) for x in (sys.argv[1:4] if len(sys.argv) >= 4 else ("500", "500", "2000")))
    ns = argparse.Namespace(nodes=n, init_pods=i, pods=p, keep="--keep" in sys.argv, json=False)
    ns.no_fsync = "--no-fsync" in sys.argv
    ns.profile = next((Path(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--profile=")), None)
    sys.exit(run_e2e(ns))
