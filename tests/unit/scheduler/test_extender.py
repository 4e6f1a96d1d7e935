"""Scheduler extenders (scheduler/extender, the extender parts of scheduler/algorithm.py) against
upstream's extender.go / schedule_one.go behaviour: the JSON on the wire, every failure's wording,
IsInterested with managedResources, nodeCacheCapable sending names, ignorable extenders skipped
and moved to the tail, Filter statuses (failedAndUnresolvableNodes wins), and Prioritize scores
scaled by weight x MaxNodeScore / MaxExtenderPriority.

Extenders here are real HTTP servers on free ports (aiohttp, in this process): scripted ones for
the edge cases, and `kse extender-sample`'s application. No mocks of the client."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from proto import kse_pb2 as pb
from scheduler.algorithm import (
    EXTENDER_NAME,
    AlgorithmState,
    ExtenderCallError,
    FeasibleNodes,
    schedule_pod_with_extenders,
)
from scheduler.apis.config.types import Extender, ExtenderManagedResource, ExtenderTLSConfig
from scheduler.extender.http import (
    DEFAULT_EXTENDER_TIMEOUT,
    ExtenderError,
    HTTPExtender,
    apply_ignored_resources,
    build_extenders,
)
from scheduler.extender.sample import SampleExtender
from scheduler.extender.types import (
    WireError,
    binding_args,
    encode_extender_args,
    extender_args,
    parse_filter_result,
    parse_host_priority_list,
    parse_preemption_result,
    preemption_args,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.types import Code, Diagnosis, FitError, PodInfo
from scheduler.profile import load_scheduler_config
from tests.unit.scheduler.test_algorithm import default_framework, node, pod, snapshot_of

Handler = Callable[[Any], Awaitable[Any] | Any]


# ------------------------------------------------------------------------------------ servers


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port; yields http://127.0.0.1:PORT."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def scripted(**verbs: Handler) -> tuple[web.Application, list[tuple[str, Any]]]:
    """An extender whose verb handlers take the decoded request and return the JSON answer (or
    a web.Response); every request is recorded as (verb, body)."""
    seen: list[tuple[str, Any]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        verb = request.match_info["verb"]
        body = json.loads(await request.read())
        seen.append((verb, body))
        answer = verbs[verb](body)
        if asyncio.iscoroutine(answer):
            answer = await answer
        if isinstance(answer, web.StreamResponse):
            return answer
        return web.json_response(answer)

    app = web.Application()
    app.router.add_post("/prefix/{verb}", handle)
    return app, seen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ext(url: str, **kw: Any) -> HTTPExtender:
    return HTTPExtender(Extender(url_prefix=url, **kw))


def nodes(*names: str, labels: dict[str, dict[str, str]] | None = None) -> list[pb.Node]:
    out = []
    for n in names:
        w = node(n)
        for k, v in (labels or {}).get(n, {}).items():
            w = w.label(k, v)
        out.append(w.obj())
    return out


def names_of(body: dict[str, Any]) -> list[str]:
    return [n["metadata"]["name"] for n in body["nodes"]["items"]]


# ------------------------------------------------------------------------------------ the JSON


def test_extender_args_send_nodes_or_nodenames() -> None:
    p = {"metadata": {"name": "p"}}
    assert extender_args(p, None, ["a", "b"]) == {"pod": p, "nodenames": ["a", "b"]}
    full = extender_args(p, [{"metadata": {"name": "a"}}], None)
    assert full["pod"] == p and "nodenames" not in full
    assert full["nodes"]["items"] == [{"metadata": {"name": "a"}}]
    assert binding_args("ns", "p", "u1", "n1") == {
        "podName": "p",
        "podNamespace": "ns",
        "podUID": "u1",
        "node": "n1",
    }


def test_encoded_args_are_the_same_json() -> None:
    """The spliced bytes the client sends decode to exactly ExtenderArgs."""
    p, n1, n2 = {"metadata": {"name": "p"}}, {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}
    enc = [json.dumps(x).encode() for x in (p, n1, n2)]
    assert json.loads(encode_extender_args(enc[0], enc[1:], None)) == extender_args(p, [n1, n2], None)
    assert json.loads(encode_extender_args(enc[0], None, ["a"])) == extender_args(p, None, ["a"])
    assert json.loads(encode_extender_args(enc[0], [], None))["nodes"]["items"] == []


def test_filter_result_keys_match_case_insensitively_as_go() -> None:
    r = parse_filter_result(
        {
            "NodeNames": ["a"],
            "FailedNodes": {"b": "no"},
            "failedAndUnresolvableNodes": {"c": "never"},
            "Error": "",
        },
        node_cache_capable=True,
    )
    assert (r.names, r.failed, r.failed_and_unresolvable, r.error) == (["a"], {"b": "no"}, {"c": "never"}, "")
    # nodenames are read only from a nodeCacheCapable extender; the others answer with nodes.
    r = parse_filter_result({"nodenames": ["a"], "nodes": {"items": [{"metadata": {"name": "b"}}]}}, False)
    assert r.names == ["b"]
    assert parse_filter_result({}, False).names is None  # neither: nothing passed (upstream)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ([], "ExtenderFilterResult: must be a JSON object"),
        ({"failedNodes": ["a"]}, "failedNodes: must be an object of node name to message"),
        ({"nodes": {"items": [{"metadata": {}}]}}, "nodes.items[0].metadata.name: Required value"),
        ({"error": 3}, "error: must be a string"),
    ],
)
def test_bad_filter_results_name_the_field(body: Any, want: str) -> None:
    with pytest.raises(WireError, match=r"^" + want.replace("[", r"\[").replace("]", r"\]")):
        parse_filter_result(body, False)


def test_host_priority_list() -> None:
    assert parse_host_priority_list([{"host": "a", "score": 3}, {"Host": "b"}]) == [("a", 3), ("b", 0)]
    assert parse_host_priority_list(None) == []
    with pytest.raises(WireError, match=r"\[0\]\.score: must be an integer"):
        parse_host_priority_list([{"host": "a", "score": "high"}])


def test_preemption_json() -> None:
    victim = pod("v").pod
    meta = preemption_args({"metadata": {}}, {"n1": ([victim], 1)}, node_cache_capable=True)
    assert meta["nodeNameToMetaVictims"] == {"n1": {"pods": [{"uid": "uid-v"}], "numPDBViolations": 1}}
    full = preemption_args({"metadata": {}}, {"n1": ([victim], 0)}, node_cache_capable=False)
    assert full["nodeNameToVictims"]["n1"]["pods"][0]["metadata"]["uid"] == "uid-v"
    got = parse_preemption_result(
        {"nodeNameToMetaVictims": {"n1": {"pods": [{"uid": "x"}], "numPDBViolations": 2}}}
    )
    assert (got["n1"].pod_uids, got["n1"].num_pdb_violations) == (["x"], 2)


# ------------------------------------------------------------------------------------ HTTPExtender


def test_is_interested_with_managed_resources() -> None:
    e = ext("http://x", managed_resources=[ExtenderManagedResource("example.com/gpu")])
    assert not e.is_interested(pod("plain", cpu="1").pod)
    assert e.is_interested(pod("gpu", **{"example.com/gpu": "1"}).pod)
    init = pod("init").pod
    init.spec.init_containers.add(name="i").resources.limits["example.com/gpu"] = "1"
    assert e.is_interested(init)
    assert ext("http://x").is_interested(pod("any").pod)  # no managed resources: every pod


def test_defaults_and_order() -> None:
    assert ext("http://x").timeout == DEFAULT_EXTENDER_TIMEOUT == 5.0
    built = build_extenders(
        [
            Extender(url_prefix="http://a", ignorable=True),
            Extender(url_prefix="http://b"),
            Extender(url_prefix="http://c"),
        ]
    )
    assert [e.name() for e in built] == ["http://b", "http://c", "http://a"]  # ignorable ones last


def test_ignored_by_scheduler_goes_to_fit_args() -> None:
    cfg = load_scheduler_config()
    cfg.extenders = [
        Extender(url_prefix="http://a", managed_resources=[ExtenderManagedResource("example.com/x", True)])
    ]
    apply_ignored_resources(cfg)
    (fit,) = [pc for pc in cfg.profiles[0].plugin_config if pc.name == "NodeResourcesFit"]
    assert fit.args.ignored_resources == ["example.com/x"]


async def test_filter_prioritize_bind_over_http() -> None:
    app, seen = scripted(
        filter=lambda b: {"nodes": {"items": [n for n in b["nodes"]["items"] if n["metadata"]["name"] != "b"]},  # noqa: E501
                          "failedNodes": {"b": "b is out"}},
        prioritize=lambda b: [{"host": n, "score": 7} for n in names_of(b)],
        bind=lambda b: {"error": ""},
    )  # fmt: skip
    async with serve(app) as url:
        e = ext(
            url + "/prefix/", filter_verb="filter", prioritize_verb="prioritize", bind_verb="bind", weight=3
        )
        try:
            p = pod("p").pod
            assert await e.filter(p, nodes("a", "b")) == (["a"], {"b": "b is out"}, {})
            assert await e.prioritize(p, nodes("a", "c")) == ([("a", 7), ("c", 7)], 3)
            await e.bind(p, "a")
        finally:
            await e.close()
    verbs = [v for v, _ in seen]
    assert verbs == ["filter", "prioritize", "bind"]
    assert seen[0][1]["pod"]["metadata"]["name"] == "p" and names_of(seen[0][1]) == ["a", "b"]
    assert seen[2][1] == {"podName": "p", "podNamespace": "default", "podUID": "uid-p", "node": "a"}


async def test_node_cache_capable_sends_names() -> None:
    app, seen = scripted(filter=lambda b: {"nodenames": b["nodenames"][:1]})
    async with serve(app) as url:
        e = ext(url + "/prefix", filter_verb="filter", node_cache_capable=True)
        try:
            assert (await e.filter(pod().pod, nodes("a", "b")))[0] == ["a"]
        finally:
            await e.close()
    assert seen[0][1]["nodenames"] == ["a", "b"] and "nodes" not in seen[0][1]


async def test_verbs_not_configured_make_no_call() -> None:
    e = ext("http://127.0.0.1:1")
    assert await e.filter(pod().pod, nodes("a")) == (["a"], {}, {})
    assert await e.prioritize(pod().pod, nodes("a")) == ([("a", 0)], 0)
    with pytest.raises(ExtenderError, match=r"^unexpected empty bindVerb in extender$"):
        await e.bind(pod().pod, "a")


async def test_failures_use_upstreams_wording() -> None:
    release = asyncio.Event()

    async def slow(_b: Any) -> Any:
        await release.wait()  # answers only after the client gave up (its timeout is below)
        return []

    app, _ = scripted(
        filter=lambda b: web.Response(status=500, text="boom"),
        prioritize=slow,
        bind=lambda b: {"error": "no room at the inn"},
        preempt=lambda b: {"nodeNameToMetaVictims": {"a": {"pods": [{"uid": "nope"}]}}},
    )
    async with serve(app) as url:
        e = ext(
            url + "/prefix", filter_verb="filter", prioritize_verb="prioritize", bind_verb="bind",
            preempt_verb="preempt", weight=1, http_timeout=0.2,
        )  # fmt: skip
        try:
            with pytest.raises(ExtenderError) as err:
                await e.filter(pod().pod, nodes("a"))
            assert str(err.value) == f"failed filter with extender at URL {url}/prefix/filter, code 500"
            with pytest.raises(ExtenderError) as err:
                await e.prioritize(pod().pod, nodes("a"))
            assert str(err.value) == (
                f'Post "{url}/prefix/prioritize": context deadline exceeded '
                "(Client.Timeout exceeded while awaiting headers)"
            )
            release.set()
            with pytest.raises(ExtenderError, match=r"^no room at the inn$"):
                await e.bind(pod().pod, "a")
            with pytest.raises(ExtenderError) as err:
                await e.process_preemption(pod().pod, {"a": ([], 0)}, lambda n: [])
            assert str(err.value) == (
                f"extender: {url}/prefix claims to preempt pod (UID: nope) on node: a, "
                "but the pod is not found on that node"
            )
        finally:
            await e.close()


async def test_connection_refused_and_unknown_nodes() -> None:
    port = free_port()
    e = ext(f"http://127.0.0.1:{port}/", filter_verb="filter")
    with pytest.raises(ExtenderError) as err:
        await e.filter(pod().pod, nodes("a"))
    assert str(err.value) == (
        f'Post "http://127.0.0.1:{port}/filter": dial tcp 127.0.0.1:{port}: connect: connection refused'
    )
    await e.close()
    app, _ = scripted(filter=lambda b: {"nodenames": ["ghost"]}, prioritize=lambda b: "not a list")
    async with serve(app) as url:
        e = ext(
            url + "/prefix",
            filter_verb="filter",
            prioritize_verb="prioritize",
            weight=1,
            node_cache_capable=True,
        )
        try:
            with pytest.raises(ExtenderError) as err:
                await e.filter(pod().pod, nodes("a"))
            assert str(err.value) == (
                f'extender "{url}/prefix" claims a filtered node "ghost" '
                "which is not found in the input node list"
            )
            with pytest.raises(ExtenderError, match="HostPriorityList: must be a JSON list"):
                await e.prioritize(pod().pod, nodes("a"))
        finally:
            await e.close()


async def test_process_preemption_maps_uids_back_to_pods() -> None:
    victim = pod("v").pod
    app, seen = scripted(
        preempt=lambda b: {
            "nodeNameToMetaVictims": {"n1": {"pods": [{"uid": "uid-v"}], "numPDBViolations": 1}}
        }
    )
    async with serve(app) as url:
        e = ext(url + "/prefix", preempt_verb="preempt", node_cache_capable=True)
        try:
            out = await e.process_preemption(
                pod("p").pod, {"n1": ([victim], 0), "n2": ([], 0)}, lambda n: [victim]
            )
        finally:
            await e.close()
    assert out == {"n1": ([victim], 1)}
    assert seen[0][1]["nodeNameToMetaVictims"]["n1"]["pods"] == [{"uid": "uid-v"}]


async def test_tls_with_ca_data_and_server_name(tmp_path: Any) -> None:
    from certs.layout import PKI
    from certs.pki import init_pki

    pki: PKI = init_pki(tmp_path / "pki", scheduler_replicas=1, server_hosts=["localhost"])
    server = pki["apiserver"]
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(server.cert, server.key)
    ctx.load_verify_locations(cafile=server.ca_bundle)
    ctx.verify_mode = ssl.CERT_REQUIRED  # the extender demands a client cert
    app, _ = scripted(filter=lambda b: {"nodes": b["nodes"]})
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = runner.addresses[0][1]
    client = pki["scheduler-1"]
    try:
        tls = ExtenderTLSConfig(
            server_name="localhost",
            ca_data=base64.b64encode(server.ca_bundle.read_bytes()).decode(),
            cert_file=str(client.cert),
            key_file=str(client.key),
        )
        e = ext(f"https://127.0.0.1:{port}/prefix", filter_verb="filter", tls_config=tls)
        try:
            assert (await e.filter(pod().pod, nodes("a")))[0] == ["a"]
        finally:
            await e.close()
        # A server name the certificate does not carry: refused by the client.
        wrong = ext(
            f"https://127.0.0.1:{port}/prefix",
            filter_verb="filter",
            tls_config=ExtenderTLSConfig(server_name="elsewhere.example", ca_file=str(server.ca_bundle)),
        )
        try:
            with pytest.raises(
                ExtenderError, match=r'^Post "https://127\.0\.0\.1:\d+/prefix/filter": tls: .*elsewhere'
            ):
                await wrong.filter(pod().pod, nodes("a"))
        finally:
            await wrong.close()
        # Without a client cert the handshake fails: an error, never a hang.
        bare = ext(f"https://127.0.0.1:{port}/prefix", filter_verb="filter", enable_https=True)
        try:
            with pytest.raises(ExtenderError, match=r'^Post "https://127\.0\.0\.1'):
                await bare.filter(pod().pod, nodes("a"))
        finally:
            await bare.close()
    finally:
        await runner.cleanup()


# ------------------------------------------------------------------------------------ in the algorithm


async def _schedule(extenders: list[HTTPExtender], pod_info: PodInfo, node_list: list[pb.Node]) -> Any:
    snap = snapshot_of(node_list)
    fwk = default_framework(snap)
    return await schedule_pod_with_extenders(fwk, CycleState(), pod_info, snap, AlgorithmState(), extenders)


async def test_filter_statuses_and_the_fit_error() -> None:
    app, _ = scripted(
        first=lambda b: {"nodes": {"items": [n for n in b["nodes"]["items"] if n["metadata"]["name"] == "a"]},
                         "failedNodes": {"b": "b: maybe later", "c": "c: maybe later"},
                         "failedAndUnresolvableNodes": {"c": "c: never"}},
        second=lambda b: {"nodes": {"items": []}, "failedNodes": {"a": "a: not for me"}},
    )  # fmt: skip
    async with serve(app) as url:
        es = [ext(url + "/prefix", filter_verb="first"), ext(url + "/prefix", filter_verb="second")]
        try:
            with pytest.raises(FitError) as err:
                await _schedule(es, pod(), nodes("a", "b", "c"))
        finally:
            for e in es:
                await e.close()
    d = err.value.diagnosis
    assert d.node_to_status["c"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # wins over failedNodes
    assert d.node_to_status["b"].code == Code.UNSCHEDULABLE
    assert d.node_to_status["a"].reasons == ["a: not for me"]
    assert EXTENDER_NAME in d.unschedulable_plugins
    assert str(err.value) == "0/3 nodes are available: 1 a: not for me, 1 b: maybe later, 1 c: never."


async def test_ignorable_extender_is_skipped_and_the_other_fails_the_cycle() -> None:
    port = free_port()
    dead = f"http://127.0.0.1:{port}"
    ignorable = ext(dead, filter_verb="filter", ignorable=True)
    assert (await _schedule([ignorable], pod(), nodes("a", "b"))).feasible_nodes == 2
    strict = ext(dead, filter_verb="filter")
    with pytest.raises(ExtenderCallError) as err:
        await _schedule([strict], pod(), nodes("a", "b"))
    assert str(err.value) == f'Post "{dead}/filter": dial tcp 127.0.0.1:{port}: connect: connection refused'
    await ignorable.close()
    await strict.close()


async def test_prioritize_scales_by_weight_and_changes_the_choice() -> None:
    """Equal nodes tie under the default plugins; an extender's score x weight x 10 decides."""
    app, _ = scripted(
        prioritize=lambda b: [{"host": n, "score": 10 if n == "n3" else 0} for n in names_of(b)]
    )
    async with serve(app) as url:
        e = ext(url + "/prefix", prioritize_verb="prioritize", weight=2)
        try:
            chosen = {
                (await _schedule([e], pod(f"p{i}"), nodes("n1", "n2", "n3", "n4"))).suggested_host
                for i in range(8)
            }
        finally:
            await e.close()
    assert chosen == {"n3"}


