"""The scale subresource's pure parts: the Scale view, body checks, patches, routing, discovery."""

from __future__ import annotations

import pytest

from apiserver_mock.errors import Invalid
from apiserver_mock.http import discovery, routes
from apiserver_mock.http.codec import BadRequest
from apiserver_mock.http.scale import apply_patch, replicas_from, scale_of, with_replicas
from apiserver_mock.http.status import UnsupportedMediaType
from kse.objects.kinds import BY_FIELD
from proto import kse_pb2 as pb

DEPLOYMENT = BY_FIELD["deployment"]


def stored() -> bytes:
    d = pb.Deployment(api_version="apps/v1", kind="Deployment")
    d.metadata.name, d.metadata.namespace, d.metadata.resource_version = "web", "default", "42"
    d.spec.replicas = 3
    d.spec.selector.match_labels.update({"app": "web", "tier": "front"})
    d.status.replicas = 2
    obj = pb.Object()
    obj.deployment.CopyFrom(d)
    return obj.SerializeToString()


def test_the_scale_of_a_deployment() -> None:
    scale = scale_of(DEPLOYMENT, stored())
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["metadata"]["resourceVersion"] == "42" and scale["metadata"]["name"] == "web"
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 2, "selector": "app=web,tier=front"}


def test_writing_a_scale_sets_only_the_replicas() -> None:
    req = with_replicas(DEPLOYMENT, stored(), 7, "")
    assert req.object.deployment.spec.replicas == 7
    assert req.object.deployment.metadata.resource_version == "42"  # the read one: a precondition
    assert dict(req.object.deployment.spec.selector.match_labels) == {"app": "web", "tier": "front"}


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        ({"spec": {"replicas": -1}}, Invalid, r"spec\.replicas: Invalid value: -1"),
        ({"spec": {"replicas": "3"}}, Invalid, r"spec\.replicas: Invalid value: '3'"),
        ({"spec": {"replicas": True}}, Invalid, r"spec\.replicas"),
        ({"metadata": {"name": "other"}, "spec": {"replicas": 1}}, BadRequest, "does not match the name"),
        ([], BadRequest, "JSON object"),
    ],
)
def test_bad_scale_bodies_are_refused_naming_the_field(
    body: object, error: type[Exception], match: str
) -> None:
    target = routes.Target(DEPLOYMENT, "default", "web", "scale")
    with pytest.raises(error, match=match):
        replicas_from(DEPLOYMENT, target, body)


def test_patches_of_a_scale() -> None:
    current = scale_of(DEPLOYMENT, stored())
    merged = apply_patch("application/merge-patch+json", current, {"spec": {"replicas": 5}})
    assert merged["spec"]["replicas"] == 5
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 1}]
    assert apply_patch("application/json-patch+json", current, ops)["spec"]["replicas"] == 1
    with pytest.raises(UnsupportedMediaType):
        apply_patch("text/plain", current, {})


def test_routes_and_discovery() -> None:
    t = routes.parse("/apis/apps/v1/namespaces/default/deployments/web/scale")
    assert t is not None and t.subresource == "scale"
    assert routes.parse("/apis/apps/v1/namespaces/default/replicasets/rs/scale") is not None
    with pytest.raises(Exception, match="could not find the requested resource"):
        routes.parse("/apis/apps/v1/namespaces/default/daemonsets/ds/scale")
    rows = {r["name"]: r for r in (discovery.resource_list("apps/v1") or {})["resources"]}
    assert rows["deployments/scale"]["kind"] == "Scale"
    assert (rows["deployments/scale"]["group"], rows["deployments/scale"]["version"]) == ("autoscaling", "v1")
    assert "replicasets/scale" in rows and "daemonsets/scale" not in rows
