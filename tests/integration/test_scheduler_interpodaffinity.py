"""InterPodAffinity and UnsupportedFeatures in a real `kse scheduler` process against a real API
server over real etcd: a pod whose required podAffinity no pod satisfies stays Pending with
upstream's FailedScheduling message, and binds next to the first matching pod once one lands (the
queueing hint); required anti-affinity on the hostname puts one pod per node and leaves the
surplus pod Pending; a pod with a PersistentVolumeClaim is refused, saying why."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from certs.layout import PKI
from kse.client.clientset import Clientset
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.integration.test_scheduler_process import _create_all, eventually, make_pod, start_scheduler

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NS = "default"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def node(i: int) -> pb.Node:
    name = f"node-{i}"
    n = pb.Node(metadata=pb.ObjectMeta(name=name, labels={HOSTNAME: name, ZONE: "zone-" + "ab"[i % 2]}))
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "20"}
    n.status.capacity.update(alloc)
    n.status.allocatable.update(alloc)
    n.status.conditions.add(type="Ready", status="True")
    return n


def with_term(pod: pb.Pod, anti: bool, app: str, key: str) -> pb.Pod:
    aff = pod.spec.affinity.pod_anti_affinity if anti else pod.spec.affinity.pod_affinity
    term = aff.required_during_scheduling_ignored_during_execution.add(topology_key=key)
    term.label_selector.match_labels["app"] = app
    return pod


def pod_scheduled(p: pb.Pod) -> pb.PodCondition | None:
    return {c.type: c for c in p.status.conditions}.get("PodScheduled")


async def test_pod_affinity_and_anti_affinity_in_the_scheduler_process(
    apiserver: ApiServer, pki: PKI, tmp_path: Path
) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    await _create_all(cs, [node(i) for i in range(4)], cs.nodes)
    sched = await start_scheduler(apiserver, pki, tmp_path)
    try:
        await eventually(lambda: sched.http_get("/readyz"), lambda r: r[0] == 200, 30, "/readyz")
        webs = [with_term(make_pod(f"web-{i}", app="web"), True, "web", HOSTNAME) for i in range(5)]
        needs_db = with_term(make_pod("needs-db", app="client"), False, "db", ZONE)
        pvc = make_pod("with-pvc")
        pvc.spec.volumes.add(name="data").persistent_volume_claim.claim_name = "data"
        await _create_all(cs, [*webs, needs_db, pvc], cs.pods)
        pending = {"needs-db", "with-pvc"}

        def settled(items: list[pb.Pod]) -> bool:
            unbound = [p for p in items if not p.spec.node_name]
            return len(unbound) == 3 and all(
                (c := pod_scheduled(p)) is not None and c.reason == "Unschedulable" for p in unbound
            )

        async def list_pods() -> list[pb.Pod]:
            return (await cs.pods.list(NS)).items

        final = await eventually(list_pods, settled, 60, "4 web pods bound, 3 pods unschedulable")
        unbound = {p.metadata.name for p in final if not p.spec.node_name}
        assert pending <= unbound and len(unbound & {w.metadata.name for w in webs}) == 1
        per_node = Counter(p.spec.node_name for p in final if p.spec.node_name)
        assert sorted(per_node.values()) == [1, 1, 1, 1], per_node  # anti-affinity spreads them

        messages = {p.metadata.name: pod_scheduled(p).message for p in final if not p.spec.node_name}  # type: ignore[union-attr]
        # DefaultPreemption adds its part: affinity to pods that are not there cannot be helped by
        # preemption; anti-affinity could, but no pod has a lower priority.
        not_helpful = " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.."
        assert messages["needs-db"] == (
            "0/4 nodes are available: 4 node(s) didn't match pod affinity rules." + not_helpful
        )
        (web_left,) = unbound - pending
        assert messages[web_left] == (
            "0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules. "
            "preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.."
        )
        assert messages["with-pvc"] == (
            "0/4 nodes are available: spec.volumes[0].persistentVolumeClaim: kse does not implement "
            "VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits "
            "(no PersistentVolumeClaims or PersistentVolumes)." + not_helpful
        )

        async def failed_events() -> dict[str, str]:
            items = (await cs.events.list(NS)).items
            return {e.involved_object.name: e.message for e in items if e.reason == "FailedScheduling"}

        events = await eventually(failed_events, lambda e: unbound <= set(e), 20, "FailedScheduling events")
        assert events["needs-db"] == messages["needs-db"]
        assert events["with-pvc"] == messages["with-pvc"]

        # A db pod lands in some zone: the pod Add event requeues needs-db, which follows it there.
        await cs.pods.create(make_pod("db", app="db"))
        db = await eventually(lambda: cs.pods.get(NS, "db"), lambda p: bool(p.spec.node_name), 20, "db bound")
        placed = await eventually(
            lambda: cs.pods.get(NS, "needs-db"), lambda p: bool(p.spec.node_name), 30, "needs-db requeued"
        )
        nodes = {n.metadata.name: n for n in (await cs.nodes.list()).items}
        assert (
            nodes[placed.spec.node_name].metadata.labels[ZONE]
            == nodes[db.spec.node_name].metadata.labels[ZONE]
        )
    finally:
        rc = await sched.stop()
    log = sched.log()
    assert rc == 0, log[-4000:]
    assert "Traceback" not in log, log[-4000:]
