"""`kse controller-manager`'s flags: kube-controller-manager's names and defaults, refusals that
name the flag, and what they become (ControllerOptions, the election, the metrics)."""

from __future__ import annotations

import pytest

from controllers.manager import build_parser, election_from_args, main, options_from_args
from controllers.metrics import ControllerManagerMetrics
from kse.leaderelection import LeaderElectionConfigError


def parse(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(list(argv))


def test_defaults_are_upstreams() -> None:
    args = parse()
    assert args.controllers == "*" and args.leader_elect is True
    assert (args.kube_api_qps, args.kube_api_burst) == (20.0, 30)
    e = election_from_args(args, "cm-1")
    assert (e.lease_namespace, e.lease_name) == ("kube-system", "kube-controller-manager")
    assert (e.lease_duration, e.renew_deadline, e.retry_period) == (15.0, 10.0, 2.0)
    o = options_from_args(args)
    assert (o.node_monitor_grace_period_s, o.node_monitor_period_s, o.terminated_pod_gc_threshold) == (
        40.0,
        5.0,
        12500,
    )
    assert o.syncs_for("deployment") == 5 and o.syncs_for("replicaset") == 5 and o.syncs_for("daemonset") == 2


def test_flags_map_into_the_options() -> None:
    args = parse(
        "--concurrent-deployment-syncs", "3", "--node-monitor-grace-period", "1m",
        "--terminated-pod-gc-threshold", "10", "--leader-elect=false",
    )  # fmt: skip
    o = options_from_args(args)
    assert o.syncs_for("deployment") == 3 and o.syncs_for("replicaset") == 5
    assert o.node_monitor_grace_period_s == 60.0 and o.terminated_pod_gc_threshold == 10
    assert args.leader_elect is False


def test_a_bad_election_names_every_flag() -> None:
    args = parse("--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "6s",
                 "--leader-elect-resource-name", "")  # fmt: skip
    with pytest.raises(LeaderElectionConfigError) as e:
        election_from_args(args, "cm-1")
    text = str(e.value)
    assert "--leader-elect-lease-duration" in text and "--leader-elect-resource-name" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--controllers", "bogus"], "--controllers: 'bogus' is not in the list of known controllers"),
        (["--controllers=-replicaset,-deployment"], "selects no controller"),  # "=" for a leading "-"
        (["--concurrent-deployment-syncs", "0"], "--concurrent-deployment-syncs"),
        (["--node-monitor-period", "soon"], "--node-monitor-period"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--server", "127.0.0.1:1", "--ca", "x", "--cert", "y", "--key", "z"])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_metrics_carry_upstream_names() -> None:
    m = ControllerManagerMetrics()
    m.enable_leader_election("kube-controller-manager")
    m.set_leader(True)
    m.add("deployment")
    m.depth("deployment", 2)
    m.work_duration("deployment", 0.01)
    text = m.expose()
    assert 'leader_election_master_status{name="kube-controller-manager"} 1.0' in text
    assert 'workqueue_adds_total{name="deployment"} 1.0' in text
    assert 'workqueue_depth{name="deployment"} 2.0' in text
    assert 'workqueue_work_duration_seconds_count{name="deployment"} 1.0' in text
    assert "_created" not in text
