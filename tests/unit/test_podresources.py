"""Effective pod requests/limits (component-helpers PodRequests/PodLimits) and host ports."""

from __future__ import annotations

from pathlib import Path

import pytest

from kse.objects.manifest import load_manifests
from kse.objects.podresources import (
    is_pod_level_requests_set,
    is_pod_level_resources_set,
    pod_host_ports,
    pod_limits,
    pod_requests,
    resource_list_units,
    to_units,
)
from kse.objects.quantity import QuantityError
from proto import kse_pb2 as pb

MI = 1024**2
EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "k8s-examples"


def container(
    name: str = "c",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    restart_policy: str = "",
) -> pb.Container:
    c = pb.Container(name=name, restart_policy=restart_policy)
    c.resources.requests.update(requests or {})
    c.resources.limits.update(limits or {})
    return c


def pod(containers: list[pb.Container], init: list[pb.Container] | None = None) -> pb.Pod:
    p = pb.Pod()
    p.spec.containers.extend(containers)
    p.spec.init_containers.extend(init or [])
    return p


def test_containers_are_summed() -> None:
    p = pod(
        [
            container(requests={"cpu": "100m", "memory": "1Gi"}),
            container(requests={"cpu": "0.5", "memory": "512Mi"}),
        ]
    )
    assert pod_requests(p) == {"cpu": 600, "memory": 1536 * MI}


def test_init_containers_take_the_max() -> None:
    p = pod([container(requests={"cpu": "1"})], init=[container(requests={"cpu": "2", "memory": "1Gi"})])
    assert pod_requests(p) == {"cpu": 2000, "memory": 1024 * MI}


def test_sidecars_accumulate() -> None:
    sidecar = "Always"
    p = pod(
        [container(requests={"cpu": "1"})],
        init=[
            container("s1", {"cpu": "1"}, restart_policy=sidecar),
            container("i2", {"cpu": "2"}),
            container("s3", {"cpu": "3"}, restart_policy=sidecar),
            container("i4", {"cpu": "5"}),
        ],
    )
    # Running: app 1 + sidecars 1 + 3 = 5; init i4 runs beside both sidecars: 5 + 4 = 9.
    assert pod_requests(p) == {"cpu": 9000}
    p.spec.init_containers[3].resources.requests["cpu"] = "1"
    # Now the peak is the steady state: 5 (i2 needed 2 + 1 = 3, i4 needs 1 + 4 = 5).
    assert pod_requests(p) == {"cpu": 5000}


def test_limits_default_requests() -> None:
    p = pod([container(limits={"cpu": "2", "memory": "1Gi"}, requests={"cpu": "1"})])
    assert pod_requests(p) == {"cpu": 1000, "memory": 1024 * MI}
    assert pod_requests(p, apply_defaults=False) == {"cpu": 1000}
    assert pod_limits(p) == {"cpu": 2000, "memory": 1024 * MI}


def test_overhead() -> None:
    p = pod([container(requests={"cpu": "1"}, limits={"cpu": "2"})])
    p.spec.overhead.update({"cpu": "250m", "memory": "120Mi"})
    assert pod_requests(p) == {"cpu": 1250, "memory": 120 * MI}
    assert pod_requests(p, exclude_overhead=True) == {"cpu": 1000}
    # Overhead only raises limits that exist and are non-zero.
    assert pod_limits(p) == {"cpu": 2250}


def test_pod_level_resources_override() -> None:
    p = pod([container(requests={"cpu": "500m", "memory": "50Mi", "example.com/gpu": "1"}), container()])
    p.spec.resources.requests.update({"cpu": "1", "memory": "100Mi", "example.com/gpu": "5"})
    p.spec.resources.limits.update({"cpu": "1", "memory": "200Mi"})
    assert is_pod_level_resources_set(p) and is_pod_level_requests_set(p)
    # cpu and memory come from the pod level; extended resources are not pod-level resources.
    assert pod_requests(p) == {"cpu": 1000, "memory": 100 * MI, "example.com/gpu": 1}
    assert pod_limits(p) == {"cpu": 1000, "memory": 200 * MI}


def test_pod_level_only_extended_resources_are_ignored() -> None:
    p = pod([container(requests={"cpu": "500m"})])
    p.spec.resources.requests["example.com/gpu"] = "1"
    assert not is_pod_level_resources_set(p)
    assert pod_requests(p) == {"cpu": 500}


def test_pod_level_request_defaults() -> None:
    # Pod-level limits only: requests default to the containers' aggregate where containers ask,
    # else to the pod-level limit (KEP-2837 defaulting, SetDefaults_Pod).
    p = pod([container(requests={"cpu": "200m"})])
    p.spec.resources.limits.update({"cpu": "1", "memory": "1Gi"})
    assert pod_requests(p) == {"cpu": 200, "memory": 1024 * MI}
    assert pod_requests(p, apply_defaults=False) == {"cpu": 200}
    assert pod_limits(p) == {"cpu": 1000, "memory": 1024 * MI}


