"""The disruption controller against a real API server, with nodesim as the kubelets.

The controller runs under a small harness of the test's own (a Clientset, an InformerFactory, a
fence that is always None), as the controller-manager would run it. nodesim makes bound pods
Running and Ready, and stops and removes pods that are being deleted, so the budget's status is
seen following the pods: as they become ready, as one is evicted (disruptedPods, then
terminating), and as it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controllers.base import ControllerContext, ControllerOptions
from controllers.disruption import DisruptionController
from controllers.registry import CONTROLLERS
from kse.client.clientset import Clientset
from kse.client.errors import NotFoundError, TooManyRequestsError
from kse.client.informer import InformerFactory
from nodesim.simulator import NodeSimConfig, NodeSimulator
from nodesim.template import FleetConfig
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.polling import eventually

pytestmark = pytest.mark.integration

NS = "default"
FAST: dict[str, Any] = {"heartbeat_interval": 0.3, "node_status_batch_interval": 0.1, "stats_interval": 0.0}


async def clientset(apiserver: ApiServer, identity: str) -> Clientset:
    return Clientset(await apiserver.channel(identity), qps=0, burst=1)


@contextlib.asynccontextmanager
async def disruption_controller(cs: Clientset) -> AsyncIterator[DisruptionController]:
    informers = InformerFactory(cs)
    ctx = ControllerContext(
        clientset=cs, informers=informers, fence=lambda: None, identity="test", options=ControllerOptions()
    )
    ctl = DisruptionController(ctx)
    async with informers.running():
        await informers.wait_for_sync()
        task = asyncio.create_task(ctl.run(), name="disruption-under-test")
        try:
            yield ctl
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def web_pod(name: str, owner: pb.ReplicaSet | None = None) -> pb.Pod:
    p = pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace=NS, labels={"app": "web"}),
        spec=pb.PodSpec(containers=[pb.Container(name="app", image="registry.k8s.io/pause:3.10")]),
    )
    if owner is not None:
        p.metadata.owner_references.add(
            api_version="apps/v1", kind="ReplicaSet", name=owner.metadata.name, uid=owner.metadata.uid,
            controller=True,
        )  # fmt: skip
    return p


async def bind(cs: Clientset, name: str, node: str) -> None:
    binding = pb.Binding(metadata=pb.ObjectMeta(name=name, namespace=NS))
    binding.target.kind, binding.target.name = "Node", node
    await cs.pods.bind(binding)


def status_counts(pdb: pb.PodDisruptionBudget) -> tuple[int, int, int, int]:
    st = pdb.status
    return st.expected_pods, st.desired_healthy, st.current_healthy, st.disruptions_allowed


async def wait_counts(
    cs: Clientset, want: tuple[int, int, int, int], what: str, *, disrupted: dict[str, str] | None = None
) -> pb.PodDisruptionBudget:
    """Poll until the counts are `want` (and, given `disrupted`, status.disruptedPods is it: the
    counts of an eviction are (x, x, healthy-1, ...) both while the evicted pod is still in
    disruptedPods and once the controller saw it terminating and dropped it)."""

    def reached(p: pb.PodDisruptionBudget) -> bool:
        return status_counts(p) == want and (disrupted is None or dict(p.status.disrupted_pods) == disrupted)

    return await eventually(
        lambda: cs.pod_disruption_budgets.get(NS, "web"),
        reached,
        f"{what}: (expected, desired, healthy, allowed) == {want}"
        + ("" if disrupted is None else f", disruptedPods == {disrupted}"),
        within=20,
        max_interval=0.1,
    )


def test_registered_by_upstream_name() -> None:
    assert CONTROLLERS["disruption"] is DisruptionController


async def test_budget_status_follows_pods_as_they_become_ready_are_evicted_and_go(
    apiserver: ApiServer,
) -> None:
    admin, sim_cs = await clientset(apiserver, "admin"), await clientset(apiserver, "nodesim")
    cfg = NodeSimConfig(
        fleet=FleetConfig(count=1, name_prefix="pdb-"), image_pull_bandwidth=0, termination_delay=0.5, **FAST
    )
    async with NodeSimulator(sim_cs, cfg).running(), disruption_controller(admin) as ctl:
        budget = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name="web", namespace=NS))
        budget.spec.selector.match_labels["app"] = "web"
        budget.spec.min_available.number_value = 2
        await admin.pod_disruption_budgets.create(budget)
        pdb = await wait_counts(admin, (0, 2, 0, 0), "a budget over no pods")
        cond = {c.type: (c.status, c.reason) for c in pdb.status.conditions}
        assert cond == {"DisruptionAllowed": ("False", "InsufficientPods")}
        assert pdb.status.observed_generation == pdb.metadata.generation

        for i in range(3):
            await admin.pods.create(web_pod(f"web-{i}"))
        await wait_counts(admin, (3, 2, 0, 0), "three pending pods, none healthy")
        for i in range(3):
            await bind(admin, f"web-{i}", "pdb-0")
        pdb = await wait_counts(admin, (3, 2, 3, 1), "three Ready pods (nodesim started them)")
        assert {c.type: c.reason for c in pdb.status.conditions} == {"DisruptionAllowed": "SufficientPods"}

        # One eviction is allowed; a second is not until the first pod is replaced.
        evicted = await admin.pods.evict(NS, "web-0")
        assert evicted.metadata.deletion_timestamp
        with pytest.raises(TooManyRequestsError):
            await admin.pods.evict(NS, "web-1")
        # The terminating pod leaves disruptedPods (it is being deleted) and then the pod list.
        pdb = await wait_counts(admin, (2, 2, 2, 0), "the evicted pod gone")
        assert dict(pdb.status.disrupted_pods) == {}
        with pytest.raises(NotFoundError):
            await admin.pods.get(NS, "web-0")

        await admin.pods.create(web_pod("web-3"))
        await bind(admin, "web-3", "pdb-0")
        await wait_counts(admin, (3, 2, 3, 1), "a replacement Ready again")

        # A spec change is observed at its generation.
        pdb = await admin.pod_disruption_budgets.get(NS, "web")
        pdb.spec.min_available.number_value = 3
        await admin.pod_disruption_budgets.update(pdb)
        pdb = await wait_counts(admin, (3, 3, 3, 0), "minAvailable raised to 3")
        assert pdb.status.observed_generation == pdb.metadata.generation == 2
        assert ctl.writes >= 5


async def test_percent_budget_uses_the_replica_set_scale_and_a_missing_owner_fails_safe(
    apiserver: ApiServer,
) -> None:
    admin = await clientset(apiserver, "admin")
    async with disruption_controller(admin):
        rs = pb.ReplicaSet(metadata=pb.ObjectMeta(name="web", namespace=NS))
        rs.spec.replicas = 4
        rs.spec.selector.match_labels["app"] = "web"
        rs.spec.template.metadata.labels["app"] = "web"
        rs.spec.template.spec.containers.add(name="app", image="nginx")
        rs = await admin.replica_sets.create(rs)
        await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="n1")))
        for i in range(2):
            p = await admin.pods.create(web_pod(f"web-{i}", owner=rs))
            await bind(admin, p.metadata.name, "n1")
            p = await admin.pods.get(NS, p.metadata.name)
            p.status.phase = "Running"
            p.status.conditions.add(type="Ready", status="True")
            await admin.pods.update_status(p)
        budget = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name="web", namespace=NS))
        budget.spec.selector.match_labels["app"] = "web"
        budget.spec.max_unavailable.string_value = "50%"
        await admin.pod_disruption_budgets.create(budget)
        # Scale 4, 50% unavailable -> 2 desired; 2 healthy -> nothing to spare.
        await wait_counts(admin, (4, 2, 2, 0), "maxUnavailable 50% of the ReplicaSet's 4")

        orphan = web_pod("orphan")
        orphan.metadata.owner_references.add(
            api_version="apps/v1", kind="ReplicaSet", name="nope", uid="no-such-uid", controller=True
        )
        await admin.pods.create(orphan)
        pdb = await eventually(
            lambda: admin.pod_disruption_budgets.get(NS, "web"),
            lambda p: any(c.reason == "SyncFailed" for c in p.status.conditions),
            "SyncFailed for a pod whose controller does not exist",
            within=20,
            max_interval=0.1,
        )
        cond = next(c for c in pdb.status.conditions if c.type == "DisruptionAllowed")
        assert (cond.status, cond.message) == ("False", 'found no controllers for pod "orphan"')
        assert pdb.status.disruptions_allowed == 0


async def test_under_the_controller_manager_process(apiserver: ApiServer, tmp_path: Path) -> None:
    """`kse controller-manager --controllers disruption` (its own identity, its Lease, fenced
    writes) keeps a budget's status, and evictions follow it."""
    from tests.integration.test_controller_manager import SHORT_LEASE, start_proc

    ident = apiserver.pki["controller-manager"]
    argv = [
        sys.executable, "-m", "kse", "controller-manager", "--server", apiserver.address,
        "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
        "--identity", "cm-1", "--controllers", "disruption",
        "--leader-elect-lease-duration", SHORT_LEASE[0], "--leader-elect-renew-deadline", SHORT_LEASE[1],
        "--leader-elect-retry-period", SHORT_LEASE[2], "--metrics-bind-address", "127.0.0.1:0",
    ]  # fmt: skip
    admin = await clientset(apiserver, "admin")
    proc = await start_proc("controller-manager", argv, tmp_path)
    try:
        await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="n1")))
        for i in range(3):
            await admin.pods.create(web_pod(f"web-{i}"))
            await bind(admin, f"web-{i}", "n1")
            p = await admin.pods.get(NS, f"web-{i}")
            p.status.phase = "Running"
            p.status.conditions.add(type="Ready", status="True")
            await admin.pods.update_status(p)
        budget = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name="web", namespace=NS))
        budget.spec.selector.match_labels["app"] = "web"
        budget.spec.min_available.number_value = 2
        await admin.pod_disruption_budgets.create(budget)
        await wait_counts(admin, (3, 2, 3, 1), "the controller-manager's first status")
        await admin.pods.evict(NS, "web-0")
        with pytest.raises(TooManyRequestsError):
            await admin.pods.evict(NS, "web-1")
        # It is terminating: the eviction is done, and disruptedPods forgets it.
        await wait_counts(admin, (3, 2, 2, 0), "the terminating pod no longer healthy", disrupted={})
        # A budget over no pods: upstream's NoPods event, on the budget.
        empty = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name="empty", namespace=NS))
        empty.spec.selector.match_labels["app"] = "none"
        empty.spec.min_available.number_value = 1
        await admin.pod_disruption_budgets.create(empty)

        async def no_pods_events() -> list[pb.Event]:
            return [
                e
                for e in (await admin.events.list(NS)).items
                if e.involved_object.name == "empty" and e.reason == "NoPods"
            ]

        [event] = await eventually(no_pods_events, bool, "a NoPods event", within=20, max_interval=0.1)
        assert (event.type, event.involved_object.kind) == ("Normal", "PodDisruptionBudget")
        assert event.involved_object.api_version == "policy/v1"
    finally:
        proc.kill()
        log = proc.log()
    assert "Traceback" not in log, log[-4000:]
