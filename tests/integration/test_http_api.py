"""The Kubernetes HTTP API over real HTTPS against a real `kse apiserver` (raw requests)."""

from __future__ import annotations

import pytest

from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import http_client

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
        assert {g["name"] for g in body["groups"]} >= {"coordination.k8s.io", "scheduling.k8s.io", "policy"}
        code, body, _ = await http.call("GET", "/apis/coordination.k8s.io/v1")
        assert [r["name"] for r in body["resources"]] == ["leases"]
        code, body, _ = await http.call("GET", "/version")
        assert body["gitVersion"] == "v1.34.0-kse" and body["major"] == "1" and body["minor"] == "34"
        for path in ("/healthz", "/livez", "/readyz"):
            code, body, _ = await http.call("GET", path)
            assert (code, body) == (200, "ok")
