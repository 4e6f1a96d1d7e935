"""Regressions for what `kse fuzz apiserver` found: each was an INTERNAL / UNKNOWN / 500 answer (or a
text error page) to bad input, and is now the right status with a message naming what is wrong."""

from __future__ import annotations

import grpc
import pytest

from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, rpc_error, stored_keys
from tests.fixtures.kube import http_client

pytestmark = pytest.mark.integration

METHODS = ("Get", "List", "Create", "Update", "UpdateStatus", "Delete", "Bind", "Evict")
REQUEST_TYPES = {
    "Get": "GetRequest",
    "List": "ListRequest",
    "Create": "WriteRequest",
    "Update": "WriteRequest",
    "UpdateStatus": "WriteRequest",
    "Delete": "DeleteRequest",
    "Bind": "BindRequest",
    "Evict": "EvictRequest",
    "Watch": "WatchRequest",
}
CORRUPT = (
    b"\x0a\xff\xff\xff\x0f" + b"\x00" * 16,  # a length-delimited field longer than the message
    b"\x0a\x02\xff\xfe",  # a string field (resource / object) that is not UTF-8, or a bad nested message
)


@pytest.mark.parametrize("method", [*METHODS, "Watch"])
async def test_undecodable_request_is_invalid_argument(apiserver: ApiServer, method: str):
    channel = await apiserver.channel("admin")
    for payload in CORRUPT:
        path = f"/kse.v1.Resources/{method}"
        if method == "Watch":
            call = channel.unary_stream(path)(payload, timeout=10)
            e = await rpc_error(call.read())
        else:
            e = await rpc_error(channel.unary_unary(path)(payload, timeout=10))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, payload, e.details())
        assert f"the request is not a valid kse.v1.{REQUEST_TYPES[method]}" in e.details()


async def test_daemonset_selector_with_a_bad_operator_is_invalid(apiserver: ApiServer):
    ds = pb.DaemonSet(metadata=pb.ObjectMeta(name="ds", namespace="default"))
    ds.spec.selector.match_expressions.add(key="app", operator="a", values=["x"])
    ds.spec.template.metadata.labels["app"] = "x"
    ds.spec.template.spec.containers.add(name="c", image="i")
    e = await rpc_error(apiserver.stub("admin").Create(pb.WriteRequest(object=pb.Object(daemon_set=ds))))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert 'spec.selector.matchExpressions[0].operator: Unsupported value: "a"' in e.details()
    assert await stored_keys(apiserver, "daemonsets") == []


async def test_http_out_of_range_integers_are_bad_requests(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, body, _ = await http.call(
            "GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=99999999999999999999"
        )
        assert (code, body["reason"]) == (400, "BadRequest"), body
        assert "timeoutSeconds" in body["message"] and "out of range" in body["message"]
        code, body, _ = await http.call("GET", "/api/v1/pods?limit=18446744073709551616")
        assert code == 400 and "limit" in body["message"], body
        fence = {"X-Kse-Fence": "kube-system/kube-scheduler,me,99999999999"}
        code, body, _ = await http.call("DELETE", "/api/v1/namespaces/default/pods/x", headers=fence)
        assert code == 400 and "leaseTransitions is out of range" in body["message"], body


async def test_merge_patch_with_list_metadata_is_not_a_500(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "p"}}
        code, _, _ = await http.call("POST", "/api/v1/namespaces", ns)
        assert code == 201
        code, body, _ = await http.call(
            "PATCH", "/api/v1/namespaces/p", {"metadata": []}, content_type="application/merge-patch+json"
        )
        assert 400 <= code < 500 and body["kind"] == "Status", body


async def test_aiohttp_error_pages_are_statuses(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        code, body, _ = await http.call("CONNECT", "/api/v1/namespaces/default/pods")
        assert code in (404, 405) and isinstance(body, dict) and body["kind"] == "Status", body
        assert body["code"] == code and body["reason"] in ("NotFound", "MethodNotAllowed")


@pytest.mark.parametrize("rv", ["18446744073709551616", "9223372036854775808", " 3", "+3", "1_0", "-1"])
async def test_list_and_watch_with_an_out_of_range_resource_version_are_invalid(
    apiserver: ApiServer, rv: str
):
    stub = apiserver.stub("admin")
    e = await rpc_error(stub.List(pb.ListRequest(resource="pods", resource_version=rv)))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and f'invalid resourceVersion "{rv}"' in e.details()
    e = await rpc_error(stub.Watch(pb.WatchRequest(resource="pods", resource_version=rv)).read())
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and f'invalid resourceVersion "{rv}"' in e.details()


async def test_continue_token_past_int64_is_invalid(apiserver: ApiServer):
    import base64

    token = base64.urlsafe_b64encode(b"99999999999999999999/default/a").decode()
    e = await rpc_error(
        apiserver.stub("admin").List(pb.ListRequest(resource="pods", limit=1, **{"continue": token}))
    )
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "continue key is not valid" in e.details()


async def test_eviction_and_delete_with_a_grace_period_past_int64_are_bad_requests(apiserver: ApiServer):
    async with http_client(apiserver) as http:
        huge = 2**70
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}
        eviction["deleteOptions"] = {"gracePeriodSeconds": huge}
        code, body, _ = await http.call("POST", "/api/v1/namespaces/default/pods/p/eviction", eviction)
        assert (
            code == 400 and "gracePeriodSeconds" in body["message"] and "out of range" in body["message"]
        ), body
        code, body, _ = await http.call(
            "DELETE", "/api/v1/namespaces/default/pods/p", {"gracePeriodSeconds": huge}
        )
        assert code == 400 and "gracePeriodSeconds" in body["message"], body
