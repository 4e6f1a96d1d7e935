"""`kse controller-manager` with real processes: an API server over real etcd (mTLS, fencing), a
`kse scheduler` (no election), a `kse nodesim` fleet that starts bound pods and marks them Ready,
and one or two controller-manager replicas as `system:kube-controller-manager`.

What is checked is what the API server holds and what a pods watch delivered, revision by
revision: a Deployment rolls out, scales up and down, and a template change rolls with
`maxSurge`/`maxUnavailable` respected at every observed revision; killing the controller-manager
leader mid-rollout hands over to the standby, which finishes with exactly the desired pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from certs.layout import PKI
from kse.client.clientset import DELETED, Clientset
from kse.client.errors import NotFoundError
from kse.objects.intstr import set_int_or_string
from kse.scrape import http_get, parse_exposition
from kse.tasks import background
from proto import kse_pb2 as pb
from tests.fixtures import polling
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import kubectl, kubectl_path
from tests.fixtures.procs import REPO_ROOT, spawn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

NS = "default"
LEASE_NS, LEASE_NAME = "kube-system", "kube-controller-manager"
SHORT_LEASE = ("2s", "1.5s", "0.3s")
DEADLINE = 60.0
T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], what: str, within: float = DEADLINE
) -> T:
    return await polling.eventually(probe, done, what, within, max_interval=0.2)


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    info: dict[str, object]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.running:
            self.process.kill()
        self.process.wait()

    async def stop(self) -> int:
        if self.running:
            self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(self.process.wait, 20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return await asyncio.to_thread(self.process.wait)

    async def leading(self) -> float | None:
        if not self.running:
            return None
        try:
            code, body = await http_get(str(self.info["metrics"]), "/metrics", within=5.0)
        except OSError:
            return None
        if code != 200:
            return None
        samples = parse_exposition(body).get("leader_election_master_status", [])
        return sum(v for lbl, v in samples if lbl.get("name") == LEASE_NAME)


async def start_proc(name: str, argv: list[str], workdir: Path) -> Proc:
    d = workdir / name
    d.mkdir(parents=True, exist_ok=True)
    ready, log_path = d / "ready.json", d / f"{name}.log"
    ready.unlink(missing_ok=True)
    proc = spawn([*argv, "--ready-file", str(ready)], log_path)
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            info = json.loads(ready.read_text())
            break
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}:\n{log_path.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{name} wrote no ready file:\n{log_path.read_text()}")
        await asyncio.sleep(0.02)
    return Proc(name, proc, log_path, info)


@dataclass
class Cluster:
    apiserver: ApiServer
    pki: PKI
    workdir: Path
    admin: Clientset
    procs: dict[str, Proc] = field(default_factory=dict)

    def conn(self, stem: str) -> list[str]:
        ident = self.pki[stem]
        return [
            "--server", self.apiserver.address,
            "--ca", str(ident.ca_bundle), "--cert", str(ident.cert), "--key", str(ident.key),
        ]  # fmt: skip

    async def start_controller_manager(self, name: str, *extra: str) -> Proc:
        argv = [
            sys.executable, "-m", "kse", "controller-manager", *self.conn("controller-manager"),
            "--identity", name, "--kube-api-qps", "500", "--kube-api-burst", "500",
            "--leader-elect-lease-duration", SHORT_LEASE[0],
            "--leader-elect-renew-deadline", SHORT_LEASE[1],
            "--leader-elect-retry-period", SHORT_LEASE[2],
            "--metrics-bind-address", "127.0.0.1:0", *extra,
        ]  # fmt: skip
        proc = await start_proc(name, argv, self.workdir)
        self.procs[name] = proc
        return proc

    async def holder(self) -> str:
        try:
            lease = await self.admin.leases.get(LEASE_NS, LEASE_NAME)
        except NotFoundError:
            return ""
        return lease.spec.holder_identity

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()[-4000:]}" for p in self.procs.values())


@pytest.fixture
async def cluster(apiserver: ApiServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(apiserver, apiserver.pki, tmp_path, Clientset(await apiserver.channel("admin"), qps=0))
    try:
        c.procs["scheduler"] = await start_proc(
            "scheduler",
            [sys.executable, "-m", "kse", "scheduler", *c.conn("scheduler-1"), "--leader-elect=false",
             "--kube-api-qps", "500", "--kube-api-burst", "500", "--metrics-bind-address", "127.0.0.1:0"],
            tmp_path,
        )  # fmt: skip
        c.procs["nodesim"] = await start_proc(
            "nodesim",
            [sys.executable, "-m", "kse", "nodesim", "--server", apiserver.address,
             "--pki-dir", str(apiserver.pki.dir), "--nodes", "3", "--heartbeat-interval", "1s"],
            tmp_path,
        )  # fmt: skip
        yield c
    finally:
        for p in c.procs.values():
            p.kill()


# ---------------------------------------------------------------- objects and observation


def deployment(
    name: str, replicas: int, *, image: str = "nginx:1.25", surge: int | str = 1, unavailable: int | str = 0
) -> pb.Deployment:
    d = pb.Deployment(api_version="apps/v1", kind="Deployment")
    d.metadata.name, d.metadata.namespace = name, NS
    d.spec.replicas = replicas
    d.spec.selector.match_labels["app"] = name
    d.spec.template.metadata.labels["app"] = name
    c = d.spec.template.spec.containers.add()
    c.name, c.image = "web", image
    c.resources.requests["cpu"] = "10m"
    d.spec.strategy.type = "RollingUpdate"
    set_int_or_string(d.spec.strategy.rolling_update.max_surge, surge)
    set_int_or_string(d.spec.strategy.rolling_update.max_unavailable, unavailable)
    return d


def active(pod: pb.Pod) -> bool:
    return not pod.metadata.deletion_timestamp and pod.status.phase not in ("Succeeded", "Failed")


def ready(pod: pb.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


@dataclass
class PodObserver:
    """A pods watch of one app, judged after every delivered batch (one revision or more)."""

    app: str
    pods: dict[str, pb.Pod] = field(default_factory=dict)
    max_active: int = 0
    min_ready_seen: dict[str, int] = field(default_factory=dict)  # after the first full availability
    batches: int = 0

    def apply(self, events: list[object]) -> None:
        for ev in events:
            obj = ev.object  # type: ignore[attr-defined]
            if obj is None or obj.metadata.labels.get("app") != self.app:
                continue
            if ev.type == DELETED:  # type: ignore[attr-defined]
                self.pods.pop(obj.metadata.name, None)
            else:
                self.pods[obj.metadata.name] = obj
        self.batches += 1
        self.max_active = max(self.max_active, self.active_count())

    def active_count(self) -> int:
        return sum(1 for p in self.pods.values() if active(p))

    def ready_count(self) -> int:
        return sum(1 for p in self.pods.values() if active(p) and ready(p))


@contextlib.asynccontextmanager
async def observing(admin: Clientset, app: str) -> AsyncIterator[PodObserver]:
    """Watch the app's pods (from a list, then every event) for the duration of the block."""
    obs = PodObserver(app)
    listed = await admin.pods.list(NS, label_selector=f"app={app}")
    for pod in listed.items:
        obs.pods[pod.metadata.name] = pod
    obs.max_active = obs.active_count()

    async def follow() -> None:
        async with admin.pods.watch(NS, resource_version=listed.resource_version) as stream:
            while True:
                batch = await stream.next_batch()
                if batch is None:
                    raise AssertionError("the pods watch ended")
                obs.apply(batch)

    async with background(follow(), name=f"observe-{app}"):
        yield obs


