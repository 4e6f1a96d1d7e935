"""`kse chaos soak`'s pure parts: the seeded plan (counts per hour, pacing, determinism), the
continuous safety guard (shown to fail on a pod bound twice and on an over-committed node, and to
pass on a correct history), and the leak verdict (a growing process caught, a flat one not)."""

from __future__ import annotations

import pytest

from chaos.scenario import FaultSpec, WaitSpec
from chaos.soak import SOAK_RATES_PER_HOUR, soak_counts, soak_kinds, soak_rounds, soak_scenario
from chaos.soak_guard import SafetyGuard
from chaos.soak_resources import LeakPolicy, ProcessSeries, judge_leaks, series_json
from proto import kse_pb2 as pb

# ------------------------------------------------------------------------------------------ plan


def test_an_hour_gets_the_issue_rates_and_a_short_soak_one_of_each() -> None:
    assert soak_counts(3600) == SOAK_RATES_PER_HOUR
    assert SOAK_RATES_PER_HOUR["leader-kill"] >= 100 and SOAK_RATES_PER_HOUR["zombie-leader"] >= 20
    short = soak_counts(180)
    assert short["leader-kill"] == 5 and all(n >= 1 for n in short.values())
    assert soak_counts(7200)["ca-rotation"] == 6
    with pytest.raises(ValueError, match="positive duration"):
        soak_counts(0)


def test_rounds_are_seeded_paced_over_the_duration_and_each_ends_in_its_recovery() -> None:
    rounds = soak_rounds(600, seed=3)
    assert rounds == soak_rounds(600, seed=3)
    assert [r.label for r in rounds] != [r.label for r in soak_rounds(600, seed=4)]
    assert len(rounds) == sum(soak_counts(600).values())
    starts = [r.not_before for r in rounds]
    assert starts == sorted(starts) and starts[0] == 0.0 and starts[-1] < 600
    for r in rounds:
        kind = r.label.split(" ")[0]
        assert isinstance(r.steps[0], WaitSpec) and r.steps[0].wait == "stable-leader"
        fault = r.steps[1]
        assert isinstance(fault, FaultSpec)
        if kind in ("leader-kill", "zombie-leader", "partition"):
            assert fault.target == "leader"
            assert [s.wait for s in r.steps[2:] if isinstance(s, WaitSpec)] == ["new-leader", "recovered"]
        if kind == "zombie-leader":
            # the held-back writes must outlive the lease, or nothing exercises the fence
            assert fault.mode == "delay-up" and (fault.delay or 0) > 4.0 and fault.until == "new-leader"


def test_a_soak_of_some_kinds_injects_only_those() -> None:
    """`--faults`: without the restarts, the API server and etcd live the whole soak."""
    kinds = soak_kinds(("partition", "leader-kill"))
    assert kinds == ("leader-kill", "partition")  # the table's order, whatever the caller's
    assert soak_counts(3600, kinds) == {"leader-kill": 100, "partition": 10}
    rounds = soak_rounds(600, seed=3, kinds=kinds)
    assert {r.label.split(" ")[0] for r in rounds} == set(kinds)
    assert len(rounds) == sum(soak_counts(600, kinds).values())
    assert soak_kinds(None) == tuple(SOAK_RATES_PER_HOUR)
    with pytest.raises(ValueError, match=r"unknown soak fault kind.*apiserver-crash.*known: leader-kill"):
        soak_kinds(("leader-kill", "apiserver-crash"))
    with pytest.raises(ValueError, match="at least one fault kind"):
        soak_kinds(())


def test_the_soak_scenario_has_a_three_member_etcd_and_partition_proxies() -> None:
    s = soak_scenario(180, seed=1)
    assert s.cluster.etcd_members == 3 and s.cluster.replicas == 3
    assert s.partitions  # the zombie and partition rounds need a proxy per replica
    assert "no_stale_writes" in s.checks and "audit_matches_etcd" in s.checks


# ------------------------------------------------------------------------------------------ guard


