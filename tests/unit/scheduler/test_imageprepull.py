"""ImagePrePull (the sample Permit plugin): its args and its verdicts without a running scheduler."""

from __future__ import annotations

import pytest

from kse.objects.prepull import parse_pre_pull_message, pre_pull_message
from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.plugins.samples import imageprepull
from scheduler.framework.types import Code, PodInfo
from tests.unit.scheduler.wrappers import FakeHandle


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (None, (30.0, True)),
        ({"timeout": "2s"}, (2.0, True)),
        ({"timeout": 1.5, "requestPrePull": False}, (1.5, False)),
        ({"timeout": "1m30s"}, (90.0, True)),
    ],
)
def test_args(args: dict[str, object] | None, want: tuple[float, bool]) -> None:
    assert imageprepull.parse_args(args) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"timeout": "soon"}, "timeout:"),
        ({"timeout": "0s"}, "timeout: must be > 0"),
        ({"timeout": True}, "timeout: must be a duration"),
        ({"requestPrePull": "yes"}, "requestPrePull: must be true or false"),
        ({"timout": "1s"}, "unknown field(s) timout"),
    ],
)
def test_bad_args_name_the_field(args: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        imageprepull.parse_args(args)


def test_pre_pull_message_round_trips() -> None:
    msg = pre_pull_message("n1", ["a:1", "b:2"])
    assert msg == "pre-pull on node n1: a:1,b:2"
    assert parse_pre_pull_message(msg) == ("n1", ["a:1", "b:2"])
    assert parse_pre_pull_message("Successfully assigned default/p to n1") is None
    assert parse_pre_pull_message("pre-pull on node n1: ") is None


def _node(name: str, images: list[str]) -> pb.Node:
    n = pb.Node(metadata=pb.ObjectMeta(name=name))
    n.status.allocatable.update({"cpu": "4", "memory": "8Gi", "pods": "10"})
    for i in images:
        n.status.images.add(names=[i], size_bytes=10 << 20)
    return n


def test_permit_allows_when_present_and_waits_otherwise() -> None:
    snap = Snapshot.from_objects([], [_node("has", ["app:1"]), _node("lacks", [])])
    plugin = imageprepull.new({"timeout": "5s"}, FakeHandle(snap))
    p = pb.Pod(metadata=pb.ObjectMeta(name="p", namespace="default", uid="u1"))
    p.spec.containers.add(name="c", image="app:1")
    assert plugin.permit(CycleState(), PodInfo(p), "has") == (None, 0.0)
    status, timeout = plugin.permit(CycleState(), PodInfo(p), "lacks")
    assert status is not None and status.code == Code.WAIT and timeout == 5.0
    assert "app:1" in status.message() and "lacks" in status.message()
