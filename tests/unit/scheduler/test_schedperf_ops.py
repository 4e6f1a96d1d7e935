"""Each scheduler_perf op, run by kse.schedperf.executor against the in-process scheduler
(scheduler.bench.perf_inprocess: the real queue, framework and cache; no API server)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import kse.schedperf.executor as executor_module
from kse.schedperf.config import parse_config
from kse.schedperf.executor import Executor, WorkloadError, WorkloadRun
from kse.schedperf.runner import result_json, run_workloads
from scheduler.bench.perf_inprocess import InProcessCluster, registered_plugins

POD = """\
apiVersion: v1
kind: Pod
metadata:
  generateName: p-
  labels: {app: "{{ .color }}", slot: "s{{ Mod .Index 2 }}"}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {requests: {cpu: 100m, memory: 100Mi}}
"""

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: n-{{ AddInt .Index 10 }}
  labels: {rack: "r{{ DivideInt .Index 2 }}"}
status:
  capacity: {cpu: "4", memory: 32Gi, pods: "110"}
"""

GATED = """\
apiVersion: v1
kind: Pod
metadata: {generateName: gated-}
spec:
  schedulingGates: [{name: example.com/hold}]
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
"""

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {generateName: svc-}
spec:
  selector: {app: x}
  ports: [{port: 80}]
"""

NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  labels: {team: perf}
"""


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "WAIT_TIMEOUT", 30.0)  # a stuck wait fails fast


def write_tree(tmp_path: Path) -> Path:
    t = tmp_path / "templates"
    t.mkdir()
    for name, text in {"pod.yaml": POD, "node.yaml": NODE, "gated.yaml": GATED, "svc.yaml": SERVICE,
                       "ns.yaml": NAMESPACE}.items():  # fmt: skip
        (t / name).write_text(text)
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    return cfg


async def run(
    tmp_path: Path, template: str, params: str = "{}"
) -> tuple[Executor, WorkloadRun, InProcessCluster]:
    cfg = write_tree(tmp_path)
    ops = textwrap.indent(textwrap.dedent(template), "  ")
    text = f"- name: T\n  workloadTemplate:\n{ops}  workloads:\n  - name: w\n    params: {params}\n"
    (tc,) = parse_config(text, cfg, "t.yaml")
    async with InProcessCluster() as cluster:
        ex = Executor(cluster, tc, tc.workloads[0])
        result = await ex.run()
    return ex, result, cluster


def nodes_of(cluster: InProcessCluster) -> dict[str, dict[str, str]]:
    out = {}
    for name in cluster.binder.cache.node_names():
        info = cluster.binder.cache.node_info(name)
        assert info is not None and info.node is not None
        out[name] = dict(info.node.metadata.labels)
    return out


async def test_create_nodes_default_and_hostname(tmp_path: Path) -> None:
    _, result, cluster = await run(
        tmp_path,
        """\
        - opcode: createNodes
          count: 3
        - opcode: createPods
          count: 3
          collectMetrics: true
        """,
    )
    nodes = nodes_of(cluster)
    assert sorted(nodes) == ["node-0-00000", "node-0-00001", "node-0-00002"]
    assert all(labels["kubernetes.io/hostname"] == name for name, labels in nodes.items())
    info = cluster.binder.cache.node_info("node-0-00000")
    assert info is not None and info.node is not None
    assert dict(info.node.status.allocatable) == {"cpu": "4", "memory": "32Gi", "pods": "110"}
    assert cluster.scheduled_count("namespace-1", {}) == 3  # pods without a namespace: namespace-<op>
    (c,) = result.collections
    assert c.scheduled == 3 and c.attempt_ms["p50"] is not None


async def test_node_template_with_index_and_label_strategy(tmp_path: Path) -> None:
    _, _, cluster = await run(
        tmp_path,
        """\
        - opcode: createNodes
          count: 4
          nodeTemplatePath: ../templates/node.yaml
          labelNodePrepareStrategy: {labelKey: zone, labelValues: [a, b, c]}
        - opcode: createPods
          count: 1
          collectMetrics: true
        """,
    )
    nodes = nodes_of(cluster)
    assert sorted(nodes) == ["n-10", "n-11", "n-12", "n-13"]
    assert [nodes[f"n-{i}"]["zone"] for i in range(10, 14)] == ["a", "b", "c", "a"]  # round-robin
    assert [nodes[f"n-{i}"]["rack"] for i in range(10, 14)] == ["r0", "r0", "r1", "r1"]
    info = cluster.binder.cache.node_info("n-10")
    assert info is not None and info.node is not None
    assert dict(info.node.status.allocatable) == {"cpu": "4", "memory": "32Gi", "pods": "110"}


