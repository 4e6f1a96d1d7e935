"""Profiles: one Framework per KubeSchedulerProfile (upstream `pkg/scheduler/profile`).

* `registry_implements(registry)`: which extension points each registered plugin implements,
  the `implements` mapping `scheduler.apis.config.load_config` validates profiles with.
* `load_scheduler_config(path_or_text)`: a configuration loaded against the in-tree registry;
  None gives the v1 defaults (one profile "default-scheduler" with the default plugins).
* `new_framework(profile, ...)` / `new_profiles(cfg, ...)`: the frameworks, by scheduler name,
  sharing one map of pods waiting at Permit (as upstream's profile.NewMap).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proto import kse_pb2 as pb
from scheduler.apis.config import KubeSchedulerConfiguration, KubeSchedulerProfile, load_config
from scheduler.framework.interface import PluginFactory, SharedLister
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.runtime import (
    MAX_PERMIT_TIMEOUT,
    POINT_PROTOCOLS,
    Binder,
    Framework,
)
from scheduler.framework.waiting_pods import TimerFactory, WaitingPodsMap, default_timers

if TYPE_CHECKING:
    from kse.client.informer import InformerFactory
    from scheduler.events import EventRecorder

DEFAULT_CONFIG_TEXT = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


class _ProbeHandle:
    """A FrameworkHandle for instantiating plugins only to see what they implement."""

    def snapshot_shared_lister(self) -> SharedLister:
        return Snapshot()

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        raise RuntimeError("probe handle cannot bind")


def registry_implements(registry: Mapping[str, PluginFactory] | None = None) -> dict[str, frozenset[str]]:
    """Plugin name -> the extension points (JSON names) it implements, found by building each
    plugin with default args and checking it against the extension-point protocols."""
    if registry is None:
        from scheduler.framework.plugins.registry import REGISTRY

        registry = REGISTRY
    out: dict[str, frozenset[str]] = {}
    handle = _ProbeHandle()
    for name, factory in registry.items():
        plugin = factory(None, handle)
        out[name] = frozenset(point for point, proto in POINT_PROTOCOLS.items() if isinstance(plugin, proto))
    return out


def load_scheduler_config(
    path_or_text: str | os.PathLike[str] | None = None,
    registry: Mapping[str, PluginFactory] | None = None,
) -> KubeSchedulerConfiguration:
    """Load (strictly), default, validate and expand a KubeSchedulerConfiguration against the
    plugin registry. None: the defaults. Raises scheduler.apis.config.ConfigError."""
    implements = registry_implements(registry)
    return load_config(
        DEFAULT_CONFIG_TEXT if path_or_text is None else path_or_text,
        known_plugins=list(implements),
        implements=implements,
    )


def new_framework(
    profile: KubeSchedulerProfile,
    *,
    registry: Mapping[str, PluginFactory] | None = None,
    snapshot: SharedLister | None = None,
    binder: Binder | None = None,
    waiting_pods: WaitingPodsMap | None = None,
    max_permit_timeout: float = MAX_PERMIT_TIMEOUT,
    timers: TimerFactory = default_timers,
    percentage_of_nodes_to_score: int | None = None,
    batch: bool = True,
    informer_factory: InformerFactory | None = None,
    event_recorder: EventRecorder | None = None,
) -> Framework:
    """The Framework of a loaded (expanded) profile. `percentage_of_nodes_to_score`, when given,
    overrides the profile's own value (what-if forces 100). Raises ValueError when a plugin
    cannot be built from its args."""
    if profile.expanded is None:
        raise ValueError("the profile was not expanded: load it with load_scheduler_config")
    args: dict[str, Mapping[str, Any] | None] = {
        name: profile.plugin_args(name) for name in profile.expanded.all_plugins()
    }
    return Framework(
        profile.scheduler_name or "",
        profile.expanded,
        registry=registry,
        plugin_args=args,
        percentage_of_nodes_to_score=(
            percentage_of_nodes_to_score
            if percentage_of_nodes_to_score is not None
            else profile.percentage_of_nodes_to_score
        ),
        snapshot=snapshot,
        binder=binder,
        waiting_pods=waiting_pods,
        max_permit_timeout=max_permit_timeout,
        timers=timers,
        batch=batch,
        informer_factory=informer_factory,
        event_recorder=event_recorder,
    )


def new_profiles(
    cfg: KubeSchedulerConfiguration,
    *,
    registry: Mapping[str, PluginFactory] | None = None,
    snapshot: SharedLister | None = None,
    binder: Binder | None = None,
    waiting_pods: WaitingPodsMap | None = None,
    max_permit_timeout: float = MAX_PERMIT_TIMEOUT,
    timers: TimerFactory = default_timers,
    batch: bool = True,
    informer_factory: InformerFactory | None = None,
    event_recorder: EventRecorder | None = None,
) -> dict[str, Framework]:
    """Scheduler name -> Framework for every profile (upstream profile.NewMap); all share one
    snapshot, binder and waiting-pods map. Raises ValueError naming the profile on failure."""
    waiting = waiting_pods if waiting_pods is not None else WaitingPodsMap()
    out: dict[str, Framework] = {}
    for profile in cfg.profiles:
        name = profile.scheduler_name or ""
        if name in out:
            raise ValueError(f'duplicate profile with scheduler name "{name}"')
        try:
            out[name] = new_framework(
                profile,
                registry=registry,
                snapshot=snapshot,
                binder=binder,
                waiting_pods=waiting,
                max_permit_timeout=max_permit_timeout,
                timers=timers,
                batch=batch,
                informer_factory=informer_factory,
                event_recorder=event_recorder,
            )
        except ValueError as e:
            raise ValueError(f'profile "{name}": {e}') from e
    return out
