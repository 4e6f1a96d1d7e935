"""The command line of every process `kse up` starts, from the plan.

Every flag named here exists in the component it is passed to (`kse scheduler|apiserver|nodesim|
workload --help`); nothing is probed at start. The scheduler's leader election flags are
kube-scheduler's (`--leader-elect-*`) plus kse's `--leader-elect-strategy` and `--on-lost-lease`.
Durations are passed Go-style (`15s`), as kube-scheduler takes them.
"""

from __future__ import annotations

import sys

from certs.layout import CertPaths
from harness.up.plan import CONTROLLER_MANAGER_LEASE, ClusterPlan

__all__ = [
    "RPC_ERROR_LOG_FLAG",
    "apiserver_extra_args",
    "controller_manager_argv",
    "http_listen",
    "kse_command",
    "nodesim_argv",
    "scheduler_argv",
    "workload_argv",
]

RPC_ERROR_LOG_FLAG = "--rpc-error-log"


def kse_command() -> list[str]:
    """`kse` as this interpreter runs it (the venv's, whatever PATH says)."""
    return [sys.executable, "-m", "kse"]


def seconds(value: float) -> str:
    """A duration flag's value: `15s`, `0.5s`."""
    return f"{value:g}s"


def _rpc_error_log_args(plan: ClusterPlan, name: str) -> list[str]:
    return [RPC_ERROR_LOG_FLAG, str(plan.rpc_error_log_path(name))] if plan.rpc_error_logs else []


def http_listen(port: int) -> str:
    """The API server's `--http-listen` for `port`. Loopback only, as the gRPC port."""
    if not 0 <= port <= 65535:
        raise ValueError(f"an HTTP port is 0-65535, got {port}")
    return f"127.0.0.1:{port}"


# The elected components' users (certs.layout's identities): their writes need a fence token.
FENCED_USERS = ("system:kube-scheduler", "system:kube-controller-manager")


AUDIT_LOG_MAX_MB = 100
AUDIT_LOG_MAX_BACKUPS = 3


def apiserver_extra_args(plan: ClusterPlan, http_port: int | None = None) -> list[str]:
    """What `kse up` adds to `harness.procs.apiserver.ApiServerProcess`'s own flags (it sets the
    listen address, etcd endpoints, prefix, PKI dir and ready file).

    With `plan.http`, the Kubernetes HTTP API on the plan's `http_port`, else on `http_port` (the
    free port `Cluster` picked for the plan's 0): a fixed port rather than 0, so a restarted API
    server serves the address D/kubeconfig names again. With neither, port 0 (the OS picks)."""
    args = [
        "--connection-file", str(plan.connection_file),
        "--log-level", plan.log_level,
        "--audit-log", str(plan.audit_log),
        # Capped: at most 100 MB live + 3 rotated files (about 5 h of `make up`'s traffic).
        "--audit-log-maxsize", str(AUDIT_LOG_MAX_MB),
        "--audit-log-maxbackup", str(AUDIT_LOG_MAX_BACKUPS),
    ]  # fmt: skip
    if plan.http:
        args += ["--http-listen", http_listen(plan.http_port or http_port or 0)]
    if plan.etcd_tls:
        # Named explicitly (the API server would derive them from --pki-dir too): these are the
        # files it reloads when `kse certs rotate --identity apiserver-etcd-client` or the
        # renewer rewrites them.
        etcd_client = CertPaths.in_dir(plan.pki_dir, "apiserver-etcd-client")
        args += [
            "--etcd-ca", str(etcd_client.ca_bundle),
            "--etcd-cert", str(etcd_client.cert),
            "--etcd-key", str(etcd_client.key),
        ]  # fmt: skip
    # Safe by default: every replica of an elected component must prove its term on every write
    # (a standby's or a deposed leader's unfenced write is refused, not just a stale one).
    for user in FENCED_USERS:
        args += ["--require-fence-for", user]
    return args + list(plan.apiserver_args)