async def test_prioritize_failure_gives_no_score() -> None:
    app, _ = scripted(prioritize=lambda b: web.Response(status=503))
    async with serve(app) as url:
        e = ext(url + "/prefix", prioritize_verb="prioritize", weight=5)
        try:
            result = await _schedule([e], pod(), nodes("n1", "n2"))
        finally:
            await e.close()
    assert result.feasible_nodes == 2  # scheduled on the plugins' scores alone


async def test_extender_scores_are_added_to_the_plugins_totals() -> None:
    """Upstream's arithmetic: total = sum(plugin score x weight) + extender score x weight x 10."""
    from scheduler.algorithm import _prioritize_with_extenders, score_feasible

    node_list = nodes("n1", "n2")
    snap = snapshot_of(node_list)
    fwk = default_framework(snap)
    feasible = FeasibleNodes(snap, np.arange(2, dtype=np.intp))
    base = score_feasible(fwk, CycleState(), pod(), feasible).totals
    app, _ = scripted(prioritize=lambda b: [{"host": "n1", "score": 3}, {"host": "elsewhere", "score": 9}])
    async with serve(app) as url:
        e = ext(url + "/prefix", prioritize_verb="prioritize", weight=4)
        gauge: list[int] = []
        try:
            totals = await _prioritize_with_extenders(fwk, CycleState(), pod(), feasible, [e], gauge.append)
        finally:
            await e.close()
    assert totals.tolist() == [int(base[0]) + 3 * 4 * 10, int(base[1])]
    assert gauge == [1, -1]


