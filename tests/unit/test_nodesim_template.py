"""nodesim: template expansion, image pulls, pod IPs, and the objects a simulated kubelet writes."""

from __future__ import annotations

import argparse
import ipaddress
import itertools
from pathlib import Path

import pytest

from apiserver_mock.validation import validate_object
from kse.objects.kinds import BY_FIELD
from kse.objects.timeutil import parse_time
from nodesim import cli
from nodesim.images import MAX_STATUS_IMAGES, ImageCache, normalize_image, pod_images, pull_delay
from nodesim.kubelet import NODE_LEASE_NAMESPACE, PodIPAllocator, SimNode
from nodesim.simulator import NodeSimConfig
from nodesim.template import (
    LABEL_HOSTNAME,
    LABEL_OS,
    LABEL_REGION,
    LABEL_ZONE,
    FleetConfig,
    TemplateError,
    expand_fleet,
    image_subset,
    load_node_template,
    parse_images,
    parse_size,
    parse_taint,
    pod_cidr_prefix,
    tainted_indices,
)
from proto import kse_pb2 as pb

TEMPLATES = Path("/work/shared/k8s-examples/scheduler-perf-templates")
Mi = 1024 * 1024
IMAGES = {f"img-{i}:v1": (i + 1) * Mi for i in range(8)}


def _taints(node: pb.Node) -> list[tuple[str, str, str]]:
    return [(t.key, t.value, t.effect) for t in node.spec.taints]


# ---------------------------------------------------------------- labels, zones, names


def test_defaults_match_scheduler_perf_node_default() -> None:
    (spec,) = expand_fleet(FleetConfig(count=1))
    st = spec.node.status
    assert spec.name == "nodesim-0"
    assert dict(st.capacity) == {"cpu": "4", "memory": "32Gi", "pods": "110"}
    assert dict(st.allocatable) == dict(st.capacity)
    labels = spec.node.metadata.labels
    assert labels[LABEL_HOSTNAME] == "nodesim-0" and labels[LABEL_OS] == "linux"
    assert LABEL_ZONE not in labels  # no zones asked for


def test_zones_round_robin_with_region() -> None:
    specs = expand_fleet(FleetConfig(count=7, zones=("zone-a", "zone-b", "zone-c"), region="r1"))
    assert [s.node.metadata.labels[LABEL_ZONE] for s in specs] == [
        "zone-a", "zone-b", "zone-c", "zone-a", "zone-b", "zone-c", "zone-a",
    ]
    assert {s.node.metadata.labels[LABEL_REGION] for s in specs} == {"r1"}
    assert [s.name for s in specs] == [f"nodesim-{i}" for i in range(7)]
    assert all(s.node.metadata.labels[LABEL_HOSTNAME] == s.name for s in specs)


def test_name_prefix_first_index_and_extra_labels() -> None:
    specs = expand_fleet(FleetConfig(count=2, name_prefix="n-", first_index=10, labels={"team": "a"}))
    assert [s.name for s in specs] == ["n-10", "n-11"]
    assert all(s.node.metadata.labels["team"] == "a" for s in specs)


@pytest.mark.parametrize(
    ("count", "fraction", "expected"), [(10, 0.3, 3), (10, 0.0, 0), (10, 1.0, 10), (7, 0.5, 4)]
)
def test_taint_fraction_is_exact(count: int, fraction: float, expected: int) -> None:
    taint = parse_taint("dedicated=gpu:NoSchedule")
    specs = expand_fleet(FleetConfig(count=count, taints=(taint,), taint_fraction=fraction, seed=3))
    tainted = [s for s in specs if s.node.spec.taints]
    assert len(tainted) == expected
    assert all(_taints(s.node) == [("dedicated", "gpu", "NoSchedule")] for s in tainted)


def test_tainted_nodes_are_deterministic_by_seed() -> None:
    assert tainted_indices(100, 0.2, seed=1) == tainted_indices(100, 0.2, seed=1)
    assert tainted_indices(100, 0.2, seed=1) != tainted_indices(100, 0.2, seed=2)
    # Not simply the first nodes (which would line up with the zones' round-robin).
    assert tainted_indices(100, 0.2, seed=1) != set(range(20))


