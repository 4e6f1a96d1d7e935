"""`harness.clusterfile.ClusterFile`: D/run/cluster.json written and read by one dataclass.

* what `kse up` writes reads back equal, with the schema's keys in the schema's order;
* the smaller file `kse datadir init` writes for compose reads with the kse up layout as defaults;
* a present field of the wrong type is refused naming the field; an unknown key is ignored; a
  file that is not JSON or has no `processes` is refused naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.datadir_cmd import cluster_info as compose_cluster_info
from harness.clusterfile import ClusterFile, ClusterFileError, LeaseInfo, ProcessEntry, cluster_file_path

SCHEMA_KEYS = [
    "version",
    "owner_pid",
    "updated_at",
    "data_dir",
    "pki_dir",
    "run_dir",
    "logs_dir",
    "connection_file",
    "connections_dir",
    "audit_log",
    "apiserver",
    "apiserver_http",
    "kubeconfig",
    "etcd_endpoints",
    "etcd_tls",
    "cert_ttl_s",
    "lease",
    "processes",
]
PROCESS_KEYS = ["role", "pid", "running", "paused", "identity", "proxy", "rpc_error_log", "log"]


def _full(d: Path) -> ClusterFile:
    return ClusterFile(
        owner_pid=4242,
        updated_at="2024-05-01T12:00:00.123+00:00",
        data_dir=d,
        pki_dir=d / "pki",
        run_dir=d / "run",
        logs_dir=d / "logs",
        connection_file=d / "config.json",
        connections_dir=d / "connections",
        audit_log=d / "audit" / "audit.jsonl",
        apiserver="127.0.0.1:6443",
        apiserver_http="127.0.0.1:6444",
        kubeconfig=d / "kubeconfig",
        etcd_endpoints=("https://127.0.0.1:2379",),
        cert_ttl_s=600.0,
        lease=LeaseInfo(duration_s=15.0),
        processes={
            "etcd-0": ProcessEntry(role="etcd", pid=11, running=True, log=str(d / "logs" / "etcd-0.log")),
            "scheduler-1": ProcessEntry(
                role="scheduler",
                pid=1234,
                running=True,
                identity="scheduler-1_0a1b2c3d",
                proxy="127.0.0.1:7000",
                rpc_error_log=str(d / "run" / "rpc-errors-scheduler-1.jsonl"),
                log=str(d / "logs" / "scheduler-1.log"),
            ),
            "scheduler-2": ProcessEntry(role="scheduler", pid=None, running=False, identity="scheduler-2_x"),
        },
    )


def test_written_file_reads_back_equal_in_schema_order(tmp_path: Path) -> None:
    info = _full(tmp_path)
    path = cluster_file_path(tmp_path)
    info.write(path)
    raw = json.loads(path.read_text())
    assert list(raw) == SCHEMA_KEYS
    assert all(list(p) == PROCESS_KEYS for p in raw["processes"].values())
    assert list(raw["processes"]) == ["etcd-0", "scheduler-1", "scheduler-2"]  # start order kept
    assert raw["version"] == 1 and raw["lease"] == {
        "namespace": "kube-system",
        "name": "kube-scheduler",
        "duration_s": 15.0,
    }
    back = ClusterFile.read(path)
    assert back == info
    assert ClusterFile.load(tmp_path) == info
    assert back.by_role("scheduler") == ["scheduler-1", "scheduler-2"]
    assert back.processes["scheduler-2"].live_pid is None


def test_the_compose_file_reads_with_layout_defaults(tmp_path: Path) -> None:
    path = cluster_file_path(tmp_path)
    path.parent.mkdir(parents=True)
    raw = compose_cluster_info(tmp_path, scheduler_replicas=2, etcd_members=1)
    path.write_text(json.dumps(raw))
    info = ClusterFile.read(path)
    assert info.pki_dir == tmp_path / "pki" and info.run_dir == tmp_path / "run"
    assert info.connection_file == tmp_path / "config.json"
    assert info.logs_dir == tmp_path / "logs" and info.connections_dir == tmp_path / "connections"
    assert info.audit_log == tmp_path / "audit" / "audit.jsonl"
    assert info.lease == LeaseInfo(duration_s=None)
    assert info.by_role("scheduler") == ["scheduler-1", "scheduler-2"] and info.by_role("etcd") == ["etcd-1"]
    assert all(p.pid is None and not p.running for p in info.processes.values())
    assert info.processes["scheduler-1"].identity == ""


def test_a_minimal_file_needs_only_processes(tmp_path: Path) -> None:
    path = tmp_path / "run" / "cluster.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"processes": {"apiserver": {"role": "apiserver", "pid": 7}}}))
    info = ClusterFile.read(path)
    assert info.data_dir == tmp_path and info.pki_dir == tmp_path / "pki"
    assert info.processes["apiserver"] == ProcessEntry(role="apiserver", pid=7, running=True)
    assert info.audit_log is None and info.etcd_tls and info.owner_pid is None
    # Files written before the HTTP API existed: no HTTP address, no kubeconfig.
    assert info.apiserver_http is None and info.kubeconfig is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must be a JSON object"),
        ({}, "no `processes` mapping"),
        ({"processes": []}, "no `processes` mapping"),
        ({"version": 2, "processes": {}}, "version: unsupported version 2"),
        ({"version": "1", "processes": {}}, "version: must be an integer"),
        ({"processes": {"s": "x"}}, "processes.s: must be an object"),
        ({"processes": {"s": {"pid": "12"}}}, "processes.s.pid: must be an integer or null"),
        ({"processes": {"s": {"pid": True}}}, "processes.s.pid: must be an integer or null"),
        ({"processes": {"s": {"running": 1}}}, "processes.s.running: must be true or false"),
        ({"processes": {"s": {"identity": 3}}}, "processes.s.identity: must be a string"),
        ({"etcd_endpoints": "x", "processes": {}}, "etcd_endpoints: must be a list of strings"),
        ({"etcd_endpoints": [1], "processes": {}}, "etcd_endpoints[0]: must be a string"),
        ({"lease": {"duration_s": "15"}, "processes": {}}, "lease.duration_s: must be a number or null"),
        ({"lease": 3, "processes": {}}, "lease: must be an object"),
        ({"pki_dir": 5, "processes": {}}, "pki_dir: must be a string"),
    ],
)
def test_a_bad_field_is_named(tmp_path: Path, data: object, message: str) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ClusterFileError) as e:
        ClusterFile.read(path)
    assert str(path) in str(e.value) and message in str(e.value), e.value


def test_unreadable_and_unknown(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    with pytest.raises(ClusterFileError, match="cannot read"):
        ClusterFile.read(path)
    path.write_text("{not json")
    with pytest.raises(ClusterFileError, match="cannot read"):
        ClusterFile.read(path)
    path.write_text(json.dumps({"deployment": "compose", "future": {"x": 1}, "processes": {}}))
    assert ClusterFile.read(path).processes == {}