async def test_sample_extender_application() -> None:
    sample = SampleExtender(filter_label="ok", prefer_label="fast")
    async with serve(sample.app()) as url:
        e = ext(
            url + "/any/prefix",
            filter_verb="filter",
            prioritize_verb="prioritize",
            bind_verb="bind",
            weight=1,
        )
        labels = {"a": {"ok": "1"}, "b": {"ok": "1", "fast": ""}, "c": {}}
        try:
            passed, failed, _ = await e.filter(pod().pod, nodes("a", "b", "c", labels=labels))
            assert (passed, failed) == (["a", "b"], {"c": "node(s) didn't have label ok"})
            assert (await e.prioritize(pod().pod, nodes("a", "b", labels=labels)))[0] == [("a", 0), ("b", 10)]
            with pytest.raises(ExtenderError, match="does not bind"):
                await e.bind(pod().pod, "a")
        finally:
            await e.close()
        from kse.scrape import http_get

        status, body = await http_get(url.removeprefix("http://"), "/stats")
        assert status == 200 and json.loads(body) == {"filter": 1, "prioritize": 1, "bind": 1}


def test_diagnosis_default_is_untouched() -> None:
    assert EXTENDER_NAME not in Diagnosis().unschedulable_plugins


async def test_preemption_through_extenders() -> None:
    """callExtenders: each preempting extender narrows the candidates for the next; an empty
    victim list is an error unless the extender is ignorable (then that node is dropped)."""
    from scheduler.extender.preemption import process_preemption

    v1, v2 = pod("v1").pod, pod("v2").pod
    on_node = {"n1": [v1], "n2": [v2]}
    app, seen = scripted(
        narrow=lambda b: {"nodeNameToMetaVictims": {"n1": b["nodeNameToMetaVictims"]["n1"]}},
        empty=lambda b: {"nodeNameToMetaVictims": {"n1": {"pods": []}}},
    )
    async with serve(app) as url:
        narrow = ext(url + "/prefix", preempt_verb="narrow", node_cache_capable=True)
        empty = ext(url + "/prefix", preempt_verb="empty", node_cache_capable=True)
        lenient = ext(url + "/prefix", preempt_verb="empty", node_cache_capable=True, ignorable=True)
        not_preempting = ext("http://127.0.0.1:1", filter_verb="filter")
        victims = {"n1": ([v1], 0), "n2": ([v2], 0)}
        try:
            got = await process_preemption([not_preempting, narrow], pod("p").pod, victims, on_node.get)
            assert got == {"n1": ([v1], 0)}
            with pytest.raises(ExtenderError, match=r'^expected at least one victim pod on node "n1"$'):
                await process_preemption([narrow, empty], pod("p").pod, victims, on_node.get)
            assert await process_preemption([lenient], pod("p").pod, victims, on_node.get) == {}
        finally:
            for e in (narrow, empty, lenient):
                await e.close()
    assert [v for v, _ in seen] == ["narrow", "narrow", "empty", "empty"]