def _node(name: str, cpu: str = "2", pods: str = "10") -> pb.Node:
    return pb.Node(
        metadata=pb.ObjectMeta(name=name),
        status=pb.NodeStatus(allocatable={"cpu": cpu, "memory": "4Gi", "pods": pods}),
    )


def _pod(name: str, node: str = "", cpu: str = "500m", phase: str = "Running", rv: int = 1) -> pb.Pod:
    container = pb.Container(name="c", image="x", resources=pb.ResourceRequirements(requests={"cpu": cpu}))
    return pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace="default", uid=f"uid-{name}", resource_version=str(rv)),
        spec=pb.PodSpec(containers=[container], node_name=node),
        status=pb.PodStatus(phase=phase),
    )


def _guard() -> SafetyGuard:
    g = SafetyGuard()
    g.node_added(_node("n1"))
    g.node_added(_node("n2"))
    return g


def test_a_correct_history_passes_with_room_freed_by_deletes_and_finished_pods() -> None:
    g = _guard()
    for i in range(4):  # 4 x 500m = the node's 2 CPUs
        g.pod_added(_pod(f"p{i}"))
        g.pod_updated(_pod(f"p{i}"), _pod(f"p{i}", "n1"))
    g.pod_deleted(_pod("p0", "n1"))
    g.pod_added(_pod("p4", "n1"))
    g.pod_updated(_pod("p1", "n1"), _pod("p1", "n1", phase="Succeeded"))
    g.pod_added(_pod("p5", "n1"))
    assert g.violation is None and g.binds_seen == 6


def test_a_pod_bound_twice_is_caught() -> None:
    g = _guard()
    g.pod_added(_pod("p", "n1", rv=5))
    g.pod_updated(_pod("p", "n1"), _pod("p", "n2", rv=9))
    assert g.violation is not None and g.violation.check == "pods_bound_once"
    assert "default/p" in g.violation.detail and "n1 to n2" in g.violation.detail


def test_an_over_committed_node_is_caught_on_cpu_and_on_the_pod_count() -> None:
    g = _guard()
    for i in range(5):
        g.pod_added(_pod(f"p{i}", "n1"))
    assert g.violation is not None and g.violation.check == "no_overcommit"
    assert "cpu 2500>2000" in g.violation.detail and "default/p4" in g.violation.detail

    g = SafetyGuard()
    g.node_added(_node("n1", cpu="100", pods="2"))
    for i in range(3):
        g.pod_added(_pod(f"p{i}", "n1", cpu="1"))
    assert g.violation is not None and "pods 3>2" in g.violation.detail


def test_only_the_first_violation_is_kept() -> None:
    g = _guard()
    g.pod_added(_pod("p", "n1"))
    g.pod_updated(_pod("p", "n1"), _pod("p", "n2"))
    first = g.violation
    for i in range(6):
        g.pod_added(_pod(f"q{i}", "n2"))
    assert g.violation == first


# ------------------------------------------------------------------------------------------ leaks

POLICY = LeakPolicy(warmup_s=10, min_span_s=30, warmup_by_name=())


def _series(
    name: str, rss: list[float], fds: list[int], step: float = 5.0, born: float = 0.0
) -> ProcessSeries:
    return ProcessSeries(
        name, 100, [(born + i * step, r, f) for i, (r, f) in enumerate(zip(rss, fds, strict=True))]
    )


def test_flat_processes_pass_and_warm_up_growth_is_not_a_leak() -> None:
    warming_up = [20.0, 60.0, 90.0]
    steady = [100.0, 101.0, 99.0, 100.0, 102.0, 100.0, 101.0, 100.0, 99.0]
    warm = [*warming_up, *steady]
    verdict = judge_leaks([_series("apiserver", warm, [30] * len(warm))], POLICY)
    assert verdict["passed"], verdict
    assert verdict["processes"][0]["judged"] and verdict["processes"][0]["leak"] is None


