"""`kse cordon|uncordon|drain` and the real `kubectl drain` against a live cluster, and the drain
planner's prediction against the real drain's outcome.

The cluster: a real API server over etcd; three simulated kubelets (nodesim, which runs pods and
finishes their graceful deletion); the scheduler, the ReplicaSet controller and the disruption
controller (the one that keeps a PodDisruptionBudget's status), each the real code running in this
process against the API server. `kse` and `kubectl` run as child processes (the one through its
connection file, the other through the HTTP API with a kubeconfig).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controllers.base import ControllerContext, ControllerOptions
from controllers.disruption import DisruptionController
from controllers.replicaset import ReplicaSetController
from kse.client.clientset import Clientset
from kse.client.informer import InformerFactory
from kse.drain.cordon import uncordon
from kse.tasks import background
from nodesim.simulator import NodeSimConfig, NodeSimulator
from nodesim.template import FleetConfig
from proto import kse_pb2 as pb
from scheduler.profile import load_scheduler_config
from scheduler.scheduler import Scheduler, SchedulerOptions
from tests.fixtures.apiserver import REPO_ROOT, ApiServer
from tests.fixtures.kube import find_kubectl
from tests.fixtures.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

NS = "default"
NODES = ["dn-0", "dn-1", "dn-2"]
PENDING = (
    "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. preemption: 0/3 nodes are "
    "available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.."
)  # what the scheduler posts, its PostFilter (DefaultPreemption) included
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
FAST: dict[str, Any] = {
    "heartbeat_interval": 0.3,
    "node_status_batch_interval": 0.1,
    "stats_interval": 0.0,
    "termination_delay": 0.2,  # a pod stops this long after its deletion, whatever its grace period
}


@dataclass
class Cluster:
    apiserver: ApiServer
    admin: Clientset
    config: Path  # the kse connection file
    kubeconfig: Path
    workdir: Path

    async def kse(self, *args: str, within: float = 90) -> tuple[int, str, str]:
        return await run(
            [sys.executable, "-m", "kse", "--config", str(self.config), *args], self.workdir, within
        )

    async def kubectl(self, *args: str, within: float = 90) -> tuple[int, str, str]:
        path = find_kubectl()
        if path is None:
            pytest.skip("kubectl is not installed")
        return await run([path, "--kubeconfig", str(self.kubeconfig), *args], self.workdir, within)


async def run(argv: list[str], cwd: Path, within: float) -> tuple[int, str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), within)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(
            f"{argv[2:]} still running after {within:g}s; stdout:\n{out.decode()}\nstderr:\n{err.decode()}"
        ) from None
    return int(proc.returncode or 0), out.decode(), err.decode()


@pytest.fixture
async def cluster(apiserver: ApiServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    admin = Clientset(await apiserver.channel("admin"), qps=0, burst=0)
    sim_cs = Clientset(await apiserver.channel("nodesim"), qps=0, burst=0)
    sched_cs = Clientset(await apiserver.channel("scheduler-1"), qps=0, burst=0)
    rs_cs = Clientset(await apiserver.channel("admin"), qps=0, burst=0)
    config = tmp_path / "config.json"
    apiserver.connection("admin").save(config)
    kubeconfig = apiserver.kubeconfig(tmp_path / "kubeconfig", "admin")
    fleet = FleetConfig(count=len(NODES), name_prefix="dn-", cpu="4", memory="8Gi", pods="20")
    sim = NodeSimulator(sim_cs, NodeSimConfig(fleet=fleet, image_pull_bandwidth=0, **FAST))
    sched = Scheduler(load_scheduler_config(), sched_cs, options=SchedulerOptions(identity="drain-test"))
    informers = InformerFactory(rs_cs)
    ctx = ControllerContext(rs_cs, informers, lambda: None, "drain-test", ControllerOptions())
    rs, disruption = ReplicaSetController(ctx), DisruptionController(ctx)
    async with sim.running():
        async with background(sched.run(), name="scheduler"):
            await asyncio.wait_for(sched.synced.wait(), 15)
            async with informers.running():
                await informers.wait_for_sync()
                async with background(rs.run(), name="replicaset"):
                    async with background(disruption.run(), name="disruption"):
                        yield Cluster(apiserver, admin, config, kubeconfig, tmp_path)
                        sched.stop()


def replica_set(name: str, replicas: int, cpu: str = "1") -> pb.ReplicaSet:
    rs = pb.ReplicaSet(metadata=pb.ObjectMeta(name=name, namespace=NS))
    rs.spec.replicas = replicas
    rs.spec.selector.match_labels["app"] = name
    rs.spec.template.metadata.labels["app"] = name
    c = rs.spec.template.spec.containers.add(name="c", image="example.com/app:v1")
    c.resources.requests.update({"cpu": cpu})
    return rs


def bare_pod(name: str, node: str, cpu: str) -> pb.Pod:
    p = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=NS, labels={"app": name}))
    p.spec.containers.add(name="c", image="example.com/app:v1").resources.requests.update({"cpu": cpu})
    p.spec.node_name = node
    return p


async def pods_of(cs: Clientset, app: str) -> list[pb.Pod]:
    return (await cs.pods.list(NS, label_selector=f"app={app}")).items


def running(pods: list[pb.Pod], n: int) -> bool:
    live = [p for p in pods if not p.metadata.deletion_timestamp]
    return len(live) == n and all(p.status.phase == "Running" and p.spec.node_name for p in live)


async def web_on_dn0(c: Cluster, replicas: int = 3) -> list[pb.Pod]:
    """`replicas` web pods, all on dn-0 (the others cordoned meanwhile, with `kse cordon`); then
    dn-1 gets a half-CPU pod so that no two nodes tie for a replacement, and is uncordoned."""
    rc, out, err = await c.kse("cordon", "dn-1", "dn-2")
    assert (rc, out, err) == (0, "node/dn-1 cordoned\nnode/dn-2 cordoned\n", "")
    await c.admin.replica_sets.create(replica_set("web", replicas))
    pods = await eventually(lambda: pods_of(c.admin, "web"), lambda ps: running(ps, replicas), "web running")
    assert {p.spec.node_name for p in pods} == {"dn-0"}
    await c.admin.pods.create(bare_pod("half", "dn-1", "500m"))
    rc, out, _ = await c.kse("uncordon", "dn-1", "dn-2")
    assert (rc, out) == (0, "node/dn-1 uncordoned\nnode/dn-2 uncordoned\n")
    return pods


def placements(pods: list[pb.Pod], before: list[pb.Pod]) -> list[str | None]:
    old = {p.metadata.uid for p in before}
    return sorted(
        (
            p.spec.node_name or None
            for p in pods
            if p.metadata.uid not in old and not p.metadata.deletion_timestamp
        ),
        key=lambda n: (n is None, n or ""),
    )


def planned(plan: dict[str, Any]) -> list[str | None]:
    nodes = [p["replacement"]["node"] for p in plan["pods"] if p["replacement"] is not None]
    return sorted(nodes, key=lambda n: (n is None, n or ""))


async def test_cordon_and_uncordon_as_kubectl(cluster: Cluster) -> None:
    rc, out, _ = await cluster.kse("cordon", "dn-0")
    assert (rc, out) == (0, "node/dn-0 cordoned\n")
    assert (await cluster.admin.nodes.get("dn-0")).spec.unschedulable
    rc, out, _ = await cluster.kse("cordon", "dn-0")
    assert (rc, out) == (0, "node/dn-0 already cordoned\n")
    rc, out, _ = await cluster.kse("uncordon", "dn-0", "--dry-run=client")
    assert (rc, out) == (0, "node/dn-0 uncordoned (dry run)\n")
    rc, out, _ = await cluster.kse("uncordon", "dn-0", "--dry-run=server")
    assert (rc, out) == (0, "node/dn-0 uncordoned (server dry run)\n")
    assert (await cluster.admin.nodes.get("dn-0")).spec.unschedulable
    rc, out, _ = await cluster.kse("uncordon", "dn-0")
    assert (rc, out) == (0, "node/dn-0 uncordoned\n")
    assert not (await cluster.admin.nodes.get("dn-0")).spec.unschedulable
    rc, out, _ = await cluster.kse("cordon", "-l", "kubernetes.io/hostname in (dn-1,dn-2)")
    assert (rc, out) == (0, "node/dn-1 cordoned\nnode/dn-2 cordoned\n")
    rc, out, _ = await cluster.kse("uncordon", "-l", "kubernetes.io/hostname in (dn-1,dn-2)")
    assert (rc, out) == (0, "node/dn-1 uncordoned\nnode/dn-2 uncordoned\n")
    rc, out, err = await cluster.kse("cordon", "nope")
    assert rc == 1 and err == 'Error from server (NotFound): nodes "nope" not found\n', (out, err)


async def test_drain_matches_its_plan(cluster: Cluster) -> None:
    before = await web_on_dn0(cluster)
    rc, out, err = await cluster.kse("drain", "--plan", "dn-0", "-o", "json")
    assert rc == 0, err
    plan = json.loads(out)
    assert [p["action"] for p in plan["pods"]] == ["evict"] * 3
    assert all(not p["replacement"].get("tiedWith") for p in plan["pods"]), plan
    # Least allocated first: the empty dn-2, then dn-1 (half a CPU used), then dn-2 again.
    assert planned(plan) == ["dn-1", "dn-2", "dn-2"]
    rc, out, err = await cluster.kse("what-if", "--drain", "dn-0", "-o", "json")  # the same plan
    assert rc == 0, err
    assert {**json.loads(out), "createdAt": ""} == {**plan, "createdAt": ""}

    rc, out, err = await cluster.kse("drain", "dn-0", within=30)
    assert rc == 0, (out, err)
    lines = out.splitlines()
    assert lines[0] == "node/dn-0 cordoned" and lines[-1] == "node/dn-0 drained"
    names = sorted(p.metadata.name for p in before)
    assert sorted(line for line in lines if line.startswith("evicting pod")) == [
        f"evicting pod default/{n}" for n in names
    ]
    assert sorted(line for line in lines if line.endswith(" evicted")) == [f"pod/{n} evicted" for n in names]
    assert (await cluster.admin.nodes.get("dn-0")).spec.unschedulable
    after = await eventually(
        lambda: pods_of(cluster.admin, "web"),
        lambda ps: running([p for p in ps if p.metadata.uid not in {b.metadata.uid for b in before}], 3),
        "three replacements running",
    )
    assert placements(after, before) == planned(plan)

    rc, out, err = await cluster.kse("drain", "--report", "-o", "json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["summary"] == {"matches": 4, "mismatches": 0}, report


async def test_kubectl_drain_through_the_http_api(cluster: Cluster) -> None:
    before = await web_on_dn0(cluster, replicas=2)
    rc, out, err = await cluster.kubectl("drain", "dn-0", "--timeout=60s")
    assert rc == 0, (out, err)
    lines = out.splitlines()
    assert lines[0] == "node/dn-0 cordoned" and lines[-1] == "node/dn-0 drained", out
    for p in before:
        assert f"evicting pod default/{p.metadata.name}" in lines
        assert f"pod/{p.metadata.name} evicted" in lines
    await eventually(
        lambda: pods_of(cluster.admin, "web"),
        lambda ps: running([p for p in ps if p.metadata.uid not in {b.metadata.uid for b in before}], 2),
        "two replacements running",
    )
    rc, out, _ = await cluster.kubectl("uncordon", "dn-0")
    assert (rc, out) == (0, "node/dn-0 uncordoned\n")


async def budget(cs: Clientset, min_available: int, allowed: int) -> pb.PodDisruptionBudget:
    """A PDB over app=web, once the disruption controller has computed `allowed` for it."""
    pdb = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name="web", namespace=NS))
    pdb.spec.selector.match_labels["app"] = "web"
    pdb.spec.min_available.number_value = min_available
    await cs.pod_disruption_budgets.create(pdb)

    def computed(p: pb.PodDisruptionBudget) -> bool:
        st = p.status
        return (
            st.observed_generation >= p.metadata.generation
            and st.disruptions_allowed == allowed
            and (st.expected_pods > 0)
        )

    return await eventually(
        lambda: cs.pod_disruption_budgets.get(NS, "web"), computed, f"the budget computed ({allowed} allowed)"
    )


async def zero_budget(cs: Clientset) -> None:
    await budget(cs, 1, 0)


@pytest.mark.parametrize("tool", ["kse", "kubectl"])
async def test_a_zero_budget_makes_drain_retry_then_time_out(cluster: Cluster, tool: str) -> None:
    (pod,) = await web_on_dn0(cluster, replicas=1)
    await zero_budget(cluster.admin)
    name = pod.metadata.name
    if tool == "kse":
        rc, out, _ = await cluster.kse("drain", "--plan", "dn-0", "-o", "json")
        (only,) = json.loads(out)["pods"]
        assert (only["pdb"], only["disruptionsAllowed"], only["blockedBy"]) == (
            "default/web",
            0,
            "indefinitely",
        )
    run_tool = cluster.kse if tool == "kse" else cluster.kubectl
    rc, out, err = await run_tool("drain", "dn-0", "--timeout=7s")
    assert rc == 1, (out, err)
    assert out.splitlines()[0] == "node/dn-0 cordoned"
    assert out.count(f"evicting pod default/{name}\n") >= 2  # tried, retried after 5 s
    retry = f'error when evicting pods/"{name}" -n "default" (will retry after 5s): {VIOLATION}'
    assert retry in err.splitlines(), err
    timeout = f'error when evicting pods/"{name}" -n "default": global timeout reached: 7s'
    assert err.splitlines()[-1] == timeout, err  # kubectl prints an aggregate's errors as they are
    assert f'There are pending pods in node "dn-0" when an error occurred: {timeout}' in err, err
    assert (await cluster.admin.pods.get(NS, name)).metadata.uid == pod.metadata.uid  # still there


async def test_plan_predicts_the_pending_replacement_and_its_message(cluster: Cluster) -> None:
    before = await web_on_dn0(cluster)  # dn-1 has half a CPU taken
    await cluster.admin.pods.create(bare_pod("fill-1", "dn-1", "2500m"))  # 1 CPU left on dn-1
    await cluster.admin.pods.create(bare_pod("fill-2", "dn-2", "2500m"))  # 1.5 CPU left on dn-2
    rc, out, err = await cluster.kse("drain", "--plan", "dn-0", "-o", "json")
    assert rc == 0, err
    plan = json.loads(out)
    assert planned(plan) == ["dn-1", "dn-2", None]
    (message,) = [p["replacement"]["message"] for p in plan["pods"] if p["replacement"]["node"] is None]
    assert message == PENDING
    assert plan["summary"]["replacementsPending"] == 1

    rc, out, err = await cluster.kse("drain", "dn-0", "--force")
    assert rc == 0 and out.splitlines()[-1] == "node/dn-0 drained", (out, err)

    def settled(ps: list[pb.Pod]) -> bool:
        new = [p for p in ps if p.metadata.uid not in {b.metadata.uid for b in before}]
        pending = [p for p in new if not p.spec.node_name]
        return (
            len(new) == 3
            and len(pending) == 1
            and any(
                c.type == "PodScheduled" and c.reason == "Unschedulable" for c in pending[0].status.conditions
            )
        )

    after = await eventually(lambda: pods_of(cluster.admin, "web"), settled, "two placed, one unschedulable")
    assert placements(after, before) == planned(plan)
    (pending,) = [p for p in after if not p.spec.node_name]
    (cond,) = [c for c in pending.status.conditions if c.type == "PodScheduled"]
    assert cond.message == message  # what the scheduler said is what the plan predicted

    rc, out, err = await cluster.kse("drain", "--report")
    assert rc == 0, err
    assert out.splitlines()[-1] == "summary: 4 match, 0 mismatch", out
    assert f"default/ReplicaSet/web: actually Pending: {message}" in out


@pytest.mark.parametrize("tool", ["kse", "kubectl"])
async def test_disable_eviction_deletes_past_the_budget(cluster: Cluster, tool: str) -> None:
    (pod,) = await web_on_dn0(cluster, replicas=1)
    await zero_budget(cluster.admin)
    run_tool = cluster.kse if tool == "kse" else cluster.kubectl
    rc, out, err = await run_tool("drain", "dn-0", "--disable-eviction", "--grace-period=0", "--timeout=30s")
    assert rc == 0, (out, err)
    assert f"pod/{pod.metadata.name} deleted" in out.splitlines(), out
    assert "evicting" not in out


@pytest.mark.parametrize("tool", ["kse", "kubectl"])
async def test_server_dry_run_changes_nothing(cluster: Cluster, tool: str) -> None:
    (pod,) = await web_on_dn0(cluster, replicas=1)
    run_tool = cluster.kse if tool == "kse" else cluster.kubectl
    rc, out, err = await run_tool("drain", "dn-0", "--dry-run=server")
    assert rc == 0, (out, err)
    assert out.splitlines() == [
        "node/dn-0 cordoned (server dry run)",
        f"evicting pod default/{pod.metadata.name} (server dry run)",
        "node/dn-0 drained (server dry run)",
    ]
    assert not (await cluster.admin.nodes.get("dn-0")).spec.unschedulable
    still = await cluster.admin.pods.get(NS, pod.metadata.name)
    assert still.metadata.uid == pod.metadata.uid and not still.metadata.deletion_timestamp


async def test_kse_and_kubectl_say_the_same(cluster: Cluster) -> None:
    """Refusals, warnings and dry runs, byte for byte: kse's drain against the real kubectl's."""
    if find_kubectl() is None:
        pytest.skip("kubectl is not installed")
    ds = pb.DaemonSet(metadata=pb.ObjectMeta(name="agent", namespace=NS))
    ds.spec.selector.match_labels["app"] = "agent"
    ds.spec.template.metadata.labels["app"] = "agent"
    ds.spec.template.spec.containers.add(name="c", image="example.com/agent:v1")
    ds = await cluster.admin.daemon_sets.create(ds)
    agent = bare_pod("agent-x", "dn-0", "100m")
    agent.metadata.owner_references.add(
        api_version="apps/v1", kind="DaemonSet", name="agent", uid=ds.metadata.uid, controller=True
    )
    await cluster.admin.pods.create(agent)
    await cluster.admin.pods.create(bare_pod("bare", "dn-0", "100m"))
    for flags in (
        [],
        ["--ignore-daemonsets"],
        ["--ignore-daemonsets", "--force", "--dry-run=client"],
        ["--ignore-daemonsets", "--force", "--dry-run=server"],
    ):
        outputs = []
        for run_tool in (cluster.kse, cluster.kubectl):
            outputs.append(await run_tool("drain", "dn-0", *flags))
            await uncordon(cluster.admin, "dn-0")  # retries the conflicts of nodesim's status writes
        assert normalized(outputs[0]) == normalized(outputs[1]), (flags, outputs)
    assert outputs[0][1].splitlines()[-1] == "node/dn-0 drained (server dry run)"
    assert {p.metadata.name for p in (await cluster.admin.pods.list(NS)).items} >= {"agent-x", "bare"}


def normalized(result: tuple[int, str, str]) -> tuple[int, str, list[str]]:
    """stderr without what may differ: Go's map order among the errors and warnings of one node,
    and kubectl 1.32's doubled "cannot delete cannot delete" (fixed upstream since: filters.go
    prefixes "cannot delete" only to a message that lacks it, as kse does)."""
    rc, out, err = result
    lines = []
    for line in err.replace("cannot delete cannot delete", "cannot delete").splitlines():
        head, sep, rest = line.partition(" due to error: [")
        if sep:  # the aggregate, in map order
            inner, _, tail = rest.partition("], ")
            line = head + sep + ", ".join(sorted(re.split(r", (?=cannot delete )", inner))) + "], " + tail
        elif line.startswith("Warning: "):  # the warnings, in map order
            line = "Warning: " + "; ".join(sorted(line.removeprefix("Warning: ").split("; ")))
        lines.append(line)
    return rc, out, sorted(lines)


async def test_budget_rounds_as_planned(cluster: Cluster) -> None:
    """minAvailable 2 of 3: one eviction at once, the others as replacements become ready."""
    before = await web_on_dn0(cluster)
    await budget(cluster.admin, 2, 1)
    rc, out, err = await cluster.kse("drain", "--plan", "dn-0", "-o", "json")
    assert rc == 0, err
    plan = json.loads(out)
    assert [(p["pdb"], p["blockedBy"]) for p in plan["pods"]] == [
        ("default/web", None),
        ("default/web", "until 1 replacement is ready"),
        ("default/web", "until 2 replacements are ready"),
    ]
    assert [p["disruptionsAllowed"] for p in plan["pods"]] == [1, 0, 0]
    assert planned(plan) == ["dn-1", "dn-2", "dn-2"]

    rc, out, err = await cluster.kse("drain", "dn-0", "--timeout=60s")
    assert rc == 0, (out, err)
    assert err.count("(will retry after 5s): " + VIOLATION) >= 2, err  # the budget made two wait
    after = await eventually(
        lambda: pods_of(cluster.admin, "web"),
        lambda ps: running([p for p in ps if p.metadata.uid not in {b.metadata.uid for b in before}], 3),
        "three replacements running",
    )
    assert placements(after, before) == planned(plan)
    rc, out, err = await cluster.kse("drain", "--report", "-o", "json")
    assert json.loads(out)["summary"] == {"matches": 4, "mismatches": 0}, out
