"""The Kubernetes HTTP API over real HTTPS against a real `kse apiserver` (raw requests)."""

from __future__ import annotations

import asyncio

import pytest

from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import http_client, read_event

pytestmark = pytest.mark.integration


async def test_discovery_and_version(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, body, _ = await http.call("GET", "/api")
        assert code == 200 and body["kind"] == "APIVersions" and body["versions"] == ["v1"]
        code, body, _ = await http.call("GET", "/api/v1")
        names = {r["name"] for r in body["resources"]}
        assert {
            "pods",
            "pods/binding",
            "pods/status",
            "pods/eviction",
            "nodes",
            "nodes/status",
            "events",
        } <= names
        code, body, _ = await http.call("GET", "/apis")
        groups = {g["name"] for g in body["groups"]}
        assert groups == {"coordination.k8s.io", "scheduling.k8s.io", "apps", "policy"}
        code, body, _ = await http.call("GET", "/apis/coordination.k8s.io/v1")
        assert [r["name"] for r in body["resources"]] == ["leases"]
        code, body, _ = await http.call("GET", "/version")
        assert body["gitVersion"] == "v1.34.0-kse" and body["major"] == "1" and body["minor"] == "34"
        for path in ("/healthz", "/livez", "/readyz"):
            code, body, _ = await http.call("GET", path)
            assert (code, body) == (200, "ok")


NS_PODS = "/api/v1/namespaces/default/pods"


def pod_body(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec},
    }


