"""Manifests <-> proto: go-yaml's YAML 1.1, sigs.k8s.io/yaml's coercions, kubectl's shapes.

Also the timestamp helpers (kse.objects.timeutil), which serialise the same objects' times.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kse.objects import timeutil
from kse.objects.kinds import wrap
from kse.objects.manifest import (
    ManifestError,
    decode_manifests,
    go_format_float32,
    go_json_float,
    list_to_dict,
    load_manifest_files,
    load_manifests,
    to_dict,
    to_json,
    to_yaml,
    to_yaml_all,
)
from proto import kse_pb2 as pb

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  labels: {app: web}
spec:
  containers:
  - name: c
    image: nginx
"""


def one(text: str) -> pb.Object:
    objs = load_manifests(text)
    assert len(objs) == 1
    return objs[0]


def pod_with(fragment: str) -> pb.Pod:
    return one(POD + fragment).pod


# ---------------------------------------------------------------- loading


def test_basic_pod() -> None:
    obj = one(POD)
    assert obj.WhichOneof("kind") == "pod"
    assert obj.pod.metadata.name == "web"
    assert obj.pod.api_version == "v1" and obj.pod.kind == "Pod"
    assert dict(obj.pod.metadata.labels) == {"app": "web"}
    assert obj.pod.spec.containers[0].image == "nginx"


def test_multi_document_and_empty_documents() -> None:
    text = "---\n" + POD + "---\n# only a comment\n---\n" + POD.replace("name: web", "name: two") + "---\n"
    assert [o.pod.metadata.name for o in load_manifests(text)] == ["web", "two"]
    assert load_manifests("") == []
    assert load_manifests("---\n---\n") == []


def test_no_trailing_newline() -> None:
    assert one(POD.rstrip("\n")).pod.spec.containers[0].image == "nginx"


def test_kyaml_flow_style_with_trailing_commas_and_comments() -> None:
    text = """---
{
  apiVersion: "v1",
  kind: "Pod",
  metadata: {name: "k", labels: {env: "test",},},
  spec: {
    nodeName: "foo-node", # pinned
    containers: [{name: "c", image: "nginx", resources: {requests: {example.com/dongle: 3,},},}],
  },
}
"""
    pod = one(text).pod
    assert pod.spec.node_name == "foo-node"
    assert pod.spec.containers[0].resources.requests["example.com/dongle"] == "3"


def test_json_single_and_stream() -> None:
    doc = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "10.240.79.157"}}
    assert one(json.dumps(doc)).node.metadata.name == "10.240.79.157"
    stream = json.dumps(doc) + "\n" + json.dumps({**doc, "metadata": {"name": "n2"}})
    assert [o.node.metadata.name for o in load_manifests(stream)] == ["10.240.79.157", "n2"]


