"""Bad input: INVALID_ARGUMENT naming the field, and nothing reaches etcd."""

from __future__ import annotations

import grpc
import pytest

from apiserver_mock.validation import validate_object
from kse.objects.kinds import BY_FIELD
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, make_node, make_pod, rpc_error, stored_keys

pytestmark = pytest.mark.integration


def pod(mutate) -> pb.Object:
    obj = make_pod("web")
    mutate(obj.pod)
    return obj


BAD_PODS = [
    (
        lambda p: setattr(p.spec.containers[0], "image", ""),
        'Pod "web" is invalid: spec.containers[0].image: Required value',
    ),
    (
        lambda p: setattr(p.metadata, "name", "Web"),
        'Pod "Web" is invalid: metadata.name: Invalid value: "Web"',
    ),
    (lambda p: setattr(p.metadata, "namespace", "Bad_NS"), 'metadata.namespace: Invalid value: "Bad_NS"'),
    (lambda p: p.metadata.labels.__setitem__("k", "v v"), 'metadata.labels: Invalid value: "v v"'),
    (
        lambda p: p.spec.containers[0].resources.limits.__setitem__("memory", "1Zi"),
        'spec.containers[0].resources.limits[memory]: Invalid value: "1Zi"',
    ),
    (
        lambda p: p.spec.tolerations.add(key="k", operator="Exists", effect="Bad"),
        'spec.tolerations[0].effect: Unsupported value: "Bad": supported values: "NoSchedule", "PreferNoSchedule", '  # noqa: E501
        '"NoExecute"',
    ),
    (
        lambda p: p.spec.topology_spread_constraints.add(
            max_skew=0, topology_key="z", when_unsatisfiable="DoNotSchedule"
        ),
        "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
    ),
    (
        lambda p: p.spec.containers[0].ports.add(container_port=80, protocol="HTTP"),
        'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "TCP", "UDP", "SCTP"',  # noqa: E501
    ),
    (
        lambda p: p.metadata.annotations.__setitem__("a", "x" * 300_000),
        "metadata.annotations: Too long: may not be more than 262144 bytes",
    ),
    (lambda p: p.spec.containers[0].env.add(name="BIG", value="y" * 2_000_000), "spec.containers[0].env[0]"),
]


@pytest.mark.parametrize(("mutate", "needle"), BAD_PODS, ids=[str(i) for i in range(len(BAD_PODS))])
async def test_bad_pod_is_invalid_and_not_stored(apiserver: ApiServer, mutate, needle):
    stub = apiserver.stub("admin")
    e = await rpc_error(stub.Create(pb.WriteRequest(object=pod(mutate))))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in e.details()
    assert " is invalid: " in e.details()
    assert await stored_keys(apiserver, "pods") == []


async def test_bad_update_leaves_the_stored_object_alone(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    created = await stub.Create(pb.WriteRequest(object=make_node("n1")))
    etcd = await apiserver.etcd()
    try:
        before, _ = await etcd.get(apiserver.key("nodes", "", "n1"))
        bad = pb.Object()
        bad.CopyFrom(created)
        bad.node.spec.taints.add(key="k", effect="Sometimes")
        e = await rpc_error(stub.Update(pb.WriteRequest(object=bad)))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert 'spec.taints[0].effect: Unsupported value: "Sometimes"' in e.details()
        bad = pb.Object()
        bad.CopyFrom(created)
        bad.node.status.allocatable["cpu"] = "-1"
        e = await rpc_error(stub.UpdateStatus(pb.WriteRequest(object=bad)))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "status.allocatable[cpu]" in e.details()
        after, _ = await etcd.get(apiserver.key("nodes", "", "n1"))
        assert after == before
        p = await stub.Create(pb.WriteRequest(object=make_pod("p")))
        p.pod.status.phase = "Sleeping"
        e = await rpc_error(stub.UpdateStatus(pb.WriteRequest(object=p)))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert 'status.phase: Unsupported value: "Sleeping"' in e.details()
        kv, _ = await etcd.get(apiserver.key("pods", "default", "p"))
        assert kv.mod_revision == int(p.pod.metadata.resource_version)
    finally:
        await etcd.close()


async def test_other_kinds(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    cases = [
        (
            pb.Object(
                lease=pb.Lease(
                    metadata=pb.ObjectMeta(name="l", namespace="x"),
                    spec=pb.LeaseSpec(lease_duration_seconds=0),
                )
            ),
            'Lease.coordination.k8s.io "l" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0',  # noqa: E501
            "leases",
        ),
        (
            pb.Object(event=pb.Event(metadata=pb.ObjectMeta(name="e"), type="Loud")),
            'Event "e" is invalid: type: Unsupported value: "Loud": supported values: "Normal", "Warning"',
            "events",
        ),
        (
            pb.Object(priority_class=pb.PriorityClass(metadata=pb.ObjectMeta(name="p"), value=2_000_000_000)),
            'PriorityClass.scheduling.k8s.io "p" is invalid: value: Forbidden: maximum allowed value',
            "priorityclasses",
        ),
        (
            pb.Object(node=pb.Node(metadata=pb.ObjectMeta(name="n", namespace="default"))),
            'Node "n" is invalid: metadata.namespace: Forbidden: not allowed on this type',
            "nodes",
        ),
    ]
    for obj, needle, resource in cases:
        e = await rpc_error(stub.Create(pb.WriteRequest(object=obj)))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
        assert e.details().startswith(needle), e.details()
        assert await stored_keys(apiserver, resource) == []


async def test_request_without_object(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    for call in (stub.Create, stub.Update, stub.UpdateStatus):
        e = await rpc_error(call(pb.WriteRequest()))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "the request has no object" in e.details()


async def test_stored_objects_revalidate(apiserver: ApiServer):
    """What the server stores (after defaulting) passes validation when read back from etcd."""
    stub = apiserver.stub("admin")
    await stub.Create(pb.WriteRequest(object=make_pod("ok")))
    etcd = await apiserver.etcd()
    try:
        kv, _ = await etcd.get(apiserver.key("pods", "default", "ok"))
        stored = pb.Pod.FromString(kv.value)
        assert stored.metadata.resource_version == ""  # never stored; it is the mod_revision
        assert validate_object(BY_FIELD["pod"], stored).items == []
    finally:
        await etcd.close()