async def deployment_state(admin: Clientset, name: str) -> tuple[pb.Deployment, list[pb.ReplicaSet]]:
    d = await admin.deployments.get(NS, name)
    rss = [
        rs
        for rs in (await admin.replica_sets.list(NS)).items
        if any(r.uid == d.metadata.uid for r in rs.metadata.owner_references)
    ]
    return d, rss


def rolled_out(state: tuple[pb.Deployment, list[pb.ReplicaSet]]) -> bool:
    """kubectl rollout status's test: observed, all updated, no old replicas, all available."""
    d, _ = state
    st = d.status
    return (
        st.observed_generation >= d.metadata.generation
        and st.updated_replicas == d.spec.replicas
        and st.replicas == d.spec.replicas
        and st.available_replicas == d.spec.replicas
    )


def condition(d: pb.Deployment, type_: str) -> pb.DeploymentCondition | None:
    return next((c for c in d.status.conditions if c.type == type_), None)


async def wait_rolled_out(
    c: Cluster, name: str, within: float = DEADLINE
) -> tuple[pb.Deployment, list[pb.ReplicaSet]]:
    try:
        return await eventually(
            lambda: deployment_state(c.admin, name), rolled_out, f"{name} rolled out", within
        )
    except AssertionError as e:
        raise AssertionError(f"{e}\n{c.logs()}") from None