async def test_unique_label_and_allocatable_strategies(tmp_path: Path) -> None:
    _, _, cluster = await run(
        tmp_path,
        """\
        - opcode: createNodes
          count: 3
          uniqueNodeLabelStrategy: {labelKey: uid}
        - opcode: createNodes
          count: 1
          nodeAllocatableStrategy: {nodeAllocatable: {cpu: "2"}}
        - opcode: createPods
          count: 1
          collectMetrics: true
        """,
    )
    nodes = nodes_of(cluster)
    uids = {labels["uid"] for name, labels in nodes.items() if name.startswith("node-0-")}
    assert len(uids) == 3
    info = cluster.binder.cache.node_info("node-1-00003")
    assert info is not None and info.node is not None
    assert info.node.status.allocatable["cpu"] == "2"


async def test_pods_from_template_with_params_namespaces_and_pod_sets(tmp_path: Path) -> None:
    _, _, cluster = await run(
        tmp_path,
        """\
        - opcode: createNodes
          count: 2
        - opcode: createNamespaces
          prefix: sched
          count: 2
          namespaceTemplatePath: ../templates/ns.yaml
        - opcode: createPods
          countParam: $n
          namespace: sched-1
          podTemplatePath: ../templates/pod.yaml
          templateParams: {color: $color}
          collectMetrics: true
        - opcode: createPodSets
          count: 2
          namespacePrefix: sched
          createPodsOp: {opcode: createPods, count: 1}
        """,
        "{n: 4, color: blue}",
    )
    pods = cluster.pods["sched-1"]
    assert len(pods) == 5  # 4 + one of the pod sets
    labelled = [p for p in pods.values() if p.metadata.generate_name == "p-"]
    assert sorted(p.metadata.labels["slot"] for p in labelled) == ["s0", "s0", "s1", "s1"]
    assert {p.metadata.labels["app"] for p in labelled} == {"blue"}
    assert cluster.scheduled_count("sched-0", {}) == 1


async def test_skip_wait_barrier_attempted_delete_and_sleep(tmp_path: Path) -> None:
    ex, _, cluster = await run(
        tmp_path,
        """\
        - opcode: createNodes
          count: 1
        - opcode: createPods
          count: 3
          podTemplatePath: ../templates/gated.yaml
          skipWaitToCompletion: true
        - opcode: barrier
          stageRequirement: Attempted
        - opcode: createPods
          count: 2
          skipWaitToCompletion: true
        - opcode: barrier
          namespaces: [namespace-3]
        - opcode: deletePods
          namespace: namespace-3
        - opcode: sleep
          duration: 10ms
        - opcode: startCollectingMetrics
          namespaces: [namespace-8]
          name: part
        - opcode: createPods
          count: 2
        - opcode: stopCollectingMetrics
        """,
    )
    assert cluster.attempted_count("namespace-1", {}) == 3
    assert cluster.scheduled_count("namespace-1", {}) == 0
    assert cluster.pods["namespace-3"] == {}  # deleted
    assert cluster.scheduled_count("namespace-8", {}) == 2
    (c,) = ex.run_result.collections
    assert c.name == "T/w/part" and c.scheduled == 2


async def test_barrier_on_an_unknown_namespace_fails(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="op 2 \\(barrier\\): unknown namespace nowhere"):
        await run(
            tmp_path,
            """\
            - opcode: createNodes
              count: 1
            - opcode: createPods
              count: 1
              collectMetrics: true
            - opcode: barrier
              namespaces: [nowhere]
            """,
        )


