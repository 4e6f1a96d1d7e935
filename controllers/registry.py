"""Every controller `kse controller-manager --controllers` can run, by upstream's name.

One line per controller module; the manager imports nothing else to find them.
"""

from __future__ import annotations

from controllers.base import ControllerFactory
from controllers.daemonset import DaemonSetController
from controllers.deployment import DeploymentController
from controllers.disruption import DisruptionController
from controllers.nodelifecycle import NodeLifecycleController
from controllers.podgc import PodGCController
from controllers.replicaset import ReplicaSetController
from controllers.tainteviction import TaintEvictionController

# name -> factory; filled in as each controller module lands (replicaset, deployment, daemonset,
# disruption, nodelifecycle, taint-eviction-controller, podgc).
CONTROLLERS: dict[str, ControllerFactory] = {
    "replicaset": ReplicaSetController,
    "deployment": DeploymentController,
    "disruption": DisruptionController,
    DaemonSetController.name: DaemonSetController,
    NodeLifecycleController.name: NodeLifecycleController,
    PodGCController.name: PodGCController,
    TaintEvictionController.name: TaintEvictionController,
}
