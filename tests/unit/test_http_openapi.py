"""The OpenAPI documents: generated from the protos and the kind table, shaped as kube-apiserver's.

The last tests run the real kubectl (skipped where none is installed) against a tiny server that
serves only discovery and these documents: `kubectl explain` must read them, and `kubectl apply`
must build its strategic merge patch from their patch extensions and leave field validation to the
server (fieldValidation=Strict), as it does against kube-apiserver.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from google.protobuf.descriptor import Descriptor

from apiserver_mock.http import openapi, openapi_pb
from apiserver_mock.http.apply import ApplyConflict, record_update, server_side_apply
from apiserver_mock.http.strategic_merge import apply_patch
from kse.objects.kinds import KINDS
from kse.objects.listtypes import LISTS
from tests.fixtures.kube import NO_KUBECTL, find_kubectl

CORE = "io.k8s.api.core.v1"
META = "io.k8s.apimachinery.pkg.apis.meta.v1"


def _defs() -> dict[str, Any]:
    return openapi.openapi_v2()["definitions"]  # type: ignore[no-any-return]


def _prop(definition: str, field: str) -> dict[str, Any]:
    return _defs()[definition]["properties"][field]  # type: ignore[no-any-return]


def test_v2_is_swagger_2_with_upstream_definition_names() -> None:
    doc = openapi.openapi_v2()
    assert doc["swagger"] == "2.0" and doc["info"]["version"] == openapi.GIT_VERSION
    for name in (
        f"{CORE}.Pod",
        f"{CORE}.PodSpec",
        f"{CORE}.Container",
        f"{CORE}.Node",
        f"{CORE}.Taint",
        f"{CORE}.Event",
        f"{CORE}.PodList",
        f"{CORE}.PodAntiAffinity",
        f"{META}.ObjectMeta",
        f"{META}.LabelSelector",
        f"{META}.ManagedFieldsEntry",
        "io.k8s.api.coordination.v1.Lease",
        "io.k8s.api.coordination.v1.LeaseSpec",
        "io.k8s.api.scheduling.v1.PriorityClass",
        "io.k8s.apimachinery.pkg.api.resource.Quantity",
    ):
        assert name in doc["definitions"], name


def test_top_level_kinds_carry_their_group_version_kind() -> None:
    for kind in KINDS:
        group, _, version = kind.api_version.rpartition("/")
        package = f"io.k8s.api.{group.split('.')[0] if group else 'core'}.{version}"
        top = _defs()[f"{package}.{kind.kind}"]
        assert top["x-kubernetes-group-version-kind"] == [
            {"group": group, "kind": kind.kind, "version": version}
        ]
        assert top["description"]
        assert (
            _defs()[f"{package}.{kind.kind}List"]["x-kubernetes-group-version-kind"][0]["kind"]
            == f"{kind.kind}List"
        )


def _messages(desc: Descriptor, seen: dict[str, Descriptor]) -> dict[str, Descriptor]:
    if desc.full_name in seen or desc.full_name.startswith("google.protobuf."):
        return seen
    seen[desc.full_name] = desc
    for fd in desc.fields:
        if fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            _messages(fd.message_type, seen)
    return seen


def test_every_proto_field_appears_under_its_json_name() -> None:
    by_short_name = {name.rpartition(".")[2]: name for name in _defs()}
    messages: dict[str, Descriptor] = {}
    for kind in KINDS:
        _messages(kind.message.DESCRIPTOR, messages)
    assert len(messages) >= 40
    for desc in messages.values():
        properties = _defs()[by_short_name[desc.name]]["properties"]
        assert set(properties) == {fd.json_name for fd in desc.fields}, desc.full_name


def test_types_and_formats() -> None:
    assert _prop(f"{CORE}.ContainerPort", "containerPort") == {"type": "integer", "format": "int32"}
    assert _prop(f"{CORE}.ContainerPort", "hostIP") == {"type": "string"}
    assert _prop(f"{META}.ObjectMeta", "generation") == {"type": "integer", "format": "int64"}
    assert _prop(f"{CORE}.PodSpec", "hostNetwork") == {"type": "boolean"}
    assert _prop(f"{CORE}.PodSpec", "nodeSelector") == {
        "type": "object",
        "additionalProperties": {"type": "string"},
    }
    quantity = {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}
    assert _prop(f"{CORE}.ResourceRequirements", "requests")["additionalProperties"] == quantity
    assert _prop(f"{CORE}.NodeStatus", "allocatable")["additionalProperties"] == quantity
    assert _defs()["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"] == "string"
    assert _prop(f"{META}.ObjectMeta", "creationTimestamp") == {"$ref": f"#/definitions/{META}.Time"}
    assert _prop("io.k8s.api.coordination.v1.LeaseSpec", "renewTime") == {
        "$ref": f"#/definitions/{META}.MicroTime"
    }
    assert _defs()[f"{META}.MicroTime"]["format"] == "date-time"
    assert _prop(f"{META}.ManagedFieldsEntry", "fieldsV1") == {"$ref": f"#/definitions/{META}.FieldsV1"}
    assert _prop(f"{CORE}.PodSpec", "affinity") == {"$ref": f"#/definitions/{CORE}.Affinity"}


def test_list_extensions_are_upstreams() -> None:
    containers = _prop(f"{CORE}.PodSpec", "containers")
    assert containers["items"] == {"$ref": f"#/definitions/{CORE}.Container"}
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    ports = _prop(f"{CORE}.Container", "ports")
    assert ports["x-kubernetes-patch-merge-key"] == "containerPort"
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert _prop(f"{CORE}.Container", "env")["x-kubernetes-patch-merge-key"] == "name"
    assert _prop(f"{CORE}.PodStatus", "conditions")["x-kubernetes-patch-merge-key"] == "type"
    assert _prop(f"{CORE}.NodeStatus", "conditions")["x-kubernetes-list-map-keys"] == ["type"]
    assert _prop(f"{META}.ObjectMeta", "ownerReferences")["x-kubernetes-patch-merge-key"] == "uid"
    finalizers = _prop(f"{META}.ObjectMeta", "finalizers")
    assert (
        finalizers["x-kubernetes-list-type"] == "set" and finalizers["x-kubernetes-patch-strategy"] == "merge"
    )
    for atomic in (_prop(f"{CORE}.PodSpec", "tolerations"), _prop(f"{CORE}.NodeSpec", "taints")):
        assert atomic["x-kubernetes-list-type"] == "atomic"
        assert "x-kubernetes-patch-strategy" not in atomic


def test_every_table_row_is_published() -> None:
    names = {desc_name.rpartition(".")[2]: desc_name for desc_name in _defs()}
    for (message, field), meta in LISTS.items():
        schema = _defs()[names[message.rpartition(".")[2]]]["properties"][field]
        assert schema["x-kubernetes-list-type"] == meta.list_type, (message, field)
        assert schema.get("x-kubernetes-patch-merge-key") == meta.patch_merge_key, (message, field)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_every_reference_resolves() -> None:
    v2 = openapi.openapi_v2()
    for ref in _refs(v2):
        assert ref.removeprefix("#/definitions/") in v2["definitions"], ref
    for gv in openapi.openapi_v3_index()["paths"]:
        doc = openapi.openapi_v3(gv)
        assert doc is not None
        for ref in _refs(doc):
            assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"], (gv, ref)


def test_v3_index_names_every_group_version_with_its_hash() -> None:
    index = openapi.openapi_v3_index("/openapi/v3/")
    assert set(index["paths"]) == {
        "api/v1",
        "apis/coordination.k8s.io/v1",
        "apis/scheduling.k8s.io/v1",
        "apis/apps/v1",
        "apis/policy/v1",
    }
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    assert len(url.partition("hash=")[2]) == 128
    assert openapi.openapi_v3_index("/x")["paths"]["api/v1"]["serverRelativeURL"].startswith(
        "/x/api/v1?hash="
    )


def test_v3_documents_per_group_version() -> None:
    core = openapi.openapi_v3("api/v1")
    assert core is not None and core["openapi"].startswith("3.0")
    schemas = core["components"]["schemas"]
    assert f"{CORE}.Pod" in schemas and f"{CORE}.Node" in schemas and f"{META}.ObjectMeta" in schemas
    assert "io.k8s.api.coordination.v1.Lease" not in schemas
    spec = schemas[f"{CORE}.Pod"]["properties"]["spec"]
    assert spec["allOf"] == [{"$ref": f"#/components/schemas/{CORE}.PodSpec"}]
    lease = openapi.openapi_v3("/apis/coordination.k8s.io/v1")
    assert lease is not None and "io.k8s.api.coordination.v1.Lease" in lease["components"]["schemas"]
    assert f"{CORE}.Pod" not in lease["components"]["schemas"]
    apps = openapi.openapi_v3("apis/apps/v1")
    assert apps is not None and "io.k8s.api.apps.v1.Deployment" in apps["components"]["schemas"]
    assert "io.k8s.api.core.v1.PodTemplateSpec" in apps["components"]["schemas"]
    assert openapi.openapi_v3("apis/batch/v1") is None


def test_patch_operations_advertise_field_validation_for_their_kind() -> None:
    # What kubectl's QueryParamVerifierV3 looks for before it leaves validation to the server.
    for kind in KINDS:
        gv = "api/v1" if kind.api_version == "v1" else f"apis/{kind.api_version}"
        doc = openapi.openapi_v3(gv)
        assert doc is not None
        patches = [
            item["patch"]
            for item in doc["paths"].values()
            if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"]["kind"] == kind.kind
        ]
        assert patches, kind.kind
        for op in patches:
            assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op["parameters"])
            assert "application/strategic-merge-patch+json" in op["requestBody"]["content"]


def test_paths_are_the_kubernetes_ones() -> None:
    paths = openapi.openapi_v2()["paths"]
    assert paths["/api/v1/namespaces/{namespace}/pods"]["get"]["operationId"] == "listCoreV1NamespacedPod"
    assert (
        paths["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]["operationId"]
        == "patchCoreV1NamespacedPod"
    )
    assert paths["/api/v1/namespaces/{namespace}/pods/{name}/status"]["put"]["x-kubernetes-action"] == "put"
    assert paths["/api/v1/pods"]["get"]["operationId"] == "listCoreV1PodForAllNamespaces"
    assert paths["/api/v1/nodes/{name}"]["get"]["operationId"] == "readCoreV1Node"
    lease = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
    assert paths[lease]["put"]["operationId"] == "replaceCoordinationV1NamespacedLease"
    assert "/apis/scheduling.k8s.io/v1/priorityclasses" in paths


def test_documents_are_computed_once() -> None:
    assert openapi.openapi_v2() is openapi.openapi_v2()
    assert openapi.openapi_v3("api/v1") is openapi.openapi_v3("api/v1")
    json.dumps(openapi.openapi_v2())  # plain JSON all the way down


# ---------------------------------------------------------------- the real kubectl

KUBECTL = find_kubectl()
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)


def _resource(kind: Any) -> dict[str, Any]:
    verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    return {
        "name": kind.resource,
        "singularName": kind.kind.lower(),
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": verbs,
        "shortNames": list(kind.short_names),
    }


class _DocServer:
    """Discovery, the OpenAPI documents and one live pod; records the PATCH requests it gets."""

    def __init__(self, live: dict[str, Any]) -> None:
        self.live = live
        self.patches: list[tuple[str, str, Any]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api", self.api)
        app.router.add_get("/api/v1", self.api_v1)
        app.router.add_get("/apis", self.apis)
        app.router.add_get("/apis/{group}/{version}", self.group_version)
        app.router.add_get("/openapi/v2", self.v2)
        app.router.add_get("/openapi/v3", self.v3_index)
        app.router.add_get("/openapi/v3/{gv:.*}", self.v3)
        app.router.add_get("/api/v1/namespaces/default/pods/web", self.get_pod)
        app.router.add_patch("/api/v1/namespaces/default/pods/web", self.patch_pod)
        return app

    async def api(self, _: web.Request) -> web.Response:
        return web.json_response(
            {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        )

    async def api_v1(self, _: web.Request) -> web.Response:
        resources = [_resource(k) for k in KINDS if k.api_version == "v1"]
        return web.json_response({"kind": "APIResourceList", "groupVersion": "v1", "resources": resources})

    async def apis(self, _: web.Request) -> web.Response:
        groups = []
        for gv in sorted({k.api_version for k in KINDS if k.group}):
            version = {"groupVersion": gv, "version": gv.rpartition("/")[2]}
            groups.append({"name": gv.rpartition("/")[0], "versions": [version], "preferredVersion": version})
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})

    async def group_version(self, request: web.Request) -> web.Response:
        gv = f"{request.match_info['group']}/{request.match_info['version']}"
        resources = [_resource(k) for k in KINDS if k.api_version == gv]
        return web.json_response({"kind": "APIResourceList", "groupVersion": gv, "resources": resources})

    async def v2(self, request: web.Request) -> web.Response:
        if openapi_pb.PROTOBUF_V2 in request.headers.get("Accept", ""):
            body = openapi_pb.openapi_v2_protobuf()
            return web.Response(body=body, content_type="application/octet-stream")
        return web.json_response(openapi.openapi_v2())

    async def v3_index(self, _: web.Request) -> web.Response:
        return web.json_response(openapi.openapi_v3_index())

    async def v3(self, request: web.Request) -> web.Response:
        doc = openapi.openapi_v3(request.match_info["gv"])
        if doc is None:
            raise web.HTTPNotFound()
        return web.json_response(doc)

    async def get_pod(self, _: web.Request) -> web.Response:
        return web.json_response(self.live)

    async def patch_pod(self, request: web.Request) -> web.Response:
        body = yaml.safe_load(await request.text())
        self.patches.append((request.content_type, request.query_string, body))
        if request.content_type == "application/json-patch+json":
            return web.json_response(self.live)  # kubectl's managedFields migration; not under test
        if request.content_type != "application/apply-patch+yaml":
            return web.json_response(apply_patch(self.live, body, "Pod"))
        manager, force = request.query.get("fieldManager", ""), request.query.get("force") == "true"
        try:
            return web.json_response(
                server_side_apply(self.live, body, manager, force, "2026-01-01T00:00:00Z")
            )
        except ApplyConflict as err:
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": err.message,
                "reason": "Conflict",
                "details": {"causes": err.causes()},
                "code": 409,
            }
            return web.json_response(status, status=409)


_APPLIED = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "containers": [
            {"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "busybox"},
        ],
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "schedulingGates": [{"name": "gate"}],
    },
}


@pytest.fixture
async def doc_server() -> AsyncIterator[tuple[str, _DocServer]]:
    live = json.loads(json.dumps(_APPLIED))
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(_APPLIED)
    }
    live["metadata"]["resourceVersion"] = "7"
    live["spec"]["containers"][0]["imagePullPolicy"] = "Always"  # a server-side default
    server = _DocServer(live)
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        await runner.cleanup()


async def _kubectl(server: str, tmp_path: Path, *args: str) -> tuple[int, str]:
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        f"--server={server}",
        f"--cache-dir={tmp_path / 'cache'}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@needs_kubectl
async def test_kubectl_explain_reads_the_v3_documents(
    doc_server: tuple[str, _DocServer], tmp_path: Path
) -> None:
    url, _ = doc_server
    code, out = await _kubectl(url, tmp_path, "explain", "pod.spec")
    assert code == 0, out
    assert "FIELD: spec <PodSpec>" in out
    for line in (
        "containers\t<[]Container>",
        "tolerations\t<[]Toleration>",
        "nodeSelector\t<map[string]string>",
    ):
        assert line in out
    code, out = await _kubectl(url, tmp_path, "explain", "lease.spec.renewTime")
    assert code == 0 and "GROUP:      coordination.k8s.io" in out, out


@needs_kubectl
async def test_kubectl_reads_the_v2_protobuf_document(
    doc_server: tuple[str, _DocServer], tmp_path: Path
) -> None:
    url, _ = doc_server
    code, out = await _kubectl(url, tmp_path, "explain", "pod.spec", "--output=plaintext-openapiv2")
    assert code == 0, out
    assert "RESOURCE: spec <Object>" in out and "containers\t<[]Object>" in out
    code, out = await _kubectl(url, tmp_path, "explain", "lease.spec", "--output=plaintext-openapiv2")
    assert code == 0 and "VERSION:  coordination.k8s.io/v1" in out, out


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """A protobuf message's top-level (field number, value): varints as ints, the rest as bytes."""
    out: list[tuple[int, Any]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while pos < len(data):
        key = varint()
        if key & 7 == 0:
            out.append((key >> 3, varint()))
        else:
            assert key & 7 == 2
            size = varint()
            out.append((key >> 3, data[pos : pos + size]))
            pos += size
    return out


def test_v2_protobuf_is_gnostics_document_message() -> None:
    doc = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1"},
        "paths": {},
        "definitions": {
            "io.k8s.api.core.v1.Pod": {
                "type": "object",
                "properties": {"spec": {"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec"}},
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
            }
        },
    }
    top = dict(_fields(openapi_pb.encode_v2(doc)))
    assert top[1] == b"2.0"  # Document.swagger
    assert dict(_fields(top[2])) == {1: b"Kubernetes", 2: b"v1"}  # Info.title, Info.version
    [(number, named)] = _fields(top[9])  # Definitions.additional_properties: NamedSchema
    assert number == 1
    named_fields = dict(_fields(named))
    assert named_fields[1] == b"io.k8s.api.core.v1.Pod"
    schema = _fields(named_fields[2])
    assert (22, b"\n\x06object") in schema  # Schema.type = TypeItem{value: "object"}
    [extension] = [v for n, v in schema if n == 31]  # Schema.vendor_extension: NamedAny
    name, value = dict(_fields(extension))[1], dict(_fields(extension))[2]
    assert name == b"x-kubernetes-group-version-kind"
    assert json.loads(dict(_fields(value))[2]) == [{"group": "", "kind": "Pod", "version": "v1"}]  # Any.yaml
    assert openapi_pb.openapi_v2_protobuf() is openapi_pb.openapi_v2_protobuf()


