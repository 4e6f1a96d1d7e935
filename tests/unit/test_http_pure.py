"""Pure pieces of the HTTP front door: routes, discovery, params, patches, tables, status, kubeconfig."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from apiserver_mock import errors
from apiserver_mock.errors import Conflict, FencedOff, Gone, NotFound, Unavailable
from apiserver_mock.http import discovery, params, routes, tables
from apiserver_mock.http.codec import BadRequest, body_object, strict_error, warnings_for
from apiserver_mock.http.patch import PatchError, json_patch, merge_patch
from apiserver_mock.http.status import EntityTooLarge, Subject, TooManyRequests, cause_of, http_error
from kse.kubeconfig import write_kubeconfig
from kse.objects.kinds import BY_FIELD, KINDS

POD = BY_FIELD["pod"]
LEASE = BY_FIELD["lease"]


# ---------------------------------------------------------------- routes


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("/api/v1/namespaces/default/pods", ("pods", "default", "", "")),
        ("/api/v1/namespaces/default/pods/web", ("pods", "default", "web", "")),
        ("/api/v1/namespaces/default/pods/web/binding", ("pods", "default", "web", "binding")),
        ("/api/v1/pods", ("pods", "", "", "")),
        ("/api/v1/nodes/n1/status", ("nodes", "", "n1", "status")),
        ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x", ("leases", "kube-system", "x", "")),
        ("/apis/scheduling.k8s.io/v1/priorityclasses/high", ("priorityclasses", "", "high", "")),
    ],
)
def test_routes(path: str, want: tuple[str, str, str, str]) -> None:
    t = routes.parse(path)
    assert t is not None and (t.kind.resource, t.namespace, t.name, t.subresource) == want


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/deployments",
        "/api/v1/leases",  # wrong group
        "/apis/coordination.k8s.io/v1/pods",
        "/api/v1/namespaces/x/nodes",  # cluster-scoped under a namespace
        "/api/v1/namespaces/default/pods/web/exec",
        "/api/v1/nodes/n1/binding",
        "/api/v1/namespaces/default/pods/web/status/extra",
    ],
)
def test_routes_not_found(path: str) -> None:
    with pytest.raises(NotFound):
        routes.parse(path)


def test_non_resource_paths() -> None:
    for path in ("/api", "/api/v1", "/apis", "/apis/coordination.k8s.io", "/version", "/healthz"):
        assert routes.parse(path) is None


# ---------------------------------------------------------------- discovery


def test_discovery_generated_from_kinds() -> None:
    listed = {
        r["name"]: r
        for gv in ["v1", *discovery.group_versions()]
        for r in (discovery.resource_list(gv) or {"resources": []})["resources"]
    }
    for k in KINDS:
        row = listed[k.resource]
        assert (row["kind"], row["namespaced"], row["singularName"]) == (k.kind, k.namespaced, k.kind.lower())
        assert "watch" in row["verbs"] and "patch" in row["verbs"]
    assert listed["pods"]["shortNames"] == ["po"] and "shortNames" not in listed["leases"]
    assert listed["pods/binding"]["verbs"] == ["create"]
    assert (listed["pods/eviction"]["group"], listed["pods/eviction"]["kind"]) == ("policy", "Eviction")
    assert listed["nodes/status"]["kind"] == "Node"
    assert discovery.resource_list("batch/v1") is None
    groups = discovery.api_group_list()["groups"]
    assert [g["name"] for g in groups] == ["coordination.k8s.io", "scheduling.k8s.io", "apps", "policy"]
    assert "poddisruptionbudgets" in {r["name"] for r in discovery.resource_list("policy/v1")["resources"]}
    assert discovery.version_info()["gitVersion"] == "v1.34.0-kse"


# ---------------------------------------------------------------- params


class Q(dict):  # a query mapping with aiohttp's getall
    def getall(self, key: str, default: list[str]) -> list[str]:
        return [self[key]] if key in self else default


def test_params() -> None:
    assert params.flag(Q(watch="true"), "watch") and params.flag(Q(watch="1"), "watch")
    assert not params.flag(Q(), "watch")
    with pytest.raises(BadRequest, match="watch"):
        params.flag(Q(watch="yes"), "watch")
    assert params.integer(Q(limit="5"), "limit") == 5
    with pytest.raises(BadRequest, match="limit"):
        params.integer(Q(limit="-1"), "limit")
    assert params.dry_run(Q(dryRun="All")) and not params.dry_run(Q())
    with pytest.raises(BadRequest, match="dryRun"):
        params.dry_run(Q(dryRun="Some"))
    assert params.resource_version_match(Q(resourceVersion="5", resourceVersionMatch="Exact")) == (
        "5",
        "Exact",
    )
    for bad in (Q(resourceVersionMatch="Exact"), Q(resourceVersion="0", resourceVersionMatch="Exact"),
                Q(resourceVersion="1", resourceVersionMatch="Newest")):  # fmt: skip
        with pytest.raises(BadRequest, match="resourceVersionMatch"):
            params.resource_version_match(bad)
    assert params.list_resource_version("5", "Exact") == "5"
    assert params.list_resource_version("5", "") == "" and params.list_resource_version("0", "") == "0"


def test_fence_header() -> None:
    token = params.fence_token("kube-system/kube-scheduler,sched-1_abc,3")
    assert token is not None
    assert (token.lease_namespace, token.lease_name, token.holder_identity, token.lease_transitions) == (
        "kube-system", "kube-scheduler", "sched-1_abc", 3
    )  # fmt: skip
    assert params.fence_token("ns/l,a,b,7").holder_identity == "a,b"  # type: ignore[union-attr]
    assert params.fence_token(None) is None and params.fence_token("") is None
    for bad in ("garbage", "ns/l,holder", "l,holder,1", "ns/l,holder,x"):
        with pytest.raises(BadRequest, match="X-Kse-Fence"):
            params.fence_token(bad)


# ---------------------------------------------------------------- patches


def test_merge_patch_rfc7386() -> None:
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    original = {"a": {"b": 1}}
    merge_patch(original, {"a": {"b": 2}})
    assert original == {"a": {"b": 1}}


def test_json_patch_rfc6902() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "d"}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/b/1", "value": 9},
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "replace", "path": "/c", "value": "e"},
            {"op": "copy", "from": "/c", "path": "/f"},
            {"op": "move", "from": "/f", "path": "/g"},
            {"op": "remove", "path": "/a/b/0"},
            {"op": "test", "path": "/g", "value": "e"},
            {"op": "add", "path": "/x~1y", "value": 1},
        ],
    )
    assert out == {"a": {"b": [9, 2, 3]}, "c": "e", "g": "e", "x/y": 1}
    assert doc == {"a": {"b": [1, 2]}, "c": "d"}  # untouched
    for ops in (
        [{"op": "remove", "path": "/nope"}],
        [{"op": "replace", "path": "/nope", "value": 1}],
        [{"op": "test", "path": "/c", "value": "x"}],
        [{"op": "add", "path": "/a/b/7", "value": 1}],
        [{"op": "frobnicate", "path": "/c"}],
        [{"op": "add", "path": "c", "value": 1}],
        [{"path": "/c"}],
        {"op": "add"},
    ):
        with pytest.raises(PatchError):
            json_patch(doc, ops)


# ---------------------------------------------------------------- codec, status


def test_body_decoding_and_field_validation() -> None:
    _, msg, unknown = body_object(
        b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelecter":{},'
        b'"containers":[{"name":"c","image":"i","livenessProbe":{}}]}}',
        POD,
    )
    assert msg.metadata.name == "p" and unknown == ["spec.nodeSelecter", "spec.containers[0].livenessProbe"]  # type: ignore[attr-defined]
    assert str(strict_error(unknown[:1])) == 'strict decoding error: unknown field "spec.nodeSelecter"'
    assert warnings_for(["a.b"]) == ['299 - "unknown field \\"a.b\\""']
    for bad in (b"", b"{", b"[]", b'{"spec": {"containers": "x"}}'):
        with pytest.raises(BadRequest):
            body_object(bad, POD)


def test_status_mapping() -> None:
    pod = Subject(POD, "web")
    code, body = http_error(errors.not_found(POD, "web"), pod)
    assert (code, body["reason"], body["details"]) == (404, "NotFound", {"name": "web", "kind": "pods"})
    assert http_error(errors.already_exists(POD, "web"), pod)[0] == 409
    assert http_error(Conflict("x"), pod)[1]["reason"] == "Conflict"
    assert http_error(Gone("too old"), pod)[:1] == (410,)
    assert http_error(Gone("too old"), pod)[1]["reason"] == "Expired"
    assert http_error(FencedOff("fenced: ..."), pod)[0] == 409
    code, body = http_error(Unavailable("Too large resource version: 9, current: 3"), pod)
    assert (code, body["reason"]) == (504, "Timeout")
    code, body = http_error(
        errors.invalid(LEASE, "l", ["spec.holderIdentity: Required value", "x: Forbidden: no"])
    )
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["details"] == {
        "name": "l",
        "group": "coordination.k8s.io",
        "kind": "Lease",
        "causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.holderIdentity"},
            {"reason": "FieldValueForbidden", "message": "Forbidden: no", "field": "x"},
        ],
    }
    assert http_error(EntityTooLarge("big"))[0] == 413
    code, body = http_error(TooManyRequests("slow down"))
    assert (code, body["details"]) == (429, {"retryAfterSeconds": 1})
    code, body = http_error(RuntimeError("boom"))
    assert (code, body["reason"]) == (500, "InternalError") and "boom" not in body["message"]
    assert cause_of('spec.x: Invalid value: "y": bad')["reason"] == "FieldValueInvalid"


# ---------------------------------------------------------------- tables


def test_human_duration() -> None:
    cases = {0: "0s", 59: "59s", 119: "119s", 120: "2m", 150: "2m30s", 600: "10m", 3 * 3600: "3h",
             3 * 3600 + 60: "3h1m", 10 * 3600: "10h", 50 * 3600: "2d2h", 30 * 86400: "30d",
             3 * 365 * 86400: "3y"}  # fmt: skip
    for seconds, text in cases.items():
        assert tables.human_duration(seconds) == text, seconds


def test_tables() -> None:
    pod = {
        "metadata": {"name": "p", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"ready": True, "restartCount": 2}, {"restartCount": 1}],
        },
    }
    t = tables.table("pods", [pod], "Metadata", {"resourceVersion": "5"})
    (row,) = t["rows"]
    assert row["cells"][:4] == ["p", "1/2", "Running", 3] and row["cells"][6] == "n1"
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": pod["metadata"],
    }
    assert "object" not in tables.table("pods", [pod], "None")["rows"][0]
    gated_cond = {"type": "PodScheduled", "reason": "SchedulingGated"}
    gated = {"metadata": {"name": "g"}, "spec": {"containers": []},
             "status": {"phase": "Pending", "conditions": [gated_cond]}}  # fmt: skip
    assert tables.table("pods", [gated], "None")["rows"][0]["cells"][2] == "SchedulingGated"
    not_ready = {"conditions": [{"type": "Ready", "status": "False"}]}
    node = {"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": True}, "status": not_ready}  # fmt: skip
    cells = tables.table("nodes", [node], "None")["rows"][0]["cells"]
    assert cells[1:3] == ["NotReady,SchedulingDisabled", "control-plane"]
    assert tables.wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert not tables.wants_table("application/json")
    with pytest.raises(BadRequest):
        tables.include_object("All")
    for k in KINDS:
        assert k.resource in tables.COLUMNS


# ---------------------------------------------------------------- kubeconfig


def test_kubeconfig_references_files_by_path(tmp_path: Path) -> None:
    for name in ("ca.crt", "a.crt", "a.key"):
        (tmp_path / name).write_text("x")
    path = write_kubeconfig(
        tmp_path / "kc" / "config",
        "127.0.0.1:6444",
        tmp_path / "ca.crt",
        tmp_path / "a.crt",
        tmp_path / "a.key",
        "admin",
    )
    cfg = yaml.safe_load(path.read_text())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (cluster,) = cfg["clusters"]
    assert cluster["cluster"] == {
        "server": "https://127.0.0.1:6444",
        "certificate-authority": str(tmp_path / "ca.crt"),
        "tls-server-name": "localhost",
    }
    (user,) = cfg["users"]
    assert user == {
        "name": "admin",
        "user": {"client-certificate": str(tmp_path / "a.crt"), "client-key": str(tmp_path / "a.key")},
    }
    assert cfg["current-context"] == "admin@kse" and cfg["contexts"][0]["context"] == {
        "cluster": "kse",
        "user": "admin",
    }


def test_binding_body() -> None:
    from apiserver_mock.http.codec import binding_from

    b = binding_from(
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "uid": "u"},
         "target": {"kind": "Node", "name": "n1"}, "extra": 1}
    )  # fmt: skip
    assert (b.metadata.name, b.metadata.uid, b.target.kind, b.target.name) == ("p", "u", "Node", "n1")
    for bad in ([], {"target": "n1"}, {"target": {"name": 3}}, {"metadata": {"name": None, "uid": 1}}):
        with pytest.raises(BadRequest, match=r"Binding"):
            binding_from(bad)
