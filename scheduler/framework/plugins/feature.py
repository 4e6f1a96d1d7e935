"""The feature gates the plugins consult (upstream `pkg/scheduler/framework/plugins/feature`)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.framework.plugins.helper.taints import ENABLE_TOLERATION_COMPARISON_OPERATORS


@dataclass(frozen=True)
class Features:
    """The feature gates the plugins consult (upstream plugins/feature.Features), fixed to the
    upstream defaults that make sense for kse: queueing hints on; in-place pod resize off (kse's
    API has no pod resize); node inclusion policies, matchLabelKeys and the Gt/Lt toleration
    operators on; sidecar containers on."""

    enable_scheduling_queue_hint: bool = True
    enable_in_place_pod_vertical_scaling: bool = False
    enable_node_inclusion_policy_in_pod_topology_spread: bool = True
    enable_match_label_keys_in_pod_topology_spread: bool = True
    enable_sidecar_containers: bool = True
    enable_taint_toleration_comparison_operators: bool = ENABLE_TOLERATION_COMPARISON_OPERATORS


DEFAULT_FEATURES = Features()
