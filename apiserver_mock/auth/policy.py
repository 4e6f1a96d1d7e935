"""The authorization policy: who may do what, as one table.

It mirrors what a kube-apiserver with RBAC and the Node authorizer grants the same identities:
`system:masters` everything; `system:kube-scheduler` the `system:kube-scheduler` ClusterRole (read
the objects it schedules, create pods/binding, update pods/status, delete pods for preemption,
write events, write its Lease in kube-system); `system:kube-controller-manager` its controllers'
roles (pods, workloads and their status, PDB status, node taints and status, evictions, events,
its Lease); nodes what the Node authorizer and NodeRestriction
admission allow (their own Node and Lease, status of pods bound to them); and the kse tools.

A rule can be scoped: `OWN_NODE` matches only an object named after the caller's node (its Node,
its Lease), `POD_ON_NODE` only a pod whose stored `spec.nodeName` is the caller's node. A node
identity's node is the `<name>` of `system:node:<name>`; `kse:nodesim` simulates every node, so
for it `OWN_NODE` is any name and `POD_ON_NODE` any bound pod.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from certs.identity import Identity

ANY = "*"
READ = ("get", "list", "watch")
ALL_VERBS = ("get", "list", "watch", "create", "update", "delete")
NODE_USER_PREFIX = "system:node:"
ANY_NODE = "\x00any-node"  # the node of an identity that may act for every node


class Scope(enum.Enum):
    ANY = "any"
    OWN_NODE = "own-node"  # the object's name is the caller's node name
    POD_ON_NODE = "pod-on-node"  # the stored pod is bound to the caller's node


@dataclass(frozen=True)
class Rule:
    verbs: tuple[str, ...]
    resources: tuple[str, ...]  # "pods", "pods/status"; "*" = every resource and subresource
    namespaces: tuple[str, ...] | None = None  # None = every namespace (and cluster scope)
    scope: Scope = Scope.ANY

    def matches(self, verb: str, resource: str, namespace: str) -> bool:
        return (
            (verb in self.verbs or ANY in self.verbs)
            and (resource in self.resources or ANY in self.resources)
            and (self.namespaces is None or namespace in self.namespaces)
        )


@dataclass(frozen=True)
class Grant:
    """Rules granted to one subject: a user name or a group."""

    user: str | None = None
    group: str | None = None
    rules: tuple[Rule, ...] = ()
    # For node-scoped rules: which node the identity acts for (None: no node, scoped rules never match).
    node_of: Callable[[Identity], str | None] = lambda ident: None

    def applies_to(self, ident: Identity) -> bool:
        if self.user is not None and ident.user == self.user:
            return True
        return self.group is not None and self.group in ident.groups


def node_from_user(ident: Identity) -> str | None:
    return ident.user[len(NODE_USER_PREFIX) :] if ident.user.startswith(NODE_USER_PREFIX) else None


def any_node(ident: Identity) -> str | None:
    return ANY_NODE


NODE_RULES: tuple[Rule, ...] = (
    Rule(READ, ("nodes", "pods")),
    Rule(("create", "update"), ("nodes", "nodes/status"), scope=Scope.OWN_NODE),
    # A kubelet may deregister its own Node (NodeRestriction limits it to itself).
    Rule(("delete",), ("nodes",), scope=Scope.OWN_NODE),
    Rule(("update",), ("pods/status",), scope=Scope.POD_ON_NODE),
    Rule(("delete",), ("pods",), scope=Scope.POD_ON_NODE),
    Rule(
        ("get", "create", "update", "delete"),
        ("leases",),
        namespaces=("kube-node-lease",),
        scope=Scope.OWN_NODE,
    ),
    Rule(("create",), ("events",)),
)

POLICY: tuple[Grant, ...] = (
    Grant(group="system:masters", rules=(Rule((ANY,), (ANY,)),)),
    Grant(
        user="system:kube-scheduler",
        rules=(
            Rule(READ, ("pods", "nodes", "priorityclasses", "leases", "events")),
            # What its plugins read: spreading's default selectors (services, replicasets),
            # namespaceSelector terms (namespaces), PDB-aware preemption (poddisruptionbudgets).
            Rule(READ, ("namespaces", "services", "replicasets", "poddisruptionbudgets")),
            Rule(("create",), ("pods/binding",)),
            Rule(("update",), ("pods/status",)),
            Rule(("delete",), ("pods",)),
            Rule(("create", "update"), ("events",)),
            Rule(("create", "update"), ("leases",), namespaces=("kube-system",)),
        ),
    ),
    # The system:kube-controller-manager ClusterRole plus the per-controller roles it runs with
    # (system:controller:replicaset-controller, deployment-controller, daemon-set-controller,
    # disruption-controller, node-controller, pod-garbage-collector: plugin/pkg/auth/authorizer/
    # rbac/bootstrappolicy/controller_policy.go), since kse's controllers share its identity.
    Grant(
        user="system:kube-controller-manager",
        rules=(
            Rule(READ, ("pods", "nodes", "replicasets", "deployments", "daemonsets", "poddisruptionbudgets")),
            Rule(READ, ("namespaces", "services", "priorityclasses", "leases", "events")),
            Rule(("create", "update", "delete"), ("pods",)),
            Rule(("update",), ("pods/status",)),
            Rule(("create",), ("pods/eviction",)),
            Rule(("create", "update", "delete"), ("replicasets", "deployments", "daemonsets")),
            Rule(("update",), ("replicasets/status", "deployments/status", "daemonsets/status")),
            Rule(("update",), ("poddisruptionbudgets/status",)),
            Rule(("update", "delete"), ("nodes",)),
            Rule(("update",), ("nodes/status",)),
            Rule(("create", "update"), ("events",)),
            Rule(("create", "update"), ("leases",), namespaces=("kube-system",)),
        ),
    ),
    Grant(group="system:nodes", rules=NODE_RULES, node_of=node_from_user),
    # kse:nodesim also reads Events: `--pre-pull-events` takes pull requests from them (kse.objects.prepull).
    Grant(group="kse:nodesims", rules=(*NODE_RULES, Rule(READ, ("events",))), node_of=any_node),
    Grant(
        group="kse:workloads",
        rules=(
            Rule(("create", "delete", *READ), ("pods",)),
            Rule(READ, ("nodes", "namespaces")),
            Rule(ALL_VERBS, ("deployments", "replicasets", "daemonsets", "services", "poddisruptionbudgets")),
        ),
    ),
    Grant(user="kse:chaos", rules=(Rule(READ, (ANY,)), Rule(("delete",), ("pods",)))),
)
