"""`kse up`'s controller-managers: two replicas by default, elected on their own Lease, in
cluster.json, and a chaos target (`controller-manager-leader`) like the scheduler leader.

The cluster is the real thing (`harness.up.Cluster`: etcd, the API server, a scheduler, nodesim,
two `kse controller-manager` processes under the supervisor); the fault goes through the chaos
nemesis and the local backend, as `kse chaos run` injects it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.local_backend import LocalBackend
from chaos.nemesis import Nemesis
from chaos.scenario import FaultSpec
from harness.shape import ElectionPlan
from harness.up import Cluster, ClusterPlan
from harness.up.supervisor import BackoffPolicy
from kse.records import JsonlWriter
from proto import kse_pb2 as pb
from tests.fixtures import polling

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def deployment(name: str, replicas: int) -> pb.Deployment:
    d = pb.Deployment(api_version="apps/v1", kind="Deployment")
    d.metadata.name, d.metadata.namespace = name, "default"
    d.spec.replicas = replicas
    d.spec.selector.match_labels["app"] = name
    d.spec.template.metadata.labels["app"] = name
    c = d.spec.template.spec.containers.add()
    c.name, c.image = "web", "nginx"
    return d


async def test_kse_up_runs_two_controller_managers_and_chaos_kills_their_leader(tmp_path: Path) -> None:
    plan = ClusterPlan(
        data_dir=tmp_path / "kse",
        replicas=1,
        nodes=3,
        workload=False,
        etcd_fast=True,
        election=ElectionPlan(lease_duration=2, renew_deadline=1.5, retry_period=0.5),
        restart_policy=BackoffPolicy(initial=0.2, cap=1, reset_after=600),
        grace=5,
    )
    assert plan.controller_manager_names() == ["controller-manager-1", "controller-manager-2"]
    async with Cluster(plan) as cluster:
        assert cluster.clientset is not None
        cs = cluster.clientset
        info = json.loads(plan.cluster_file.read_text())
        roles = {name: p["role"] for name, p in info["processes"].items()}
        assert roles["controller-manager-1"] == roles["controller-manager-2"] == "controller-manager"
        assert info["processes"]["controller-manager-1"]["identity"].startswith("controller-manager-1_")
        snap = cluster.snapshot()  # the status view lists them among the processes
        assert snap is not None
        shown = {p.name for p in snap.processes}
        assert {"controller-manager-1", "controller-manager-2"} <= shown, shown

        first = await polling.eventually(
            cluster.controller_manager_leader, lambda r: r is not None, "a controller-manager leader", 30
        )
        assert first is not None
        await cs.deployments.create(deployment("web", 3))

        async def available() -> int:
            return (await cs.deployments.get("default", "web")).status.available_replicas

        await polling.eventually(available, lambda n: n == 3, "web available", 60, max_interval=0.2)

        with JsonlWriter(tmp_path / "faults.jsonl") as faults:
            nemesis = Nemesis(LocalBackend(cluster), cs, faults, leader_within=30)
            await nemesis.inject(FaultSpec(fault="kill", target="controller-manager-leader"))
        (record,) = nemesis.injected
        assert record.target == first.name and record.detail["identity"] == first.process.identities[0]

        new = await polling.eventually(
            cluster.controller_manager_leader,
            lambda r: r is not None and r.identity != record.detail["identity"],
            "another controller-manager leader",
            30,
        )
        assert new is not None
        # The new leader acts: a scale-up lands exactly.
        d = await cs.deployments.get("default", "web")
        d.spec.replicas = 5
        await cs.deployments.update(d)
        await polling.eventually(available, lambda n: n == 5, "web at 5", 60, max_interval=0.2)
        pods = [p for p in (await cs.pods.list("default", label_selector="app=web")).items
                if not p.metadata.deletion_timestamp]  # fmt: skip
        assert len(pods) == 5