def scheduler_argv(plan: ClusterPlan, name: str, identity: str, metrics_port: int) -> list[str]:
    """Replica `name` under election identity `identity`; `plan.scheduler_args`, then the replica's
    own `replica_args`, come last so they win."""
    e = plan.election
    argv = [
        *kse_command(),
        "scheduler",
        "--connection-file", str(plan.connection_path(name)),
        "--identity", identity,
        "--metrics-bind-address", f"127.0.0.1:{metrics_port}",
        "--ready-file", str(plan.ready_path(name)),
        "--log-level", plan.log_level,
    ]  # fmt: skip
    if plan.kube_api_qps is not None:
        argv += ["--kube-api-qps", f"{plan.kube_api_qps:g}"]
    if plan.kube_api_burst is not None:
        argv += ["--kube-api-burst", str(plan.kube_api_burst)]
    argv += [
        "--leader-elect=true",
        "--leader-elect-lease-duration", seconds(e.lease_duration),
        "--leader-elect-renew-deadline", seconds(e.renew_deadline),
        "--leader-elect-retry-period", seconds(e.retry_period),
        "--leader-elect-resource-name", e.lease_name,
        "--leader-elect-resource-namespace", e.lease_namespace,
        "--leader-elect-strategy", e.strategy,
        "--on-lost-lease", e.on_lost_lease,
    ]  # fmt: skip
    argv += _rpc_error_log_args(plan, name)
    return argv + list(plan.scheduler_args) + list(plan.replica_args.get(name, ()))


def controller_manager_argv(plan: ClusterPlan, name: str, identity: str, metrics_port: int) -> list[str]:
    """Controller-manager replica `name` under election identity `identity`: the plan's election
    timings on the controller-manager's own Lease; `plan.controller_manager_args` last."""
    e = plan.election
    lease_ns, lease_name = CONTROLLER_MANAGER_LEASE
    argv = [
        *kse_command(),
        "controller-manager",
        "--connection-file", str(plan.connection_path(name)),
        "--identity", identity,
        "--metrics-bind-address", f"127.0.0.1:{metrics_port}",
        "--ready-file", str(plan.ready_path(name)),
        "--log-level", plan.log_level,
        "--leader-elect=true",
        "--leader-elect-lease-duration", seconds(e.lease_duration),
        "--leader-elect-renew-deadline", seconds(e.renew_deadline),
        "--leader-elect-retry-period", seconds(e.retry_period),
        "--leader-elect-resource-name", lease_name,
        "--leader-elect-resource-namespace", lease_ns,
        "--leader-elect-strategy", e.strategy,
        "--on-lost-lease", e.on_lost_lease,
    ]  # fmt: skip
    if plan.kube_api_qps is not None:
        argv += ["--kube-api-qps", f"{plan.kube_api_qps:g}"]
    if plan.kube_api_burst is not None:
        argv += ["--kube-api-burst", str(plan.kube_api_burst)]
    argv += _rpc_error_log_args(plan, name)
    return argv + list(plan.controller_manager_args)


def nodesim_argv(plan: ClusterPlan) -> list[str]:
    return [
        *kse_command(),
        "nodesim",
        "--nodes", str(plan.nodes),
        "--connection-file", str(plan.connection_path("nodesim")),
        "--ready-file", str(plan.ready_path("nodesim")),
        "--log-level", plan.log_level,
        *_rpc_error_log_args(plan, "nodesim"),
        *plan.nodesim_args,
    ]  # fmt: skip


def workload_argv(plan: ClusterPlan, run_id: str) -> list[str]:
    argv = [
        *kse_command(),
        "workload",
        "--connection-file", str(plan.connection_path("workload")),
        "--rate", f"{plan.rate:g}",
        "--run-id", run_id,
        "--ready-file", str(plan.ready_path("workload")),
        "--stop-grace", "5s",
        "--log-level", plan.log_level,
    ]  # fmt: skip
    if plan.workload_total is not None:
        argv += ["--total", str(plan.workload_total)]
    if plan.pod_lifetime is not None:
        argv += ["--delete-after", seconds(plan.pod_lifetime)]
    argv += _rpc_error_log_args(plan, "workload")
    return argv + list(plan.workload_args)