def test_hugepages_pod_limit_defaults_from_containers() -> None:
    p = pod([container(limits={"hugepages-2Mi": "4Mi"})])
    p.spec.resources.requests["cpu"] = "1"
    assert pod_limits(p) == {"hugepages-2Mi": 4 * MI}
    assert pod_requests(p) == {"cpu": 1000, "hugepages-2Mi": 4 * MI}


def test_units_round_up() -> None:
    assert to_units("cpu", 1) == 1  # 1n of cpu is still 1 millicore
    assert to_units("memory", 1) == 1
    assert to_units("cpu", 1_500_000_000) == 1500
    assert resource_list_units({"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "1.5"}) == {
        "cpu": 4000,
        "memory": 32 * 1024 * MI,
        "pods": 110,
        "ephemeral-storage": 2,
    }


def test_malformed_quantity_raises() -> None:
    with pytest.raises(QuantityError):
        pod_requests(pod([container(requests={"cpu": "lots"})]))


def test_host_ports() -> None:
    c = container()
    c.ports.add(container_port=80)  # no hostPort: not claimed
    c.ports.add(container_port=8080, host_port=8080)
    c.ports.add(container_port=53, host_port=53, protocol="UDP", host_ip="127.0.0.1")
    sidecar = container("s", restart_policy="Always")
    sidecar.ports.add(container_port=9000, host_port=9001)
    plain_init = container("i")
    plain_init.ports.add(container_port=7000, host_port=7000)
    p = pod([c], init=[sidecar, plain_init])
    assert pod_host_ports(p) == [("0.0.0.0", "TCP", 8080), ("127.0.0.1", "UDP", 53), ("0.0.0.0", "TCP", 9001)]


def test_host_network_claims_container_ports() -> None:
    c = container()
    c.ports.add(container_port=80)
    p = pod([c])
    assert pod_host_ports(p) == []
    p.spec.host_network = True
    assert pod_host_ports(p) == [("0.0.0.0", "TCP", 80)]


# ---------------------------------------------------------------- the documentation's examples


def load_pod(relative: str) -> pb.Pod:
    if not EXAMPLES.is_dir():
        pytest.skip(f"{EXAMPLES} is absent (shared/ is laid beside the repository in CI)")
    path = EXAMPLES / relative
    return load_manifests(path.read_text(encoding="utf-8"), str(path))[0].pod


@pytest.mark.parametrize(
    ("relative", "requests", "limits"),
    [
        # init 200m/64Mi, sidecar 50m/64Mi, app 300m/128Mi: running 350m/192Mi beats init's 200m/64Mi.
        ("pods/multi-container/resources.yaml", {"cpu": 350, "memory": 192 * MI}, {"memory": 192 * MI}),
        (
            "pods/resource/pod-level-resources.yaml",
            {"cpu": 1000, "memory": 100 * MI},
            {"cpu": 1000, "memory": 200 * MI},
        ),
        ("pods/resource/pod-level-cpu-request-limit.yaml", {"cpu": 500}, {"cpu": 1000}),
        ("pods/resource/extended-resource-pod.yaml", {"example.com/dongle": 3}, {"example.com/dongle": 3}),
        ("pods/resource/cpu-request-limit.yaml", {"cpu": 500}, {"cpu": 1000}),
        ("pods/resource/cpu-request-limit-2.yaml", {"cpu": 100000}, {"cpu": 100000}),
        (
            "pods/resource/memory-request-limit-3.yaml",
            {"memory": 1000 * 1024 * MI},
            {"memory": 1000 * 1024 * MI},
        ),
        ("pods/qos/qos-pod-2.yaml", {"memory": 100 * MI}, {"memory": 200 * MI}),
        ("pods/qos/qos-pod-3.yaml", {}, {}),
        ("pods/qos/qos-pod-4.yaml", {"memory": 200 * MI}, {}),
        (
            "policy/high-priority-pod.yaml",
            {"cpu": 500, "memory": 10 * 1024 * MI},
            {"cpu": 500, "memory": 10 * 1024 * MI},
        ),
    ],
)
def test_documentation_examples(relative: str, requests: dict[str, int], limits: dict[str, int]) -> None:
    p = load_pod(relative)
    assert pod_requests(p) == requests
    assert pod_limits(p) == limits


def test_documentation_ports() -> None:
    assert pod_host_ports(load_pod("pods/storage/pv-pod.yaml")) == []
