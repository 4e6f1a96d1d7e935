"""Every real Kubernetes example in shared/k8s-examples loads, or is refused by kind, unchanged.

The files are the Kubernetes documentation's own manifests (see SOURCES.md there): KYAML, block
YAML, JSON, multi-document streams, unquoted integer quantities, missing final newlines. Each
must either load (Pod, Node, PriorityClass) or be refused with a ManifestError naming its
unsupported kind (Deployment, Service, DaemonSet). Pods must survive a round trip: the modelled
fields come back from `to_dict` in the same camelCase shape as the file has them.
KubeSchedulerConfiguration files (scheduler-config/) belong to the scheduler's config loader.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kse.objects.kinds import BY_KIND
from kse.objects.manifest import ManifestError, load_manifests, to_dict, to_json, to_yaml
from kse.objects.podresources import pod_requests

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "k8s-examples"
EXCLUDED_DIRS = {"scheduler-config"}

if not EXAMPLES.is_dir():
    pytest.skip(
        f"shared Kubernetes examples not found at {EXAMPLES} (CI lays shared/ beside the repository)",
        allow_module_level=True,
    )


def example_files() -> list[Path]:
    return sorted(
        p
        for p in EXAMPLES.rglob("*")
        if p.is_file() and p.name != "SOURCES.md" and p.relative_to(EXAMPLES).parts[0] not in EXCLUDED_DIRS
    )


FILES = example_files()


def rel(path: Path) -> str:
    return path.relative_to(EXAMPLES).as_posix()


def raw_documents(path: Path) -> list[dict[str, Any]]:
    """The file read independently of kse (PyYAML; JSON is YAML), empty documents dropped."""
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def test_examples_are_there() -> None:
    assert len(FILES) >= 40
    assert {p.suffix for p in FILES} <= {".yaml", ".json"}


def test_sources_md_describes_every_file() -> None:
    listed = set(
        re.findall(r"^\| `([^`]+)` \|", (EXAMPLES / "SOURCES.md").read_text(encoding="utf-8"), re.MULTILINE)
    )
    assert {rel(p) for p in FILES} <= listed


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_loads_or_is_refused_by_kind(path: Path) -> None:
    docs = raw_documents(path)
    kinds = [(d.get("kind"), d.get("apiVersion")) for d in docs]
    text = path.read_text(encoding="utf-8")  # used as it is, unchanged
    unsupported = [(i, k) for i, k in enumerate(kinds, start=1) if k[0] not in BY_KIND]
    if not unsupported:
        objs = load_manifests(text, source=rel(path))
        assert [BY_KIND[k].field for k, _ in kinds] == [o.WhichOneof("kind") for o in objs]
        for obj, (kind, api_version) in zip(objs, kinds, strict=True):
            assert to_dict(obj)["kind"] == kind and to_dict(obj)["apiVersion"] == api_version
        return
    with pytest.raises(ManifestError) as info:
        load_manifests(text, source=rel(path))
    err = info.value
    index, (kind, api_version) = unsupported[0]
    assert kind in {"Deployment", "Service", "DaemonSet"}
    assert (err.kind, err.api_version) == (kind, api_version)
    message = str(err)
    assert message.startswith(f"{rel(path)}: document {index}: ")
    assert f'kind "{kind}" (apiVersion "{api_version}") is not supported' in message
    assert (
        "supported kinds: Pod (v1), Node (v1)" in message
        and "PriorityClass (scheduling.k8s.io/v1)" in message
    )


def _strings(mapping: dict[str, Any] | None) -> dict[str, str]:
    """A string map as Kubernetes stores it: unquoted YAML numbers read as their text."""
    return {str(k): v if isinstance(v, str) else str(v) for k, v in (mapping or {}).items()}


def modelled_subset(pod: dict[str, Any]) -> dict[str, Any]:
    """The fields kse models, in the manifest's camelCase shape."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    containers = []
    for c in spec.get("containers") or []:
        kept: dict[str, Any] = {k: c[k] for k in ("name", "image", "ports") if k in c}
        if c.get("resources"):
            kept["resources"] = {k: _strings(v) for k, v in c["resources"].items() if v}
        containers.append(kept)
    out: dict[str, Any] = {
        "name": meta.get("name"),
        "labels": _strings(meta.get("labels")),
        "containers": containers,
    }
    for key in (
        "affinity",
        "tolerations",
        "topologySpreadConstraints",
        "schedulingGates",
        "priorityClassName",
        "nodeName",
    ):
        if spec.get(key):
            out[key] = spec[key]
    if spec.get("nodeSelector"):
        out["nodeSelector"] = _strings(spec["nodeSelector"])
    return out


