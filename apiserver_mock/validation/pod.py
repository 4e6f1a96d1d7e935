"""Pod and Binding validation, after `k8s.io/kubernetes/pkg/apis/core/validation` (the parts kse models)."""

from __future__ import annotations

from apiserver_mock.validation import common
from apiserver_mock.validation.field import FieldErrors
from apiserver_mock.validation.meta import (
    is_int,
    validate_label_selector,
    validate_labels,
    validate_node_selector_term,
)
from kse.objects import names
from proto import kse_pb2 as pb

RESTART_POLICIES = ("Always", "OnFailure", "Never")
CONTAINER_RESTART_POLICIES = ("Always",)
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists", "Gt", "Lt")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

IMMUTABLE_SPEC_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative),"
    "`spec.schedulingGates` (only removals)"
)


def validate_pod(errs: FieldErrors, pod: pb.Pod) -> None:
    validate_pod_spec(errs, pod.spec, "spec")
    validate_pod_status(errs, pod.status, "status")


def validate_pod_spec(errs: FieldErrors, spec: pb.PodSpec, path: str) -> None:
    if not spec.containers:
        errs.required(f"{path}.containers")
    seen: set[str] = set()
    for i, c in enumerate(spec.init_containers):
        _container(errs, c, f"{path}.initContainers[{i}]", seen, init=True)
    for i, c in enumerate(spec.containers):
        _container(errs, c, f"{path}.containers[{i}]", seen, init=False)
    errs.enum(f"{path}.restartPolicy", spec.restart_policy, RESTART_POLICIES)
    errs.enum(f"{path}.preemptionPolicy", spec.preemption_policy, PREEMPTION_POLICIES)
    validate_labels(errs, spec.node_selector, f"{path}.nodeSelector")
    if spec.node_name:
        for msg in names.is_dns1123_subdomain(spec.node_name):
            errs.invalid(f"{path}.nodeName", spec.node_name, msg)
    if spec.scheduler_name:
        for msg in names.is_dns1123_subdomain(spec.scheduler_name):
            errs.invalid(f"{path}.schedulerName", spec.scheduler_name, msg)
    if spec.priority_class_name:
        for msg in names.is_dns1123_subdomain(spec.priority_class_name):
            errs.invalid(f"{path}.priorityClassName", spec.priority_class_name, msg)
    if spec.HasField("termination_grace_period_seconds") and spec.termination_grace_period_seconds < 0:
        errs.invalid(
            f"{path}.terminationGracePeriodSeconds",
            spec.termination_grace_period_seconds,
            "must be greater than or equal to 0",
        )
    common.resource_list(errs, f"{path}.overhead", spec.overhead)
    if spec.HasField("resources"):
        common.requirements(errs, f"{path}.resources", spec.resources)
    if spec.HasField("affinity"):
        _affinity(errs, spec.affinity, f"{path}.affinity")
    for i, t in enumerate(spec.tolerations):
        _toleration(errs, t, f"{path}.tolerations[{i}]")
    for i, tsc in enumerate(spec.topology_spread_constraints):
        _spread(errs, tsc, f"{path}.topologySpreadConstraints[{i}]")
    gates: set[str] = set()
    for i, gate in enumerate(spec.scheduling_gates):
        gp = f"{path}.schedulingGates[{i}].name"
        for msg in names.is_qualified_name(gate.name):
            errs.invalid(gp, gate.name, msg)
        if gate.name in gates:
            errs.duplicate(gp, gate.name)
        gates.add(gate.name)
    if spec.service_account_name:
        for msg in names.is_dns1123_subdomain(spec.service_account_name):
            errs.invalid(f"{path}.serviceAccountName", spec.service_account_name, msg)
    _named_list(errs, [v.name for v in spec.volumes], f"{path}.volumes")
    _volume_mounts(errs, spec, path)
    for i, v in enumerate(spec.volumes):
        if v.HasField("persistent_volume_claim") and not v.persistent_volume_claim.claim_name:
            errs.required(f"{path}.volumes[{i}].persistentVolumeClaim.claimName")
    _named_list(errs, [c.name for c in spec.resource_claims], f"{path}.resourceClaims")
    for i, rc in enumerate(spec.resource_claims):
        if rc.HasField("resource_claim_name") == rc.HasField("resource_claim_template_name"):
            errs.invalid(
                f"{path}.resourceClaims[{i}]",
                rc.name,
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )


