"""Every etcd member kse starts takes a snapshot each 10,000 raft entries (etcd 3.6's and kubeadm's
default), not etcd 3.5's 100,000, whose in-memory raft log the soak measured as 25 minutes of
linear RSS growth."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.etcd_member_cmd import member_argv, register
from harness.procs.etcd import SNAPSHOT_COUNT, EtcdMember


def test_local_members_snapshot_every_ten_thousand_entries(tmp_path: Path) -> None:
    argv = EtcdMember("etcd-0", tmp_path, client_port=2379, peer_port=2380).command(Path("etcd"))
    assert SNAPSHOT_COUNT == 10_000 and "--snapshot-count=10000" in argv


def test_container_members_too(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(
        [
            "etcd-member",
            "--name",
            "etcd-1",
            "--data-dir",
            str(tmp_path),
            "--initial-cluster",
            "etcd-1=http://etcd-1:2380",
        ]
    )
    assert "--snapshot-count=10000" in member_argv(args, "etcd")