def test_images_subset_deterministic_by_seed() -> None:
    a = [s.images for s in expand_fleet(FleetConfig(count=20, images=IMAGES, seed=7))]
    b = [s.images for s in expand_fleet(FleetConfig(count=20, images=IMAGES, seed=7))]
    c = [s.images for s in expand_fleet(FleetConfig(count=20, images=IMAGES, seed=8))]
    assert a == b
    assert a != c
    assert all(set(imgs) <= set(IMAGES) and all(IMAGES[k] == v for k, v in imgs.items()) for imgs in a)
    assert len({tuple(sorted(i)) for i in a}) > 1  # nodes differ from each other
    # A node's cache does not depend on how many nodes there are.
    assert [s.images for s in expand_fleet(FleetConfig(count=5, images=IMAGES, seed=7))] == a[:5]


def test_image_fraction_bounds() -> None:
    assert image_subset(IMAGES, 0.0, 1, 0) == {}
    assert image_subset(IMAGES, 1.0, 1, 0) == IMAGES


def test_initial_images_are_in_the_node_status() -> None:
    (spec,) = expand_fleet(FleetConfig(count=1, images=IMAGES, image_fraction=1.0))
    node = SimNode(spec).registration(1_700_000_000.0)
    assert [(tuple(i.names), i.size_bytes) for i in node.status.images] == sorted(
        (((k,), v) for k, v in IMAGES.items()), key=lambda kv: -kv[1]
    )


def test_network_unique_per_node() -> None:
    specs = expand_fleet(FleetConfig(count=600))
    cidrs = [s.pod_cidr for s in specs]
    assert all(c.prefixlen == 24 for c in cidrs)
    for a, b in itertools.pairwise(cidrs):
        assert not a.overlaps(b)
    assert len({s.internal_ip for s in specs}) == 600
    assert all(s.node.spec.pod_cidr == str(s.pod_cidr) for s in specs)
    addrs = {a.type: a.address for a in specs[3].node.status.addresses}
    assert addrs == {"InternalIP": specs[3].internal_ip, "Hostname": specs[3].name}


def test_large_max_pods_gets_a_larger_cidr() -> None:
    assert pod_cidr_prefix(110) == 24
    assert pod_cidr_prefix(253) == 24
    assert pod_cidr_prefix(254) == 23
    (a, b) = expand_fleet(FleetConfig(count=2, pods="500"))
    assert a.pod_cidr.num_addresses >= 503 and not a.pod_cidr.overlaps(b.pod_cidr)


# ---------------------------------------------------------------- templates


def test_scheduler_perf_node_default_template_loads() -> None:
    template = load_node_template(TEMPLATES / "node-default.yaml")
    specs = expand_fleet(FleetConfig(count=3, template=template))
    assert [s.name for s in specs] == ["scheduler-perf-0", "scheduler-perf-1", "scheduler-perf-2"]
    for s in specs:
        st = s.node.status
        assert dict(st.capacity) == {"pods": "110", "cpu": "4", "memory": "32Gi"}
        assert dict(st.allocatable) == dict(st.capacity)
        assert st.phase == "Running"
        assert not s.node.metadata.generate_name


def test_scheduler_perf_tainted_template_and_flag_overrides() -> None:
    template = load_node_template(TEMPLATES / "node-with-taint.yaml")
    specs = expand_fleet(FleetConfig(count=4, template=template, cpu="8", name_prefix="t-"))
    assert [s.name for s in specs] == ["t-0", "t-1", "t-2", "t-3"]
    for s in specs:
        assert _taints(s.node) == [("foo", "", "NoSchedule")]  # the template's taints: every node
        assert s.node.status.capacity["cpu"] == "8" and s.node.status.allocatable["cpu"] == "8"
        assert s.node.status.capacity["memory"] == "32Gi"


def test_template_must_be_one_node(tmp_path: Path) -> None:
    f = tmp_path / "pod.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n"
    )
    with pytest.raises(TemplateError, match="exactly one Node"):
        load_node_template(f)