def test_the_api_servers_cache_fill_is_its_warm_up_not_a_leak() -> None:
    # As measured: about 19 MiB a minute for 5 minutes after a start, then level.
    filling = [90.0 + 19 * t / 60 for t in range(0, 300, 5)]
    level = [185.0 + (i % 3) for i in range(72)]  # 6 more minutes
    rss = [*filling, *level]
    policy = LeakPolicy()
    apiserver = judge_leaks([_series("apiserver", rss, [30] * len(rss))], policy)
    assert apiserver["passed"] and apiserver["processes"][0]["judged"], apiserver
    assert "apiserver 300 s" in apiserver["detail"]
    # The same curve from a process with no such warm-up is growth.
    etcd = judge_leaks([_series("etcd-0", rss, [30] * len(rss))], policy)
    assert not etcd["passed"] and "etcd-0" in etcd["detail"]
    # And an API server that keeps growing past its warm-up still fails.
    growing = [*filling, *[185.0 + 19 * i * 5 / 60 for i in range(72)]]
    assert not judge_leaks([_series("apiserver", growing, [30] * len(growing))], policy)["passed"]


def test_growing_memory_or_fds_fail() -> None:
    growing = [100.0 + 10 * i for i in range(14)]
    verdict = judge_leaks([_series("etcd-0", growing, [20] * 14)], POLICY)
    assert not verdict["passed"] and "etcd-0" in verdict["detail"] and "RSS" in verdict["detail"]
    fds = [20 + 10 * i for i in range(14)]
    verdict = judge_leaks([_series("scheduler-1", [80.0] * 14, fds)], POLICY)
    assert not verdict["passed"] and "fds" in verdict["detail"]


def test_the_runners_own_memory_is_not_judged_but_its_fds_are() -> None:
    growing = [100.0 + 10 * i for i in range(14)]
    runner = _series("kse-chaos", growing, [20] * 14)
    runner.judge_rss = False
    assert judge_leaks([runner], POLICY)["passed"]
    runner.samples = [(t, r, 20 + 10 * i) for i, (t, r, _) in enumerate(runner.samples)]
    assert not judge_leaks([runner], POLICY)["passed"]


def test_a_short_lived_process_is_reported_but_not_judged() -> None:
    growing = [100.0 + 50 * i for i in range(5)]
    verdict = judge_leaks([_series("scheduler-2", growing, [20] * 5, born=100.0)], POLICY)
    assert verdict["passed"] and not verdict["processes"][0]["judged"]
    assert "0 of 1" in verdict["detail"]


def test_the_summary_for_people_names_every_fault_invariant_and_process() -> None:
    from chaos.cli import _soak_summary

    doc = {
        "duration_s": 180.0,
        "seed": 1,
        "passed": False,
        "planned_counts": {"leader-kill": 5, "ca-rotation": 1},
        "fault_counts": {"leader-kill": 4, "ca-rotation": 1},
        "invariants": {"continuous_safety": {"passed": False, "detail": "pod default/p moved"}},
        "resources": {
            "processes": [
                {"name": "etcd-0", "pid": 7, "samples": 3, "rss_mib": [30.0, 31.0, 32.0], "fds": [20, 21],
                 "judged": False, "leak": None},
            ]
        },
        "errors": ["leader-kill 5/5: no new leader"],
        "data_dir": "/tmp/kse-chaos-soak-x",
    }  # fmt: skip
    text = _soak_summary(doc)
    assert text.startswith("soak 180s (seed 1): FAIL")
    assert "leader-kill 4/5" in text and "| continuous_safety | NO | pod default/p moved |" in text
    assert "| etcd-0 | 7 | 3 | 30/31/32 | 20/21 | not judged (short-lived) |" in text
    assert "error: leader-kill 5/5: no new leader" in text and "/tmp/kse-chaos-soak-x" in text


def test_every_sample_is_kept_for_the_report() -> None:
    s = ProcessSeries("kube-apiserver", 42, [(0.0, 80.123, 30), (5.0, 81.0, 31)])
    assert series_json([s]) == [
        {
            "name": "kube-apiserver",
            "pid": 42,
            "judge_rss": True,
            "samples": [[0.0, 80.12, 30], [5.0, 81.0, 31]],
        }
    ]
