"""`kse bench overload`: a flood of bulk requests at many times the API server's capacity, and
what it does to leader election, memory and acknowledged writes, with priority and fairness on or off.

One run starts a `kse up` topology of its own (etcd, the API server, two leader-electing scheduler
replicas, simulated nodes and a steady workload), then:

1. **Calibrates**: the flood processes run closed-loop (`calibrate_inflight` requests in flight in
   all) for `calibrate_s` seconds; the answers per second they get is the server's capacity for
   the flood's request mix (pod creates, every `list_every`-th request a LIST of 500).
2. **Floods**: each of `flood_procs` processes (its own identity `kse:flood-<i>` in the
   `kse:workloads` group, so upstream's global-default level) sends open-loop at
   `flood_factor` x capacity / procs requests a second for `duration` seconds, with no retries
   (`harness.bench.flood`).
3. Throughout, a probe renews a Lease of its own as `system:kube-scheduler` every
   `probe_interval` seconds with kse's client (get + update, as the elector's renew does, the
   client honouring Retry-After), the scheduler Lease's holder is read every 0.25 s (as
   `system:masters`, exempt), and the API server's and etcd's RSS are sampled every second.
4. Afterwards every pod whose create was acknowledged is looked for in the store.

Pass criteria (the issue's): no leader change during the flood, every acknowledged write present,
the API server's RSS bounded (its peak under `rss_growth_limit_mib` above the pre-flood level), and
the probe's renew p99 under the renew deadline. With `--fairness off` the server runs upstream's
max-inflight limits instead (`--enable-priority-and-fairness=false`), to show the difference.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from certs.layout import CertPaths
from certs.pki import issue_leaf, load_ca, write_pair
from harness.bench.common import LoadRun, Row, format_table, ms, percentile, progress, run_load, work_dir
from harness.bench.flood import FloodArgs, flood
from harness.procs.proctable import rss_mib
from kse.client.channel import secure_channel
from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError
from kse.config import ConnectionFile
from proto import kse_pb2 as pb

FLOOD_NAMESPACE = "overload-flood"
PROBE_LEASE = ("kube-system", "kse-overload-probe")
WORKLOADS_GROUP = "kse:workloads"


@dataclass(frozen=True)
class OverloadConfig:
    duration: float = 60.0
    fairness: bool = True
    flood_procs: int = 3
    flood_factor: float = 10.0
    flood_door: str = "grpc"  # or "http": the Kubernetes HTTP API
    max_outstanding: int = 2000  # per flood process
    calibrate_s: float = 5.0
    calibrate_inflight: int = 96
    list_every: int = 20
    nodes: int = 20
    rate: float = 10.0  # the steady workload's pods per second
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    probe_interval: float = 0.5
    max_requests_inflight: int | None = None  # None: the API server's default
    max_mutating_requests_inflight: int | None = None
    rss_growth_limit_mib: float = 512.0
    extra_apiserver_args: tuple[str, ...] = ()
    keep: bool = False

    def apiserver_args(self) -> tuple[str, ...]:
        args = [f"--enable-priority-and-fairness={'true' if self.fairness else 'false'}"]
        if self.max_requests_inflight is not None:
            args += ["--max-requests-inflight", str(self.max_requests_inflight)]
        if self.max_mutating_requests_inflight is not None:
            args += ["--max-mutating-requests-inflight", str(self.max_mutating_requests_inflight)]
        return (*args, *self.extra_apiserver_args)


class _RssSampler:
    """RSS of named processes, once a second, from /proc."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self.pids = {n: p for n, p in pids.items() if p is not None}
        self.samples: dict[str, list[tuple[float, float]]] = {n: [] for n in self.pids}

    def sample(self) -> None:
        now = time.monotonic()
        for name, pid in self.pids.items():
            rss = rss_mib(pid)
            if rss is not None:
                self.samples[name].append((now, rss))

    def between(self, name: str, t0: float, t1: float) -> list[float]:
        return [v for t, v in self.samples.get(name, []) if t0 <= t <= t1]


