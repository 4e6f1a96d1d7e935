"""The authorization table, decision by decision, without a server."""

from __future__ import annotations

import pytest

from apiserver_mock.auth.authz import Authorizer, ObjectCheck
from apiserver_mock.errors import Forbidden
from certs.identity import Identity
from kse.objects.kinds import BY_RESOURCE
from proto import kse_pb2 as pb

ADMIN = Identity("kse:admin", ("system:masters",))
SCHED = Identity("system:kube-scheduler")
NODE_A = Identity("system:node:node-a", ("system:nodes",))
NODESIM = Identity("kse:nodesim", ("kse:nodesims",))
WORKLOAD = Identity("kse:workload", ("kse:workloads",))
CHAOS = Identity("kse:chaos", ("kse:chaos",))
STRANGER = Identity("someone", ("somegroup",))

ALLOW, DENY, OBJECT = "allow", "deny", "object"


def decide(ident, verb, resource, ns="default", name="x"):
    res, _, sub = resource.partition("/")
    kind = BY_RESOURCE[res]
    try:
        out = Authorizer().authorize(ident, verb, kind, sub, ns if kind.namespaced else "", name)
    except Forbidden:
        return DENY
    return OBJECT if isinstance(out, ObjectCheck) else ALLOW


TABLE = [
    # identity, verb, resource, namespace, name, expected
    (ADMIN, "delete", "nodes", "", "n", ALLOW),
    (ADMIN, "create", "pods/binding", "default", "p", ALLOW),
    (SCHED, "get", "pods", "default", "p", ALLOW),
    (SCHED, "list", "nodes", "", "", ALLOW),
    (SCHED, "watch", "priorityclasses", "", "", ALLOW),
    (SCHED, "list", "leases", "", "", ALLOW),
    (SCHED, "watch", "events", "", "", ALLOW),
    (SCHED, "create", "pods/binding", "default", "p", ALLOW),
    (SCHED, "update", "pods/status", "default", "p", ALLOW),
    (SCHED, "delete", "pods", "default", "p", ALLOW),
    (SCHED, "create", "events", "default", "e", ALLOW),
    (SCHED, "update", "events", "default", "e", ALLOW),
    (SCHED, "create", "leases", "kube-system", "kube-scheduler", ALLOW),
    (SCHED, "update", "leases", "kube-system", "kube-scheduler", ALLOW),
    (SCHED, "update", "leases", "default", "kube-scheduler", DENY),
    (SCHED, "create", "pods", "default", "p", DENY),
    (SCHED, "update", "pods", "default", "p", DENY),
    (SCHED, "update", "nodes", "", "n", DENY),
    (SCHED, "create", "priorityclasses", "", "pc", DENY),
    (SCHED, "create", "pods/eviction", "default", "p", DENY),
    (NODE_A, "get", "nodes", "", "node-b", ALLOW),
    (NODE_A, "list", "pods", "", "", ALLOW),
    (NODE_A, "watch", "pods", "default", "", ALLOW),
    (NODE_A, "create", "nodes", "", "node-a", ALLOW),
    (NODE_A, "update", "nodes", "", "node-a", ALLOW),
    (NODE_A, "update", "nodes/status", "", "node-a", ALLOW),
    (NODE_A, "update", "nodes/status", "", "node-b", DENY),
    (NODE_A, "create", "nodes", "", "node-b", DENY),
    (NODE_A, "delete", "nodes", "", "node-a", ALLOW),
    (NODE_A, "delete", "nodes", "", "node-b", DENY),
    (NODE_A, "update", "pods/status", "default", "p", OBJECT),
    (NODE_A, "delete", "pods", "default", "p", OBJECT),
    (NODE_A, "update", "pods", "default", "p", DENY),
    (NODE_A, "create", "pods", "default", "p", DENY),
    (NODE_A, "create", "pods/binding", "default", "p", DENY),
    (NODE_A, "get", "leases", "kube-node-lease", "node-a", ALLOW),
    (NODE_A, "create", "leases", "kube-node-lease", "node-a", ALLOW),
    (NODE_A, "update", "leases", "kube-node-lease", "node-a", ALLOW),
    (NODE_A, "update", "leases", "kube-node-lease", "node-b", DENY),
    (NODE_A, "delete", "leases", "kube-node-lease", "node-a", ALLOW),
    (NODE_A, "delete", "leases", "kube-node-lease", "node-b", DENY),
    (NODE_A, "update", "leases", "kube-system", "node-a", DENY),
    (NODE_A, "create", "events", "default", "e", ALLOW),
    (NODE_A, "update", "events", "default", "e", DENY),
    (NODE_A, "list", "priorityclasses", "", "", DENY),
    (NODESIM, "create", "nodes", "", "any-node", ALLOW),
    (NODESIM, "update", "nodes/status", "", "other", ALLOW),
    (NODESIM, "update", "leases", "kube-node-lease", "n7", ALLOW),
    (NODESIM, "update", "pods/status", "default", "p", OBJECT),
    (NODESIM, "delete", "pods", "default", "p", OBJECT),
    (NODESIM, "create", "pods", "default", "p", DENY),
    (NODESIM, "create", "pods/binding", "default", "p", DENY),
    (WORKLOAD, "create", "pods", "default", "p", ALLOW),
    (WORKLOAD, "delete", "pods", "default", "p", ALLOW),
    (WORKLOAD, "get", "pods", "default", "p", ALLOW),
    (WORKLOAD, "list", "pods", "", "", ALLOW),
    (WORKLOAD, "watch", "nodes", "", "", ALLOW),
    (WORKLOAD, "update", "pods", "default", "p", DENY),
    (WORKLOAD, "create", "nodes", "", "n", DENY),
    (WORKLOAD, "create", "pods/binding", "default", "p", DENY),
    (CHAOS, "list", "leases", "", "", ALLOW),
    (CHAOS, "watch", "events", "", "", ALLOW),
    (CHAOS, "get", "priorityclasses", "", "x", ALLOW),
    (CHAOS, "delete", "pods", "default", "p", ALLOW),
    (CHAOS, "delete", "nodes", "", "n", DENY),
    (CHAOS, "create", "pods", "default", "p", DENY),
    (CHAOS, "update", "leases", "kube-system", "kube-scheduler", DENY),
    (STRANGER, "get", "pods", "default", "p", DENY),
    (STRANGER, "list", "nodes", "", "", DENY),
]