async def app_pods(admin: Clientset, app: str) -> list[pb.Pod]:
    return [p for p in (await admin.pods.list(NS, label_selector=f"app={app}")).items if active(p)]


async def set_replicas(admin: Clientset, name: str, replicas: int) -> None:
    d = await admin.deployments.get(NS, name)
    d.spec.replicas = replicas
    await admin.deployments.update(d)


async def set_image(admin: Clientset, name: str, image: str) -> None:
    d = await admin.deployments.get(NS, name)
    d.spec.template.spec.containers[0].image = image
    await admin.deployments.update(d)


# ---------------------------------------------------------------- tests


async def test_a_deployment_rolls_out_scales_and_rolls_a_new_template(cluster: Cluster) -> None:
    await cluster.start_controller_manager("cm-1")
    admin = cluster.admin
    await admin.deployments.create(deployment("web", 3, surge=1, unavailable=0))
    d, rss = await wait_rolled_out(cluster, "web")
    assert len(rss) == 1 and rss[0].spec.replicas == 3
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert rss[0].metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert rss[0].metadata.annotations["deployment.kubernetes.io/desired-replicas"] == "3"
    assert rss[0].metadata.annotations["deployment.kubernetes.io/max-replicas"] == "4"
    pod_hash = rss[0].metadata.labels["pod-template-hash"]
    assert rss[0].metadata.name == f"web-{pod_hash}"
    available, progressing = condition(d, "Available"), condition(d, "Progressing")
    assert available is not None and (available.status, available.reason) == (
        "True",
        "MinimumReplicasAvailable",
    )
    assert progressing is not None and (progressing.status, progressing.reason) == (
        "True",
        "NewReplicaSetAvailable",
    )
    pods = await app_pods(admin, "web")
    assert len(pods) == 3
    for pod in pods:
        (ref,) = pod.metadata.owner_references
        assert (ref.kind, ref.name, ref.uid, ref.controller) == (
            "ReplicaSet",
            rss[0].metadata.name,
            rss[0].metadata.uid,
            True,
        )
        assert pod.metadata.labels["pod-template-hash"] == pod_hash
    assert rss[0].status.ready_replicas == rss[0].status.available_replicas == 3

    # Events as upstream's controllers record them, on the Deployment and on its ReplicaSet.
    async def events() -> list[tuple[str, str, str]]:
        return [
            (e.involved_object.kind, e.involved_object.name, e.reason)
            for e in (await admin.events.list(NS)).items
        ]

    rs_name = rss[0].metadata.name
    await eventually(
        events,
        lambda evs: (
            ("Deployment", "web", "ScalingReplicaSet") in evs
            and ("ReplicaSet", rs_name, "SuccessfulCreate") in evs
        ),
        "ScalingReplicaSet and SuccessfulCreate events",
    )

    # Scale up, then down: the same ReplicaSet, the exact number of pods.
    for replicas in (5, 2):
        await set_replicas(admin, "web", replicas)
        d, rss = await wait_rolled_out(cluster, "web")
        assert len(rss) == 1 and rss[0].spec.replicas == replicas
        await eventually(
            lambda: app_pods(admin, "web"), lambda ps, n=replicas: len(ps) == n, f"{replicas} pods"
        )

    # A new template rolls with maxSurge 1, maxUnavailable 0: never more than 3 pods, never fewer
    # than 2 ready once the rollout began.
    await set_replicas(admin, "web", 2)
    async with observing(admin, "web") as obs:
        await set_image(admin, "web", "nginx:1.26")
        d, rss = await wait_rolled_out(cluster, "web")
        await eventually(
            lambda: app_pods(admin, "web"), lambda ps: len(ps) == 2, "2 pods of the new template"
        )
    assert obs.max_active <= 3, f"{obs.max_active} active pods at once (replicas 2 + maxSurge 1)"
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    new = [rs for rs in rss if rs.spec.replicas > 0]
    assert len(rss) == 2 and len(new) == 1 and new[0].spec.replicas == 2
    assert new[0].metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    old = next(rs for rs in rss if rs is not new[0])
    assert old.spec.replicas == 0 and old.status.replicas == 0
    assert {p.spec.containers[0].image for p in await app_pods(admin, "web")} == {"nginx:1.26"}