class _LeaseProbe:
    """Renews a Lease of its own as the scheduler identity: the latency a leader's renew sees."""

    def __init__(self, cs: Clientset) -> None:
        self.cs = cs
        self.latencies: list[tuple[float, float]] = []  # (monotonic start, seconds)
        self.errors: Counter[str] = Counter()

    async def renew_once(self) -> None:
        ns, name = PROBE_LEASE
        t0 = time.monotonic()
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            try:
                lease = await self.cs.leases.get(ns, name)
            except NotFoundError:
                lease = pb.Lease()
                lease.metadata.namespace, lease.metadata.name = ns, name
                lease.spec.holder_identity = "overload-probe"
                lease.spec.lease_duration_seconds = 15
                lease.spec.renew_time = stamp
                await self.cs.leases.create(lease)
            else:
                lease.spec.renew_time = stamp
                await self.cs.leases.update(lease)
        except ApiError as e:
            self.errors[e.code_name] += 1
        else:
            self.latencies.append((t0, time.monotonic() - t0))

    def between(self, t0: float, t1: float) -> list[float]:
        return [d for t, d in self.latencies if t0 <= t <= t1]


def _flood_identities(pki_dir: Path, dest: Path, n: int) -> list[CertPaths]:
    ca = load_ca(pki_dir)
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        paths = CertPaths(
            f"flood-{i}",
            dest / f"flood-{i}.crt",
            dest / f"flood-{i}.key",
            CertPaths.in_dir(pki_dir, "admin").ca_bundle,
        )
        write_pair(paths, issue_leaf(ca, f"kse:flood-{i}", (WORKLOADS_GROUP,)))
        out.append(paths)
    return out


