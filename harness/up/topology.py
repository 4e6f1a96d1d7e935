"""The local topology of `kse up`: a plan (plain data) and `Cluster`, the processes it runs.

    plan = ClusterPlan(data_dir=Path("/tmp/kse"), replicas=3, nodes=100, rate=20)
    async with Cluster(plan) as cluster:          # every process started and ready, in order
        leader = await cluster.wait_for_leader()   # the Replica holding the Lease
        await leader.kill()                        # SIGKILL; the supervisor restarts it (backoff)
        await cluster.replica("scheduler-2").stop()   # SIGSTOP (cont() thaws)
        await cluster.restart_apiserver()
        pods = await cluster.clientset.pods.list("default")
    # stopped in order: workload, schedulers, nodesim, API server, etcd; nothing left behind

What runs, all under one data dir D (default ~/.kse):

    D/pki/                 the PKI (`kse certs init` layout), reused unless `fresh`
    D/etcd/                etcd member data (etcd-0, ...) and their logs; ports in etcd-cluster.json
    D/logs/<name>.log      one log per process (etcd's are links into D/etcd)
    D/run/                 ready files, the lock, the pid table of the running `kse up`
    D/connections/<id>.json  a connection file per client identity (scheduler-1, nodesim, ...)
    D/config.json          the admin connection file the API server writes (`kse --config` it)
    D/audit/audit.jsonl    the API server's audit log (when the API server has --audit-log)

Processes, in dependency order: etcd (1 or 3 members, mTLS) -> API server (ready file; writes
D/config.json) -> scheduler replicas `scheduler-1..N`, each with its own client certificate
(CN system:kube-scheduler, stem scheduler-<i>), its own metrics port and its own election identity
`scheduler-<i>_<8 hex>` (new at every start, as kube-scheduler's `<hostname>_<uuid>`, so a restarted
replica comes back as a new candidate instead of resuming the dead one's term), and nodesim, started
together -> the workload. A replica that exits is restarted by the `Supervisor` (kubelet-like
backoff). Everything is in its own process group (`ManagedProcess`), and a final check after the
shutdown makes sure that no process of any start is left.

Leader election: `--leader-elect=true` and its flags are passed when `kse scheduler --help` offers
them (probed at start). Until then, TEMPORARY FALLBACK: a single replica with `--leader-elect=false`
runs, and the status says so (`Cluster.leader_election` is False).

Options of the plan that change the topology (all off by default):

* `etcd_tls` (default on): etcd serves clients over mTLS with the `etcd-server` pair; the API server
  reaches it with the `apiserver-etcd-client` pair (`--etcd-ca/--etcd-cert/--etcd-key`, which it
  reloads when they change). etcd 3.5 reads its serving pair from disk at every handshake, so a
  renewed `etcd-server` pair is served without a restart (tests/integration/test_up_certs.py checks it).
* `cert_ttl`: short-lived certificates. Every leaf of D/pki is (re)issued with that lifetime at
  start, and `kse up` runs one `certs.rotation.CertRenewer` per leaf for as long as the cluster
  runs, renewing it at a jittered 70-90 % of its life, as the kube-controller-manager's CSR signer
  serves a kubelet's certificate manager (kse has no CSR API, and `kse up` holds the CA key path).
  The components notice the new files themselves (their channel sources poll them every second; the
  API server and etcd load their serving pairs per handshake).
* `partition_proxies`: each scheduler replica reaches the API server through its own
  `harness.proxy.PartitionProxy` (`Cluster.proxies`), started before the replicas and stopped after
  them; its connection file names the proxy. A partition is then `cluster.proxies[name].partition()`.
* `rpc_error_logs`: each client component whose `--help` offers `--rpc-error-log` appends its failed
  RPCs to D/run/rpc-errors-<name>.jsonl.
* `replica_args`: extra `kse scheduler` flags for one replica (after `scheduler_args`).

D/run/cluster.json describes the running cluster for other processes (`kse chaos run --attach D`).
It is rewritten atomically (a temp file, then rename) whenever a process starts or exits, and removed
when the cluster stops. Schema (version 1):

    {
      "version": 1,
      "owner_pid": 4242,                      # the `kse up` (or Cluster) process
      "updated_at": "2024-05-01T12:00:00.123+00:00",
      "data_dir": "...", "pki_dir": "...", "run_dir": "...", "logs_dir": "...",
      "connection_file": ".../config.json",   # the admin connection file
      "connections_dir": ".../connections",    # <identity>.json per client identity
      "audit_log": ".../audit/audit.jsonl",   # null when the API server has no --audit-log
      "apiserver": "127.0.0.1:PORT",          # null before it is ready
      "etcd_endpoints": ["https://127.0.0.1:PORT"],
      "etcd_tls": true,
      "cert_ttl_s": 600.0,                    # null: long-lived certificates, no renewal
      "lease": {"namespace": "kube-system", "name": "kube-scheduler", "duration_s": 15.0},
      "processes": {                          # every process of the topology, in start order
        "scheduler-1": {
          "role": "scheduler",                # etcd | apiserver | scheduler | nodesim | workload
          "pid": 1234,                        # null while it is not running (exited, in backoff)
          "running": true,
          "paused": false,                    # SIGSTOPped
          "identity": "scheduler-1_0a1b2c3d", # its current lease identity (null for non-schedulers)
          "proxy": "127.0.0.1:PORT",          # the partition proxy it goes through, or null
          "rpc_error_log": ".../rpc-errors-scheduler-1.jsonl",   # or null
          "log": ".../logs/scheduler-1.log"
        }, ...
      }
    }
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from certs.layout import PKI, CertPaths, leaf_specs
from certs.pki import LEAF_TTL, init_pki, issue_spec, load_ca, write_pair
from certs.rotation import CertRenewer
from harness.procs.apiserver import ApiServerProcess
from harness.procs.etcd import (
    CLUSTER_FILE,
    EtcdCluster,
    EtcdLaunchError,
    EtcdProcess,
    EtcdServerTLS,
    start_cluster,
)
from harness.procs.launcher import LaunchError, ManagedProcess, ready_file_json
from harness.procs.ports import free_ports
from harness.proxy import PartitionProxy
from harness.up.status import ProcessInfo, ReplicaInfo, StatusSnapshot, StatusTracker
from harness.up.supervisor import BackoffPolicy, RestartRecord, Supervised, Supervisor
from kse.client.channel import channel_source_from_connection
from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError
from kse.config import ConnectionFile
from kse.fileio import write_atomic
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = Path("~/.kse")
STRATEGIES = ("watch", "poll")
ON_LOST_LEASE = ("exit", "standby")
_CERT_MIN_VALIDITY = timedelta(hours=1)
_PROBE_TIMEOUT = 60.0
# The shortest `cert_ttl`: renewal comes at 70-90 % of the life (counted from the backdated
# not-before), which leaves at worst ~10 % of it for every holder to re-read its files (clients poll
# every second) and for a renewal that failed to be retried. Below 30 s that margin is ~3 s: too thin
# on a loaded 2-core machine.
MIN_CERT_TTL = 30.0
CLUSTER_FILE_NAME = "cluster.json"
CLUSTER_FILE_VERSION = 1
RPC_ERROR_LOG_FLAG = "--rpc-error-log"
_RUN_FILE_POLL = 0.2  # how often the cluster.json watcher looks for exits nobody reported


class UpError(RuntimeError):
    """The cluster could not be started (the message says which process and shows its log tail)."""


# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class ElectionPlan:
    """Leader election of the scheduler replicas (kube-scheduler's --leader-elect-* flags)."""

    strategy: str = "watch"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lease_name: str = "kube-scheduler"
    lease_namespace: str = "kube-system"
    on_lost_lease: str = "exit"

    def problems(self) -> list[str]:
        out = []
        if self.strategy not in STRATEGIES:
            out.append(f"election strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.on_lost_lease not in ON_LOST_LEASE:
            out.append(f"on-lost-lease must be one of {', '.join(ON_LOST_LEASE)}, got {self.on_lost_lease!r}")
        if not self.lease_duration > self.renew_deadline:
            out.append(
                f"lease duration ({self.lease_duration:g}s) must be greater than the renew deadline "
                f"({self.renew_deadline:g}s)"
            )
        if not self.renew_deadline > 1.2 * self.retry_period:
            out.append(
                f"renew deadline ({self.renew_deadline:g}s) must be greater than 1.2 x the retry period "
                f"({self.retry_period:g}s)"
            )
        if self.retry_period <= 0:
            out.append("retry period must be > 0")
        return out


@dataclass
class ClusterPlan:
    """What `kse up` runs (plain data; `Cluster` turns it into processes)."""

    data_dir: Path = DEFAULT_DATA_DIR
    replicas: int = 3
    nodes: int = 100
    rate: float = 20.0  # workload pods per second
    workload: bool = True
    workload_total: int | None = None
    etcd_members: int = 1
    election: ElectionPlan = field(default_factory=ElectionPlan)
    fresh: bool = False
    etcd_tls: bool = True
    etcd_fast: bool = False  # test timings for etcd (10 ms heartbeat)
    prefix: str = "/registry"
    kube_api_qps: float | None = None
    kube_api_burst: int | None = None
    # Each start of a replica gets identity `<name>_<hex>` (as upstream's hostname_uuid); False: `<name>`.
    unique_identities: bool = True
    restart_policy: BackoffPolicy | None = field(default_factory=BackoffPolicy)  # None: no restarts
    log_level: str = "info"
    grace: float = 10.0  # SIGTERM -> SIGKILL
    ready_timeout: float = 60.0
    track_status: bool = True
    workload_run_id: str = ""  # default: random
    apiserver_args: tuple[str, ...] = ()
    scheduler_args: tuple[str, ...] = ()
    nodesim_args: tuple[str, ...] = ()
    workload_args: tuple[str, ...] = ()
    # Each workload pod is deleted this long after it runs (`kse workload --delete-after`), so the
    # cluster reaches a steady state instead of filling up; None keeps every pod.
    pod_lifetime: float | None = None
    # Extra `kse scheduler` args for one replica by name ("scheduler-2": [...]), after scheduler_args.
    replica_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # Short-lived certificates: every leaf lives this many seconds and is renewed (module doc).
    cert_ttl: float | None = None
    min_cert_ttl: float = MIN_CERT_TTL  # the floor `problems()` holds cert_ttl to
    partition_proxies: bool = False  # each replica reaches the API server through its own proxy
    rpc_error_logs: bool = False  # clients log failed RPCs to D/run/rpc-errors-<name>.jsonl

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).expanduser().absolute()

    def problems(self) -> list[str]:
        out = list(self.election.problems())
        if self.replicas < 1:
            out.append(f"replicas must be >= 1, got {self.replicas}")
        if self.nodes < 0:
            out.append(f"nodes must be >= 0, got {self.nodes}")
        if self.rate < 0:
            out.append(f"rate must be >= 0, got {self.rate:g}")
        if self.workload_total is not None and self.workload_total < 1:
            out.append(f"workload total must be >= 1, got {self.workload_total}")
        if self.etcd_members < 1:
            out.append(f"etcd members must be >= 1, got {self.etcd_members}")
        if not self.min_cert_ttl > 0:
            out.append(f"min_cert_ttl must be > 0, got {self.min_cert_ttl:g}")
        if self.cert_ttl is not None and not (self.min_cert_ttl <= self.cert_ttl < math.inf):
            out.append(
                f"cert TTL must be at least {self.min_cert_ttl:g}s (certificates are renewed at 70-90 % "
                f"of their life and every holder needs time to re-read them), got {self.cert_ttl:g}s"
            )
        names = set(self.scheduler_names())
        for name, args in self.replica_args.items():
            if name not in names:
                out.append(
                    f"replica_args names {name!r}, which is not a replica; have: {', '.join(sorted(names))}"
                )
            if isinstance(args, str | bytes) or not all(isinstance(a, str) for a in args):
                out.append(f"replica_args[{name!r}] must be a list of strings, got {args!r}")
        return out

    # ------------------------------------------------------------------ layout

    @property
    def pki_dir(self) -> Path:
        return self.data_dir / "pki"

    @property
    def etcd_dir(self) -> Path:
        return self.data_dir / "etcd"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    @property
    def connections_dir(self) -> Path:
        return self.data_dir / "connections"

    @property
    def connection_file(self) -> Path:
        """The admin connection file (the API server writes it; `kse --config` takes it)."""
        return self.data_dir / "config.json"

    @property
    def audit_log(self) -> Path:
        return self.data_dir / "audit" / "audit.jsonl"

    def connection_path(self, stem: str) -> Path:
        return self.connections_dir / f"{stem}.json"

    def ready_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.ready.json"

    def log_path(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    @property
    def cluster_file(self) -> Path:
        """D/run/cluster.json: the running cluster, for `kse chaos run --attach` (module doc)."""
        return self.run_dir / CLUSTER_FILE_NAME

    def rpc_error_log_path(self, name: str) -> Path:
        """Where client component `name` appends its failed RPCs (the record's client is `name`)."""
        return self.run_dir / f"rpc-errors-{name}.jsonl"

    def _rpc_error_log_args(self, name: str, flags: frozenset[str]) -> list[str]:
        if self.rpc_error_logs and RPC_ERROR_LOG_FLAG in flags:
            return [RPC_ERROR_LOG_FLAG, str(self.rpc_error_log_path(name))]
        return []

    def scheduler_names(self, replicas: int | None = None) -> list[str]:
        return [f"scheduler-{i}" for i in range(1, (self.replicas if replicas is None else replicas) + 1)]

    @property
    def cli_hint(self) -> str:
        return f"kse --config {self.connection_file} get pods"

    # ------------------------------------------------------------------ command lines

    def apiserver_extra_args(self, features: Features) -> list[str]:
        args = ["--connection-file", str(self.connection_file), "--log-level", self.log_level]
        if features.audit_log:
            args += ["--audit-log", str(self.audit_log)]
        if self.etcd_tls and "--etcd-cert" in features.apiserver_flags:
            # Named explicitly (the API server would derive them from --pki-dir too): these are the
            # files it reloads when `kse certs rotate --identity apiserver-etcd-client` or the
            # renewer rewrites them.
            etcd_client = CertPaths.in_dir(self.pki_dir, "apiserver-etcd-client")
            args += [
                "--etcd-ca", str(etcd_client.ca_bundle),
                "--etcd-cert", str(etcd_client.cert),
                "--etcd-key", str(etcd_client.key),
            ]  # fmt: skip
        return args + list(self.apiserver_args)

    def scheduler_argv(
        self, name: str, identity: str, metrics_port: int, features: Features, *, leader_elect: bool
    ) -> list[str]:
        argv = [
            *_kse(),
            "scheduler",
            "--connection-file", str(self.connection_path(name)),
            "--identity", identity,
            "--metrics-bind-address", f"127.0.0.1:{metrics_port}",
            "--ready-file", str(self.ready_path(name)),
            "--log-level", self.log_level,
        ]  # fmt: skip
        if self.kube_api_qps is not None:
            argv += ["--kube-api-qps", f"{self.kube_api_qps:g}"]
        if self.kube_api_burst is not None:
            argv += ["--kube-api-burst", str(self.kube_api_burst)]
        if not leader_elect:
            argv.append("--leader-elect=false")
        else:
            e = self.election
            argv.append("--leader-elect=true")
            wanted = {
                "--leader-elect-lease-duration": _seconds(e.lease_duration),
                "--leader-elect-renew-deadline": _seconds(e.renew_deadline),
                "--leader-elect-retry-period": _seconds(e.retry_period),
                "--leader-elect-resource-name": e.lease_name,
                "--leader-elect-resource-namespace": e.lease_namespace,
                "--leader-elect-strategy": e.strategy,
                "--on-lost-lease": e.on_lost_lease,
            }
            for flag, value in wanted.items():
                if flag in features.scheduler_flags:
                    argv += [flag, value]
        argv += self._rpc_error_log_args(name, features.scheduler_flags)
        return argv + list(self.scheduler_args) + list(self.replica_args.get(name, ()))

    def nodesim_argv(self, features: Features | None = None) -> list[str]:
        return [
            *_kse(),
            "nodesim",
            "--nodes", str(self.nodes),
            "--connection-file", str(self.connection_path("nodesim")),
            "--ready-file", str(self.ready_path("nodesim")),
            "--log-level", self.log_level,
            *self._rpc_error_log_args("nodesim", features.nodesim_flags if features else frozenset()),
            *self.nodesim_args,
        ]  # fmt: skip

    def workload_argv(self, run_id: str, features: Features | None = None) -> list[str]:
        argv = [
            *_kse(),
            "workload",
            "--connection-file", str(self.connection_path("workload")),
            "--rate", f"{self.rate:g}",
            "--run-id", run_id,
            "--ready-file", str(self.ready_path("workload")),
            "--stop-grace", "5s",
            "--log-level", self.log_level,
        ]  # fmt: skip
        if self.workload_total is not None:
            argv += ["--total", str(self.workload_total)]
        if self.pod_lifetime is not None:
            argv += ["--delete-after", _seconds(self.pod_lifetime)]
        argv += self._rpc_error_log_args("workload", features.workload_flags if features else frozenset())
        return argv + list(self.workload_args)


PODS_PER_NODE = 40  # a default simulated node's capacity in default workload pods (4 CPU / 100m)


def steady_pod_lifetime(nodes: int, rate: float) -> float:
    """How long each workload pod should live so that about half of the fleet's capacity is in use
    at the steady `rate` (clamped to 1-30 s): churn without filling the cluster."""
    if rate <= 0:
        return 30.0
    return max(1.0, min(30.0, 0.5 * PODS_PER_NODE * nodes / rate))


def _kse() -> list[str]:
    return [sys.executable, "-m", "kse"]


def _seconds(value: float) -> str:
    return f"{value:g}s"


# ---------------------------------------------------------------------------------------------- features


@dataclass(frozen=True)
class Features:
    """What the component processes offer, read from their `--help` (so kse up follows their flags)."""

    scheduler_flags: frozenset[str] = frozenset()
    apiserver_flags: frozenset[str] = frozenset()
    scheduler_help: str = ""
    nodesim_flags: frozenset[str] = frozenset()  # probed only when a plan needs them (rpc_error_logs)
    workload_flags: frozenset[str] = frozenset()

    @property
    def leader_election(self) -> bool:
        """`--leader-elect=true` is accepted (the flags exist and the help no longer says otherwise)."""
        return (
            "--leader-elect-lease-duration" in self.scheduler_flags
            and "not implemented yet" not in " ".join(self.scheduler_help.split())
        )

    @property
    def audit_log(self) -> bool:
        return "--audit-log" in self.apiserver_flags

    def rpc_error_log(self, component: str) -> bool:
        """Whether `kse <component>` (scheduler, nodesim, workload) takes --rpc-error-log."""
        flags = {
            "scheduler": self.scheduler_flags,
            "nodesim": self.nodesim_flags,
            "workload": self.workload_flags,
        }.get(component, frozenset())
        return RPC_ERROR_LOG_FLAG in flags


def _flags(help_text: str) -> frozenset[str]:
    found = set()
    for word in help_text.replace(",", " ").replace("[", " ").replace("]", " ").split():
        if word.startswith("--"):
            found.add(word.split("=", 1)[0])
    return frozenset(found)


def _help(component: str) -> str:
    try:
        out = subprocess.run(
            [*_kse(), component, "--help"],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UpError(f"cannot run `kse {component} --help`: {e}") from e
    if out.returncode != 0:
        raise UpError(f"`kse {component} --help` failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


async def probe_features(*, clients: bool = False) -> Features:
    """Ask `kse scheduler --help` and `kse apiserver --help` (in parallel) which flags they have;
    with `clients`, `kse nodesim --help` and `kse workload --help` too."""
    components = ["scheduler", "apiserver", *(["nodesim", "workload"] if clients else [])]
    helps = await asyncio.gather(*(asyncio.to_thread(_help, c) for c in components))
    found = dict(zip(components, helps, strict=True))
    return Features(
        scheduler_flags=_flags(found["scheduler"]),
        apiserver_flags=_flags(found["apiserver"]),
        scheduler_help=found["scheduler"],
        nodesim_flags=_flags(found.get("nodesim", "")),
        workload_flags=_flags(found.get("workload", "")),
    )


# ---------------------------------------------------------------------------------------------- PKI


def leaf_stems(replicas: int) -> list[str]:
    """The leaves `kse up` issues (and, with `cert_ttl`, renews), for `replicas` scheduler replicas."""
    return [spec.stem for spec in leaf_specs(scheduler_replicas=replicas)]


def ensure_pki(plan: ClusterPlan, replicas: int) -> tuple[PKI, list[str]]:
    """The PKI under D/pki: made if absent; reused otherwise, with any identity that is missing or
    expires within the hour (re)issued from the same CA. With `plan.cert_ttl`, every leaf is
    (re)issued now with that lifetime (no process runs yet; the renewers keep them fresh from here).
    Returns it and what was done."""
    from certs.rotation import pki_lock

    pki_dir = plan.pki_dir
    specs = leaf_specs(scheduler_replicas=replicas)
    short = None if plan.cert_ttl is None else timedelta(seconds=plan.cert_ttl)
    if not (pki_dir / "ca.crt").is_file() or not (pki_dir / "ca.key").is_file():
        pki = init_pki(
            pki_dir,
            scheduler_replicas=replicas,
            overwrite=(pki_dir / "ca.crt").exists(),
            leaf_ttl=short or LEAF_TTL,
        )
        lifetime = "" if short is None else f", leaves valid {plan.cert_ttl:g}s"
        return pki, [f"PKI written to {pki_dir}{lifetime}"]
    from cryptography import x509

    with pki_lock(pki_dir):  # a `kse certs rotate-ca` running against this dir must not interleave
        ca = load_ca(pki_dir)
        if ca.certificate.not_valid_after_utc < datetime.now(UTC) + _CERT_MIN_VALIDITY:
            raise UpError(f"the CA in {pki_dir} has expired (or expires within the hour); run with --fresh")
        done: list[str] = []
        for spec in specs:
            paths = CertPaths.in_dir(pki_dir, spec.stem)
            reason = ""
            if not paths.cert.is_file() or not paths.key.is_file():
                reason = "missing"
            elif short is not None:
                reason = f"short-lived, {plan.cert_ttl:g}s"
            else:
                cert = x509.load_pem_x509_certificate(paths.cert.read_bytes())
                if cert.not_valid_after_utc < datetime.now(UTC) + _CERT_MIN_VALIDITY:
                    reason = "expiring"
            if reason:
                write_pair(paths, issue_spec(ca, spec, ttl=short or LEAF_TTL))
                done.append(f"issued {spec.stem} ({reason})")
    if short is not None and done:
        done = [f"issued {len(done)} leaves valid {plan.cert_ttl:g}s in {pki_dir}"]
    return PKI.from_dir(pki_dir), done or [f"PKI reused from {pki_dir}"]


# ---------------------------------------------------------------------------------------------- processes


class SchedulerProcess(ManagedProcess):
    """A `kse scheduler` replica whose election identity is new at every start (see the module doc)."""

    def __init__(
        self,
        name: str,
        argv_for: Callable[[str], list[str]],
        *,
        unique_identity: bool,
        data_dir: Path,
        ready_file: Path,
        ready_timeout: float,
        grace: float,
        metrics_port: int,
    ) -> None:
        self._argv_for = argv_for
        self.unique_identity = unique_identity
        self.metrics_port = metrics_port
        self.identity = ""
        self.identities: list[str] = []
        self.pids: list[int] = []
        super().__init__(
            name,
            argv_for(name),
            data_dir=data_dir,
            ready_file=ready_file,
            ready_check=ready_file_json,
            ready_timeout=ready_timeout,
            grace=grace,
        )

    def new_identity(self) -> str:
        return f"{self.name}_{secrets.token_hex(4)}" if self.unique_identity else self.name

    def command_line(self) -> list[str]:
        self.identity = self.new_identity()
        self.identities.append(self.identity)
        self.argv = self._argv_for(self.identity)
        return list(self.argv)

    def start(self) -> ManagedProcess:
        super().start()
        if self.pid is not None:
            self.pids.append(self.pid)
        return self


class Replica:
    """The handle of one scheduler replica: its process, its supervision, and the faults chaos needs."""

    def __init__(self, process: SchedulerProcess, supervisor: Supervisor | None) -> None:
        self.process = process
        self._supervisor = supervisor

    def __repr__(self) -> str:
        return f"<Replica {self.name} identity={self.identity} pid={self.pid} state={self.state}>"

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def identity(self) -> str:
        """The election identity of the current (or latest) start."""
        return self.process.identity

    @property
    def identities(self) -> tuple[str, ...]:
        return tuple(self.process.identities)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.running

    @property
    def paused(self) -> bool:
        return self.process.paused and self.process.running

    @property
    def metrics_address(self) -> str:
        return f"127.0.0.1:{self.process.metrics_port}"

    @property
    def supervised(self) -> Supervised | None:
        """Its supervisor entry; None when unsupervised, or not yet added (a start that failed
        before the supervisor took the replica on still has to be stopped cleanly)."""
        if self._supervisor is None:
            return None
        try:
            return self._supervisor.get(self.name)
        except KeyError:
            return None

    @property
    def restarts(self) -> int:
        s = self.supervised
        return s.restarts if s is not None else 0

    @property
    def restart_history(self) -> list[RestartRecord]:
        s = self.supervised
        return list(s.history) if s is not None else []

    @property
    def state(self) -> str:
        s = self.supervised
        if s is not None:
            if self.running:
                return "running"
            return s.state if s.state != "running" else "exited"
        return "running" if self.running else "exited"

    def info(self, now: float | None = None) -> ReplicaInfo:
        s = self.supervised
        remaining = None
        if s is not None:
            remaining = s.backoff_remaining(time.monotonic() if now is None else now)
        return ReplicaInfo(
            name=self.name,
            identity=self.identity,
            identities=self.identities,
            pid=self.pid,
            running=self.running,
            paused=self.paused,
            restarts=self.restarts,
            state=self.state,
            backoff_remaining_s=remaining,
            metrics=self.metrics_address,
        )

    def _hold(self, restart: bool) -> None:
        if self._supervisor is not None and not restart:
            self._supervisor.hold(self.name)

    async def kill(self, *, restart: bool = True) -> int | None:
        """SIGKILL the replica's process group (a crash). `restart=False`: keep it down until `start()`."""
        self._hold(restart)
        return self.process.kill()  # SIGKILL, then a few ms until the group is gone

    async def terminate(self, *, restart: bool = True, grace: float | None = None) -> int | None:
        """SIGTERM (the leader releases its lease), SIGKILL after `grace`. `restart=False`: keep it down."""
        self._hold(restart)
        return await self.process.terminate(grace)

    async def stop(self) -> None:
        """SIGSTOP: the process freezes with its connections open (a long GC pause, a hung VM).
        Returns once every thread of it is stopped."""
        self.process.pause()
        pid = self.pid
        deadline = time.monotonic() + 5.0
        while pid is not None and time.monotonic() < deadline:
            if _all_threads_stopped(pid):
                break
            await asyncio.sleep(0.002)

    async def cont(self) -> None:
        """SIGCONT after `stop()`."""
        self.process.resume()

    async def start(self, *, wait_ready: bool = True) -> None:
        """Back under supervision; started at once if it is down (no backoff)."""
        if self._supervisor is not None:
            self._supervisor.release(self.name)
        if not self.process.running:
            self.process.start()
        if wait_ready:
            await self.process.wait_ready()


def _all_threads_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for tid in tasks:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] not in ("T", "t"):
                    return False
    except (OSError, IndexError):
        return True  # gone, or no /proc: nothing more to wait for
    return True


def pid_alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, it
    names one process for good."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


# ---------------------------------------------------------------------------------------------- cluster


Progress = Callable[[str], None]


class Cluster:
    """The processes of a plan, started in order and stopped in order (see the module doc).

    The plan is not changed, so the same Cluster may be entered again after it stopped (a
    benchmark's trials); each entry is a new run on the same data dir.

    Handles (valid inside the block): `etcd` (EtcdCluster) and `etcd_members`, `apiserver`
    (ApiServerProcess), `replicas` / `replica(name)` (Replica), `nodesim` and `workload`
    (ManagedProcess or None), `supervisor`, `clientset` (admin), `status` (StatusTracker or None),
    `data_dir`, `connection_file`, `audit_logs`.
    """

    def __init__(self, plan: ClusterPlan, *, progress: Progress | None = None) -> None:
        problems = plan.problems()
        if problems:
            raise ValueError("invalid plan: " + "; ".join(problems))
        self.plan = plan
        self.progress: Progress = progress or (lambda msg: log.info("%s", msg))
        self._reset()

    def _reset(self) -> None:
        """Fresh per-run state: a Cluster can be entered again after it stopped (same plan; the
        data dir keeps its PKI and etcd data unless the plan says `fresh`)."""
        plan = self.plan
        self.features = Features()
        self.pki: PKI | None = None
        self.etcd: EtcdCluster | None = None
        self.apiserver: ApiServerProcess | None = None
        self.replicas: list[Replica] = []
        self.nodesim: ManagedProcess | None = None
        self.workload: ManagedProcess | None = None
        self.supervisor: Supervisor | None = None
        self.clientset: Clientset | None = None
        self.status: StatusTracker | None = None
        self.run_id = plan.workload_run_id or f"up-{secrets.token_hex(4)}"
        self.ready_timings: dict[str, float] = {}  # seconds from start() to each process ready
        self.started_at: float | None = None  # time.time() when start() began
        self.ready_at: float | None = None
        self.leftovers: list[str] = []  # processes the final check had to kill
        # The status once the workload, schedulers and nodesim have stopped (before the API server).
        self.final_snapshot: StatusSnapshot | None = None
        self.notes: list[str] = []
        # With plan.cert_ttl: one renewer per leaf stem, for as long as the cluster runs.
        self.renewers: dict[str, CertRenewer] = {}
        # With plan.partition_proxies: replica name -> the proxy between it and the API server.
        self.proxies: dict[str, PartitionProxy] = {}
        self._lock_file: IO[str] | None = None
        self._channel: Any = None
        self._run_file_seen: object = None  # what cluster.json last said about the processes
        self._pids: dict[int, str] = {}
        self._stacks: dict[str, contextlib.AsyncExitStack] = {}
        self._stopping = False
        self._stopped = False

    # ------------------------------------------------------------------ properties

    @property
    def data_dir(self) -> Path:
        return self.plan.data_dir

    @property
    def connection_file(self) -> Path:
        return self.plan.connection_file

    @property
    def pki_dir(self) -> Path:
        return self.plan.pki_dir

    @property
    def cluster_file(self) -> Path:
        """D/run/cluster.json (exists while the cluster runs; schema in the module doc)."""
        return self.plan.cluster_file

    @property
    def leader_election(self) -> bool:
        return self.features.leader_election

    @property
    def etcd_members(self) -> list[EtcdProcess]:
        return list(self.etcd.members) if self.etcd is not None else []

    @property
    def audit_logs(self) -> list[Path]:
        """The API server's audit log file(s); empty while the API server has no --audit-log flag."""
        return [self.plan.audit_log] if self.features.audit_log else []

    def replica(self, name: str) -> Replica:
        for r in self.replicas:
            if r.name == name:
                return r
        raise KeyError(f"no replica {name!r}; have: {', '.join(r.name for r in self.replicas)}")

    def replica_by_identity(self, identity: str) -> Replica | None:
        for r in self.replicas:
            if identity and identity in r.identities:
                return r
        return None

    def processes(self) -> list[tuple[str, ManagedProcess]]:
        """Every process handle, in start order."""
        out: list[tuple[str, ManagedProcess]] = [(m.name, m.managed) for m in self.etcd_members]
        if self.apiserver is not None:
            out.append((self.apiserver.name, self.apiserver))
        out += [(r.name, r.process) for r in self.replicas]
        if self.nodesim is not None:
            out.append(("nodesim", self.nodesim))
        if self.workload is not None:
            out.append(("workload", self.workload))
        return out

    @property
    def pids(self) -> dict[int, str]:
        """Every pid this cluster started (all starts, restarts included) -> process name."""
        self._note_pids()
        return dict(self._pids)

    def _note_pids(self) -> None:
        for name, proc in self.processes():
            if proc.pid is not None:
                self._pids.setdefault(proc.pid, name)
        for r in self.replicas:
            for pid in r.process.pids:
                self._pids.setdefault(pid, r.name)

    # ------------------------------------------------------------------ lease and leader

    async def lease(self) -> pb.Lease | None:
        """The scheduler Lease, read from the API server now (None if there is none yet)."""
        assert self.clientset is not None, "cluster not started"
        e = self.plan.election
        try:
            return await self.clientset.leases.get(e.lease_namespace, e.lease_name)
        except NotFoundError:
            return None

    async def leader(self) -> Replica | None:
        """The replica whose current identity holds the Lease (read now), if it is running."""
        lease = await self.lease()
        if lease is None or not lease.spec.holder_identity:
            return None
        for r in self.replicas:
            if r.running and r.identity == lease.spec.holder_identity:
                return r
        return None

    async def wait_for_leader(
        self, within: float = 60.0, *, other_than: Replica | str | None = None
    ) -> Replica:
        """Poll the Lease until a running replica holds it; TimeoutError after `within` seconds.

        `other_than`: not this replica (a Replica), or not this identity (a str: e.g. the identity
        of a leader just killed, whose replica may come back under a new identity and win)."""
        deadline = time.monotonic() + within
        last_error = ""
        while True:
            try:
                r = await self.leader()
            except ApiError as e:
                r, last_error = None, str(e)
            if r is not None and not (
                r is other_than or (isinstance(other_than, str) and r.identity == other_than)
            ):
                return r
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"no leader within {within:g}s" + (f" ({last_error})" if last_error else "")
                )
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------------ faults beyond replicas

    async def restart_apiserver(self, *, kill: bool = False, grace: float | None = None) -> None:
        """Stop the API server (SIGTERM, or SIGKILL with `kill`) and start it again on the same address."""
        api = self.apiserver
        assert api is not None, "cluster not started"
        if kill:
            api.kill()
        else:
            await api.terminate(grace)
        api.start()
        self._write_run_files()
        await api.wait_ready(self.plan.ready_timeout)
        self._note_pids()
        self._write_cluster_file()

    def kill_all(self) -> None:
        """SIGKILL every process at once (a second Ctrl-C); the ordered shutdown then finds them gone."""
        if self.supervisor is not None:
            for s in self.supervisor.items():
                s.held = True
        for _, proc in reversed(self.processes()):
            with contextlib.suppress(Exception):
                proc.kill()

    # ------------------------------------------------------------------ status

    def snapshot(self) -> StatusSnapshot | None:
        """The live status (None without a status tracker)."""
        if self.status is None:
            return None
        self._note_pids()  # also catches restarts made directly on a handle (etcd, API server)
        now = time.monotonic()
        procs = [
            ProcessInfo(name, p.pid, p.running, p.returncode, p.paused and p.running)
            for name, p in self.processes()
            if not isinstance(p, SchedulerProcess)
        ]
        return self.status.snapshot(
            [r.info(now) for r in self.replicas],
            procs,
            hint=self.plan.cli_hint,
            leader_election=self.leader_election,
            notes=self.notes,
            certs=self.cert_status_line(),
        )

    # ------------------------------------------------------------------ certificates

    def cert_renewals(self) -> dict[str, dict[str, Any]]:
        """Per leaf stem: renewals done so far and the next planned one (ISO time), with cert_ttl."""
        out: dict[str, dict[str, Any]] = {}
        for stem, r in sorted(self.renewers.items()):
            out[stem] = {
                "renewals": r.renewals,
                "next_renewal": r.deadline.isoformat(timespec="seconds") if r.deadline else None,
            }
            if r.last_error is not None:
                out[stem]["last_error"] = str(r.last_error)
        return out

    def cert_status_line(self) -> str:
        """One status line: renewals so far and the next one ("" without short-lived certs)."""
        if not self.renewers:
            return ""
        total = sum(r.renewals for r in self.renewers.values())
        planned = [(r.deadline, stem) for stem, r in self.renewers.items() if r.deadline is not None]
        line = f"certs: ttl {self.plan.cert_ttl:g}s, {total} renewals across {len(self.renewers)} identities"
        if planned:
            when, stem = min(planned)
            line += f", next {stem} in {max(0.0, (when - datetime.now(UTC)).total_seconds()):.0f}s"
        failing = sorted(stem for stem, r in self.renewers.items() if r.last_error is not None)
        if failing:
            line += f"; renewal errors: {', '.join(failing)}"
        return line

    async def _start_renewers(self, pki: PKI) -> None:
        ttl = self.plan.cert_ttl
        if ttl is None:
            return
        for stem in leaf_stems(max(3, self.plan.replicas)):
            if stem in pki:
                renewer = CertRenewer(pki.dir, stem, timedelta(seconds=ttl))
                self.renewers[stem] = renewer
                await self._enter("renewers", renewer)
        self.progress(f"renewing {len(self.renewers)} short-lived certificates at 70-90 % of {ttl:g}s")

    # ------------------------------------------------------------------ D/run/cluster.json

    def cluster_info(self) -> dict[str, Any]:
        """What D/run/cluster.json holds (schema in the module doc)."""
        plan = self.plan
        procs: dict[str, dict[str, Any]] = {}
        for name, proc in self.processes():
            role = _role_of(name, proc, self)
            running = proc.running
            proxy = self.proxies.get(name)
            rpc_log = None
            if plan.rpc_error_logs and role in ("scheduler", "nodesim", "workload"):
                if self.features.rpc_error_log(role):
                    rpc_log = str(plan.rpc_error_log_path(name))
            procs[name] = {
                "role": role,
                "pid": proc.pid if running else None,
                "running": running,
                "paused": bool(proc.paused and running),
                "identity": (proc.identity or None) if isinstance(proc, SchedulerProcess) else None,
                "proxy": proxy.address if proxy is not None else None,
                "rpc_error_log": rpc_log,
                "log": str(proc.log_path),
            }
        api = self.apiserver
        return {
            "version": CLUSTER_FILE_VERSION,
            "owner_pid": os.getpid(),
            "updated_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "data_dir": str(plan.data_dir),
            "pki_dir": str(plan.pki_dir),
            "run_dir": str(plan.run_dir),
            "logs_dir": str(plan.logs_dir),
            "connection_file": str(plan.connection_file),
            "connections_dir": str(plan.connections_dir),
            "audit_log": str(plan.audit_log) if self.features.audit_log else None,
            "apiserver": api.ready_info.get("address") if api is not None and api.ready_info else None,
            "etcd_endpoints": list(self.etcd.endpoints) if self.etcd is not None else [],
            "etcd_tls": plan.etcd_tls,
            "cert_ttl_s": plan.cert_ttl,
            "lease": {
                "namespace": plan.election.lease_namespace,
                "name": plan.election.lease_name,
                "duration_s": plan.election.lease_duration,
            },
            "processes": procs,
        }

    def _process_signature(self) -> object:
        return tuple(
            (name, p.pid, p.running, p.paused, getattr(p, "identity", ""), p.ready_info is not None)
            for name, p in self.processes()
        )

    def _write_cluster_file(self) -> None:
        """Rewrite D/run/cluster.json atomically (temp file + rename: readers see old or new)."""
        if self._lock_file is None or self._stopped:
            return  # only the run that owns the data dir writes it
        self._run_file_seen = self._process_signature()
        path = self.plan.cluster_file
        try:
            write_atomic(path, json.dumps(self.cluster_info(), indent=1) + "\n")
        except OSError as e:
            log.warning("cannot write %s: %s", path, e)

    def _write_run_files(self) -> None:
        self._write_pid_table()
        self._write_cluster_file()

    @contextlib.asynccontextmanager
    async def _run_file_watcher(self) -> AsyncIterator[None]:
        """Rewrite cluster.json on any start or exit nobody reported (a handle restarted directly,
        an etcd member killed by chaos, the workload finishing): polls the process table."""

        async def watch() -> None:
            while True:
                await asyncio.sleep(_RUN_FILE_POLL)
                if self._process_signature() != self._run_file_seen:
                    self._note_pids()
                    self._write_run_files()

        task = asyncio.create_task(watch(), name="cluster-file-watcher")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ------------------------------------------------------------------ lifetime

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start everything in dependency order; on any failure stop what started and raise UpError."""
        if self.started_at is not None:
            if not self._stopped:
                raise RuntimeError("this Cluster is running already")
            self._reset()
        self.started_at = time.time()
        t0 = time.monotonic()
        try:
            await self._start(t0)
        except BaseException as e:
            await self.stop()
            if isinstance(e, LaunchError | OSError | ValueError) and not isinstance(e, UpError):
                raise UpError(str(e)) from e
            raise
        self.ready_at = time.time()

    async def _start(self, t0: float) -> None:
        plan = self.plan
        say = self.progress

        def mark(name: str) -> float:
            self.ready_timings[name] = round(time.monotonic() - t0, 3)
            return self.ready_timings[name]

        plan.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        self._reap_previous_run()
        if plan.fresh:
            self._wipe()
        for d in (plan.logs_dir, plan.run_dir, plan.connections_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._check_etcd_layout()

        probe = asyncio.create_task(probe_features(clients=plan.rpc_error_logs), name="probe-features")
        try:
            pki, done = await asyncio.to_thread(ensure_pki, plan, max(3, plan.replicas))
            self.pki = pki
            say("; ".join(done))
            await self._start_renewers(pki)

            # etcd
            say(f"starting etcd ({plan.etcd_members} member{'s' if plan.etcd_members > 1 else ''})")
            tls = EtcdServerTLS.from_pki_dir(pki.dir) if plan.etcd_tls else None
            try:
                self.etcd = await start_cluster(
                    plan.etcd_members,
                    plan.etcd_dir,
                    tls=tls,
                    fast=plan.etcd_fast,
                    progress_notify_interval=5.0,
                    deadline=plan.ready_timeout,
                )
            except EtcdLaunchError as e:
                raise UpError(f"etcd did not come up: {e}") from e
            for m in self.etcd.members:
                _link_log(m.log_path, plan.log_path(m.name))
            self._write_run_files()
            await self._enter("runfile", self._run_file_watcher())
            say(f"etcd ready at {', '.join(self.etcd.endpoints)} ({mark('etcd'):.1f}s)")

            self.features = await probe
        finally:
            if not probe.done():
                probe.cancel()
                with contextlib.suppress(BaseException):
                    await probe
        if not self.features.leader_election:
            msg = (
                "TEMPORARY FALLBACK: `kse scheduler` does not offer leader election yet; running ONE "
                "replica with --leader-elect=false"
            )
            self.notes.append(msg)
            say(msg)
        if plan.workload and not self.features.audit_log:
            log.debug("the API server has no --audit-log flag yet; no audit log")

        # API server
        api = ApiServerProcess(
            etcd_endpoints=self.etcd.endpoints,
            prefix=plan.prefix,
            pki_dir=pki.dir,
            data_dir=plan.data_dir,
            extra_args=plan.apiserver_extra_args(self.features),
            ready_timeout=plan.ready_timeout,
            grace=plan.grace,
        )
        self.apiserver = api
        if self.features.audit_log:
            plan.audit_log.parent.mkdir(parents=True, exist_ok=True)
        say("starting the API server")
        api.start()
        self._write_run_files()
        await self._wait_ready(api)
        say(
            f"API server ready at {api.address} ({mark('apiserver'):.1f}s); "
            f"connection file {plan.connection_file}"
        )
        self._check_etcd_running()
        replicas = plan.replicas if self.features.leader_election else 1
        if plan.partition_proxies:
            for name in plan.scheduler_names(replicas):
                self.proxies[name] = proxy = PartitionProxy(api.address)
                await self._enter("proxies", proxy)
            say(
                "partition proxies: "
                + ", ".join(f"{name} via {p.address}" for name, p in self.proxies.items())
            )
        self._write_connections(api.address, pki)
        # A reloading source: kse up's own informers outlive leaf renewals and CA rotations too.
        self._channel = channel_source_from_connection(plan.connection_path("admin"))
        self.clientset = Clientset(self._channel, qps=0, burst=1000, user_agent="kse-up")
        if plan.track_status:
            self.status = StatusTracker(
                self.clientset,
                lease_namespace=plan.election.lease_namespace,
                lease_name=plan.election.lease_name,
                run_id=self.run_id,
            )

        # Schedulers and nodesim, started together.
        if self.restart_policy_enabled:
            self.supervisor = Supervisor(
                plan.restart_policy, on_restart=self._restarted, on_exit=self._exited
            )
        ports = free_ports(replicas)
        for name, port in zip(plan.scheduler_names(replicas), ports, strict=True):
            proc = SchedulerProcess(
                name,
                self._scheduler_argv_for(name, port),
                unique_identity=plan.unique_identities,
                data_dir=plan.data_dir,
                ready_file=plan.ready_path(name),
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
                metrics_port=port,
            )
            self.replicas.append(Replica(proc, self.supervisor))
        say(
            f"starting {replicas} scheduler replica{'s' if replicas > 1 else ''} "
            f"and nodesim ({plan.nodes} nodes)"
        )
        for r in self.replicas:
            r.process.start()
        if plan.nodes > 0:
            self.nodesim = ManagedProcess(
                "nodesim",
                plan.nodesim_argv(self.features),
                data_dir=plan.data_dir,
                ready_file=plan.ready_path("nodesim"),
                ready_check=ready_file_json,
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
            )
            self.nodesim.start()
        self._write_run_files()
        for r in self.replicas:
            await self._wait_ready(r.process)
            say(f"{r.name} ready (pid {r.pid}, identity {r.identity}, metrics {r.metrics_address}) "
                f"({mark(r.name):.1f}s)")  # fmt: skip
            self._write_cluster_file()
            if self.supervisor is not None:
                self.supervisor.add(r.process)
        if self.supervisor is not None:
            await self._enter("supervisor", self.supervisor.running())
        if self.status is not None:
            await self._enter("status", self.status.running())
        if self.nodesim is not None:
            await self._wait_ready(self.nodesim)
            say(f"nodesim ready: {plan.nodes} nodes registered ({mark('nodesim'):.1f}s)")

        # Workload last.
        if plan.workload:
            self.workload = ManagedProcess(
                "workload",
                plan.workload_argv(self.run_id, self.features),
                data_dir=plan.data_dir,
                ready_file=plan.ready_path("workload"),
                ready_check=ready_file_json,
                ready_timeout=plan.ready_timeout,
                grace=plan.grace,
            )
            self.workload.start()
            self._write_run_files()
            await self._wait_ready(self.workload)
            total = f", {plan.workload_total} in all" if plan.workload_total else ""
            say(f"workload ready: {plan.rate:g} pods/s{total}, run {self.run_id} ({mark('workload'):.1f}s)")
        mark("ready")

    @property
    def restart_policy_enabled(self) -> bool:
        return self.plan.restart_policy is not None

    def _scheduler_argv_for(self, name: str, port: int) -> Callable[[str], list[str]]:
        def argv_for(identity: str) -> list[str]:
            return self.plan.scheduler_argv(
                name, identity, port, self.features, leader_elect=self.features.leader_election
            )

        return argv_for

    def _restarted(self, record: RestartRecord) -> None:
        self.progress(
            f"{record.name} exited (code {record.exit_code}) after {record.uptime_s:.1f}s; "
            f"restarted after {record.delay_s:g}s backoff (pid {record.pid})"
        )
        self._note_pids()
        self._write_run_files()

    def _exited(self, record: RestartRecord) -> None:
        self._write_cluster_file()

    async def _enter(self, key: str, cm: contextlib.AbstractAsyncContextManager[Any]) -> None:
        stack = self._stacks.setdefault(key, contextlib.AsyncExitStack())
        await stack.enter_async_context(cm)

    async def _wait_ready(self, proc: ManagedProcess) -> None:
        try:
            await proc.wait_ready(self.plan.ready_timeout)
        except LaunchError as e:
            raise UpError(f"{proc.name} did not come up: {e}") from e

    def _write_connections(self, address: str, pki: PKI) -> None:
        """A connection file per client identity; a replica behind a partition proxy gets the
        proxy's address (TLS passes through it: the replica still verifies the API server's cert)."""
        stems = ["admin", "nodesim", "workload", *self.plan.scheduler_names(max(3, self.plan.replicas))]
        for stem in stems:
            p = pki[stem]
            proxy = self.proxies.get(stem)
            server = proxy.address if proxy is not None else address
            ConnectionFile.for_identity(server, p.cert, p.key, p.ca_bundle).save(
                self.plan.connection_path(stem)
            )

    # ------------------------------------------------------------------ data dir housekeeping

    def _take_lock(self) -> None:
        path = self.plan.run_dir / "up.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        f = path.open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise UpError(f"another `kse up` (pid {holder}) is using {self.plan.data_dir}") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._lock_file = f

    def _release_lock(self) -> None:
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    @property
    def _pid_table(self) -> Path:
        return self.plan.run_dir / "pids.json"

    def _write_pid_table(self) -> None:
        """Record what runs (pid and argv per process), so a later run can clean up after a `kse up`
        that was itself SIGKILLed and could not stop its children."""
        entries = []
        for name, proc in self.processes():
            if proc.pid is not None and proc.running:
                entries.append({"name": name, "pid": proc.pid, "start": _start_time(proc.pid)})
        with contextlib.suppress(OSError):
            table = {"owner": os.getpid(), "processes": entries}
            write_atomic(self._pid_table, json.dumps(table, indent=1) + "\n")

    def _reap_previous_run(self) -> None:
        """Kill the process groups a previous, SIGKILLed `kse up` on this data dir left running.
        Only the very process recorded is touched: same pid *and* start time (pids are reused),
        with this data dir on its command line."""
        try:
            table = json.loads(self._pid_table.read_text())
        except (OSError, ValueError):
            return
        for entry in table.get("processes", []):
            pid, start = entry.get("pid"), entry.get("start")
            if not isinstance(pid, int) or start is None or not pid_alive(pid):
                continue
            if _start_time(pid) != start or str(self.plan.data_dir) not in " ".join(_cmdline(pid) or []):
                continue
            self.progress(f"killing {entry.get('name')} (pid {pid}), left running by an earlier kse up")
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
        self._pid_table.unlink(missing_ok=True)

    def _wipe(self) -> None:
        plan = self.plan
        for path in (plan.pki_dir, plan.etcd_dir, plan.logs_dir, plan.connections_dir, plan.audit_log.parent):
            shutil.rmtree(path, ignore_errors=True)
        plan.connection_file.unlink(missing_ok=True)
        for ready in plan.run_dir.glob("*.ready.json"):
            ready.unlink(missing_ok=True)
        self.progress(f"--fresh: removed the PKI, etcd data and logs under {plan.data_dir}")

    def _check_etcd_running(self) -> None:
        # A member that could not bind its port may still have looked healthy for a moment: the
        # health check reached whatever else listens there (a stray etcd on the recorded port).
        for m in self.etcd_members:
            if not m.running:
                tail = "\n".join(f"  | {line}" for line in m.log_tail(15).splitlines())
                raise UpError(f"etcd {m.name} exited with code {m.returncode}; {m.log_path}:\n{tail}")

    def _check_etcd_layout(self) -> None:
        try:
            layout = json.loads((self.plan.etcd_dir / CLUSTER_FILE).read_text())
        except (OSError, ValueError):
            return
        members = layout.get("members") if isinstance(layout, dict) else None
        if isinstance(members, list) and len(members) != self.plan.etcd_members:
            raise UpError(
                f"{self.plan.etcd_dir} holds a {len(members)}-member etcd cluster, not "
                f"{self.plan.etcd_members}; use --etcd-members {len(members)} or --fresh"
            )

    # ------------------------------------------------------------------ shutdown

    async def stop(self) -> None:
        """Ordered shutdown: workload, schedulers, nodesim, API server, etcd; then make sure no
        process of any start is left (SIGKILL to any group found, noted in `leftovers`). Idempotent."""
        if self._stopped or self._stopping:
            return
        self._stopping = True
        grace = self.plan.grace
        try:
            self._note_pids()
            if self.supervisor is not None:
                for s in self.supervisor.items():
                    self.supervisor.hold(s.name)  # nothing is restarted from here on
            if self.workload is not None:
                await self.workload.terminate(grace)
            await self._close("supervisor")
            await asyncio.gather(*(r.process.terminate(grace) for r in self.replicas))
            if self.nodesim is not None:
                await self.nodesim.terminate(grace)
            await self._close("proxies")  # after the replicas: none of them outlives its link
            if self.status is not None and self.apiserver is not None and self.apiserver.running:
                await self._settle_status()
                self.final_snapshot = self.snapshot()
            await self._close("status")
            if self._channel is not None:
                with contextlib.suppress(Exception):
                    await self._channel.close(grace=None)
                self._channel = None
            if self.apiserver is not None:
                await self.apiserver.terminate(grace)
            if self.etcd is not None:
                await self.etcd.stop(grace=grace)
        except BaseException:
            self.kill_all()
            raise
        finally:
            await self._close("runfile")
            await self._close("proxies")
            await self._close("renewers")  # last: every certificate stayed valid while anything ran
            self._final_check()
            if self._lock_file is not None:  # only the run that owns the data dir tidies it
                self._pid_table.unlink(missing_ok=True)
                self.plan.cluster_file.unlink(missing_ok=True)
                for ready in self.plan.run_dir.glob("*.ready.json"):
                    ready.unlink(missing_ok=True)
            self._release_lock()
            self._stopped = True

    async def _close(self, key: str) -> None:
        stack = self._stacks.pop(key, None)
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def _settle_status(self, within: float = 2.0) -> None:
        """Let the informers catch up with the last writes (pods created just before the workload
        stopped) so the final snapshot counts them."""
        assert self.clientset is not None and self.status is not None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(within):
                pods = await self.clientset.pods.list("", limit=1)
                await self.status.pods.wait_for_revision(pods.resource_version)

    def _final_check(self) -> None:
        self._note_pids()
        for _, proc in self.processes():
            if proc.running:
                with contextlib.suppress(Exception):
                    proc.kill()
        for pid, name in sorted(self._pids.items()):
            if pid_alive(pid):
                self.leftovers.append(f"{name} (pid {pid})")
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if self.leftovers:
            log.error("processes left after shutdown, killed: %s", ", ".join(self.leftovers))


def _role_of(name: str, proc: ManagedProcess, cluster: Cluster) -> str:
    if isinstance(proc, SchedulerProcess):
        return "scheduler"
    if proc is cluster.apiserver:
        return "apiserver"
    if any(proc is m.managed for m in cluster.etcd_members):
        return "etcd"
    return name  # nodesim, workload


def _link_log(target: Path, link: Path) -> None:
    """Make D/logs/<name>.log point at a log that lives elsewhere (etcd's, beside its data)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if link.is_symlink() or link.exists():
            if link.is_symlink() and Path(os.readlink(link)) == Path(os.path.relpath(target, link.parent)):
                return
            link.unlink()
        link.symlink_to(os.path.relpath(target, link.parent))


__all__ = [
    "DEFAULT_DATA_DIR",
    "MIN_CERT_TTL",
    "Cluster",
    "ClusterPlan",
    "ElectionPlan",
    "Features",
    "Replica",
    "SchedulerProcess",
    "UpError",
    "ensure_pki",
    "leaf_stems",
    "pid_alive",
    "probe_features",
]
