"""KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``) as dataclasses.

Field for field the v1 API of ``staging/src/k8s.io/kube-scheduler/config/v1/types.go`` and
``types_pluginargs.go``; attribute names are the JSON names in snake_case (``load.py`` maps them
back, strictly). ``None`` means "unset" where upstream has a pointer; ``defaults.py`` fills them.
Plugin args are typed for the plugins kse implements; the plugins get them as camelCase
mappings (``PluginConfig.args_dict()``), the shape the plugin registry's factories take.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, NewType

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

# Seconds, written as a Go duration string ("15s", "1m30s") in the file.
Duration = NewType("Duration", float)

# The extension points, in the order upstream's Plugins type lists them (JSON names).
EXTENSION_POINTS = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
MULTI_POINT = "multiPoint"
# Alpha workload-aware (pod group) scheduling points of the newest v1 API; kse refuses them.
PLACEMENT_POINTS = ("placementGenerate", "placementScore", "placementFeasible", "podGroupPostFilter")


def snake(name: str) -> str:
    """``preFilter`` -> ``pre_filter``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def camel(name: str) -> str:
    """``pre_filter`` -> ``preFilter``."""
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def json_name(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("json") or camel(f.name))


# ---------------------------------------------------------------- errors


class ConfigError(Exception):
    """The configuration is invalid or unsupported. ``errors`` holds one line per problem, each
    naming the field as Kubernetes field errors do; ``str()`` is those lines."""

    def __init__(self, errors: list[str], source: str = "") -> None:
        self.errors = list(errors)
        self.source = source
        super().__init__("\n".join(self.errors))


def fmt_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return "null"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = to_dict(value)
    return json.dumps(value, sort_keys=False)


def invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {fmt_value(value)}: {detail}"


def required(path: str, detail: str = "") -> str:
    return f"{path}: Required value: {detail}" if detail else f"{path}: Required value"


def duplicate(path: str, value: Any) -> str:
    return f"{path}: Duplicate value: {fmt_value(value)}"


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def not_supported(path: str, value: Any, supported: list[str]) -> str:
    values = ", ".join(json.dumps(s) for s in supported)
    return f"{path}: Unsupported value: {fmt_value(value)}: supported values: {values}"


# ---------------------------------------------------------------- plugins


@dataclass
class Plugin:
    name: str = ""
    # Only used at score (and the placement points); None = unset (0 upstream, read as 1).
    weight: int | None = None


@dataclass
class PluginSet:
    enabled: list[Plugin] = field(default_factory=list)
    disabled: list[Plugin] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.enabled and not self.disabled


@dataclass
class Plugins:
    pre_enqueue: PluginSet = field(default_factory=PluginSet)
    queue_sort: PluginSet = field(default_factory=PluginSet)
    pre_filter: PluginSet = field(default_factory=PluginSet)
    filter: PluginSet = field(default_factory=PluginSet)
    post_filter: PluginSet = field(default_factory=PluginSet)
    pre_score: PluginSet = field(default_factory=PluginSet)
    score: PluginSet = field(default_factory=PluginSet)
    reserve: PluginSet = field(default_factory=PluginSet)
    permit: PluginSet = field(default_factory=PluginSet)
    pre_bind: PluginSet = field(default_factory=PluginSet)
    bind: PluginSet = field(default_factory=PluginSet)
    post_bind: PluginSet = field(default_factory=PluginSet)
    multi_point: PluginSet = field(default_factory=PluginSet)
    placement_generate: PluginSet = field(default_factory=PluginSet)
    placement_score: PluginSet = field(default_factory=PluginSet)
    placement_feasible: PluginSet = field(default_factory=PluginSet)
    pod_group_post_filter: PluginSet = field(default_factory=PluginSet)

    def point(self, name: str) -> PluginSet:
        """The set of an extension point by its JSON name (``preFilter``, ``multiPoint``, ...)."""
        value = getattr(self, snake(name))
        assert isinstance(value, PluginSet)
        return value


@dataclass(frozen=True)
class PluginRef:
    """A plugin at one extension point after expansion. ``weight`` is the resolved score weight
    (>= 1) at ``score`` and 0 elsewhere."""

    name: str
    weight: int = 0


