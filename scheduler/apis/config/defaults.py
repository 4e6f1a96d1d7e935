"""v1 defaults (upstream ``pkg/scheduler/apis/config/v1/defaults.go`` and ``default_plugins.go``).

The kse default plugin set is upstream's ``getDefaultPlugins()`` (v1.31+: all in ``multiPoint``,
score weights as listed) minus the plugins kse does not implement. Exactly, in order::

    SchedulingGates, PrioritySort, NodeUnschedulable, NodeName, TaintToleration (weight 3),
    NodeAffinity (2), NodePorts, NodeResourcesFit (1), UnsupportedFeatures, PodTopologySpread (2),
    InterPodAffinity (2), DefaultPreemption, NodeResourcesBalancedAllocation (1), ImageLocality (1),
    DefaultBinder

UnsupportedFeatures is kse's own: it stands where the volume plugins are, and refuses (in
PreFilter, saying so) a pod that uses what only the left-out plugins could honour, so that no
pod is placed ignoring a constraint.

Left out from upstream's list: VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone
(kse emulates no volumes), DynamicResources (no DRA). A default
is only used when the registry (``known_plugins``) has it, so a registry without one of them gets
the rest rather than a configuration that cannot start.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Collection

from .types import (
    ARGS_TYPES,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINTS,
    MULTI_POINT,
    DefaultPreemptionArgs,
    Duration,
    InterPodAffinityArgs,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    Plugin,
    PluginConfig,
    Plugins,
    PluginSet,
    PodTopologySpreadArgs,
    ResourceSpec,
    ScoringStrategy,
    snake,
)

log = logging.getLogger(__name__)

# Upstream getDefaultPlugins(), v1.31+ (DynamicResources is inserted before DefaultPreemption
# when DRA is on, its default since v1.34).
UPSTREAM_DEFAULT_PLUGINS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", None),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
)

# Upstream in-tree plugins kse does not implement, with the reason given to users.
NOT_IMPLEMENTED: dict[str, str] = {
    "VolumeRestrictions": "kse does not emulate volumes",
    "NodeVolumeLimits": "kse does not emulate volumes",
    "VolumeBinding": "kse does not emulate volumes",
    "VolumeZone": "kse does not emulate volumes",
    "DynamicResources": "kse does not emulate dynamic resource allocation",
    "GangScheduling": "kse does not implement alpha workload-aware (gang) scheduling",
    "PodGroupPodsCount": "kse does not implement alpha workload-aware (pod group) scheduling",
    "PlacementBinPacking": "kse does not implement alpha workload-aware (pod group) scheduling",
}
# Removed from kube-scheduler; upstream validation names the version they became invalid in.
INVALID_IN_V1 = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")

KSE_OMITTED_DEFAULTS = frozenset(
    {
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "DynamicResources",
    }
)

DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0  # adaptive
DEFAULT_PARALLELISM = 16
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100


# kse's own default plugins, each inserted before the upstream plugin named.
KSE_EXTRA_DEFAULTS: dict[str, str] = {"VolumeRestrictions": "UnsupportedFeatures"}


def default_plugins(known_plugins: Collection[str]) -> Plugins:
    """The kse default plugin set (see the module docstring), as a fresh ``Plugins``."""
    enabled = []
    for name, weight in UPSTREAM_DEFAULT_PLUGINS:
        extra = KSE_EXTRA_DEFAULTS.get(name)
        if extra is not None and extra in known_plugins:
            enabled.append(Plugin(extra))
        if name not in KSE_OMITTED_DEFAULTS and name in known_plugins:
            enabled.append(Plugin(name, weight))
    return Plugins(multi_point=PluginSet(enabled=enabled))


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Upstream ``mergePluginSet``: the user's set layered over the defaults.

    Defaults keep their order unless disabled (``'*'`` disables them all); a default the user
    enables again is replaced in place by the user's entry (the last one of that name); the
    user's other entries follow in their order. Disabled names (the user's, then the default
    set's) are kept so that multiPoint expansion skips them at this point.
    """
    disabled = [Plugin(p.name) for p in custom.disabled] + [Plugin(p.name) for p in default.disabled]
    disabled_names = {p.name for p in disabled}
    custom_index = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[Plugin] = []
    if "*" not in disabled_names:
        for p in default.enabled:
            if p.name in disabled_names:
                continue
            if p.name in custom_index:
                i, override = custom_index[p.name]
                log.info("default plugin %s is explicitly re-configured; overriding", p.name)
                p = override
                replaced.add(i)
            enabled.append(copy.copy(p))
    enabled += [copy.copy(p) for i, p in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(enabled=enabled, disabled=disabled)


def merge_plugins(default: Plugins, custom: Plugins | None) -> Plugins:
    """Upstream ``mergePlugins``: per extension point, and for multiPoint."""
    if custom is None:
        return copy.deepcopy(default)
    merged = copy.deepcopy(custom)  # keeps the placement points as written (refused later)
    for point in (MULTI_POINT, *EXTENSION_POINTS):
        setattr(merged, snake(point), merge_plugin_set(default.point(point), custom.point(point)))
    return merged


def plugins_names(plugins: Plugins) -> list[str]:
    """Names enabled at any point or multiPoint (upstream ``pluginsNames``), sorted."""
    names = {p.name for point in (MULTI_POINT, *EXTENSION_POINTS) for p in plugins.point(point).enabled}
    return sorted(names)


# ---------------------------------------------------------------- plugin args


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name, weight) for name, weight in DEFAULT_RESOURCES]


