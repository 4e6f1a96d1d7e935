"""`kse up` topology options with real processes: partition proxies, per-replica args, cluster.json.

One small cluster (etcd, API server, 2 replicas with fast leases, 3 nodes, no workload), started
with `partition_proxies`, `replica_args` and `rpc_error_logs`:

* every replica's connection file names its own proxy, and its process really has a TCP connection
  to that proxy's port (read from /proc);
* `replica_args` reach that replica's command line (in /proc/<pid>/cmdline) and no other;
* D/run/cluster.json lists every process with a live pid, its role, the replicas' identities and
  proxies, the PKI and the audit log; after a replica is SIGKILLed and restarted by the supervisor,
  the file shows the new pid and identity;
* partitioning the leader's proxy makes it lose the API server (a standby takes the lease); after
  heal(), it regains it: with the new leader killed and held down, it takes the lease back;
* after the cluster stops, the proxies no longer listen and cluster.json is gone.

Everything polls with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from harness.procs.proctable import cmdline, pid_alive
from harness.up import Cluster, ClusterPlan, ElectionPlan
from harness.up.supervisor import BackoffPolicy
from kse.config import ConnectionFile
from tests.fixtures.polling import truthy

RPC = "--rpc-error-log"


def _remote_ports(pid: int) -> set[int]:
    """Remote ports of the established TCP connections of `pid` (its socket inodes matched in
    /proc/net/tcp{,6})."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[3] == "01" and cols[9] in inodes:  # 01: ESTABLISHED
                    ports.add(int(cols[2].rsplit(":", 1)[1], 16))
    return ports


def _cmdline(pid: int) -> list[str]:
    argv = cmdline(pid)
    assert argv is not None, f"pid {pid} is gone"
    return argv


def _refused(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


@pytest.mark.integration
@pytest.mark.timeout(90)
async def test_partition_proxies_replica_args_and_cluster_file(tmp_path: Path) -> None:
    plan = ClusterPlan(
        data_dir=tmp_path / "kse",
        replicas=2,
        nodes=3,
        workload=False,
        election=ElectionPlan(lease_duration=2, renew_deadline=1.5, retry_period=0.5),
        restart_policy=BackoffPolicy(initial=0.2, cap=1, reset_after=600),
        grace=5,
        partition_proxies=True,
        rpc_error_logs=True,
        replica_args={"scheduler-2": ["--kube-api-burst", "123"]},
    )
    async with Cluster(plan) as cluster:
        assert cluster.leader_election
        assert cluster.pki_dir == plan.pki_dir
        names = [r.name for r in cluster.replicas]
        assert names == ["scheduler-1", "scheduler-2"]
        # The controller-managers have proxies of their own too (a partition can cut their leader off).
        cms = [r.name for r in cluster.controller_managers]
        assert sorted(cluster.proxies) == sorted([*names, *cms]) and cms == plan.controller_manager_names()
        for name in cms:
            assert ConnectionFile.load(plan.connection_path(name)).server == cluster.proxies[name].address

        # Every replica goes through its proxy.
        for r in cluster.replicas:
            proxy = cluster.proxies[r.name]
            assert ConnectionFile.load(plan.connection_path(r.name)).server == proxy.address
            pid, port = r.pid, proxy.port
            assert pid is not None
            await truthy(lambda: port in _remote_ports(pid), 10, f"{r.name}'s connection to its proxy")  # noqa: B023
        assert ConnectionFile.load(plan.connection_path("nodesim")).server == cluster.apiserver.address  # type: ignore[union-attr]

        # replica_args: scheduler-2 only, on the live command line.
        one, two = (_cmdline(r.pid or 0) for r in cluster.replicas)
        assert two[-2:] == ["--kube-api-burst", "123"] and "123" not in one
        # rpc_error_logs: every client component logs its failed RPCs.
        for role, argv in (("scheduler", two), ("nodesim", _cmdline(cluster.nodesim.pid or 0))):  # type: ignore[union-attr]
            assert RPC in argv, (role, argv)

        # cluster.json: every process, live pids, identities, proxies, the PKI.
        info = json.loads(plan.cluster_file.read_text())
        procs = info["processes"]
        cm_procs = {"controller-manager-1", "controller-manager-2"}
        want = {"etcd-0", "apiserver", "scheduler-1", "scheduler-2", "nodesim", *cm_procs}
        assert set(procs) == want, procs
        for name, p in procs.items():
            assert p["running"] and isinstance(p["pid"], int) and pid_alive(p["pid"]), (name, p)
        assert {n: p["role"] for n, p in procs.items()} == {
            "etcd-0": "etcd",
            "apiserver": "apiserver",
            "scheduler-1": "scheduler",
            "scheduler-2": "scheduler",
            "nodesim": "nodesim",
            **{name: "controller-manager" for name in cm_procs},
        }
        for r in cluster.replicas:
            assert procs[r.name]["pid"] == r.pid and procs[r.name]["identity"] == r.identity
            assert procs[r.name]["proxy"] == cluster.proxies[r.name].address
        assert procs["apiserver"]["proxy"] is None and procs["apiserver"]["identity"] is None
        assert info["pki_dir"] == str(plan.pki_dir) and info["run_dir"] == str(plan.run_dir)
        assert info["connection_file"] == str(plan.connection_file)
        assert info["audit_log"] == str(plan.audit_log)
        assert info["apiserver"] == cluster.apiserver.address  # type: ignore[union-attr]
        assert info["owner_pid"] == os.getpid()

        # A replica killed and restarted: cluster.json follows.
        victim = cluster.replica("scheduler-1")
        old_pid, old_identity = victim.pid, victim.identity
        await victim.kill()

        def restarted_in_file() -> dict[str, Any] | None:
            p = json.loads(plan.cluster_file.read_text())["processes"]["scheduler-1"]
            ok = p["running"] and p["pid"] not in (None, old_pid) and p["identity"] != old_identity
            return p if ok else None

        entry = await truthy(restarted_in_file, 20, "cluster.json to show scheduler-1's restart")
        assert entry["pid"] == victim.pid and pid_alive(entry["pid"]) and entry["identity"] == victim.identity
        await victim.process.wait_ready()

        # Partition the leader's link: it loses the API server, the other replica takes over.
        leader = await cluster.wait_for_leader(30)
        other = next(r for r in cluster.replicas if r is not leader)
        cut_identity = leader.identity
        cluster.proxies[leader.name].partition()
        new = await cluster.wait_for_leader(30, other_than=cut_identity)
        assert new is other, (new, other)
        # Heal: the cut replica (restarted after it lost its lease, or still standing by) regains
        # the API server; with the new leader killed and held down, it takes the lease.
        cluster.proxies[leader.name].heal()
        await other.kill(restart=False)
        back = await cluster.wait_for_leader(30, other_than=other)
        assert back is leader
        await other.start()
        proxies = dict(cluster.proxies)
    assert not plan.cluster_file.exists()
    for proxy in proxies.values():
        assert _refused(proxy.address), proxy.address
    assert not cluster.leftovers
