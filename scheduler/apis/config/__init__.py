"""kube-scheduler's component configuration, ``kubescheduler.config.k8s.io/v1``
(upstream ``pkg/scheduler/apis/config``): types, strict loading, v1 defaults, validation, and
the expansion of each profile into the plugins of every extension point.

Entry point: :func:`load_config`.
"""

from .defaults import default_plugins, merge_plugin_set, merge_plugins, set_defaults
from .load import load_config, parse_duration
from .profile import expand_profile
from .types import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINTS,
    ConfigError,
    ExpandedPlugins,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    Plugin,
    PluginConfig,
    PluginRef,
    Plugins,
    PluginSet,
)
from .validation import validate

__all__ = [
    "API_VERSION",
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINTS",
    "ConfigError",
    "ExpandedPlugins",
    "KubeSchedulerConfiguration",
    "KubeSchedulerProfile",
    "Plugin",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "default_plugins",
    "expand_profile",
    "load_config",
    "merge_plugin_set",
    "merge_plugins",
    "parse_duration",
    "set_defaults",
    "validate",
]
