"""Strategic merge patch, checked against upstream's own cases.

Most cases re-express k8s.io/apimachinery/pkg/util/strategicpatch/patch_test.go (its
`mergingList` keyed by `name` is our `spec.containers`; its "three-way" patch applied to `Current`
must give `Result`), the rest the served kinds' own strategies from k8s.io/api/core/v1/types.go.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver_mock.http.strategic_merge import PatchError, apply_patch
from kse.objects.kinds import KINDS
from kse.objects.listtypes import LISTS, list_meta
from tests.fixtures.json_inputs import KEYS, LIVE, VALUES


def _pod(containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": containers, **spec},
    }


def _names(obj: dict[str, Any]) -> list[str]:
    return [c["name"] for c in obj["spec"]["containers"]]


# ---------------------------------------------------------------- lists merged by key


def test_containers_merge_by_name_and_new_ones_are_appended() -> None:
    live = _pod([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
    out = apply_patch(
        live, {"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c"}]}}, "Pod"
    )
    assert out["spec"]["containers"] == [
        {"name": "a", "image": "a:1"},
        {"name": "b", "image": "b:2"},
        {"name": "c", "image": "c"},
    ]


def test_the_inputs_are_not_modified() -> None:
    live = _pod([{"name": "a", "image": "a:1"}])
    patch = {"spec": {"containers": [{"name": "a", "image": "a:2"}]}, "metadata": {"labels": {"x": None}}}
    live_before, patch_before = copy.deepcopy(live), copy.deepcopy(patch)
    apply_patch(live, patch, "Pod")
    assert live == live_before and patch == patch_before


def test_delete_map_from_merging_list() -> None:  # patch_test.go "delete map from merging list"
    live = _pod([{"name": "1", "image": "x"}, {"name": "2"}])
    out = apply_patch(live, {"spec": {"containers": [{"name": "1", "$patch": "delete"}]}}, "Pod")
    assert _names(out) == ["2"]


def test_delete_missing_map_from_merging_list_is_a_no_op() -> None:
    live = _pod([{"name": "2"}])
    out = apply_patch(live, {"spec": {"containers": [{"name": "1", "$patch": "delete"}]}}, "Pod")
    assert _names(out) == ["2"]


def test_add_map_and_delete_map_from_merging_list() -> None:  # patch_test.go, same name
    live = _pod([{"name": "1"}, {"name": "2", "image": "b"}, {"name": "4", "image": "c"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "2"}, {"name": "3"}],
            "containers": [{"name": "3"}, {"name": "1", "$patch": "delete"}],
        }
    }
    assert _names(apply_patch(live, patch, "Pod")) == ["2", "4", "3"]


def test_without_an_order_new_items_go_before_server_only_ones_as_upstream() -> None:
    # mergeSortedSlice: an item the live list lacks cannot be compared, so the patch's goes first.
    live = _pod([{"name": "1"}, {"name": "2"}])
    patch = {"spec": {"containers": [{"name": "3"}, {"name": "1", "$patch": "delete"}]}}
    assert _names(apply_patch(live, patch, "Pod")) == ["3", "2"]


def test_replace_directive_in_a_list_replaces_the_whole_list() -> None:
    live = _pod([{"name": "1", "image": "x"}, {"name": "2"}])
    patch = {"spec": {"containers": [{"name": "3", "image": "y"}, {"$patch": "replace"}]}}
    assert apply_patch(live, patch, "Pod")["spec"]["containers"] == [{"name": "3", "image": "y"}]


def test_delete_field_from_map_in_merging_list() -> None:
    live = _pod([{"name": "1", "image": "x", "imagePullPolicy": "Always"}])
    out = apply_patch(live, {"spec": {"containers": [{"name": "1", "imagePullPolicy": None}]}}, "Pod")
    assert out["spec"]["containers"] == [{"name": "1", "image": "x"}]


def test_replace_non_merging_list_nested_in_merging_list() -> None:
    live = _pod([{"name": "1", "args": ["a", "b"]}])
    out = apply_patch(live, {"spec": {"containers": [{"name": "1", "args": ["c"]}]}}, "Pod")
    assert out["spec"]["containers"][0]["args"] == ["c"]


def test_merging_list_nested_in_merging_list() -> None:  # env and ports inside containers
    live = _pod(
        [
            {
                "name": "1",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80, "name": "http"}],
            }
        ]
    )
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "1",
                    "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}],
                }
            ]
        }
    }
    c = apply_patch(live, patch, "Pod")["spec"]["containers"][0]
    assert c["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]
    assert c["ports"] == [{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 443}]


def test_init_containers_scheduling_gates_and_conditions_merge_by_key() -> None:
    live = _pod(
        [{"name": "a"}],
        initContainers=[{"name": "i", "image": "x"}],
        schedulingGates=[{"name": "g1"}, {"name": "g2"}],
    )
    live["status"] = {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
    }
    patch = {
        "spec": {
            "initContainers": [{"name": "i", "image": "y"}],
            "schedulingGates": [{"name": "g1", "$patch": "delete"}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    out = apply_patch(live, patch, "Pod")
    assert out["spec"]["initContainers"] == [{"name": "i", "image": "y"}]
    assert out["spec"]["schedulingGates"] == [{"name": "g2"}]
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_owner_references_merge_by_uid() -> None:
    live = _pod([{"name": "a"}])
    live["metadata"]["ownerReferences"] = [{"uid": "u1", "name": "rs1", "kind": "ReplicaSet"}]
    patch = {"metadata": {"ownerReferences": [{"uid": "u2", "name": "rs2", "kind": "ReplicaSet"}]}}
    # Without $setElementOrder, the patch's items come first (mergeSortedSlice).
    assert [o["uid"] for o in apply_patch(live, patch, "Pod")["metadata"]["ownerReferences"]] == ["u2", "u1"]


def test_node_conditions_and_addresses_merge_by_type() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }
    patch = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletDown"}],
            "addresses": [{"type": "Hostname", "address": "n"}],
        }
    }
    out = apply_patch(node, patch, "Node")
    assert out["status"]["conditions"][0] == {"type": "Ready", "status": "False", "reason": "KubeletDown"}
    assert out["status"]["conditions"][1]["type"] == "DiskPressure"
    assert [a["type"] for a in out["status"]["addresses"]] == ["Hostname", "InternalIP"]


# ---------------------------------------------------------------- lists replaced whole


def test_tolerations_are_replaced_whole_as_upstream_has_no_strategy_for_them() -> None:
    live = _pod([{"name": "a"}], tolerations=[{"key": "a", "operator": "Exists"}])
    out = apply_patch(live, {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}, "Pod")
    assert out["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_taints_are_replaced_whole_as_kubectl_taint_expects() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
    }
    out = apply_patch(node, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}, "Node")
    assert out["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]
    assert "taints" not in apply_patch(node, {"spec": {"taints": None}}, "Node")["spec"]


# ---------------------------------------------------------------- lists of scalars


def test_finalizers_merge_as_a_deduplicated_union() -> None:  # "merge lists of scalars"
    live = _pod([{"name": "a"}])
    live["metadata"]["finalizers"] = ["a", "b"]
    out = apply_patch(live, {"metadata": {"finalizers": ["b", "c"]}}, "Pod")
    assert out["metadata"]["finalizers"] == ["a", "b", "c"]


def test_delete_from_primitive_list() -> None:  # "delete all duplicate items in lists of scalars"
    live = _pod([{"name": "a"}])
    live["metadata"]["finalizers"] = ["a", "b", "a", "c"]
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}
    assert apply_patch(live, patch, "Pod")["metadata"]["finalizers"] == ["b", "c"]


def test_delete_from_primitive_list_without_merge_strategy() -> None:
    live = _pod([{"name": "a", "args": ["x", "y"]}])
    patch = {"spec": {"containers": [{"name": "a", "$deleteFromPrimitiveList/args": ["x"]}]}}
    assert apply_patch(live, patch, "Pod")["spec"]["containers"][0]["args"] == ["y"]


def test_delete_from_primitive_list_never_adds_the_list_or_the_item() -> None:
    live = _pod([{"name": "a"}])
    assert (
        "finalizers"
        not in apply_patch(live, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, "Pod")[
            "metadata"
        ]
    )
    live["metadata"]["finalizers"] = ["b"]
    out = apply_patch(live, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, "Pod")
    assert out["metadata"]["finalizers"] == ["b"]


def test_add_and_delete_items_in_lists_of_scalars() -> None:  # patch_test.go, same name
    live = _pod([{"name": "a"}])
    live["metadata"]["finalizers"] = ["a", "b", "c"]
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["a", "c", "d"],
            "$deleteFromPrimitiveList/finalizers": ["b"],
            "finalizers": ["d"],
        }
    }
    assert apply_patch(live, patch, "Pod")["metadata"]["finalizers"] == ["a", "c", "d"]
    # Without the order, the patch's new items come first.
    del patch["metadata"]["$setElementOrder/finalizers"]
    assert apply_patch(live, patch, "Pod")["metadata"]["finalizers"] == ["d", "a", "c"]


# ---------------------------------------------------------------- $setElementOrder


def _order_case(current: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    patch = {"spec": {"$setElementOrder/containers": [{"name": n} for n in order]}}
    return apply_patch(_pod(current), patch, "Pod")["spec"]["containers"]


def test_set_elements_order_in_a_list() -> None:
    current = [{"name": "1", "image": "a"}, {"name": "3"}, {"name": "4"}, {"name": "2"}]
    assert [c["name"] for c in _order_case(current, ["4", "2", "3", "1"])] == ["4", "2", "3", "1"]


def test_set_elements_order_with_server_only_items() -> None:
    current = [{"name": n} for n in ["1", "3", "4", "2", "9"]]
    assert [c["name"] for c in _order_case(current, ["4", "2", "3", "1"])] == ["4", "2", "3", "1", "9"]


def test_set_elements_order_with_server_only_items_2() -> None:
    current = [{"name": n} for n in ["1", "2", "9", "3", "4"]]
    assert [c["name"] for c in _order_case(current, ["2", "1", "4", "3"])] == ["2", "1", "9", "4", "3"]


def test_set_elements_order_with_server_only_items_3() -> None:
    current = [{"name": n} for n in ["1", "2", "7", "9", "8", "3", "4"]]
    expected = ["2", "1", "7", "9", "8", "4", "3"]
    assert [c["name"] for c in _order_case(current, ["2", "1", "4", "3"])] == expected


def test_what_kubectl_apply_sends_changes_an_image_and_keeps_the_order() -> None:
    live = _pod([{"name": "web", "image": "nginx:1"}, {"name": "side", "image": "busybox"}])
    live["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
        "spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "web"}],
            "containers": [{"image": "nginx:2", "name": "web"}],
        },
    }
    out = apply_patch(live, patch, "Pod")
    assert out["spec"]["containers"] == [
        {"name": "side", "image": "busybox"},
        {"name": "web", "image": "nginx:2"},
    ]
    assert out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == "{...}"


def test_set_element_order_must_agree_with_the_patch_list() -> None:
    # patch_test.go "should check if order in $setElementOrder and patch list match"
    live = _pod([{"name": "1"}, {"name": "3"}, {"name": "2"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
            "containers": [{"name": "3", "image": "c"}, {"name": "1", "image": "a"}],
        }
    }
    with pytest.raises(PatchError, match="doesn't match the \\$setElementOrder list"):
        apply_patch(live, patch, "Pod")
    patch["spec"]["containers"].reverse()
    assert _names(apply_patch(live, patch, "Pod")) == ["1", "2", "3"]
    live["metadata"]["finalizers"] = ["1", "3", "2"]
    bad = {"metadata": {"$setElementOrder/finalizers": ["1", "2", "3"], "finalizers": ["3", "1"]}}
    with pytest.raises(PatchError, match="doesn't match"):
        apply_patch(live, bad, "Pod")


def test_set_element_order_of_scalars() -> None:
    live = _pod([{"name": "a"}])
    live["metadata"]["finalizers"] = ["a", "b", "c"]
    patch = {"metadata": {"$setElementOrder/finalizers": ["c", "a", "b", "d"], "finalizers": ["d"]}}
    assert apply_patch(live, patch, "Pod")["metadata"]["finalizers"] == ["c", "a", "b", "d"]


# ---------------------------------------------------------------- maps and directives


def test_null_deletes_a_key_and_maps_merge() -> None:
    live = _pod([{"name": "a"}])
    live["metadata"]["labels"] = {"a": "1", "b": "2"}
    out = apply_patch(live, {"metadata": {"labels": {"a": None, "c": "3"}}}, "Pod")
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}


def test_patch_replace_on_a_map_replaces_it() -> None:
    live = _pod([{"name": "a"}])
    live["metadata"]["labels"] = {"a": "1", "b": "2"}
    out = apply_patch(live, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}}, "Pod")
    assert out["metadata"]["labels"] == {"c": "3"}


def test_patch_delete_on_a_map_removes_it() -> None:
    live = _pod([{"name": "a"}], affinity={"nodeAffinity": {}})
    assert "affinity" not in apply_patch(live, {"spec": {"affinity": {"$patch": "delete"}}}, "Pod")["spec"]


def test_retain_keys_clears_the_fields_not_listed() -> None:  # "retainKeys map should clear defaulted field"
    live = _pod([{"name": "a", "image": "x", "imagePullPolicy": "Always", "args": ["y"]}])
    patch = {"spec": {"containers": [{"name": "a", "$retainKeys": ["name", "image"], "image": "z"}]}}
    assert apply_patch(live, patch, "Pod")["spec"]["containers"] == [{"name": "a", "image": "z"}]


def test_retain_keys_must_list_every_field_the_patch_sets() -> None:
    live = _pod([{"name": "a"}])
    patch = {"spec": {"containers": [{"name": "a", "$retainKeys": ["name"], "image": "z"}]}}
    with pytest.raises(PatchError, match="retainKeys"):
        apply_patch(live, patch, "Pod")


def test_directives_never_reach_a_new_subtree() -> None:
    live = _pod([{"name": "a"}])
    patch = {"spec": {"initContainers": [{"name": "i", "image": None, "$retainKeys": ["name"]}]}}
    assert apply_patch(live, patch, "Pod")["spec"]["initContainers"] == [{"name": "i"}]


def test_unknown_fields_merge_as_free_form_json() -> None:
    live = _pod([{"name": "a"}])
    live["spec"]["extra"] = {"a": 1}
    out = apply_patch(live, {"spec": {"extra": {"b": 2}, "nodeSelecter": {"x": "y"}}}, "Pod")
    assert out["spec"]["extra"] == {"a": 1, "b": 2} and out["spec"]["nodeSelecter"] == {"x": "y"}


def test_a_value_of_another_type_replaces_the_original() -> None:
    live = _pod([{"name": "a"}])
    assert apply_patch(live, {"spec": {"containers": "x"}}, "Pod")["spec"]["containers"] == "x"


# ---------------------------------------------------------------- patches that do not apply


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"spec": {"containers": [{"image": "x"}]}}, "does not contain declared merge key: name"),
        ({"spec": {"containers": ["x"]}}, r"spec.containers\[0\]: expected an object with merge key"),
        (
            {"spec": {"containers": [{"name": "a", "$patch": "merge"}]}},
            "merging lists cannot yet be specified",
        ),
        ({"spec": {"containers": [{"name": "a", "$patch": "bogus"}]}}, "bad \\$patch value"),
        ({"spec": {"$patch": "bogus"}}, r"spec: bad \$patch value 'bogus'"),
        ({"spec": {"$bogus": 1}}, r"spec.\$bogus: unknown patch directive"),
        ({"spec": {"$setElementOrder/containers": "x"}}, "must be a list"),
        ({"spec": {"$setElementOrder/containers": [{"image": "x"}]}}, "merge key: name"),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": "a", "finalizers": ["a"]}}, "must be a list"),
        ({"spec": {"containers": [{"name": "a", "$retainKeys": "name"}]}}, "retainKeys"),
    ],
)
def test_bad_patches_raise_patch_error(patch: dict[str, Any], message: str) -> None:
    live = _pod([{"name": "a"}])
    live["metadata"]["finalizers"] = ["a"]
    with pytest.raises(PatchError, match=message):
        apply_patch(live, patch, "Pod")


def test_a_patch_that_is_not_an_object_or_an_unknown_kind_is_refused() -> None:
    with pytest.raises(PatchError, match="must be a JSON object"):
        apply_patch(_pod([]), [], "Pod")  # type: ignore[arg-type]
    with pytest.raises(PatchError, match='kind "StatefulSet"'):
        apply_patch(_pod([]), {}, "StatefulSet")
    assert issubclass(PatchError, ValueError)


# ---------------------------------------------------------------- the table


def _list_fields(desc: Descriptor, seen: set[str]) -> set[tuple[str, str]]:
    if desc.full_name in seen or desc.full_name.startswith("google.protobuf."):
        return set()
    seen.add(desc.full_name)
    out: set[tuple[str, str]] = set()
    for fd in desc.fields:
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            continue
        if fd.is_repeated:
            out.add((desc.full_name, fd.json_name))
        if fd.message_type is not None:
            out |= _list_fields(fd.message_type, seen)
    return out


def test_every_list_field_of_a_served_kind_has_a_decision_in_the_table() -> None:
    seen: set[str] = set()
    fields = set().union(*(_list_fields(k.message.DESCRIPTOR, seen) for k in KINDS))
    assert fields - set(LISTS) == set(), "add these list fields to kse/objects/listtypes.LISTS"
    assert set(LISTS) - fields == set(), "these LISTS rows name no field of a served kind"


def test_table_rows_are_consistent() -> None:
    for (message, field), meta in LISTS.items():
        assert list_meta(message, field) is meta
        if meta.list_type == "map":
            assert meta.map_keys and meta.patch_merge_key in meta.map_keys, (message, field)
        else:
            assert not meta.map_keys and meta.patch_merge_key is None, (message, field)


# ---------------------------------------------------------------- arbitrary input never crashes

@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(KEYS, VALUES, max_size=5))
def test_any_patch_applies_or_raises_patch_error(patch: dict[str, Any]) -> None:
    try:
        out = apply_patch(LIVE, patch, "Pod")
    except PatchError:
        return
    json.dumps(out)


def test_a_patch_nested_too_deeply_is_a_patch_error() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(PatchError, match="nested too deeply"):
        apply_patch(LIVE, {"spec": deep}, "Pod")
