# ruff: noqa: E501 -- the case tables keep upstream's case names, one case per row
"""ImageLocality on upstream's own tables (plugins/imagelocality/image_locality_test.go:
TestImageLocalityPriority, TestNormalizedImageName)."""

from __future__ import annotations

import hashlib

import pytest

from proto import kse_pb2 as pb
from scheduler.framework.interface import MAX_NODE_SCORE
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins import imagelocality as il
from scheduler.framework.types import PodInfo

from .wrappers import FakeHandle, make_node, make_pod, new_state

MB = 1024 * 1024


def image_pod(containers: list[str], init: list[str] | None = None) -> pb.Pod:
    w = make_pod()
    for image in containers:
        w.container(image=image)
    pod = w.obj()
    for image in init or []:
        pod.spec.init_containers.add(name="init", image=image)
    return pod


def image_node(name: str, images: list[tuple[list[str], int]]) -> pb.Node:
    return make_node().name(name).images((names, size * MB) for names, size in images).obj()


N_40_300_2000 = [(["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40), (["gcr.io/300:latest", "gcr.io/300:v1"], 300),
                 (["gcr.io/2000:latest"], 2000)]  # fmt: skip
N_250_10 = [(["gcr.io/250:latest"], 250), (["gcr.io/10:latest", "gcr.io/10:v1"], 10)]
N_600_40_900 = [(["gcr.io/600:latest"], 600), (["gcr.io/40:latest"], 40), (["gcr.io/900:latest"], 900)]
N_300_600_900 = [(["gcr.io/300:latest"], 300), (["gcr.io/600:latest"], 600), (["gcr.io/900:latest"], 900)]
N_4000_30 = [(["gcr.io/4000:latest"], 4000), (["gcr.io/30:latest"], 30)]
N_20_30_40 = [(["gcr.io/20:latest"], 20), (["gcr.io/30:latest"], 30), (["gcr.io/40:latest"], 40)]

CASES: list[tuple[str, pb.Pod, list[pb.Node], list[int]]] = [
    ("two images spread on two nodes, prefer the larger image one", image_pod(["gcr.io/40", "gcr.io/250"]),
     [image_node("node1", N_40_300_2000), image_node("node2", N_250_10)], [0, 5]),
    ("two images on one node, prefer this node", image_pod(["gcr.io/40", "gcr.io/300"]),
     [image_node("node1", N_40_300_2000), image_node("node2", N_250_10)], [7, 0]),
    ("if exceed limit, use limit", image_pod(["gcr.io/10", "gcr.io/4000"]),
     [image_node("node1", N_4000_30), image_node("node2", N_250_10)], [MAX_NODE_SCORE, 0]),
    ("if exceed limit, use limit (with node which has no images present)", image_pod(["gcr.io/10", "gcr.io/4000"]),
     [image_node("node1", N_4000_30), image_node("node2", N_250_10), image_node("node3", [])], [66, 0, 0]),
    ("pod with multiple large images, node2 is preferred", image_pod(["gcr.io/300", "gcr.io/600", "gcr.io/900"]),
     [image_node("node1", N_600_40_900), image_node("node2", N_300_600_900), image_node("node3", [])], [32, 36, 0]),
    ("pod with multiple small images", image_pod(["gcr.io/30", "gcr.io/40"]),
     [image_node("node1", N_20_30_40), image_node("node2", N_4000_30)], [1, 0]),
    ("include InitContainers: two images spread on two nodes, prefer the larger image one",
     image_pod(["gcr.io/30"], init=["gcr.io/300"]),
     [image_node("node1", N_40_300_2000), image_node("node2", N_20_30_40)], [6, 0]),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "nodes", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_image_locality_priority(pod: pb.Pod, nodes: list[pb.Node], want: list[int]) -> None:
    snapshot = Snapshot.from_objects([], nodes)
    pl = il.new(None, FakeHandle(snapshot))
    state = new_state()
    pod_info = PodInfo(pod)
    got = []
    for ni in snapshot.list():
        score, status = pl.score(state, pod_info, ni)
        assert status is None
        got.append(score)
    assert got == want


def _digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(
    ("image", "want"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@" + _digest("root"), "root@" + _digest("root")),
    ],
    ids=["add :latest postfix 1", "add :latest postfix 2", "keep it as is 1", "keep it as is 2"],
)
def test_normalized_image_name(image: str, want: str) -> None:
    assert il.normalized_image_name(image) == want


def test_image_states_follow_node_changes_in_the_snapshot() -> None:
    # The spread counts nodes having the image across the whole snapshot.
    nodes = [image_node(f"n{i}", [(["gcr.io/big:latest"], 1500)]) for i in range(3)] + [image_node("n3", [])]
    snapshot = Snapshot.from_objects([], nodes)
    states = snapshot.get("n0").image_states
    assert states["gcr.io/big:latest"].num_nodes == 3
    assert states["gcr.io/big:latest"].size == 1500 * MB
    assert snapshot.image_existence_map["gcr.io/big:latest"] == {"n0", "n1", "n2"}
