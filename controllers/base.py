"""The contract between a controller and the controller-manager that runs it.

A controller is constructed once per leadership term from a `ControllerContext` and runs until
cancelled (the term ended or the process stops). It reads through the shared informers, writes
through the clientset, and passes `ctx.fence()` with every write so that a deposed leader's
writes are refused by the API server (the same fencing the scheduler's binds carry).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from kse.client.clientset import Clientset
from kse.client.informer import InformerFactory
from proto import kse_pb2 as pb


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


@dataclass
class ControllerContext:
    """What every controller gets: the clientset, the shared informers (started by the manager
    after every controller has asked for its informers), this term's fence, and the options."""

    clientset: Clientset
    informers: InformerFactory
    fence: Callable[[], pb.FenceToken | None]
    identity: str
    options: ControllerOptions


class Controller(Protocol):
    """One controller: `name` is its `--controllers` name (upstream's, e.g. "replicaset")."""

    name: ClassVar[str]

    async def run(self) -> None:
        """Reconcile until cancelled. Informers are synced before this is called."""
        ...


ControllerFactory = Callable[[ControllerContext], Controller]