def test_registered_node_and_lease_pass_api_validation() -> None:
    template = load_node_template(TEMPLATES / "node-with-taint.yaml")
    (spec,) = expand_fleet(
        FleetConfig(
            count=1, template=template, zones=("z",), images=IMAGES, taints=(parse_taint("a=b:NoExecute"),)
        )
    )
    node = SimNode(spec)
    node.uid = "u-1"
    registration = node.registration(1_700_000_000.5)
    assert not validate_object(BY_FIELD["node"], registration)
    conds = {c.type: c for c in registration.status.conditions}
    assert conds["Ready"].status == "True" and conds["Ready"].reason == "KubeletReady"
    assert {"MemoryPressure", "DiskPressure", "PIDPressure"} <= set(conds)
    lease = node.new_lease(1_700_000_000.5)
    assert not validate_object(BY_FIELD["lease"], lease)
    assert lease.metadata.namespace == NODE_LEASE_NAMESPACE and lease.metadata.name == spec.name
    assert lease.spec.holder_identity == spec.name and lease.spec.lease_duration_seconds == 40
    assert lease.spec.renew_time == "2023-11-14T22:13:20.500000Z"
    assert [(o.kind, o.name, o.uid) for o in lease.metadata.owner_references] == [("Node", spec.name, "u-1")]
    node.lease = lease
    renewed = node.renewed_lease(1_700_000_010.0)
    assert parse_time(renewed.spec.renew_time) > parse_time(lease.spec.renew_time)


# ---------------------------------------------------------------- flag parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [("k=v:NoSchedule", ("k", "v", "NoSchedule")), ("k:NoExecute", ("k", "", "NoExecute")),
     ("example.com/k=v:PreferNoSchedule", ("example.com/k", "v", "PreferNoSchedule"))],
)
def test_parse_taint(text: str, expected: tuple[str, str, str]) -> None:
    t = parse_taint(text)
    assert (t.key, t.value, t.effect) == expected


@pytest.mark.parametrize("text", ["k=v", "k=v:Sometimes", ":NoSchedule", "=v:NoSchedule"])
def test_parse_taint_errors(text: str) -> None:
    with pytest.raises(TemplateError):
        parse_taint(text)


def test_parse_images_and_sizes() -> None:
    assert parse_images("nginx=150Mi, registry.k8s.io/pause:3.10=700Ki,") == {
        "nginx:latest": 150 * Mi,
        "registry.k8s.io/pause:3.10": 700 * 1024,
    }
    assert parse_size("1G") == 10**9
    with pytest.raises(TemplateError):
        parse_images("nginx")
    with pytest.raises(TemplateError):
        parse_size("-1")


def test_cli_flags_build_the_config(tmp_path: Path) -> None:
    p = cli.build_parser()
    args = p.parse_args([
        "--nodes", "6", "--zones", "a,b", "--taint", "x=y:NoSchedule", "--taint-fraction", "0.5",
        "--images", "nginx=10Mi", "--seed", "4", "--image-pull-bandwidth", "50Mi",
        "--heartbeat-interval", "2s",
        "--node-status-report-interval", "1m30s", "--node-template", str(TEMPLATES / "node-default.yaml"),
    ])
    cfg = cli.config_from_args(p, args)
    assert isinstance(cfg, NodeSimConfig)
    assert cfg.fleet.count == 6 and cfg.fleet.zones == ("a", "b") and cfg.fleet.seed == 4
    assert cfg.fleet.prefix() == "scheduler-perf-"
    assert cfg.image_pull_bandwidth == 50 * Mi and cfg.heartbeat_interval == 2.0
    assert cfg.node_status_report_interval == 90.0
    assert cli.client_limits(args) == (100.0, 200)
    assert cli.client_limits(p.parse_args(["--nodes", "5000"])) == (2500.0, 5000)


def test_cli_rejects_bad_values() -> None:
    p = cli.build_parser()
    with pytest.raises(SystemExit):
        p.parse_args(["--taint-fraction", "1.5"])
    with pytest.raises(SystemExit):
        p.parse_args(["--heartbeat-interval", "soon"])
    with pytest.raises(SystemExit):
        cli.config_from_args(p, p.parse_args(["--taint", "bad"]))
    assert cli.duration("500ms") == 0.5
    with pytest.raises(argparse.ArgumentTypeError):
        cli.positive_duration("0")


# ---------------------------------------------------------------- image pulls