async def test_a_replica_set_replaces_a_deleted_pod_and_adopts_an_orphan(cluster: Cluster) -> None:
    await cluster.start_controller_manager("cm-1")
    admin = cluster.admin
    rs = pb.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
    rs.metadata.name, rs.metadata.namespace = "frontend", NS
    rs.spec.replicas = 2
    rs.spec.selector.match_labels["tier"] = "frontend"
    rs.spec.template.metadata.labels["tier"] = "frontend"
    ctr = rs.spec.template.spec.containers.add()
    ctr.name, ctr.image = "php", "php:8"
    created = await admin.replica_sets.create(rs)

    async def owned() -> list[pb.Pod]:
        pods = (await admin.pods.list(NS, label_selector="tier=frontend")).items
        return [
            p
            for p in pods
            if active(p) and any(r.uid == created.metadata.uid for r in p.metadata.owner_references)
        ]

    pods = await eventually(owned, lambda ps: len(ps) == 2, "2 pods of the ReplicaSet")
    await admin.pods.delete(NS, pods[0].metadata.name)
    after = await eventually(
        owned,
        lambda ps: len(ps) == 2 and pods[0].metadata.name not in {p.metadata.name for p in ps},
        "a replacement",
    )
    # An orphan with matching labels is adopted, and so one pod too many is deleted.
    orphan = pb.Pod(api_version="v1", kind="Pod")
    orphan.metadata.name, orphan.metadata.namespace = "stray", NS
    orphan.metadata.labels["tier"] = "frontend"
    oc = orphan.spec.containers.add()
    oc.name, oc.image = "php", "php:8"
    await admin.pods.create(orphan)
    final = await eventually(
        lambda: app_pods_by(admin, "tier=frontend"), lambda ps: len(ps) == 2, "back to 2 pods after adoption"
    )
    assert all(any(r.uid == created.metadata.uid for r in p.metadata.owner_references) for p in final)
    assert after
    status = await eventually(
        lambda: admin.replica_sets.get(NS, "frontend"),
        lambda r: (
            r.status.replicas == 2
            and r.status.ready_replicas == 2
            and r.status.available_replicas == 2
            and r.status.observed_generation == r.metadata.generation
        ),
        "the ReplicaSet's status",
    )
    assert status.status.fully_labeled_replicas == 2


async def app_pods_by(admin: Clientset, selector: str) -> list[pb.Pod]:
    return [p for p in (await admin.pods.list(NS, label_selector=selector)).items if active(p)]


async def test_killing_the_leader_mid_rollout_neither_over_nor_under_shoots(cluster: Cluster) -> None:
    admin = cluster.admin
    first = await cluster.start_controller_manager("cm-1")
    await eventually(cluster.holder, lambda h: h == "cm-1", "cm-1 leads")
    second = await cluster.start_controller_manager("cm-2")
    replicas, surge, unavailable = 6, 2, 1
    await admin.deployments.create(deployment("api", replicas, surge=surge, unavailable=unavailable))
    await wait_rolled_out(cluster, "api")
    async with observing(admin, "api") as obs:
        await set_image(admin, "api", "nginx:1.26")

        def mid_rollout(state: tuple[pb.Deployment, list[pb.ReplicaSet]]) -> bool:
            d, rss = state
            return d.metadata.generation > 1 and any(
                rs.metadata.annotations.get("deployment.kubernetes.io/revision") == "2"
                and rs.spec.replicas > 0
                for rs in rss
            )

        await eventually(lambda: deployment_state(admin, "api"), mid_rollout, "the rollout under way")
        first.kill()  # SIGKILL: nothing released; the standby takes over once the lease expires
        await eventually(cluster.holder, lambda h: h == "cm-2", "cm-2 takes over")
        _, rss = await wait_rolled_out(cluster, "api")
        await eventually(lambda: app_pods(admin, "api"), lambda ps: len(ps) == replicas, f"{replicas} pods")
    assert obs.max_active <= replicas + surge, (
        f"{obs.max_active} active pods at once (replicas {replicas} + maxSurge {surge})\n{cluster.logs()}"
    )
    live = [rs for rs in rss if rs.spec.replicas > 0]
    assert len(live) == 1 and live[0].spec.replicas == replicas and live[0].status.replicas == replicas
    assert all(rs.status.replicas == 0 for rs in rss if rs is not live[0])
    pods = await app_pods(admin, "api")
    assert {p.metadata.labels["pod-template-hash"] for p in pods} == {
        live[0].metadata.labels["pod-template-hash"]
    }
    assert await second.leading() == 1.0


