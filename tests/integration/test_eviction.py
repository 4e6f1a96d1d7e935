"""Eviction with PodDisruptionBudgets and graceful deletion, against a real API server and etcd.

The race test is the issue's contract: 16 concurrent evictions against a budget that allows 3 admit
exactly 3 (gRPC: the other 13 get RESOURCE_EXHAUSTED; HTTP: 429 TooManyRequests), and the budget's
`status.disruptedPods` names exactly the 3 admitted pods, because the budget's decrement and the
pod's deletion are one etcd transaction.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError, TooManyRequestsError
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer
from tests.fixtures.kube import http_client
from tests.fixtures.polling import eventually

pytestmark = pytest.mark.integration

NS = "default"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
N_PODS = 16
BUDGET = 3


@pytest.fixture
async def admin(apiserver: ApiServer) -> Clientset:
    return Clientset(await apiserver.channel("admin"), qps=0, burst=0)


def new_pod(name: str, labels: dict[str, str] | None = None, grace: int | None = None) -> pb.Pod:
    p = pb.Pod(
        metadata=pb.ObjectMeta(name=name, namespace=NS, labels=labels or {"app": "web"}),
        spec=pb.PodSpec(containers=[pb.Container(name="c", image="nginx")]),
    )
    if grace is not None:
        p.spec.termination_grace_period_seconds = grace
    return p


async def running_ready(cs: Clientset, name: str, node: str = "node-1", **kw: object) -> pb.Pod:
    """A pod created, bound to `node` and reported Running and Ready (as a kubelet would)."""
    created = await cs.pods.create(new_pod(name, **kw))  # type: ignore[arg-type]
    binding = pb.Binding(metadata=pb.ObjectMeta(name=name, namespace=NS, uid=created.metadata.uid))
    binding.target.kind, binding.target.name = "Node", node
    bound = await cs.pods.bind(binding)
    bound.status.phase = "Running"
    bound.status.conditions.add(type="Ready", status="True")
    return await cs.pods.update_status(bound)


async def budget(
    cs: Clientset, name: str, allowed: int, *, healthy: int, desired: int
) -> pb.PodDisruptionBudget:
    """A PDB over app=web whose status says `allowed` disruptions (as the controller would write)."""
    pdb = pb.PodDisruptionBudget(metadata=pb.ObjectMeta(name=name, namespace=NS))
    pdb.spec.selector.match_labels["app"] = "web"
    pdb.spec.min_available.number_value = desired
    created = await cs.pod_disruption_budgets.create(pdb)
    created.status.observed_generation = created.metadata.generation
    created.status.disruptions_allowed = allowed
    created.status.current_healthy = healthy
    created.status.desired_healthy = desired
    created.status.expected_pods = healthy
    return await cs.pod_disruption_budgets.update_status(created)


async def setup_race(cs: Clientset) -> list[str]:
    await cs.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="node-1")))
    names = [f"web-{i}" for i in range(N_PODS)]
    await asyncio.gather(*(running_ready(cs, n) for n in names))
    await budget(cs, "web", BUDGET, healthy=N_PODS, desired=N_PODS - BUDGET)
    return names


async def test_sixteen_concurrent_evictions_against_a_budget_of_three_admit_exactly_three(
    admin: Clientset,
) -> None:
    names = await setup_race(admin)

    async def evict(name: str) -> str | ApiError:
        try:
            await admin.pods.evict(NS, name)
            return name
        except ApiError as e:
            return e

    results = await asyncio.gather(*(evict(n) for n in names))
    admitted = sorted(r for r in results if isinstance(r, str))
    refused = [r for r in results if not isinstance(r, str)]
    assert len(admitted) == BUDGET, results
    assert len(refused) == N_PODS - BUDGET
    for e in refused:
        assert isinstance(e, TooManyRequestsError), e
        assert e.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert e.message == VIOLATION

    pdb = await admin.pod_disruption_budgets.get(NS, "web")
    assert sorted(pdb.status.disrupted_pods) == admitted
    assert pdb.status.disruptions_allowed == 0
    allowed = [c for c in pdb.status.conditions if c.type == "DisruptionAllowed"]
    assert [(c.status, c.reason) for c in allowed] == [("False", "InsufficientPods")]
    for name in names:  # the admitted ones are terminating (graceful, 30 s default), the rest untouched
        p = await admin.pods.get(NS, name)
        assert bool(p.metadata.deletion_timestamp) == (name in admitted), name
        if name in admitted:
            assert p.metadata.deletion_grace_period_seconds == 30
            target = [c for c in p.status.conditions if c.type == "DisruptionTarget"]
            assert [(c.status, c.reason) for c in target] == [("True", "EvictionByEvictionAPI")]


async def test_the_same_race_over_http_gets_429_with_the_disruption_budget_cause(
    apiserver: ApiServer, admin: Clientset
) -> None:
    names = await setup_race(admin)
    async with http_client(apiserver) as http:

        async def evict(name: str) -> tuple[str, int, object]:
            body = {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": NS},
            }
            code, out, _ = await http.call("POST", f"/api/v1/namespaces/{NS}/pods/{name}/eviction", body)
            return name, code, out

        results = await asyncio.gather(*(evict(n) for n in names))
    admitted = sorted(n for n, code, _ in results if code == 201)
    assert len(admitted) == BUDGET, results
    refused = [out for _, code, out in results if code != 201]
    assert len(refused) == N_PODS - BUDGET
    for out in refused:
        assert isinstance(out, dict)
        assert (out["code"], out["reason"], out["message"]) == (429, "TooManyRequests", VIOLATION)
        assert out["details"]["causes"] == [
            {
                "reason": "DisruptionBudget",
                "message": f"The disruption budget web needs {N_PODS - BUDGET} healthy pods and has "
                f"{N_PODS} currently",
            }
        ]
    pdb = await admin.pod_disruption_budgets.get(NS, "web")
    assert sorted(pdb.status.disrupted_pods) == admitted


async def test_eviction_rules_without_a_decrement(admin: Clientset, apiserver: ApiServer) -> None:
    await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="node-1")))
    await budget(admin, "web", 0, healthy=1, desired=1)
    # Pending (unscheduled) and terminal pods go at once, whatever the budget says.
    await admin.pods.create(new_pod("pending"))
    await admin.pods.evict(NS, "pending")
    with pytest.raises(NotFoundError):
        await admin.pods.get(NS, "pending")
    # A Running, Ready pod with no disruptions allowed: 429, the budget untouched.
    await running_ready(admin, "ready")
    with pytest.raises(TooManyRequestsError):
        await admin.pods.evict(NS, "ready")
    # Not Ready, budget healthy (currentHealthy 1 >= desiredHealthy 1): evicted, no decrement.
    await running_ready(admin, "sick")
    sick = await admin.pods.get(NS, "sick")
    del sick.status.conditions[:]
    sick.status.conditions.add(type="Ready", status="False")
    await admin.pods.update_status(sick)
    out = await admin.pods.evict(NS, "sick", grace_period_seconds=0)
    assert out.metadata.name == "sick"
    pdb = await admin.pod_disruption_budgets.get(NS, "web")
    assert dict(pdb.status.disrupted_pods) == {}
    # A budget whose spec changed after the controller last looked: 429, "still being processed",
    # with upstream's Retry-After of 10 s. Raw HTTP, because a client that honours it (kse's, as
    # client-go's) sends the eviction again ten times, 100 s, before it gives up.
    pdb.spec.min_available.number_value = 2
    await admin.pod_disruption_budgets.update(pdb)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "ready", "namespace": NS}}
    async with http_client(apiserver) as http:
        code, body, headers = await http.call(
            "POST", f"/api/v1/namespaces/{NS}/pods/ready/eviction", eviction
        )
    assert (code, body["message"], headers["Retry-After"]) == (429, VIOLATION, "10")
    assert (
        body["details"]["causes"][0]["message"]
        == "The disruption budget web is still being processed by the server."
    )
    await admin.pods.get(NS, "ready")  # not evicted


async def test_more_than_one_budget_is_an_internal_error(admin: Clientset) -> None:
    await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="node-1")))
    await running_ready(admin, "p")
    await budget(admin, "one", 1, healthy=1, desired=0)
    await budget(admin, "two", 1, healthy=1, desired=0)
    with pytest.raises(ApiError) as exc:
        await admin.pods.evict(NS, "p")
    assert exc.value.code == grpc.StatusCode.INTERNAL
    assert "more than one PodDisruptionBudget" in exc.value.message


async def test_graceful_delete_sets_the_deletion_timestamp_and_a_second_may_shorten_it(
    admin: Clientset,
) -> None:
    await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="node-1")))
    await running_ready(admin, "g")
    first = await admin.pods.delete(NS, "g")
    assert first.metadata.deletion_timestamp and first.metadata.deletion_grace_period_seconds == 30
    # An update cannot take the deletion timestamp away.
    stored = await admin.pods.get(NS, "g")
    stored.metadata.deletion_timestamp = ""
    stored.metadata.labels["touched"] = "yes"
    updated = await admin.pods.update(stored)
    assert updated.metadata.deletion_timestamp == first.metadata.deletion_timestamp
    # A longer grace period changes nothing; a shorter one moves the deadline earlier.
    again = await admin.pods.delete(NS, "g", grace_period_seconds=60)
    assert again.metadata.deletion_grace_period_seconds == 30
    shorter = await admin.pods.delete(NS, "g", grace_period_seconds=5)
    assert shorter.metadata.deletion_grace_period_seconds == 5
    assert shorter.metadata.deletion_timestamp < first.metadata.deletion_timestamp
    await admin.pods.delete(NS, "g", grace_period_seconds=0)
    await eventually(
        lambda: _gone(admin, "g"), bool, "pod g removed by the grace-0 delete", within=10, max_interval=0.2
    )


async def _gone(cs: Clientset, name: str) -> bool:
    try:
        await cs.pods.get(NS, name)
    except NotFoundError:
        return True
    return False


async def test_informers_see_the_terminating_pod_modified_then_deleted(admin: Clientset) -> None:
    from kse.client.informer import Informer

    await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="node-1")))
    await running_ready(admin, "w")
    seen: list[tuple[str, str]] = []
    inf = Informer(admin.pods, namespace=NS)
    inf.add_event_handler(
        None,
        lambda _old, new: seen.append(("MODIFIED", new.metadata.deletion_timestamp)),
        lambda gone: seen.append(("DELETED", gone.metadata.deletion_timestamp)),
    )
    async with inf.running():
        await inf.wait_for_sync()
        terminating = await admin.pods.delete(NS, "w")
        await admin.pods.delete(NS, "w", grace_period_seconds=0, uid=terminating.metadata.uid)
        await eventually(lambda: list(seen), lambda s: len(s) == 2, "two events", within=10)
    stamp = terminating.metadata.deletion_timestamp
    assert seen == [("MODIFIED", stamp), ("DELETED", stamp)]


async def test_an_admitted_eviction_is_audited_with_its_budget(apiserver_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kse.audit import read_audit_log

    path = tmp_path / "audit.jsonl"
    server = await apiserver_factory("--audit-log", str(path))
    cs = Clientset(await server.channel("admin"), qps=0, burst=0)
    await cs.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="node-1")))
    await running_ready(cs, "a")
    await running_ready(cs, "b")
    await budget(cs, "web", 1, healthy=2, desired=1)
    evicted = await cs.pods.evict(NS, "a")
    with pytest.raises(TooManyRequestsError):
        await cs.pods.evict(NS, "b")
    evicts = [r for r in read_audit_log(path) if r.verb == "evict"]
    assert [(r.name, r.code) for r in evicts] == [("a", "OK"), ("b", "RESOURCE_EXHAUSTED")]
    ok, refused = evicts
    assert ok.extra["pdb"] == "web" and ok.extra["deletion_timestamp"] == evicted.metadata.deletion_timestamp
    assert ok.revision == int(evicted.metadata.resource_version)
    # One transaction: the budget's status was written at the pod's revision.
    pdb = await cs.pod_disruption_budgets.get(NS, "web")
    assert pdb.metadata.resource_version == evicted.metadata.resource_version
    assert refused.message == VIOLATION and "pdb" not in refused.extra


async def test_http_eviction_delete_options_dry_run_and_errors(
    apiserver: ApiServer, admin: Clientset
) -> None:
    await admin.nodes.create(pb.Node(metadata=pb.ObjectMeta(name="node-1")))
    await running_ready(admin, "p")
    await budget(admin, "web", 1, healthy=1, desired=0)
    url = f"/api/v1/namespaces/{NS}/pods/p/eviction"

    def eviction(**opts: object) -> dict[str, object]:
        return {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p"},
            "deleteOptions": opts,
        }

    async with http_client(apiserver) as http:
        code, out, _ = await http.call("POST", url, eviction(gracePeriodSeconds="soon"))
        assert (code, out["reason"]) == (400, "BadRequest") and "gracePeriodSeconds" in out["message"]
        code, out, _ = await http.call("POST", url, eviction(preconditions={"uid": "someone-else"}))
        assert (code, out["reason"]) == (409, "Conflict") and "Precondition failed: UID" in out["message"]
        code, out, _ = await http.call("POST", url, eviction(dryRun=["All"]))
        assert code == 201, out
        untouched = await admin.pod_disruption_budgets.get(NS, "web")
        assert untouched.status.disruptions_allowed == 1 and not untouched.status.disrupted_pods
        assert not (await admin.pods.get(NS, "p")).metadata.deletion_timestamp
        code, out, _ = await http.call("POST", url, eviction(gracePeriodSeconds=7))
        assert code == 201, out
        assert (await admin.pods.get(NS, "p")).metadata.deletion_grace_period_seconds == 7

        await running_ready(admin, "q")
        await budget(admin, "other", 1, healthy=1, desired=0)
        code, out, _ = await http.call(
            "POST",
            f"/api/v1/namespaces/{NS}/pods/q/eviction",
            {"apiVersion": "policy/v1", "kind": "Eviction"},
        )
        assert (code, out["reason"]) == (500, "InternalError"), out
        assert out["message"].startswith(
            "Internal error occurred: This pod has more than one PodDisruptionBudget"
        )
