"""`kse what-if` over the real Kubernetes example pods of /work/shared/k8s-examples against a small
cluster built here: the JSON contract, and outcomes Kubernetes users expect (a nodeSelector
disktype=ssd fits only the ssd node; 1000Gi of memory fits nowhere; a toleration opens a tainted
node; a nodeName outside the cluster, or scheduling gates, reject every node)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main as kse_main
from scheduler.whatif import WhatIfError, format_table, what_if_files

EXAMPLES = Path(__file__).resolve().parents[4] / "shared" / "k8s-examples"

pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"{EXAMPLES} is absent")

CLUSTER = """\
apiVersion: v1
kind: Node
metadata:
  name: node-ssd
  labels: {disktype: ssd, kubernetes.io/hostname: node-ssd}
status:
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}   # allocatable defaults to capacity
---
apiVersion: v1
kind: Node
metadata:
  name: node-hdd
  labels: {disktype: hdd, kubernetes.io/hostname: node-hdd}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: node-tainted
  labels: {kubernetes.io/hostname: node-tainted}
spec:
  taints: [{key: example-key, value: x, effect: NoSchedule}]
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: busy, namespace: default}
spec:
  nodeName: node-hdd
  containers:
  - name: c
    image: busybox
    resources: {requests: {cpu: "4", memory: 8Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: pending, namespace: default}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "7"}}}]