async def test_crud_and_errors(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, created, _ = await http.call("POST", NS_PODS, pod_body("web"))
        assert code == 201, created
        assert created["metadata"]["namespace"] == "default" and created["metadata"]["uid"]
        assert created["status"]["phase"] == "Pending"
        rv = created["metadata"]["resourceVersion"]

        code, got, _ = await http.call("GET", f"{NS_PODS}/web")
        assert code == 200 and got["metadata"]["resourceVersion"] == rv and got["kind"] == "Pod"

        code, body, _ = await http.call("POST", NS_PODS, pod_body("web"))
        assert (code, body["reason"]) == (409, "AlreadyExists")
        assert body["message"] == 'pods "web" already exists'
        assert body["details"] == {"name": "web", "kind": "pods"}

        code, body, _ = await http.call("GET", f"{NS_PODS}/nope")
        assert (code, body["reason"], body["message"]) == (404, "NotFound", 'pods "nope" not found')
        assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == 404

        # PUT with a stale resourceVersion: 409 Conflict with upstream's message.
        stale = dict(got)
        stale["metadata"] = {**got["metadata"], "labels": {"app": "v2"}}
        code, updated, _ = await http.call("PUT", f"{NS_PODS}/web", stale)
        assert code == 200 and updated["metadata"]["labels"] == {"app": "v2"}
        code, body, _ = await http.call("PUT", f"{NS_PODS}/web", stale)
        assert (code, body["reason"]) == (409, "Conflict")
        assert body["message"].startswith(
            'Operation cannot be fulfilled on pods "web": the object has been modified'
        )

        # 422 Invalid naming each field.
        bad = pod_body("bad")
        bad["spec"]["containers"] = [{"name": "c"}]
        code, body, _ = await http.call("POST", NS_PODS, bad)
        assert (code, body["reason"]) == (422, "Invalid"), body
        assert body["details"]["kind"] == "Pod" and body["details"]["name"] == "bad"
        fields = {c["field"]: c["reason"] for c in body["details"]["causes"]}
        assert fields == {"spec.containers[0].image": "FieldValueRequired"}

        # Malformed JSON, wrong shapes: 400, nothing written.
        code, body, _ = await http.call("POST", NS_PODS, raw=b'{"metadata": ')
        assert (code, body["reason"]) == (400, "BadRequest")
        code, body, _ = await http.call(
            "POST", NS_PODS, {"metadata": {"name": "x"}, "spec": {"containers": "no"}}
        )
        assert (code, body["reason"]) == (400, "BadRequest") and "spec.containers" in body["message"]
        code, body, _ = await http.call("POST", NS_PODS, raw=b"[1, 2]")
        assert code == 400
        # Oversized body: 413.
        code, body, _ = await http.call("POST", NS_PODS, raw=b" " * (4 * 1024 * 1024))
        assert (code, body["reason"]) == (413, "RequestEntityTooLarge")
        # Unknown resource / path: 404 Status.
        code, body, _ = await http.call("GET", "/api/v1/namespaces/default/statefulsets")
        assert (code, body["reason"]) == (404, "NotFound")
        code, body, _ = await http.call("GET", "/apis/batch/v1")
        assert code == 404

        # generateName
        gen = pod_body("")
        gen["metadata"] = {"generateName": "gen-"}
        code, body, _ = await http.call("POST", NS_PODS, gen)
        assert (
            code == 201 and body["metadata"]["name"].startswith("gen-") and len(body["metadata"]["name"]) == 9
        )

        # dryRun=All writes nothing.
        code, body, _ = await http.call("POST", f"{NS_PODS}?dryRun=All", pod_body("dry"))
        assert code == 201 and body["metadata"]["name"] == "dry"
        code, _, _ = await http.call("GET", f"{NS_PODS}/dry")
        assert code == 404

        # DELETE with a failing precondition, then for real.
        code, body, _ = await http.call(
            "DELETE", f"{NS_PODS}/web", {"preconditions": {"uid": "not-the-uid"}, "gracePeriodSeconds": 0}
        )
        assert (code, body["reason"]) == (409, "Conflict") and "Precondition failed: UID" in body["message"]
        code, body, _ = await http.call(
            "DELETE", f"{NS_PODS}/web?gracePeriodSeconds=0&propagationPolicy=Background"
        )
        assert code == 200 and body["metadata"]["name"] == "web"
        code, body, _ = await http.call("DELETE", f"{NS_PODS}/web?propagationPolicy=Sideways")
        assert code == 400 and "propagationPolicy" in body["message"]
        for bad in ({"preconditions": "x"}, {"gracePeriodSeconds": "soon"}, {"dryRun": ["Some"]}, [1]):
            code, body, _ = await http.call("DELETE", f"{NS_PODS}/gen-x", bad)
            assert code == 400, (bad, body)


async def test_field_validation(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        body = pod_body("fv", nodeSelecter={"a": "b"})
        code, out, _ = await http.call("POST", f"{NS_PODS}?fieldValidation=Strict", body)
        assert (code, out["reason"]) == (400, "BadRequest")
        assert out["message"] == 'strict decoding error: unknown field "spec.nodeSelecter"'
        code, out, headers = await http.call("POST", NS_PODS, body)
        assert code == 201
        assert headers.getall("Warning") == ['299 - "unknown field \\"spec.nodeSelecter\\""']
        body["metadata"]["name"] = "fv2"
        code, out, headers = await http.call("POST", f"{NS_PODS}?fieldValidation=Ignore", body)
        assert code == 201 and "Warning" not in headers
        code, out, _ = await http.call("POST", f"{NS_PODS}?fieldValidation=Loose", body)
        assert code == 400 and "fieldValidation" in out["message"]


async def test_list_selectors_and_paging(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        for i in range(5):
            body = pod_body(f"p{i}")
            body["metadata"]["labels"] = {"idx": str(i), "even": str(i % 2 == 0).lower()}
            if i < 2:
                body["spec"]["nodeName"] = "node-a"
            code, _, _ = await http.call("POST", NS_PODS, body)
            assert code == 201
        code, lst, _ = await http.call("GET", f"{NS_PODS}?labelSelector=even%3Dtrue")
        assert lst["kind"] == "PodList" and lst["apiVersion"] == "v1"
        assert [p["metadata"]["name"] for p in lst["items"]] == ["p0", "p2", "p4"]
        code, lst, _ = await http.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a")
        assert [p["metadata"]["name"] for p in lst["items"]] == ["p0", "p1"]
        code, lst, _ = await http.call(
            "GET", f"{NS_PODS}?fieldSelector=status.phase%3DPending,metadata.name%3Dp3"
        )
        assert [p["metadata"]["name"] for p in lst["items"]] == ["p3"]
        code, body, _ = await http.call("GET", f"{NS_PODS}?fieldSelector=spec.bogus%3Dx")
        assert code == 400 and "field label not supported" in body["message"]
        code, body, _ = await http.call("GET", f"{NS_PODS}?labelSelector=%3D%3D%3D")
        assert code == 400

        names = []
        token = ""
        while True:
            code, page, _ = await http.call(
                "GET", f"{NS_PODS}?limit=2" + (f"&continue={token}" if token else "")
            )
            assert code == 200 and len(page["items"]) <= 2
            names += [p["metadata"]["name"] for p in page["items"]]
            token = page["metadata"].get("continue", "")
            if not token:
                break
            assert page["metadata"]["remainingItemCount"] >= 1
        assert names == [f"p{i}" for i in range(5)]

        rv = lst["metadata"]["resourceVersion"]
        code, exact, _ = await http.call("GET", f"{NS_PODS}?resourceVersion={rv}&resourceVersionMatch=Exact")
        assert code == 200 and exact["metadata"]["resourceVersion"] == rv and len(exact["items"]) == 5
        code, body, _ = await http.call("GET", f"{NS_PODS}?resourceVersionMatch=Exact")
        assert code == 400
        code, body, _ = await http.call(
            "GET", f"{NS_PODS}?resourceVersion=0&resourceVersionMatch=NotOlderThan"
        )
        assert code == 200 and len(body["items"]) == 5

        # DELETE collection by selector.
        now = "gracePeriodSeconds=0"  # p1 is bound: without it, it would only start terminating
        code, gone, _ = await http.call("DELETE", f"{NS_PODS}?labelSelector=even%3Dfalse&{now}")
        assert code == 200 and sorted(p["metadata"]["name"] for p in gone["items"]) == ["p1", "p3"]
        code, lst, _ = await http.call("GET", NS_PODS)
        assert [p["metadata"]["name"] for p in lst["items"]] == ["p0", "p2", "p4"]


async def test_watch_resume_bookmarks_timeout_and_expired(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        _code, lst, _ = await http.call("GET", NS_PODS)
        start = lst["metadata"]["resourceVersion"]
        _, a, _ = await http.call("POST", NS_PODS, pod_body("a"))
        await http.call("POST", NS_PODS, pod_body("b"))
        resp = await http.stream(f"{NS_PODS}?watch=true&resourceVersion={start}&allowWatchBookmarks=true")
        try:
            assert resp.status == 200 and resp.headers["Content-Type"].startswith("application/json")
            e1 = await read_event(resp)
            e2 = await read_event(resp)
            assert (e1["type"], e1["object"]["metadata"]["name"]) == ("ADDED", "a")
            assert e1["object"]["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
            assert (e2["type"], e2["object"]["metadata"]["name"]) == ("ADDED", "b")
            await http.call("DELETE", f"{NS_PODS}/a")
            e3 = await read_event(resp)
            while e3["type"] == "BOOKMARK":
                e3 = await read_event(resp)
            assert (e3["type"], e3["object"]["metadata"]["name"]) == ("DELETED", "a")
            bookmark = await read_event(resp)  # idle: a bookmark arrives (interval 1 s)
            assert bookmark["type"] == "BOOKMARK" and bookmark["object"]["kind"] == "Pod"
            assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(
                e3["object"]["metadata"]["resourceVersion"]
            )
        finally:
            resp.close()

        # A watch on one object's path sees only that object.
        resp = await http.stream(f"{NS_PODS}/b?watch=true&resourceVersion={start}")
        try:
            e = await read_event(resp)
            assert (e["type"], e["object"]["metadata"]["name"]) == ("ADDED", "b")
        finally:
            resp.close()

        # sendInitialEvents: the current objects, then the annotated bookmark.
        resp = await http.stream(
            f"{NS_PODS}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
            "&resourceVersionMatch=NotOlderThan&resourceVersion=0"
        )
        try:
            e = await read_event(resp)
            assert (e["type"], e["object"]["metadata"]["name"]) == ("ADDED", "b")
            end = await read_event(resp)
            assert end["type"] == "BOOKMARK"
            assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        finally:
            resp.close()

        # timeoutSeconds ends the stream cleanly.
        resp = await http.stream(f"{NS_PODS}?watch=true&timeoutSeconds=1")
        try:
            assert await read_event(resp, timeout_s=10) is None
        finally:
            resp.close()

        # A resourceVersion older than the history: 200, then one ERROR event with 410 Expired.
        etcd = await apiserver.etcd()
        try:
            res = await etcd.range(b"/", b"\x00", limit=1)
            await etcd.compact(res.revision)
        finally:
            await etcd.close()
        resp = await http.stream(f"{NS_PODS}?watch=true&resourceVersion=1")
        try:
            assert resp.status == 200
            err = await read_event(resp)
            assert err["type"] == "ERROR"
            assert err["object"]["code"] == 410 and err["object"]["reason"] == "Expired"
            assert "too old resource version" in err["object"]["message"]
            assert await read_event(resp) is None
        finally:
            resp.close()


async def test_watch_label_selector_added_and_deleted(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, p, _ = await http.call("POST", NS_PODS, pod_body("sel"))
        rv = p["metadata"]["resourceVersion"]
        resp = await http.stream(f"{NS_PODS}?watch=true&resourceVersion={rv}&labelSelector=tier%3Dfront")
        try:
            p["metadata"]["labels"] = {"tier": "front"}
            code, p, _ = await http.call("PUT", f"{NS_PODS}/sel", p)
            assert code == 200
            e = await read_event(resp)
            assert (e["type"], e["object"]["metadata"]["labels"]) == ("ADDED", {"tier": "front"})
            p["metadata"]["labels"] = {"tier": "back"}
            code, p, _ = await http.call("PUT", f"{NS_PODS}/sel", p)
            e = await read_event(resp)
            assert e["type"] == "DELETED"
        finally:
            resp.close()


TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)


async def test_table_output(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, _, _ = await http.call("POST", NS_PODS, pod_body("t1", nodeName="node-a"))
        code, table, _ = await http.call("GET", NS_PODS, headers={"Accept": TABLE})
        assert code == 200 and table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
        cols = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
        assert cols == [
            ("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0),
            ("IP", 1), ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1),
        ]  # fmt: skip
        (row,) = table["rows"]
        assert row["cells"][:4] == ["t1", "0/1", "Pending", 0]
        assert row["cells"][5:] == ["<none>", "node-a", "<none>", "<none>"]
        assert row["object"]["kind"] == "PartialObjectMetadata"
        assert row["object"]["metadata"]["name"] == "t1"
        assert table["metadata"]["resourceVersion"]
        code, one, _ = await http.call("GET", f"{NS_PODS}/t1?includeObject=Object", headers={"Accept": TABLE})
        assert one["kind"] == "Table" and one["rows"][0]["object"]["kind"] == "Pod"
        code, lease_table, _ = await http.call(
            "GET", "/apis/coordination.k8s.io/v1/leases", headers={"Accept": TABLE}
        )
        assert [c["name"] for c in lease_table["columnDefinitions"]] == ["Name", "Holder", "Age"]


async def test_patch_types(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, _, _ = await http.call("POST", NS_PODS, pod_body("pt"))
        code, out, _ = await http.call(
            "PATCH", f"{NS_PODS}/pt", {"metadata": {"labels": {"x": "1", "app": None}}},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        assert code == 200 and out["metadata"]["labels"] == {"x": "1"}
        code, out, _ = await http.call(
            "PATCH", f"{NS_PODS}/pt",
            [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
             {"op": "replace", "path": "/metadata/labels/x", "value": "2"}],
            content_type="application/json-patch+json",
        )  # fmt: skip
        assert (
            code == 200
            and out["metadata"]["annotations"] == {"a": "b"}
            and out["metadata"]["labels"] == {"x": "2"}
        )
        code, out, _ = await http.call(
            "PATCH", f"{NS_PODS}/pt",
            {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
        # tolerations are atomic: the list is replaced, then DefaultTolerationSeconds (which admits
        # updates too) appends its two again, so the update only adds a toleration, as it must.
        assert code == 200 and out["spec"]["tolerations"] == [
            {"key": "k", "operator": "Exists"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ]
        # A patch that does not apply, malformed patches, a type that is not served.
        code, body, _ = await http.call(
            "PATCH", f"{NS_PODS}/pt", [{"op": "remove", "path": "/metadata/nope"}],
            content_type="application/json-patch+json",
        )  # fmt: skip
        assert (code, body["reason"]) == (400, "BadRequest")
        code, body, _ = await http.call(
            "PATCH", f"{NS_PODS}/pt", raw=b"{nope", content_type="application/merge-patch+json"
        )
        assert code == 400
        code, body, _ = await http.call("PATCH", f"{NS_PODS}/pt", {}, content_type="text/plain")
        assert (code, body["reason"]) == (415, "UnsupportedMediaType")
        # A patch that makes the object invalid: 422 and nothing written.
        code, body, _ = await http.call(
            "PATCH", f"{NS_PODS}/pt", {"spec": {"containers": [{"name": "c", "image": ""}]}},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        assert code == 422, body
        code, got, _ = await http.call("GET", f"{NS_PODS}/pt")
        assert got["spec"]["containers"][0]["image"] == "nginx"
        # The patch pins a stale resourceVersion: 409, no retry.
        code, body, _ = await http.call(
            "PATCH", f"{NS_PODS}/pt", {"metadata": {"resourceVersion": "1", "labels": {"y": "1"}}},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        assert (code, body["reason"]) == (409, "Conflict")


async def test_subresources(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
                "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}  # fmt: skip
        code, _, _ = await http.call("POST", "/api/v1/nodes", node)
        assert code == 201
        code, _, _ = await http.call("POST", NS_PODS, pod_body("bind-me"))
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bind-me"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}  # fmt: skip
        code, body, _ = await http.call("POST", f"{NS_PODS}/bind-me/binding", binding)
        assert (code, body["status"]) == (201, "Success"), body
        code, pod, _ = await http.call("GET", f"{NS_PODS}/bind-me")
        assert pod["spec"]["nodeName"] == "node-a"
        code, body, _ = await http.call("POST", f"{NS_PODS}/bind-me/binding", binding)
        assert (code, body["reason"]) == (409, "Conflict") and "already assigned" in body["message"]

        pod["status"]["phase"] = "Running"
        code, out, _ = await http.call("PUT", f"{NS_PODS}/bind-me/status", pod)
        assert code == 200 and out["status"]["phase"] == "Running"
        code, out, _ = await http.call(
            "PATCH", "/api/v1/nodes/node-a/status",
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        assert code == 200 and out["status"]["conditions"][0]["type"] == "Ready"

        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "bind-me"}}
        code, body, _ = await http.call("POST", f"{NS_PODS}/bind-me/eviction", eviction)
        assert (code, body["status"]) == (201, "Success"), body
        code, pod, _ = await http.call("GET", f"{NS_PODS}/bind-me")  # a bound pod goes gracefully
        assert code == 200 and pod["metadata"]["deletionGracePeriodSeconds"] == 30
        assert pod["metadata"]["deletionTimestamp"]


async def test_leases_optimistic_concurrency_and_fencing_header(apiserver: ApiServer):
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    async with http_client(apiserver) as http:
        spec = {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0}
        meta = {"name": "lead"}
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}
        code, created, _ = await http.call("POST", leases, lease)
        assert code == 201, created
        created["spec"]["holderIdentity"] = "b"
        code, _, _ = await http.call("PUT", f"{leases}/lead", created)
        assert code == 200
        code, body, _ = await http.call("PUT", f"{leases}/lead", created)  # same (stale) resourceVersion
        assert code == 409
        # A write fenced with the current holder and transitions lands; a stale token is refused.
        ok = {"X-Kse-Fence": "kube-system/lead,b,0"}
        code, _, _ = await http.call("POST", NS_PODS, pod_body("fenced-ok"), headers=ok)
        assert code == 201
        stale = {"X-Kse-Fence": "kube-system/lead,a,0"}
        code, body, _ = await http.call("POST", NS_PODS, pod_body("fenced-no"), headers=stale)
        assert code == 409 and body["message"].startswith("fenced: lease kube-system/lead is held by")
        code, _, _ = await http.call("GET", f"{NS_PODS}/fenced-no")
        assert code == 404
        code, body, _ = await http.call("POST", NS_PODS, pod_body("x"), headers={"X-Kse-Fence": "garbage"})
        assert code == 400 and "X-Kse-Fence" in body["message"]


async def test_http_writes_are_audited_like_grpc(apiserver_factory, tmp_path):
    from kse.audit import read_audit_log

    audit = tmp_path / "audit.jsonl"
    server = await apiserver_factory("--audit-log", str(audit))
    async with http_client(server) as http:
        code, pod, _ = await http.call("POST", NS_PODS, pod_body("audited"))
        assert code == 201
        code, _, _ = await http.call("POST", NS_PODS, pod_body("audited"))
        assert code == 409
        code, _, _ = await http.call("GET", f"{NS_PODS}/audited")  # reads are not audited
    async with http_client(server, "scheduler-1") as http:
        code, _, _ = await http.call("DELETE", "/api/v1/nodes/x")
        assert code == 403
    records = [r for r in read_audit_log(audit) if r.user != "system:apiserver"]  # its namespaces
    summary = [(r.user, r.verb, r.resource, r.name, r.code) for r in records]
    assert summary == [
        ("kse:admin", "create", "pods", "audited", "OK"),
        ("kse:admin", "create", "pods", "audited", "ALREADY_EXISTS"),
        ("system:kube-scheduler", "delete", "nodes", "x", "PERMISSION_DENIED"),
    ]
    assert (
        records[0].revision == int(pod["metadata"]["resourceVersion"])
        and records[0].uid == pod["metadata"]["uid"]
    )


async def test_too_many_requests_answers_429_with_retry_after(apiserver_factory):
    server = await apiserver_factory("--http-max-inflight", "1")
    async with http_client(server) as http:
        # Consistent lists wait for etcd, so with 30 in flight at once all but the first find the
        # single slot taken; watches are long-running and do not count.
        watch_resp = await http.stream(f"{NS_PODS}?watch=true")
        try:
            results = await asyncio.gather(*(http.call("GET", NS_PODS) for _ in range(30)))
        finally:
            watch_resp.close()
    codes = [code for code, _, _ in results]
    assert set(codes) == {200, 429}, codes
    _, body, headers = next(r for r in results if r[0] == 429)
    assert body["reason"] == "TooManyRequests" and headers["Retry-After"] == "1"
    assert body["details"] == {"retryAfterSeconds": 1}


C = b'[{"name": "c", "image": "i"}]'
MALFORMED = [
    b"",
    b"null",
    b"42",
    b'"pod"',
    b"{",
    b"\xff\xfe",
    b'{"metadata": "x"}',
    b'{"metadata": {"name": ["a"]}}',
    b'{"metadata": {"name": "m", "labels": {"a": {"b": 1}}}, "spec": {"containers": ' + C + b"}}",
    b'{"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "x"}]}]}}',
    b'{"metadata": {"name": "m"}, "spec": {"containers": [null, 3]}}',
    b'{"metadata": {"name": "m"}, "spec": {"priority": 1e400}}',
    b'{"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "x"}}}]}}',
    b'{"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "m"}, "spec": {"containers": ' + C + b"}}",
    b'{"kind": "Node", "metadata": {"name": "m"}}',
    b'{"metadata": {"name": "M_bad!"}, "spec": {"containers": ' + C + b"}}",
    b'{"metadata": {"name": "m", "namespace": "other"}, "spec": {"containers": ' + C + b"}}",
    b"[" * 10000 + b"]" * 10000,
]
MALFORMED_PATCHES = [
    ("application/json-patch+json", b'[{"op": "replace", "path": "", "value": []}]'),
    ("application/json-patch+json", b'[{"op": "replace", "path": "/metadata", "value": "x"}]'),
    ("application/json-patch+json", b'[{"op": "add", "path": "/spec/containers/0/ports", "value": {}}]'),
    ("application/json-patch+json", b'[{"op": "move", "from": "/spec", "path": "/spec/x"}]'),
    ("application/json-patch+json", b'{"op": "add"}'),
    ("application/merge-patch+json", b'{"metadata": {"name": "renamed"}}'),
    ("application/merge-patch+json", b'{"spec": {"containers": null}}'),
    ("application/merge-patch+json", b'{"spec": "x"}'),
    ("application/strategic-merge-patch+json", b'{"spec": {"containers": [{"$patch": "bogus"}]}}'),
    ("application/strategic-merge-patch+json", b"[]"),
    ("application/apply-patch+yaml", b"a: [: b"),
    ("application/apply-patch+yaml", b"- 1\n- 2\n"),
    ("application/apply-patch+yaml", b"a: " + b"[" * 5000 + b"]" * 5000),
    ("application/merge-patch+json", b'{"metadata": ' * 900 + b"1" + b"}" * 900),
]


async def test_malformed_input_is_refused_and_writes_nothing(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, _, _ = await http.call("POST", NS_PODS, pod_body("keep"))
        assert code == 201
        _, before, _ = await http.call("GET", f"{NS_PODS}/keep")
        for body in MALFORMED:
            targets = (("POST", NS_PODS), ("PUT", f"{NS_PODS}/keep"), ("POST", f"{NS_PODS}/keep/binding"))
            for method, path in targets:
                code, out, _ = await http.call(method, path, raw=body)
                assert 400 <= code < 500, (method, body[:80], code, out)
                assert out["kind"] == "Status" and out["message"], out
        for content_type, body in MALFORMED_PATCHES:
            q = "?fieldManager=t" if "apply" in content_type else ""
            code, out, _ = await http.call("PATCH", f"{NS_PODS}/keep{q}", raw=body, content_type=content_type)
            assert 400 <= code < 500, (content_type, body, code, out)
        _, after, _ = await http.call("GET", f"{NS_PODS}/keep")
        assert after == before  # not a byte of it changed
        _, lst, _ = await http.call("GET", NS_PODS)
        assert [p["metadata"]["name"] for p in lst["items"]] == ["keep"]
        assert apiserver.running
    assert "Traceback" not in apiserver.log() and "internal error" not in apiserver.log()


async def test_a_watcher_that_stops_reading_is_cut_off_without_slowing_the_others(apiserver_factory):
    server = await apiserver_factory("--watch-queue-length", "4", "--watch-send-timeout", "2")
    big = "x" * 200_000
    async with http_client(server) as http:
        _, lst, _ = await http.call("GET", NS_PODS)
        start = lst["metadata"]["resourceVersion"]
        stalled = await http.stream(f"{NS_PODS}?watch=true&resourceVersion={start}")
        live = await http.stream(f"{NS_PODS}?watch=true&resourceVersion={start}")
        try:
            names: list[str] = []
            # Write until the server has cut the stalled watcher off. How many 200 kB events that
            # takes depends on the socket buffers the kernel gives the loopback connection (they
            # grow to several MB), so the test does not guess a count: it keeps writing, with a
            # deadline, and the reading watcher must keep up with every write throughout.
            deadline = asyncio.get_running_loop().time() + 60.0
            while not cut_off(server.log()):
                assert asyncio.get_running_loop().time() < deadline, "the stalled watcher was never cut off"
                name = f"big-{len(names)}"
                body = pod_body(name)
                body["metadata"]["annotations"] = {"blob": big}
                code, _, _ = await http.call("POST", NS_PODS, body)
                assert code == 201
                event = await read_event(live)  # the reading watcher keeps up throughout
                assert event is not None and event["object"]["metadata"]["name"] == name
                names.append(name)
            # The stalled watcher's stream was ended: reading it now gives fewer events, then EOF.
            got = 0
            while await read_event(stalled, timeout_s=20) is not None:
                got += 1
            assert got < len(names)
        finally:
            stalled.close()
            live.close()


def cut_off(log: str) -> bool:
    return "closing slow HTTP watcher" in log or "closing stalled HTTP watcher" in log
