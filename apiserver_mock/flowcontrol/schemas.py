"""Priority levels and flow schemas: which requests share which seats, as kube-apiserver's defaults.

The tables mirror upstream's bootstrap configuration
(`staging/src/k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap/default.go`, v1.29+): the same
priority levels with the same nominal concurrency shares and queuing parameters, and the flow
schemas that matter for kse's identities, in the same matching precedence:

precedence, flow schema: who and what it matches -> priority level (flows distinguished by)

*    1 exempt: group `system:masters` -> exempt
*  100 system-leader-election: `system:kube-scheduler`, `system:kube-controller-manager`,
       leases get/create/update -> leader-election (user)
*  400 system-node-high: group `system:nodes` (and kse's `kse:nodesims`), nodes, nodes/status,
       leases -> node-high (user)
*  500 system-nodes: the same groups, everything else -> system (user)
*  800 kube-scheduler, kube-controller-manager: those users, everything else -> workload-high
       (namespace)
* 9900 global-default: every other authenticated user (kse's workloads, chaos, tools) ->
       global-default (user)

Upstream's `catch-all` level (unauthenticated requests) has no counterpart: kse refuses a request
without a client certificate before any of this runs. Service-account schemas have none either
(kse has no service accounts). Configuration objects (`FlowSchema`, `PriorityLevelConfiguration`)
are not served: this table is the configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from certs.identity import Identity

# The groups kse's node simulators carry: they act for every node (apiserver_mock.auth.policy).
NODE_GROUPS = ("system:nodes", "kse:nodesims")
EXEMPT_GROUP = "system:masters"
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


@dataclass(frozen=True)
class PriorityLevel:
    """A limited priority level: its share of the server's seats and how its requests queue."""

    name: str
    nominal_shares: int
    queues: int
    hand_size: int
    queue_length_limit: int


EXEMPT = "exempt"
LEADER_ELECTION = PriorityLevel("leader-election", 10, queues=16, hand_size=4, queue_length_limit=50)
NODE_HIGH = PriorityLevel("node-high", 40, queues=64, hand_size=6, queue_length_limit=50)
SYSTEM = PriorityLevel("system", 30, queues=64, hand_size=6, queue_length_limit=50)
WORKLOAD_HIGH = PriorityLevel("workload-high", 40, queues=128, hand_size=6, queue_length_limit=50)
WORKLOAD_LOW = PriorityLevel("workload-low", 100, queues=128, hand_size=6, queue_length_limit=50)
GLOBAL_DEFAULT = PriorityLevel("global-default", 20, queues=128, hand_size=6, queue_length_limit=50)
CATCH_ALL = PriorityLevel("catch-all", 5, queues=1, hand_size=1, queue_length_limit=0)  # Reject

# Every limited level of upstream's bootstrap set: the shares divide the server's seats among all
# of them (as upstream's do), whether or not a kse identity reaches the level.
LEVELS: tuple[PriorityLevel, ...] = (
    LEADER_ELECTION,
    NODE_HIGH,
    SYSTEM,
    WORKLOAD_HIGH,
    WORKLOAD_LOW,
    GLOBAL_DEFAULT,
    CATCH_ALL,
)


def nominal_limits(server_concurrency: int) -> dict[str, int]:
    """Each level's nominal concurrency limit: ceil(serverCL * shares / sum of shares), as upstream's
    `NominalCL`. Borrowing between levels (lendablePercent) is not modelled: a level never uses
    more than its nominal seats."""
    total = sum(level.nominal_shares for level in LEVELS)
    return {
        level.name: max(1, math.ceil(server_concurrency * level.nominal_shares / total)) for level in LEVELS
    }


@dataclass(frozen=True)
class Classification:
    """Which flow schema a request matched, its priority level (None: exempt) and its flow key."""

    flow_schema: str
    level: PriorityLevel | None
    flow: str


_LEASE_VERBS = frozenset(("get", "create", "update"))
_NODE_RESOURCES = frozenset(("nodes", "nodes/status", "leases"))


def classify(ident: Identity, verb: str, resource: str, namespace: str) -> Classification:
    """The flow schema, priority level and flow of one request (see the module table).

    `resource` includes the subresource ("pods/binding"); the flow key is the schema's name plus
    its distinguisher (the user, or the namespace for the by-namespace schemas), so that shuffle
    sharding keeps one noisy user, or one namespace's churn, to a few queues."""
    groups = ident.groups
    if EXEMPT_GROUP in groups:
        return Classification("exempt", None, "")
    user = ident.user
    if user in (SCHEDULER_USER, CONTROLLER_MANAGER_USER):
        if resource == "leases" and verb in _LEASE_VERBS:
            return Classification("system-leader-election", LEADER_ELECTION, f"system-leader-election/{user}")
        schema = "kube-scheduler" if user == SCHEDULER_USER else "kube-controller-manager"
        return Classification(schema, WORKLOAD_HIGH, f"{schema}/{namespace}")
    if any(g in groups for g in NODE_GROUPS):
        if resource in _NODE_RESOURCES:
            return Classification("system-node-high", NODE_HIGH, f"system-node-high/{user}")
        return Classification("system-nodes", SYSTEM, f"system-nodes/{user}")
    return Classification("global-default", GLOBAL_DEFAULT, f"global-default/{user}")