"""

NODES = ["node-ssd", "node-hdd", "node-tainted"]
DEFAULT_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return path


def run_json(cluster: Path, pod: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    rc = kse_main(["what-if", "--cluster", str(cluster), "--pod", str(EXAMPLES / pod), "-o", "json", *extra])
    out = capsys.readouterr().out
    assert rc == 0
    doc: dict[str, Any] = json.loads(out)
    check_contract(doc)
    return doc


def check_contract(doc: dict[str, Any]) -> None:
    # postFilter only when no node passed Filter (the default profile has DefaultPreemption); a
    # pod held at PreEnqueue (scheduling gates) is never attempted, so nothing runs after Filter.
    keys = {"pod", "nodes", "feasible", "selected"}
    gated = any(n["filter"]["plugin"] == "SchedulingGates" for n in doc["nodes"].values())
    assert set(doc) == (keys if doc["feasible"] or gated else keys | {"postFilter"})
    if "postFilter" in doc:
        pf = doc["postFilter"]
        assert set(pf) == {"plugin", "nominatedNode", "victims", "candidates"}
        assert pf["plugin"] == "DefaultPreemption"
        assert pf["nominatedNode"] is None or pf["nominatedNode"] in pf["candidates"]
        assert pf["victims"] == sorted(pf["victims"])
        assert (pf["victims"] == []) == (pf["nominatedNode"] is None)
        for victims in pf["candidates"].values():
            assert victims and victims == sorted(victims)
    assert list(doc["nodes"]) == NODES  # every node, in cluster order
    for name, n in doc["nodes"].items():
        assert set(n) == {"filter", "scores", "total"}
        f = n["filter"]
        assert set(f) == {"pass", "plugin", "reasons"}
        assert isinstance(f["pass"], bool) and isinstance(f["reasons"], list)
        if f["pass"]:
            assert f["plugin"] is None and f["reasons"] == []
            assert all(0 <= s <= 100 for s in n["scores"].values())
            assert n["total"] == sum(s * DEFAULT_WEIGHTS[p] for p, s in n["scores"].items())
        else:
            assert isinstance(f["plugin"], str) and f["reasons"]
            assert n["scores"] == {} and n["total"] == 0
        assert (name in doc["feasible"]) == f["pass"]
    assert doc["selected"] is None or doc["selected"] in doc["feasible"]
    if doc["feasible"]:
        best = max(doc["nodes"][n]["total"] for n in doc["feasible"])
        assert doc["nodes"][doc["selected"]]["total"] == best


def test_node_selector_fits_only_the_ssd_node(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(cluster, "pods/pod-nginx.yaml", capsys=capsys)
    assert doc["pod"] == "default/nginx"
    assert doc["feasible"] == ["node-ssd"] and doc["selected"] == "node-ssd"
    assert doc["nodes"]["node-hdd"]["filter"] == {
        "pass": False,
        "plugin": "NodeAffinity",
        "reasons": ["node(s) didn't match Pod's node affinity/selector"],
    }
    # the taint is checked before the selector (filter order of the default profile)
    assert doc["nodes"]["node-tainted"]["filter"]["plugin"] == "TaintToleration"
    scores = doc["nodes"]["node-ssd"]["scores"]
    assert {"TaintToleration", "NodeResourcesFit", "ImageLocality"} <= set(scores)
    assert "NodeAffinity" not in scores  # PreScore skipped it: no preferred terms


def test_1000gi_of_memory_fits_nowhere(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(cluster, "pods/resource/memory-request-limit-3.yaml", capsys=capsys)
    assert doc["pod"] == "mem-example/memory-demo-3"
    assert doc["feasible"] == [] and doc["selected"] is None
    for name in ("node-ssd", "node-hdd"):
        assert doc["nodes"][name]["filter"] == {
            "pass": False,
            "plugin": "NodeResourcesFit",
            "reasons": ["Insufficient memory"],
        }


def test_toleration_lets_the_pod_onto_the_tainted_node(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = run_json(cluster, "pods/pod-with-toleration.yaml", capsys=capsys)
    assert doc["nodes"]["node-tainted"]["filter"]["pass"] is True
    assert doc["feasible"] == NODES
    # without the toleration the same pod is kept off it
    plain = run_json(cluster, "pods/pod-nginx-required-affinity.yaml", capsys=capsys)
    assert plain["nodes"]["node-tainted"]["filter"]["plugin"] == "TaintToleration"


def test_bound_pods_count_and_pending_pods_do_not(cluster: Path) -> None:
    # busy (4 CPU) is bound to node-hdd; "pending" has no node and is ignored
    result = what_if_files(cluster, EXAMPLES / "pods/resource/cpu-request-limit.yaml")
    fit = {n: o.scores.get("NodeResourcesFit") for n, o in result.nodes.items() if o.passed}
    assert fit["node-ssd"] is not None and fit["node-hdd"] is not None
    assert fit["node-ssd"] > fit["node-hdd"]  # LeastAllocated: the busy node scores lower


def test_node_name_outside_the_cluster_rejects_every_node(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = run_json(cluster, "pods/pod-nginx-specific-node.yaml", capsys=capsys)
    assert doc["feasible"] == [] and doc["selected"] is None
    for n in doc["nodes"].values():
        assert n["filter"] == {
            "pass": False,
            "plugin": "NodeName",
            "reasons": ["node(s) didn't satisfy plugin(s) [NodeName]"],
        }


def test_scheduling_gates_hold_the_pod(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(cluster, "pods/pod-with-scheduling-gates.yaml", capsys=capsys)
    assert doc["feasible"] == []
    for n in doc["nodes"].values():
        assert n["filter"]["plugin"] == "SchedulingGates"
        assert n["filter"]["reasons"] == ["waiting for scheduling gates: [example.com/foo example.com/bar]"]


@pytest.mark.parametrize(
    "pod",
    sorted(str(p.relative_to(EXAMPLES)) for p in (EXAMPLES / "pods").rglob("*.yaml"))
    if EXAMPLES.is_dir()
    else [],
)
def test_every_example_pod_runs(cluster: Path, pod: str) -> None:
    result = what_if_files(cluster, EXAMPLES / pod)
    check_contract(result.to_json())
    assert format_table(result).startswith(f"pod {result.pod} (profile default-scheduler)")


def test_config_changes_the_scores(cluster: Path) -> None:
    pod = EXAMPLES / "pods/resource/cpu-request-limit.yaml"
    least = what_if_files(cluster, pod)
    most = what_if_files(cluster, pod, EXAMPLES / "scheduler-config/resource-bin-packing-1.yaml")
    # MostAllocated prefers the busy node, LeastAllocated the empty one
    assert (
        least.nodes["node-hdd"].scores["NodeResourcesFit"]
        < least.nodes["node-ssd"].scores["NodeResourcesFit"]
    )
    assert (
        most.nodes["node-hdd"].scores["NodeResourcesFit"] > most.nodes["node-ssd"].scores["NodeResourcesFit"]
    )


def test_table_output(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = kse_main(["what-if", "--cluster", str(cluster), "--pod", str(EXAMPLES / "pods/pod-nginx.yaml")])
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "pod default/nginx (profile default-scheduler)"
    header = lines[1].split()
    assert header[:2] == ["NODE", "FILTER"] and header[-1] == "TOTAL"
    assert "TaintToleration" in lines[1]
    selected = [line for line in lines if line.startswith("*")]
    assert len(selected) == 1 and "node-ssd" in selected[0] and "PASS" in selected[0]
    assert any("node-hdd" in line and "NodeAffinity" in line for line in lines)
    assert lines[-1] == "selected: node-ssd (1/3 nodes feasible)"


def test_table_when_nothing_fits(cluster: Path) -> None:
    result = what_if_files(cluster, EXAMPLES / "pods/resource/memory-request-limit-3.yaml")
    assert format_table(result).splitlines()[-2:] == [
        "no node fits: 0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient memory.",
        "DefaultPreemption: preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
    ]


# ------------------------------------------------------------------------------------ errors


def test_unreadable_cluster_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = kse_main(
        ["what-if", "--cluster", str(tmp_path / "nope.yaml"), "--pod", str(EXAMPLES / "pods/pod-nginx.yaml")]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("kse what-if: error: cannot read cluster file") and "Traceback" not in err


def test_no_pod_in_the_pod_file(cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes_only = tmp_path / "nodes.yaml"
    nodes_only.write_text(CLUSTER.split("---\napiVersion: v1\nkind: Pod")[0])
    rc = kse_main(["what-if", "--cluster", str(cluster), "--pod", str(nodes_only)])
    assert rc == 1
    assert "no Pod in" in capsys.readouterr().err


def test_invalid_manifest(cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"
        "spec: {containers: [{ports: [{containerPort: abc}]}]}\n"
    )
    rc = kse_main(["what-if", "--cluster", str(cluster), "--pod", str(bad)])
    err = capsys.readouterr().err
    assert rc == 1 and "invalid pod file" in err and "Traceback" not in err


def test_invalid_config(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = EXAMPLES / "scheduler-config/scheduling-config-2.yaml"  # names plugins kse does not have
    rc = kse_main(
        [
            "what-if",
            "--cluster",
            str(cluster),
            "--pod",
            str(EXAMPLES / "pods/pod-nginx.yaml"),
            "--config",
            str(config),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert "invalid scheduler configuration" in err and 'plugin "MyCustomPluginA" does not exist' in err


def test_what_if_error_codes(cluster: Path) -> None:
    with pytest.raises(WhatIfError) as e:
        what_if_files(cluster, "/nonexistent/pod.yaml")
    assert e.value.exit_code == 1


def test_what_if_says_it_does_not_call_extenders(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from scheduler.framework.nodeinfo import Snapshot
    from scheduler.whatif import load_framework

    config = tmp_path / "ksc.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "extenders:\n- urlPrefix: http://127.0.0.1:1\n  filterVerb: filter\n"
    )
    load_framework(config, Snapshot())
    assert "extender(s) are not called" in caplog.text


# ------------------------------------------------------------------------------------ preemption

PREEMPTION_CLUSTER = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-never}
value: 1000
preemptionPolicy: Never
---
apiVersion: v1
kind: Namespace
metadata: {name: apps}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db, namespace: apps}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: db}}
status: {disruptionsAllowed: 0}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {capacity: {cpu: "2", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
status: {capacity: {cpu: "2", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: apps, labels: {app: db}}
spec:
  nodeName: node-a
  priorityClassName: low
  containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: apps, labels: {app: web}}
spec:
  nodeName: node-b
  priorityClassName: low
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: apps, labels: {app: web}}
spec:
  nodeName: node-b
  priorityClassName: low
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def preemptor(tmp_path: Path, priority_class: str) -> Path:
    path = tmp_path / f"{priority_class}.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: urgent, namespace: apps}\n"
        f"spec:\n  priorityClassName: {priority_class}\n"
        '  containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]\n'
    )
    return path


def test_post_filter_reports_the_preemption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(PREEMPTION_CLUSTER)
    assert (
        kse_main(
            ["what-if", "--cluster", str(cluster), "--pod", str(preemptor(tmp_path, "high")), "-o", "json"]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] == [] and doc["selected"] is None
    # node-a's only victim is guarded by a PDB with no disruption left: node-b, with two
    # victims but no violation, is chosen (fewest PDB violations comes first).
    assert doc["postFilter"] == {
        "plugin": "DefaultPreemption",
        "nominatedNode": "node-b",
        "victims": ["apps/web-0", "apps/web-1"],
        "candidates": {"node-b": ["apps/web-0", "apps/web-1"], "node-a": ["apps/db-0"]},
    }
    table = format_table(what_if_files(cluster, preemptor(tmp_path, "high")))
    assert "DefaultPreemption: would nominate node-b, preempting apps/web-0, apps/web-1" in table
    assert "node-a      1         apps/db-0" in table


def test_post_filter_preemption_policy_never(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(PREEMPTION_CLUSTER)
    result = what_if_files(cluster, preemptor(tmp_path, "high-never"))
    assert result.post_filter is not None
    assert result.post_filter.to_json() == {
        "plugin": "DefaultPreemption",
        "nominatedNode": None,
        "victims": [],
        "candidates": {},
    }
    assert format_table(result).splitlines()[-1] == (
        "DefaultPreemption: preemption: not eligible due to preemptionPolicy=Never."
    )


def test_unknown_priority_class_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(PREEMPTION_CLUSTER)
    rc = kse_main(["what-if", "--cluster", str(cluster), "--pod", str(preemptor(tmp_path, "nope"))])
    assert rc == 1
    assert capsys.readouterr().err == (
        'kse what-if: error: pod apps/urgent: spec.priorityClassName: Not found: "nope": no PriorityClass '
        "with name nope in the cluster file\n"
    )
