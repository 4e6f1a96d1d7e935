"""`kse fuzz apiserver`: a seeded stream of requests at a real API server, judged one by one.

The run starts its own etcd (one member) and one `kse apiserver` (gRPC and `--http-listen`) under a
temp dir, creates the `fuzz` namespace and one node, then sends `requests` requests
(`chaos.fuzz.requests.make_request(seed, i)`) from `concurrency` workers through both doors as five
identities (admin, workload, a scheduler, a node, chaos). Each answer goes through the oracle
(`chaos.fuzz.oracle`); the server's pid and /healthz are checked after every transport error and
every `CHECK_EVERY` requests (a crash ends the run), and its RSS is sampled. At the end every key
under the server's etcd prefix is read from etcd directly and each object is decoded and given to
`validate` (the server's own validation, passed in by the CLI: chaos may not import the API
server, by the layer table) - an invalid object in etcd is a finding. With `attach` (a `kse up`
data dir) it fuzzes that cluster's API server instead, through its cluster.json, and leaves it
running.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import grpc.aio
from google.protobuf.message import DecodeError, Message

from certs.layout import PKI, node_stem
from certs.pki import init_pki
from chaos.fuzz import oracle
from chaos.fuzz.doors import Answer, GrpcDoor, HttpDoor
from chaos.fuzz.requests import SERVICE, Request, make_request
from chaos.fuzz.values import NAMESPACE, NODE, valid_object
from harness.bench.common import work_dir
from harness.procs.apiserver import ApiServerProcess
from harness.procs.etcd import start_cluster
from harness.procs.launcher import Launcher
from harness.procs.proctable import rss_mib
from kse.config import ConnectionFile
from kse.etcdclient import EtcdTLS
from kse.objects.kinds import BY_KIND, BY_RESOURCE, Kind
from kse.objects.manifest import decode_object
from proto import kse_pb2 as pb

Validator = Callable[[Kind, Message], Sequence[str]]
PREFIX = "/registry-fuzz"
CHECK_EVERY = 100
MAX_FINDINGS_KEPT = 200


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries only the summary)."""
    print(f"[fuzz] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class FuzzConfig:
    requests: int = 10_000
    seed: int = 1
    concurrency: int = 4
    deadline: float = 20.0  # per request; the server's own call deadlines are longer (watch: none)
    report_dir: Path | None = None
    keep: bool = False
    only: tuple[int, ...] = ()  # replay just these request indexes
    apiserver_args: tuple[str, ...] = ()
    attach: Path | None = None  # a `kse up` data dir: fuzz its API server instead of starting one
    prefix: str = "/registry"  # with attach: the cluster's etcd key prefix

    def __post_init__(self) -> None:
        if self.requests < 1:
            raise ValueError(f"--requests must be at least 1, got {self.requests}")
        if self.concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.deadline <= 0:
            raise ValueError(f"--deadline must be positive, got {self.deadline}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return rss_mib(pid) is not None


class Run:
    """The state of one fuzz run: counters, findings, RSS samples."""

    def __init__(self, cfg: FuzzConfig, pid: int) -> None:
        self.cfg = cfg
        self.pid = pid
        self.sent = 0
        self.by_door: Counter[str] = Counter()
        self.by_code: Counter[str] = Counter()
        self.by_op: Counter[str] = Counter()
        self.by_class: Counter[str] = Counter()
        self.findings: list[dict[str, Any]] = []
        self.crashed = False
        start = rss_mib(pid) or 0.0
        self.rss = {"start": start, "peak": start, "end": start}

    def sample_rss(self) -> None:
        value = rss_mib(self.pid)
        if value is not None:
            self.rss["peak"] = max(self.rss["peak"], value)
            self.rss["end"] = value

    def finding(self, why: str, req: Request | None, ans: Answer | None, **extra: Any) -> None:
        self.by_class[why] += 1
        if len(self.findings) < MAX_FINDINGS_KEPT:
            item: dict[str, Any] = {"why": why, "seed": self.cfg.seed}
            if req is not None:
                item["request"] = req.record()
            if ans is not None:
                item["answer"] = ans.record()
            item.update(extra)
            self.findings.append(item)


async def _healthy(http: HttpDoor) -> bool:
    try:
        session = http.sessions["admin"]
        async with session.get("/healthz", server_hostname=http.server_name) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False


async def _check_alive(run: Run, http: HttpDoor, req: Request | None, ans: Answer | None) -> bool:
    if _alive(run.pid) and await _healthy(http):
        return True
    if not run.crashed:
        run.crashed = True
        run.finding("crash", req, ans, detail=f"the API server (pid {run.pid}) is gone or /healthz fails")
    return False


async def _drive(run: Run, grpc_door: GrpcDoor, http: HttpDoor, indexes: Sequence[int]) -> None:
    queue = iter(indexes)

    async def worker() -> None:
        for i in queue:
            if run.crashed:
                return
            try:
                req = make_request(run.cfg.seed, i)
                door = grpc_door if req.door == "grpc" else http
                ans = await door.send(req)
            except Exception as e:  # a bug of the fuzzer itself: recorded, the run goes on
                run.finding("fuzzer-error", None, None, index=i, detail=traceback.format_exception(e)[-3:])
                continue
            run.sent += 1
            run.by_door[req.door] += 1
            run.by_code[f"{req.door}:{ans.code}"] += 1
            run.by_op[req.op] += 1
            why = oracle.judge(req, ans)
            if ans.transport or ans.hang or why is not None:
                if not await _check_alive(run, http, req, ans):
                    return
            if why is not None:
                run.finding(why, req, ans)
            if run.sent % CHECK_EVERY == 0:
                run.sample_rss()
                if not await _check_alive(run, http, None, None):
                    return
                progress(
                    f"{run.sent}/{len(indexes)} requests, {sum(run.by_class.values())} findings, "
                    f"rss {run.rss['end']:.0f} MiB"
                )

    async with asyncio.TaskGroup() as tg:
        for _ in range(run.cfg.concurrency):
            tg.create_task(worker())


async def scan_etcd(
    endpoints: Sequence[str], validate: Validator, tls: EtcdTLS | None = None, prefix: str = PREFIX
) -> tuple[int, list[dict[str, Any]]]:
    """Read every key under `prefix` straight from etcd; decode and validate each stored object.
    Returns (objects read, problems)."""
    from kse.etcdclient import EtcdClient, prefix_range_end

    start = (prefix + "/").encode()
    problems: list[dict[str, Any]] = []
    count = 0
    async with await EtcdClient.connect(list(endpoints), tls=tls) as etcd:
        result = await etcd.range(start, prefix_range_end(start))
        for kv in result.kvs:
            count += 1
            key = kv.key.decode("utf-8", "replace")
            resource, sep, _ = key[len(prefix) + 1 :].partition("/")
            if not sep:
                continue  # the watch cache's progress marker of `resource`: no object
            kind = BY_RESOURCE.get(resource)
            if kind is None:
                continue  # not an object of a served kind (none today; counted, not judged)
            try:
                msg = kind.message.FromString(kv.value)
            except DecodeError as e:
                problems.append({"key": key, "detail": f"does not decode as {kind.kind}: {e}"})
                continue
            errs = list(validate(kind, msg))
            if errs:
                problems.append({"key": key, "detail": "invalid object stored", "errors": errs[:20]})
    return count, problems


async def _seed_cluster(grpc_door: GrpcDoor) -> None:
    """The namespace the fuzz objects live in and the node identity's node, created as admin."""
    rng = random.Random(0)
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    node = valid_object(rng, BY_KIND["Node"])
    node["metadata"] = {"name": NODE}
    for kind, body in ((BY_KIND["Namespace"], ns), (BY_KIND["Node"], node)):
        obj = decode_object(body, kind).obj
        call = grpc_door.channels["admin"].unary_unary(SERVICE + "Create")
        try:
            await call(pb.WriteRequest(object=obj).SerializeToString(), timeout=30)
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.ALREADY_EXISTS:  # an attached cluster may have them
                raise


@dataclass(frozen=True)
class Target:
    """The API server under fuzz: where its doors are, who may call them, its pid (for liveness and
    RSS) and its etcd (for the final read of what it stored)."""

    conns: dict[str, ConnectionFile]
    http_address: str
    pid: int
    etcd_endpoints: tuple[str, ...]
    etcd_tls: EtcdTLS | None = None
    prefix: str = PREFIX


def _identities(pki: PKI, address: str) -> dict[str, ConnectionFile]:
    """The five identities the stream uses; a PKI without the fuzz node's own leaf (a `kse up`
    one) lends its nodesim identity for the node's turn."""
    node = pki.leaves.get(node_stem(NODE)) or pki.leaves.get("nodesim") or pki["workload"]
    scheduler = pki.schedulers[0] if pki.schedulers else pki["admin"]
    paths = {"admin": pki["admin"], "workload": pki["workload"], "scheduler": scheduler}
    paths |= {"node": node, "chaos": pki["chaos"]}
    return {k: ConnectionFile.for_identity(address, p.cert, p.key, p.ca_bundle) for k, p in paths.items()}


@asynccontextmanager
async def own_target(cfg: FuzzConfig) -> AsyncIterator[Target]:
    """A fresh etcd and API server under a temp dir, stopped (and the dir removed) afterwards."""
    with work_dir("kse-fuzz-apiserver-", cfg.keep) as root:
        async with Launcher(root / "data") as launcher:
            pki = init_pki(root / "pki", scheduler_replicas=1, nodes=(NODE,))
            cluster = await start_cluster(1, root / "data" / "etcd", fast=True)
            for member in cluster.members:
                launcher.add(member.managed)
            api = ApiServerProcess(
                etcd_endpoints=cluster.endpoints,
                prefix=PREFIX,
                pki_dir=pki.dir,
                data_dir=root / "data",
                extra_args=("--http-listen", "127.0.0.1:0", *cfg.apiserver_args),
            )
            await launcher.start(api)
            http_address = str((api.ready_info or {}).get("http_address") or "")
            if api.pid is None or not http_address:
                raise RuntimeError(f"the API server is not serving HTTP: {api.ready_info}")
            yield Target(_identities(pki, api.address), http_address, api.pid, tuple(cluster.endpoints))


@asynccontextmanager
async def attached_target(data_dir: Path, prefix: str) -> AsyncIterator[Target]:
    """The API server of a running `kse up` cluster (its D/run/cluster.json), left running."""
    from certs.layout import APISERVER_ETCD_CLIENT, ca_bundle_path, cert_path, key_path
    from harness.clusterfile import ClusterFile

    cf = ClusterFile.load(data_dir)
    api = next((p for p in cf.processes.values() if p.role == "apiserver" and p.pid), None)
    if cf.apiserver is None or not cf.apiserver_http or api is None or api.pid is None:
        raise RuntimeError(f"{data_dir}: no running API server serving HTTP in its cluster.json")
    pki_dir = Path(cf.pki_dir)
    tls = None
    if cf.etcd_tls:
        tls = EtcdTLS(
            ca_bundle_path(pki_dir),
            cert_path(pki_dir, APISERVER_ETCD_CLIENT),
            key_path(pki_dir, APISERVER_ETCD_CLIENT),
        )
    pki = PKI.from_dir(pki_dir)
    yield Target(
        _identities(pki, cf.apiserver), cf.apiserver_http, api.pid, tuple(cf.etcd_endpoints), tls, prefix
    )


async def run(cfg: FuzzConfig, validate: Validator) -> dict[str, Any]:
    """One fuzz run; returns the JSON summary (and writes the report dir when asked)."""
    t0 = time.monotonic()
    target = own_target(cfg) if cfg.attach is None else attached_target(cfg.attach, cfg.prefix)
    async with target as t:
        progress(f"API server pid {t.pid}, HTTP {t.http_address}; seed {cfg.seed}")
        grpc_door = GrpcDoor(t.conns, cfg.deadline)
        http = HttpDoor(t.http_address, t.conns, cfg.deadline)
        try:
            await _seed_cluster(grpc_door)
            state = Run(cfg, t.pid)
            indexes = list(cfg.only) or list(range(cfg.requests))
            await _drive(state, grpc_door, http, indexes)
            state.sample_rss()
            if not state.crashed:
                await _check_alive(state, http, None, None)
        finally:
            await grpc_door.close()
            await http.close()
        stored, problems = await scan_etcd(t.etcd_endpoints, validate, t.etcd_tls, t.prefix)
        for p in problems:
            state.finding("invalid-in-etcd", None, None, **p)
    summary = _summary(state, stored, len(problems), time.monotonic() - t0)
    if cfg.report_dir is not None:
        write_report(cfg.report_dir, summary, state)
    return summary


def _summary(state: Run, stored: int, invalid: int, elapsed: float) -> dict[str, Any]:
    return {
        "seed": state.cfg.seed,
        "requests": state.sent,
        "by_door": dict(sorted(state.by_door.items())),
        "by_code": dict(sorted(state.by_code.items())),
        "by_op": dict(sorted(state.by_op.items())),
        "crashes": state.by_class["crash"],
        "hangs": state.by_class["hang"],
        "internal": state.by_class["internal"],
        "invalid_in_etcd": invalid,
        "objects_in_etcd": stored,
        "findings_by_class": dict(sorted(state.by_class.items())),
        "findings": sum(state.by_class.values()),
        "rss_mib": {k: round(v, 1) for k, v in state.rss.items()},
        "elapsed_s": round(elapsed, 1),
    }


def write_report(directory: Path, summary: dict[str, Any], state: Run) -> None:
    """summary.json, and findings.jsonl (one finding a line, each replayable by seed and index)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with (directory / "findings.jsonl").open("w") as f:
        for item in state.findings:
            f.write(json.dumps(item) + "\n")


def print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    print(f"seed {summary['seed']}: {summary['requests']} requests ({summary['by_door']})")
    print(
        f"crashes {summary['crashes']}, hangs {summary['hangs']}, internal {summary['internal']}, "
        f"invalid in etcd {summary['invalid_in_etcd']} (of {summary['objects_in_etcd']} objects); "
        f"findings {summary['findings']} {summary['findings_by_class']}"
    )
    rss = summary["rss_mib"]
    print(
        f"API server RSS MiB: start {rss['start']}, peak {rss['peak']}, end {rss['end']}; "
        f"{summary['elapsed_s']} s"
    )
