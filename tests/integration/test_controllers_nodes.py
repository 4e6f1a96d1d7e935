"""Node lifecycle, taint-based eviction, DaemonSet and PodGC controllers against a real API server,
with simulated kubelets (nodesim, in this process and as a real `kse nodesim` process) and the
real scheduler. Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controllers.base import ControllerOptions
from controllers.daemonset import DaemonSetController
from controllers.nodelifecycle import NodeLifecycleController
from controllers.podgc import PodGCController
from controllers.tainteviction import TaintEvictionController
from kse.client.clientset import Clientset
from kse.client.errors import NotFoundError
from kse.objects.manifest import load_manifests
from nodesim.simulator import NodeSimConfig, NodeSimulator
from nodesim.template import FleetConfig
from proto import kse_pb2 as pb
from scheduler.profile import load_scheduler_config
from scheduler.scheduler import Scheduler, SchedulerOptions
from tests.fixtures.apiserver import REPO_ROOT, ApiServer
from tests.fixtures.controllers import running_controllers
from tests.fixtures.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
WITHIN_S = 30.0
UNREACHABLE_TAINTS = {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
FAST_NODES: dict[str, Any] = {
    "heartbeat_interval": 0.2,
    "node_status_batch_interval": 0.1,
    "stats_interval": 0.0,
    "image_pull_bandwidth": 0.0,
    "termination_delay": 0.2,  # containers stop 0.2 s into a graceful deletion (not the pod's 30 s)
}
FAST_CONTROLLERS = ControllerOptions(
    node_monitor_grace_period_s=2.0,
    node_monitor_period_s=0.2,
    node_startup_grace_period_s=2.0,
    pod_gc_period_s=0.2,
    pod_gc_quarantine_s=0.5,
)
EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "k8s-examples"


def ready_status(node: pb.Node) -> str:
    return next((c.status for c in node.status.conditions if c.type == "Ready"), "")


def taints(node: pb.Node) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in node.spec.taints}


def pod_ready(pod: pb.Pod) -> str:
    return next((c.status for c in pod.status.conditions if c.type == "Ready"), "")


async def simulator(apiserver: ApiServer, count: int) -> NodeSimulator:
    cs = Clientset(await apiserver.channel("nodesim"), qps=0, burst=1)
    return NodeSimulator(cs, NodeSimConfig(fleet=FleetConfig(count=count), **FAST_NODES))


async def bound_pod(admin: Clientset, name: str, node: str, *tolerations: pb.Toleration) -> pb.Pod:
    pod = pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace="default"),
        spec=pb.PodSpec(containers=[pb.Container(name="c", image="app:v1")], tolerations=list(tolerations)),
    )
    await admin.pods.create(pod)
    return await admin.pods.bind(
        pb.Binding(
            metadata=pb.ObjectMeta(name=name, namespace="default"),
            target=pb.ObjectReference(kind="Node", name=node),
        )
    )


async def events_in(admin: Clientset, namespace: str) -> list[pb.Event]:
    return list((await admin.events.list(namespace)).items)


def terminating(pod: pb.Pod | None) -> bool:
    """Deleted, or being deleted (graceful deletion waits for the pod's kubelet)."""
    return pod is None or bool(pod.metadata.deletion_timestamp)


async def get_or_none(admin: Clientset, name: str) -> pb.Pod | None:
    try:
        return await admin.pods.get("default", name)
    except NotFoundError:
        return None


async def test_a_stopped_kubelet_makes_its_node_unknown_tainted_evicted_and_it_recovers(
    apiserver: ApiServer,
) -> None:
    sim = await simulator(apiserver, 2)
    async with (
        sim.running(),
        running_controllers(
            apiserver, [NodeLifecycleController, TaintEvictionController], FAST_CONTROLLERS
        ) as (ctls, admin),
    ):
        down, up = "nodesim-0", "nodesim-1"
        short = pb.Toleration(key=UNREACHABLE, operator="Exists", effect="NoExecute", toleration_seconds=1)
        await bound_pod(admin, "short", down, short)
        await bound_pod(admin, "long", down)  # DefaultTolerationSeconds: 300 s
        await bound_pod(admin, "elsewhere", up)
        for name in ("short", "long", "elsewhere"):
            await eventually(
                lambda n=name: admin.pods.get("default", n),
                lambda p: p.status.phase == "Running",
                f"{name} Running",
                WITHIN_S,
            )
        long = await admin.pods.get("default", "long")
        assert [(t.key, t.toleration_seconds) for t in long.spec.tolerations] == [
            (NOT_READY, 300),
            (UNREACHABLE, 300),
        ]

        sim.stop_kubelet(down)
        node = await eventually(
            lambda: admin.nodes.get(down),
            lambda n: ready_status(n) == "Unknown" and UNREACHABLE_TAINTS <= taints(n),
            "the stopped node Unknown with both unreachable taints",
            WITHIN_S,
        )
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert (ready.reason, ready.message) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
        assert all(t.time_added for t in node.spec.taints)

        # The pod tolerating the taint for 1 s is evicted (Terminating: its kubelet is down and
        # cannot finish the graceful deletion); the one with 300 s stays, marked not Ready.
        evicted = await eventually(
            lambda: get_or_none(admin, "short"), terminating, "short evicted", WITHIN_S
        )
        assert evicted is None or any(
            (c.type, c.reason) == ("DisruptionTarget", "DeletionByTaintManager")
            for c in evicted.status.conditions
        )
        long = await eventually(
            lambda: admin.pods.get("default", "long"),
            lambda p: pod_ready(p) == "False",
            "long marked not Ready",
            WITHIN_S,
        )

        def recorded(events: list[pb.Event]) -> bool:  # written by the recorder, asynchronously
            seen = {(e.reason, e.involved_object.name) for e in events}
            return {("TaintManagerEviction", "short"), ("NodeNotReady", down)} <= seen

        await eventually(
            lambda: events_in(admin, "default"), recorded, "the eviction and node events", WITHIN_S
        )
        healthy = await admin.nodes.get(up)
        assert ready_status(healthy) == "True" and not taints(healthy)
        assert pod_ready(await admin.pods.get("default", "elsewhere")) == "True"

        # The kubelet comes back, upgraded: the node is Ready, untainted, reports the new version.
        sim.start_kubelet(down, kubelet_version="v1.35.0-kse")
        node = await eventually(
            lambda: admin.nodes.get(down),
            lambda n: ready_status(n) == "True" and not taints(n),
            "the node Ready and untainted again",
            WITHIN_S,
        )
        assert node.status.node_info.kubelet_version == "v1.35.0-kse"
        await eventually(
            lambda: admin.pods.get("default", "long"),
            lambda p: pod_ready(p) == "True",
            "long Ready again",
            WITHIN_S,
        )
        await eventually(
            lambda: get_or_none(admin, "short"), lambda p: p is None, "short finalised", WITHIN_S
        )
        evictions = ctls[1].evicted
        assert evictions == 1


@pytest.fixture
async def scheduler(apiserver: ApiServer) -> AsyncIterator[Scheduler]:
    cs = Clientset(await apiserver.channel("scheduler-1"), qps=0)
    sched = Scheduler(load_scheduler_config(), cs, options=SchedulerOptions(identity="test"))
    task = asyncio.create_task(sched.run())
    await asyncio.wait_for(sched.synced.wait(), 15)
    try:
        yield sched
    finally:
        sched.stop()
        try:
            await asyncio.wait_for(task, 10)
        finally:
            task.cancel()


def daemonset_example() -> pb.DaemonSet:
    (obj,) = load_manifests((EXAMPLES / "controllers" / "daemonset.yaml").read_text())
    return obj.daemon_set


def running_image(pod: pb.Pod, suffix: str) -> bool:
    return pod.status.phase == "Running" and pod.spec.containers[0].image.endswith(suffix)


async def ds_pods(admin: Clientset, ds: pb.DaemonSet) -> list[pb.Pod]:
    page = await admin.pods.list(ds.metadata.namespace, label_selector="name=fluentd-elasticsearch")
    return list(page.items)


async def test_the_example_daemonset_runs_one_pod_per_node_including_a_cordoned_one(
    apiserver: ApiServer, scheduler: Scheduler
) -> None:
    sim = await simulator(apiserver, 3)
    async with (
        sim.running(),
        running_controllers(apiserver, [NodeLifecycleController, DaemonSetController], FAST_CONTROLLERS) as (
            _,
            admin,
        ),
    ):
        cordoned = await admin.nodes.get("nodesim-2")
        cordoned.spec.unschedulable = True
        await admin.nodes.update(cordoned)
        await eventually(
            lambda: admin.nodes.get("nodesim-2"),
            lambda n: ("node.kubernetes.io/unschedulable", "NoSchedule") in taints(n),
            "the cordoned node tainted unschedulable",
            WITHIN_S,
        )
        ds = await admin.daemon_sets.create(daemonset_example())
        pods = await eventually(
            lambda: ds_pods(admin, ds),
            lambda ps: len(ps) == 3 and all(p.status.phase == "Running" for p in ps),
            "one Running daemon pod per node",
            WITHIN_S,
        )
        assert sorted(p.spec.node_name for p in pods) == ["nodesim-0", "nodesim-1", "nodesim-2"]
        for p in pods:
            ref = p.metadata.owner_references[0]
            assert (ref.kind, ref.name, ref.uid, ref.controller) == (
                "DaemonSet",
                ds.metadata.name,
                ds.metadata.uid,
                True,
            )
            fields = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
            assert [list(r.values) for r in fields.node_selector_terms[0].match_fields] == [
                [p.spec.node_name]
            ]
            assert ("node.kubernetes.io/unschedulable", "NoSchedule") in {
                (t.key, t.effect) for t in p.spec.tolerations
            }
        done = await eventually(
            lambda: admin.daemon_sets.get(ds.metadata.namespace, ds.metadata.name),
            lambda d: d.status.number_available == 3,
            "the DaemonSet's status",
            WITHIN_S,
        )
        st = done.status
        assert (st.desired_number_scheduled, st.current_number_scheduled, st.number_ready) == (3, 3, 3)
        assert (st.updated_number_scheduled, st.number_misscheduled, st.number_unavailable) == (3, 0, 0)

        # A template change rolls out one node at a time (maxUnavailable 1).
        latest = await admin.daemon_sets.get(ds.metadata.namespace, ds.metadata.name)
        latest.spec.template.spec.containers[0].image = "k8s.gcr.io/fluentd-elasticsearch:1.21"
        await admin.daemon_sets.update(latest)
        pods = await eventually(
            lambda: ds_pods(admin, ds),
            lambda ps: len(ps) == 3 and all(running_image(p, ":1.21") for p in ps),
            "the rollout to the new image",
            WITHIN_S,
        )
        assert sorted(p.spec.node_name for p in pods) == ["nodesim-0", "nodesim-1", "nodesim-2"]


async def test_podgc_deletes_the_pods_of_a_deleted_node(apiserver: ApiServer) -> None:
    admin = Clientset(await apiserver.channel("admin"), qps=0)
    node = pb.Node(metadata=pb.ObjectMeta(name="gone"), status=pb.NodeStatus(allocatable={"cpu": "4"}))
    await admin.nodes.create(node)
    await bound_pod(admin, "orphan", "gone")
    async with running_controllers(apiserver, [PodGCController], FAST_CONTROLLERS) as (ctls, admin):
        await admin.nodes.delete("gone")
        await eventually(
            lambda: get_or_none(admin, "orphan"), lambda p: p is None, "the orphan deleted", WITHIN_S
        )
        assert ctls[0].deleted == 1


def nodesim_process(
    apiserver: ApiServer, tmp_path: Path, nodes: int, control: Path
) -> subprocess.Popen[bytes]:
    log = (tmp_path / "nodesim.log").open("wb")
    args = ["--server", apiserver.address, "--pki-dir", str(apiserver.pki.dir), "--nodes", str(nodes),
            "--heartbeat-interval", "0.2s", "--stats-interval", "0", "--ready-file", str(tmp_path / "ready"),
            "--control-file", str(control)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "kse", "nodesim", *args],
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )


async def node_state(admin: Clientset) -> dict[str, tuple[str, str]]:
    """Each node's (Ready status, kubeletVersion)."""
    return {
        n.metadata.name: (ready_status(n), n.status.node_info.kubelet_version)
        for n in (await admin.nodes.list()).items
    }


async def test_a_sigstopped_nodesim_leaves_its_nodes_unknown_and_its_control_file_stops_one_kubelet(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    control = tmp_path / "control.json"
    control.write_text("{}")
    proc = nodesim_process(apiserver, tmp_path, 2, control)
    try:
        await eventually(
            lambda: (tmp_path / "ready").exists() or proc.poll() is not None, bool, "nodesim ready", WITHIN_S
        )
        assert proc.poll() is None, (tmp_path / "nodesim.log").read_text()
        async with running_controllers(apiserver, [NodeLifecycleController], FAST_CONTROLLERS) as (_, admin):
            start = await node_state(admin)
            old = start["nodesim-0"][1]
            assert start == {"nodesim-0": ("True", old), "nodesim-1": ("True", old)}
            proc.send_signal(signal.SIGSTOP)
            try:
                await eventually(
                    lambda: node_state(admin),
                    lambda s: all(r == "Unknown" for r, _ in s.values()),
                    "every node of the stopped process Unknown",
                    WITHIN_S,
                )
            finally:
                proc.send_signal(signal.SIGCONT)
            await eventually(
                lambda: node_state(admin),
                lambda s: all(r == "True" for r, _ in s.values()),
                "Ready again",
                WITHIN_S,
            )
            # The rolling-upgrade step: one kubelet down, then back with a new version.
            control.write_text(
                json.dumps({"stopped": ["nodesim-1"], "kubeletVersions": {"nodesim-1": "v1.35.0"}})
            )
            proc.send_signal(signal.SIGHUP)
            await eventually(
                lambda: node_state(admin),
                lambda s: s == {"nodesim-0": ("True", old), "nodesim-1": ("Unknown", old)},
                "only nodesim-1 down",
                WITHIN_S,
            )
            control.write_text("{}")
            proc.send_signal(signal.SIGHUP)
            await eventually(
                lambda: node_state(admin),
                lambda s: s == {"nodesim-0": ("True", old), "nodesim-1": ("True", "v1.35.0")},
                "nodesim-1 back, upgraded",
                WITHIN_S,
            )
    finally:
        proc.terminate()
        proc.wait(10)


async def test_in_the_controller_manager_process_a_stopped_kubelet_is_evicted_but_its_daemon_pod_stays(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    """The same path with every component a process: `kse controller-manager` as
    system:kube-controller-manager (its grant covers node taints and status, pod status and
    deletes, daemonsets), `kse scheduler`, and `kse nodesim` whose control file stops a kubelet."""
    from tests.integration.test_controller_manager import Proc, start_proc

    def conn(stem: str) -> list[str]:
        ident = apiserver.pki[stem]
        return [
            "--server",
            apiserver.address,
            "--ca",
            str(ident.ca_bundle),
            "--cert",
            str(ident.cert),
            "--key",
            str(ident.key),
        ]

    control = tmp_path / "control.json"
    control.write_text("{}")
    py = [sys.executable, "-m", "kse"]
    procs: list[Proc] = []
    try:
        procs.append(
            await start_proc(
                "scheduler",
                [
                    *py,
                    "scheduler",
                    *conn("scheduler-1"),
                    "--leader-elect=false",
                    "--metrics-bind-address",
                    "127.0.0.1:0",
                ],
                tmp_path,
            )
        )
        procs.append(
            await start_proc(
                "nodesim",
                [
                    *py,
                    "nodesim",
                    "--server",
                    apiserver.address,
                    "--pki-dir",
                    str(apiserver.pki.dir),
                    "--nodes",
                    "2",
                    "--heartbeat-interval",
                    "0.2s",
                    "--image-pull-bandwidth",
                    "0",
                    "--control-file",
                    str(control),
                ],
                tmp_path,
            )
        )
        procs.append(
            await start_proc(
                "cm",
                [
                    *py,
                    "controller-manager",
                    *conn("controller-manager"),
                    "--leader-elect=false",
                    "--metrics-bind-address",
                    "127.0.0.1:0",
                    "--controllers",
                    "nodelifecycle,taint-eviction-controller,daemonset",
                    "--node-monitor-grace-period",
                    "2s",
                    "--node-monitor-period",
                    "200ms",
                ],
                tmp_path,
            )
        )
        nodesim = procs[1]
        admin = Clientset(await apiserver.channel("admin"), qps=0)
        ds = await admin.daemon_sets.create(daemonset_example())
        await eventually(
            lambda: ds_pods(admin, ds),
            lambda ps: len(ps) == 2 and all(running_image(p, "") for p in ps),
            "a daemon pod on each node",
            WITHIN_S,
        )
        short = pb.Toleration(key=UNREACHABLE, operator="Exists", effect="NoExecute", toleration_seconds=1)
        # Created with its nodeName set: the scheduler running here must not place it elsewhere first.
        await admin.pods.create(
            pb.Pod(
                metadata=pb.ObjectMeta(name="short", namespace="default"),
                spec=pb.PodSpec(containers=[pb.Container(name="c", image="app:v1")], tolerations=[short],
                                node_name="nodesim-1"),
            )
        )  # fmt: skip
        await eventually(
            lambda: admin.pods.get("default", "short"),
            lambda p: p.status.phase == "Running",
            "short Running",
            WITHIN_S,
        )

        control.write_text(json.dumps({"stopped": ["nodesim-1"]}))
        nodesim.process.send_signal(signal.SIGHUP)
        await eventually(
            lambda: admin.nodes.get("nodesim-1"),
            lambda n: ready_status(n) == "Unknown" and UNREACHABLE_TAINTS <= taints(n),
            "nodesim-1 Unknown and tainted by the controller-manager",
            WITHIN_S,
        )
        await eventually(lambda: get_or_none(admin, "short"), terminating, "short evicted", WITHIN_S)
        pods = await ds_pods(admin, ds)
        assert sorted(p.spec.node_name for p in pods) == ["nodesim-0", "nodesim-1"]  # tolerates forever

        control.write_text("{}")
        nodesim.process.send_signal(signal.SIGHUP)
        await eventually(
            lambda: admin.nodes.get("nodesim-1"),
            lambda n: ready_status(n) == "True" and not taints(n),
            "nodesim-1 back",
            WITHIN_S,
        )
        cm_log = procs[2].log()
        assert "Forbidden" not in cm_log and "PERMISSION_DENIED" not in cm_log, cm_log[-4000:]
    finally:
        for p in procs:
            p.kill()