def test_list_kinds() -> None:
    items = [yaml.safe_load(POD), yaml.safe_load(POD.replace("web", "db"))]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    assert [o.pod.metadata.name for o in load_manifests(text)] == ["web", "db"]
    # A typed list: items may omit kind and apiVersion.
    bare = [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]
    objs = load_manifests(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": bare}))
    assert [(o.pod.kind, o.pod.api_version, o.pod.metadata.name) for o in objs] == [
        ("Pod", "v1", "a"),
        ("Pod", "v1", "b"),
    ]
    assert load_manifests("apiVersion: v1\nkind: List\nitems: []\n") == []


def test_every_served_kind_loads() -> None:
    text = """\
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: kube-scheduler, namespace: kube-system}
spec:
  holderIdentity: s1
  leaseDurationSeconds: 15
  leaseTransitions: 0
  renewTime: "2024-01-01T00:00:00.000000Z"
---
apiVersion: v1
kind: Event
metadata: {name: e, namespace: default}
involvedObject: {kind: Pod, name: web}
reason: Scheduled
count: 1
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000000
preemptionPolicy: Never
"""
    lease, event, pc = load_manifests(text)
    assert lease.lease.spec.holder_identity == "s1"
    assert lease.lease.spec.HasField("lease_transitions")  # optional zero is kept
    assert lease.lease.spec.renew_time == "2024-01-01T00:00:00.000000Z"
    assert event.event.involved_object.name == "web"
    assert pc.priority_class.value == 1000000


def test_unknown_fields_are_dropped_and_names_are_case_sensitive() -> None:
    pod = pod_with("  volumes: [{name: data, emptyDir: {}}]\n  node_name: snake\n  NodeName: pascal\n")
    assert pod.spec.node_name == ""


# ---------------------------------------------------------------- scalar coercion


def test_unquoted_numbers_become_the_string_kubernetes_reads() -> None:
    pod = pod_with(
        "    resources:\n"
        "      requests: {cpu: 0.5, memory: 1.5e9, example.com/dongle: 3, small: 1e-7}\n"
        "      limits: {cpu: 1}\n"
    )
    req = pod.spec.containers[0].resources.requests
    assert dict(req) == {"cpu": "0.5", "memory": "1500000000", "example.com/dongle": "3", "small": "1e-7"}
    assert pod.spec.containers[0].resources.limits["cpu"] == "1"


def test_label_values_coerced_like_sigs_yaml() -> None:
    text = POD.replace(
        "labels: {app: web}",
        "labels: {version: 1, ratio: 1.10, big: 1e6, octal: 0755, hex: 0x1F, flag: true}",
    )
    labels = dict(one(text).pod.metadata.labels)
    assert labels == {
        "version": "1",
        "ratio": "1.1",
        "big": "1e+06",
        "octal": "493",
        "hex": "31",
        "flag": "true",
    }


def test_yaml_11_booleans_as_go_yaml_v2() -> None:
    # go-yaml v2 (YAML 1.1) reads these as booleans; into a string field they become "true"/"false".
    text = POD.replace("labels: {app: web}", "labels: {a: on, b: yes, c: y, d: off, e: no, f: N, g: 'on'}")
    labels = dict(one(text).pod.metadata.labels)
    assert labels == {
        "a": "true",
        "b": "true",
        "c": "true",
        "d": "false",
        "e": "false",
        "f": "false",
        "g": "on",
    }
    # Keys too: sigs.k8s.io/yaml turns non-string keys into strings.
    keys = dict(one(POD.replace("labels: {app: web}", "labels: {on: x, 1: y, 1.5: z}")).pod.metadata.labels)
    assert keys == {"true": "x", "1": "true", "1.5": "z"}  # `y` is a boolean too
    assert one(POD + "  hostNetwork: yes\n").pod.spec.host_network is True


def test_timestamps_stay_strings() -> None:
    text = POD.replace("namespace: default", "namespace: default\n  creationTimestamp: 2024-05-01T12:00:00Z")
    assert one(text).pod.metadata.creation_timestamp == "2024-05-01T12:00:00Z"
    assert dict(one(POD.replace("labels: {app: web}", "labels: {d: 2024-01-01}")).pod.metadata.labels) == {
        "d": "2024-01-01"
    }


def test_integer_fields() -> None:
    pod = pod_with(
        "    ports: [{containerPort: 80.0, hostPort: 8080}]\n  terminationGracePeriodSeconds: 30\n"
    )
    port = pod.spec.containers[0].ports[0]
    assert (port.container_port, port.host_port) == (80, 8080)
    assert pod.spec.termination_grace_period_seconds == 30


@pytest.mark.parametrize(
    ("fragment", "path", "why"),
    [
        (
            "    ports: [{containerPort: http}]\n",
            "spec.containers[0].ports[0].containerPort",
            "expected an integer",
        ),
        ('    ports: [{containerPort: "80"}]\n', "spec.containers[0].ports[0].containerPort", "got string"),
        (
            "    ports: [{containerPort: 1.5}]\n",
            "spec.containers[0].ports[0].containerPort",
            "expected an integer",
        ),
        (
            "    ports: [{containerPort: 4294967296}]\n",
            "spec.containers[0].ports[0].containerPort",
            "out of range",
        ),
        ("    ports: [{containerPort: true}]\n", "spec.containers[0].ports[0].containerPort", "got bool"),
        ("    image: {name: nginx}\n", "spec.containers[0].image", "expected a string, got object"),
        ("    command: sh\n", "spec.containers[0].command", "expected an array"),
        (
            "    resources: {requests: {cpu: lots}}\n",
            "spec.containers[0].resources.requests[cpu]",
            "quantities must match",
        ),
        (
            "    resources: {requests: {cpu: true}}\n",
            "spec.containers[0].resources.requests[cpu]",
            "expected a quantity",
        ),
        ('  hostNetwork: "true"\n', "spec.hostNetwork", "expected a boolean"),
        ("  nodeSelector: [a, b]\n", "spec.nodeSelector", "expected an object"),
        ("  affinity: yes\n", "spec.affinity", "expected an object"),
    ],
)
def test_wrong_shapes_name_the_field(fragment: str, path: str, why: str) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifests(POD + fragment, source="pod.yaml")
    message = str(info.value)
    assert message.startswith("pod.yaml: document 1: Pod 'web': ")
    assert path in message and why in message
    assert info.value.path == path
    assert info.value.kind == "Pod"


def test_nulls_are_unset() -> None:
    pod = pod_with("  nodeName: null\n  tolerations: ~\n  nodeSelector: {a: null}\n    \n")
    assert pod.spec.node_name == "" and len(pod.spec.tolerations) == 0
    assert dict(pod.spec.node_selector) == {"a": ""}


def test_quantity_whitespace_is_trimmed_as_unmarshaljson() -> None:
    assert (
        pod_with('    resources: {requests: {cpu: " 250m "}}\n').spec.containers[0].resources.requests["cpu"]
        == "250m"
    )


# ---------------------------------------------------------------- refusals


def test_unsupported_kind_names_source_document_kind_and_supported() -> None:
    text = POD + "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: d}\n"
    with pytest.raises(ManifestError) as info:
        load_manifests(text, source="app.yaml")
    err = info.value
    assert str(err).startswith(
        'app.yaml: document 2: kind "StatefulSet" (apiVersion "apps/v1") is not supported'
    )
    assert "supported kinds: Pod (v1), Node (v1), Lease (coordination.k8s.io/v1)" in str(err)
    assert (err.kind, err.api_version, err.document, err.source) == ("StatefulSet", "apps/v1", 2, "app.yaml")


def test_wrong_api_version_for_a_served_kind() -> None:
    with pytest.raises(ManifestError, match=r'kse serves PriorityClass as "scheduling\.k8s\.io/v1"'):
        load_manifests("apiVersion: scheduling.k8s.io/v1beta1\nkind: PriorityClass\nvalue: 1\n")


def test_missing_kind_or_api_version() -> None:
    with pytest.raises(ManifestError, match="'kind' is missing"):
        load_manifests("apiVersion: v1\nmetadata: {name: x}\n")
    with pytest.raises(ManifestError, match="'apiVersion' is missing"):
        load_manifests("kind: Pod\nmetadata: {name: x}\n")
    with pytest.raises(ManifestError, match="expected an object"):
        load_manifests("- a\n- b\n")


def test_list_item_errors_name_the_item() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [yaml.safe_load(POD), {"apiVersion": "v1", "kind": "ConfigMap"}],
        }
    )
    with pytest.raises(ManifestError, match=r"document 1: items\[1\]: kind \"ConfigMap\""):
        load_manifests(text)


