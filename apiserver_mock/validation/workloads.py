# ruff: noqa: E501  (upstream's messages are kept whole)
"""Validation of the workload kinds (ReplicaSet, Deployment, DaemonSet), PodDisruptionBudget,
Service and Namespace, with kube-apiserver's messages.

Upstream: pkg/apis/apps/validation/validation.go, pkg/apis/policy/validation/validation.go,
pkg/apis/core/validation/validation.go (ValidateService, ValidateNamespace).
"""

from __future__ import annotations

from google.protobuf import struct_pb2

from apiserver_mock.validation.field import FieldErrors
from apiserver_mock.validation.meta import validate_label_selector, validate_labels
from apiserver_mock.validation.pod import validate_pod_spec
from kse.objects.intstr import IntOrStringError, int_or_string, parse_percent
from kse.objects.labels import SelectorError, label_selector_as_selector
from proto import kse_pb2 as pb

DEPLOYMENT_STRATEGIES = ("Recreate", "RollingUpdate")
DAEMONSET_STRATEGIES = ("OnDelete", "RollingUpdate")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
SERVICE_PROTOCOLS = ("TCP", "UDP", "SCTP")
UNHEALTHY_POD_EVICTION_POLICIES = ("IfHealthyBudget", "AlwaysAllow")
NAMESPACE_PHASES = ("Active", "Terminating")


def _non_negative(errs: FieldErrors, path: str, value: int) -> None:
    if value < 0:
        errs.invalid(path, value, "must be greater than or equal to 0")