@dataclass
class ExpandedPlugins:
    """The ordered plugins of each extension point, as the framework runs them (upstream
    ``frameworkImpl``'s per-point slices after ``expandMultiPointPlugins``)."""

    pre_enqueue: list[PluginRef] = field(default_factory=list)
    queue_sort: list[PluginRef] = field(default_factory=list)
    pre_filter: list[PluginRef] = field(default_factory=list)
    filter: list[PluginRef] = field(default_factory=list)
    post_filter: list[PluginRef] = field(default_factory=list)
    pre_score: list[PluginRef] = field(default_factory=list)
    score: list[PluginRef] = field(default_factory=list)
    reserve: list[PluginRef] = field(default_factory=list)
    permit: list[PluginRef] = field(default_factory=list)
    pre_bind: list[PluginRef] = field(default_factory=list)
    bind: list[PluginRef] = field(default_factory=list)
    post_bind: list[PluginRef] = field(default_factory=list)

    def point(self, name: str) -> list[PluginRef]:
        value = getattr(self, snake(name))
        assert isinstance(value, list)
        return value

    def names(self, point: str) -> list[str]:
        return [p.name for p in self.point(point)]

    def all_plugins(self) -> list[str]:
        """Every plugin used at some point, in first-use order (the plugins to instantiate)."""
        seen: dict[str, None] = {}
        for point in EXTENSION_POINTS:
            for ref in self.point(point):
                seen.setdefault(ref.name, None)
        return list(seen)

    def score_weights(self) -> dict[str, int]:
        return {p.name: p.weight for p in self.score}


# ---------------------------------------------------------------- plugin args


@dataclass
class ResourceSpec:
    name: str = ""
    weight: int = 0


@dataclass
class UtilizationShapePoint:
    utilization: int = 0
    score: int = 0


@dataclass
class RequestedToCapacityRatioParam:
    shape: list[UtilizationShapePoint] = field(default_factory=list)


@dataclass
class ScoringStrategy:
    type: str = ""
    resources: list[ResourceSpec] = field(default_factory=list)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


@dataclass
class NodeResourcesFitArgs:
    ignored_resources: list[str] = field(default_factory=list)
    ignored_resource_groups: list[str] = field(default_factory=list)
    scoring_strategy: ScoringStrategy | None = None


@dataclass
class TopologySpreadConstraint:
    """corev1.TopologySpreadConstraint (labelSelector kept raw: it must be unset here)."""

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: dict[str, Any] | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = field(default_factory=list)


@dataclass
class PodTopologySpreadArgs:
    default_constraints: list[TopologySpreadConstraint] = field(default_factory=list)
    defaulting_type: str = ""


@dataclass
class NodeSelectorRequirement:
    key: str = ""
    operator: str = ""
    values: list[str] = field(default_factory=list)


@dataclass
class NodeSelectorTerm:
    match_expressions: list[NodeSelectorRequirement] = field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = field(default_factory=list)


@dataclass
class NodeSelector:
    node_selector_terms: list[NodeSelectorTerm] = field(default_factory=list)


@dataclass
class PreferredSchedulingTerm:
    weight: int = 0
    preference: NodeSelectorTerm = field(default_factory=NodeSelectorTerm)


@dataclass
class NodeAffinity:
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = field(
        default_factory=list
    )


@dataclass
class NodeAffinityArgs:
    added_affinity: NodeAffinity | None = None


@dataclass
class NodeResourcesBalancedAllocationArgs:
    resources: list[ResourceSpec] = field(default_factory=list)


@dataclass
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int | None = None
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass
class DefaultPreemptionArgs:
    """How many candidate nodes preemption dry-runs: at least minCandidateNodesPercentage percent
    of the nodes, and at least minCandidateNodesAbsolute of them (defaults 10 and 100)."""

    min_candidate_nodes_percentage: int | None = None
    min_candidate_nodes_absolute: int | None = None


PluginArgs = (
    NodeResourcesFitArgs
    | PodTopologySpreadArgs
    | NodeAffinityArgs
    | NodeResourcesBalancedAllocationArgs
    | InterPodAffinityArgs
    | DefaultPreemptionArgs
)

# Plugins with typed args ("<Name>Args" kinds), as upstream registers them.
ARGS_TYPES: dict[str, type[Any]] = {
    "NodeResourcesFit": NodeResourcesFitArgs,
    "PodTopologySpread": PodTopologySpreadArgs,
    "NodeAffinity": NodeAffinityArgs,
    "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs,
    "InterPodAffinity": InterPodAffinityArgs,
    "DefaultPreemption": DefaultPreemptionArgs,
}