async def test_create_any_and_churn(tmp_path: Path) -> None:
    _, _, cluster = await run(
        tmp_path,
        """\
        - opcode: createAny
          templatePath: ../templates/node.yaml
          count: 2
        - opcode: createAny
          templatePath: ../templates/svc.yaml
          namespace: services
        - opcode: churn
          mode: create
          number: 3
          intervalMilliseconds: 1
          templatePaths: [../templates/svc.yaml]
        - opcode: churn
          mode: recreate
          number: 2
          intervalMilliseconds: 1
          templatePaths: [../templates/node.yaml]
        - opcode: createPods
          count: 2
          collectMetrics: true
        - opcode: sleep
          duration: 200ms
        """,
    )
    assert {"n-10", "n-11"} <= set(nodes_of(cluster))
    services = [k for k in cluster.others if k[0] == "Service"]
    assert ("Service", "services") in {(k[0], k[1]) for k in services}
    churned = [k for k in services if k[1] == "namespace-2"]
    assert len(churned) == 3  # create mode stops at `number`


async def test_create_any_namespace_scope_errors(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"namespace 'x' set for .*node.yaml, but Node is cluster-scoped"):
        await run(
            tmp_path,
            """\
            - opcode: createAny
              templatePath: ../templates/node.yaml
              namespace: x
            - opcode: createPods
              count: 1
              collectMetrics: true
            """,
        )


async def test_steady_state_replaces_scheduled_pods(tmp_path: Path) -> None:
    _, result, cluster = await run(
        tmp_path,
        """\
        - opcode: createNodes
          count: 2
        - opcode: createPods
          count: 3
          steadyState: true
          duration: 300ms
          collectMetrics: true
        """,
    )
    (c,) = result.collections
    assert c.scheduled > 3  # more pods got scheduled than were ever present at once
    assert len(cluster.pods["namespace-1"]) == 3


async def test_create_pod_groups_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="createPodGroups is refused: kse has no PodGroup kind"):
        await run(
            tmp_path,
            """\
            - opcode: createPodGroups
              templatePath: ../templates/pod.yaml
              namespace: x
              count: 1
            - opcode: createPods
              count: 1
              collectMetrics: true
            """,
        )


async def test_unused_param_fails_the_workload(tmp_path: Path) -> None:
    with pytest.raises(
        WorkloadError, match=r"the parameters \['spare'\] are defined on workload T/w, but unused"
    ):
        await run(
            tmp_path,
            """\
            - opcode: createNodes
              count: 1
            - opcode: createPods
              count: 1
              collectMetrics: true
            """,
            "{spare: 1}",
        )


async def test_bad_template_is_a_clear_workload_error(tmp_path: Path) -> None:
    cfg = write_tree(tmp_path)
    (tmp_path / "templates" / "bad.yaml").write_text(
        "kind: Pod\napiVersion: v1\nmetadata: {name: {{ Nope }}}\n"
    )
    text = textwrap.dedent(
        """\
        - name: T
          workloadTemplate:
          - opcode: createPods
            count: 1
            podTemplatePath: ../templates/bad.yaml
            collectMetrics: true
          workloads:
          - name: w
          - name: x
            featureGates: {SchedulerQueueingHints: false}
        """
    )
    (tc,) = parse_config(text, cfg, "t.yaml")
    results = await run_workloads([(tc, w) for w in tc.workloads], InProcessCluster, registered_plugins())
    assert all('function "Nope" not defined' in (r.error or "") for r in results)
    assert results[1].ignored_feature_gates == {"SchedulerQueueingHints": False}
    assert result_json(results[0])["error"]


async def test_skipped_when_a_plugin_is_missing(tmp_path: Path) -> None:
    cfg = write_tree(tmp_path)
    text = "- name: PreemptionBasic\n  workloadTemplate:\n"
    text += "  - {opcode: createPods, count: 1, collectMetrics: true}\n"
    text += "  workloads:\n  - {name: w, threshold: 5}\n"
    (tc,) = parse_config(text, cfg, "t.yaml")
    (r,) = await run_workloads([(tc, tc.workloads[0])], InProcessCluster, ["NodeAffinity"])
    assert r.skipped is not None and "DefaultPreemption" in r.skipped
    assert result_json(r) == {"name": "PreemptionBasic/w", "threshold": 5.0, "throughput": None,
                              "attempt_ms": None, "skipped": r.skipped}  # fmt: skip
