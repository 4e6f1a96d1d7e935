"""imagePullPolicy as the kubelet applies it: which of a pod's images must be pulled.

* `IfNotPresent`: pull only when the node does not have the image.
* `Always`: the kubelet always asks the registry; when the image is present this resolves the tag to
  the digest it has and transfers no layers. Modelled as a small fixed cost (the caller's
  `always_check_s`, a manifest round trip), no bytes; an absent image is pulled.
* `Never`: never pull; an absent image keeps the container from starting (the kubelet reports
  ErrImageNeverPull, 'Container image "x" is not present with pull policy of Never').
* Unset: the API server's default (upstream `SetDefaults_Container`, pkg/apis/core/v1/defaults.go):
  `Always` when the tag is `latest` or missing (a digest is neither), else `IfNotPresent`. kse's
  API server does not default the field, so the simulated kubelet applies the same rule itself.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from nodesim.images import normalize_image
from proto import kse_pb2 as pb

ALWAYS = "Always"
IF_NOT_PRESENT = "IfNotPresent"
NEVER = "Never"


def effective_policy(container: pb.Container) -> str:
    """The container's imagePullPolicy, defaulted as the API server would."""
    if container.image_pull_policy:
        return container.image_pull_policy
    name = container.image.strip()
    if "@" in name:
        return IF_NOT_PRESENT
    colon = name.rfind(":")
    tag = name[colon + 1 :] if colon > name.rfind("/") else ""
    return ALWAYS if tag in ("", "latest") else IF_NOT_PRESENT


@dataclass
class ImagePlan:
    """What a pod needs before its containers can start on a node."""

    to_pull: list[str] = field(default_factory=list)  # normalized, in container order, no duplicates
    always_checks: int = 0  # present images with policy Always: a registry round trip each
    never_missing: list[str] = field(default_factory=list)  # absent images with policy Never


def plan_images(pod: pb.Pod, cached: Collection[str]) -> ImagePlan:
    """The plan for `pod` on a node that has `cached` (normalized names); init containers first."""
    plan = ImagePlan()
    seen: set[str] = set()
    for c in (*pod.spec.init_containers, *pod.spec.containers):
        if not c.image:
            continue
        name = normalize_image(c.image)
        if name in seen:
            continue
        seen.add(name)
        policy = effective_policy(c)
        present = name in cached
        if policy == NEVER:
            if not present:
                plan.never_missing.append(name)
        elif present:
            if policy == ALWAYS:
                plan.always_checks += 1
        else:
            plan.to_pull.append(name)
    return plan