@dataclass
class PluginConfig:
    name: str = ""
    # Typed args for the plugins in ARGS_TYPES; a raw mapping for other plugins; None if unset.
    args: Any = None

    def args_dict(self) -> dict[str, Any] | None:
        """The args as a camelCase mapping (what plugin factories take)."""
        if self.args is None:
            return None
        if dataclasses.is_dataclass(self.args) and not isinstance(self.args, type):
            return to_dict(self.args)
        return dict(self.args)


# ---------------------------------------------------------------- the configuration


@dataclass
class LeaderElectionConfiguration:
    """component-base LeaderElectionConfiguration (durations in seconds)."""

    leader_elect: bool | None = None
    lease_duration: Duration | None = None
    renew_deadline: Duration | None = None
    retry_period: Duration | None = None
    resource_lock: str = ""
    resource_name: str = ""
    resource_namespace: str = ""


@dataclass
class ClientConnectionConfiguration:
    """component-base ClientConnectionConfiguration. Kept as read: kse's scheduler connects with
    its own connection file, so ``kubeconfig`` is accepted but not used to connect."""

    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = ""
    qps: float = 0.0
    burst: int = 0


@dataclass
class KubeSchedulerProfile:
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: int | None = None
    percentage_of_placements_to_score: int | None = None
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = field(default_factory=list)
    # Filled by load_config: the ordered plugins per extension point.
    expanded: ExpandedPlugins | None = field(
        default=None, metadata={"internal": True}, compare=False, repr=False
    )

    def plugin_args(self, name: str) -> dict[str, Any] | None:
        """The (defaulted) args of a plugin as a camelCase mapping, None if it has none."""
        for pc in self.plugin_config:
            if pc.name == name:
                return pc.args_dict()
        return None


@dataclass
class ExtenderManagedResource:
    """kube-scheduler config/v1 ExtenderManagedResource: an extended resource the extender
    manages; with ``ignoredByScheduler`` NodeResourcesFit does not check it."""

    name: str = ""
    ignored_by_scheduler: bool = False


@dataclass
class ExtenderTLSConfig:
    """kube-scheduler config/v1 ExtenderTLSConfig. The ``*Data`` fields are Go ``[]byte``: base64
    text in the file (validation decodes them)."""

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: str = ""
    key_data: str = ""
    ca_data: str = ""


@dataclass
class Extender:
    """kube-scheduler config/v1 Extender: an HTTP(S) webhook called at Filter, Score (as
    "prioritize"), Bind and preemption (see ``scheduler.extender``)."""

    url_prefix: str = ""
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = field(default=False, metadata={"json": "enableHTTPS"})
    tls_config: ExtenderTLSConfig | None = None
    # None: upstream's DefaultExtenderTimeout (5 s), applied when the extender is built.
    http_timeout: Duration | None = None
    node_cache_capable: bool = False
    managed_resources: list[ExtenderManagedResource] = field(default_factory=list)
    ignorable: bool = False


@dataclass
class KubeSchedulerConfiguration:
    api_version: str = ""
    kind: str = ""
    parallelism: int | None = None
    leader_election: LeaderElectionConfiguration = field(default_factory=LeaderElectionConfiguration)
    client_connection: ClientConnectionConfiguration = field(default_factory=ClientConnectionConfiguration)
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    # 0 means adaptive (5%..50% by cluster size), as upstream.
    percentage_of_nodes_to_score: int | None = None
    percentage_of_placements_to_score: int | None = None
    pod_initial_backoff_seconds: int | None = None
    pod_max_backoff_seconds: int | None = None
    profiles: list[KubeSchedulerProfile] = field(default_factory=list)
    extenders: list[Extender] = field(default_factory=list)
    delay_cache_until_active: bool = False

    def profile(self, scheduler_name: str) -> KubeSchedulerProfile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None


def to_dict(obj: Any) -> Any:
    """A dataclass tree as the camelCase JSON shape (unset optionals and internals left out)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if f.metadata.get("internal"):
                continue
            value = getattr(obj, f.name)
            if value is None:
                continue
            out[json_name(f)] = to_dict(value)
        return out
    if isinstance(obj, list):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj
