"""kubeconfigs that the real kubectl uses (skipped with a message where kubectl is not installed).

* `kse up` (`harness.up.Cluster`) serves the Kubernetes HTTP API by default and writes the admin
  kubeconfig D/kubeconfig; cluster.json names both; kubectl lists pods and the scheduler Lease
  with it; `kse certs rotate --identity admin` gives admin a new pair and the same, unchanged
  kubeconfig keeps working (it names the files by path);
* `kse kubeconfig --identity node-node-a` (node `node-a` of the test PKI) makes a kubeconfig with
  which kubectl may read pods but gets kube-apiserver's 403 for deleting a node.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from harness.clusterfile import ClusterFile
from harness.up import Cluster, ClusterPlan, ElectionPlan
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import kubectl, kubectl_path
from tests.fixtures.polling import eventually

pytestmark = pytest.mark.integration


def _serial(cert: Path) -> int:
    return x509.load_pem_x509_certificate(cert.read_bytes()).serial_number


def _kse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kse", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.timeout(120)
async def test_kse_up_writes_a_kubeconfig_kubectl_uses_across_a_rotation(tmp_path: Path) -> None:
    kubectl_path()  # skip before starting a cluster when there is no kubectl
    plan = ClusterPlan(
        data_dir=tmp_path / "kse",
        replicas=1,
        nodes=2,
        workload=False,
        etcd_fast=True,
        election=ElectionPlan(lease_duration=4, renew_deadline=3, retry_period=0.5),
        grace=5,
        track_status=False,
    )
    async with Cluster(plan) as cluster:
        kubeconfig = plan.kubeconfig
        assert cluster.kubeconfig == kubeconfig and kubeconfig.is_file()
        info = ClusterFile.load(plan.data_dir)
        assert info.kubeconfig == kubeconfig and info.apiserver_http == cluster.http_address
        cfg = yaml.safe_load(kubeconfig.read_text())
        assert cfg["clusters"][0]["cluster"]["server"] == f"https://{cluster.http_address}"
        assert cfg["users"][0]["name"] == "kse:admin"
        before = kubeconfig.read_bytes()

        out = await asyncio.to_thread(kubectl, kubeconfig, "get", "pods", "-A")
        assert out.returncode == 0 and "Forbidden" not in out.stderr
        leader = await cluster.wait_for_leader(30)
        out = await asyncio.to_thread(kubectl, kubeconfig, "get", "leases", "-n", "kube-system")
        assert out.stdout.splitlines()[0].split()[:2] == ["NAME", "HOLDER"], out.stdout
        assert any(
            line.split()[:2] == ["kube-scheduler", leader.identity] for line in out.stdout.splitlines()
        )

        serial = _serial(plan.pki_dir / "admin.crt")
        rotated = await asyncio.to_thread(
            _kse, "certs", "rotate", "--dir", str(plan.pki_dir), "--identity", "admin"
        )
        assert rotated.returncode == 0, rotated.stderr
        assert _serial(plan.pki_dir / "admin.crt") != serial
        assert kubeconfig.read_bytes() == before  # nothing to rewrite: the files are named by path
        out = await asyncio.to_thread(kubectl, kubeconfig, "get", "nodes", "-o", "name")
        assert len(out.stdout.split()) == 2 and all(n.startswith("node/") for n in out.stdout.split())
        out = await asyncio.to_thread(kubectl, kubeconfig, "get", "leases", "-n", "kube-system", "-o", "name")
        assert "lease.coordination.k8s.io/kube-scheduler" in out.stdout.split()

        # An API server restart serves the same HTTP address: the kubeconfig still points at it.
        address = cluster.http_address
        await cluster.restart_apiserver()
        assert cluster.http_address == address
        await eventually(
            lambda: asyncio.to_thread(kubectl, kubeconfig, "get", "pods", check=False),
            lambda p: p.returncode == 0,
            "kubectl after the API server restart",
            within=20,
            interval=0.1,
            max_interval=1.0,
        )


async def test_a_node_kubeconfig_reads_pods_and_is_forbidden_to_delete_a_node(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    kubectl_path()
    path = tmp_path / "node-a.kubeconfig"
    made = await asyncio.to_thread(
        _kse, "kubeconfig", "--identity", "node-node-a", "--pki-dir", str(apiserver.pki.dir),
        "--server", apiserver.http_url, "--out", str(path), "--relative",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    # --relative (what compose's kubeconfig uses): kubectl resolves from the kubeconfig's directory.
    assert yaml.safe_load(path.read_text())["users"][0]["user"]["client-key"].startswith("../")
    out = await asyncio.to_thread(kubectl, path, "get", "pods")
    assert out.returncode == 0 and "Forbidden" not in out.stderr
    out = await asyncio.to_thread(kubectl, path, "delete", "node", "node-b", check=False)
    assert out.returncode != 0
    assert (
        'Error from server (Forbidden): nodes "node-b" is forbidden: User "system:node:node-a" '
        'cannot delete resource "nodes" in API group "" at the cluster scope'
    ) in out.stderr, out.stderr
