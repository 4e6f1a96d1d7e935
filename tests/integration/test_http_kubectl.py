"""The real kubectl against kse's HTTP API (skipped with a message where kubectl is not installed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import kubectl, kubectl_path

pytestmark = pytest.mark.integration

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: nginx
    resources:
      requests: {cpu: 100m}
"""


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: Path) -> Path:
    return apiserver.kubeconfig(tmp_path / "kubeconfig", "admin")


def test_api_resources_lists_every_kind(kubeconfig: Path):
    out = kubectl(kubeconfig, "api-resources", "--no-headers")
    names = {line.split()[0] for line in out.stdout.splitlines()}
    assert {"pods", "nodes", "leases", "events", "priorityclasses"} <= names
    assert "Warning" not in out.stderr and "couldn't get" not in out.stderr, out.stderr
    version = kubectl(kubeconfig, "version", "-o", "json", check=False)
    assert json.loads(version.stdout)["serverVersion"]["gitVersion"] == "v1.34.0-kse"


def test_get_create_describe_delete(kubeconfig: Path, tmp_path: Path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD_YAML)
    out = kubectl(kubeconfig, "create", "-f", str(manifest), "--validate=false")
    assert "pod/web created" in out.stdout
    out = kubectl(kubeconfig, "get", "pods")
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert lines[1].split()[:3] == ["web", "0/1", "Pending"]
    out = kubectl(kubeconfig, "get", "pods", "-o", "wide")
    assert out.stdout.splitlines()[0].split() == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"
    ]  # fmt: skip
    out = kubectl(kubeconfig, "get", "pods", "-A")
    assert out.stdout.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert out.stdout.splitlines()[1].split()[:2] == ["default", "web"]
    out = kubectl(kubeconfig, "get", "pod", "web", "-o", "json")
    pod = json.loads(out.stdout)
    assert pod["metadata"]["labels"] == {"app": "web"}
    event = tmp_path / "event.yaml"
    event.write_text(
        "apiVersion: v1\nkind: Event\nmetadata: {name: web.1, namespace: default}\n"
        f"involvedObject: {{kind: Pod, name: web, namespace: default, uid: {pod['metadata']['uid']}}}\n"
        "reason: FailedScheduling\nmessage: 0/0 nodes are available\ntype: Warning\n"
        "source: {component: default-scheduler}\ncount: 1\n"
    )
    kubectl(kubeconfig, "create", "-f", str(event))
    out = kubectl(kubeconfig, "describe", "pod", "web")
    assert "Name:" in out.stdout and "web" in out.stdout and "nginx" in out.stdout
    # describe finds the pod's events by involvedObject field selectors.
    events = out.stdout.split("Events:", 1)[1]
    assert "FailedScheduling" in events and "0/0 nodes are available" in events, out.stdout
    out = kubectl(kubeconfig, "delete", "pod", "web", "--wait=false")
    assert 'pod "web" deleted' in out.stdout
    out = kubectl(kubeconfig, "get", "pod", "web", check=False)
    assert out.returncode != 0 and 'pods "web" not found' in out.stderr


def test_apply_label_annotate_patch_wait_and_watch(kubeconfig: Path, tmp_path: Path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD_YAML)
    out = kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert "pod/web created" in out.stdout, out.stderr
    out = kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert "pod/web unchanged" in out.stdout
    manifest.write_text(POD_YAML.replace("{app: web}", "{app: web, tier: front}"))
    out = kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert "pod/web configured" in out.stdout
    kubectl(kubeconfig, "label", "pod", "web", "env=prod")
    kubectl(kubeconfig, "annotate", "pod", "web", "note=hi")
    kubectl(kubeconfig, "patch", "pod", "web", "--type=merge", "-p", '{"metadata":{"labels":{"m":"1"}}}')
    kubectl(
        kubeconfig,
        "patch",
        "pod",
        "web",
        "--type=json",
        "-p",
        '[{"op":"add","path":"/metadata/labels/j","value":"2"}]',
    )
    kubectl(
        kubeconfig, "patch", "pod", "web", "-p", '{"spec":{"tolerations":[{"key":"k","operator":"Exists"}]}}'
    )
    pod = json.loads(kubectl(kubeconfig, "get", "pod", "web", "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "front", "env": "prod", "m": "1", "j": "2"}
    assert pod["metadata"]["annotations"]["note"] == "hi"
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]
    # The patch replaces the list; DefaultTolerationSeconds appends its two again (as on a cluster).
    assert [t["key"] for t in pod["spec"]["tolerations"]] == [
        "k",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    out = kubectl(kubeconfig, "wait", "--for=jsonpath={.status.phase}=Pending", "pod/web", "--timeout=20s")
    assert "condition met" in out.stdout
    out = kubectl(kubeconfig, "get", "pods", "-l", "env=prod", "-o", "name")
    assert out.stdout.split() == ["pod/web"]
    # get -w: the current state, then each change as one more row under the one header.
    watch = subprocess.Popen(
        [kubectl_path(), "--kubeconfig", str(kubeconfig), "get", "pods", "-w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        lines = [watch.stdout.readline()]
        lines.append(watch.stdout.readline())
        kubectl(kubeconfig, "label", "pod", "web", "watched=yes")
        lines.append(watch.stdout.readline())
    finally:
        watch.terminate()
        watch.wait(10)
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], lines
    assert [line.split()[0] for line in lines[1:]] == ["web", "web"], lines


def test_nodes_taint_cordon_events(kubeconfig: Path, tmp_path: Path):
    node = tmp_path / "node.yaml"
    node.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-a, labels: {node-role.kubernetes.io/worker: ''}}\n"
        "status:\n  capacity: {cpu: '4'}\n  allocatable: {cpu: '4'}\n"
        "  conditions: [{type: Ready, status: 'True'}]\n  nodeInfo: {kubeletVersion: v1.34.0-kse}\n"
    )
    kubectl(kubeconfig, "create", "-f", str(node))
    kubectl(kubeconfig, "taint", "nodes", "node-a", "dedicated=gpu:NoSchedule")
    kubectl(kubeconfig, "cordon", "node-a")
    out = kubectl(kubeconfig, "get", "nodes")
    assert out.stdout.splitlines()[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert out.stdout.splitlines()[1].split()[:3] == ["node-a", "Ready,SchedulingDisabled", "worker"]
    got = json.loads(kubectl(kubeconfig, "get", "node", "node-a", "-o", "json").stdout)
    assert got["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    assert got["spec"]["unschedulable"] is True
    kubectl(kubeconfig, "uncordon", "node-a")
    kubectl(kubeconfig, "taint", "nodes", "node-a", "dedicated=gpu:NoSchedule-")
    got = json.loads(kubectl(kubeconfig, "get", "node", "node-a", "-o", "json").stdout)
    assert "taints" not in got["spec"] and not got["spec"].get("unschedulable")
    out = kubectl(kubeconfig, "describe", "node", "node-a")
    assert "node-a" in out.stdout
    ev = tmp_path / "event.yaml"
    ev.write_text(
        "apiVersion: v1\nkind: Event\nmetadata: {name: e1, namespace: default}\n"
        "involvedObject: {kind: Node, name: node-a}\nreason: Tested\nmessage: hello\ntype: Normal\n"
        "source: {component: test}\n"
    )
    kubectl(kubeconfig, "create", "-f", str(ev))
    out = kubectl(kubeconfig, "events")
    assert "Tested" in out.stdout and "hello" in out.stdout, out.stderr
    out = kubectl(kubeconfig, "get", "events")
    assert "Tested" in out.stdout


def test_server_side_apply_records_managers_and_reports_conflicts(kubeconfig: Path, tmp_path: Path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD_YAML)
    out = kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
    assert "pod/web serverside-applied" in out.stdout, out.stderr
    pod = json.loads(kubectl(kubeconfig, "get", "pod", "web", "-o", "json", "--show-managed-fields").stdout)
    managers = {(m["manager"], m["operation"]) for m in pod["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    # Another manager takes the label over; kubectl's apply of a different value conflicts.
    kubectl(kubeconfig, "label", "pod", "web", "app=other", "--overwrite")
    out = kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest), check=False)
    assert out.returncode != 0 and "conflict" in out.stderr.lower(), out.stderr
    out = kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    assert "serverside-applied" in out.stdout
    pod = json.loads(kubectl(kubeconfig, "get", "pod", "web", "-o", "json").stdout)
    assert pod["metadata"]["labels"]["app"] == "web"


def test_field_validation_through_kubectl(kubeconfig: Path, tmp_path: Path):
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(POD_YAML.replace("spec:\n", "spec:\n  nodeSelecter: {disk: ssd}\n"))
    out = kubectl(kubeconfig, "create", "-f", str(manifest), check=False)
    assert out.returncode != 0 and 'unknown field "spec.nodeSelecter"' in out.stderr, out.stderr
    out = kubectl(kubeconfig, "create", "--validate=warn", "-f", str(manifest))
    assert "pod/web created" in out.stdout
    assert 'Warning: unknown field "spec.nodeSelecter"' in out.stderr, out.stderr


def test_drain(kubeconfig: Path, tmp_path: Path):
    node = tmp_path / "node.yaml"
    node.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: node-d}\n")
    kubectl(kubeconfig, "create", "-f", str(node))
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD_YAML.replace("spec:\n", "spec:\n  nodeName: node-d\n"))
    kubectl(kubeconfig, "create", "-f", str(manifest))
    # --grace-period=0: no kubelet runs here to finish a graceful delete (the pod would stay Terminating).
    out = kubectl(
        kubeconfig, "drain", "node-d", "--force", "--ignore-daemonsets", "--grace-period=0", "--timeout=30s"
    )
    assert "node/node-d drained" in out.stdout, (out.stdout, out.stderr)
    assert kubectl(kubeconfig, "get", "pods", "-o", "name").stdout.strip() == ""
    got = json.loads(kubectl(kubeconfig, "get", "node", "node-d", "-o", "json").stdout)
    assert got["spec"]["unschedulable"] is True


def test_priority_levels_dump_through_kubectl_get_raw(kubeconfig: Path, apiserver: ApiServer, tmp_path: Path):
    out = kubectl(kubeconfig, "get", "--raw", "/debug/api_priority_and_fairness/dump_priority_levels").stdout
    lines = out.splitlines()
    assert lines[0].startswith("priorityLevel, nominalConcurrencyLimit, executingSeats, waitingRequests")
    levels = {line.split(",")[0] for line in lines[1:]}
    assert {"leader-election", "node-high", "workload-high", "global-default"} <= levels
    # /debug is the admin's: another identity is Forbidden, as upstream's RBAC has it.
    other = apiserver.kubeconfig(tmp_path / "workload-kubeconfig", "workload")
    denied = kubectl(
        other, "get", "--raw", "/debug/api_priority_and_fairness/dump_priority_levels", check=False
    )
    assert denied.returncode != 0 and "Forbidden" in denied.stderr