# ---------------------------------------------------------------- kubectl and the real manifests

EXAMPLES = REPO_ROOT.parent / "shared" / "k8s-examples"


def test_manifests_exist() -> None:
    assert (EXAMPLES / "controllers" / "nginx-deployment.yaml").is_file(), EXAMPLES


async def kubectl_async(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(kubectl, kubeconfig, *args, check=check, timeout=120)


async def test_kubectl_scale_and_rollout_status_on_the_real_manifests(cluster: Cluster) -> None:
    kubectl_path()  # skips without kubectl
    await cluster.start_controller_manager("cm-1")
    kc = cluster.apiserver.kubeconfig(cluster.workdir / "kubeconfig", "admin")
    nginx = EXAMPLES / "controllers" / "nginx-deployment.yaml"
    await kubectl_async(kc, "apply", "-f", str(nginx))
    out = await kubectl_async(kc, "rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
    assert 'deployment "nginx-deployment" successfully rolled out' in out.stdout, out
    d = await cluster.admin.deployments.get(NS, "nginx-deployment")
    assert d.status.available_replicas == 3

    scaled = await kubectl_async(kc, "scale", "deployment/nginx-deployment", "--replicas=5")
    assert "deployment.apps/nginx-deployment scaled" in scaled.stdout, scaled
    got = await kubectl_async(kc, "get", "deployment/nginx-deployment", "--subresource=scale", "-o", "json")
    scale = json.loads(got.stdout)
    assert (scale["kind"], scale["apiVersion"], scale["spec"]["replicas"]) == ("Scale", "autoscaling/v1", 5)
    assert scale["status"]["selector"] == "app.kubernetes.io/name=nginx"
    await kubectl_async(kc, "rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
    await eventually(
        lambda: app_pods_by(cluster.admin, "app.kubernetes.io/name=nginx"), lambda ps: len(ps) == 5, "5"
    )

    # A new image through kubectl: a second revision, rolled out.
    await kubectl_async(kc, "set", "image", "deployment/nginx-deployment", "nginx=nginx:1.16.1")
    await kubectl_async(kc, "rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
    d = await cluster.admin.deployments.get(NS, "nginx-deployment")
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    # kubectl rollout history / undo read the ReplicaSets' revision annotations.
    history = await kubectl_async(kc, "rollout", "history", "deployment/nginx-deployment")
    assert "REVISION" in history.stdout and "2" in history.stdout, history
    await kubectl_async(kc, "rollout", "undo", "deployment/nginx-deployment")
    await kubectl_async(kc, "rollout", "status", "deployment/nginx-deployment", "--timeout=90s")
    d = await cluster.admin.deployments.get(NS, "nginx-deployment")
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "3"
    assert d.spec.template.spec.containers[0].image == "nginx:1.14.2"
    bad = await kubectl_async(kc, "scale", "deployment/nginx-deployment", "--replicas=-1", check=False)
    assert bad.returncode != 0

    # The other real manifests, unchanged (their PriorityClasses first: the example file defines
    # "placeholder"; "low-priority" has no manifest among the examples).
    await kubectl_async(kc, "apply", "-f", str(EXAMPLES / "priorityclass" / "low-priority-class.yaml"))
    pc = pb.PriorityClass(api_version="scheduling.k8s.io/v1", kind="PriorityClass", value=-10)
    pc.metadata.name = "low-priority"
    await cluster.admin.priority_classes.create(pc)
    names = []
    for path in sorted((EXAMPLES / "application").glob("*.yaml")) + sorted(
        (EXAMPLES / "deployments").glob("*.yaml")
    ):
        await kubectl_async(kc, "apply", "-f", str(path))
        names += [
            line.split()[0]
            for line in (await kubectl_async(kc, "get", "-f", str(path), "-o", "name")).stdout.split()
            if line.startswith("deployment")
        ]
    assert len(names) == 4, names
    for name in names:
        await kubectl_async(kc, "rollout", "status", name, "--timeout=90s")


async def test_recreate_removes_every_old_pod_before_the_first_new_one(cluster: Cluster) -> None:
    await cluster.start_controller_manager("cm-1")
    admin = cluster.admin
    d = deployment("batch", 3)
    d.spec.strategy.Clear()
    d.spec.strategy.type = "Recreate"
    await admin.deployments.create(d)
    _, rss = await wait_rolled_out(cluster, "batch")
    old_hash = rss[0].metadata.labels["pod-template-hash"]
    mixed: list[int] = []

    async with observing(admin, "batch") as obs:
        original = obs.apply

        def apply(events: list[object]) -> None:
            original(events)
            hashes = {p.metadata.labels["pod-template-hash"] for p in obs.pods.values() if active(p)}
            if len(hashes) > 1:
                mixed.append(obs.batches)

        obs.apply = apply  # type: ignore[method-assign]
        await set_image(admin, "batch", "nginx:1.26")
        _, rss = await wait_rolled_out(cluster, "batch")
    assert not mixed, f"old and new pods active together at batches {mixed[:5]}"
    new = [rs for rs in rss if rs.spec.replicas == 3]
    assert len(new) == 1 and new[0].metadata.labels["pod-template-hash"] != old_hash


async def test_a_rollout_that_cannot_progress_exceeds_its_deadline(cluster: Cluster) -> None:
    await cluster.start_controller_manager("cm-1")
    admin = cluster.admin
    d = deployment("stuck", 2)
    d.spec.progress_deadline_seconds = 3
    d.spec.template.spec.node_selector["no-such-label"] = "anywhere"  # never scheduled
    await admin.deployments.create(d)

    def timed_out(dep: pb.Deployment) -> bool:
        c = condition(dep, "Progressing")
        return c is not None and (c.status, c.reason) == ("False", "ProgressDeadlineExceeded")

    got = await eventually(lambda: admin.deployments.get(NS, "stuck"), timed_out, "ProgressDeadlineExceeded")
    available = condition(got, "Available")
    assert available is not None and (available.status, available.reason) == (
        "False",
        "MinimumReplicasUnavailable",
    )
    assert got.status.replicas == 2 and got.status.available_replicas == 0


async def test_a_paused_leader_resumed_after_the_failover_lands_no_write(cluster: Cluster) -> None:
    """SIGSTOP the leader mid-rollout past its lease: the standby takes over and finishes; when the
    old leader wakes, whatever it still had to write is refused as fenced, and it stops leading."""
    admin = cluster.admin
    first = await cluster.start_controller_manager("cm-1", "--on-lost-lease", "standby")
    await eventually(cluster.holder, lambda h: h == "cm-1", "cm-1 leads")
    await cluster.start_controller_manager("cm-2")
    replicas, surge = 4, 1
    await admin.deployments.create(deployment("paused", replicas, surge=surge, unavailable=0))
    await wait_rolled_out(cluster, "paused")
    async with observing(admin, "paused") as obs:
        await set_image(admin, "paused", "nginx:1.26")
        first.process.send_signal(signal.SIGSTOP)
        try:
            await eventually(cluster.holder, lambda h: h == "cm-2", "cm-2 takes over")
            _, rss = await wait_rolled_out(cluster, "paused")
        finally:
            first.process.send_signal(signal.SIGCONT)
        await eventually(first.leading, lambda v: v == 0.0, "cm-1 no longer says it leads")
        await eventually(
            lambda: app_pods(admin, "paused"), lambda ps: len(ps) == replicas, f"{replicas} pods"
        )
    assert obs.max_active <= replicas + surge, f"{obs.max_active} active pods\n{cluster.logs()}"
    live = [rs for rs in rss if rs.spec.replicas > 0]
    assert len(live) == 1 and live[0].spec.replicas == replicas


async def test_sigterm_releases_the_lease_and_exits_0_and_metrics_and_health_answer(cluster: Cluster) -> None:
    first = await cluster.start_controller_manager("cm-1")
    await eventually(cluster.holder, lambda h: h == "cm-1", "cm-1 leads")
    second = await cluster.start_controller_manager("cm-2")
    for proc, leading in ((first, 1.0), (second, 0.0)):
        await eventually(
            proc.leading, lambda v, want=leading: v == want, f"{proc.name} master status {leading}"
        )
        code, body = await http_get(str(proc.info["metrics"]), "/healthz?verbose", within=5.0)
        assert code == 200 and "[+]leaderElection ok" in body, body
        code, _ = await http_get(str(proc.info["metrics"]), "/readyz", within=5.0)
        assert code == 200
    assert await first.stop() == 0
    lease = await cluster.admin.leases.get(LEASE_NS, LEASE_NAME)
    # Released (holder "" and a 1 s lease) or already taken by the standby, which needs no expiry.
    assert lease.spec.holder_identity in ("", "cm-2")
    await eventually(cluster.holder, lambda h: h == "cm-2", "cm-2 takes the released lease", within=10)