def test_pull_delay_counts_only_missing_images() -> None:
    sizes = {"a:latest": 100 * Mi, "b:v1": 50 * Mi}
    bw = 50.0 * Mi
    assert pull_delay(["a", "b:v1"], [], sizes, 10 * Mi, bw) == pytest.approx(3.0)
    assert pull_delay(["a", "b:v1"], ["a:latest"], sizes, 10 * Mi, bw) == pytest.approx(1.0)
    assert pull_delay(["a", "b:v1"], ["a", "b:v1"], sizes, 10 * Mi, bw) == 0.0
    assert pull_delay(["unknown:1"], [], sizes, 10 * Mi, bw) == pytest.approx(0.2)  # default size
    assert pull_delay(["a", "a:latest"], [], sizes, 10 * Mi, bw) == pytest.approx(2.0)  # once
    assert pull_delay(["a"], [], sizes, 10 * Mi, 0.0) == 0.0  # no bandwidth limit: instant


def test_pulls_are_serial_per_node_and_shared_between_pods() -> None:
    sizes = {"a:latest": 100, "b:latest": 50}
    cache = ImageCache({"c:latest": 1})
    ready1, started1 = cache.plan_pull(["a", "c"], now=10.0, sizes=sizes, default_size=0, bandwidth=100.0)
    assert (ready1, started1) == (11.0, ["a:latest"])
    # A second pod: b queues behind a (serial pulls), a is waited for, not pulled again.
    ready2, started2 = cache.plan_pull(["b", "a"], now=10.5, sizes=sizes, default_size=0, bandwidth=100.0)
    assert (ready2, started2) == (11.5, ["b:latest"])
    assert cache.settle(10.9) == []
    assert cache.settle(11.0) == ["a:latest"]
    assert "a" in cache and "b" not in cache
    assert cache.settle(12.0) == ["b:latest"]
    # Everything cached: no delay, and an idle puller starts at `now`, not in the past.
    assert cache.plan_pull(["a", "b"], now=20.0, sizes=sizes, default_size=0, bandwidth=100.0) == (20.0, [])
    planned = cache.plan_pull(["d"], now=30.0, sizes=sizes, default_size=100, bandwidth=100.0)
    assert planned == (31.0, ["d:latest"])


def test_status_images_largest_first_and_capped() -> None:
    cache = ImageCache({f"i{n}": n for n in range(60)})
    images = cache.status_images()
    assert len(images) == MAX_STATUS_IMAGES
    assert [i.size_bytes for i in images] == list(range(59, 9, -1))
    assert images[0].names == ["i59:latest"]


def test_normalize_and_pod_images() -> None:
    assert normalize_image("nginx") == "nginx:latest"
    assert normalize_image("localhost:5000/app") == "localhost:5000/app:latest"
    assert normalize_image("a/b:1") == "a/b:1"
    assert normalize_image("a@sha256:00") == "a@sha256:00"
    pod = pb.Pod(spec=pb.PodSpec(
        init_containers=[pb.Container(name="i", image="busybox")],
        containers=[pb.Container(name="a", image="nginx"), pb.Container(name="b", image="nginx:latest")],
    ))
    assert pod_images(pod) == ["busybox:latest", "nginx:latest"]


# ---------------------------------------------------------------- pod IPs and pod status


def test_pod_ip_allocator() -> None:
    ipam = PodIPAllocator(ipaddress.IPv4Network("10.128.1.0/29"))  # 8 addresses: .2 .. .6 usable
    assert ipam.capacity == 5
    got = [ipam.allocate() for _ in range(5)]
    assert got == [f"10.128.1.{i}" for i in range(2, 7)]
    assert ipam.allocate() is None
    ipam.release("10.128.1.4")
    ipam.release("10.128.1.3")
    assert ipam.allocate() == "10.128.1.3"  # lowest free first
    assert ipam.allocate() == "10.128.1.4"
    ipam.release("10.9.9.9")  # not ours: ignored
    fresh = PodIPAllocator(ipaddress.IPv4Network("10.128.2.0/24"))
    assert fresh.claim("10.128.2.2") and not fresh.claim("10.128.2.2") and not fresh.claim("10.0.0.1")
    assert fresh.allocate() == "10.128.2.3"