def int_or_percent(errs: FieldErrors, path: str, value: struct_pb2.Value) -> int | str | None:
    """ValidatePositiveIntOrPercent (and IsValidPercent): a count >= 0 or "N%"; None when unset."""
    try:
        v = int_or_string(value)
    except IntOrStringError as e:
        errs.invalid(path, value, str(e))
        return None
    if isinstance(v, str):
        try:
            parse_percent(v)
        except IntOrStringError:
            errs.invalid(
                path,
                v,
                "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            )
            return None
    elif v is not None:
        _non_negative(errs, path, v)
    return v


def _percent_at_most_100(errs: FieldErrors, path: str, v: int | str | None) -> None:
    if isinstance(v, str) and v.endswith("%") and v[:-1].isdigit() and int(v[:-1]) > 100:
        errs.invalid(path, v, "must not be greater than 100%")


def _selector_and_template(
    errs: FieldErrors, selector: pb.LabelSelector, has_selector: bool, template: pb.PodTemplateSpec, path: str
) -> None:
    """ValidatePodTemplateSpecForReplicaSet and friends: a non-empty selector that selects the template."""
    if not has_selector:
        errs.required(f"{path}.selector")
    elif not selector.match_labels and not selector.match_expressions:
        errs.invalid(f"{path}.selector", "{}", "empty selector is invalid for deployment")
    else:
        validate_label_selector(errs, selector, f"{path}.selector")
        labels = dict(template.metadata.labels)
        # As upstream (apps/validation.ValidateReplicaSetSpec): the template is matched only when
        # the selector converts; a selector that does not was reported by the line above.
        try:
            sel = label_selector_as_selector(selector)
        except SelectorError:
            sel = None
        if sel is not None and not sel.matches(labels):
            errs.invalid(
                f"{path}.template.metadata.labels", labels, "`selector` does not match template `labels`"
            )
    validate_labels(errs, template.metadata.labels, f"{path}.template.metadata.labels")
    validate_pod_spec(errs, template.spec, f"{path}.template.spec")


def validate_replica_set(errs: FieldErrors, rs: pb.ReplicaSet) -> None:
    spec = rs.spec
    _non_negative(errs, "spec.replicas", spec.replicas)
    _non_negative(errs, "spec.minReadySeconds", spec.min_ready_seconds)
    _selector_and_template(errs, spec.selector, spec.HasField("selector"), spec.template, "spec")
    if spec.template.spec.restart_policy not in ("", "Always"):
        errs.unsupported("spec.template.spec.restartPolicy", spec.template.spec.restart_policy, ("Always",))


def validate_deployment(errs: FieldErrors, d: pb.Deployment) -> None:
    spec = d.spec
    _non_negative(errs, "spec.replicas", spec.replicas)
    _non_negative(errs, "spec.minReadySeconds", spec.min_ready_seconds)
    _selector_and_template(errs, spec.selector, spec.HasField("selector"), spec.template, "spec")
    if spec.template.spec.restart_policy not in ("", "Always"):
        errs.unsupported("spec.template.spec.restartPolicy", spec.template.spec.restart_policy, ("Always",))
    if spec.HasField("revision_history_limit"):
        _non_negative(errs, "spec.revisionHistoryLimit", spec.revision_history_limit)
    strategy = spec.strategy
    errs.enum("spec.strategy.type", strategy.type, DEPLOYMENT_STRATEGIES)
    if strategy.type == "Recreate" and strategy.HasField("rolling_update"):
        errs.forbidden(
            "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"
        )
    if strategy.HasField("rolling_update"):
        ru = strategy.rolling_update
        surge = int_or_percent(errs, "spec.strategy.rollingUpdate.maxSurge", ru.max_surge)
        unavailable = int_or_percent(errs, "spec.strategy.rollingUpdate.maxUnavailable", ru.max_unavailable)
        _percent_at_most_100(errs, "spec.strategy.rollingUpdate.maxUnavailable", unavailable)
        if surge in (0, "0%") and unavailable in (0, "0%"):
            errs.invalid(
                "spec.strategy.rollingUpdate.maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0"
            )
    if spec.HasField("progress_deadline_seconds"):
        _non_negative(errs, "spec.progressDeadlineSeconds", spec.progress_deadline_seconds)
        if spec.progress_deadline_seconds <= spec.min_ready_seconds:
            errs.invalid(
                "spec.progressDeadlineSeconds",
                spec.progress_deadline_seconds,
                "must be greater than minReadySeconds",
            )


def validate_daemon_set(errs: FieldErrors, ds: pb.DaemonSet) -> None:
    spec = ds.spec
    _non_negative(errs, "spec.minReadySeconds", spec.min_ready_seconds)
    _selector_and_template(errs, spec.selector, spec.HasField("selector"), spec.template, "spec")
    if spec.template.spec.restart_policy not in ("", "Always"):
        errs.unsupported("spec.template.spec.restartPolicy", spec.template.spec.restart_policy, ("Always",))
    strategy = spec.update_strategy
    errs.enum("spec.updateStrategy.type", strategy.type, DAEMONSET_STRATEGIES)
    if strategy.HasField("rolling_update"):
        ru = strategy.rolling_update
        surge = int_or_percent(errs, "spec.updateStrategy.rollingUpdate.maxSurge", ru.max_surge)
        unavailable = int_or_percent(
            errs, "spec.updateStrategy.rollingUpdate.maxUnavailable", ru.max_unavailable
        )
        _percent_at_most_100(errs, "spec.updateStrategy.rollingUpdate.maxUnavailable", unavailable)
        if surge in (0, "0%", None) and unavailable in (0, "0%"):
            errs.invalid(
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
                unavailable,
                "may not be 0 when `maxSurge` is 0",
            )


def validate_pod_disruption_budget(errs: FieldErrors, pdb: pb.PodDisruptionBudget) -> None:
    spec = pdb.spec
    has_min = spec.HasField("min_available")
    has_max = spec.HasField("max_unavailable")
    if has_min and has_max:
        errs.invalid("spec", spec.min_available, "minAvailable and maxUnavailable cannot be both set")
    if has_min:
        v = int_or_percent(errs, "spec.minAvailable", spec.min_available)
        _percent_at_most_100(errs, "spec.minAvailable", v)
    if has_max:
        v = int_or_percent(errs, "spec.maxUnavailable", spec.max_unavailable)
        _percent_at_most_100(errs, "spec.maxUnavailable", v)
    if spec.HasField("selector"):
        validate_label_selector(errs, spec.selector, "spec.selector")
    errs.enum(
        "spec.unhealthyPodEvictionPolicy", spec.unhealthy_pod_eviction_policy, UNHEALTHY_POD_EVICTION_POLICIES
    )
    st = pdb.status
    for path, value in (
        ("status.disruptionsAllowed", st.disruptions_allowed),
        ("status.currentHealthy", st.current_healthy),
        ("status.desiredHealthy", st.desired_healthy),
        ("status.expectedPods", st.expected_pods),
    ):
        _non_negative(errs, path, value)


def validate_service(errs: FieldErrors, svc: pb.Service) -> None:
    spec = svc.spec
    errs.enum("spec.type", spec.type, SERVICE_TYPES)
    if spec.type == "ExternalName":
        if not spec.external_name:
            errs.required("spec.externalName")
    elif not spec.ports:
        errs.required("spec.ports")
    validate_labels(errs, spec.selector, "spec.selector")
    seen: set[tuple[int, str]] = set()
    for i, port in enumerate(spec.ports):
        path = f"spec.ports[{i}]"
        if len(spec.ports) > 1 and not port.name:
            errs.required(f"{path}.name")
        if not 1 <= port.port <= 65535:
            errs.invalid(f"{path}.port", port.port, "must be between 1 and 65535, inclusive")
        errs.enum(f"{path}.protocol", port.protocol, SERVICE_PROTOCOLS)
        key = (port.port, port.protocol or "TCP")
        if key in seen:
            errs.duplicate(path, f"{port.port}/{port.protocol or 'TCP'}")
        seen.add(key)
        try:
            target = int_or_string(port.target_port)
        except IntOrStringError as e:
            errs.invalid(f"{path}.targetPort", port.target_port, str(e))
            continue
        if isinstance(target, int) and not 0 <= target <= 65535:
            errs.invalid(f"{path}.targetPort", target, "must be between 1 and 65535, inclusive")


def validate_namespace(errs: FieldErrors, ns: pb.Namespace) -> None:
    errs.enum("status.phase", ns.status.phase, NAMESPACE_PHASES)


def validate_selector_unchanged(errs: FieldErrors, new: object, old: object) -> None:
    """apps/v1 selectors are immutable (ValidateDeploymentUpdate, ValidateReplicaSetUpdate, ...)."""
    if new.spec.selector != old.spec.selector:  # type: ignore[attr-defined]
        errs.invalid("spec.selector", new.spec.selector, "field is immutable")  # type: ignore[attr-defined]
