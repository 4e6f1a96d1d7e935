"""The in-tree plugin registry: plugin name -> factory (upstream plugins/registry.go).

A factory takes the plugin's already-parsed pluginConfig args (a mapping with the camelCase keys
of KubeSchedulerConfiguration, or None for the defaults) and the FrameworkHandle, and returns
the plugin. Invalid args raise ValueError with a message naming the field.
"""

from __future__ import annotations

from scheduler.framework.interface import PluginFactory
from scheduler.framework.plugins import (
    defaultbinder,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    nodeunschedulable,
    podtopologyspread,
    queuesort,
    schedulinggates,
    tainttoleration,
    unsupportedfeatures,
)
from scheduler.framework.plugins.defaultpreemption import default_preemption
from scheduler.framework.plugins.noderesources import balanced_allocation, fit
from scheduler.framework.plugins.samples import imageprepull

REGISTRY: dict[str, PluginFactory] = {
    queuesort.NAME: queuesort.new,
    schedulinggates.NAME: schedulinggates.new,
    nodeunschedulable.NAME: nodeunschedulable.new,
    nodename.NAME: nodename.new,
    nodeports.NAME: nodeports.new,
    fit.NAME: fit.new,
    balanced_allocation.NAME: balanced_allocation.new,
    tainttoleration.NAME: tainttoleration.new,
    nodeaffinity.NAME: nodeaffinity.new,
    imagelocality.NAME: imagelocality.new,
    podtopologyspread.NAME: podtopologyspread.new,
    interpodaffinity.NAME: interpodaffinity.new,
    unsupportedfeatures.NAME: unsupportedfeatures.new,
    default_preemption.NAME: default_preemption.new,
    defaultbinder.NAME: defaultbinder.new,
    # Samples: never in the default profile (scheduler/framework/plugins/samples).
    imageprepull.NAME: imageprepull.new,
}
