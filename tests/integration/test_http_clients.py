"""The official Python client against kse's HTTP API, both protocols seeing each other's writes, and
the security matrix over HTTPS."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from certs.layout import PKI
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer, make_pod, watch
from tests.fixtures.kube import client_context, http_client, kube_client, read_event
from tests.fixtures.pki import expired_client, issue_client

pytestmark = pytest.mark.integration
kubernetes = pytest.importorskip("kubernetes")


def v1_pod(name: str) -> Any:
    c = kubernetes.client
    return c.V1Pod(
        metadata=c.V1ObjectMeta(name=name, labels={"app": "py"}),
        spec=c.V1PodSpec(containers=[c.V1Container(name="c", image="nginx")]),
    )


def test_official_client_crud_watch_conflict_patch(apiserver: ApiServer, tmp_path: Path):
    api_client = kube_client(apiserver, tmp_path)
    core = kubernetes.client.CoreV1Api(api_client)
    try:
        start = core.list_namespaced_pod("default").metadata.resource_version
        created = core.create_namespaced_pod("default", v1_pod("py-1"))
        assert created.metadata.uid and created.status.phase == "Pending"
        core.create_namespaced_pod("default", v1_pod("py-2"))
        pods = core.list_namespaced_pod("default", label_selector="app=py")
        assert [p.metadata.name for p in pods.items] == ["py-1", "py-2"]

        w = kubernetes.watch.Watch()
        seen = []
        for event in w.stream(core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=5):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                w.stop()
        assert seen == [("ADDED", "py-1"), ("ADDED", "py-2")]

        # replace with a stale resourceVersion: 409 Conflict.
        created.metadata.labels = {"app": "py", "v": "2"}
        core.replace_namespaced_pod("py-1", "default", created)
        with pytest.raises(kubernetes.client.ApiException) as err:
            core.replace_namespaced_pod("py-1", "default", created)
        assert err.value.status == 409 and json.loads(err.value.body)["reason"] == "Conflict"

        patched = core.patch_namespaced_pod("py-1", "default", {"metadata": {"labels": {"p": "1"}}})
        assert patched.metadata.labels == {"app": "py", "v": "2", "p": "1"}
        with pytest.raises(kubernetes.client.ApiException) as err:
            core.read_namespaced_pod("missing", "default")
        assert err.value.status == 404
        core.delete_namespaced_pod("py-2", "default")
        nodes = core.list_node()
        assert nodes.items == []
        leases = kubernetes.client.CoordinationV1Api(api_client).list_namespaced_lease("kube-system")
        assert leases.items == []
    finally:
        api_client.close()


async def test_grpc_write_seen_by_http_watch_and_back(apiserver: ApiServer):
    stub = apiserver.stub("admin")
    async with http_client(apiserver) as http:
        _, lst, _ = await http.call("GET", "/api/v1/namespaces/default/pods")
        start = lst["metadata"]["resourceVersion"]
        resp = await http.stream(f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}")
        grpc_watch = watch(stub, "pods", resource_version=start)
        try:
            created = await stub.Create(pb.WriteRequest(object=make_pod("via-grpc")))
            rv_grpc = created.pod.metadata.resource_version
            event = await read_event(resp)
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "via-grpc")
            assert event["object"]["metadata"]["resourceVersion"] == rv_grpc

            code, via_http, _ = await http.call(
                "POST", "/api/v1/namespaces/default/pods",
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "via-http"},
                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
            )  # fmt: skip
            assert code == 201
            events = await grpc_watch.events_until(lambda evs: len(evs) >= 2)
            names = [(e.type, e.object.pod.metadata.name, e.resource_version) for e in events]
            assert names[0][:2] == ("ADDED", "via-grpc") and names[0][2] == rv_grpc
            assert names[1] == ("ADDED", "via-http", via_http["metadata"]["resourceVersion"])
        finally:
            resp.close()
            grpc_watch.cancel()


async def _handshake(server: ApiServer, ctx: ssl.SSLContext) -> int | str:
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(
                server.http_url + "/api/v1/namespaces/default/pods", ssl=ctx, server_hostname="localhost"
            ) as resp:
                return resp.status
    except (aiohttp.ClientError, ssl.SSLError, ConnectionError) as e:
        return type(e).__name__


async def test_security_matrix_over_https(apiserver: ApiServer, foreign_pki: PKI, tmp_path: Path):
    ca = apiserver.pki.ca_bundle
    assert await _handshake(apiserver, client_context(None, ca)) != 200  # no client cert
    foreign = client_context(foreign_pki["admin"], ca)  # a cert from another CA
    assert await _handshake(apiserver, foreign) != 200
    expired = expired_client(apiserver.pki, tmp_path / "expired")
    assert await _handshake(apiserver, client_context(expired, ca)) != 200
    assert await _handshake(apiserver, client_context(apiserver.pki["admin"], ca)) == 200

    # Forbidden verbs per identity: 403 with upstream's message.
    async with http_client(apiserver, "scheduler-1") as http:
        code, body, _ = await http.call("DELETE", "/api/v1/nodes/node-a")
        assert (code, body["reason"]) == (403, "Forbidden")
        assert body["message"] == (
            'nodes "node-a" is forbidden: User "system:kube-scheduler" cannot delete resource "nodes" '
            'in API group "" at the cluster scope'
        )
        assert body["details"] == {"name": "node-a", "kind": "nodes"}
    workload = issue_client(apiserver.pki, tmp_path / "wl", "kse:workload", ("kse:workloads",))
    async with http_client(apiserver, workload) as http:
        code, body, _ = await http.call("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x")
        assert code == 403
        assert body["message"] == (
            'leases.coordination.k8s.io "x" is forbidden: User "kse:workload" cannot get resource "leases" '
            'in API group "coordination.k8s.io" in the namespace "kube-system"'
        )
        code, body, _ = await http.call("GET", "/api/v1/namespaces/default/pods")
        assert code == 200


def test_client_leaderelection_two_electors_never_lead_at_once(apiserver: ApiServer, tmp_path: Path):
    """kubernetes.leaderelection with a LeaseLock on kse's Lease: each elector leads for a while and
    then stops renewing; the other takes over only after the lease expired, never alongside it."""
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    kubernetes.config.load_kube_config(config_file=str(apiserver.kubeconfig(tmp_path / "kc", "admin")))
    terms: dict[str, list[float]] = {}
    lock = threading.Lock()
    hold_s = 2.5

    def elector(identity: str) -> threading.Thread:
        def started() -> None:
            with lock:
                terms[identity] = [time.monotonic()]
            time.sleep(hold_s)
            raise RuntimeError("done leading")  # stops renewing; run() returns after `stopped`

        def stopped() -> None:
            with lock:
                terms[identity].append(time.monotonic())

        config = electionconfig.Config(
            LeaseLock("py-election", "default", identity),
            lease_duration=2,
            renew_deadline=1.5,
            retry_period=1,
            onstarted_leading=started,
            onstopped_leading=stopped,
        )
        t = threading.Thread(target=leaderelection.LeaderElection(config).run, daemon=True)
        t.start()
        return t

    threads = [elector("one"), elector("two")]
    for t in threads:
        t.join(timeout=40)
    assert not any(t.is_alive() for t in threads), terms
    (_, a_stop), (b_start, _) = sorted(terms.values())
    assert a_stop <= b_start, f"two leaders at once: {terms}"
    lease = kubernetes.client.CoordinationV1Api().read_namespaced_lease("py-election", "default")
    assert lease.spec.holder_identity in ("one", "two") and lease.spec.renew_time is not None


async def test_client_elector_does_not_take_a_lease_a_kse_scheduler_renews(
    apiserver: ApiServer, pki: PKI, tmp_path: Path
):
    """kse's election and client-go-style election agree on the Lease's fields and time format: an
    elector of the official client waits while a kse scheduler holds and renews
    kube-system/kube-scheduler, and takes it only after the scheduler has gone."""
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    from tests.integration.test_scheduler_process import start_scheduler

    sched = await start_scheduler(
        apiserver, pki, tmp_path / "sched",
        "--leader-elect=true", "--leader-elect-lease-duration", "3s",
        "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "0.5s",
    )  # fmt: skip
    kubernetes.config.load_kube_config(config_file=str(apiserver.kubeconfig(tmp_path / "kc", "admin")))
    coord = kubernetes.client.CoordinationV1Api()

    def holder() -> str | None:
        try:
            return coord.read_namespaced_lease("kube-scheduler", "kube-system").spec.holder_identity
        except kubernetes.client.ApiException:
            return None

    deadline = time.monotonic() + 30
    while holder() != "scheduler-1":
        assert time.monotonic() < deadline, "the kse scheduler never took the lease"
        await asyncio.sleep(0.1)
    led = threading.Event()

    def started() -> None:
        led.set()
        raise RuntimeError("done")  # stop at once once leading

    config = electionconfig.Config(
        LeaseLock("kube-scheduler", "kube-system", "python-elector"),
        lease_duration=3, renew_deadline=2, retry_period=1,
        onstarted_leading=started, onstopped_leading=lambda: None,
    )  # fmt: skip
    thread = threading.Thread(target=leaderelection.LeaderElection(config).run, daemon=True)
    thread.start()
    try:
        # Three lease durations while the scheduler renews: the elector must stay a follower
        # (an observation window, checked throughout, not a wait for something to happen).
        window_end = time.monotonic() + 9
        while time.monotonic() < window_end:
            assert not led.is_set(), "the client elector took a lease the kse scheduler was renewing"
            await asyncio.to_thread(led.wait, 0.2)
        assert holder() == "scheduler-1"
    finally:
        await sched.stop()
    deadline = time.monotonic() + 30
    while not led.is_set():
        assert time.monotonic() < deadline, "the client elector never took the released lease"
        await asyncio.sleep(0.1)
    await asyncio.to_thread(thread.join, 10)