def _volume_mounts(errs: FieldErrors, spec: pb.PodSpec, path: str) -> None:
    """Every volumeMount names a volume of the pod and a mountPath (upstream ValidateVolumeMounts)."""
    volumes = {v.name for v in spec.volumes}
    for field, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, c in enumerate(containers):
            for j, m in enumerate(c.volume_mounts):
                mp = f"{path}.{field}[{i}].volumeMounts[{j}]"
                if not m.name:
                    errs.required(f"{mp}.name")
                elif m.name not in volumes:
                    errs.not_found(f"{mp}.name", m.name)
                if not m.mount_path:
                    errs.required(f"{mp}.mountPath")


def _named_list(errs: FieldErrors, items: list[str], path: str) -> None:
    """Entries named by a unique DNS label (volumes, resourceClaims), as upstream validates them."""
    seen: set[str] = set()
    for i, name in enumerate(items):
        if not name:
            errs.required(f"{path}[{i}].name")
            continue
        for msg in names.is_dns1123_label(name):
            errs.invalid(f"{path}[{i}].name", name, msg)
        if name in seen:
            errs.duplicate(f"{path}[{i}].name", name)
        seen.add(name)


def _container(errs: FieldErrors, c: pb.Container, path: str, seen: set[str], *, init: bool) -> None:
    if not c.name:
        errs.required(f"{path}.name")
    else:
        for msg in names.is_dns1123_label(c.name):
            errs.invalid(f"{path}.name", c.name, msg)
        if c.name in seen:
            errs.duplicate(f"{path}.name", c.name)
        seen.add(c.name)
    if not c.image.strip():
        errs.required(f"{path}.image")
    errs.enum(f"{path}.imagePullPolicy", c.image_pull_policy, PULL_POLICIES)
    if c.restart_policy:
        if init:
            errs.enum(f"{path}.restartPolicy", c.restart_policy, CONTAINER_RESTART_POLICIES)
        else:
            errs.forbidden(f"{path}.restartPolicy", "may not be set for non-init containers")
    for j, port in enumerate(c.ports):
        pp = f"{path}.ports[{j}]"
        if not 1 <= port.container_port <= 65535:
            errs.invalid(f"{pp}.containerPort", port.container_port, "must be between 1 and 65535, inclusive")
        if port.host_port and not 1 <= port.host_port <= 65535:
            errs.invalid(f"{pp}.hostPort", port.host_port, "must be between 1 and 65535, inclusive")
        errs.enum(f"{pp}.protocol", port.protocol, PROTOCOLS)
        if port.name:
            for msg in names.is_dns1123_label(port.name):
                errs.invalid(f"{pp}.name", port.name, msg)
    for j, env in enumerate(c.env):
        if not env.name:
            errs.required(f"{path}.env[{j}].name")
    if c.HasField("resources"):
        common.requirements(errs, f"{path}.resources", c.resources)