@pytest.mark.parametrize(
    ("ident", "verb", "resource", "ns", "name", "expected"),
    TABLE,
    ids=[f"{t[0].user}-{t[1]}-{t[2]}-{t[3] or 'cluster'}-{t[4] or 'all'}" for t in TABLE],
)
def test_table(ident, verb, resource, ns, name, expected):
    assert decide(ident, verb, resource, ns, name) == expected


def pod_on(node: str) -> pb.Pod:
    return pb.Pod(spec=pb.PodSpec(node_name=node))


def test_object_checks():
    authz = Authorizer()
    pods = BY_RESOURCE["pods"]
    check = authz.authorize(NODE_A, "update", pods, "status", "default", "p")
    assert isinstance(check, ObjectCheck)
    check.check(pod_on("node-a"))
    with pytest.raises(Forbidden) as e:
        check.check(pod_on("node-b"))
    assert str(e.value) == (
        'pods "p" is forbidden: User "system:node:node-a" cannot update resource "pods/status" in API group "" '  # noqa: E501
        "in the namespace \"default\": no relationship found between node 'node-a' and this object"
    )
    with pytest.raises(Forbidden):
        check.check(pod_on(""))
    sim = authz.authorize(NODESIM, "delete", pods, "", "default", "p")
    assert isinstance(sim, ObjectCheck)
    sim.check(pod_on("whatever"))
    with pytest.raises(Forbidden):
        sim.check(pod_on(""))


def test_forbidden_message_shapes():
    authz = Authorizer()
    with pytest.raises(Forbidden) as e:
        authz.authorize(SCHED, "update", BY_RESOURCE["leases"], "", "default", "l")
    assert str(e.value) == (
        'leases.coordination.k8s.io "l" is forbidden: User "system:kube-scheduler" cannot update resource '
        '"leases" in API group "coordination.k8s.io" in the namespace "default"'
    )
    with pytest.raises(Forbidden) as e:
        authz.authorize(STRANGER, "list", BY_RESOURCE["nodes"], "", "", "")
    assert str(e.value) == (
        'nodes is forbidden: User "someone" cannot list resource "nodes" in API group "" at the cluster scope'
    )
    # A create is a POST to the collection: its URL names no object, so neither does the message...
    with pytest.raises(Forbidden) as e:
        authz.authorize(SCHED, "create", BY_RESOURCE["pods"], "", "default", "p")
    assert str(e.value) == (
        'pods is forbidden: User "system:kube-scheduler" cannot create resource "pods" in API group "" '
        'in the namespace "default"'
    )
    # ...while a subresource create (POST pods/p/binding) names the pod.
    with pytest.raises(Forbidden) as e:
        authz.authorize(WORKLOAD, "create", BY_RESOURCE["pods"], "binding", "default", "p")
    assert str(e.value).startswith(
        'pods "p" is forbidden: User "kse:workload" cannot create resource "pods/binding"'
    )


def test_decisions_are_cached_per_identity_verb_resource_namespace():
    authz = Authorizer()
    pods = BY_RESOURCE["pods"]
    for _ in range(3):
        authz.authorize(SCHED, "get", pods, "", "default", "a")
        authz.authorize(SCHED, "get", pods, "", "default", "b")
    assert len(authz._cache) == 1
