"""Validation messages, in Kubernetes' shape, for each class of bad input."""

from __future__ import annotations

import pytest

from apiserver_mock.validation import validate_object, validate_update
from apiserver_mock.validation.field import FieldErrors
from apiserver_mock.validation.pod import validate_binding
from kse.objects.kinds import BY_FIELD
from proto import kse_pb2 as pb

POD, NODE, LEASE, EVENT, PC = (BY_FIELD[f] for f in ("pod", "node", "lease", "event", "priority_class"))


def good_pod() -> pb.Pod:
    return pb.Pod(
        metadata=pb.ObjectMeta(name="web", namespace="default", labels={"app": "web"}),
        spec=pb.PodSpec(containers=[pb.Container(name="c", image="nginx")]),
    )


def errors_of(kind, msg) -> list[str]:
    return validate_object(kind, msg).items


def test_good_objects_are_valid():
    assert errors_of(POD, good_pod()) == []
    assert errors_of(NODE, pb.Node(metadata=pb.ObjectMeta(name="n1"))) == []
    assert errors_of(LEASE, pb.Lease(metadata=pb.ObjectMeta(name="l", namespace="kube-system"))) == []
    assert (
        errors_of(EVENT, pb.Event(metadata=pb.ObjectMeta(name="e", namespace="default"), type="Normal")) == []
    )
    assert errors_of(PC, pb.PriorityClass(metadata=pb.ObjectMeta(name="high"), value=1000)) == []


def pod_with(mutate) -> list[str]:
    p = good_pod()
    mutate(p)
    return errors_of(POD, p)


