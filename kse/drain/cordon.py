"""Cordon and uncordon: set a node's spec.unschedulable, as kubectl's CordonHelper does
(staging/src/k8s.io/kubectl/pkg/drain/cordon.go).

kubectl patches; the gRPC API has no patch, so this is a read, a change of the one field, and an
update with the read's resourceVersion as precondition, retried on a conflict (someone else wrote
the node meanwhile: a kubelet heartbeat writes only the status, but a label change would not).
Nothing else of the node is touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from kse.client.clientset import Clientset
from kse.client.errors import ConflictError

MAX_CONFLICT_RETRIES = 5

DRY_RUN_NONE = "none"
DRY_RUN_CLIENT = "client"
DRY_RUN_SERVER = "server"
DRY_RUN_VALUES = (DRY_RUN_NONE, DRY_RUN_CLIENT, DRY_RUN_SERVER)


@dataclass(frozen=True)
class CordonResult:
    node: str
    desired: bool  # the spec.unschedulable asked for
    changed: bool  # False: it already had that value
    # The node's resourceVersion after the call: that of the update that set the value when
    # `changed` (what a chaos history records as the cordon's revision), else the one read.
    revision: int = 0

    @property
    def verb(self) -> str:
        """kubectl's word: cordoned, already cordoned, uncordoned, already uncordoned."""
        word = "cordoned" if self.desired else "uncordoned"
        return word if self.changed else f"already {word}"


async def set_unschedulable(
    cs: Clientset, name: str, desired: bool, *, dry_run: str = DRY_RUN_NONE
) -> CordonResult:
    """Make `spec.unschedulable` of node `name` equal `desired` (NotFoundError if no such node)."""
    for attempt in range(MAX_CONFLICT_RETRIES + 1):
        node = await cs.nodes.get(name)
        read_rv = _revision(node.metadata.resource_version)
        if node.spec.unschedulable == desired:
            return CordonResult(name, desired, False, read_rv)
        if dry_run == DRY_RUN_CLIENT:
            return CordonResult(name, desired, True, read_rv)
        node.spec.unschedulable = desired
        try:
            updated = await cs.nodes.update(node, dry_run=dry_run == DRY_RUN_SERVER)
        except ConflictError:
            if attempt == MAX_CONFLICT_RETRIES:
                raise
            continue
        return CordonResult(name, desired, True, _revision(updated.metadata.resource_version))
    raise AssertionError("unreachable")  # pragma: no cover


def _revision(resource_version: str) -> int:
    """A resourceVersion as the etcd revision it is (0 when it is not a number)."""
    return int(resource_version) if resource_version.isdigit() else 0


async def cordon(cs: Clientset, name: str, *, dry_run: str = DRY_RUN_NONE) -> CordonResult:
    return await set_unschedulable(cs, name, True, dry_run=dry_run)


async def uncordon(cs: Clientset, name: str, *, dry_run: str = DRY_RUN_NONE) -> CordonResult:
    return await set_unschedulable(cs, name, False, dry_run=dry_run)