@needs_kubectl
async def test_kubectl_apply_patches_by_our_merge_keys(
    doc_server: tuple[str, _DocServer], tmp_path: Path
) -> None:
    url, server = doc_server
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "side", "image": "busybox"},
                {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80}, {"containerPort": 443}]},
            ],
            "tolerations": [{"key": "b", "operator": "Exists"}],
        },
    }
    (tmp_path / "pod.json").write_text(json.dumps(manifest))
    code, out = await _kubectl(url, tmp_path, "apply", "-f", str(tmp_path / "pod.json"))
    assert code == 0, out
    [(content_type, query, patch)] = server.patches
    assert content_type == "application/strategic-merge-patch+json"
    assert "fieldValidation=Strict" in query  # kubectl left validation to the server
    spec = patch["spec"]
    assert spec["$setElementOrder/containers"] == [{"name": "side"}, {"name": "web"}]
    assert spec["containers"][0]["$setElementOrder/ports"] == [{"containerPort": 80}, {"containerPort": 443}]
    assert spec["schedulingGates"] is None  # removed from the manifest: ungated, as the docs show
    out_spec = apply_patch(server.live, patch, "Pod")["spec"]
    assert out_spec == {
        "containers": [
            {"name": "side", "image": "busybox"},
            {
                "name": "web",
                "image": "nginx:2",
                "ports": [{"containerPort": 80}, {"containerPort": 443}],
                "imagePullPolicy": "Always",
            },
        ],
        "tolerations": [{"key": "b", "operator": "Exists"}],
    }