CASES = [
    (
        "image required",
        lambda p: setattr(p.spec.containers[0], "image", ""),
        "spec.containers[0].image: Required value",
    ),
    ("no containers", lambda p: p.spec.ClearField("containers"), "spec.containers: Required value"),
    (
        "container name",
        lambda p: setattr(p.spec.containers[0], "name", ""),
        "spec.containers[0].name: Required value",
    ),
    (
        "bad name",
        lambda p: setattr(p.metadata, "name", "Web_1"),
        'metadata.name: Invalid value: "Web_1": a lowercase RFC 1123 subdomain',
    ),
    (
        "bad namespace",
        lambda p: setattr(p.metadata, "namespace", "a.b"),
        'metadata.namespace: Invalid value: "a.b": must not contain dots',
    ),
    (
        "label key",
        lambda p: p.metadata.labels.__setitem__("bad key", "v"),
        'metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric characters',
    ),
    (
        "label value",
        lambda p: p.metadata.labels.__setitem__("k", "bad value"),
        'metadata.labels: Invalid value: "bad value": a valid label must be an empty string',
    ),
    (
        "quantity",
        lambda p: p.spec.containers[0].resources.requests.__setitem__("cpu", "lots"),
        'spec.containers[0].resources.requests[cpu]: Invalid value: "lots": quantities must match',
    ),
    (
        "negative quantity",
        lambda p: p.spec.containers[0].resources.requests.__setitem__("memory", "-1Gi"),
        'spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0',  # noqa: E501
    ),
    (
        "requests > limits",
        lambda p: (
            p.spec.containers[0].resources.requests.__setitem__("cpu", "2"),
            p.spec.containers[0].resources.limits.__setitem__("cpu", "1"),
        ),
        'spec.containers[0].resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1',  # noqa: E501
    ),
    ("overhead", lambda p: p.spec.overhead.__setitem__("cpu", "x"), 'spec.overhead[cpu]: Invalid value: "x"'),
    (
        "toleration operator",
        lambda p: p.spec.tolerations.add(key="k", operator="Maybe"),
        'spec.tolerations[0].operator: Unsupported value: "Maybe": supported values: "Equal", "Exists", "Gt", "Lt"',  # noqa: E501
    ),
    (
        "toleration effect",
        lambda p: p.spec.tolerations.add(key="k", operator="Exists", effect="Sometimes"),
        'spec.tolerations[0].effect: Unsupported value: "Sometimes": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"',
    ),
    (
        "node selector operator",
        lambda p: (
            p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms.add().match_expressions.add(
                key="k", operator="Near", values=["x"]
            )
        ),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        '.matchExpressions[0].operator: Unsupported value: "Near": supported values: "In", "NotIn", "Exists", '  # noqa: E501
        '"DoesNotExist", "Gt", "Lt"',
    ),
    (
        "label selector operator",
        lambda p: p.spec.topology_spread_constraints.add(
            max_skew=1,
            topology_key="zone",
            when_unsatisfiable="DoNotSchedule",
            label_selector=pb.LabelSelector(
                match_expressions=[pb.LabelSelectorRequirement(key="a", operator="Gt")]
            ),
        ),
        'spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator: Unsupported value: "Gt": '  # noqa: E501
        'supported values: "In", "NotIn", "Exists", "DoesNotExist"',
    ),
    (
        "whenUnsatisfiable",
        lambda p: p.spec.topology_spread_constraints.add(
            max_skew=1, topology_key="zone", when_unsatisfiable="Whatever"
        ),
        'spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Whatever": supported values: '  # noqa: E501
        '"DoNotSchedule", "ScheduleAnyway"',
    ),
    (
        "maxSkew",
        lambda p: p.spec.topology_spread_constraints.add(
            max_skew=0, topology_key="zone", when_unsatisfiable="DoNotSchedule"
        ),
        "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
    ),
    (
        "nodeAffinityPolicy",
        lambda p: p.spec.topology_spread_constraints.add(
            max_skew=1, topology_key="zone", when_unsatisfiable="DoNotSchedule", node_affinity_policy="Maybe"
        ),
        'spec.topologySpreadConstraints[0].nodeAffinityPolicy: Unsupported value: "Maybe": supported values: '
        '"Honor", "Ignore"',
    ),
    (
        "nodeTaintsPolicy",
        lambda p: p.spec.topology_spread_constraints.add(
            max_skew=1, topology_key="zone", when_unsatisfiable="DoNotSchedule", node_taints_policy="x"
        ),
        'spec.topologySpreadConstraints[0].nodeTaintsPolicy: Unsupported value: "x"',
    ),
    (
        "preferred weight",
        lambda p: p.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution.add(
            weight=0
        ),
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: "  # noqa: E501
        "must be in the range 1-100",
    ),
    (
        "pod affinity weight",
        lambda p: p.spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution.add(
            weight=101, pod_affinity_term=pb.PodAffinityTerm(topology_key="zone")
        ),
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "Invalid value: 101: must be in the range 1-100",
    ),
    (
        "phase",
        lambda p: setattr(p.status, "phase", "Sleeping"),
        'status.phase: Unsupported value: "Sleeping": supported values: "Pending", "Running", "Succeeded", '
        '"Failed", "Unknown"',
    ),
    (
        "condition status",
        lambda p: p.status.conditions.add(type="Ready", status="Yes"),
        'status.conditions[0].status: Unsupported value: "Yes": supported values: "True", "False", "Unknown"',
    ),
    (
        "restartPolicy",
        lambda p: setattr(p.spec, "restart_policy", "Sometimes"),
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',  # noqa: E501
    ),
    (
        "imagePullPolicy",
        lambda p: setattr(p.spec.containers[0], "image_pull_policy", "Often"),
        'spec.containers[0].imagePullPolicy: Unsupported value: "Often": supported values: "Always", '
        '"IfNotPresent", "Never"',
    ),
    (
        "protocol",
        lambda p: p.spec.containers[0].ports.add(container_port=80, protocol="HTTP"),
        'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "TCP", "UDP", "SCTP"',  # noqa: E501
    ),
    (
        "port range",
        lambda p: p.spec.containers[0].ports.add(container_port=70000),
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",  # noqa: E501
    ),
    (
        "host port range",
        lambda p: p.spec.containers[0].ports.add(container_port=80, host_port=-1),
        "spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
    ),
    (
        "annotations size",
        lambda p: p.metadata.annotations.__setitem__("big", "x" * (256 * 1024)),
        "metadata.annotations: Too long: may not be more than 262144 bytes",
    ),
    (
        "object size",
        lambda p: p.spec.containers[0].args.append("y" * (1600 * 1024)),
        "spec.containers[0].args[0]: Too long: the object is",
    ),
    (
        "duplicate container",
        lambda p: p.spec.containers.add(name="c", image="x"),
        'spec.containers[1].name: Duplicate value: "c"',
    ),
    ("cluster-scoped namespace", lambda p: None, None),
]


@pytest.mark.parametrize(
    ("mutate", "expected"), [(c[1], c[2]) for c in CASES if c[2]], ids=[c[0] for c in CASES if c[2]]
)
def test_pod_errors(mutate, expected):
    errs = pod_with(mutate)
    assert any(e.startswith(expected) for e in errs), errs


