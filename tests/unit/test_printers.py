"""`kse get` output: kubectl's tables, ages, and yaml/json/name forms."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from kse import printers
from kse.objects.kinds import BY_RESOURCE
from kse.printers import TableWriter, age, format_objects, human_duration, parse_time, render_table
from proto import kse_pb2 as pb

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def ts(delta: timedelta) -> str:
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_pod(name: str = "nginx", ns: str = "default", **status: object) -> pb.Pod:
    pod = pb.Pod()
    pod.metadata.name = name
    pod.metadata.namespace = ns
    pod.metadata.creation_timestamp = ts(timedelta(minutes=5))
    pod.spec.containers.add(name="nginx", image="nginx:1.14.2")
    for k, v in status.items():
        setattr(pod.status, k, v)
    return pod


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 25 * 60, "3h25m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (3 * 86400 + 5 * 3600, "3d5h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (2 * 365 * 86400, "2y"),
        (3 * 365 * 86400 + 10 * 86400, "3y10d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration_matches_kubectl(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


def test_parse_time_and_age() -> None:
    assert parse_time("") is None
    assert parse_time("not a time") is None
    assert parse_time("2026-05-01T11:59:00Z") == NOW - timedelta(minutes=1)
    assert parse_time("2026-05-01T11:59:00.123456Z") is not None
    assert age("2026-05-01T11:59:30Z", NOW) == "30s"
    assert age("", NOW) == "<unknown>"


def test_table_layout_is_kubectls_tabwriter() -> None:
    rows = [["a", "1/1", "Running"], ["longer-name", "0/1", "Pending"]]
    out = render_table(["NAME", "READY", "STATUS"], rows)
    assert out == (
        "NAME          READY   STATUS\n"
        "a             1/1     Running\n"
        "longer-name   0/1     Pending\n"
    )


def test_table_writer_keeps_widths_for_later_rows() -> None:
    w = TableWriter()
    first = w.render([["NAME", "STATUS"], ["pod-a", "Pending"]])
    later = w.render([["b", "Running"]])
    assert first.splitlines()[1].index("Pending") == later.index("Running")


def test_pods_table() -> None:
    running = make_pod("web", phase="Running", pod_ip="10.0.0.7")
    running.spec.node_name = "node-1"
    running.status.container_statuses.add(name="nginx", ready=True, restart_count=2)
    pending = make_pod("queued", phase="Pending")
    pending.status.nominated_node_name = "node-2"
    out = format_objects(BY_RESOURCE["pods"], [running, pending], "", now=NOW)
    assert out.splitlines() == [
        "NAME     READY   STATUS    RESTARTS   AGE",
        "web      1/1     Running   2          5m",
        "queued   0/1     Pending   0          5m",
    ]
    wide = format_objects(BY_RESOURCE["pods"], [running, pending], "wide", now=NOW).splitlines()
    assert wide[0] == "NAME     READY   STATUS    RESTARTS   AGE   IP         NODE     NOMINATED NODE"
    assert wide[1].split() == ["web", "1/1", "Running", "2", "5m", "10.0.0.7", "node-1", "<none>"]
    assert wide[2].split() == ["queued", "0/1", "Pending", "0", "5m", "<none>", "<none>", "node-2"]


def test_pod_status_reasons() -> None:
    pods = BY_RESOURCE["pods"]
    evicted = make_pod(phase="Failed", reason="Evicted")
    gated = make_pod(phase="Pending")
    gated.status.conditions.add(type="PodScheduled", status="False", reason="SchedulingGated")
    terminating = make_pod(phase="Running")
    terminating.metadata.deletion_timestamp = ts(timedelta(seconds=1))
    sidecar = make_pod(phase="Running")
    sidecar.spec.init_containers.add(name="proxy", restart_policy="Always")
    rows = format_objects(pods, [evicted, gated, terminating, sidecar], "", now=NOW).splitlines()[1:]
    assert [r.split()[2] for r in rows] == ["Evicted", "SchedulingGated", "Terminating", "Running"]
    assert rows[3].split()[1] == "0/2"


def test_all_namespaces_adds_namespace_column() -> None:
    out = format_objects(BY_RESOURCE["pods"], [make_pod(ns="kube-system")], "", now=NOW, with_namespace=True)
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert out.splitlines()[1].split()[:2] == ["kube-system", "nginx"]
    node = pb.Node()
    node.metadata.name = "n1"
    # Cluster-scoped kinds never get a NAMESPACE column.
    assert format_objects(BY_RESOURCE["nodes"], [node], "", now=NOW, with_namespace=True).startswith("NAME ")


def test_nodes_table() -> None:
    node = pb.Node()
    node.metadata.name = "node-1"
    node.metadata.creation_timestamp = ts(timedelta(days=3, hours=1))
    node.metadata.labels["node-role.kubernetes.io/control-plane"] = ""
    node.metadata.labels["node-role.kubernetes.io/worker"] = ""
    node.status.conditions.add(type="Ready", status="True")
    node.status.node_info.kubelet_version = "v1.31.0"
    node.status.addresses.add(type="InternalIP", address="10.1.0.1")
    node.spec.unschedulable = True
    bare = pb.Node()
    bare.metadata.name = "node-2"
    bare.status.conditions.add(type="Ready", status="Unknown")
    out = format_objects(BY_RESOURCE["nodes"], [node, bare], "", now=NOW).splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert out[1].split() == ["node-1", "Ready,SchedulingDisabled", "control-plane,worker", "3d1h", "v1.31.0"]
    assert out[2].split() == ["node-2", "NotReady", "<none>", "<unknown>"]
    wide = format_objects(BY_RESOURCE["nodes"], [node], "wide", now=NOW).splitlines()
    assert "INTERNAL-IP" in wide[0]
    assert wide[1].split()[5:] == ["10.1.0.1", "<none>", "<unknown>", "<unknown>", "<unknown>"]


def test_leases_events_priorityclasses_tables() -> None:
    lease = pb.Lease()
    lease.metadata.name = "kube-scheduler"
    lease.metadata.creation_timestamp = ts(timedelta(seconds=42))
    lease.spec.holder_identity = "scheduler-1_abc"
    out = format_objects(BY_RESOURCE["leases"], [lease], "", now=NOW).splitlines()
    assert out == ["NAME             HOLDER            AGE", "kube-scheduler   scheduler-1_abc   42s"]

    ev = pb.Event(type="Warning", reason="FailedScheduling", message="0/3 nodes are available.\n", count=4)
    ev.metadata.name = "nginx.17a"
    ev.last_timestamp = ts(timedelta(seconds=10))
    ev.involved_object.kind = "Pod"
    ev.involved_object.name = "nginx"
    ev.source.component = "default-scheduler"
    out = format_objects(BY_RESOURCE["events"], [ev], "", now=NOW).splitlines()
    assert out[0] == "LAST SEEN   TYPE      REASON             OBJECT      MESSAGE"
    assert out[1] == "10s         Warning   FailedScheduling   pod/nginx   0/3 nodes are available."
    wide = format_objects(BY_RESOURCE["events"], [ev], "wide", now=NOW).splitlines()
    assert wide[0].split() == [
        "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE",
        "FIRST", "SEEN", "COUNT", "NAME",
    ]

    pc = pb.PriorityClass(value=1000000, global_default=False)
    pc.metadata.name = "high-priority"
    out = format_objects(BY_RESOURCE["priorityclasses"], [pc], "", now=NOW).splitlines()
    assert out[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert out[1].split() == ["high-priority", "1000000", "false", "<unknown>", "PreemptLowerPriority"]


def test_yaml_single_object_and_list() -> None:
    pod = make_pod()
    pod.metadata.labels["app"] = "nginx"
    pod.spec.containers[0].ports.add(container_port=80)
    single = yaml.safe_load(format_objects(BY_RESOURCE["pods"], [pod], "yaml", single=True))
    assert single["apiVersion"] == "v1"
    assert single["kind"] == "Pod"
    assert single["metadata"]["labels"] == {"app": "nginx"}
    assert single["spec"]["containers"][0] == {
        "name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]
    }
    text = format_objects(BY_RESOURCE["pods"], [pod], "yaml")
    assert text.startswith("apiVersion: v1\nitems:\n")
    as_list = yaml.safe_load(text)
    assert as_list["kind"] == "List"
    assert as_list["items"][0]["metadata"]["name"] == "nginx"


def test_json_keeps_kubernetes_field_order() -> None:
    pc = pb.PriorityClass(value=7)
    pc.metadata.name = "p"
    text = format_objects(BY_RESOURCE["priorityclasses"], [pc], "json", single=True)
    data = json.loads(text)
    assert list(data)[:3] == ["apiVersion", "kind", "metadata"]
    assert data["apiVersion"] == "scheduling.k8s.io/v1"
    assert data["value"] == 7
    assert '\n    "kind": "PriorityClass"' in text


def test_name_output() -> None:
    lease = pb.Lease()
    lease.metadata.name = "x"
    assert format_objects(BY_RESOURCE["leases"], [lease], "name") == "lease.coordination.k8s.io/x\n"
    assert format_objects(BY_RESOURCE["pods"], [make_pod()], "name") == "pod/nginx\n"
    pcs = BY_RESOURCE["priorityclasses"]
    assert printers.resource_name(pcs, "hi") == "priorityclass.scheduling.k8s.io/hi"


def test_unknown_output_format_is_rejected() -> None:
    with pytest.raises(ValueError, match="allowed formats are: wide,yaml,json,name"):
        format_objects(BY_RESOURCE["pods"], [], "toml")


def test_cells_are_single_line() -> None:
    ev = pb.Event(message="line one\nline two\tand tab")
    ev.involved_object.kind = "Node"
    ev.involved_object.name = "n"
    out = format_objects(BY_RESOURCE["events"], [ev], "", now=NOW)
    assert out.splitlines()[1].endswith("line one line two and tab")


def test_64_bit_integers_print_as_numbers() -> None:
    pod = make_pod()
    pod.spec.termination_grace_period_seconds = 30
    pod.metadata.generation = 2
    data = yaml.safe_load(format_objects(BY_RESOURCE["pods"], [pod], "yaml", single=True))
    assert data["spec"]["terminationGracePeriodSeconds"] == 30
    assert data["metadata"]["generation"] == 2