def test_running_status() -> None:
    (spec,) = expand_fleet(FleetConfig(count=1))
    node = SimNode(spec)
    pod = pb.Pod(
        metadata=pb.ObjectMeta(name="p", namespace="default"),
        spec=pb.PodSpec(node_name=spec.name, containers=[pb.Container(name="a", image="nginx"),
                                                         pb.Container(name="b", image="redis:7")]),
        status=pb.PodStatus(
            phase="Pending", qos_class="Burstable",
            conditions=[
                pb.PodCondition(
                    type="PodScheduled", status="True", last_transition_time="2024-01-01T00:00:00Z"
                )
            ],
        ),
    )
    st = node.running_status(pod, "10.128.0.2", now=1_700_000_100.0, started_at=1_700_000_000.0)
    assert st.phase == "Running" and st.pod_ip == "10.128.0.2" and st.host_ip == spec.internal_ip
    assert st.start_time == "2023-11-14T22:13:20Z" and st.qos_class == "Burstable"
    conds = {c.type: c for c in st.conditions}
    assert {t for t, c in conds.items() if c.status == "True"} >= {
        "PodScheduled", "Initialized", "ContainersReady", "Ready"
    }
    assert conds["PodScheduled"].last_transition_time == "2024-01-01T00:00:00Z"  # kept
    assert conds["Ready"].last_transition_time == "2023-11-14T22:15:00Z"
    assert [(c.name, c.image, c.ready, c.started) for c in st.container_statuses] == [
        ("a", "nginx", True, True), ("b", "redis:7", True, True)
    ]
    full = pb.Pod()
    full.CopyFrom(pod)
    full.status.CopyFrom(st)
    assert not validate_object(BY_FIELD["pod"], full)


# ---------------------------------------------------------------- the simulator's pod bookkeeping


class _FakePods:
    resource = "pods"

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str, str]] = []

    async def delete(
        self, namespace: str, name: str, *, uid: str = "", grace_period_seconds: int | None = None
    ) -> pb.Pod:
        assert grace_period_seconds == 0  # the kubelet's final delete
        self.deleted.append((namespace, name, uid))
        return pb.Pod()


async def test_pod_with_deletion_timestamp_is_finalised_once_and_others_ignored() -> None:
    import asyncio
    import types

    from nodesim.simulator import NodeSimulator

    pods = _FakePods()
    fake = types.SimpleNamespace(pods=pods, nodes=_FakePods())  # nodes: the node informer
    sim = NodeSimulator(fake, NodeSimConfig(fleet=FleetConfig(count=1)), heartbeat_clientset=fake)  # type: ignore[arg-type]
    node = sim.nodes["nodesim-0"]
    pod = pb.Pod(
        metadata=pb.ObjectMeta(name="p", namespace="ns", uid="u1", deletion_timestamp="2024-01-01T00:00:00Z"),
        spec=pb.PodSpec(node_name="nodesim-0", containers=[pb.Container(name="c", image="x")]),
    )
    sim._on_add(pod)
    sim._on_update(pod, pod)  # seen again before the delete landed: still one delete
    other = pb.Pod(
        metadata=pb.ObjectMeta(name="q", namespace="ns", uid="u2"), spec=pb.PodSpec(node_name="elsewhere")
    )
    sim._on_add(other)  # not one of our nodes
    workers = asyncio.create_task(sim._writes.run())
    try:
        await asyncio.wait_for(sim._writes.idle(), 5)
    finally:
        workers.cancel()
        await asyncio.gather(workers, return_exceptions=True)
    assert pods.deleted == [("ns", "p", "u1")]
    assert sim.stats.pods_finalized == 1
    sim._on_delete(pod)
    assert node.pods == {} and sim.stats.pods_deleted == 1


def test_the_control_file_reads_stopped_kubelets_and_versions_and_names_a_bad_field() -> None:
    from nodesim.simulator import KubeletControl

    c = KubeletControl.from_json({"stopped": ["n1"], "kubeletVersions": {"n1": "v1.35.0"}})
    assert c.stopped == frozenset({"n1"}) and c.kubelet_versions == {"n1": "v1.35.0"}
    assert KubeletControl.from_json({}) == KubeletControl()
    for bad, field in (
        ([], "JSON object"),
        ({"stoped": []}, "stoped"),
        ({"stopped": "n1"}, "stopped"),
        ({"stopped": [""]}, "stopped"),
        ({"kubeletVersions": {"n1": 3}}, "kubeletVersions"),
    ):
        with pytest.raises(ValueError, match=field):
            KubeletControl.from_json(bad)
