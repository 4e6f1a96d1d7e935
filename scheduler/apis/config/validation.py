"""Validation, as upstream ``pkg/scheduler/apis/config/validation/validation.go`` and
``validation_pluginargs.go``, plus kse's refusals of what it does not implement.

Every problem is one line naming the field the way Kubernetes field errors do, e.g.
``profiles[1].plugins.score.enabled[0].weight: Invalid value: 0: ...``.

Where kse is stricter than upstream, on purpose:

- plugin names are checked when the file is loaded, with the field path of the entry, instead of
  when the framework is built; an unknown name in ``pluginConfig`` is an error (upstream ignores
  it, so a misspelt plugin would silently keep its defaults);
- an explicit score weight of 0 or less is refused (upstream reads 0 as 1, and lets a negative
  weight invert the plugin's scores);
- NodeResourcesFit args are validated here (upstream only does it when the plugin is built);
- extenders: see ``validation_extenders``;
- ``delayCacheUntilActive: true`` and the alpha workload-aware fields are refused.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kse.objects.labels import compile_node_selector_term
from kse.objects.names import is_label_key
from proto import kse_pb2 as pb

from .defaults import INVALID_IN_V1, NOT_IMPLEMENTED
from .profile import Implements, implemented_points
from .types import (
    API_VERSION,
    EXTENSION_POINTS,
    MULTI_POINT,
    PLACEMENT_POINTS,
    DefaultPreemptionArgs,
    InterPodAffinityArgs,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Plugins,
    PluginSet,
    PodTopologySpreadArgs,
    UtilizationShapePoint,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    to_dict,
)
from .validation_extenders import validate_extenders

MAX_CUSTOM_PRIORITY_SCORE = 10  # upstream config.MaxCustomPriorityScore
SCORING_STRATEGY_TYPES = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
WORKLOAD_AWARE = (
    "alpha workload-aware (pod group) scheduling, feature gate TopologyAwareWorkloadScheduling, "
    "which kse does not implement"
)

# ---------------------------------------------------------------- names (apimachinery)


def validate_label_name(path: str, value: str) -> list[str]:
    """metav1validation.ValidateLabelName (IsQualifiedName): label keys, resource names."""
    return [invalid(path, value, msg) for msg in is_label_key(value)]


# ---------------------------------------------------------------- plugin sets (as written)


def validate_plugin_sets(
    path: str, plugins: Plugins | None, *, known_plugins: Collection[str], implements: Implements
) -> list[str]:
    """Check every plugin a profile names, before defaults are merged in, so that each error
    points at the user's entry: unknown or unimplemented plugins, plugins at a point they do not
    extend, duplicates, non-positive score weights, and the alpha placement points."""
    if plugins is None:
        return []
    impl = implemented_points(implements)
    errs: list[str] = []
    for point in PLACEMENT_POINTS:
        if not plugins.point(point).is_empty():
            errs.append(
                forbidden(f"{path}.{point}", f"the {point} extension point belongs to {WORKLOAD_AWARE}")
            )
    for point in (MULTI_POINT, *EXTENSION_POINTS):
        errs += _validate_plugin_set(f"{path}.{point}", point, plugins.point(point), known_plugins, impl)
    return errs


def _validate_plugin_set(
    path: str, point: str, pset: PluginSet, known: Collection[str], impl: Mapping[str, frozenset[str]]
) -> list[str]:
    errs: list[str] = []
    seen: set[str] = set()
    for j, p in enumerate(pset.enabled):
        entry = f"{path}.enabled[{j}]"
        if not p.name:
            errs.append(required(f"{entry}.name"))
            continue
        if p.name in INVALID_IN_V1:
            errs.append(invalid(entry, p.name, _invalid_in_v1()))
            continue
        if p.name not in known:
            errs.append(invalid(f"{entry}.name", p.name, unknown_plugin(p.name)))
            continue
        points = impl.get(p.name, frozenset())
        if point != MULTI_POINT and point not in points:
            have = ", ".join(pt for pt in EXTENSION_POINTS if pt in points) or "none"
            errs.append(
                invalid(
                    f"{entry}.name",
                    p.name,
                    f'plugin "{p.name}" does not extend the {point} extension point (it implements: {have})',
                )
            )
            continue
        if p.name in seen:
            errs.append(duplicate(f"{entry}.name", p.name))
            continue
        seen.add(p.name)
        if p.weight is not None and p.weight <= 0 and "score" in points and point in ("score", MULTI_POINT):
            errs.append(
                invalid(
                    f"{entry}.weight",
                    p.weight,
                    "must be greater than 0 (a score weight of zero is not permitted; disable the plugin "
                    "at score instead)",
                )
            )
    return errs


def unknown_plugin(name: str) -> str:
    if name in NOT_IMPLEMENTED:
        return (
            f'plugin "{name}" is an upstream kube-scheduler plugin that kse does not implement '
            f"({NOT_IMPLEMENTED[name]})"
        )
    return f'plugin "{name}" does not exist'


def _invalid_in_v1() -> str:
    return f'was invalid in version "{API_VERSION}" (KubeSchedulerConfiguration is version "{API_VERSION}")'


# ---------------------------------------------------------------- the whole configuration


def validate(cfg: KubeSchedulerConfiguration, *, known_plugins: Collection[str]) -> list[str]:
    """Upstream ``ValidateKubeSchedulerConfiguration`` on the defaulted configuration, plus
    kse's refusals. Plugin names are checked earlier (``validate_plugin_sets``)."""
    errs: list[str] = []
    errs += _validate_client_connection(cfg)
    errs += _validate_leader_election(cfg)
    if cfg.parallelism is None or cfg.parallelism <= 0:
        errs.append(invalid("parallelism", cfg.parallelism, "should be an integer value greater than zero"))
    if not cfg.profiles:
        errs.append(required("profiles"))
    else:
        seen: dict[str, int] = {}
        for i, profile in enumerate(cfg.profiles):
            path = f"profiles[{i}]"
            errs += validate_profile(path, profile, known_plugins=known_plugins)
            name = profile.scheduler_name or ""
            if name and name in seen:
                errs.append(
                    duplicate(f"{path}.schedulerName", name) + f" (also profiles[{seen[name]}].schedulerName)"
                )
            seen.setdefault(name, i)
        errs += validate_common_queue_sort(cfg.profiles)
    errs += _percentage("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score)
    if cfg.percentage_of_placements_to_score is not None:
        errs.append(forbidden("percentageOfPlacementsToScore", f"belongs to {WORKLOAD_AWARE}"))
    initial, maximum = cfg.pod_initial_backoff_seconds or 0, cfg.pod_max_backoff_seconds or 0
    if initial <= 0:
        errs.append(invalid("podInitialBackoffSeconds", initial, "must be greater than 0"))
    if maximum < initial:
        errs.append(
            invalid(
                "podMaxBackoffSeconds", maximum, "must be greater than or equal to PodInitialBackoffSeconds"
            )
        )
    errs += validate_extenders(cfg.extenders)
    if cfg.delay_cache_until_active:
        errs.append(
            forbidden(
                "delayCacheUntilActive",
                "kse schedulers always keep warm informers on standby replicas, so failover does not "
                "wait for a cache sync",
            )
        )
    return errs


def _percentage(path: str, value: int | None) -> list[str]:
    if value is not None and not 0 <= value <= 100:
        return [invalid(path, value, "not in valid range [0-100]")]
    return []


def _validate_client_connection(cfg: KubeSchedulerConfiguration) -> list[str]:
    cc = cfg.client_connection
    if cc.burst < 0:
        return [invalid("clientConnection.burst", cc.burst, "must be non-negative")]
    return []


def _validate_leader_election(cfg: KubeSchedulerConfiguration) -> list[str]:
    """component-base ValidateLeaderElectionConfiguration, plus the scheduler's "leases" rule."""
    le = cfg.leader_election
    if not le.leader_elect:
        return []
    p = "leaderElection"
    lease, renew, retry = le.lease_duration or 0.0, le.renew_deadline or 0.0, le.retry_period or 0.0
    errs = []
    if lease <= 0:
        errs.append(invalid(f"{p}.leaseDuration", _dur(lease), "must be greater than zero"))
    if renew <= 0:
        errs.append(invalid(f"{p}.renewDeadline", _dur(renew), "must be greater than zero"))
    if retry <= 0:
        errs.append(invalid(f"{p}.retryPeriod", _dur(retry), "must be greater than zero"))
    if lease <= renew:
        errs.append(
            invalid(f"{p}.leaseDuration", _dur(renew), "LeaseDuration must be greater than RenewDeadline")
        )
    if not le.resource_lock:
        errs.append(invalid(f"{p}.resourceLock", le.resource_lock, "resourceLock is required"))
    elif le.resource_lock != "leases":
        errs.append(invalid(f"{p}.resourceLock", le.resource_lock, 'resourceLock value must be "leases"'))
    if not le.resource_namespace:
        errs.append(invalid(f"{p}.resourceNamespace", le.resource_namespace, "resourceNamespace is required"))
    if not le.resource_name:
        errs.append(invalid(f"{p}.resourceName", le.resource_name, "resourceName is required"))
    return errs


def _dur(seconds: float) -> str:
    return f"{seconds:g}s"


def validate_profile(
    path: str, profile: KubeSchedulerProfile, *, known_plugins: Collection[str]
) -> list[str]:
    errs: list[str] = []
    if not profile.scheduler_name:
        errs.append(required(f"{path}.schedulerName"))
    errs += _percentage(f"{path}.percentageOfNodesToScore", profile.percentage_of_nodes_to_score)
    if profile.percentage_of_placements_to_score is not None:
        errs.append(forbidden(f"{path}.percentageOfPlacementsToScore", f"belongs to {WORKLOAD_AWARE}"))
    errs += validate_plugin_config(path, profile, known_plugins=known_plugins)
    return errs


def validate_plugin_config(
    path: str, profile: KubeSchedulerProfile, *, known_plugins: Collection[str]
) -> list[str]:
    """Upstream ``validatePluginConfig``: one entry per plugin, known plugins, valid args."""
    errs: list[str] = []
    seen: set[str] = set()
    for j, pc in enumerate(profile.plugin_config):
        p = f"{path}.pluginConfig[{j}]"
        if pc.name in seen:
            errs.append(duplicate(p, pc.name))
        seen.add(pc.name)
        if pc.name in INVALID_IN_V1:
            errs.append(invalid(p, pc.name, _invalid_in_v1()))
            continue
        if pc.name not in known_plugins:
            errs.append(invalid(f"{p}.name", pc.name, unknown_plugin(pc.name)))
            continue
        errs += validate_args(f"{p}.args", pc.args)
    return errs


def validate_common_queue_sort(profiles: list[KubeSchedulerProfile]) -> list[str]:
    """Upstream ``validateCommonQueueSort``: one queue sort, the same in every profile."""
    errs: list[str] = []
    canon = profiles[0].plugins.queue_sort if profiles[0].plugins else PluginSet()
    name = canon.enabled[0].name if canon.enabled else ""
    if len(canon.enabled) > 1:
        errs.append(
            invalid(
                "profiles[0].plugins.queueSort.enabled",
                len(canon.enabled),
                "only one queue sort plugin can be enabled",
            )
        )
    canon_args = next((pc.args for pc in profiles[0].plugin_config if name and pc.name == name), None)
    for i, profile in enumerate(profiles[1:], start=1):
        curr = profile.plugins.queue_sort if profile.plugins else PluginSet()
        if to_dict(curr) != to_dict(canon):
            errs.append(
                invalid(
                    f"profiles[{i}].plugins.queueSort", to_dict(curr), "must be the same for all profiles"
                )
            )
        for pc in profile.plugin_config:
            if pc.name == name and to_dict(pc.args) != to_dict(canon_args):
                errs.append(
                    invalid(
                        f"profiles[{i}].pluginConfig.args",
                        to_dict(pc.args),
                        "queueSort must be the same for all profiles",
                    )
                )
    return errs


# ---------------------------------------------------------------- plugin args


def validate_args(path: str, args: Any) -> list[str]:
    if isinstance(args, NodeResourcesFitArgs):
        return validate_node_resources_fit_args(path, args)
    if isinstance(args, PodTopologySpreadArgs):
        return validate_pod_topology_spread_args(path, args)
    if isinstance(args, NodeAffinityArgs):
        return validate_node_affinity_args(path, args)
    if isinstance(args, NodeResourcesBalancedAllocationArgs):
        return validate_balanced_allocation_args(path, args)
    if isinstance(args, InterPodAffinityArgs):
        return validate_inter_pod_affinity_args(path, args)
    if isinstance(args, DefaultPreemptionArgs):
        return validate_default_preemption_args(path, args)
    return []


def validate_node_resources_fit_args(path: str, args: NodeResourcesFitArgs) -> list[str]:
    errs: list[str] = []
    for i, res in enumerate(args.ignored_resources):
        errs += validate_label_name(f"{path}.ignoredResources[{i}]", res)
    for i, group in enumerate(args.ignored_resource_groups):
        p = f"{path}.ignoredResourceGroups[{i}]"
        if "/" in group:
            errs.append(invalid(p, group, "resource group name can't contain '/'"))
        errs += validate_label_name(p, group)
    sp = f"{path}.scoringStrategy"
    strategy = args.scoring_strategy
    if strategy is None:
        return [*errs, required(sp, "ScoringStrategy field is required")]
    if strategy.type not in SCORING_STRATEGY_TYPES:
        errs.append(not_supported(f"{sp}.type", strategy.type, SCORING_STRATEGY_TYPES))
    for i, r in enumerate(strategy.resources):
        if not 0 < r.weight <= 100:
            errs.append(
                invalid(
                    f"{sp}.resources[{i}].weight",
                    r.weight,
                    f"resource weight of {r.name} not in valid range (0, 100]",
                )
            )
    rtcr = f"{sp}.requestedToCapacityRatio"
    if strategy.type == "RequestedToCapacityRatio":
        if strategy.requested_to_capacity_ratio is None:
            errs.append(required(rtcr, "must be specified when type is RequestedToCapacityRatio"))
        else:
            errs += validate_function_shape(f"{rtcr}.shape", strategy.requested_to_capacity_ratio.shape)
    elif strategy.requested_to_capacity_ratio is not None:
        errs.append(forbidden(rtcr, "must be nil when type is not RequestedToCapacityRatio"))
    return errs


def validate_function_shape(path: str, shape: list[UtilizationShapePoint]) -> list[str]:
    if not shape:
        return [required(path, "at least one point must be specified")]
    errs: list[str] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(
                invalid(
                    f"{path}[{i}].utilization",
                    shape[i].utilization,
                    "values must be sorted in increasing order",
                )
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            errs.append(invalid(f"{path}[{i}].utilization", point.utilization, "not in valid range [0, 100]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(
                invalid(
                    f"{path}[{i}].score", point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
                )
            )
    return errs


def validate_pod_topology_spread_args(path: str, args: PodTopologySpreadArgs) -> list[str]:
    errs: list[str] = []
    dt = f"{path}.defaultingType"
    if args.defaulting_type not in ("System", "List"):
        errs.append(not_supported(dt, args.defaulting_type, ["System", "List"]))
    elif args.defaulting_type == "System" and args.default_constraints:
        errs.append(invalid(dt, args.defaulting_type, "when .defaultConstraints are not empty"))
    cp = f"{path}.defaultConstraints"
    for i, c in enumerate(args.default_constraints):
        p = f"{cp}[{i}]"
        if c.max_skew <= 0:
            errs.append(invalid(f"{p}.maxSkew", c.max_skew, "not in valid range (0, inf)"))
        if not c.topology_key:
            errs.append(required(f"{p}.topologyKey", "can not be empty"))
        else:
            errs += validate_label_name(f"{p}.topologyKey", c.topology_key)
        if not c.when_unsatisfiable:
            errs.append(required(f"{p}.whenUnsatisfiable", "can not be empty"))
        elif c.when_unsatisfiable not in ("DoNotSchedule", "ScheduleAnyway"):
            errs.append(
                not_supported(
                    f"{p}.whenUnsatisfiable", c.when_unsatisfiable, ["DoNotSchedule", "ScheduleAnyway"]
                )
            )
        if c.label_selector is not None:
            errs.append(
                forbidden(
                    f"{p}.labelSelector",
                    "constraint must not define a selector, as they deduced for each pod",
                )
            )
        for other in args.default_constraints[:i]:
            if (other.topology_key, other.when_unsatisfiable) == (c.topology_key, c.when_unsatisfiable):
                errs.append(duplicate(p, f"{{{c.topology_key}, {c.when_unsatisfiable}}}"))
                break
    return errs


def validate_node_affinity_args(path: str, args: NodeAffinityArgs) -> list[str]:
    """Upstream parses addedAffinity with component-helpers' nodeaffinity and reports its
    errors; kse parses it with the same code the NodeAffinity plugin uses
    (``kse.objects.labels.compile_node_selector_term``). Empty terms are skipped, as are
    preferred terms of weight 0."""
    aff = args.added_affinity
    if aff is None:
        return []
    errs: list[str] = []
    base = f"{path}.addedAffinity"
    if aff.required_during_scheduling_ignored_during_execution is not None:
        terms = aff.required_during_scheduling_ignored_during_execution.node_selector_terms
        for i, term in enumerate(terms):
            errs += _node_selector_term(
                f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]", term
            )
    for i, pref in enumerate(aff.preferred_during_scheduling_ignored_during_execution):
        if pref.weight != 0:
            errs += _node_selector_term(
                f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]", pref.preference
            )
    return errs


def _node_selector_term(path: str, term: NodeSelectorTerm) -> list[str]:
    message = pb.NodeSelectorTerm(
        match_expressions=[_requirement(r) for r in term.match_expressions],
        match_fields=[_requirement(r) for r in term.match_fields],
    )
    compiled = compile_node_selector_term(message, path)
    return list(compiled.errors) if compiled is not None else []


def _requirement(r: NodeSelectorRequirement) -> pb.NodeSelectorRequirement:
    return pb.NodeSelectorRequirement(key=r.key, operator=r.operator, values=r.values)


def validate_balanced_allocation_args(path: str, args: NodeResourcesBalancedAllocationArgs) -> list[str]:
    errs: list[str] = []
    seen: set[str] = set()
    for i, r in enumerate(args.resources):
        if r.name in seen:
            errs.append(duplicate(f"{path}.resources[{i}].name", r.name))
        seen.add(r.name)
        if r.weight != 1:
            errs.append(invalid(f"{path}.resources[{i}].weight", r.weight, "must be 1"))
    return errs


def validate_inter_pod_affinity_args(path: str, args: InterPodAffinityArgs) -> list[str]:
    w = args.hard_pod_affinity_weight
    if w is not None and not 0 <= w <= 100:
        return [invalid(f"{path}.hardPodAffinityWeight", w, "not in valid range [0, 100]")]
    return []


def validate_default_preemption_args(path: str, args: DefaultPreemptionArgs) -> list[str]:
    """Upstream ValidateDefaultPreemptionArgs (on the defaulted args)."""
    errs: list[str] = []
    pct, pct_path = args.min_candidate_nodes_percentage or 0, f"{path}.minCandidateNodesPercentage"
    absolute, abs_path = args.min_candidate_nodes_absolute or 0, f"{path}.minCandidateNodesAbsolute"
    if not 0 <= pct <= 100:
        errs.append(invalid(pct_path, pct, "not in valid range [0, 100]"))
    if absolute < 0:
        errs.append(invalid(abs_path, absolute, "not in valid range [0, inf)"))
    if pct == 0 and absolute == 0:
        errs.append(invalid(pct_path, pct, "cannot be zero at the same time as minCandidateNodesAbsolute"))
        errs.append(
            invalid(abs_path, absolute, "cannot be zero at the same time as minCandidateNodesPercentage")
        )
    return errs
