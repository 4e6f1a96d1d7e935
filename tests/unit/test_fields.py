"""Field selectors: upstream's parsing rules and the API server's per-kind field sets."""

from __future__ import annotations

import pytest

from kse.objects.fields import (
    SUPPORTED_FIELDS,
    FieldSelector,
    FieldSelectorError,
    FieldTerm,
    escape_value,
    fields_of,
    parse_field_selector,
    supported_fields,
    unescape_value,
)
from kse.objects.kinds import KINDS, wrap
from proto import kse_pb2 as pb


def pod_object(**kw: str) -> pb.Object:
    pod = pb.Pod()
    pod.metadata.name = kw.get("name", "p")
    pod.metadata.namespace = kw.get("namespace", "default")
    pod.spec.node_name = kw.get("node", "")
    pod.spec.scheduler_name = kw.get("scheduler", "default-scheduler")
    pod.status.phase = kw.get("phase", "Pending")
    pod.status.nominated_node_name = kw.get("nominated", "")
    return wrap(pod)


def test_parse_and_match() -> None:
    sel = parse_field_selector("spec.nodeName=n1,status.phase!=Running")
    assert sel.matches(fields_of(pod_object(node="n1", phase="Pending")))
    assert not sel.matches(fields_of(pod_object(node="n1", phase="Running")))
    assert not sel.matches(fields_of(pod_object(node="n2")))
    assert parse_field_selector("spec.nodeName==n1").matches({"spec.nodeName": "n1"})


def test_unscheduled_pods_selector() -> None:
    # What kube-scheduler's informer asks for: pods not yet bound.
    sel = parse_field_selector("spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed", "pods")
    assert sel.matches_object(pod_object())
    assert not sel.matches_object(pod_object(node="n1"))
    assert not sel.matches_object(pod_object(phase="Failed"))


def test_empty_selector_matches_everything() -> None:
    assert parse_field_selector("").empty
    assert parse_field_selector("", "pods").matches({})
    assert parse_field_selector(",,").empty


def test_missing_field_reads_as_empty_string() -> None:
    assert parse_field_selector("a.b=").matches({})
    assert not parse_field_selector("a.b=x").matches({})
    assert parse_field_selector("a.b!=x").matches({})


def test_operator_split_is_at_the_first_operator() -> None:
    assert parse_field_selector("a=b=c".replace("b=c", "b\\=c")).terms == (FieldTerm("a", True, "b=c"),)
    assert parse_field_selector("x!=y").terms == (FieldTerm("x", False, "y"),)
    assert parse_field_selector("x==y").terms == (FieldTerm("x", True, "y"),)
    # No trimming: spaces are part of the field name and value, as upstream.
    assert parse_field_selector(" x = y ").terms == (FieldTerm(" x ", True, " y "),)


def test_escaping() -> None:
    assert escape_value("a,b=c\\d") == "a\\,b\\=c\\\\d"
    assert unescape_value(escape_value("a,b=c\\d")) == "a,b=c\\d"
    sel = parse_field_selector("metadata.name=a\\,b,metadata.namespace=ns")
    assert sel.matches({"metadata.name": "a,b", "metadata.namespace": "ns"})
    with pytest.raises(FieldSelectorError, match="invalid escape sequence"):
        parse_field_selector("a=b\\x")
    with pytest.raises(FieldSelectorError, match="unescaped character"):
        parse_field_selector("a=b=c")
    assert str(sel) == "metadata.name=a\\,b,metadata.namespace=ns"


def test_unparseable_term() -> None:
    with pytest.raises(FieldSelectorError, match="can't understand 'nonsense'"):
        parse_field_selector("nonsense")


def test_unsupported_field_names_field_and_kind() -> None:
    with pytest.raises(
        FieldSelectorError, match=r"field label not supported: spec\.foo \(kind Node supports: "
    ):
        parse_field_selector("spec.foo=bar", "nodes")
    with pytest.raises(FieldSelectorError, match=r"field label not supported: status\.phase.*kind Node"):
        parse_field_selector("status.phase=Running", "Node")
    with pytest.raises(FieldSelectorError, match="kind Lease"):
        parse_field_selector("spec.holderIdentity=x", "leases")


def test_supported_fields_per_kind() -> None:
    assert set(supported_fields("pods")) >= {
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.schedulerName",
        "status.phase",
        "status.nominatedNodeName",
    }
    assert supported_fields("Node") == ("metadata.name", "spec.unschedulable")
    assert supported_fields("leases") == ("metadata.name", "metadata.namespace")
    assert set(supported_fields("events")) >= {
        "metadata.name",
        "metadata.namespace",
        "involvedObject.name",
        "involvedObject.kind",
        "involvedObject.namespace",
        "reason",
        "type",
    }
    assert set(supported_fields("priorityclasses")) == {"metadata.name", "metadata.namespace"}
    assert set(SUPPORTED_FIELDS) == {k.kind for k in KINDS}
    for kind in KINDS:
        assert supported_fields(kind) == SUPPORTED_FIELDS[kind.kind]


