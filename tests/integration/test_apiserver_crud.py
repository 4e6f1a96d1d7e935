"""CRUD through the one generic path, for every kind, against a real API server process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from apiserver_mock.systemnamespaces import SYSTEM_NAMESPACES
from kse.objects.kinds import KINDS, Kind, unwrap
from kse.objects.manifest import load_manifest_files, to_dict, to_yaml
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, make_pod, rpc_error, stored_keys, trailing_revision

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "k8s-examples"


def sample(kind: Kind, name: str) -> pb.Object:
    """A minimal valid object of `kind`."""
    meta = pb.ObjectMeta(name=name, labels={"app": "crud"})
    if kind.field == "pod":
        return make_pod(name, labels={"app": "crud"})
    if kind.field == "node":
        return pb.Object(node=pb.Node(metadata=meta, status=pb.NodeStatus(capacity={"cpu": "2"})))
    if kind.field == "lease":
        meta.namespace = "kube-system"
        return pb.Object(
            lease=pb.Lease(metadata=meta, spec=pb.LeaseSpec(holder_identity="a", lease_duration_seconds=15))
        )
    if kind.field == "event":
        meta.namespace = "default"
        return pb.Object(event=pb.Event(metadata=meta, reason="Scheduled", type="Normal", count=1))
    if kind.field == "priority_class":
        return pb.Object(priority_class=pb.PriorityClass(metadata=meta, value=100))
    if kind.field == "namespace":
        return pb.Object(namespace=pb.Namespace(metadata=meta))
    meta.namespace = "default"
    if kind.field == "service":
        port = pb.ServicePort(port=80)
        return pb.Object(
            service=pb.Service(metadata=meta, spec=pb.ServiceSpec(selector={"app": "crud"}, ports=[port]))
        )
    if kind.field == "pod_disruption_budget":
        pdb = pb.PodDisruptionBudget(metadata=meta)
        pdb.spec.min_available.number_value = 1
        pdb.spec.selector.match_labels["app"] = "crud"
        return pb.Object(pod_disruption_budget=pdb)
    template = pb.PodTemplateSpec(
        metadata=pb.ObjectMeta(labels={"app": "crud"}),
        spec=pb.PodSpec(containers=[pb.Container(name="c", image="nginx")]),
    )
    selector = pb.LabelSelector(match_labels={"app": "crud"})
    if kind.field == "replica_set":
        return pb.Object(
            replica_set=pb.ReplicaSet(
                metadata=meta, spec=pb.ReplicaSetSpec(selector=selector, template=template)
            )
        )
    if kind.field == "deployment":
        return pb.Object(
            deployment=pb.Deployment(
                metadata=meta, spec=pb.DeploymentSpec(selector=selector, template=template)
            )
        )
    assert kind.field == "daemon_set", kind
    return pb.Object(
        daemon_set=pb.DaemonSet(metadata=meta, spec=pb.DaemonSetSpec(selector=selector, template=template))
    )


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.resource)
async def test_crud_every_kind(apiserver: ApiServer, kind: Kind):
    stub = apiserver.stub("admin")
    obj = sample(kind, "one")
    call = stub.Create(pb.WriteRequest(object=obj))
    created = await call
    msg = unwrap(created)
    rev = await trailing_revision(call)
    assert msg.metadata.resource_version == str(rev)
    assert msg.metadata.uid and msg.metadata.creation_timestamp.endswith("Z")
    assert msg.kind == kind.kind and msg.api_version == kind.api_version
    ns = msg.metadata.namespace
    assert ns == ("kube-system" if kind.field == "lease" else "default" if kind.namespaced else "")

    e = await rpc_error(stub.Create(pb.WriteRequest(object=obj)))
    assert e.code() == grpc.StatusCode.ALREADY_EXISTS
    assert e.details() == f'{kind.resource}{"." + kind.group if kind.group else ""} "one" already exists'

    got = await stub.Get(pb.GetRequest(resource=kind.resource, namespace=ns, name="one"))
    assert got == created

    listed = await stub.List(pb.ListRequest(resource=kind.resource))
    system = set(SYSTEM_NAMESPACES) if kind.field == "namespace" else set()
    assert [unwrap(o).metadata.name for o in listed.items if unwrap(o).metadata.name not in system] == ["one"]
    assert int(listed.metadata.resource_version) >= rev

    # Update with the current resourceVersion, then with the stale one, then without one.
    changed = pb.Object()
    changed.CopyFrom(created)
    unwrap(changed).metadata.labels["v"] = "2"
    updated = await stub.Update(pb.WriteRequest(object=changed))
    assert unwrap(updated).metadata.labels["v"] == "2"
    assert int(unwrap(updated).metadata.resource_version) > rev
    assert unwrap(updated).metadata.uid == msg.metadata.uid
    e = await rpc_error(stub.Update(pb.WriteRequest(object=changed)))
    assert e.code() == grpc.StatusCode.ABORTED
    assert "the object has been modified; please apply your changes to the latest version" in e.details()
    unwrap(changed).metadata.resource_version = ""
    unwrap(changed).metadata.labels["v"] = "3"
    updated = await stub.Update(pb.WriteRequest(object=changed))
    assert unwrap(updated).metadata.labels["v"] == "3"

    # Delete returns the object at the deleting revision; then it is gone.
    call = stub.Delete(pb.DeleteRequest(resource=kind.resource, namespace=ns, name="one"))
    deleted = await call
    assert int(unwrap(deleted).metadata.resource_version) == await trailing_revision(call)
    assert int(unwrap(deleted).metadata.resource_version) > int(unwrap(updated).metadata.resource_version)
    assert unwrap(deleted).metadata.labels["v"] == "3"
    e = await rpc_error(stub.Get(pb.GetRequest(resource=kind.resource, namespace=ns, name="one")))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    assert e.details().endswith('"one" not found')
    e = await rpc_error(stub.Delete(pb.DeleteRequest(resource=kind.resource, namespace=ns, name="one")))
    assert e.code() == grpc.StatusCode.NOT_FOUND
    system_keys = [
        k for k in await stored_keys(apiserver, kind.resource) if k.rpartition(b"/")[2].decode() in system
    ]
    assert await stored_keys(apiserver, kind.resource) == system_keys and len(system_keys) == len(system)


async def test_update_status_writes_only_status(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    created = await stub.Create(pb.WriteRequest(object=make_pod("p", labels={"a": "1"})))
    assert created.pod.status.phase == "Pending"
    change = pb.Object()
    change.CopyFrom(created)
    change.pod.status.phase = "Running"
    change.pod.status.conditions.add(type="Ready", status="True")
    change.pod.metadata.labels["a"] = "ignored"
    change.pod.spec.containers[0].image = "ignored"
    out = await stub.UpdateStatus(pb.WriteRequest(object=change))
    assert out.pod.status.phase == "Running"
    assert out.pod.metadata.labels["a"] == "1"
    assert out.pod.spec.containers[0].image == "nginx"
    # Update keeps status.
    change = pb.Object()
    change.CopyFrom(out)
    change.pod.status.phase = "Failed"
    change.pod.spec.containers[0].image = "nginx:2"
    out2 = await stub.Update(pb.WriteRequest(object=change))
    assert out2.pod.status.phase == "Running"
    assert out2.pod.spec.containers[0].image == "nginx:2"
    # No status subresource for leases.
    lease = await stub.Create(
        pb.WriteRequest(object=sample(next(k for k in KINDS if k.field == "lease"), "l"))
    )
    e = await rpc_error(stub.UpdateStatus(pb.WriteRequest(object=lease)))
    assert e.code() == grpc.StatusCode.NOT_FOUND


async def test_pod_defaults_and_immutability(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    obj = make_pod("", labels={})
    obj.pod.metadata.generate_name = "web-"
    obj.pod.metadata.namespace = ""
    created = (await stub.Create(pb.WriteRequest(object=obj))).pod
    assert created.metadata.name.startswith("web-") and len(created.metadata.name) == 9
    assert created.metadata.namespace == "default"
    assert created.spec.scheduler_name == "default-scheduler"
    assert created.spec.priority == 0 and created.spec.preemption_policy == "PreemptLowerPriority"
    assert created.status.phase == "Pending" and created.status.qos_class == "BestEffort"
    moved = pb.Object(pod=created)
    moved.pod.spec.node_name = "node-a"
    e = await rpc_error(stub.Update(pb.WriteRequest(object=moved)))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details().startswith(
        f'Pod "{created.metadata.name}" is invalid: spec: Forbidden: pod updates may not change fields other than'  # noqa: E501
    )
    assert "spec.nodeName" in e.details()


async def test_priority_resolution(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    await stub.Create(
        pb.WriteRequest(
            object=pb.Object(
                priority_class=pb.PriorityClass(
                    metadata=pb.ObjectMeta(name="high"), value=1000, preemption_policy="Never"
                )
            )
        )
    )
    p = (await stub.Create(pb.WriteRequest(object=make_pod("a", priority_class_name="high")))).pod
    assert (p.spec.priority, p.spec.preemption_policy) == (1000, "Never")
    p = (
        await stub.Create(pb.WriteRequest(object=make_pod("b", priority_class_name="system-node-critical")))
    ).pod
    assert p.spec.priority == 2000001000
    e = await rpc_error(stub.Create(pb.WriteRequest(object=make_pod("c", priority_class_name="nope"))))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == (
        'Pod "c" is invalid: spec.priorityClassName: Not found: "nope": no PriorityClass with name nope was found'  # noqa: E501
    )
    e = await rpc_error(stub.Create(pb.WriteRequest(object=make_pod("d", priority=5))))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "spec.priority" in e.details()
    await stub.Create(
        pb.WriteRequest(
            object=pb.Object(
                priority_class=pb.PriorityClass(
                    metadata=pb.ObjectMeta(name="default-pc"), value=7, global_default=True
                )
            )
        )
    )
    p = (await stub.Create(pb.WriteRequest(object=make_pod("e")))).pod
    assert (p.spec.priority_class_name, p.spec.priority) == ("default-pc", 7)
    e = await rpc_error(
        stub.Create(
            pb.WriteRequest(
                object=pb.Object(
                    priority_class=pb.PriorityClass(
                        metadata=pb.ObjectMeta(name="another-default"), value=8, global_default=True
                    )
                )
            )
        )
    )
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "already marked as default" in e.details()


async def test_delete_preconditions(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    p = (await stub.Create(pb.WriteRequest(object=make_pod("p")))).pod
    e = await rpc_error(
        stub.Delete(pb.DeleteRequest(resource="pods", namespace="default", name="p", uid="other"))
    )
    assert e.code() == grpc.StatusCode.ABORTED
    assert (
        f"Precondition failed: UID in precondition: other, UID in object meta: {p.metadata.uid}"
        in e.details()
    )
    e = await rpc_error(
        stub.Delete(pb.DeleteRequest(resource="pods", namespace="default", name="p", resource_version="1"))
    )
    assert e.code() == grpc.StatusCode.ABORTED and "ResourceVersion in precondition: 1" in e.details()
    out = await stub.Delete(
        pb.DeleteRequest(
            resource="pods",
            namespace="default",
            name="p",
            uid=p.metadata.uid,
            resource_version=p.metadata.resource_version,
        )
    )
    assert out.pod.metadata.uid == p.metadata.uid


async def test_unknown_resource_and_empty_request(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    e = await rpc_error(stub.Get(pb.GetRequest(resource="widgets", name="x")))
    assert e.code() == grpc.StatusCode.NOT_FOUND and "widgets" in e.details()
    e = await rpc_error(stub.Create(pb.WriteRequest()))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "no object" in e.details()


def _pod_manifests() -> list[Path]:
    if not (EXAMPLES / "pods").is_dir():
        return []
    return sorted(p for p in (EXAMPLES / "pods").rglob("*") if p.suffix in (".yaml", ".yml", ".json"))


def _subset(small: object, big: object, path: str = "") -> list[str]:
    """Paths where `small` is not contained in `big` (dicts by key, lists element-wise)."""
    if isinstance(small, dict) and isinstance(big, dict):
        return [
            d
            for k, v in small.items()
            for d in (_subset(v, big[k], f"{path}.{k}") if k in big else [f"{path}.{k}"])
        ]
    if isinstance(small, list) and isinstance(big, list) and len(small) == len(big):
        return [
            d for i, (a, b) in enumerate(zip(small, big, strict=True)) for d in _subset(a, b, f"{path}[{i}]")
        ]
    return [] if small == big else [f"{path}: {small!r} != {big!r}"]


DEFAULT_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _drop_admitted_tolerations(sent: dict[str, Any], back: dict[str, Any]) -> None:
    """DefaultTolerationSeconds appends the not-ready / unreachable NoExecute tolerations (300 s)
    a pod lacks: check those and take them out of `back`, so the rest compares as sent."""
    tols = back.get("spec", {}).get("tolerations", [])
    n = len(sent.get("spec", {}).get("tolerations", []))
    added = tols[n:]
    assert all(
        t["key"] in DEFAULT_TOLERATION_KEYS and t["effect"] == "NoExecute" and t["tolerationSeconds"] == 300
        for t in added
    ), tols
    if n:
        back["spec"]["tolerations"] = tols[:n]
    elif tols:
        del back["spec"]["tolerations"]


@pytest.mark.skipif(not _pod_manifests(), reason=f"no Kubernetes example manifests under {EXAMPLES}")
async def test_real_pod_manifests_round_trip(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    await stub.Create(
        pb.WriteRequest(
            object=pb.Object(
                priority_class=pb.PriorityClass(metadata=pb.ObjectMeta(name="high-priority"), value=1000000)
            )
        )
    )
    created_any = False
    for path in _pod_manifests():
        pods = [o for o in load_manifest_files(path) if o.WhichOneof("kind") == "pod"]
        for i, obj in enumerate(pods):
            obj.pod.metadata.namespace = f"m{len(path.name)}-{i}"[:20]
            obj.pod.metadata.name = f"{path.stem}-{i}"[:60].lower().replace("_", "-")
            sent = to_dict(obj)
            try:
                created = await stub.Create(pb.WriteRequest(object=obj))
            except grpc.aio.AioRpcError as e:
                raise AssertionError(f"{path}: {e.code().name}: {e.details()}") from None
            created_any = True
            got = await stub.Get(
                pb.GetRequest(
                    resource="pods", namespace=obj.pod.metadata.namespace, name=obj.pod.metadata.name
                )
            )
            back = to_dict(got)
            assert got == created
            _drop_admitted_tolerations(sent, back)
            assert _subset(sent, back) == [], path
            text = to_yaml(got)
            assert text.startswith("apiVersion: v1\nkind: Pod\n")
            assert "creationTimestamp:" in text and "resourceVersion:" in text and "containers:" in text
    assert created_any
