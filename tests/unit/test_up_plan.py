"""`ClusterPlan`'s new topology options as plain data, and the `kse up` flags that set them.

* `replica_args` land on that replica's argv only (after `scheduler_args`, so they win);
* `rpc_error_logs` adds `--rpc-error-log D/run/rpc-errors-<name>.jsonl` only to components whose
  `--help` lists the flag (the Features probe), so kse up works before and after they have it;
* the API server is handed the apiserver-etcd-client pair explicitly when etcd runs over mTLS;
* `problems()` names bad values; `kse up --help` lists the flags; a bad `--cert-ttl` exits 2 naming
  the flag.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from cli import up_cmd
from harness.up.topology import MIN_CERT_TTL, ClusterPlan, Features

REPO_ROOT = Path(__file__).resolve().parents[2]
RPC = "--rpc-error-log"


def _features(*, rpc: bool) -> Features:
    common = {"--connection-file", "--log-level", *([RPC] if rpc else [])}
    return Features(
        scheduler_flags=frozenset({*common, "--leader-elect-lease-duration"}),
        apiserver_flags=frozenset({"--audit-log", "--etcd-ca", "--etcd-cert", "--etcd-key"}),
        nodesim_flags=frozenset(common),
        workload_flags=frozenset(common),
    )


def test_replica_args_reach_only_their_replica_and_come_last(tmp_path: Path) -> None:
    plan = ClusterPlan(
        data_dir=tmp_path,
        replicas=3,
        scheduler_args=("--kube-api-burst", "10"),
        replica_args={"scheduler-2": ["--kube-api-burst", "99", "--clock-skew-file", "/x/skew.json"]},
    )
    assert plan.problems() == []
    f = _features(rpc=False)
    two = plan.scheduler_argv("scheduler-2", "scheduler-2_ab", 1, f, leader_elect=True)
    one = plan.scheduler_argv("scheduler-1", "scheduler-1_ab", 2, f, leader_elect=True)
    assert two[-6:] == [
        "--kube-api-burst",
        "10",
        "--kube-api-burst",
        "99",
        "--clock-skew-file",
        "/x/skew.json",
    ]
    assert one[-2:] == ["--kube-api-burst", "10"] and "--clock-skew-file" not in one


@pytest.mark.parametrize("rpc", [True, False])
def test_rpc_error_log_only_where_the_component_offers_it(tmp_path: Path, rpc: bool) -> None:
    plan = ClusterPlan(data_dir=tmp_path, rpc_error_logs=True)
    f = _features(rpc=rpc)
    argvs = {
        "scheduler-1": plan.scheduler_argv("scheduler-1", "scheduler-1_x", 1, f, leader_elect=True),
        "nodesim": plan.nodesim_argv(f),
        "workload": plan.workload_argv("run", f),
    }
    for name, argv in argvs.items():
        if rpc:
            i = argv.index(RPC)
            assert argv[i + 1] == str(tmp_path / "run" / f"rpc-errors-{name}.jsonl"), argv
        else:
            assert RPC not in argv, argv
    # Off in the plan: never passed, whatever the components offer.
    off = ClusterPlan(data_dir=tmp_path)
    assert RPC not in off.nodesim_argv(_features(rpc=True))
    assert f.rpc_error_log("scheduler") is rpc and not f.rpc_error_log("apiserver")


def test_apiserver_gets_the_etcd_client_pair_with_etcd_tls(tmp_path: Path) -> None:
    f = _features(rpc=False)
    args = ClusterPlan(data_dir=tmp_path).apiserver_extra_args(f)
    pki = tmp_path / "pki"
    assert args[args.index("--etcd-cert") + 1] == str(pki / "apiserver-etcd-client.crt")
    assert args[args.index("--etcd-key") + 1] == str(pki / "apiserver-etcd-client.key")
    assert args[args.index("--etcd-ca") + 1] == str(pki / "ca-bundle.crt")
    assert "--etcd-cert" not in ClusterPlan(data_dir=tmp_path, etcd_tls=False).apiserver_extra_args(f)


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
    workload = plan.workload_argv("run-1")
    if lifetime is None:
        assert "--delete-after" not in workload
    else:
        assert workload[workload.index("--delete-after") + 1] == f"{lifetime:g}s"


def test_a_bad_pod_lifetime_is_refused_naming_the_flag() -> None:
    bad = _kse_up("--pod-lifetime", "-5s")
    assert bad.returncode == 2 and "--pod-lifetime" in bad.stderr, bad.stderr
