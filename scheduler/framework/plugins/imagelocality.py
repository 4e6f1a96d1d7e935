"""ImageLocality: favours nodes that already have the pod's images (upstream
plugins/imagelocality).

Each image present on the node contributes its size scaled by its spread (the fraction of all
nodes that have it, against the "node heating" of a rare big image); the sum, clamped to
[23 MiB, 1000 MiB x number of images], is mapped linearly onto [0, 100]. Images of init
containers count too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import MAX_NODE_SCORE, FrameworkHandle, ScoreExtensions
from scheduler.framework.nodeinfo import ImageStateSummary, NodeInfo, Snapshot
from scheduler.framework.plugins.helper.gomath import go_div
from scheduler.framework.types import PodInfo, Status

NAME = "ImageLocality"

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
DEFAULT_IMAGE_TAG = "latest"


def normalized_image_name(name: str) -> str:
    """The CRI name of an image: a missing tag means :latest (upstream normalizedImageName)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":" + DEFAULT_IMAGE_TAG
    return name


def scaled_image_score(state: ImageStateSummary, total_num_nodes: int) -> int:
    spread = float(state.num_nodes) / float(total_num_nodes)
    return int(float(state.size) * spread)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return go_div(MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


def _pod_images(pod_info: PodInfo) -> tuple[str, ...]:
    got = pod_info.derived.get(NAME)
    if got is None:
        spec = pod_info.pod.spec
        got = pod_info.derived[NAME] = tuple(
            normalized_image_name(c.image) for c in (*spec.init_containers, *spec.containers)
        )
    return got  # type: ignore[no-any-return]


class ImageLocality:
    def __init__(self, handle: FrameworkHandle) -> None:
        self._handle = handle

    def name(self) -> str:
        return NAME

    def score(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> tuple[int, Status | None]:
        total_num_nodes = len(self._handle.snapshot_shared_lister().node_infos().list())
        images = _pod_images(pod_info)
        states = node_info.image_states
        total = 0
        for image in images:
            s = states.get(image)
            if s is not None:
                total += scaled_image_score(s, total_num_nodes)
        return calculate_priority(total, len(images)), None

    def score_nodes(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        """`score` for many nodes: a node without images scores 0 (the sum is below the
        minimum threshold); nodes with the same states of the pod's images score the same."""
        out = np.zeros(len(indices), np.int64)
        images = _pod_images(pod_info)
        total_num_nodes = len(self._handle.snapshot_shared_lister().node_infos().list())
        infos = snapshot.node_info_list
        memo: dict[tuple[ImageStateSummary | None, ...], int] = {}
        for k in np.flatnonzero(snapshot.arrays().has_images[indices]):
            states = infos[indices[k]].image_states
            key = tuple(states.get(image) for image in images)
            score = memo.get(key)
            if score is None:
                total = sum(scaled_image_score(s, total_num_nodes) for s in key if s is not None)
                score = memo[key] = calculate_priority(total, len(images))
            out[k] = score
        return out

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: Mapping[str, Any] | None, handle: FrameworkHandle) -> ImageLocality:
    return ImageLocality(handle)
