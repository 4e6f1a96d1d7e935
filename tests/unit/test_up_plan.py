"""`ClusterPlan`'s new topology options as plain data, and the `kse up` flags that set them.

* `replica_args` land on that replica's argv only (after `scheduler_args`, so they win);
* every replica runs with `--leader-elect=true` and the plan's election flags;
* `rpc_error_logs` adds `--rpc-error-log D/run/rpc-errors-<name>.jsonl` to every client component;
* the API server gets its audit log, and the apiserver-etcd-client pair explicitly when etcd runs
  over mTLS;
* `problems()` names bad values, a bad shape is refused when the plan is made; `kse up --help`
  lists the flags; a bad `--cert-ttl` or election exits 2 naming the flag.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cli import up_cmd
from harness.shape import ElectionPlan, ShapeError
from harness.up.argv import apiserver_extra_args, nodesim_argv, scheduler_argv, workload_argv
from harness.up.plan import MIN_CERT_TTL, ClusterPlan

REPO_ROOT = Path(__file__).resolve().parents[2]
RPC = "--rpc-error-log"


def test_replica_args_reach_only_their_replica_and_come_last(tmp_path: Path) -> None:
    plan = ClusterPlan(
        data_dir=tmp_path,
        replicas=3,
        scheduler_args=("--kube-api-burst", "10"),
        replica_args={"scheduler-2": ["--kube-api-burst", "99", "--clock-skew-file", "/x/skew.json"]},
    )
    assert plan.problems() == []
    two = scheduler_argv(plan, "scheduler-2", "scheduler-2_ab", 1)
    one = scheduler_argv(plan, "scheduler-1", "scheduler-1_ab", 2)
    assert two[-6:] == [
        "--kube-api-burst",
        "10",
        "--kube-api-burst",
        "99",
        "--clock-skew-file",
        "/x/skew.json",
    ]
    assert one[-2:] == ["--kube-api-burst", "10"] and "--clock-skew-file" not in one


def test_every_replica_elects_with_the_plans_election(tmp_path: Path) -> None:
    election = ElectionPlan(
        strategy="poll", lease_duration=4, renew_deadline=3, retry_period=0.5, on_lost_lease="standby"
    )
    argv = scheduler_argv(ClusterPlan(data_dir=tmp_path, election=election), "scheduler-1", "s1_x", 1)
    assert "--leader-elect=true" in argv and "--leader-elect=false" not in argv
    flags = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--leader-elect-")}
    assert flags == {
        "--leader-elect-lease-duration": "4s",
        "--leader-elect-renew-deadline": "3s",
        "--leader-elect-retry-period": "0.5s",
        "--leader-elect-resource-name": "kube-scheduler",
        "--leader-elect-resource-namespace": "kube-system",
        "--leader-elect-strategy": "poll",
    }
    assert argv[argv.index("--on-lost-lease") + 1] == "standby"
    assert argv[argv.index("--identity") + 1] == "s1_x"


def test_rpc_error_log_reaches_every_client_component(tmp_path: Path) -> None:
    plan = ClusterPlan(data_dir=tmp_path, rpc_error_logs=True)
    argvs = {
        "scheduler-1": scheduler_argv(plan, "scheduler-1", "scheduler-1_x", 1),
        "nodesim": nodesim_argv(plan),
        "workload": workload_argv(plan, "run"),
    }
    for name, argv in argvs.items():
        i = argv.index(RPC)
        assert argv[i + 1] == str(tmp_path / "run" / f"rpc-errors-{name}.jsonl"), argv
        assert argv[i + 1] == str(plan.rpc_error_log_path(name))
    # Off in the plan: never passed.
    off = ClusterPlan(data_dir=tmp_path)
    assert RPC not in nodesim_argv(off) and RPC not in workload_argv(off, "run")
    assert RPC not in scheduler_argv(off, "scheduler-1", "scheduler-1_x", 1)


def test_apiserver_gets_its_audit_log_and_the_etcd_client_pair_with_etcd_tls(tmp_path: Path) -> None:
    args = apiserver_extra_args(ClusterPlan(data_dir=tmp_path))
    pki = tmp_path / "pki"
    assert args[args.index("--audit-log") + 1] == str(tmp_path / "audit" / "audit.jsonl")
    assert args[args.index("--etcd-cert") + 1] == str(pki / "apiserver-etcd-client.crt")
    assert args[args.index("--etcd-key") + 1] == str(pki / "apiserver-etcd-client.key")
    assert args[args.index("--etcd-ca") + 1] == str(pki / "ca-bundle.crt")
    assert "--etcd-cert" not in apiserver_extra_args(ClusterPlan(data_dir=tmp_path, etcd_tls=False))


def test_the_elected_components_must_fence_every_write_by_default(tmp_path: Path) -> None:
    args = apiserver_extra_args(ClusterPlan(data_dir=tmp_path))
    required = [args[i + 1] for i, a in enumerate(args) if a == "--require-fence-for"]
    assert required == ["system:kube-scheduler", "system:kube-controller-manager"]


def test_problems_name_the_bad_field(tmp_path: Path) -> None:
    assert ClusterPlan(data_dir=tmp_path, cert_ttl=30).problems() == []
    (short,) = ClusterPlan(data_dir=tmp_path, cert_ttl=5).problems()
    assert "cert TTL" in short and "30s" in short and "5s" in short
    assert ClusterPlan(data_dir=tmp_path, cert_ttl=5, min_cert_ttl=2).problems() == []
    assert ClusterPlan(data_dir=tmp_path, cert_ttl=float("inf")).problems()
    (unknown,) = ClusterPlan(data_dir=tmp_path, replicas=2, replica_args={"scheduler-3": []}).problems()
    assert "'scheduler-3'" in unknown and "scheduler-1, scheduler-2" in unknown
    (bare,) = ClusterPlan(data_dir=tmp_path, replica_args={"scheduler-1": "--x"}).problems()  # type: ignore[dict-item]
    assert "list of strings" in bare


E = ElectionPlan


@pytest.mark.parametrize(
    ("make", "field", "text"),
    [
        (lambda p: ClusterPlan(data_dir=p, replicas=0), "replicas", "must be >= 1"),
        (lambda p: ClusterPlan(data_dir=p, nodes=-1), "nodes", "must be >= 0"),
        (lambda p: ClusterPlan(data_dir=p, rate=-1), "rate", "must be >= 0"),
        (lambda p: ClusterPlan(data_dir=p, etcd_members=2), "etcd_members", "must be odd"),
        (lambda p: E(strategy="gossip"), "strategy", "must be one of watch, poll"),
        (lambda p: E(on_lost_lease="panic"), "on_lost_lease", "must be one of exit, standby"),
        (lambda p: E(lease_duration=5, renew_deadline=6), "renew_deadline", "must be < lease_duration (5s)"),
        (lambda p: E(renew_deadline=2.4, retry_period=2), "retry_period", "JitterFactor"),
        (lambda p: E(lease_duration=0.5, renew_deadline=0.4, retry_period=0.1), "lease_duration", ">= 1s"),
        (lambda p: E(retry_period=0), "retry_period", "must be > 0"),
        (lambda p: E(lease_duration=float("nan")), "lease_duration", "finite"),
        (lambda p: E(lease_name=""), "lease_name", "non-empty"),
    ],
)
def test_a_bad_shape_is_refused_when_the_plan_is_made(
    tmp_path: Path, make: Callable[[Path], object], field: str, text: str
) -> None:
    with pytest.raises(ShapeError) as e:
        make(tmp_path)
    assert [p.field for p in e.value.problems] == [field], e.value
    assert text in e.value.problems[0].message, e.value


def test_a_plan_changed_after_it_was_made_still_reports_its_shape(tmp_path: Path) -> None:
    plan = ClusterPlan(data_dir=tmp_path)
    plan.replicas = 0
    assert plan.problems() == ["replicas: must be >= 1, got 0"]


def test_cert_ttl_flag_type() -> None:
    assert up_cmd.MIN_CERT_TTL_S == MIN_CERT_TTL
    assert up_cmd.cert_ttl("10m") == 600 and up_cmd.cert_ttl("90s") == 90 and up_cmd.cert_ttl("45") == 45
    for bad in ("5s", "29", "0", "-1m", "ten", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            up_cmd.cert_ttl(bad)


def _kse_up(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kse", "up", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        check=False,
    )


def test_kse_up_help_lists_the_new_flags_and_refuses_a_short_cert_ttl(tmp_path: Path) -> None:
    out = _kse_up("--help")
    assert out.returncode == 0, out.stderr
    for flag in ("--cert-ttl", "--etcd-tls", "--no-etcd-tls", "--partition-proxies", "--rpc-error-logs"):
        assert flag in out.stdout, flag
    bad = _kse_up("--cert-ttl", "10s", "--data-dir", str(tmp_path / "kse"))
    assert bad.returncode == 2, bad
    assert "--cert-ttl" in bad.stderr and "at least 30s" in bad.stderr, bad.stderr
    assert not (tmp_path / "kse").exists()  # refused before anything was made
    garbled = _kse_up("--cert-ttl", "ten minutes")
    assert garbled.returncode == 2 and "--cert-ttl" in garbled.stderr and "not a duration" in garbled.stderr


def test_plan_from_args_carries_the_new_flags(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    up_cmd.register(parser.add_subparsers())
    args = parser.parse_args(
        ["up", "--data-dir", str(tmp_path), "--cert-ttl", "2m", "--no-etcd-tls", "--partition-proxies",
         "--rpc-error-logs"]
    )  # fmt: skip
    plan = up_cmd.plan_from_args(args)
    assert (plan.cert_ttl, plan.etcd_tls, plan.partition_proxies, plan.rpc_error_logs) == (
        120,
        False,
        True,
        True,
    )
    defaults = up_cmd.plan_from_args(parser.parse_args(["up", "--data-dir", str(tmp_path)]))
    assert (defaults.cert_ttl, defaults.etcd_tls, defaults.partition_proxies, defaults.rpc_error_logs) == (
        None,
        True,
        False,
        False,
    )


@pytest.mark.parametrize(
    ("argv", "lifetime"),
    [
        ([], 30.0),  # 100 nodes at 20 pods/s: half of 4000 pods would live 100 s; capped at 30 s
        (["--nodes", "10", "--rate", "50"], 4.0),  # half of 400 pods at 50/s
        (["--pod-lifetime", "90s"], 90.0),
        (["--pod-lifetime", "0"], None),  # keep every pod: the cluster fills up
    ],
)
def test_workload_pods_churn_by_default(tmp_path: Path, argv: list[str], lifetime: float | None) -> None:
    parser = argparse.ArgumentParser()
    up_cmd.register(parser.add_subparsers())
    plan = up_cmd.plan_from_args(parser.parse_args(["up", "--data-dir", str(tmp_path), *argv]))
    assert plan.pod_lifetime == lifetime
    workload = workload_argv(plan, "run-1")
    if lifetime is None:
        assert "--delete-after" not in workload
    else:
        assert workload[workload.index("--delete-after") + 1] == f"{lifetime:g}s"


def test_a_bad_pod_lifetime_is_refused_naming_the_flag() -> None:
    bad = _kse_up("--pod-lifetime", "-5s")
    assert bad.returncode == 2 and "--pod-lifetime" in bad.stderr, bad.stderr


def test_a_bad_election_is_refused_naming_the_flag(tmp_path: Path) -> None:
    bad = _kse_up("--lease-duration", "5", "--renew-deadline", "6", "--data-dir", str(tmp_path / "kse"))
    assert bad.returncode == 2, bad
    want = "kse up: error: --renew-deadline: must be < --lease-duration (5s), got 6s"
    assert want in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    assert not (tmp_path / "kse").exists()  # refused before anything was made


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_the_http_api_is_on_by_default_on_a_fixed_loopback_port(tmp_path: Path) -> None:
    plan = ClusterPlan(data_dir=tmp_path)
    assert plan.http and plan.http_port == 0 and plan.problems() == []
    assert plan.kubeconfig == tmp_path / "kubeconfig"
    assert plan.kubectl_hint == f"export KUBECONFIG={tmp_path / 'kubeconfig'}; kubectl get pods -o wide"
    # The cluster picks a free port for 0 and passes it: a restart serves the same address.
    assert _value(apiserver_extra_args(plan, 41234), "--http-listen") == "127.0.0.1:41234"
    # A port in the plan wins over the picked one.
    fixed = ClusterPlan(data_dir=tmp_path, http_port=6444)
    assert _value(apiserver_extra_args(fixed, 41234), "--http-listen") == "127.0.0.1:6444"
    assert _value(apiserver_extra_args(fixed), "--http-listen") == "127.0.0.1:6444"
    off = ClusterPlan(data_dir=tmp_path, http=False)
    assert "--http-listen" not in apiserver_extra_args(off, 41234) and off.kubectl_hint == ""


def test_every_http_listen_the_plan_builds_parses_with_the_api_servers_parser(tmp_path: Path) -> None:
    from apiserver_mock.cli import build_parser

    base = ["--etcd-endpoints", "http://127.0.0.1:2379", "--pki-dir", str(tmp_path)]
    args = build_parser().parse_args([*base, *apiserver_extra_args(ClusterPlan(data_dir=tmp_path), 6444)])
    assert args.http_listen == "127.0.0.1:6444"


@pytest.mark.parametrize("port", [-1, 65536, True, 1.5])
def test_a_bad_http_port_is_named(tmp_path: Path, port: object) -> None:
    (problem,) = ClusterPlan(data_dir=tmp_path, http_port=port).problems()  # type: ignore[arg-type]
    assert problem.startswith("http_port must be"), problem


def test_http_flags(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    up_cmd.register(parser.add_subparsers())
    base = ["up", "--data-dir", str(tmp_path)]
    plan = up_cmd.plan_from_args(parser.parse_args(base))
    assert (plan.http, plan.http_port) == (True, 0)
    plan = up_cmd.plan_from_args(parser.parse_args([*base, "--http-port", "6444"]))
    assert (plan.http, plan.http_port) == (True, 6444)
    plan = up_cmd.plan_from_args(parser.parse_args([*base, "--no-http"]))
    assert plan.http is False
    for bad in ("65536", "-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            up_cmd.port_number(bad)
    both = _kse_up("--no-http", "--http-port", "6444", "--data-dir", str(tmp_path / "kse"))
    assert both.returncode == 2 and "--http-port and --no-http" in both.stderr, both.stderr
    assert not (tmp_path / "kse").exists()
