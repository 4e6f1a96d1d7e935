"""`kse bench throughput --nodes A,B,...`: the node list flag and the goals of a sweep (kse.benchsweep)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kse.benchsweep import goals, memory_budget_mib, plot
from scheduler.bench import node_list


def test_node_list() -> None:
    assert node_list("5000") == [5000]
    assert node_list("500, 1000,15000") == [500, 1000, 15000]
    for bad in ("", "500,", "0", "a,1", "-5"):
        with pytest.raises(argparse.ArgumentTypeError):
            node_list(bad)


def point(nodes: int, pods_per_s: float, rss: float, base: float | None = 40.0) -> dict[str, object]:
    return {
        "mode": "in-process", "nodes": nodes, "pods": 1000, "init_pods": 100, "pods_per_s": pods_per_s,
        "attempt_ms_p50": 1.0, "attempt_ms_p99": 2.0, "rss_mib": rss, "baseline_rss_mib": base,
    }  # fmt: skip


def test_memory_budget() -> None:
    assert memory_budget_mib(point(1024, 1, 1)) == pytest.approx(50 + 1100 * 5 / 1024)


def test_goals() -> None:
    got = goals([point(500, 1000, 60), point(15000, 400, 900)])
    assert [ok for _, ok in got] == [False, True, False]  # 40 % retained; 20 MiB ok; 860 MiB > 738 MiB
    assert "40%" in got[0][0]
    assert "860 MiB over the 40 MiB baseline" in got[2][0]


def test_e2e_memory_is_judged_on_the_growth_over_the_smallest_point() -> None:
    """--e2e peaks are whole processes (~100 MiB of interpreter, grpc and numpy before any object):
    the smallest point is the baseline, each larger one is held to the budget of what it adds."""
    assert goals([point(500, 1, 130, base=None)]) == []
    got = goals(
        [point(500, 100, 130, base=None), point(5000, 100, 155, base=None), point(15000, 100, 900, base=None)]
    )
    assert got[1:] == [
        ("scheduler peak RSS at 5000 nodes: 25 MiB over the 130 MiB at 500 nodes "
         "(goal <= 220 MiB = 50 KiB per added node + 5 KiB per added pod)", True),
        ("scheduler peak RSS at 15000 nodes: 770 MiB over the 130 MiB at 500 nodes "
         "(goal <= 708 MiB = 50 KiB per added node + 5 KiB per added pod)", False),
    ]  # fmt: skip


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = plot([point(500, 1000, 60), point(5000, 800, 200)], tmp_path / "c.png", "t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
