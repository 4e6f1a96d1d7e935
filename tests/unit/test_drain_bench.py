"""`kse bench drain`'s pure parts: the --pdb flag, the config's defaults and errors, and the
measures computed from a pods' timeline."""

from __future__ import annotations

import pytest

from chaos.drain_bench import (
    DrainBenchConfig,
    _max_unavailable,
    _pending_series,
    _reschedule_ms,
    parse_pdb,
    percentile,
)
from chaos.podtimeline import PodStateRecord

RS = "ReplicaSet/app-0-abc"


def st(
    ts: float, name: str, *, phase: str = "Running", ready: bool = True, node: str = "n1", **kw: bool
) -> PodStateRecord:
    return PodStateRecord(
        ts=ts,
        resource_version=int(ts * 10),
        key=f"default/{name}",
        uid=f"uid-{name}",
        node=node,
        phase=phase,
        ready=ready,
        owner=RS,
        labels={"app": "app-0"},
        **kw,
    )


def test_parse_pdb() -> None:
    assert parse_pdb("minAvailable=3") == (3, None)
    assert parse_pdb("maxUnavailable=25%") == (None, "25%")
    for bad in ("min=1", "minAvailable=", "maxUnavailable=-1", "minAvailable=1.5"):
        with pytest.raises(ValueError, match="--pdb: must be"):
            parse_pdb(bad)


def test_config_defaults_and_problems() -> None:
    c = DrainBenchConfig(nodes=100)
    assert (c.drained, c.per_deployment) == (10, 50)
    assert DrainBenchConfig(nodes=5).drained == 1
    w = DrainBenchConfig(deployments=2, replicas=3, pdb="minAvailable=2").workload()
    assert [(d.name, d.replicas, d.min_available) for d in w] == [("app-0", 3, 2), ("app-1", 3, 2)]
    assert DrainBenchConfig(nodes=4, drain_nodes=4).problems() == [
        "--drain-nodes: must be in [1, --nodes) (some node must stay), got 4"
    ]
    assert "--pdb" in DrainBenchConfig(pdb="x").problems()[0]


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0


def test_reschedule_pairs_evictions_with_later_replacements() -> None:
    states = [
        st(1.0, "a"),
        st(1.0, "b"),
        st(5.0, "a", terminating=True),
        st(5.2, "a2", phase="Pending", ready=False, node=""),
        st(5.5, "a2", ready=False),
        st(5.7, "a2"),  # available 0.7 s after a's eviction
        st(6.0, "a", deleted=True, terminating=True),
    ]
    ms = _reschedule_ms(states, {"default/a": 5.0})
    assert [round(m) for m in ms] == [700]
    assert _max_unavailable(states, {"app-0": 2}, since=4.0) == {"app-0": 1}
    series = _pending_series(states, since=4.0)
    assert max(n for _, n in series) == 1 and series[-1][1] == 0
