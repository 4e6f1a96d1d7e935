"""What `kse up` runs, as plain data: `ClusterPlan` (the shape, the options, the data dir layout).

`Cluster` (harness.up.cluster) turns a plan into processes; the argv of each process is built from
the plan by harness.up.argv. The cluster's shape (replicas, nodes, rate, etcd members, election)
is judged by `harness.shape.ClusterShape`, the one validator every caller shares; `problems()`
adds what only `kse up` needs (certificate lifetimes, per-replica args).

The layout under the data dir D (default ~/.kse):

    D/pki/                 the PKI (`kse certs init` layout), reused unless `fresh`
    D/etcd/                etcd member data (etcd-0, ...) and their logs; ports in etcd-cluster.json
    D/logs/<name>.log      one log per process (etcd's are links into D/etcd)
    D/run/                 ready files, the lock, the pid table, cluster.json (harness.clusterfile)
    D/connections/<id>.json  a connection file per client identity (scheduler-1, nodesim, ...)
    D/config.json          the admin connection file the API server writes (`kse --config` it)
    D/kubeconfig           the admin kubeconfig for kubectl (with `http`), written once the API
                           server is ready; it names the cert files in D/pki by path
    D/audit/audit.jsonl    the API server's audit log

Options that change the topology (all off by default):

* `etcd_tls` (default on): etcd serves clients over mTLS with the `etcd-server` pair; the API server
  reaches it with the `apiserver-etcd-client` pair (`--etcd-ca/--etcd-cert/--etcd-key`, which it
  reloads when they change). etcd 3.5 reads its serving pair from disk at every handshake, so a
  renewed `etcd-server` pair is served without a restart (tests/integration/test_up_certs.py checks it).
* `cert_ttl`: short-lived certificates, renewed while the cluster runs (harness.up.pki).
* `partition_proxies`: each scheduler replica reaches the API server through its own
  `harness.proxy.PartitionProxy` (`Cluster.proxies`), started before the replicas and stopped after
  them; its connection file names the proxy. A partition is then `cluster.proxies[name].partition()`.
* `rpc_error_logs`: the schedulers, nodesim and the workload append their failed RPCs to
  D/run/rpc-errors-<name>.jsonl (`--rpc-error-log`).
* `replica_args`: extra `kse scheduler` flags for one replica (after `scheduler_args`).

`controller_managers` (default 2; 0: none) `kse controller-manager` replicas
`controller-manager-<i>` run beside the schedulers, electing a leader on their own Lease
(`kube-system/kube-controller-manager`) with the plan's election timings, supervised (restarted)
as the schedulers are, all with the `controller-manager` identity of the PKI.

On by default: `http`, the Kubernetes HTTP API (`kse apiserver --http-listen 127.0.0.1:PORT`) on
`http_port` (0: a free port picked at each start and kept across API server restarts within it),
and D/kubeconfig for it. `http=False` serves gRPC only and writes no kubeconfig.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.clusterfile import CLUSTER_FILE_NAME
from harness.shape import ClusterShape, ElectionPlan, ShapeError
from harness.up.supervisor import BackoffPolicy

__all__ = [
    "DEFAULT_DATA_DIR",
    "MIN_CERT_TTL",
    "PODS_PER_NODE",
    "ClusterPlan",
    "UpError",
    "steady_pod_lifetime",
]

DEFAULT_DATA_DIR = Path("~/.kse")
# The shortest `cert_ttl`: renewal comes at 70-90 % of the life (counted from the backdated
# not-before), which leaves at worst ~10 % of it for every holder to re-read its files (clients poll
# every second) and for a renewal that failed to be retried. Below 30 s that margin is ~3 s: too thin
# on a loaded 2-core machine.
MIN_CERT_TTL = 30.0
CONTROLLER_MANAGER_PREFIX = "controller-manager-"
CONTROLLER_MANAGER_STEM = "controller-manager"  # the PKI identity every replica presents
CONTROLLER_MANAGER_LEASE = ("kube-system", "kube-controller-manager")
PODS_PER_NODE = 40  # a default simulated node's capacity in default workload pods (4 CPU / 100m)


class UpError(RuntimeError):
    """The cluster could not be started (the message says which process and shows its log tail)."""


@dataclass
class ClusterPlan:
    """What `kse up` runs (plain data; `Cluster` turns it into processes).

    The shape fields (`replicas`, `nodes`, `rate`, `etcd_members`, `election`) are validated as a
    `ClusterShape` when the plan is made: a bad one raises `harness.shape.ShapeError`."""

    data_dir: Path = DEFAULT_DATA_DIR
    replicas: int = 3
    controller_managers: int = 2
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
    # The supervisor restarts etcd members and the API server too (`kse up`: a crashed member or API
    # server is brought back, as a kubelet would, instead of stopping the cluster). Off for chaos
    # and benchmark clusters: there the nemesis starts what it killed, when the fault says.
    supervise_control_plane: bool = False
    # Defragment etcd members (one at a time, those with much free space) this often; 0: never
    # (`harness.up.etcd_defrag`; `kse up` does, every 30 min).
    etcd_defrag_interval: float = 0.0
    log_level: str = "info"
    grace: float = 10.0  # SIGTERM -> SIGKILL
    ready_timeout: float = 60.0
    track_status: bool = True
    workload_run_id: str = ""  # default: random
    apiserver_args: tuple[str, ...] = ()
    scheduler_args: tuple[str, ...] = ()
    controller_manager_args: tuple[str, ...] = ()  # extra `kse controller-manager` flags, every replica
    nodesim_args: tuple[str, ...] = ()
    workload_args: tuple[str, ...] = ()
    # Each workload pod is deleted this long after it runs (`kse workload --delete-after`), so the
    # cluster reaches a steady state instead of filling up; None keeps every pod.
    pod_lifetime: float | None = None
    # Extra `kse scheduler` args for one replica by name ("scheduler-2": [...]), after scheduler_args.
    replica_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # Short-lived certificates: every leaf lives this many seconds and is renewed (harness.up.pki).
    cert_ttl: float | None = None
    min_cert_ttl: float = MIN_CERT_TTL  # the floor `problems()` holds cert_ttl to
    partition_proxies: bool = False  # each replica reaches the API server through its own proxy
    rpc_error_logs: bool = False  # clients log failed RPCs to D/run/rpc-errors-<name>.jsonl
    http: bool = True  # the API server also serves the Kubernetes HTTP API; D/kubeconfig for it
    http_port: int = 0  # its port on 127.0.0.1; 0: a free one, picked at start

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).expanduser().absolute()
        self.shape()

    def shape(self) -> ClusterShape:
        """The plan's cluster shape; raises ShapeError if it cannot run."""
        return ClusterShape(
            replicas=self.replicas,
            nodes=self.nodes,
            rate=self.rate,
            etcd_members=self.etcd_members,
            election=self.election,
        )

    def problems(self) -> list[str]:
        """Everything wrong with the plan (the shape too, should a field have changed since it was
        made), each naming its field; empty when it can run."""
        out: list[str] = []
        try:
            self.shape()
        except ShapeError as e:
            out += [str(p) for p in e.problems]
        if self.workload_total is not None and self.workload_total < 1:
            out.append(f"workload total must be >= 1, got {self.workload_total}")
        if not self.min_cert_ttl > 0:
            out.append(f"min_cert_ttl must be > 0, got {self.min_cert_ttl:g}")
        if self.cert_ttl is not None and not (self.min_cert_ttl <= self.cert_ttl < math.inf):
            out.append(
                f"cert TTL must be at least {self.min_cert_ttl:g}s (certificates are renewed at 70-90 % "
                f"of their life and every holder needs time to re-read them), got {self.cert_ttl:g}s"
            )
        if isinstance(self.controller_managers, bool) or not isinstance(self.controller_managers, int):
            out.append(f"controller_managers must be an integer, got {self.controller_managers!r}")
        elif self.controller_managers < 0:
            out.append(f"controller_managers must be >= 0, got {self.controller_managers}")
        if isinstance(self.http_port, bool) or not isinstance(self.http_port, int):
            out.append(f"http_port must be an integer, got {self.http_port!r}")
        elif not 0 <= self.http_port <= 65535:
            out.append(f"http_port must be 0 (a free port) or 1-65535, got {self.http_port}")
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
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (with `http`), for kubectl and the Kubernetes client libraries."""
        return self.data_dir / "kubeconfig"

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
        """D/run/cluster.json: the running cluster, for `kse chaos run --attach` (harness.clusterfile)."""
        return self.run_dir / CLUSTER_FILE_NAME

    def rpc_error_log_path(self, name: str) -> Path:
        """Where client component `name` appends its failed RPCs (the record's client is `name`)."""
        return self.run_dir / f"rpc-errors-{name}.jsonl"

    def scheduler_names(self, replicas: int | None = None) -> list[str]:
        return [f"scheduler-{i}" for i in range(1, (self.replicas if replicas is None else replicas) + 1)]

    def controller_manager_names(self) -> list[str]:
        return [f"{CONTROLLER_MANAGER_PREFIX}{i}" for i in range(1, self.controller_managers + 1)]

    @property
    def cli_hint(self) -> str:
        return f"kse --config {self.connection_file} get pods"

    @property
    def kubectl_hint(self) -> str:
        """What to type for kubectl ("" without the HTTP API)."""
        return f"export KUBECONFIG={self.kubeconfig}; kubectl get pods -o wide" if self.http else ""


def steady_pod_lifetime(nodes: int, rate: float) -> float:
    """How long each workload pod should live so that about half of the fleet's capacity is in use
    at the steady `rate` (clamped to 1-30 s): churn without filling the cluster."""
    if rate <= 0:
        return 30.0
    return max(1.0, min(30.0, 0.5 * PODS_PER_NODE * nodes / rate))