@needs_kubectl
async def test_kubectl_moves_from_client_side_to_server_side_apply_without_conflicts(
    doc_server: tuple[str, _DocServer], tmp_path: Path
) -> None:
    url, server = doc_server
    server.live = record_update(None, server.live, "kubectl-client-side-apply", "2026-01-01T00:00:00Z")
    changed = json.loads(json.dumps(_APPLIED))
    changed["spec"]["containers"][0]["image"] = "nginx:2"
    (tmp_path / "pod.json").write_text(json.dumps(changed))
    code, out = await _kubectl(url, tmp_path, "apply", "--server-side", "-f", str(tmp_path / "pod.json"))
    assert code == 0, out  # the image was kubectl-client-side-apply's, and its annotation says so
    applies = [(q, body) for t, q, body in server.patches if t == "application/apply-patch+yaml"]
    assert "force=false" in applies[0][0]


@needs_kubectl
async def test_kubectl_server_side_apply_reports_conflicts_as_upstream(
    doc_server: tuple[str, _DocServer], tmp_path: Path
) -> None:
    url, server = doc_server
    server.live = record_update(None, server.live, "kubectl-client-side-apply", "2026-01-01T00:00:00Z")
    edited = json.loads(json.dumps(server.live))
    edited["spec"]["containers"][0]["image"] = "nginx:3"
    server.live = record_update(server.live, edited, "kubectl-set", "2026-01-01T00:00:30Z")
    changed = json.loads(json.dumps(_APPLIED))
    changed["spec"]["containers"][0]["image"] = "nginx:2"
    (tmp_path / "pod.json").write_text(json.dumps(changed))
    code, out = await _kubectl(url, tmp_path, "apply", "--server-side", "-f", str(tmp_path / "pod.json"))
    assert code != 0
    expected = 'Apply failed with 1 conflict: conflict with "kubectl-set" using v1 at 2026-01-01T00:00:30Z'
    assert expected in out, out
    assert '.spec.containers[name="web"].image' in out
    code, out = await _kubectl(
        url, tmp_path, "apply", "--server-side", "--force-conflicts", "-f", str(tmp_path / "pod.json")
    )
    assert code == 0, out
    applies = [(q, body) for t, q, body in server.patches if t == "application/apply-patch+yaml"]
    assert "force=false" in applies[0][0]
    forced = [body for query, body in applies if "fieldManager=kubectl&" in query and "force=true" in query]
    assert forced and forced[-1]["spec"]["containers"][0]["image"] == "nginx:2"
