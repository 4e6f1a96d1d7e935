"""Random objects thrown at Create and Update: the server never crashes, never stores an invalid
object, and answers every request with a deliberate status."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from apiserver_mock.validation import validate_object
from kse.etcdclient import prefix_range_end
from kse.objects.kinds import BY_FIELD, kind_of, unwrap
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer

pytestmark = pytest.mark.integration

# Mostly valid, sometimes wrong: each field picks a bad value now and then, so a good share
# of objects is accepted (and then must re-validate) while every rule still gets hit.


def mostly(good: list, bad: list) -> st.SearchStrategy:
    return st.sampled_from(good * 15 + bad) if bad else st.sampled_from(good)


names = mostly(["web", "db-1", "node-a", "a.b"], ["Web", "a_b", "-a", "", "x" * 254])
label_keys = mostly(["app", "tier", "example.com/role"], ["bad key", "a/b/c", "", "k" * 64])
label_values = mostly(["web", "", "v1.2"], ["bad value", "-x", "v" * 64])
labels = st.dictionaries(label_keys, label_values, max_size=2)
quantities = mostly(["100m", "1", "2Gi", "0", "1.5", "1e3", "10Mi"], ["-1", "abc", "", "1Zi"])
resources = mostly(["cpu", "memory", "example.com/gpu"], ["bad name"])
resource_lists = st.dictionaries(resources, quantities, max_size=2)
small_ints = mostly([80, 443, 8080, 1], [0, -1, 70000])


def enum(values: list[str], bad: tuple[str, ...] = ("Bogus",)) -> st.SearchStrategy:
    return mostly(values, list(bad))


containers = st.builds(
    pb.Container,
    name=names,
    image=mostly(["nginx", "registry.k8s.io/pause:3.9"], ["", " "]),
    image_pull_policy=enum(["", "Always", "IfNotPresent", "Never"], ("Sometimes",)),
    ports=st.lists(
        st.builds(pb.ContainerPort, container_port=small_ints, protocol=enum(["", "TCP", "UDP"], ("HTTP",))),
        max_size=2,
    ),
    resources=st.builds(pb.ResourceRequirements, limits=resource_lists, requests=resource_lists),
)
tolerations = st.builds(
    pb.Toleration,
    key=label_keys,
    operator=enum(["Exists"], ("Maybe", "Gt")),
    effect=enum(["", "NoSchedule", "NoExecute"], ("Never",)),
)
spread = st.builds(
    pb.TopologySpreadConstraint,
    max_skew=mostly([1, 2], [0, -1]),
    topology_key=mostly(["zone", "kubernetes.io/hostname"], [""]),
    when_unsatisfiable=enum(["DoNotSchedule", "ScheduleAnyway"], ("", "Whatever")),
    node_affinity_policy=enum(["", "Honor", "Ignore"], ("Maybe",)),
)
pod_specs = st.builds(
    pb.PodSpec,
    containers=st.lists(containers, min_size=1, max_size=2, unique_by=lambda c: c.name) | st.just([]),
    init_containers=st.lists(containers, max_size=1),
    node_selector=labels,
    tolerations=st.lists(tolerations, max_size=2),
    topology_spread_constraints=st.lists(spread, max_size=1),
    restart_policy=enum(["", "Always", "Never"], ("Sometimes",)),
    overhead=resource_lists,
    node_name=mostly(["", "node-a"], ["Bad Node"]),
    priority_class_name=mostly(["", "system-node-critical"], ["missing"]),
)
metas = st.builds(
    pb.ObjectMeta,
    name=names,
    namespace=mostly(["", "default", "kube-system"], ["Bad NS"]),
    labels=labels,
    annotations=st.dictionaries(label_keys, st.text(max_size=20), max_size=2),
)
pods = st.builds(
    pb.Pod,
    metadata=metas,
    spec=pod_specs,
    status=st.builds(pb.PodStatus, phase=enum(["", "Pending"], ("Sleeping",))),
)
nodes = st.builds(
    pb.Node,
    metadata=metas,
    spec=st.builds(
        pb.NodeSpec,
        taints=st.lists(
            st.builds(pb.Taint, key=label_keys, value=label_values, effect=enum(["NoSchedule"], ("", "Bad"))),
            max_size=2,
            unique_by=lambda t: (t.key, t.effect),
        ),
    ),
    status=st.builds(pb.NodeStatus, capacity=resource_lists, allocatable=resource_lists),
)
leases = st.builds(
    pb.Lease,
    metadata=metas,
    spec=st.builds(
        pb.LeaseSpec,
        holder_identity=st.text(max_size=10),
        lease_duration_seconds=mostly([15, 40], [0, -2]),
        renew_time=mostly(["", "2024-01-01T00:00:00.000000Z"], ["yesterday"]),
    ),
)
objects = st.one_of(
    pods.map(lambda m: pb.Object(pod=m)),
    nodes.map(lambda m: pb.Object(node=m)),
    leases.map(lambda m: pb.Object(lease=m)),
)

# Every status a well-behaved server may answer a random write with.
EXPECTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ABORTED,
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=objects, as_update=st.booleans())
async def test_random_writes_never_store_invalid_objects(
    apiserver: ApiServer, obj: pb.Object, as_update: bool
):
    stub = apiserver.stub("admin")
    call = stub.Update if as_update else stub.Create
    try:
        out = await call(pb.WriteRequest(object=obj))
        code, details = grpc.StatusCode.OK, ""
    except grpc.aio.AioRpcError as e:
        code, details = e.code(), e.details()
        out = None
    assert code in EXPECTED, f"{code.name}: {details}"
    event(f"{'Update' if as_update else 'Create'} -> {code.name}")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        assert " is invalid: " in details or "no object" in details, details
    if out is not None:
        # Get returns the stored bytes (plus resourceVersion): they must validate clean.
        msg = unwrap(out)
        kind = kind_of(out)
        got = await stub.Get(
            pb.GetRequest(resource=kind.resource, namespace=msg.metadata.namespace, name=msg.metadata.name)
        )
        stored = unwrap(got)
        assert stored.metadata.resource_version == msg.metadata.resource_version
        stored.metadata.resource_version = ""
        assert validate_object(kind, stored).items == []


async def test_everything_stored_by_the_random_run_revalidates(apiserver: ApiServer):
    """Run a fixed batch of random writes, then read etcd directly: every object passes validation,
    and the server is still healthy."""
    stub = apiserver.stub("admin")
    batch = st.lists(objects, min_size=40, max_size=40)

    @settings(
        max_examples=1,
        deadline=None,
        derandomize=True,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )
    @given(batch)
    def pick(objs: list[pb.Object]) -> None:
        picked.extend(objs)

    picked: list[pb.Object] = []
    pick()
    accepted = 0
    for obj in picked:
        try:
            await stub.Create(pb.WriteRequest(object=obj))
            accepted += 1
        except grpc.aio.AioRpcError as e:
            assert e.code() in EXPECTED, f"{e.code().name}: {e.details()}"
    etcd = await apiserver.etcd()
    try:
        for resource in ("pods", "nodes", "leases"):
            start = f"{apiserver.prefix}/{resource}/".encode()
            res = await etcd.range(start, prefix_range_end(start))
            kind = BY_FIELD[{"pods": "pod", "nodes": "node", "leases": "lease"}[resource]]
            for kv in res.kvs:
                msg = kind.message.FromString(kv.value)
                assert validate_object(kind, msg).items == [], (kv.key, msg)
                assert kind_of(pb.Object(**{kind.field: msg})) is kind
    finally:
        await etcd.close()
    health = health_pb2_grpc.HealthStub(await apiserver.channel("admin"))
    resp = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert resp.status == health_pb2.HealthCheckResponse.SERVING
    assert "internal error" not in apiserver.log().lower()
