"""Server-side apply and the managedFields of ordinary writes, as structured-merge-diff does them.

Expected field sets and messages are upstream's, as kube-apiserver writes them for `kubectl apply
--server-side` and for kubectl's client-side writes (see the sigs.k8s.io/structured-merge-diff
merge tests and k8s.io/apiserver's fieldmanager tests for the cases re-expressed here).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver_mock.http.apply import (
    LAST_APPLIED,
    ApplyConflict,
    ApplyError,
    parse_applied,
    record_update,
    server_side_apply,
)
from apiserver_mock.http.fieldpath import from_fields_v1, path_string, to_fields_v1
from kse.objects.manifest import load_manifests, to_dict
from tests.fixtures.json_inputs import KEYS, LIVE, VALUES

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"


def _config(image: str = "nginx:1", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": image}]},
    }


def _stored(obj: dict[str, Any], rv: str = "5") -> dict[str, Any]:
    """What the registry hands back: the object with its server metadata."""
    out = copy.deepcopy(obj)
    out["metadata"].update({"uid": "u-1", "resourceVersion": rv, "creationTimestamp": T0})
    return out


def _entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def _containers(obj: dict[str, Any]) -> list[str]:
    return [c["name"] for c in obj["spec"]["containers"]]


# ---------------------------------------------------------------- apply: ownership


def test_create_records_an_apply_entry_in_upstreams_encoding() -> None:
    out = server_side_apply(None, _config(), "alice", False, T0)
    assert out["spec"] == {"containers": [{"name": "web", "image": "nginx:1"}]}
    assert out["metadata"]["managedFields"] == [
        {
            "manager": "alice",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}}},
            },
        }
    ]


def test_managed_fields_survive_the_proto_round_trip() -> None:
    out = server_side_apply(None, _config(), "alice", False, T0)
    [obj] = load_manifests(json.dumps(out))
    assert to_dict(obj)["metadata"]["managedFields"] == out["metadata"]["managedFields"]


def test_reapplying_the_same_configuration_changes_nothing_but_the_time() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    out = server_side_apply(live, _config(), "alice", False, T1)
    assert out["spec"] == live["spec"] and out["metadata"]["labels"] == live["metadata"]["labels"]
    assert _entries(out)[("alice", "Apply")]["time"] == T1
    assert out["metadata"]["uid"] == "u-1" and out["metadata"]["resourceVersion"] == "5"


def test_the_same_value_from_another_manager_is_shared_ownership() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    out = server_side_apply(live, _config(), "bob", False, T1)
    entries = _entries(out)
    assert entries[("alice", "Apply")]["fieldsV1"] == entries[("bob", "Apply")]["fieldsV1"]


def test_a_different_value_conflicts_with_the_owner() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    with pytest.raises(ApplyConflict) as caught:
        server_side_apply(live, _config("nginx:2"), "bob", False, T1)
    err = caught.value
    assert (
        err.message
        == 'Apply failed with 1 conflict: conflict with "alice": .spec.containers[name="web"].image'
    )
    assert err.causes() == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "alice"',
            "field": '.spec.containers[name="web"].image',
        }
    ]


def test_several_conflicts_are_listed_per_manager() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    edited = copy.deepcopy(live)
    edited["metadata"]["labels"]["tier"] = "front"
    live = record_update(live, edited, "kubectl-edit", T1)
    with pytest.raises(ApplyConflict) as caught:
        server_side_apply(live, _config("nginx:2", app="api", tier="back"), "bob", False, T2)
    assert caught.value.message == (
        "Apply failed with 3 conflicts: "
        'conflicts with "alice":\n'
        "- .metadata.labels.app\n"
        '- .spec.containers[name="web"].image\n'
        f'conflicts with "kubectl-edit" using v1 at {T1}:\n'
        "- .metadata.labels.tier"
    )


def test_force_takes_the_fields_over() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    out = server_side_apply(live, _config("nginx:2"), "bob", True, T1)
    assert out["spec"]["containers"][0]["image"] == "nginx:2"
    alice = from_fields_v1(_entries(out)[("alice", "Apply")]["fieldsV1"])
    bob = from_fields_v1(_entries(out)[("bob", "Apply")]["fieldsV1"])
    image = ("f:spec", "f:containers", 'k:{"name":"web"}', "f:image")
    assert image in bob and image not in alice
    assert ("f:metadata", "f:labels", "f:app") in alice & bob  # same value: still shared


def test_fields_the_applier_stops_sending_are_removed() -> None:
    config = _config(app="web", tier="front")
    config["spec"]["containers"].append({"name": "side", "image": "busybox", "args": ["sleep"]})
    live = _stored(server_side_apply(None, config, "alice", False, T0))
    smaller = _config(app="web")
    smaller["spec"]["containers"].append({"name": "side", "image": "busybox"})
    out = server_side_apply(live, smaller, "alice", False, T1)
    assert out["metadata"]["labels"] == {"app": "web"}
    assert out["spec"]["containers"][1] == {"name": "side", "image": "busybox"}
    out = server_side_apply(_stored(out), _config(app="web"), "alice", False, T2)
    assert _containers(out) == ["web"]


def test_a_field_another_manager_also_owns_is_kept_when_the_applier_drops_it() -> None:
    live = _stored(server_side_apply(None, _config(app="web", tier="front"), "alice", False, T0))
    live = _stored(server_side_apply(live, _config(tier="front"), "bob", False, T1))
    out = server_side_apply(live, _config(app="web"), "alice", False, T2)
    assert out["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert ("f:metadata", "f:labels", "f:tier") not in from_fields_v1(
        _entries(out)[("alice", "Apply")]["fieldsV1"]
    )


def test_fields_nobody_applied_are_left_alone() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    live["spec"]["containers"][0]["imagePullPolicy"] = "Always"  # a default the server set
    out = server_side_apply(live, _config(app="web"), "alice", False, T1)
    assert out["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_items_other_managers_added_keep_their_places() -> None:
    config = _config()
    config["spec"]["containers"] = [{"name": "a", "image": "a"}, {"name": "c", "image": "c"}]
    live = _stored(server_side_apply(None, config, "alice", False, T0))
    edited = copy.deepcopy(live)
    edited["spec"]["containers"].insert(1, {"name": "b", "image": "b"})
    live = _stored(record_update(live, edited, "kubectl-edit", T1))
    config["spec"]["containers"].append({"name": "d", "image": "d"})
    out = server_side_apply(live, config, "alice", False, T2)
    assert _containers(out) == ["a", "b", "c", "d"]
    config["spec"]["containers"] = [{"name": "c", "image": "c"}, {"name": "a", "image": "a"}]
    assert _containers(server_side_apply(_stored(out), config, "alice", False, T2)) == ["b", "c", "a"]


def test_sets_merge_by_value() -> None:
    config = _config()
    config["metadata"]["finalizers"] = ["kse.io/a"]
    live = _stored(server_side_apply(None, config, "alice", False, T0))
    edited = copy.deepcopy(live)
    edited["metadata"]["finalizers"] = ["kse.io/b", "kse.io/a"]
    live = _stored(record_update(live, edited, "controller", T1))
    assert _entries(live)[("controller", "Update")]["fieldsV1"] == {
        "f:metadata": {"f:finalizers": {'v:"kse.io/b"': {}}}
    }
    out = server_side_apply(live, _config(), "alice", False, T2)
    assert out["metadata"]["finalizers"] == ["kse.io/b"]


def test_null_unsets_a_field_the_applier_owns() -> None:
    live = _stored(server_side_apply(None, _config(app="web", tier="x"), "alice", False, T0))
    config = _config(app="web")
    config["metadata"]["labels"]["tier"] = None
    assert server_side_apply(live, config, "alice", False, T1)["metadata"]["labels"] == {"app": "web"}


def test_an_object_without_managed_fields_is_owned_by_before_first_apply() -> None:
    live = _stored(_config())  # written through gRPC: no managedFields
    assert server_side_apply(live, _config(), "alice", False, T1)["spec"] == live["spec"]
    with pytest.raises(
        ApplyConflict, match=r'conflict with "before-first-apply" using v1: \.spec\.containers'
    ):
        server_side_apply(live, _config("nginx:2"), "alice", False, T1)


def _client_side_applied(config: dict[str, Any]) -> dict[str, Any]:
    """An object `kubectl apply` (client-side) created from `config`."""
    obj = copy.deepcopy(config)
    obj["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(config)}
    return _stored(record_update(None, obj, "kubectl-client-side-apply", T0))


def test_kubectl_takes_over_fields_its_last_applied_annotation_still_describes() -> None:
    live = _client_side_applied(_config())
    out = server_side_apply(live, _config("nginx:2"), "kubectl", False, T1)  # no conflict: an upgrade
    assert out["spec"]["containers"][0]["image"] == "nginx:2"
    last = json.loads(out["metadata"]["annotations"][LAST_APPLIED])
    assert last["spec"]["containers"][0]["image"] == "nginx:2"  # kept in step for client-side apply
    with pytest.raises(ApplyConflict):  # any other manager name gets the conflict
        server_side_apply(live, _config("nginx:2"), "helm", False, T1)


def test_kubectl_still_conflicts_where_the_annotation_is_stale() -> None:
    live = _client_side_applied(_config())
    edited = copy.deepcopy(live)
    edited["spec"]["containers"][0]["image"] = "nginx:3"
    live = _stored(record_update(live, edited, "kubectl-set", T1))
    with pytest.raises(ApplyConflict, match='conflict with "kubectl-set"'):
        server_side_apply(live, _config("nginx:2"), "kubectl", False, T2)


def test_the_main_resource_ignores_status_and_the_status_subresource_takes_only_status() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    live["status"] = {"phase": "Pending"}
    config = _config()
    config["status"] = {"phase": "Running"}
    out = server_side_apply(live, config, "alice", False, T1)
    assert out["status"] == {"phase": "Pending"}
    config["spec"]["containers"][0]["image"] = "changed"
    out = server_side_apply(live, config, "kubelet", False, T1, subresource="status")
    assert out["status"] == {"phase": "Running"} and out["spec"] == live["spec"]
    entry = _entries(out)[("kubelet", "Apply")]
    assert entry["subresource"] == "status" and entry["fieldsV1"] == {"f:status": {"f:phase": {}}}


def test_the_inputs_are_not_modified() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    config = _config("nginx:2")
    before = copy.deepcopy((live, config))
    server_side_apply(live, config, "alice", True, T1)
    record_update(live, config, "x", T1)
    assert (live, config) == before


@pytest.mark.parametrize(
    ("applied", "manager", "message"),
    [
        (_config(), "", "fieldManager: Required value"),
        ([], "m", "must be an object"),
        ({"kind": "Pod"}, "m", "apiVersion: Required value"),
        ({"apiVersion": "apps/v1", "kind": "StatefulSet"}, "m", 'kind: Unsupported value: "StatefulSet"'),
        ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "p"}}, "m", "kind: Invalid value"),
        (
            {**_config(), "apiVersion": "v2"},
            "m",
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1",
        ),
        (
            {**_config(), "metadata": {"name": "p", "managedFields": []}},
            "m",
            "metadata.managedFields must be nil",
        ),
        (
            {**_config(), "spec": {"containers": [{"name": "a"}, {"name": "a", "image": "x"}]}},
            "m",
            'duplicate entries for key \\[name="a"\\]',
        ),
    ],
)
def test_configurations_that_cannot_be_applied(applied: Any, manager: str, message: str) -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    with pytest.raises(ApplyError, match=message):
        server_side_apply(live, applied, manager, False, T1)


def test_malformed_managed_fields_are_named() -> None:
    live = _stored(_config())
    live["metadata"]["managedFields"] = [{"manager": "x", "operation": "Apply", "fieldsV1": {"bogus": {}}}]
    with pytest.raises(
        ApplyError, match=r"metadata.managedFields\[0\].fieldsV1: invalid field set element 'bogus'"
    ):
        server_side_apply(live, _config(), "alice", False, T1)
    live["metadata"]["managedFields"] = [{"manager": "x", "operation": "Merge", "fieldsV1": {}}]
    with pytest.raises(ApplyError, match="operation: Unsupported value"):
        server_side_apply(live, _config(), "alice", False, T1)


# ---------------------------------------------------------------- ordinary writes


def test_a_create_records_an_update_entry_as_kubectl_client_side_apply_gets() -> None:
    obj = _config()
    obj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    obj["spec"]["containers"][0]["resources"] = {}
    out = record_update(None, obj, "kubectl-client-side-apply", T0)
    assert out["metadata"]["managedFields"] == [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                    "f:labels": {".": {}, "f:app": {}},
                },
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}
                    }
                },
            },
        }
    ]


def test_an_update_takes_over_what_it_changes_and_drops_what_it_removes() -> None:
    live = _stored(server_side_apply(None, _config(app="web", tier="x"), "alice", False, T0))
    edited = copy.deepcopy(live)
    edited["spec"]["containers"][0]["image"] = "nginx:2"
    del edited["metadata"]["labels"]["tier"]
    out = record_update(live, edited, "kubectl-edit", T1)
    alice = from_fields_v1(_entries(out)[("alice", "Apply")]["fieldsV1"])
    assert ("f:spec", "f:containers", 'k:{"name":"web"}', "f:image") not in alice
    assert ("f:metadata", "f:labels", "f:tier") not in alice
    assert _entries(out)[("kubectl-edit", "Update")]["fieldsV1"] == {
        "f:spec": {"f:containers": {'k:{"name":"web"}': {"f:image": {}}}}
    }


def test_updates_of_an_object_nobody_tracks_record_nothing() -> None:
    live = _stored(_config())  # written through gRPC: no managedFields
    edited = copy.deepcopy(live)
    edited["metadata"]["labels"]["x"] = "y"
    assert "managedFields" not in record_update(live, edited, "kubectl-label", T1)["metadata"]


def test_more_than_ten_update_managers_are_folded_into_ancient_changes() -> None:
    obj = record_update(None, _config(), "creator", "2026-01-01T00:00:00Z")
    for i in range(12):
        edited = copy.deepcopy(obj)
        edited["metadata"]["labels"][f"l{i}"] = "x"
        obj = record_update(obj, edited, f"m{i:02d}", f"2026-01-01T00:{i + 1:02d}:00Z")
    entries = _entries(obj)
    assert len(entries) == 10
    ancient = entries[("ancient-changes", "Update")]
    # Each update past the cap folds the oldest into the bucket: creator, m00, m01, m02 by now; the
    # bucket carries the time of the newest it took.
    assert not {("creator", "Update"), ("m00", "Update"), ("m01", "Update"), ("m02", "Update")} & set(entries)
    assert ("m03", "Update") in entries
    assert ancient["time"] == "2026-01-01T00:03:00Z"
    owned = from_fields_v1(ancient["fieldsV1"])
    assert ("f:metadata", "f:labels", "f:l0") in owned and ("f:metadata", "f:labels", "f:l1") in owned
    assert ("f:spec", "f:containers", 'k:{"name":"web"}', "f:image") in owned


def test_an_update_that_changes_nothing_adds_no_entry() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    out = record_update(live, copy.deepcopy(live), "kubectl-edit", T1)
    assert list(_entries(out)) == [("alice", "Apply")]


def test_managed_fields_a_client_sends_win_and_a_single_empty_entry_clears_them() -> None:
    live = _stored(server_side_apply(None, _config(), "alice", False, T0))
    sent = copy.deepcopy(live)
    sent["metadata"]["managedFields"] = []  # an empty list keeps the stored ones
    assert list(_entries(record_update(live, sent, "x", T1))) == [("alice", "Apply")]
    sent["metadata"]["managedFields"] = [{}]
    assert "managedFields" not in record_update(live, sent, "x", T1)["metadata"]
    sent["metadata"]["managedFields"] = [
        {
            "manager": "other",
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {}},
        }
    ]
    assert list(_entries(record_update(live, sent, "x", T1))) == [("other", "Update")]


# ---------------------------------------------------------------- the encoding


def test_fields_v1_round_trips_and_paths_print_as_upstream() -> None:
    paths = {
        ("f:spec", "f:containers", 'k:{"name":"web"}'),
        ("f:spec", "f:containers", 'k:{"name":"web"}', "f:image"),
        ("f:spec", "f:containers", 'k:{"name":"web"}', "f:ports", 'k:{"containerPort":80,"protocol":"TCP"}'),
        ("f:metadata", "f:finalizers", 'v:"a"'),
        ("f:metadata", "f:labels"),
        ("f:metadata", "f:labels", "f:app"),
    }
    encoded = to_fields_v1(paths)
    assert list(encoded["f:metadata"]["f:labels"]) == [".", "f:app"]
    assert from_fields_v1(encoded) == paths
    assert (
        path_string(("f:spec", "f:containers", 'k:{"name":"web"}', "f:image"))
        == '.spec.containers[name="web"].image'
    )
    port = ("f:spec", "f:containers", 'k:{"name":"w"}', "f:ports", 'k:{"containerPort":80,"protocol":"TCP"}')
    assert path_string(port) == '.spec.containers[name="w"].ports[containerPort=80,protocol="TCP"]'
    assert path_string(("f:metadata", "f:finalizers", 'v:"a"')) == '.metadata.finalizers[="a"]'
    with pytest.raises(ValueError, match=r'"\." must map to an empty object'):
        from_fields_v1({"f:a": {".": {"x": {}}}})


def test_apply_bodies_are_yaml_or_json_objects() -> None:
    assert parse_applied(b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")["metadata"] == {"name": "p"}
    assert parse_applied(json.dumps(_config()).encode()) == _config()
    for body, message in (
        (b"", "got nothing"),
        (b"- a", "got list"),
        (b"a: [", "error decoding YAML"),
        (b"\xff", "YAML"),
    ):
        with pytest.raises(ApplyError, match=message):
            parse_applied(body)


# ---------------------------------------------------------------- arbitrary input never crashes

@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(KEYS, VALUES, max_size=5), st.booleans())
def test_any_configuration_applies_or_raises_a_clear_error(body: dict[str, Any], force: bool) -> None:
    live = _stored(server_side_apply(None, LIVE, "alice", False, T0))
    try:
        out = server_side_apply(live, {"apiVersion": "v1", "kind": "Pod", **body}, "bob", force, T1)
        json.dumps(record_update(live, {"apiVersion": "v1", "kind": "Pod", **body}, "carol", T2))
    except (ApplyError, ApplyConflict):
        return
    json.dumps(out)


def test_a_configuration_nested_too_deeply_is_an_apply_error() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ApplyError, match="nested too deeply"):
        server_side_apply(None, {**_config(), "spec": deep}, "alice", False, T0)
    with pytest.raises(ApplyError, match="nested too deeply"):
        record_update(None, {**_config(), "spec": deep}, "alice", T0)