def test_extenders_register_for_every_event() -> None:
    """Upstream's defaultEnqueueExtension for ExtenderName: a pod an extender rejected is
    requeued by any cluster event."""
    from scheduler.framework.types import EXTENDER_NAME as NAME

    fwk = default_framework(snapshot_of([]))
    assert NAME not in fwk.events_to_register()
    fwk.set_extenders([ext("http://x", filter_verb="filter")])
    assert fwk.extenders()[0].name() == "http://x"
    assert len(fwk.events_to_register()[NAME]) > 1


async def test_default_preemption_asks_the_preempting_extenders() -> None:
    """Evaluator.preempt_async (upstream Preempt step 3, callExtenders): the extender's answer
    narrows the candidates before the best is chosen; a failing extender that is not ignorable is
    the PostFilter's Error, an ignorable one is skipped."""
    from tests.unit.scheduler.test_plugin_defaultpreemption import ONE_POD, U, framework, plugin_of
    from tests.unit.scheduler.test_plugin_defaultpreemption import node as capped_node
    from tests.unit.scheduler.test_plugin_defaultpreemption import pod as prio_pod

    preemptor = prio_pod("p", priority=1000).obj()
    on_nodes = [prio_pod("v1", "node1").obj(), prio_pod("v2", "node2").obj()]
    node_list = [capped_node("node1", ONE_POD), capped_node("node2", ONE_POD)]
    statuses = {"node1": U, "node2": U}

    async def run(extenders: list[HTTPExtender]) -> tuple[Any, Any]:
        fwk, _ = framework(on_nodes, node_list)
        fwk.set_extenders(extenders)
        plugin_of(fwk)  # the deterministic offset, as upstream's tests
        state = CycleState()
        pi = PodInfo(preemptor)
        fwk.run_pre_filter_plugins(state, pi)
        return await fwk.run_post_filter_plugins_async(state, pi, statuses)

    unnarrowed, status = await run([])
    assert status is None and unnarrowed.nominated_node_name in ("node1", "node2")
    other = "node2" if unnarrowed.nominated_node_name == "node1" else "node1"
    keep_other = {"nodeNameToMetaVictims": {other: {"pods": [{"uid": other.replace("node", "v")}]}}}
    app, seen = scripted(
        keep=lambda b: keep_other,
        fail=lambda b: web.Response(status=500, text="no"),
    )
    async with serve(app) as url:
        keep = ext(url + "/prefix", preempt_verb="keep", node_cache_capable=True)
        fail = ext(url + "/prefix", preempt_verb="fail", node_cache_capable=True)
        lenient = ext(url + "/prefix", preempt_verb="fail", node_cache_capable=True, ignorable=True)
        try:
            narrowed, status = await run([keep])
            assert status is None and narrowed.nominated_node_name == other
            assert sorted(seen[-1][1]["nodeNameToMetaVictims"]) == ["node1", "node2"]

            result, status = await run([fail])
            assert result is None and status is not None and status.code == Code.ERROR
            assert "preempt" in status.message() and status.plugin == "DefaultPreemption"

            skipped, status = await run([lenient, keep])
            assert status is None and skipped.nominated_node_name == other
        finally:
            for e in (keep, fail, lenient):
                await e.close()
