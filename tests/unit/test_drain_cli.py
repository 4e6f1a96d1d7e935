"""`kse drain` / `kse what-if --drain` without a cluster: flags, offline plans, kubectl's lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cli.drain_cmd import ProgressPrinter
from cli.main import main
from cli.resource_io import Out
from kse.drain import drainer as d

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {capacity: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {capacity: {cpu: "1", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]
spec:
  nodeName: n1
  containers: [{name: c, image: nginx, resources: {requests: {cpu: "2"}}}]
status: {phase: Running, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bare}
spec:
  nodeName: n1
  containers: [{name: c, image: nginx}]
status: {phase: Running}
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return path


def test_what_if_drain_offline(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["what-if", "--drain", "n1", "--cluster", str(cluster), "--force", "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    pods = {p["pod"]: p for p in plan["pods"]}
    assert pods["default/bare"]["action"] == "evict" and pods["default/bare"]["replacement"] is None
    assert pods["default/web-1"]["replacement"] == {
        "node": None,
        "message": "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling..",
    }
    assert plan["summary"]["completes"] is True
    assert main(["what-if", "--drain", "n1", "--cluster", str(cluster)]) == 0
    table = capsys.readouterr().out
    assert "blocked: cannot delete Pods that declare no controller (use --force to override)" in table
    assert table.rstrip().endswith("the drain does not complete")


def test_what_if_drain_names_an_unknown_node(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["what-if", "--drain", "nope", "--cluster", str(cluster)]) == 1
    assert capsys.readouterr().err == 'kse what-if: error: nodes "nope" not found\n'


def test_what_if_without_drain_still_needs_cluster_and_pod(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["what-if", "--cluster", "x.yaml"])
    assert e.value.code == 2
    assert "the following arguments are required: --pod" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--pod-selector", "app in (a", "n1"],
            "error: --pod-selector=<pod_selector> must be a valid label selector",
        ),
        (["--plan", "--report"], "error: --plan and --report cannot be combined"),
    ],
)
def test_bad_drain_flags_are_refused_before_connecting(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["drain", "--config", str(tmp_path / "absent.json"), *argv]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == message


def test_progress_lines_are_kubectls() -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    printer = ProgressPrinter(Out(stdout, stderr), "none")
    for p in (
        d.Progress(d.CORDONED, node="n1", message="cordoned"),
        d.Progress(d.WARNING, node="n1", message="ignoring DaemonSet-managed Pods: default/ds-1"),
        d.Progress(d.EVICTING, namespace="default", name="web-1"),
        d.Progress(
            d.RETRY, namespace="default", name="web-1", message="No."
        ),
        d.Progress(d.EVICTED, namespace="default", name="web-1"),
        d.Progress(d.PENDING, node="n1", message="boom", pods=("web-2",)),
        d.Progress(d.DRAINED, node="n1"),
    ):
        printer(p)
    assert stdout.getvalue().splitlines() == [
        "node/n1 cordoned",
        "evicting pod default/web-1",
        "pod/web-1 evicted",
        "node/n1 drained",
    ]
    assert stderr.getvalue().splitlines() == [
        "Warning: ignoring DaemonSet-managed Pods: default/ds-1",
        'error when evicting pods/"web-1" -n "default" (will retry after 5s): No.',
        'There are pending pods in node "n1" when an error occurred: boom',
        "pod/web-2",
    ]
    server = io.StringIO()
    ProgressPrinter(Out(server, stderr), "server")(
        d.Progress(d.CORDONED, node="n1", message="already cordoned")
    )
    assert server.getvalue() == "node/n1 already cordoned\n"
