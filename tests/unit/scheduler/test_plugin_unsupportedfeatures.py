# ruff: noqa: E501 -- the YAML cases read better one per line
"""UnsupportedFeatures: a pod that asks for what no kse plugin implements is refused in PreFilter
with a message naming the field (never placed ignoring it); everything else is skipped. Also
through `kse what-if` with the Kubernetes docs' own PersistentVolumeClaim pod."""

from __future__ import annotations

from pathlib import Path

import pytest

from kse.objects.manifest import load_manifests
from proto import kse_pb2 as pb
from scheduler.framework.plugins import unsupportedfeatures as uf
from scheduler.framework.types import Code, PodInfo, Status
from scheduler.profile import load_scheduler_config
from scheduler.whatif import what_if_files

from .wrappers import make_pod, new_state

EXAMPLES = Path(__file__).resolve().parents[4] / "shared" / "k8s-examples"


def pod_yaml(spec: str) -> pb.Pod:
    text = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers: [{{name: c, image: x}}]\n{spec}"
    (obj,) = load_manifests(text)
    return obj.pod


def refused(p: pb.Pod) -> Status | None:
    _, s = uf.UnsupportedFeatures().pre_filter(new_state(), PodInfo(p), [])
    assert s is not None
    return None if s.code == Code.SKIP else s


def test_plain_pods_and_harmless_volumes_are_skipped() -> None:
    assert refused(make_pod().name("p").container().obj()) is None
    p = pod_yaml(
        "  volumes:\n"
        "  - {name: a, emptyDir: {}}\n"
        "  - {name: b, configMap: {name: cm}}\n"
        "  - {name: c, secret: {secretName: s}}\n"
        "  - {name: d, hostPath: {path: /tmp}}\n"
        "  - {name: e, csi: {driver: x.example.com}}\n"
    )
    assert len(p.spec.volumes) == 5
    assert refused(p) is None


@pytest.mark.parametrize(
    ("spec", "reasons"),
    [
        (
            "  volumes: [{name: data, persistentVolumeClaim: {claimName: c}}]\n",
            ["spec.volumes[0].persistentVolumeClaim: " + uf._PVC_PLUGINS],
        ),
        (
            "  volumes:\n  - {name: a, emptyDir: {}}\n"
            "  - name: scratch\n    ephemeral:\n      volumeClaimTemplate:\n"
            "        spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n",
            ["spec.volumes[1].ephemeral: " + uf._PVC_PLUGINS + "; a generic ephemeral volume is a PersistentVolumeClaim"],
        ),
        (
            "  volumes: [{name: d, gcePersistentDisk: {pdName: disk}}, {name: e, iscsi: {targetPortal: t, iqn: q}}]\n",
            ["spec.volumes[0].gcePersistentDisk: " + uf._CONFLICT, "spec.volumes[1].iscsi: " + uf._CONFLICT],
        ),
        (
            "  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-template}]\n",
            ["spec.resourceClaims: " + uf._DRA],
        ),
    ],
)
def test_unsupported_fields_are_refused_by_name(spec: str, reasons: list[str]) -> None:
    s = refused(pod_yaml(spec))
    assert s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.reasons == reasons


def test_container_resource_claims_are_refused() -> None:
    p = make_pod().name("p").container().obj()
    p.spec.containers[0].resources.claims.add(name="gpu")
    s = refused(p)
    assert s is not None and s.reasons == ["spec.containers[0].resources.claims: " + uf._DRA]


def test_in_the_default_profile_beside_the_volume_plugins() -> None:
    names = [p.name for p in load_scheduler_config().profiles[0].plugins.multi_point.enabled]
    assert names.index("NodeResourcesFit") < names.index("UnsupportedFeatures") < names.index("PodTopologySpread")
    assert uf.UnsupportedFeatures().events_to_register() == []


CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
"""


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"{EXAMPLES} is absent")
def test_what_if_shows_the_refusal(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    result = what_if_files(cluster, EXAMPLES / "pods/storage/pv-pod.yaml")
    assert result.selected is None
    for outcome in result.nodes.values():
        assert not outcome.passed
        assert outcome.plugin == "UnsupportedFeatures"
        assert outcome.reasons == ["spec.volumes[0].persistentVolumeClaim: " + uf._PVC_PLUGINS]