def test_pod_spec_host_alias() -> None:
    sel = parse_field_selector("spec.host=n1", "pods")
    assert sel.terms == (FieldTerm("spec.nodeName", True, "n1"),)


def test_fields_of_every_kind() -> None:
    node = pb.Node()
    node.metadata.name = "n1"
    node.spec.unschedulable = True
    assert fields_of(wrap(node)) == {"metadata.name": "n1", "spec.unschedulable": "true"}
    assert fields_of(wrap(pb.Node()))["spec.unschedulable"] == "false"

    lease = pb.Lease()
    lease.metadata.name, lease.metadata.namespace = "kube-scheduler", "kube-system"
    assert fields_of(wrap(lease)) == {"metadata.name": "kube-scheduler", "metadata.namespace": "kube-system"}

    ev = pb.Event(reason="Scheduled", type="Normal")
    ev.metadata.name, ev.metadata.namespace = "e1", "default"
    ev.involved_object.kind, ev.involved_object.name, ev.involved_object.namespace = "Pod", "p", "default"
    ev.reporting_component = "default-scheduler"
    f = fields_of(wrap(ev))
    assert (
        f["involvedObject.name"] == "p" and f["involvedObject.kind"] == "Pod" and f["reason"] == "Scheduled"
    )
    assert f["source"] == "default-scheduler"  # falls back to the reporting component
    assert f["type"] == "Normal"

    pc = pb.PriorityClass(value=10)
    pc.metadata.name = "high"
    assert fields_of(wrap(pc)) == {"metadata.name": "high", "metadata.namespace": ""}

    pod = fields_of(pod_object(node="n1", nominated="n2"))
    assert pod["spec.nodeName"] == "n1" and pod["status.nominatedNodeName"] == "n2"
    assert pod["spec.hostNetwork"] == "false"
    for kind in KINDS:
        obj = pb.Object()
        getattr(obj, kind.field).SetInParent()
        assert tuple(fields_of(obj)) == SUPPORTED_FIELDS[kind.kind]


def test_matches_object_agrees_with_fields_of() -> None:
    objs = [pod_object(node="n1", nominated="n2", phase="Running")]
    ev = pb.Event(reason="R", type="Warning")
    ev.source.component = "kubelet"
    ev.involved_object.uid = "u"
    node = pb.Node()
    node.spec.unschedulable = True
    objs += [wrap(ev), wrap(node), wrap(pb.Lease()), wrap(pb.PriorityClass())]
    for obj in objs:
        values = fields_of(obj)
        for name, value in values.items():
            for text in (f"{name}={escape_value(value)}", f"{name}!={escape_value(value)}", f"{name}=zz"):
                sel = parse_field_selector(text)
                assert sel.matches_object(obj) == sel.matches(values), (text, obj)
    assert parse_field_selector("no.such=x").matches_object(objs[0]) is False
    assert parse_field_selector("no.such=").matches_object(objs[0]) is True


def test_fields_of_empty_object() -> None:
    with pytest.raises(LookupError):
        fields_of(pb.Object())
    with pytest.raises(LookupError):
        parse_field_selector("a=b").matches_object(pb.Object())


def test_requires_exact_match() -> None:
    sel = parse_field_selector("spec.nodeName=n1,status.phase!=Failed")
    assert sel.requires_exact_match("spec.nodeName") == "n1"
    assert sel.requires_exact_match("status.phase") is None
    assert FieldSelector().requires_exact_match("spec.nodeName") is None


def test_meta_accessors() -> None:
    # kse.objects.meta: the object-key helpers the caches and the field sets share.
    from kse.objects import meta

    obj = pod_object(name="web", namespace="prod")
    obj.pod.metadata.resource_version = "42"
    assert meta.key_of(obj) == "prod/web" and meta.key_of(obj.pod) == "prod/web"
    assert meta.namespaced_name(obj) == ("prod", "web")
    assert meta.resource_version_of(obj) == 42
    node = pb.Node()
    node.metadata.name = "n1"
    assert meta.key_of(wrap(node)) == "n1"
    assert meta.resource_version_of(node) == 0
    meta.meta_of(obj).labels["a"] = "b"  # a reference: writes through
    assert obj.pod.metadata.labels["a"] == "b"
    # uid_key: the UID (how the scheduler's cache and binder key pods), else the key.
    assert meta.uid_key(obj) == "prod/web" and meta.uid_key(node) == "n1"
    obj.pod.metadata.uid = "u-1"
    assert meta.uid_key(obj) == meta.uid_key(obj.pod) == "u-1"
    assert meta.object_key("", "n1") == "n1" and meta.object_key("ns", "p") == "ns/p"
