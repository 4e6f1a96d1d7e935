"""kubectl's client-side apply (`kse.objects.apply`): the three-way merge and the annotation.

The cases follow the shapes of kubectl's own three-way cases (strategicpatch's
`TestStrategicMergePatch` three-way table and kubectl's apply tests): a field removed from the
manifest is removed, one set by someone else is kept, lists with a patch merge key are merged by
it and others are replaced; the data is ours.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kse.objects.apply import (
    LAST_APPLIED,
    ApplyError,
    last_applied_json,
    original_of,
    three_way_merge,
    with_last_applied,
)
from proto import kse_pb2 as pb

POD = pb.Pod.DESCRIPTOR
NODE = pb.Node.DESCRIPTOR


def pod(spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec or {}}


def merge(original: Any, modified: Any, current: Any, desc: Any = POD) -> dict[str, Any]:
    frozen = copy.deepcopy((original, modified, current))
    out = three_way_merge(original, modified, current, desc)
    assert (original, modified, current) == frozen, "inputs must not be modified"
    return out


# ---------------------------------------------------------------- fields


def test_first_apply_over_an_object_with_no_annotation_only_adds_and_changes() -> None:
    current = pod({"containers": [{"name": "c", "image": "a"}], "schedulerName": "default-scheduler"},
                  labels={"app": "web", "team": "x"}, uid="u1", resourceVersion="7")
    modified = pod({"containers": [{"name": "c", "image": "b"}]}, labels={"app": "api"})
    out = merge(None, modified, current)
    # Without an original nothing is deleted: the server's and others' fields stay.
    assert out["metadata"] == {"name": "p", "labels": {"app": "api", "team": "x"}, "uid": "u1",
                               "resourceVersion": "7"}
    assert out["spec"] == {"containers": [{"name": "c", "image": "b"}], "schedulerName": "default-scheduler"}


def test_a_field_removed_from_the_manifest_is_removed_one_set_by_others_is_kept() -> None:
    original = pod({"nodeSelector": {"disk": "ssd"}, "priorityClassName": "high"}, labels={"app": "web"})
    modified = pod({"nodeSelector": {"disk": "ssd"}}, labels={"app": "web"})
    current = pod({"nodeSelector": {"disk": "ssd", "zone": "a"}, "priorityClassName": "high",
                   "nodeName": "n1"}, labels={"app": "web", "added-by": "controller"})
    out = merge(original, modified, current)
    assert out["spec"] == {"nodeSelector": {"disk": "ssd", "zone": "a"}, "nodeName": "n1"}
    assert out["metadata"]["labels"] == {"app": "web", "added-by": "controller"}


def test_a_map_key_removed_from_the_manifest_is_removed() -> None:
    original = pod(labels={"app": "web", "tier": "front"})
    modified = pod(labels={"app": "web"})
    current = pod(labels={"app": "web", "tier": "front", "other": "kept"})
    assert merge(original, modified, current)["metadata"]["labels"] == {"app": "web", "other": "kept"}


def test_the_manifest_wins_over_a_change_made_by_someone_else() -> None:
    original = pod(labels={"app": "web"})
    modified = pod(labels={"app": "web"})
    current = pod(labels={"app": "edited-by-hand"})
    assert merge(original, modified, current)["metadata"]["labels"] == {"app": "web"}


def test_status_kind_and_server_metadata_come_from_the_live_object() -> None:
    # `kse get -o yaml > f; kse apply -f f`: the manifest carries what the server owns.
    original = pod(uid="old", resourceVersion="3", creationTimestamp="2020-01-01T00:00:00Z")
    original["status"] = {"phase": "Pending"}
    modified = pod(uid="old", resourceVersion="3")
    modified["status"] = {"phase": "Succeeded"}
    modified["kind"] = "Other"
    current = pod(uid="u1", resourceVersion="9", creationTimestamp="2026-01-01T00:00:00Z")
    current["status"] = {"phase": "Running"}
    out = merge(original, modified, current)
    assert out["metadata"] == {"name": "p", "uid": "u1", "resourceVersion": "9",
                               "creationTimestamp": "2026-01-01T00:00:00Z"}
    assert (out["status"], out["kind"]) == ({"phase": "Running"}, "Pod")


def test_unknown_keys_merge_as_plain_json() -> None:
    original = {"metadata": {"name": "p"}, "x": {"a": 1, "b": 2}}
    modified = {"metadata": {"name": "p"}, "x": {"a": 3}}
    current = {"metadata": {"name": "p"}, "x": {"a": 1, "b": 2, "c": 4}}
    assert merge(original, modified, current)["x"] == {"a": 3, "c": 4}


# ---------------------------------------------------------------- lists merged by key


GATED = {"schedulingGates": [{"name": "example.com/foo"}, {"name": "example.com/bar"}],
         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.6"}]}


def test_removing_scheduling_gates_from_the_manifest_ungates_the_pod() -> None:
    # The Kubernetes docs' pod-with-scheduling-gates.yaml, applied again without the gates.
    original = pod(copy.deepcopy(GATED))
    modified = pod({"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.6"}]})
    current = pod({**copy.deepcopy(GATED), "schedulerName": "default-scheduler"})
    out = merge(original, modified, current)
    assert "schedulingGates" not in out["spec"]
    assert out["spec"]["schedulerName"] == "default-scheduler"


def test_one_gate_removed_only_that_gate_goes_and_others_gates_stay() -> None:
    original = pod(copy.deepcopy(GATED))
    modified = pod({**copy.deepcopy(GATED), "schedulingGates": [{"name": "example.com/bar"}]})
    current = pod({**copy.deepcopy(GATED),
                   "schedulingGates": [{"name": "example.com/foo"}, {"name": "admission.example/quota"},
                                       {"name": "example.com/bar"}]})
    gates = merge(original, modified, current)["spec"]["schedulingGates"]
    # A gate only the server has (added by admission) stays, in its place.
    assert gates == [{"name": "admission.example/quota"}, {"name": "example.com/bar"}]


def test_containers_merge_by_name_keeping_defaults_and_others_containers() -> None:
    original = pod({"containers": [{"name": "app", "image": "app:1"}, {"name": "old", "image": "old:1"}]})
    modified = pod({"containers": [{"name": "app", "image": "app:2"}]})
    current = pod({"containers": [
        {"name": "app", "image": "app:1", "imagePullPolicy": "IfNotPresent"},
        {"name": "injected-sidecar", "image": "proxy:1"},
        {"name": "old", "image": "old:1"},
    ]})
    containers = merge(original, modified, current)["spec"]["containers"]
    assert containers == [
        {"name": "app", "image": "app:2", "imagePullPolicy": "IfNotPresent"},
        {"name": "injected-sidecar", "image": "proxy:1"},
    ]


def test_list_order_follows_the_manifest_with_server_only_items_in_place() -> None:
    current = pod({"initContainers": [{"name": "a"}, {"name": "s"}, {"name": "b"}]})
    original = pod({"initContainers": [{"name": "a"}, {"name": "b"}]})
    modified = pod({"initContainers": [{"name": "b"}, {"name": "a"}, {"name": "new"}]})
    names = [c["name"] for c in merge(original, modified, current)["spec"]["initContainers"]]
    # mergeSortedSlice: "s" stood before "b" in the live list, so it stays before it.
    assert names == ["s", "b", "a", "new"]
    modified = pod({"initContainers": [{"name": "a"}, {"name": "b"}]})
    names = [c["name"] for c in merge(original, modified, current)["spec"]["initContainers"]]
    assert names == ["a", "s", "b"]


def test_ports_merge_by_container_port_and_env_by_name() -> None:
    original = pod({"containers": [{"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 81}],
                                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]})
    modified = pod({"containers": [{"name": "c", "ports": [{"containerPort": 80, "name": "http"}],
                                    "env": [{"name": "A", "value": "10"}]}]})
    current = pod({"containers": [{"name": "c",
                                   "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81},
                                             {"containerPort": 9090}],
                                   "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"},
                                           {"name": "INJECTED", "value": "x"}]}]})
    [c] = merge(original, modified, current)["spec"]["containers"]
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 9090}]
    assert c["env"] == [{"name": "A", "value": "10"}, {"name": "INJECTED", "value": "x"}]


def test_lists_without_a_patch_strategy_are_replaced_whole() -> None:
    # Tolerations carry no patchMergeKey upstream: the manifest's list replaces the live one.
    original = pod({"tolerations": [{"key": "a", "operator": "Exists"}]})
    modified = pod({"tolerations": [{"key": "b", "operator": "Exists"}]})
    others = {"key": "others", "operator": "Exists"}
    current = pod({"tolerations": [{"key": "a", "operator": "Exists"}, others]})
    assert merge(original, modified, current)["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_an_item_without_its_merge_key_replaces_the_list() -> None:
    original = pod({"containers": [{"name": "c"}]})
    modified = pod({"containers": [{"image": "nameless"}]})
    current = pod({"containers": [{"name": "c"}, {"name": "d"}]})
    assert merge(original, modified, current)["spec"]["containers"] == [{"image": "nameless"}]


def test_finalizers_merge_as_a_set() -> None:
    original = pod(finalizers=["a", "b"])
    modified = pod(finalizers=["a", "c"])
    current = pod(finalizers=["a", "controller.example/x", "b"])
    assert merge(original, modified, current)["metadata"]["finalizers"] == ["a", "c", "controller.example/x"]


def test_node_conditions_merge_by_type_taints_are_atomic() -> None:
    def node(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": spec, "status": status}

    original = node({"taints": [{"key": "a", "effect": "NoSchedule"}]}, {})
    modified = node({"taints": [{"key": "b", "effect": "NoSchedule"}]}, {})
    current = node({"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "ctl", "effect": "NoExecute"}],
                    "unschedulable": True},
                   {"conditions": [{"type": "Ready", "status": "True"}]})
    out = merge(original, modified, current, NODE)
    assert out["spec"] == {"taints": [{"key": "b", "effect": "NoSchedule"}], "unschedulable": True}
    assert out["status"] == current["status"]


# ---------------------------------------------------------------- the annotation


def test_last_applied_json_is_kubectls_sorted_compact_json_without_itself() -> None:
    manifest = pod({"containers": [{"name": "c", "image": "i"}]}, annotations={LAST_APPLIED: "old", "z": "1"})
    text = last_applied_json(manifest)
    assert text.endswith("}\n")
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":")) + "\n"
    assert json.loads(text)["metadata"]["annotations"] == {"z": "1"}
    # As kubectl's: an empty annotations map when the manifest has none but this one.
    only_itself = json.loads(last_applied_json(pod(annotations={LAST_APPLIED: "x"})))
    assert only_itself["metadata"] == {"name": "p", "annotations": {}}
    assert json.loads(last_applied_json(pod()))["metadata"] == {"name": "p", "annotations": {}}


def test_with_last_applied_round_trips_through_original_of() -> None:
    manifest = pod({"containers": [{"name": "c"}]}, labels={"a": "b"})
    sent = with_last_applied(manifest)
    assert manifest == pod({"containers": [{"name": "c"}]}, labels={"a": "b"}), "input untouched"
    assert original_of(sent) == pod({"containers": [{"name": "c"}]}, labels={"a": "b"}, annotations={})
    assert original_of(pod()) is None


def test_applying_the_same_manifest_twice_changes_nothing() -> None:
    modified = with_last_applied(pod({"containers": [{"name": "c", "image": "i"}]}, labels={"a": "b"}))
    live = copy.deepcopy(modified)
    live["metadata"].update(uid="u", resourceVersion="5")
    live["spec"]["schedulerName"] = "default-scheduler"
    assert merge(original_of(live), modified, live) == live


@pytest.mark.parametrize("value", ["{not json", "[1, 2]"])
def test_an_unreadable_annotation_is_an_error_naming_it(value: str) -> None:
    with pytest.raises(ApplyError, match="last-applied-configuration"):
        original_of(pod(annotations={LAST_APPLIED: value}))


# ---------------------------------------------------------------- properties

_keys = st.sampled_from(["a", "b", "c", "d", "e"])
_maps = st.dictionaries(_keys, st.sampled_from(["1", "2", "3"]), max_size=5)


@given(original=_maps, modified=_maps, current=_maps)
@settings(max_examples=300, deadline=None)
def test_map_merge_is_kubectls_rule_and_reapplying_changes_nothing(
    original: dict[str, str], modified: dict[str, str], current: dict[str, str]
) -> None:
    out = merge(pod(labels=original), pod(labels=modified), pod(labels=current))["metadata"].get("labels", {})
    # Manifest keys as written; keys the user removed since the last apply gone; others' kept.
    expected = {k: v for k, v in current.items() if k not in original or k in modified} | modified
    assert out == expected
    again = merge(pod(labels=modified), pod(labels=modified), pod(labels=out))["metadata"].get("labels", {})
    assert again == out


@given(original=st.lists(_keys, unique=True), modified=st.lists(_keys, unique=True),
       current=st.lists(_keys, unique=True))
@settings(max_examples=300, deadline=None)
def test_keyed_list_merge_keeps_every_manifest_item_once_and_others_in_order(
    original: list[str], modified: list[str], current: list[str]
) -> None:
    def gates(names: list[str]) -> dict[str, Any]:
        return pod({"schedulingGates": [{"name": n} for n in names]})

    merged = merge(gates(original), gates(modified), gates(current))
    out = [g["name"] for g in merged["spec"]["schedulingGates"]]
    theirs = [n for n in current if n not in modified and n not in original]
    assert sorted(out) == sorted(modified + theirs)
    assert [n for n in out if n in modified] == modified  # the manifest's order
    assert [n for n in out if n in theirs] == theirs  # server-only items keep their relative order
