"""Taint/toleration matching, DefaultTolerationSeconds admission and taint-eviction timing, on
upstream's cases (toleration_test.go, defaulttolerationseconds/admission_test.go,
tainteviction/taint_eviction_test.go)."""

from __future__ import annotations

import pytest

from apiserver_mock.registry.defaulttolerationseconds import admit_default_toleration_seconds
from controllers.tainteviction import Decision, Scheduled, decide
from kse.objects.taints import (
    add_or_update_toleration,
    matching_tolerations,
    min_toleration_seconds,
    tolerates,
)
from proto import kse_pb2 as pb

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def tol(
    key: str = "", op: str = "", value: str = "", effect: str = "", seconds: int | None = None
) -> pb.Toleration:
    t = pb.Toleration(key=key, operator=op, value=value, effect=effect)
    if seconds is not None:
        t.toleration_seconds = seconds
    return t


def taint(key: str, value: str = "", effect: str = "NoExecute") -> pb.Taint:
    return pb.Taint(key=key, value=value, effect=effect)


@pytest.mark.parametrize(
    ("toleration", "t", "want"),
    [
        (tol("foo", "Exists", effect="NoExecute"), taint("foo", "bar"), True),  # exists ignores value
        (tol("foo", "Equal", "bar", "NoExecute"), taint("foo", "bar"), True),
        (tol("foo", "", "bar", "NoExecute"), taint("foo", "bar"), True),  # empty operator is Equal
        (tol("foo", "Equal", "baz", "NoExecute"), taint("foo", "bar"), False),
        (tol("foo", "Exists", effect="NoSchedule"), taint("foo", "bar"), False),  # effect differs
        (tol("", "Exists"), taint("anything", "x"), True),  # empty key + Exists tolerates all
        (tol("foo", "Exists"), taint("foo", "x", "NoSchedule"), True),  # empty effect: all effects
        (tol("other", "Exists"), taint("foo"), False),
        (tol("n", "Gt", "5"), taint("n", "7"), True),
        (tol("n", "Gt", "5"), taint("n", "3"), False),
        (tol("n", "Lt", "5"), taint("n", "3"), True),
        (tol("n", "Lt", "x"), taint("n", "3"), False),  # a value that does not parse tolerates nothing
    ],
)
def test_toleration_tolerates_taint(toleration: pb.Toleration, t: pb.Taint, want: bool) -> None:
    assert tolerates(toleration, t) is want


def test_matching_tolerations_needs_every_taint_tolerated() -> None:
    a, b = tol("a", "Exists", seconds=10), tol("b", "Exists")
    assert matching_tolerations([taint("a"), taint("b")], [a, b]) == (True, [a, b])
    assert matching_tolerations([taint("a"), taint("c")], [a, b]) == (False, [])


def test_min_toleration_seconds_as_get_min_toleration_time() -> None:
    assert min_toleration_seconds([]) == 0
    assert min_toleration_seconds([tol("a")]) is None  # forever
    assert min_toleration_seconds([tol("a", seconds=20), tol("b", seconds=5), tol("c")]) == 5
    assert min_toleration_seconds([tol("a", seconds=20), tol("b", seconds=-3)]) == 0


# -- DefaultTolerationSeconds (admission_test.go)


def pod_with(*tolerations: pb.Toleration) -> pb.Pod:
    return pb.Pod(spec=pb.PodSpec(tolerations=list(tolerations)))


def defaults() -> list[pb.Toleration]:
    return [
        tol(NOT_READY, "Exists", effect="NoExecute", seconds=300),
        tol(UNREACHABLE, "Exists", effect="NoExecute", seconds=300),
    ]


def test_a_pod_without_tolerations_gets_both_defaults() -> None:
    pod = pod_with()
    admit_default_toleration_seconds(pod)
    assert list(pod.spec.tolerations) == defaults()


def test_existing_tolerations_are_kept_and_the_defaults_appended() -> None:
    mine = tol("foo", "Equal", "bar", "NoSchedule")
    pod = pod_with(mine)
    admit_default_toleration_seconds(pod)
    assert list(pod.spec.tolerations) == [mine, *defaults()]


def test_a_pod_that_tolerates_not_ready_gets_only_unreachable() -> None:
    mine = tol(NOT_READY, "Exists", effect="NoExecute", seconds=700)
    pod = pod_with(mine)
    admit_default_toleration_seconds(pod)
    assert list(pod.spec.tolerations) == [mine, defaults()[1]]


def test_a_toleration_with_empty_effect_counts_as_tolerating() -> None:
    mine = tol(UNREACHABLE, "Exists")
    pod = pod_with(mine)
    admit_default_toleration_seconds(pod)
    assert list(pod.spec.tolerations) == [mine, defaults()[0]]


def test_a_toleration_of_every_taint_needs_no_defaults() -> None:
    mine = tol("", "Exists")
    pod = pod_with(mine)
    admit_default_toleration_seconds(pod)
    assert list(pod.spec.tolerations) == [mine]