async def run(cfg: OverloadConfig) -> dict[str, Any]:
    """One run (see the module doc); the `--json` object."""
    from harness.up import BackoffPolicy, Cluster, ClusterPlan, ElectionPlan

    with work_dir("kse-bench-overload-", cfg.keep) as root:
        plan = ClusterPlan(
            data_dir=root / "kse",
            replicas=2,
            controller_managers=0,
            nodes=cfg.nodes,
            rate=cfg.rate,
            election=ElectionPlan(
                lease_duration=cfg.lease_duration,
                renew_deadline=cfg.renew_deadline,
                retry_period=cfg.retry_period,
            ),
            restart_policy=BackoffPolicy(initial=0.5, cap=2.0, reset_after=30.0),
            apiserver_args=cfg.apiserver_args(),
            pod_lifetime=30.0,
            http=cfg.flood_door == "http",
            log_level="info",
        )
        progress(
            f"overload: starting a cluster under {root} "
            f"(priority and fairness {'on' if cfg.fairness else 'off'})"
        )
        async with Cluster(plan, progress=lambda m: progress(f"cluster: {m}")) as cluster:
            assert cluster.apiserver is not None and cluster.clientset is not None
            leader = await cluster.wait_for_leader(60)
            progress(f"overload: leader {leader.identity}")
            address = cluster.apiserver.address
            pki_dir = cluster.pki_dir
            pids = {"apiserver": cluster.apiserver.pid, "etcd": cluster.etcd_members[0].pid}
            admin = cluster.clientset
            ns = pb.Namespace()
            ns.metadata.name = FLOOD_NAMESPACE
            try:
                await admin.namespaces.create(ns)
            except ApiError:
                pass
            identities = _flood_identities(pki_dir, root / "flood-pki", cfg.flood_procs)
            sched = CertPaths.in_dir(pki_dir, "scheduler-1")
            probe_conn = ConnectionFile.for_identity(address, sched.cert, sched.key, sched.ca_bundle)

            rss = _RssSampler(pids)
            holders: list[tuple[float, str, int]] = []  # (monotonic, holder, transitions)
            stop = asyncio.Event()
            async with secure_channel(probe_conn) as probe_channel:
                probe = _LeaseProbe(Clientset(probe_channel, qps=0, burst=1, user_agent="kse-overload-probe"))

                async def probe_loop() -> None:
                    while not stop.is_set():
                        await probe.renew_once()
                        await _sleep_unless(stop, cfg.probe_interval)

                async def watch_holder() -> None:
                    while not stop.is_set():
                        try:
                            lease = await cluster.lease()
                        except ApiError:
                            lease = None
                        if lease is not None:
                            holder = lease.spec.holder_identity
                            transitions = lease.spec.lease_transitions
                            if not holders or holders[-1][1:] != (holder, transitions):
                                holders.append((time.monotonic(), holder, transitions))
                        await _sleep_unless(stop, 0.25)

                async def sample_rss() -> None:
                    while not stop.is_set():
                        rss.sample()
                        await _sleep_unless(stop, 1.0)

                async with asyncio.TaskGroup() as tg:
                    for coro in (probe_loop(), watch_holder(), sample_rss()):
                        tg.create_task(coro)
                    await asyncio.sleep(3.0)  # a pre-flood baseline of every sampler
                    t_base = time.monotonic()

                    def flood_args(
                        phase: str, rate: float, inflight: int, duration: float
                    ) -> list[FloodArgs]:
                        return [
                            FloodArgs(
                                address=address,
                                cert=p.cert,
                                key=p.key,
                                ca=p.ca_bundle,
                                namespace=FLOOD_NAMESPACE,
                                name_prefix=f"{phase}-{i}",
                                duration=duration,
                                rate=rate,
                                max_outstanding=inflight,
                                list_every=cfg.list_every,
                                acked_file=root / f"acked-{phase}-{i}.txt",
                                door=cfg.flood_door,
                                http_address=cluster.http_address,
                            )
                            for i, p in enumerate(identities)
                        ]

                    progress(
                        f"overload: calibrating, {cfg.calibrate_inflight} in flight for {cfg.calibrate_s:g} s"
                    )
                    per_proc = max(1, cfg.calibrate_inflight // cfg.flood_procs)
                    calib = await run_load(
                        flood, flood_args("calib", 0.0, per_proc, cfg.calibrate_s), root, pids
                    )
                    capacity = calib.total.ok / calib.total.elapsed
                    rate_per_proc = cfg.flood_factor * capacity / cfg.flood_procs
                    progress(
                        f"overload: capacity {capacity:.0f} requests/s; flooding at {cfg.flood_factor:g}x "
                        f"({rate_per_proc * cfg.flood_procs:.0f}/s from {cfg.flood_procs} processes) "
                        f"for {cfg.duration:g} s"
                    )
                    t_flood = time.monotonic()
                    run = await run_load(
                        flood,
                        flood_args("flood", rate_per_proc, cfg.max_outstanding, cfg.duration),
                        root,
                        pids,
                    )
                    t_end = time.monotonic()
                    await asyncio.sleep(3.0)  # after the flood: does memory come back down
                    t_after = time.monotonic()
                    stop.set()
            acked = _acked(root)
            stored = await _stored_names(admin, FLOOD_NAMESPACE)
            missing = sorted(acked - stored)
            samples = _error_samples(root)
            return _result(
                cfg,
                capacity,
                calib,
                run,
                probe,
                holders,
                rss,
                acked,
                missing,
                (t_base, t_flood, t_end, t_after),
                samples,
            )


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


def _error_samples(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in sorted(root.glob("acked-flood-*.errors.json")):
        for code, message in json.loads(f.read_text()).items():
            out.setdefault(code, message)
    return out


def _acked(root: Path) -> set[str]:
    names: set[str] = set()
    for f in root.glob("acked-*.txt"):
        names.update(line for line in f.read_text().splitlines() if line)
    return names


async def _stored_names(cs: Clientset, namespace: str) -> set[str]:
    listed = await cs.pods.list_all(namespace, page_size=5000)
    return {p.metadata.name for p in listed.items}


def _result(
    cfg: OverloadConfig,
    capacity: float,
    calib: LoadRun,
    run: LoadRun,
    probe: _LeaseProbe,
    holders: list[tuple[float, str, int]],
    rss: _RssSampler,
    acked: set[str],
    missing: list[str],
    marks: tuple[float, float, float, float],
    samples: dict[str, str],
) -> dict[str, Any]:
    t_base, t_flood, t_end, t_after = marks
    total = run.total
    elapsed = total.elapsed
    sent = total.ok + total.failed
    not_sent = total.errors.get("not_sent", 0)
    errors = {k: v for k, v in sorted(total.errors.items()) if k != "not_sent"}
    renew = probe.between(t_flood, t_end)
    renew_before = probe.between(t_base - 3.0, t_base)  # idle: before the calibration
    changes = [h for h in holders if t_flood <= h[0] <= t_end + 3.0]
    leader_changes = len(changes)
    rss_out: dict[str, dict[str, float]] = {}
    for name in rss.pids:
        before = rss.between(name, t_base - 3.0, t_base)
        during = rss.between(name, t_flood, t_end)
        after = rss.between(name, t_end, t_after + 1.0)
        rss_out[name] = {
            "before": round(max(before), 1) if before else float("nan"),
            "peak": round(max(during), 1) if during else float("nan"),
            "after": round(after[-1], 1) if after else float("nan"),
        }
    api = rss_out.get("apiserver", {})
    growth = api.get("peak", 0.0) - api.get("before", 0.0)
    renew_p99 = percentile(renew, 99) if renew else float("nan")
    checks = {
        "no_leader_change": leader_changes == 0,
        "acked_writes_present": not missing,
        "apiserver_rss_bounded": growth <= cfg.rss_growth_limit_mib,
        "lease_renew_p99_under_renew_deadline": bool(renew) and renew_p99 < cfg.renew_deadline,
        "no_lease_renew_errors": not probe.errors,
    }
    return {
        "benchmark": "overload",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count() or 0},
        "config": asdict(cfg),
        "fairness": cfg.fairness,
        "flood_door": cfg.flood_door,
        "capacity_per_s": round(capacity, 1),
        "calibration_errors": dict(calib.total.errors),
        # Offered and sent per second of the flood's send window (`duration`); answers (accepted,
        # shed) per second of the whole window, which runs on until the last answer or deadline.
        "offered_per_s": round((sent + not_sent) / cfg.duration, 1),
        "offered_x_capacity": round((sent + not_sent) / cfg.duration / capacity, 2) if capacity else None,
        "sent_per_s": round(sent / cfg.duration, 1),
        "accepted_per_s": round(total.ok / elapsed, 1),
        "shed_per_s": round(total.errors.get("RESOURCE_EXHAUSTED", 0) / elapsed, 1),
        "flood_errors": errors,
        "flood_error_samples": samples,
        "flood_not_sent": not_sent,
        "flood_latency_ms": {
            "p50": ms(percentile(total.latencies, 50)),
            "p99": ms(percentile(total.latencies, 99)),
        },
        "leader_changes": leader_changes,
        "lease_holders": [
            {"t_s": round(t - t_flood, 2), "holder": h, "transitions": n} for t, h, n in holders
        ],
        "lease_renew_ms": {
            "before_p99": ms(percentile(renew_before, 99)) if renew_before else None,
            "p50": ms(percentile(renew, 50)) if renew else None,
            "p99": ms(renew_p99) if renew else None,
            "max": ms(max(renew)) if renew else None,
            "count": len(renew),
        },
        "lease_renew_errors": dict(probe.errors),
        "rss_mib": rss_out,
        "acked_writes": len(acked),
        "acked_missing": len(missing),
        "acked_missing_sample": missing[:10],
        "cpu_percent": run.cpu_percent,
        "checks": checks,
        "passed": all(checks.values()),
    }


def table(result: dict[str, Any]) -> str:
    r = result
    c = r["checks"]
    renew = r["lease_renew_ms"]
    api = r["rss_mib"].get("apiserver", {})
    rows = [
        Row("priority and fairness", "on" if r["fairness"] else "off"),
        Row("flood door", "Kubernetes HTTP API" if r["flood_door"] == "http" else "gRPC"),
        Row("capacity (calibrated)", f"{r['capacity_per_s']:.0f} req/s"),
        Row(
            "offered / sent",
            f"{r['offered_per_s']:.0f} / {r['sent_per_s']:.0f} req/s ({r['offered_x_capacity']}x capacity)",
        ),
        Row("accepted / shed (429)", f"{r['accepted_per_s']:.0f} / {r['shed_per_s']:.0f} req/s"),
        Row("flood errors", ", ".join(f"{k} {v}" for k, v in r["flood_errors"].items()) or "none"),
        Row("leader changes", str(r["leader_changes"]), "0", c["no_leader_change"]),
        Row(
            "lease renew p50 / p99 / max",
            f"{renew['p50']} / {renew['p99']} / {renew['max']} ms (before: p99 {renew['before_p99']} ms)",
            f"p99 < {r['config']['renew_deadline']:g} s",
            c["lease_renew_p99_under_renew_deadline"],
        ),
        Row(
            "lease renew errors",
            ", ".join(f"{k} {v}" for k, v in r["lease_renew_errors"].items()) or "none",
            "none",
            c["no_lease_renew_errors"],
        ),
        Row(
            "apiserver RSS before / peak / after",
            f"{api.get('before')} / {api.get('peak')} / {api.get('after')} MiB",
            f"peak - before <= {r['config']['rss_growth_limit_mib']:g} MiB",
            c["apiserver_rss_bounded"],
        ),
        Row(
            "acknowledged writes missing",
            f"{r['acked_missing']} of {r['acked_writes']}",
            "0",
            c["acked_writes_present"],
        ),
    ]
    return format_table(rows)