POD_FILES = [p for p in FILES if all(d.get("kind") == "Pod" for d in raw_documents(p))]


@pytest.mark.parametrize("path", POD_FILES, ids=rel)
def test_pod_round_trip_keeps_the_modelled_fields(path: Path) -> None:
    raw = raw_documents(path)
    objs = load_manifests(path.read_text(encoding="utf-8"), source=rel(path))
    for doc, obj in zip(raw, objs, strict=True):
        assert modelled_subset(to_dict(obj)) == modelled_subset(doc)
        # And through our own writers: the object comes back identical.
        assert load_manifests(to_yaml(obj)) == [obj]
        assert load_manifests(to_json(obj)) == [obj]
        pod_requests(obj.pod)  # every quantity in the docs parses


def load_one(relative: str) -> Any:
    path = EXAMPLES / relative
    (obj,) = load_manifests(path.read_text(encoding="utf-8"), source=relative)
    return getattr(obj, obj.WhichOneof("kind"))


def test_specific_features_of_the_examples() -> None:
    # Unquoted integer quantity (KYAML).
    dongle = load_one("pods/resource/extended-resource-pod.yaml")
    assert dongle.spec.containers[0].resources.requests["example.com/dongle"] == "3"
    # A comment inside KYAML flow style.
    assert load_one("pods/pod-nginx-specific-node.yaml").spec.node_name == "foo-node"
    # No trailing newline, negative value.
    low = load_one("priorityclass/low-priority-class.yaml")
    assert low.value == -1000 and low.description.startswith("Negative priority")
    # JSON document block; the node's name looks like an IP.
    node = load_one("doc-blocks/nodes-1.json")
    assert node.metadata.name == "10.240.79.157" and dict(node.metadata.labels) == {
        "name": "my-first-k8s-node"
    }
    # scheduler_perf node templates: generateName, capacity, conditions, taints.
    perf = load_one("scheduler-perf-templates/node-default.yaml")
    assert perf.metadata.generate_name == "scheduler-perf-"
    assert dict(perf.status.capacity) == {"pods": "110", "cpu": "4", "memory": "32Gi"}
    assert perf.status.conditions[0].type == "Ready" and perf.status.conditions[0].status == "True"
    tainted = load_one("scheduler-perf-templates/node-with-taint.yaml")
    assert (tainted.spec.taints[0].key, tainted.spec.taints[0].effect) == ("foo", "NoSchedule")
    # Numeric toleration (operator Gt) keeps its string value.
    tol = load_one("pods/pod-with-numeric-toleration.yaml").spec.tolerations[0]
    assert (tol.operator, tol.value, tol.effect) == ("Gt", "900", "NoSchedule")
    # Sidecar: an init container with restartPolicy Always.
    multi = load_one("pods/multi-container/resources.yaml")
    assert [c.restart_policy for c in multi.spec.init_containers] == ["", "Always"]
    # Pod-level resources.
    level = load_one("pods/resource/pod-level-resources.yaml")
    assert dict(level.spec.resources.requests) == {"cpu": "1", "memory": "100Mi"}
    # Fields kse does not model are dropped without complaint.
    probe = load_one("pods/probe/tcp-liveness-readiness.yaml")
    assert probe.spec.containers[0].ports[0].container_port == 8080