def test_a_noschedule_toleration_of_the_key_does_not_count() -> None:
    mine = tol(NOT_READY, "Exists", effect="NoSchedule")
    pod = pod_with(mine)
    admit_default_toleration_seconds(pod)
    assert list(pod.spec.tolerations) == [mine, *defaults()]


def test_add_or_update_toleration_replaces_the_same_toleration_and_appends_new_ones() -> None:
    spec = pb.PodSpec(tolerations=[tol(NOT_READY, "Exists", effect="NoExecute", seconds=300)])
    assert add_or_update_toleration(spec, tol(NOT_READY, "Exists", effect="NoExecute"))
    assert list(spec.tolerations) == [tol(NOT_READY, "Exists", effect="NoExecute")]
    assert not add_or_update_toleration(spec, tol(NOT_READY, "Exists", effect="NoExecute"))
    assert add_or_update_toleration(spec, tol("x", "Exists", effect="NoSchedule"))
    assert len(spec.tolerations) == 2


# -- taint eviction decisions (processPodOnNode)


def test_no_taints_cancels() -> None:
    assert decide([], [], 100.0, None).action == "cancel"


def test_an_untolerated_taint_evicts_now() -> None:
    assert decide([taint("a")], [tol("b", "Exists")], 100.0, None) == Decision("evict", 100.0, 100.0)


def test_a_toleration_without_seconds_tolerates_forever() -> None:
    assert decide([taint("a")], [tol("a", "Exists")], 100.0, Scheduled(90, 95)).action == "cancel"


def test_toleration_seconds_schedule_the_eviction() -> None:
    got = decide([taint(UNREACHABLE)], [tol(UNREACHABLE, "Exists", seconds=300)], 100.0, None)
    assert got == Decision("schedule", 100.0, 400.0)


def test_the_smallest_used_toleration_seconds_wins() -> None:
    tols = [tol("a", "Exists", seconds=30), tol("b", "Exists", seconds=10), tol("c", "Exists", seconds=1)]
    got = decide([taint("a"), taint("b")], tols, 0.0, None)
    assert got == Decision("schedule", 0.0, 10.0)  # "c" tolerates no taint present


def test_an_eviction_already_scheduled_keeps_its_time() -> None:
    got = decide([taint("a")], [tol("a", "Exists", seconds=30)], 100.0, Scheduled(80.0, 110.0))
    assert got.action == "keep"


def test_a_zero_toleration_seconds_evicts_at_once() -> None:
    assert decide([taint("a")], [tol("a", "Exists", seconds=0)], 5.0, None) == Decision("schedule", 5.0, 5.0)


def test_the_pod_strategy_admits_updates_too() -> None:
    """A replaced tolerations list gets the defaults back (admission.Create, admission.Update)."""
    from apiserver_mock.registry.strategy import STRATEGIES
    from kse.objects.kinds import BY_FIELD

    old = pb.Pod(metadata=pb.ObjectMeta(name="p", uid="u"), spec=pb.PodSpec(tolerations=defaults()))
    new = pb.Pod(metadata=pb.ObjectMeta(name="p"), spec=pb.PodSpec(tolerations=[tol("k", "Exists")]))
    STRATEGIES["pod"].prepare_for_update(BY_FIELD["pod"], new, old)
    assert list(new.spec.tolerations) == [tol("k", "Exists"), *defaults()]


# -- the controller's bookkeeping (TestCreatePod / TestUpdateNode shapes), no API server


def _node(*taints: pb.Taint) -> pb.Node:
    return pb.Node(
        metadata=pb.ObjectMeta(name="n1", resource_version=str(len(taints) + 1)),
        spec=pb.NodeSpec(taints=taints),
    )


def _pod(name: str, *tolerations: pb.Toleration) -> pb.Pod:
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace="default", uid=name, resource_version="1"),
        spec=pb.PodSpec(node_name="n1", tolerations=list(tolerations)),
    )


async def test_the_controller_schedules_cancels_and_fires_evictions() -> None:
    from controllers.tainteviction import TaintEvictionController
    from tests.unit.controllers.offline import offline_context

    now = [1000.0]
    c = TaintEvictionController(offline_context(), clock=lambda: now[0])
    c.pods.replace(
        [
            _pod("waits", tol(UNREACHABLE, "Exists", effect="NoExecute", seconds=300)),
            _pod("forever", tol(UNREACHABLE, "Exists", effect="NoExecute")),
            _pod("now"),
        ],
        "1",
    )
    c.nodes.replace([_node(taint(UNREACHABLE))], "2")
    c.handle_node_update("n1")
    assert c.scheduled["default/waits"] == Scheduled(1000.0, 1300.0)
    assert "default/forever" not in c.scheduled
    assert "default/now" in c.scheduled  # due at once: fires on the next loop turn
    c._fire("default/now")
    assert "default/now" in c._fired and c._due.get_nowait() == "default/now"

    now[0] = 1100.0
    c.nodes.replace([_node()], "3")  # the taint goes: the waiting eviction is cancelled
    c.handle_node_update("n1")
    assert c.scheduled == {}
    c.pods.replace([], "4")  # the evicted pod is gone: its marker too
    c.handle_pod_update("default/now", "n1")
    assert c._fired == set()
