"""ImagePrePull: a sample Permit plugin that holds a pod until its images are on the chosen node.

What it shows is Permit's Wait (upstream `fwk.PermitPlugin`: Permit returns Wait with a timeout,
the pod parks in the waiting-pods map, its binding cycle blocks in WaitOnPermit until someone calls
`Allow` or `Reject` or the timeout rejects it with "rejected due to timeout after waiting 30s at
plugin ImagePrePull"). Not in the default profile; enable it at the permit point:

    profiles:
    - schedulerName: default-scheduler
      plugins:
        permit: {enabled: [{name: ImagePrePull}]}
      pluginConfig:
      - name: ImagePrePull
        args: {timeout: 30s}

At Permit, when the chosen node already lists every image of the pod in `status.images`, the pod
goes on at once. Otherwise the plugin asks for the missing images to be pulled there (a
`PrePullImages` Event through the scheduler's recorder: the only write the scheduler's RBAC role
has for it, see `kse.objects.prepull`; `kse nodesim --pre-pull-events` acts on it) and answers Wait
with its `timeout`. A Node handler on the scheduler's shared node informer allows the pod once the
node reports the images. The wait is capped by `kse scheduler --permit-wait-timeout` (upstream's
fixed 15 min maxTimeout, made a flag), so that flag bounds this plugin's `timeout` too.

Caveat, as the kubelet reports it: `status.images` holds the 50 largest images only
(nodeStatusMaxImages), so on a node with more, a small image may never be listed and the pod times
out. Without a running scheduler's informers (what-if, config probes) the plugin can only check at
Permit and lets the timeout decide.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kse.durations import DurationError, parse_seconds
from kse.objects.prepull import ACTION_PRE_PULL, REASON_PRE_PULL, pre_pull_message
from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import FrameworkHandle
from scheduler.framework.plugins.imagelocality import normalized_image_name
from scheduler.framework.types import Code, PodInfo, Status

log = logging.getLogger(__name__)

NAME = "ImagePrePull"
DEFAULT_TIMEOUT_S = 30.0


def _images(pod: pb.Pod) -> list[str]:
    spec = pod.spec
    names = (normalized_image_name(c.image) for c in (*spec.init_containers, *spec.containers) if c.image)
    return list(dict.fromkeys(names))


def node_images(node: pb.Node) -> set[str]:
    return {name for image in node.status.images for name in image.names}


class ImagePrePull:
    """See the module doc."""

    def __init__(self, handle: FrameworkHandle, timeout: float, request_pre_pull: bool = True) -> None:
        self._handle = handle
        self.timeout = timeout
        self.request_pre_pull = request_pre_pull
        self._waiting: dict[str, tuple[str, frozenset[str]]] = {}  # pod uid -> (node, images)
        factory = getattr(handle, "shared_informer_factory", lambda: None)()
        self._nodes = factory.informer("nodes") if factory is not None else None
        if self._nodes is not None:
            self._nodes.add_event_handler(
                on_add=self._node_changed, on_update=lambda _old, new: self._node_changed(new)
            )

    def name(self) -> str:
        return NAME

    def _have(self, node_name: str) -> set[str]:
        if self._nodes is not None:
            node = self._nodes.store.get_by("", node_name)
            if node is not None:
                return node_images(node)
        try:
            info = self._handle.snapshot_shared_lister().node_infos().get(node_name)
        except KeyError:
            return set()
        return set(info.image_states)

    def permit(self, state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[Status | None, float]:
        pod = pod_info.pod
        images = _images(pod)
        missing = [i for i in images if i not in self._have(node_name)]
        if not missing:
            return None, 0.0
        self._forget_gone()
        self._waiting[pod.metadata.uid] = (node_name, frozenset(images))
        recorder = getattr(self._handle, "event_recorder", lambda: None)()
        if self.request_pre_pull and recorder is not None:
            component = getattr(self._handle, "profile_name", "") or "default-scheduler"
            recorder.eventf(
                pod, "Normal", REASON_PRE_PULL, ACTION_PRE_PULL, pre_pull_message(node_name, missing),
                component=component,
            )  # fmt: skip
        msg = f"waiting for image(s) {', '.join(missing)} on node {node_name}"
        return Status(Code.WAIT, [msg], NAME), self.timeout

    def _node_changed(self, node: pb.Node) -> None:
        """A node's images changed: allow the pods waiting for it that now have all theirs."""
        if not self._waiting:
            return
        have: set[str] | None = None
        for uid, (node_name, images) in list(self._waiting.items()):
            if node_name != node.metadata.name:
                continue
            have = node_images(node) if have is None else have
            if images <= have:
                del self._waiting[uid]
                wp = self._get_waiting_pod(uid)
                if wp is not None:
                    log.info(
                        "images of pod %s/%s are on node %s: allowed",
                        wp.get_pod().metadata.namespace,
                        wp.get_pod().metadata.name,
                        node_name,
                    )
                    wp.allow(NAME)

    def _get_waiting_pod(self, uid: str) -> Any:
        get = getattr(self._handle, "get_waiting_pod", None)
        return get(uid) if get is not None else None

    def _forget_gone(self) -> None:
        """Drop entries of pods no longer waiting (rejected by the timeout, deleted, bound)."""
        for uid in list(self._waiting):
            if self._get_waiting_pod(uid) is None:
                del self._waiting[uid]


def parse_args(args: Mapping[str, Any] | None) -> tuple[float, bool]:
    """(timeout seconds, requestPrePull) from the pluginConfig args; ValueError names the field."""
    args = dict(args or {})
    unknown = sorted(set(args) - {"timeout", "requestPrePull"})
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)} (known: timeout, requestPrePull)")
    raw = args.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ValueError(f"timeout: must be a duration such as 30s, got {raw!r}")
    try:
        timeout = parse_seconds(raw) if isinstance(raw, str) else float(raw)
    except DurationError as e:
        raise ValueError(f"timeout: {e}") from None
    if not timeout > 0:
        raise ValueError(f"timeout: must be > 0, got {raw!r}")
    pre_pull = args.get("requestPrePull", True)
    if not isinstance(pre_pull, bool):
        raise ValueError(f"requestPrePull: must be true or false, got {pre_pull!r}")
    return timeout, pre_pull


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> ImagePrePull:
    timeout, pre_pull = parse_args(args)
    return ImagePrePull(handle, timeout, pre_pull)