def test_node_errors():
    node = pb.Node(metadata=pb.ObjectMeta(name="n1", namespace="default"))
    node.spec.taints.add(key="k", effect="Never")
    node.spec.taints.add(key="k2", effect="NoSchedule")
    node.spec.taints.add(key="k2", effect="NoSchedule")
    node.status.capacity["cpu"] = "four"
    node.status.conditions.add(type="Ready", status="Maybe")
    errs = errors_of(NODE, node)
    assert "metadata.namespace: Forbidden: not allowed on this type" in errs
    assert (
        'spec.taints[0].effect: Unsupported value: "Never": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"' in errs
    )
    assert 'spec.taints[2]: Duplicate value: "k2:NoSchedule"' in errs
    assert any(e.startswith('status.capacity[cpu]: Invalid value: "four"') for e in errs)
    assert any(e.startswith('status.conditions[0].status: Unsupported value: "Maybe"') for e in errs)


def test_lease_errors():
    lease = pb.Lease(metadata=pb.ObjectMeta(name="l", namespace="kube-system"))
    lease.spec.lease_duration_seconds = 0
    lease.spec.lease_transitions = -1
    lease.spec.renew_time = "yesterday"
    errs = errors_of(LEASE, lease)
    assert "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0" in errs
    assert "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0" in errs
    assert any(e.startswith('spec.renewTime: Invalid value: "yesterday"') for e in errs)


def test_event_type():
    ev = pb.Event(metadata=pb.ObjectMeta(name="e", namespace="default"), type="Bad")
    assert errors_of(EVENT, ev) == ['type: Unsupported value: "Bad": supported values: "Normal", "Warning"']


def test_priority_class_rules():
    too_high = pb.PriorityClass(metadata=pb.ObjectMeta(name="x"), value=2_000_000_000)
    assert errors_of(PC, too_high) == [
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
    ]
    reserved = pb.PriorityClass(metadata=pb.ObjectMeta(name="system-mine"), value=1)
    assert errors_of(PC, reserved)[0].startswith(
        "metadata.name: Forbidden: priority class names with 'system-'"
    )
    old = pb.PriorityClass(metadata=pb.ObjectMeta(name="x", uid="u"), value=1)
    new = pb.PriorityClass(metadata=pb.ObjectMeta(name="x", uid="u"), value=2)
    assert "value: Forbidden: may not be changed in an update." in validate_update(PC, new, old).items


def test_pod_update_immutability():
    old = good_pod()
    old.metadata.uid = "u1"
    new = pb.Pod()
    new.CopyFrom(old)
    new.spec.containers[0].image = "nginx:2"  # allowed
    new.spec.tolerations.add(key="k", operator="Exists")  # additions allowed
    assert validate_update(POD, new, old).items == []
    moved = pb.Pod()
    moved.CopyFrom(old)
    moved.spec.node_name = "n1"
    errs = validate_update(POD, moved, old).items
    assert len(errs) == 1
    assert errs[0].startswith("spec: Forbidden: pod updates may not change fields other than")
    assert "spec.nodeName" in errs[0]
    gated = pb.Pod()
    gated.CopyFrom(old)
    gated.spec.scheduling_gates.add(name="example.com/gate")
    assert any("only deletion is allowed" in e for e in validate_update(POD, gated, old).items)
    other_uid = pb.Pod()
    other_uid.CopyFrom(old)
    other_uid.metadata.uid = "u2"
    assert (
        'metadata.uid: Invalid value: "u2": field is immutable' in validate_update(POD, other_uid, old).items
    )


def test_binding_target_required():
    errs = FieldErrors()
    validate_binding(errs, pb.Binding(metadata=pb.ObjectMeta(name="p")))
    assert errs.items == ["target.name: Required value"]


def test_real_kinds_and_api_version_checked():
    p = good_pod()
    p.kind = "Node"
    assert 'kind: Invalid value: "Node": must be Pod' in errors_of(POD, p)


def test_volume_mounts_name_a_volume_and_a_path():
    pod = good_pod()
    pod.spec.volumes.add(name="data")
    pod.spec.containers[0].volume_mounts.add(name="data", mount_path="/opt")
    assert errors_of(POD, pod) == []
    pod.spec.containers[0].volume_mounts.add(name="nope", mount_path="/x")
    pod.spec.init_containers.add(name="i", image="alpine").volume_mounts.add(name="data")
    errs = errors_of(POD, pod)
    assert 'spec.containers[0].volumeMounts[1].name: Not found: "nope"' in errs, errs
    assert "spec.initContainers[0].volumeMounts[0].mountPath: Required value" in errs, errs
