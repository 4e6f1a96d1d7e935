"""The steady workload of a rolling upgrade: a scenario's `cluster.deployments`, each with its
optional PodDisruptionBudget, created before t=0 (and every replica available) and left running.

Pods are small (10m CPU, 16Mi) and stop within `TERMINATION_GRACE_S` of their deletion, so an
eviction's replacement is not held back by a 30 s default grace period; the Deployments roll with
maxSurge 1 / maxUnavailable 0 (not exercised: their template never changes). The budget selects
the Deployment's pods (`app: NAME`), as a manifest's would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chaos.scenario import DeploymentSpec
from kse.objects.intstr import set_int_or_string
from proto import kse_pb2 as pb

if TYPE_CHECKING:
    from kse.client.clientset import Clientset

__all__ = ["create_workload", "deployment_object", "pdb_object", "wait_available"]

NAMESPACE = "default"
TERMINATION_GRACE_S = 1
IMAGE = "registry.k8s.io/pause:3.9"
AVAILABLE_WITHIN_S = 90.0
POLL_S = 0.25


def deployment_object(spec: DeploymentSpec, namespace: str = NAMESPACE) -> pb.Deployment:
    d = pb.Deployment(api_version="apps/v1", kind="Deployment")
    d.metadata.name, d.metadata.namespace = spec.name, namespace
    d.spec.replicas = spec.replicas
    d.spec.selector.match_labels["app"] = spec.name
    t = d.spec.template
    t.metadata.labels["app"] = spec.name
    t.spec.termination_grace_period_seconds = TERMINATION_GRACE_S
    c = t.spec.containers.add()
    c.name, c.image = "app", IMAGE
    c.resources.requests["cpu"] = "10m"
    c.resources.requests["memory"] = "16Mi"
    d.spec.strategy.type = "RollingUpdate"
    set_int_or_string(d.spec.strategy.rolling_update.max_surge, 1)
    set_int_or_string(d.spec.strategy.rolling_update.max_unavailable, 0)
    return d


def pdb_object(spec: DeploymentSpec, namespace: str = NAMESPACE) -> pb.PodDisruptionBudget | None:
    if not spec.has_pdb:
        return None
    b = pb.PodDisruptionBudget(api_version="policy/v1", kind="PodDisruptionBudget")
    b.metadata.name, b.metadata.namespace = spec.name, namespace
    b.spec.selector.match_labels["app"] = spec.name
    if spec.min_available is not None:
        set_int_or_string(b.spec.min_available, spec.min_available)
    else:
        assert spec.max_unavailable is not None
        set_int_or_string(b.spec.max_unavailable, spec.max_unavailable)
    return b


async def create_workload(cs: Clientset, specs: Sequence[DeploymentSpec]) -> None:
    """Create each budget, then its Deployment (a budget first: no pod is ever unguarded)."""
    for spec in specs:
        budget = pdb_object(spec)
        if budget is not None:
            await cs.pod_disruption_budgets.create(budget)
        await cs.deployments.create(deployment_object(spec))


async def wait_available(
    cs: Clientset, specs: Sequence[DeploymentSpec], within: float = AVAILABLE_WITHIN_S
) -> None:
    """Poll until every Deployment has all its replicas available and every budget has observed
    them (disruptionsAllowed computed on them); TimeoutError naming what is missing."""
    deadline = time.monotonic() + within
    while True:
        missing: list[str] = []
        for spec in specs:
            d = await cs.deployments.get(NAMESPACE, spec.name)
            if d.status.available_replicas < spec.replicas or d.status.updated_replicas < spec.replicas:
                have = d.status.available_replicas
                missing.append(f"deployment {spec.name}: {have}/{spec.replicas} available")
            if spec.has_pdb:
                b = await cs.pod_disruption_budgets.get(NAMESPACE, spec.name)
                if b.status.current_healthy < spec.replicas:
                    missing.append(f"budget {spec.name}: {b.status.current_healthy} healthy")
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"workload not available within {within:g}s: {'; '.join(missing)}")
        await asyncio.sleep(POLL_S)