def _affinity(errs: FieldErrors, aff: pb.Affinity, path: str) -> None:
    if aff.HasField("node_affinity"):
        na = aff.node_affinity
        np = f"{path}.nodeAffinity"
        if na.HasField("required_during_scheduling_ignored_during_execution"):
            rp = f"{np}.requiredDuringSchedulingIgnoredDuringExecution"
            terms = na.required_during_scheduling_ignored_during_execution.node_selector_terms
            if not terms:
                errs.required(f"{rp}.nodeSelectorTerms", "must have at least one node selector term")
            for i, term in enumerate(terms):
                validate_node_selector_term(errs, term, f"{rp}.nodeSelectorTerms[{i}]")
        for i, pref in enumerate(na.preferred_during_scheduling_ignored_during_execution):
            pp = f"{np}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            _weight(errs, pref.weight, f"{pp}.weight")
            validate_node_selector_term(errs, pref.preference, f"{pp}.preference")
    for field_name, json_name in (("pod_affinity", "podAffinity"), ("pod_anti_affinity", "podAntiAffinity")):
        if not aff.HasField(field_name):
            continue
        pa = getattr(aff, field_name)
        ap = f"{path}.{json_name}"
        for i, term in enumerate(pa.required_during_scheduling_ignored_during_execution):
            _pod_affinity_term(errs, term, f"{ap}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, wterm in enumerate(pa.preferred_during_scheduling_ignored_during_execution):
            wp = f"{ap}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            _weight(errs, wterm.weight, f"{wp}.weight")
            _pod_affinity_term(errs, wterm.pod_affinity_term, f"{wp}.podAffinityTerm")


def _weight(errs: FieldErrors, weight: int, path: str) -> None:
    if not 1 <= weight <= 100:
        errs.invalid(path, weight, "must be in the range 1-100")


def _pod_affinity_term(errs: FieldErrors, term: pb.PodAffinityTerm, path: str) -> None:
    if not term.topology_key:
        errs.required(f"{path}.topologyKey", "can not be empty")
    else:
        for msg in names.is_qualified_name(term.topology_key):
            errs.invalid(f"{path}.topologyKey", term.topology_key, msg)
    if term.HasField("label_selector"):
        validate_label_selector(errs, term.label_selector, f"{path}.labelSelector")
    if term.HasField("namespace_selector"):
        validate_label_selector(errs, term.namespace_selector, f"{path}.namespaceSelector")
    for i, ns in enumerate(term.namespaces):
        for msg in names.is_dns1123_label(ns):
            errs.invalid(f"{path}.namespaces[{i}]", ns, msg)
    for attr, json_name in (
        ("match_label_keys", "matchLabelKeys"),
        ("mismatch_label_keys", "mismatchLabelKeys"),
    ):
        for i, key in enumerate(getattr(term, attr)):
            for msg in names.is_qualified_name(key):
                errs.invalid(f"{path}.{json_name}[{i}]", key, msg)


def _toleration(errs: FieldErrors, t: pb.Toleration, path: str) -> None:
    if t.key:
        for msg in names.is_qualified_name(t.key):
            errs.invalid(f"{path}.key", t.key, msg)
    elif t.operator != "Exists":
        errs.invalid(
            f"{path}.operator",
            t.operator,
            'operator must be Exists when `key` is empty, which means "match all values and all keys"',
        )
    if t.HasField("toleration_seconds") and t.effect != "NoExecute":
        errs.invalid(f"{path}.effect", t.effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
    if t.operator in ("", "Equal"):
        for msg in names.is_valid_label_value(t.value):
            errs.invalid(f"{path}.value", t.value, msg)
    elif t.operator == "Exists":
        if t.value:
            errs.invalid(f"{path}.operator", t.value, "value must be empty when `operator` is 'Exists'")
    elif t.operator in ("Gt", "Lt"):
        if not is_int(t.value):
            errs.invalid(f"{path}.value", t.value, "value must be an integer when `operator` is 'Gt' or 'Lt'")
    else:
        errs.unsupported(f"{path}.operator", t.operator, TOLERATION_OPERATORS)
    errs.enum(f"{path}.effect", t.effect, TAINT_EFFECTS)


def _spread(errs: FieldErrors, c: pb.TopologySpreadConstraint, path: str) -> None:
    if c.max_skew <= 0:
        errs.invalid(f"{path}.maxSkew", c.max_skew, "must be greater than zero")
    if not c.topology_key:
        errs.required(f"{path}.topologyKey", "can not be empty")
    else:
        for msg in names.is_qualified_name(c.topology_key):
            errs.invalid(f"{path}.topologyKey", c.topology_key, msg)
    errs.enum(f"{path}.whenUnsatisfiable", c.when_unsatisfiable, WHEN_UNSATISFIABLE, allow_empty=False)
    if c.HasField("min_domains"):
        if c.min_domains <= 0:
            errs.invalid(f"{path}.minDomains", c.min_domains, "must be greater than 0")
        elif c.when_unsatisfiable != "DoNotSchedule":
            errs.invalid(
                f"{path}.minDomains",
                c.min_domains,
                "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not " + c.when_unsatisfiable,
            )
    errs.enum(f"{path}.nodeAffinityPolicy", c.node_affinity_policy, INCLUSION_POLICIES)
    errs.enum(f"{path}.nodeTaintsPolicy", c.node_taints_policy, INCLUSION_POLICIES)
    if c.HasField("label_selector"):
        validate_label_selector(errs, c.label_selector, f"{path}.labelSelector")
    for i, key in enumerate(c.match_label_keys):
        for msg in names.is_qualified_name(key):
            errs.invalid(f"{path}.matchLabelKeys[{i}]", key, msg)


def validate_pod_status(errs: FieldErrors, status: pb.PodStatus, path: str) -> None:
    errs.enum(f"{path}.phase", status.phase, POD_PHASES)
    for i, cond in enumerate(status.conditions):
        cp = f"{path}.conditions[{i}]"
        if not cond.type:
            errs.required(f"{cp}.type")
        errs.enum(f"{cp}.status", cond.status, common.CONDITION_STATUSES, allow_empty=False)
        common.timestamp(errs, f"{cp}.lastProbeTime", cond.last_probe_time)
        common.timestamp(errs, f"{cp}.lastTransitionTime", cond.last_transition_time)
    if status.nominated_node_name:
        for msg in names.is_dns1123_subdomain(status.nominated_node_name):
            errs.invalid(f"{path}.nominatedNodeName", status.nominated_node_name, msg)
    common.timestamp(errs, f"{path}.startTime", status.start_time)
    for i, cs in enumerate(status.container_statuses):
        if not cs.name:
            errs.required(f"{path}.containerStatuses[{i}].name")
        if cs.restart_count < 0:
            errs.invalid(
                f"{path}.containerStatuses[{i}].restartCount",
                cs.restart_count,
                "must be greater than or equal to 0",
            )


def validate_pod_spec_update(errs: FieldErrors, new: pb.PodSpec, old: pb.PodSpec) -> None:
    """Only images, added tolerations, removed scheduling gates and the grace period may change."""
    masked = pb.PodSpec()
    masked.CopyFrom(new)
    if len(masked.containers) == len(old.containers):
        for c, o in zip(masked.containers, old.containers, strict=True):
            c.image = o.image
    if len(masked.init_containers) == len(old.init_containers):
        for c, o in zip(masked.init_containers, old.init_containers, strict=True):
            c.image = o.image
    # Tolerations: the old ones must all still be there; additions are allowed.
    new_tols = [t.SerializeToString(deterministic=True) for t in new.tolerations]
    old_tols = [t.SerializeToString(deterministic=True) for t in old.tolerations]
    if all(t in new_tols for t in old_tols):
        del masked.tolerations[:]
        masked.tolerations.extend(old.tolerations)
    # Scheduling gates: only removals.
    old_gates = {g.name for g in old.scheduling_gates}
    for i, gate in enumerate(new.scheduling_gates):
        if gate.name not in old_gates:
            errs.forbidden(
                f"spec.schedulingGates[{i}]",
                f"only deletion is allowed, but found new scheduling gate '{gate.name}'",
            )
    del masked.scheduling_gates[:]
    masked.scheduling_gates.extend(old.scheduling_gates)
    if old.HasField("termination_grace_period_seconds"):
        masked.termination_grace_period_seconds = old.termination_grace_period_seconds
    else:
        masked.ClearField("termination_grace_period_seconds")
    if masked != old:
        changed = _changed_fields(masked, old)
        errs.forbidden("spec", f"{IMMUTABLE_SPEC_MESSAGE} (changed: {', '.join(changed)})")


def _changed_fields(new: pb.PodSpec, old: pb.PodSpec) -> list[str]:
    out = []
    for fd in pb.PodSpec.DESCRIPTOR.fields:
        if getattr(new, fd.name) != getattr(old, fd.name):
            out.append(f"spec.{fd.json_name}")
        elif fd.has_presence and new.HasField(fd.name) != old.HasField(fd.name):
            out.append(f"spec.{fd.json_name}")
    return out


def validate_binding(errs: FieldErrors, binding: pb.Binding) -> None:
    if not binding.metadata.name:
        errs.required("metadata.name")
    if not binding.target.name:
        errs.required("target.name")
    else:
        for msg in names.is_dns1123_subdomain(binding.target.name):
            errs.invalid("target.name", binding.target.name, msg)
    if binding.target.kind and binding.target.kind != "Node":
        errs.unsupported("target.kind", binding.target.kind, ("Node",))