def set_defaults_args(args: object) -> None:
    """Upstream ``SetDefaults_<Name>Args``."""
    if isinstance(args, NodeResourcesFitArgs):
        if args.scoring_strategy is None:
            args.scoring_strategy = ScoringStrategy(type="LeastAllocated", resources=_default_resources())
        if not args.scoring_strategy.resources:
            args.scoring_strategy.resources = _default_resources()
        for r in args.scoring_strategy.resources:
            if r.weight == 0:
                r.weight = 1
    elif isinstance(args, NodeResourcesBalancedAllocationArgs):
        if not args.resources:
            args.resources = _default_resources()
        for r in args.resources:
            if r.weight == 0:
                r.weight = 1
    elif isinstance(args, PodTopologySpreadArgs):
        if not args.defaulting_type:
            args.defaulting_type = "System"
    elif isinstance(args, InterPodAffinityArgs):
        if args.hard_pod_affinity_weight is None:
            args.hard_pod_affinity_weight = 1
    elif isinstance(args, DefaultPreemptionArgs):
        # Upstream SetDefaults_DefaultPreemptionArgs.
        if args.min_candidate_nodes_percentage is None:
            args.min_candidate_nodes_percentage = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
        if args.min_candidate_nodes_absolute is None:
            args.min_candidate_nodes_absolute = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE
    elif isinstance(args, NodeAffinityArgs):
        pass


def set_defaults_profile(profile: KubeSchedulerProfile, known_plugins: Collection[str]) -> None:
    """Upstream ``setDefaults_KubeSchedulerProfile``: merge plugins, default every typed args,
    and append default args for enabled plugins that have an args type but no pluginConfig."""
    profile.plugins = merge_plugins(default_plugins(known_plugins), profile.plugins)
    configured = set()
    for pc in profile.plugin_config:
        configured.add(pc.name)
        set_defaults_args(pc.args)
    for name in plugins_names(profile.plugins):
        if name in configured or name not in ARGS_TYPES or name not in known_plugins:
            continue
        args = ARGS_TYPES[name]()
        set_defaults_args(args)
        profile.plugin_config.append(PluginConfig(name=name, args=args))


def set_defaults(cfg: KubeSchedulerConfiguration, known_plugins: Collection[str]) -> None:
    """Upstream ``SetDefaults_KubeSchedulerConfiguration`` (v1)."""
    if cfg.parallelism is None:
        cfg.parallelism = DEFAULT_PARALLELISM
    if not cfg.profiles:
        cfg.profiles.append(KubeSchedulerProfile())
    # Only a single profile gets a default name; validation requires names otherwise.
    if len(cfg.profiles) == 1 and cfg.profiles[0].scheduler_name is None:
        cfg.profiles[0].scheduler_name = DEFAULT_SCHEDULER_NAME
    for profile in cfg.profiles:
        set_defaults_profile(profile, known_plugins)
    if cfg.percentage_of_nodes_to_score is None:
        cfg.percentage_of_nodes_to_score = DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE

    le = cfg.leader_election
    if le.leader_elect is None:
        le.leader_elect = True
    if le.lease_duration is None:
        le.lease_duration = Duration(15.0)
    if le.renew_deadline is None:
        le.renew_deadline = Duration(10.0)
    if le.retry_period is None:
        le.retry_period = Duration(2.0)
    if not le.resource_lock:
        le.resource_lock = "leases"
    if not le.resource_namespace:
        le.resource_namespace = "kube-system"
    if not le.resource_name:
        le.resource_name = "kube-scheduler"

    cc = cfg.client_connection
    if not cc.content_type:
        cc.content_type = "application/vnd.kubernetes.protobuf"
    if cc.qps == 0.0:
        cc.qps = 50.0
    if cc.burst == 0:
        cc.burst = 100

    if cfg.pod_initial_backoff_seconds is None:
        cfg.pod_initial_backoff_seconds = 1
    if cfg.pod_max_backoff_seconds is None:
        cfg.pod_max_backoff_seconds = 10
    if cfg.enable_profiling is None:
        cfg.enable_profiling = True
    if cfg.enable_profiling and cfg.enable_contention_profiling is None:
        cfg.enable_contention_profiling = True