def test_invalid_yaml() -> None:
    with pytest.raises(ManifestError, match=r"x.yaml: document 2: invalid YAML"):
        load_manifests(POD + "---\nkind: [unclosed\n", source="x.yaml")


def test_alias_bomb_is_bounded() -> None:
    # Three nested repeated fields, each written once with 200 aliases: 8 million values if expanded.
    n = 200
    values = "[" + ", ".join(f"v{i}" for i in range(n)) + "]"
    exprs = "[" + ", ".join(["*e"] * n) + "]"
    terms = "[" + ", ".join(["*t"] * n) + "]"
    bomb = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\n"
        f"x: [&e {{key: k, operator: In, values: {values}}}, &t {{matchExpressions: {exprs}}}]\n"
        f"spec: {{affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: "
        f"{{nodeSelectorTerms: {terms}}}}}}}}}\n"
    )
    start = time.monotonic()
    with pytest.raises(ManifestError, match="document too large"):
        load_manifests(bomb)
    assert time.monotonic() - start < 30


def test_load_manifest_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POD)
    (tmp_path / "b.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    )
    (tmp_path / "notes.txt").write_text("ignored")
    objs = load_manifest_files([tmp_path])
    assert [o.WhichOneof("kind") for o in objs] == ["pod", "node"]
    assert load_manifest_files(tmp_path / "a.yaml")[0].pod.metadata.name == "web"
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: Secret\n")
    with pytest.raises(ManifestError, match=r"bad\.yaml: document 1"):
        load_manifest_files([tmp_path])


# ---------------------------------------------------------------- dumping


def test_to_dict_is_kubectls_shape() -> None:
    pod = pb.Pod()
    pod.metadata.name = "p"
    pod.spec.termination_grace_period_seconds = 30
    pod.spec.priority = 0
    pod.spec.containers.add(name="c").ports.add(container_port=80, host_ip="1.2.3.4")
    tol = pod.spec.tolerations.add(key="k", operator="Exists")
    tol.toleration_seconds = 300
    d = to_dict(wrap(pod))
    assert list(d)[:2] == ["apiVersion", "kind"]
    assert d["apiVersion"] == "v1" and d["kind"] == "Pod"
    assert d["spec"]["terminationGracePeriodSeconds"] == 30  # a number, not protobuf-JSON's "30"
    assert d["spec"]["tolerations"][0]["tolerationSeconds"] == 300
    assert d["spec"]["priority"] == 0  # optional field set to zero is kept
    assert d["spec"]["containers"][0]["ports"][0] == {"containerPort": 80, "hostIP": "1.2.3.4"}
    assert "status" not in d and "nodeName" not in d["spec"]
    assert to_dict(pod) == d  # typed messages work too


def test_yaml_dump_quotes_what_go_yaml_would_misread() -> None:
    pod = pb.Pod(api_version="v1", kind="Pod")
    pod.metadata.name = "p"
    pod.metadata.labels.update(
        {
            "a": "y",
            "b": "on",
            "c": "1",
            "d": "1e3",
            "e": "0.5",
            "f": "null",
            "g": "plain",
            "h": "2024-01-01",
            "i": "0755",
            "j": "",
        }
    )
    text = to_yaml(pod)
    for raw in ["'y'", "'on'", "'1'", "'1e3'", "'0.5'", "'null'", "'2024-01-01'", "'0755'", "''"]:
        assert raw in text, raw
    assert "g: plain" in text
    assert one(text).pod == pod  # our loader (go-yaml rules) reads back exactly
    assert yaml.safe_load(text)["metadata"]["labels"] == dict(pod.metadata.labels)  # so does PyYAML


def test_dump_round_trips() -> None:
    text = POD + "  tolerations: [{key: k, operator: Exists, effect: NoSchedule, tolerationSeconds: 60}]\n"
    obj = one(text)
    assert one(to_yaml(obj)) == obj
    assert one(to_json(obj)) == obj
    assert [o.pod.metadata.name for o in load_manifests(to_yaml_all([obj, obj]))] == ["web", "web"]
    assert load_manifests(json.dumps(list_to_dict([obj]))) == [obj]


@settings(deadline=None)  # CI shares two cores with other suites
@given(
    st.dictionaries(
        st.text("yYnNoOfFtT01.eEx+-_: ~#'\"", max_size=6), st.text("yYnNoO01.eEx+-_: ~", max_size=6)
    )
)
def test_any_string_survives_yaml(labels: dict[str, str]) -> None:
    pod = pb.Pod(api_version="v1", kind="Pod")
    pod.metadata.name = "p"
    pod.metadata.labels.update(labels)
    assert one(to_yaml(pod)).pod == pod
    assert one(to_json(pod)).pod == pod


# ---------------------------------------------------------------- Go number formatting


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.5, "0.5"),
        (1.0, "1"),
        (1.1, "1.1"),
        (1e6, "1e+06"),
        (123456.0, "123456"),
        (1.5e-5, "1.5e-05"),
        (0.0001, "0.0001"),
        (3.14159265358979, "3.1415927"),
        (0.0, "0"),
        (-2.5, "-2.5"),
        (1e40, "+Inf"),
        (float("nan"), "NaN"),
        (16777217.0, "1.6777216e+07"),
    ],
)
def test_go_format_float32(number: float, text: str) -> None:
    assert go_format_float32(number) == text


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.5, "0.5"),
        (3.0, "3"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1.5e-6, "0.0000015"),
        (123.456, "123.456"),
        (-0.25, "-0.25"),
    ],
)
def test_go_json_float(number: float, text: str) -> None:
    assert go_json_float(number) == text


