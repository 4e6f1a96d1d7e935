"""`kse scheduler`'s leader election flags: kube-scheduler's names and defaults, flags over the
configuration file's leaderElection block (upstream ApplyLeaderElectionTo: only flags given
explicitly win), validation naming the flags, and the hidden --clock-skew testing aid."""

from __future__ import annotations

from pathlib import Path

import pytest

from kse.leaderelection import (
    LeaderElectionConfig,
    LeaderElectionConfigError,
    RealClock,
    SkewedClock,
    Strategy,
)
from scheduler.apis.config import KubeSchedulerConfiguration
from scheduler.cli import (
    build_parser,
    election_clock,
    leader_election_config,
    main,
    resolve_leader_elect,
    resolve_leader_election,
)
from scheduler.profile import load_scheduler_config

FILE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {elect}
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 5s
  resourceName: my-scheduler
  resourceNamespace: ns1
"""


def config(tmp_path: Path, elect: str = "true") -> KubeSchedulerConfiguration:
    path = tmp_path / "config.yaml"
    path.write_text(FILE.format(elect=elect))
    return load_scheduler_config(path)


def elector_config(cfg: KubeSchedulerConfiguration, *flags: str) -> LeaderElectionConfig:
    args = build_parser().parse_args(list(flags))
    return leader_election_config(args, cfg, "me")


def test_defaults_are_kube_schedulers() -> None:
    cfg = load_scheduler_config()
    args = build_parser().parse_args([])
    assert resolve_leader_elect(args, cfg) is True
    assert args.leader_elect_strategy == "watch" and args.on_lost_lease == "exit"
    assert args.clock_skew is None and isinstance(election_clock(args), RealClock)
    c = leader_election_config(args, cfg, "me")
    assert (c.lease_duration, c.renew_deadline, c.retry_period) == (15.0, 10.0, 2.0)
    assert (c.lease_namespace, c.lease_name, c.identity) == ("kube-system", "kube-scheduler", "me")
    assert c.strategy is Strategy.WATCH and c.release_on_cancel
    assert args.gc_freeze is True  # kse's own: the synced caches frozen out of full collections


def test_no_gc_freeze() -> None:
    assert build_parser().parse_args(["--no-gc-freeze"]).gc_freeze is False


def test_the_config_files_block_is_used_when_no_flag_is_given(tmp_path: Path) -> None:
    c = elector_config(config(tmp_path))
    assert (c.lease_duration, c.renew_deadline, c.retry_period) == (30.0, 20.0, 5.0)
    assert (c.lease_namespace, c.lease_name) == ("ns1", "my-scheduler")


def test_each_flag_given_wins_over_the_file_and_the_file_is_left_alone(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    c = elector_config(
        cfg,
        "--leader-elect-renew-deadline", "12s",
        "--leader-elect-resource-name", "other",
        "--leader-elect-strategy", "poll",
    )  # fmt: skip
    assert (c.lease_duration, c.renew_deadline, c.retry_period) == (30.0, 12.0, 5.0)
    assert (c.lease_namespace, c.lease_name) == ("ns1", "other")
    assert c.strategy is Strategy.POLL
    assert cfg.leader_election.renew_deadline == 20.0 and cfg.leader_election.resource_name == "my-scheduler"
    c = elector_config(
        cfg,
        "--leader-elect-lease-duration", "1m",
        "--leader-elect-retry-period", "500ms",
        "--leader-elect-resource-namespace", "ns2",
        "--leader-elect-resource-lock", "leases",
    )  # fmt: skip
    assert (c.lease_duration, c.renew_deadline, c.retry_period) == (60.0, 20.0, 0.5)
    assert c.lease_namespace == "ns2"


@pytest.mark.parametrize(
    ("elect", "flags", "expected"),
    [
        ("true", [], True),
        ("false", [], False),
        ("false", ["--leader-elect"], True),
        ("false", ["--leader-elect=true"], True),
        ("true", ["--leader-elect=false"], False),
    ],
)
def test_leader_elect_flag_over_the_file(
    tmp_path: Path, elect: str, flags: list[str], expected: bool
) -> None:
    cfg = config(tmp_path, elect)
    args = build_parser().parse_args(flags)
    assert resolve_leader_elect(args, cfg) is expected
    assert resolve_leader_election(args, cfg).leader_elect is expected


def test_validation_reports_every_problem_naming_the_flags() -> None:
    cfg = load_scheduler_config()
    with pytest.raises(LeaderElectionConfigError) as info:
        elector_config(
            cfg,
            "--leader-elect-lease-duration", "2s",
            "--leader-elect-renew-deadline", "3s",
            "--leader-elect-resource-name", "",
        )  # fmt: skip
    errors = info.value.errors
    assert any("--leader-elect-resource-name must not be empty" in e for e in errors), errors
    assert any(
        "--leader-elect-lease-duration (leaseDuration, 2s) must be greater than "
        "--leader-elect-renew-deadline (renewDeadline, 3s)" in e
        for e in errors
    ), errors
    with pytest.raises(
        LeaderElectionConfigError, match=r"--leader-elect-retry-period \(retryPeriod\) must be"
    ):
        elector_config(cfg, "--leader-elect-retry-period", "0")
    # The file's values validated together with the flags that override them.
    with pytest.raises(LeaderElectionConfigError, match="JitterFactor"):
        elector_config(cfg, "--leader-elect-retry-period", "9s")


def test_main_prints_each_problem_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--leader-elect-lease-duration", "1s", "--leader-elect-renew-deadline", "2s"])
    assert code == 1
    err = capsys.readouterr().err
    assert "invalid leader election configuration" in err
    assert "--leader-elect-lease-duration (leaseDuration, 1s) must be greater than" in err


@pytest.mark.parametrize(
    "flags",
    [
        ["--leader-elect-strategy", "gossip"],
        ["--on-lost-lease", "retry"],
        ["--leader-elect-resource-lock", "endpoints"],
        ["--leader-elect-lease-duration", "soon"],
        ["--clock-skew", "abc"],
        ["--clock-skew", "1s,0"],
        ["--clock-skew", "1s,-2"],
        ["--clock-skew", "nan"],
    ],
)
def test_bad_flags_exit_2(flags: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(flags)
    assert info.value.code == 2


@pytest.mark.parametrize(
    ("text", "offset", "rate"),
    [
        ("+5s,1.02", 5.0, 1.02),
        ("-250ms", -0.25, 1.0),
        ("0,0.98", 0.0, 0.98),
        ("1m30s", 90.0, 1.0),
        ("-2", -2.0, 1.0),
    ],
)
def test_clock_skew_is_a_skewed_election_clock(text: str, offset: float, rate: float) -> None:
    args = build_parser().parse_args([f"--clock-skew={text}"])  # "=": a value may start with "-"
    assert args.clock_skew == (offset, rate)
    clock = election_clock(args)
    assert isinstance(clock, SkewedClock) and (clock.offset, clock.rate) == (offset, rate)


def test_clock_skew_is_hidden_and_the_refusal_is_gone() -> None:
    text = build_parser().format_help()
    assert "--clock-skew " not in text and "--clock-skew=" not in text and "CLOCK_SKEW " not in text
    assert "not implemented" not in text
    for flag in (
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
        "--leader-elect-resource-namespace",
        "--leader-elect-resource-name",
        "--leader-elect-strategy",
        "--on-lost-lease",
        "--identity",
    ):
        assert flag in text


@pytest.mark.parametrize(
    ("flags", "file_fields", "want"),
    [
        ([], "", (True, True)),  # upstream's defaults: profiling, and contention with it
        (["--profiling=false"], "", (False, False)),
        (["--contention-profiling=false"], "", (True, False)),
        ([], "enableProfiling: false\n", (False, False)),
        ([], "enableContentionProfiling: false\n", (True, False)),
        (["--profiling"], "enableProfiling: false\n", (True, True)),  # a given flag wins
        (["--contention-profiling"], "enableProfiling: false\n", (False, False)),  # needs profiling
    ],
)
def test_profiling_flags_over_the_file(flags: list[str], file_fields: str, want: tuple[bool, bool]) -> None:
    from scheduler.cli import resolve_profiling

    cfg = load_scheduler_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + file_fields
    )
    assert resolve_profiling(build_parser().parse_args(flags), cfg) == want


def test_extender_sample_refuses_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.extender.sample import main

    for argv, want in (
        (["--listen", "nowhere"], "--listen: expected HOST:PORT"),
        (["--listen", "127.0.0.1:0", "--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--listen", "127.0.0.1:0", "--bind"], "an API server connection is required"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert want in capsys.readouterr().err
