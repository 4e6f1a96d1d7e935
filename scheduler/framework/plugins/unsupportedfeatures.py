"""UnsupportedFeatures (kse's own; no upstream counterpart): refuses, in PreFilter, a pod that asks
for something only an upstream plugin kse does not have could honour, so that no pod is ever
placed ignoring a constraint. The pod then gets the FailedScheduling event and the
PodScheduled=False condition with a message naming the field and the missing plugin, e.g.

    0/3 nodes are available: spec.volumes[0].persistentVolumeClaim: kse does not implement
    VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits (no PersistentVolumeClaims
    or PersistentVolumes).

Why a plugin and not a check in the framework: it stands where upstream's VolumeRestrictions ..
DynamicResources sit in the default profile (their PreFilter is what would read these fields), it
shows up by name in `kse what-if`, the framework stays generic, and a profile may disable it
explicitly (a choice the user makes, not a silent one). When kse gains one of those plugins, its
check leaves this module.

What it refuses (the fields of core/v1 PodSpec that a default-profile plugin reads and kse lacks):
  * volumes: persistentVolumeClaim and ephemeral (VolumeBinding, VolumeZone, VolumeRestrictions
    (ReadWriteOncePod), NodeVolumeLimits); gcePersistentDisk, awsElasticBlockStore, rbd, iscsi
    (VolumeRestrictions' conflict checks). Other sources need no scheduling decision (inline csi
    volumes count against CSINode limits upstream, and kse has no CSINode objects, which upstream
    treats as no limit).
  * resourceClaims, and containers' resources.claims (DynamicResources).
A non-empty pod (anti-)affinity namespaceSelector is refused by InterPodAffinity itself, where
upstream resolves it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import ClusterEventWithHint, FrameworkHandle, PreFilterResult
from scheduler.framework.nodeinfo import NodeInfo
from scheduler.framework.types import Code, PodInfo, Status

NAME = "UnsupportedFeatures"

_PVC_PLUGINS = (
    "kse does not implement VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits "
    "(no PersistentVolumeClaims or PersistentVolumes)"
)
_CONFLICT = "kse does not implement VolumeRestrictions (its conflict checks for this volume type)"
_DRA = "kse does not implement DynamicResources (no dynamic resource allocation)"

# Volume source field -> (JSON name, why it cannot be honoured)
_VOLUME_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("persistent_volume_claim", "persistentVolumeClaim", _PVC_PLUGINS),
    ("ephemeral", "ephemeral", _PVC_PLUGINS + "; a generic ephemeral volume is a PersistentVolumeClaim"),
    ("gce_persistent_disk", "gcePersistentDisk", _CONFLICT),
    ("aws_elastic_block_store", "awsElasticBlockStore", _CONFLICT),
    ("rbd", "rbd", _CONFLICT),
    ("iscsi", "iscsi", _CONFLICT),
)


def unsupported_features(pod: pb.Pod) -> tuple[str, ...]:
    """Every field of the pod that kse cannot honour, as '<path>: <why>'."""
    spec = pod.spec
    out: list[str] = []
    for i, v in enumerate(spec.volumes):
        for attr, json_name, why in _VOLUME_SOURCES:
            if v.HasField(attr):
                out.append(f"spec.volumes[{i}].{json_name}: {why}")
    if spec.resource_claims:
        out.append(f"spec.resourceClaims: {_DRA}")
    containers = itertools.chain(
        (("initContainers", i, c) for i, c in enumerate(spec.init_containers)),
        (("containers", i, c) for i, c in enumerate(spec.containers)),
    )
    for kind, i, c in containers:
        if c.resources.claims:
            out.append(f"spec.{kind}[{i}].resources.claims: {_DRA}")
    if spec.resources.claims:
        out.append(f"spec.resources.claims: {_DRA}")
    return tuple(out)  # () for the usual pod: one shared empty tuple, not a list per pod


class UnsupportedFeatures:
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # No cluster event makes kse implement a feature: the pod waits for an update of its own
        # (or the periodic flush), not for every event.
        return []

    def pre_filter(
        self, state: CycleState, pod_info: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        got = pod_info.derived.get(NAME)
        if got is None:
            got = pod_info.derived[NAME] = unsupported_features(pod_info.pod)
        if not got:
            return None, Status(Code.SKIP)
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, list(got))

    def pre_filter_extensions(self) -> None:
        return None


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle | None) -> UnsupportedFeatures:
    return UnsupportedFeatures()