@settings(deadline=None)  # CI shares two cores with other suites
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_json_float_round_trips(number: float) -> None:
    assert float(go_json_float(number)) == number


# ---------------------------------------------------------------- timeutil


def test_time_formats() -> None:
    moment = 1714564800.123456  # 2024-05-01T12:00:00.123456Z
    assert timeutil.format_time(moment) == "2024-05-01T12:00:00Z"
    assert timeutil.format_micro_time(moment) == "2024-05-01T12:00:00.123456Z"
    assert timeutil.now_rfc3339(lambda: moment) == "2024-05-01T12:00:00Z"
    assert timeutil.now_micro(lambda: moment) == "2024-05-01T12:00:00.123456Z"
    assert timeutil.format_time(datetime(2024, 5, 1, 14, 0, tzinfo=UTC)) == "2024-05-01T14:00:00Z"


def test_parse_time_accepts_both_forms_and_offsets() -> None:
    assert timeutil.parse_time("2024-05-01T12:00:00Z") == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert timeutil.parse_time("2024-05-01T12:00:00.123456Z").microsecond == 123456
    assert timeutil.parse_time("2024-05-01T12:00:00.123456789Z").microsecond == 123456  # ns truncated
    assert timeutil.parse_time("2024-05-01T14:00:00+02:00") == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert timeutil.to_epoch("1970-01-01T00:00:01Z") == 1.0
    for bad in [
        "2024-05-01",
        "2024-05-01 12:00:00Z",
        "2024-13-01T00:00:00Z",
        "yesterday",
        "2024-05-01T12:00:00",
    ]:
        with pytest.raises(ValueError):
            timeutil.parse_time(bad)
    with pytest.raises(ValueError):
        timeutil.format_time(datetime(2024, 1, 1))  # naive


