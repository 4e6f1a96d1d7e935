"""The contract between a controller and the controller-manager that runs it.

A controller is constructed once per leadership term from a `ControllerContext` and runs until
cancelled (the term ended or the process stops). It reads through the shared informers, writes
through the clientset, and passes `ctx.fence()` with every write so that a deposed leader's
writes are refused by the API server (the same fencing the scheduler's binds carry).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from google.protobuf.message import Message

from controllers.workqueue import WorkqueueMetrics
from kse.client.clientset import Clientset
from kse.client.informer import InformerFactory
from kse.events import EventRecorder
from proto import kse_pb2 as pb

# kube-controller-manager's --concurrent-*-syncs defaults, by controller name.
DEFAULT_CONCURRENT_SYNCS: dict[str, int] = {"replicaset": 5, "deployment": 5, "daemonset": 2}


@dataclass(frozen=True)
class ControllerOptions:
    """kube-controller-manager's flags that the controllers read (upstream's defaults)."""

    node_monitor_grace_period_s: float = 40.0  # --node-monitor-grace-period (upstream 40s in 1.29+: 50s)
    node_monitor_period_s: float = 5.0  # --node-monitor-period
    node_startup_grace_period_s: float = 60.0  # --node-startup-grace-period
    terminated_pod_gc_threshold: int = 12500  # --terminated-pod-gc-threshold
    # podgc's gcCheckPeriod and quarantineTime: constants upstream, options here so tests run fast.
    pod_gc_period_s: float = 20.0
    pod_gc_quarantine_s: float = 40.0
    concurrent_syncs: dict[str, int] = field(default_factory=dict)  # --concurrent-*-syncs by controller

    def syncs_for(self, controller: str) -> int:
        """The number of workers of `controller` (its --concurrent-<name>-syncs, else upstream's)."""
        return self.concurrent_syncs.get(controller) or DEFAULT_CONCURRENT_SYNCS.get(controller, 1)


@dataclass
class ControllerContext:
    """What every controller gets: the clientset, the shared informers (started by the manager
    after every controller has asked for its informers), this term's fence, and the options."""

    clientset: Clientset
    informers: InformerFactory
    fence: Callable[[], pb.FenceToken | None]
    identity: str
    options: ControllerOptions
    # Called when a write was refused as fenced: another replica leads; the manager ends the term.
    on_fenced: Callable[[pb.FenceToken | None], None] = lambda token: None
    # The wall clock controllers read (availability after minReadySeconds, progress deadlines).
    now: Callable[[], float] = time.time
    workqueue_metrics: WorkqueueMetrics | None = None
    # The term's event recorder (None: events are not recorded, e.g. in tests of one controller).
    events: EventRecorder | None = None

    def event(
        self, obj: Message, kind: str, event_type: str, reason: str, message: str, *, component: str
    ) -> None:
        """Record an event about a workload object (`kind` in apps/v1), as upstream's recorders
        do (`SuccessfulCreate`, `ScalingReplicaSet`, ...); never blocks."""
        if self.events is not None:
            self.events.eventf(
                obj,
                event_type,
                reason,
                "",
                message,
                component=component,
                kind=kind,
                api_version="apps/v1",
            )


class Controller(Protocol):
    """One controller: `name` is its `--controllers` name (upstream's, e.g. "replicaset")."""

    name: ClassVar[str]

    async def run(self) -> None:
        """Reconcile until cancelled. Informers are synced before this is called."""
        ...


ControllerFactory = Callable[[ControllerContext], Controller]
