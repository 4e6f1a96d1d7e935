"""`kse up`: the whole topology as local processes (etcd, API server, scheduler replicas, nodesim,
workload), reusable by chaos and the failover benchmark through `Cluster`.

* `plan`: `ClusterPlan`, what to start (plain data: the shape, the options, the data dir layout);
  its shape is `harness.shape.ClusterShape` / `ElectionPlan`, validated once.
* `argv`: the command line of every process, from the plan.
* `pki`: the data dir's PKI, made or reused at start; short-lived leaves renewed while it runs.
* `replica`: a scheduler replica's process (a new election identity per start) and its handle.
* `cluster`: `Cluster`, the async context manager that starts a plan in order, hands out process
  handles and fault hooks (partition proxies, replica restarts), keeps D/run/cluster.json current
  (`harness.clusterfile`), and stops everything in order.
* `housekeeping`: the data dir lock and the pid table (cleaning up after a SIGKILLed `kse up`).
* `supervisor`: kubelet-like restarts of replicas that exit (exponential backoff, 1 s to 5 min).
* `status`: the live status, from informers on pods, Leases and nodes plus the process table.
"""

from harness.shape import ClusterShape, ElectionPlan, ShapeError
from harness.up.cluster import Cluster
from harness.up.plan import DEFAULT_DATA_DIR, MIN_CERT_TTL, ClusterPlan, UpError, steady_pod_lifetime
from harness.up.replica import Replica, SchedulerProcess
from harness.up.status import Failover, LeaseHistory, StatusSnapshot, StatusTracker
from harness.up.supervisor import BackoffPolicy, CrashLoopBackoff, RestartRecord, Supervisor

__all__ = [
    "DEFAULT_DATA_DIR",
    "MIN_CERT_TTL",
    "BackoffPolicy",
    "Cluster",
    "ClusterPlan",
    "ClusterShape",
    "CrashLoopBackoff",
    "ElectionPlan",
    "Failover",
    "LeaseHistory",
    "Replica",
    "RestartRecord",
    "SchedulerProcess",
    "ShapeError",
    "StatusSnapshot",
    "StatusTracker",
    "Supervisor",
    "UpError",
    "steady_pod_lifetime",
]