@settings(deadline=None)  # CI shares two cores with other suites
@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)))
def test_micro_time_round_trip(moment: datetime) -> None:
    assert timeutil.parse_time(timeutil.format_micro_time(moment)) == moment
    assert timeutil.parse_time(timeutil.format_time(moment)) == moment.replace(microsecond=0)


# ---------------------------------------------------------------- unknown fields (field validation)


def test_unknown_fields_are_reported_by_json_path_and_dropped() -> None:
    text = POD.replace("  containers:\n", "  nodeSelecter: {disk: ssd}\n  containers:\n") + (
        "    imagePullPolcy: Always\n  - name: d\n    image: x\n    portz: [80]\nstatuz: null\n"
    )
    [decoded] = decode_manifests(text)
    assert decoded.unknown_fields == [
        "spec.nodeSelecter",
        "spec.containers[0].imagePullPolcy",
        "spec.containers[1].portz",
        "statuz",  # reported even when null, as strict decoding does
    ]
    # What is returned for the known fields does not change.
    two_containers = POD.replace("    image: nginx\n", "    image: nginx\n  - name: d\n    image: x\n")
    assert decoded.obj == one(two_containers)
    assert load_manifests(text) == [decoded.obj]
    assert "nodeSelecter" not in json.dumps(decoded.fields)


def test_decoded_fields_are_the_manifest_as_written_with_zero_values_kept() -> None:
    text = POD + "  priority: 0\n  hostNetwork: false\n"
    [decoded] = decode_manifests(text)
    assert decoded.unknown_fields == []
    assert decoded.fields["spec"]["priority"] == 0
    assert decoded.fields["spec"]["hostNetwork"] is False
    assert decoded.fields["metadata"] == {"name": "web", "namespace": "default", "labels": {"app": "web"}}


def test_unknown_fields_in_list_items_are_reported_per_item() -> None:
    text = json.dumps({
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [
            {"metadata": {"name": "a", "labelz": {}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
            {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        ],
    })
    a, b = decode_manifests(text)
    assert (a.unknown_fields, b.unknown_fields) == (["metadata.labelz"], [])
    assert (a.fields["kind"], a.fields["apiVersion"]) == ("Pod", "v1")
