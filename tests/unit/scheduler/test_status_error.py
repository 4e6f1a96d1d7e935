"""A Status carries the error that caused it (upstream AsStatus / AsError), through the framework's
rewording of the status, so the scheduler reads the type of a failed bind off the Status; and
the framework's one Filter / Score entry gives the same result with and without the batch engine."""

from __future__ import annotations

import numpy as np

from kse.client.errors import ConflictError
from proto import kse_pb2 as pb
from scheduler.apis.config.types import ExpandedPlugins, PluginRef
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.plugins.defaultbinder import DefaultBinder
from scheduler.framework.plugins.registry import REGISTRY
from scheduler.framework.runtime import Framework
from scheduler.framework.types import Code, Status, as_status
from scheduler.profile import load_scheduler_config, new_framework
from tests.unit.scheduler.test_runtime import QueueSort, pod_info, snapshot_of


def test_as_status_and_as_error() -> None:
    err = ValueError("boom")
    s = as_status(err)
    assert s.code == Code.ERROR and s.message() == "boom" and s.err is err and s.as_error() is err
    plain = Status.error("no error object")
    e = plain.as_error()
    assert e is not None and str(e) == "no error object"
    assert Status().as_error() is None
    assert Status(Code.WAIT).as_error() is None and Status(Code.SKIP).as_error() is None
    assert str(Status.unschedulable("a", "b").as_error()) == "a, b"
    assert s == Status(Code.ERROR, ["boom"])  # the error takes no part in equality


def default_binder_framework(binder: object) -> Framework:
    expanded = ExpandedPlugins()
    expanded.point("queueSort").append(PluginRef("QueueSort", 0))
    expanded.point("bind").append(PluginRef("DefaultBinder", 0))
    registry = {"QueueSort": lambda _a, _h: QueueSort(), "DefaultBinder": lambda _a, h: DefaultBinder(h)}
    return Framework("p", expanded, registry=registry, binder=binder)  # type: ignore[arg-type]


async def test_a_failed_bind_carries_the_client_error_through_the_framework() -> None:
    conflict = ConflictError("pod already bound")

    async def binder(pod: pb.Pod, node: str) -> None:
        raise conflict

    fwk = default_binder_framework(binder)
    s = await fwk.run_bind_plugins(CycleState(), pod_info(), "n1")
    assert s is not None and s.code == Code.ERROR
    assert s.message().startswith('running Bind plugin "DefaultBinder": ')
    assert s.err is conflict and s.as_error() is conflict


def test_filter_and_score_entries_equal_with_and_without_batch() -> None:
    names = [f"n{i}" for i in range(20)]
    snap = snapshot_of(*names)
    profile = load_scheduler_config(None).profiles[0]
    results = []
    for batch in (True, False):
        fwk = new_framework(profile, snapshot=snap, batch=batch, registry=REGISTRY)
        state = CycleState()
        pi = pod_info()
        fwk.run_pre_filter_plugins(state, pi)
        out = fwk.run_filter_plugins_over(state, pi, snap, np.arange(len(names), dtype=np.intp), 7)
        fwk.run_pre_score_plugins(state, pi, [snap.node_info_list[i] for i in out.feasible.tolist()])
        matrix, s = fwk.run_score_plugins_over(state, pi, snap, out.feasible)
        assert s is None and matrix is not None
        results.append((out.feasible.tolist(), out.processed, matrix.plugins, matrix.scores.tolist()))
    assert results[0] == results[1] and len(results[0][0]) == 7
