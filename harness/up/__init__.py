"""`kse up`: the whole topology as local processes (etcd, API server, scheduler replicas, nodesim,
workload), reusable by chaos and the failover benchmark through `Cluster`.

* `topology`: `ClusterPlan` (what to start, with which flags and identities) and `Cluster`, the
  async context manager that starts it in order, hands out process handles and fault hooks
  (partition proxies, replica restarts), renews short-lived certificates, keeps D/run/cluster.json
  current, and stops everything in order.
* `supervisor`: kubelet-like restarts of replicas that exit (exponential backoff, 1 s to 5 min).
* `status`: the live status, from informers on pods, Leases and nodes plus the process table.
"""

from harness.up.status import Failover, LeaseHistory, StatusSnapshot, StatusTracker
from harness.up.supervisor import BackoffPolicy, CrashLoopBackoff, RestartRecord, Supervisor
from harness.up.topology import (
    DEFAULT_DATA_DIR,
    MIN_CERT_TTL,
    Cluster,
    ClusterPlan,
    ElectionPlan,
    Features,
    Replica,
    UpError,
)

__all__ = [
    "DEFAULT_DATA_DIR",
    "MIN_CERT_TTL",
    "BackoffPolicy",
    "Cluster",
    "ClusterPlan",
    "CrashLoopBackoff",
    "ElectionPlan",
    "Failover",
    "Features",
    "LeaseHistory",
    "Replica",
    "RestartRecord",
    "StatusSnapshot",
    "StatusTracker",
    "Supervisor",
    "UpError",
]
