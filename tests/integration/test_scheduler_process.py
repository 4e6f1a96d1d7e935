"""A real `kse scheduler --leader-elect=false` process against a real API server (mTLS) over real
etcd: 20 nodes with mixed labels, taints and capacities, 200 pods with mixed constraints.

Every schedulable pod must end bound to a node that satisfies it (each constraint is checked on
the final objects), no node may be over-committed, and the impossible pods must carry
PodScheduled=False/Unschedulable and a FailedScheduling event with upstream's message shape.
The metrics endpoint must account for the attempts. No sleeps: everything polls with deadlines.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from certs.layout import PKI
from kse.client.clientset import Clientset
from kse.objects.podresources import pod_requests, resource_list_units
from kse.scrape import http_get, parse_exposition
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO_ROOT = Path(__file__).resolve().parents[2]
NS = "default"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
T = TypeVar("T")


# ---------------------------------------------------------------- the scheduler process


@dataclass
class SchedulerProcess:
    process: subprocess.Popen[bytes]
    metrics_address: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def http_get(self, path: str) -> tuple[int, str]:
        return await http_get(self.metrics_address, path)

    async def stop(self, grace: float = 10.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return await asyncio.to_thread(self.process.wait, grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return await asyncio.to_thread(self.process.wait)


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env)


def _read_ready(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


async def wait_for_ready_file(
    proc: subprocess.Popen[bytes], ready: Path, log_path: Path, what: str, within: float = 30.0
) -> dict[str, Any]:
    """The ready file's JSON once `proc` has written it; AssertionError (with the log) if the
    process exits first or `within` s pass (then it is killed)."""
    deadline = time.monotonic() + within
    while (info := _read_ready(ready)) is None:
        if proc.poll() is not None:
            log = await asyncio.to_thread(log_path.read_text)
            raise AssertionError(f"{what} exited with {proc.returncode}:\n{log}")
        if time.monotonic() > deadline:
            proc.kill()
            log = await asyncio.to_thread(log_path.read_text)
            raise AssertionError(f"{what} wrote no ready file in {within:g}s:\n{log}")
        await asyncio.sleep(0.02)  # polling for the ready file (the deadline bounds it)
    return info


async def start_scheduler(apiserver: ApiServer, pki: PKI, workdir: Path, *extra: str) -> SchedulerProcess:
    ready = workdir / "scheduler-ready.json"
    log_path = workdir / "scheduler.log"
    ident = pki["scheduler-1"]
    argv = [
        sys.executable, "-m", "kse", "scheduler",
        "--leader-elect=false",
        "--server", apiserver.address,
        "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
        "--kube-api-qps", "1000", "--kube-api-burst", "1000",
        "--metrics-bind-address", "127.0.0.1:0",
        "--ready-file", str(ready),
        "--identity", "scheduler-1",
        *extra,
    ]  # fmt: skip
    proc = _spawn(argv, log_path)
    info = await wait_for_ready_file(proc, ready, log_path, "kse scheduler")
    assert info["pid"] == proc.pid
    return SchedulerProcess(proc, info["metrics"], log_path)


async def eventually(
    probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], within: float, what: str
) -> T:
    """Poll `probe` until `done(result)`; AssertionError with the last result after `within` s."""
    deadline = time.monotonic() + within
    interval = 0.05
    while True:
        result = await probe()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {result!r}"[:4000])
        await asyncio.sleep(interval)
        interval = min(0.5, interval * 1.5)


# ---------------------------------------------------------------- the cluster


def make_node(i: int) -> pb.Node:
    name = f"node-{i:02d}"
    zone = "zone-" + "abc"[i % 3]
    size = ("small", "medium", "large")[i % 3 if i < 12 else (i + 1) % 3]
    cpu, mem, pods = {
        "small": ("2", "4Gi", "12"),
        "medium": ("4", "8Gi", "30"),
        "large": ("8", "16Gi", "40"),
    }[size]
    labels = {ZONE: zone, HOSTNAME: name, "size": size, "disk": "ssd" if i % 2 == 0 else "hdd"}
    node = pb.Node(metadata=pb.ObjectMeta(name=name, labels=labels))
    if 12 <= i < 16:  # infra nodes
        labels["role"] = "infra"
        node.spec.taints.add(key="dedicated", value="infra", effect="NoSchedule")
    elif 16 <= i < 19:  # GPU nodes: tainted, with an extended resource
        labels["gpu"] = "true"
        node.spec.taints.add(key="gpu", value="true", effect="NoSchedule")
    elif i == 19:  # cordoned
        node.spec.unschedulable = True
    node.metadata.labels.update(labels)
    alloc = {"cpu": cpu, "memory": mem, "pods": pods}
    if labels.get("gpu") == "true":
        alloc["nvidia.com/gpu"] = "4"
    node.status.capacity.update(alloc)
    node.status.allocatable.update(alloc)
    node.status.conditions.add(type="Ready", status="True")
    return node


def make_pod(name: str, cpu: str = "100m", mem: str = "128Mi", **labels: str) -> pb.Pod:
    pod = pb.Pod(metadata=pb.ObjectMeta(name=name, namespace=NS, labels=labels))
    c = pod.spec.containers.add(name="app", image="registry.k8s.io/pause:3.9")
    c.resources.requests.update({"cpu": cpu, "memory": mem})
    return pod


def spread(pod: pb.Pod, key: str, max_skew: int, app: str) -> pb.Pod:
    tsc = pod.spec.topology_spread_constraints.add(
        max_skew=max_skew, topology_key=key, when_unsatisfiable="DoNotSchedule"
    )
    tsc.label_selector.match_labels["app"] = app
    return pod


def make_pods() -> tuple[list[pb.Pod], set[str]]:
    """200 pods; returns them and the names of the impossible ones."""
    pods: list[pb.Pod] = []
    # Spread pods first, so they are early in the queue.
    for i in range(20):
        pods.append(spread(make_pod(f"zone-spread-{i}", "150m", app="zone-spread"), ZONE, 1, "zone-spread"))
    for i in range(10):
        pods.append(spread(make_pod(f"host-spread-{i}", app="host-spread"), HOSTNAME, 2, "host-spread"))
    for i in range(90):
        pods.append(make_pod(f"plain-{i}", f"{100 + 50 * (i % 5)}m", f"{128 * (1 + i % 4)}Mi", app="plain"))
    for i in range(30):
        p = make_pod(f"ssd-{i}", "200m", "256Mi", app="ssd")
        p.spec.node_selector["disk"] = "ssd"
        pods.append(p)
    for i in range(20):
        p = make_pod(f"zonal-{i}", app="zonal")
        na = p.spec.affinity.node_affinity
        term = na.required_during_scheduling_ignored_during_execution.node_selector_terms.add()
        term.match_expressions.add(key=ZONE, operator="In", values=["zone-a", "zone-b"])
        pref = na.preferred_during_scheduling_ignored_during_execution.add(weight=10)
        pref.preference.match_expressions.add(key="size", operator="In", values=["large"])
        pods.append(p)
    for i in range(15):
        p = make_pod(f"infra-ok-{i}", "250m", app="infra-ok")
        p.spec.tolerations.add(key="dedicated", operator="Equal", value="infra", effect="NoSchedule")
        pods.append(p)
    for i in range(10):
        p = make_pod(f"gpu-{i}", "500m", "1Gi", app="gpu")
        p.spec.containers[0].resources.requests["nvidia.com/gpu"] = "1"
        p.spec.containers[0].resources.limits["nvidia.com/gpu"] = "1"
        p.spec.node_selector["gpu"] = "true"
        p.spec.tolerations.add(key="gpu", operator="Exists", effect="NoSchedule")
        pods.append(p)
    impossible: list[pb.Pod] = []
    impossible.append(make_pod("impossible-cpu", "64"))
    p = make_pod("impossible-selector")
    p.spec.node_selector["disk"] = "nvme"
    impossible.append(p)
    p = make_pod("impossible-zone")
    required = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    required.node_selector_terms.add().match_expressions.add(key=ZONE, operator="In", values=["zone-z"])
    impossible.append(p)
    p = make_pod("impossible-untolerated-gpu")
    p.spec.node_selector["gpu"] = "true"
    impossible.append(p)
    p = make_pod("impossible-extended")
    p.spec.containers[0].resources.requests["example.com/widget"] = "1"
    p.spec.containers[0].resources.limits["example.com/widget"] = "1"
    impossible.append(p)
    pods += impossible
    assert len(pods) == 200
    return pods, {p.metadata.name for p in impossible}


# ---------------------------------------------------------------- checking the final objects


def tolerated(taint: pb.Taint, tolerations: Any) -> bool:
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.key and t.key != taint.key:
            continue
        if not t.key and t.operator != "Exists":
            continue
        if t.operator == "Exists" or t.value == taint.value:
            return True
    return False


def node_affinity_ok(pod: pb.Pod, node: pb.Node) -> bool:
    labels = node.metadata.labels
    req = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    if not req.node_selector_terms:
        return True
    for term in req.node_selector_terms:
        ok = True
        for e in term.match_expressions:
            if e.operator == "In":
                ok &= labels.get(e.key) in e.values
            else:  # only In is used here
                raise AssertionError(f"unexpected operator {e.operator}")
        if ok:
            return True
    return False


def check_placement(pods: list[pb.Pod], nodes: dict[str, pb.Node]) -> None:
    by_node: dict[str, list[pb.Pod]] = defaultdict(list)
    for pod in pods:
        if not pod.spec.node_name:
            continue
        node = nodes[pod.spec.node_name]
        name = pod.metadata.name
        by_node[node.metadata.name].append(pod)
        assert not node.spec.unschedulable, f"{name} on cordoned {node.metadata.name}"
        for key, value in pod.spec.node_selector.items():
            assert node.metadata.labels.get(key) == value, (
                f"{name}: nodeSelector {key}={value} on {node.metadata.name}"
            )
        assert node_affinity_ok(pod, node), f"{name}: node affinity not satisfied by {node.metadata.name}"
        for taint in node.spec.taints:
            if taint.effect in ("NoSchedule", "NoExecute"):
                assert tolerated(taint, pod.spec.tolerations), (
                    f"{name}: untolerated {taint} on {node.metadata.name}"
                )
    # No node over-committed: requests within allocatable, pod count within "pods".
    for node_name, placed in by_node.items():
        alloc = resource_list_units(nodes[node_name].status.allocatable)
        used: Counter[str] = Counter()
        for pod in placed:
            used.update(pod_requests(pod))
        for resource, amount in used.items():
            assert amount <= alloc.get(resource, 0), (
                f"{node_name} over-committed on {resource}: {amount} > {alloc}"
            )
        assert len(placed) <= alloc["pods"], f"{node_name}: {len(placed)} pods > {alloc['pods']}"
    # Topology spread (DoNotSchedule): skews within maxSkew over the eligible domains.
    zone_counts = Counter(nodes[p.spec.node_name].metadata.labels[ZONE] for p in pods
                          if p.metadata.labels.get("app") == "zone-spread")  # fmt: skip
    zones = {n.metadata.labels[ZONE] for n in nodes.values()}
    counts = [zone_counts.get(z, 0) for z in zones]
    assert max(counts) - min(counts) <= 1, f"zone spread skew too large: {zone_counts}"
    host_counts = Counter(p.spec.node_name for p in pods if p.metadata.labels.get("app") == "host-spread")
    # Every node has the hostname label, tainted ones included (nodeTaintsPolicy Ignore), and some
    # of those can never get a pod: the minimum is 0, so at most maxSkew (2) per node.
    assert max(host_counts.values()) <= 2, f"hostname spread skew too large: {host_counts}"


# ---------------------------------------------------------------- the test


async def _create_all(cs: Clientset, objs: list[Any], client: Any, limit: int = 32) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(obj: Any) -> None:
        async with sem:
            await client.create(obj)

    await asyncio.gather(*(one(o) for o in objs))


async def test_scheduler_process_places_a_mixed_workload(
    apiserver: ApiServer, pki: PKI, tmp_path: Path
) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    nodes = [make_node(i) for i in range(20)]
    await _create_all(cs, nodes, cs.nodes)
    # A pod bound by someone else before we start: it only takes room in the cache.
    prebound = make_pod("prebound", "1", "1Gi")
    prebound.spec.node_name = "node-00"
    await cs.pods.create(prebound)
    sched = await start_scheduler(apiserver, pki, tmp_path)
    try:
        await eventually(lambda: sched.http_get("/readyz"), lambda r: r[0] == 200, 30, "/readyz")
        status, body = await sched.http_get("/healthz")
        assert (status, body) == (200, "ok")

        pods, impossible = make_pods()
        t0 = time.monotonic()
        await _create_all(cs, pods, cs.pods)

        def settled(items: list[pb.Pod]) -> bool:
            for p in items:
                if p.spec.node_name:
                    continue
                cond = {c.type: c for c in p.status.conditions}.get("PodScheduled")
                if p.metadata.name not in impossible or cond is None or cond.reason != "Unschedulable":
                    return False
            return True

        async def list_pods() -> list[pb.Pod]:
            return (await cs.pods.list(NS)).items

        final = await eventually(list_pods, settled, 60, "every pod bound or reported unschedulable")
        elapsed = time.monotonic() - t0
        bound = [p for p in final if p.spec.node_name and p.metadata.name != "prebound"]
        assert {p.metadata.name for p in final if not p.spec.node_name} == impossible
        assert len(bound) == 195, f"{len(bound)} bound in {elapsed:.1f}s"

        node_map = {n.metadata.name: n for n in (await cs.nodes.list()).items}
        check_placement(final, node_map)

        # The impossible pods: PodScheduled=False/Unschedulable with the FitError message, and a
        # FailedScheduling event with the same shape.
        for pod in final:
            if pod.metadata.name not in impossible:
                continue
            cond = {c.type: c for c in pod.status.conditions}["PodScheduled"]
            assert cond.status == "False" and cond.reason == "Unschedulable"
            assert cond.message.startswith("0/20 nodes are available: "), cond.message
            assert cond.last_transition_time

        expected_reasons = {
            "impossible-cpu": "Insufficient cpu",
            "impossible-selector": "node(s) didn't match Pod's node affinity/selector",
            "impossible-zone": "node(s) didn't match Pod's node affinity/selector",
            "impossible-untolerated-gpu": "node(s) didn't match Pod's node affinity/selector",
            "impossible-extended": "Insufficient example.com/widget",
        }

        async def failed_events() -> dict[str, list[pb.Event]]:
            out: dict[str, list[pb.Event]] = defaultdict(list)
            for ev in (await cs.events.list(NS)).items:
                if ev.reason == "FailedScheduling":
                    out[ev.involved_object.name].append(ev)
            return out

        events = await eventually(
            failed_events,
            lambda e: impossible <= set(e),
            20,
            "FailedScheduling events of the impossible pods",
        )
        assert set(events) == impossible, f"FailedScheduling for schedulable pods: {set(events) - impossible}"
        for name in impossible:
            ev = events[name][-1]
            assert ev.type == "Warning" and ev.count >= 1
            assert ev.message.startswith("0/20 nodes are available: "), ev.message
            assert expected_reasons[name] in ev.message, ev.message
            assert ev.involved_object.kind == "Pod" and ev.involved_object.uid
            assert ev.source.component == "default-scheduler"
        msg = events["impossible-untolerated-gpu"][-1].message
        assert "untolerated taint" in msg, msg  # the 3 GPU nodes reject it for their taint

        # Scheduled events: one per bound pod, upstream's message.
        async def scheduled_events() -> dict[str, pb.Event]:
            items = (await cs.events.list(NS)).items
            return {ev.involved_object.name: ev for ev in items if ev.reason == "Scheduled"}

        by_pod = await eventually(scheduled_events, lambda e: len(e) >= 195, 20, "195 Scheduled events")
        assert len(by_pod) == 195 and "prebound" not in by_pod
        some = bound[0]
        assert by_pod[some.metadata.name].message == (
            f"Successfully assigned {NS}/{some.metadata.name} to {some.spec.node_name}"
        )

        # Metrics: attempts by result, the queue, the client's requests.
        async def metrics() -> dict[str, list[tuple[dict[str, str], float]]]:
            status, text = await sched.http_get("/metrics")
            assert status == 200
            return parse_exposition(text)

        def value(m: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
            return sum(v for lbl, v in m.get(name, []) if all(lbl.get(k) == x for k, x in labels.items()))

        def caught_up(m: dict[str, list[tuple[dict[str, str], float]]]) -> bool:
            # Counters move when the scheduler handles a bind's answer, a moment after the bind.
            return (
                value(m, "scheduler_pending_pods") == len(impossible)
                and value(m, "scheduler_schedule_attempts_total", result="scheduled") >= 195
                and value(m, "scheduler_scheduler_cache_size", type="assumed_pods") == 0
            )

        m = await eventually(metrics, caught_up, 20, "metrics accounting for every pod")
        assert (
            value(m, "scheduler_schedule_attempts_total", result="scheduled", profile="default-scheduler")
            == 195
        )
        assert value(m, "scheduler_schedule_attempts_total", result="unschedulable") >= len(impossible)
        assert value(m, "scheduler_schedule_attempts_total", result="error") == 0
        assert value(m, "scheduler_scheduling_attempt_duration_seconds_count", result="scheduled") == 195
        assert value(m, "scheduler_pod_scheduling_sli_duration_seconds_count") == 195
        assert value(m, "scheduler_pending_pods", queue="active") == 0
        assert (
            value(m, "rest_client_requests_total", method="POST", resource="pods/binding", code="OK") == 195
        )
        assert value(m, "rest_client_rate_limiter_duration_seconds_count") > 0
        assert value(m, "scheduler_scheduler_cache_size", type="nodes") == 20
        assert value(m, "scheduler_scheduler_cache_size", type="pods") == 196  # with "prebound"
        assert value(m, "scheduler_scheduler_cache_size", type="assumed_pods") == 0

        # Deleting a pending pod takes it out of the queue.
        await cs.pods.delete(NS, "impossible-cpu")
        await eventually(
            metrics,
            lambda m: value(m, "scheduler_pending_pods") == 4,
            20,
            "the deleted pod leaving the queue",
        )
        # A node that matches a pending pod's selector: the NodeAdd event requeues it, it binds.
        nvme = make_node(7)
        nvme.metadata.name = "node-nvme"
        nvme.metadata.labels.update({HOSTNAME: "node-nvme", "disk": "nvme"})
        await cs.nodes.create(nvme)
        placed = await eventually(
            lambda: cs.pods.get(NS, "impossible-selector"),
            lambda p: bool(p.spec.node_name),
            20,
            "the requeue",
        )
        assert placed.spec.node_name == "node-nvme"
        cond = {c.type: c for c in placed.status.conditions}["PodScheduled"]
        assert cond.status == "True"
    finally:
        rc = await sched.stop()
    log = sched.log()
    assert rc == 0, log[-4000:]
    assert "Traceback" not in log, log[-4000:]


def test_scheduler_refuses_an_invalid_leader_election_configuration() -> None:
    """Leader election is the default; an invalid configuration of it stops the process before it
    connects anywhere, with every problem named by its flag (exit 1, as upstream)."""
    argv = [
        sys.executable, "-m", "kse", "scheduler",
        "--server", "127.0.0.1:1", "--ca", "x", "--cert", "x", "--key", "x",
        "--leader-elect-lease-duration", "5s",
        "--leader-elect-renew-deadline", "5s",
        "--leader-elect-retry-period", "0",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "invalid leader election configuration" in proc.stderr
    assert "--leader-elect-retry-period (retryPeriod) must be greater than zero" in proc.stderr
    assert "Traceback" not in proc.stderr
