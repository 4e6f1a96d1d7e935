"""The OpenAPI documents, strategic merge patch and server-side apply through a real API server, with
the real kubectl (skipped with a message where kubectl is not installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import http_client, kubectl

pytestmark = pytest.mark.integration

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: c
    image: nginx:1
"""


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: Path) -> Path:
    return apiserver.kubeconfig(tmp_path / "kubeconfig", "admin")


async def test_openapi_documents_are_served_as_kube_apiserver_serves_them(apiserver: ApiServer) -> None:
    async with http_client(apiserver, "admin") as http:
        code, v2, _ = await http.call("GET", "/openapi/v2")
        assert code == 200 and v2["swagger"] == "2.0"
        assert "io.k8s.api.core.v1.PodSpec" in v2["definitions"]
        code, index, _ = await http.call("GET", "/openapi/v3")
        assert code == 200
        url = index["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"]
        code, doc, _ = await http.call("GET", url)
        assert code == 200 and doc["openapi"].startswith("3.0")
        assert "io.k8s.api.coordination.v1.Lease" in doc["components"]["schemas"]


def test_kubectl_explain(kubeconfig: Path) -> None:
    out = kubectl(kubeconfig, "explain", "pod.spec").stdout
    assert "FIELD: spec <PodSpec>" in out and "containers\t<[]Container>" in out
    out = kubectl(kubeconfig, "explain", "leases.spec.holderIdentity").stdout
    assert "GROUP:      coordination.k8s.io" in out and "holderIdentity" in out
    # The Swagger 2.0 document, as the protobuf client-go asks for.
    out = kubectl(kubeconfig, "explain", "pod.spec", "--output=plaintext-openapiv2").stdout
    assert "RESOURCE: spec <Object>" in out and "containers\t<[]Object>" in out


def test_kubectl_apply_leaves_field_validation_to_the_server(kubeconfig: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD.replace("spec:\n", "spec:\n  nodeSelecter: {disk: ssd}\n"))
    out = kubectl(kubeconfig, "apply", "-f", str(manifest), check=False)
    assert out.returncode != 0 and 'unknown field "spec.nodeSelecter"' in out.stderr, out.stderr
    assert kubectl(kubeconfig, "get", "pod", "web", check=False).returncode != 0  # nothing written
    out = kubectl(kubeconfig, "apply", "--validate=false", "-f", str(manifest))
    assert "pod/web created" in out.stdout


def test_strategic_merge_patch_merges_node_conditions_by_type(kubeconfig: Path, tmp_path: Path) -> None:
    node = tmp_path / "node.yaml"
    node.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus:\n"
        "  conditions: [{type: Ready, status: 'True'}, {type: DiskPressure, status: 'False'}]\n"
    )
    kubectl(kubeconfig, "create", "-f", str(node))
    patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletDown"}]}}
    kubectl(kubeconfig, "patch", "node", "node-a", "--subresource=status", "-p", json.dumps(patch))
    got = json.loads(kubectl(kubeconfig, "get", "node", "node-a", "-o", "json").stdout)
    conditions = {c["type"]: c for c in got["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "KubeletDown"
    assert conditions["DiskPressure"]["status"] == "False"  # kept: merged by type, not replaced


def test_server_side_apply_conflicts_name_the_manager_and_field(kubeconfig: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
    kubectl(kubeconfig, "set", "image", "pod/web", "c=nginx:2")
    out = kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest), check=False)
    assert out.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl-set" using v1 at ' in out.stderr, out.stderr
    assert '.spec.containers[name="c"].image' in out.stderr
    kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    pod = json.loads(kubectl(kubeconfig, "get", "pod", "web", "-o", "json", "--show-managed-fields").stdout)
    assert pod["spec"]["containers"][0]["image"] == "nginx:1"
    owners = {e["manager"]: e["fieldsV1"] for e in pod["metadata"]["managedFields"]}
    container = owners["kubectl"]["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert "f:image" in container
    assert "kubectl-set" not in owners  # its only field was taken over
