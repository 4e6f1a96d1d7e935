"""Builders for the scheduler unit tests, in the spirit of upstream's pkg/scheduler/testing
wrappers (st.MakePod / st.MakeNode), so the ported upstream test tables read alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from proto import kse_pb2 as pb
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodeinfo import NodeInfo, Snapshot
from scheduler.framework.types import PodInfo, Status


class PodWrapper:
    def __init__(self) -> None:
        self.p = pb.Pod()

    def obj(self) -> pb.Pod:
        return self.p

    def info(self) -> PodInfo:
        return PodInfo(self.p)

    def name(self, name: str) -> PodWrapper:
        self.p.metadata.name = name
        return self

    def namespace(self, ns: str) -> PodWrapper:
        self.p.metadata.namespace = ns
        return self

    def uid(self, uid: str) -> PodWrapper:
        self.p.metadata.uid = uid
        return self

    def label(self, key: str, value: str) -> PodWrapper:
        self.p.metadata.labels[key] = value
        return self

    def node(self, name: str) -> PodWrapper:
        self.p.spec.node_name = name
        return self

    def nominated(self, name: str) -> PodWrapper:
        self.p.status.nominated_node_name = name
        return self

    def priority(self, value: int) -> PodWrapper:
        self.p.spec.priority = value
        return self

    def terminating(self) -> PodWrapper:
        self.p.metadata.deletion_timestamp = "2024-01-01T00:00:00Z"
        return self

    def container(self, name: str = "", image: str = "") -> PodWrapper:
        c = self.p.spec.containers.add()
        c.name = name or f"con{len(self.p.spec.containers) - 1}"
        c.image = image
        return self

    def req(self, requests: Mapping[str, str]) -> PodWrapper:
        """A container with these requests (upstream Req)."""
        c = self.p.spec.containers.add()
        c.name = f"con{len(self.p.spec.containers) - 1}"
        c.resources.requests.update(requests)
        return self

    def init_req(self, requests: Mapping[str, str]) -> PodWrapper:
        c = self.p.spec.init_containers.add()
        c.name = f"init{len(self.p.spec.init_containers) - 1}"
        c.resources.requests.update(requests)
        return self

    def sidecar_req(self, requests: Mapping[str, str]) -> PodWrapper:
        """A restartable init container (sidecar) with these requests (upstream SidecarReq)."""
        c = self.p.spec.init_containers.add()
        c.name = f"sidecar{len(self.p.spec.init_containers) - 1}"
        c.restart_policy = "Always"
        c.resources.requests.update(requests)
        return self

    def pod_level_requests(self, requests: Mapping[str, str]) -> PodWrapper:
        self.p.spec.resources.requests.update(requests)
        return self

    def overhead(self, overhead: Mapping[str, str]) -> PodWrapper:
        self.p.spec.overhead.update(overhead)
        return self

    def host_port(self, port: int, protocol: str = "", host_ip: str = "") -> PodWrapper:
        c = self.p.spec.containers.add()
        c.name = f"con{len(self.p.spec.containers) - 1}"
        cp = c.ports.add()
        cp.host_port, cp.container_port, cp.protocol, cp.host_ip = port, port, protocol, host_ip
        return self

    def container_ports(self, ports: Iterable[tuple[str, str, int]]) -> PodWrapper:
        """One container with (protocol, hostIP, hostPort) ports (upstream ContainerPort)."""
        c = self.p.spec.containers.add()
        c.name = f"con{len(self.p.spec.containers) - 1}"
        for protocol, ip, port in ports:
            cp = c.ports.add()
            cp.protocol, cp.host_ip, cp.host_port = protocol, ip, port
        return self

    def init_container_port(self, sidecar: bool, port: int) -> PodWrapper:
        c = self.p.spec.init_containers.add()
        c.name = f"init{len(self.p.spec.init_containers) - 1}"
        if sidecar:
            c.restart_policy = "Always"
        cp = c.ports.add()
        cp.container_port, cp.host_port, cp.protocol = port, port, "TCP"
        return self

    def toleration(self, key: str = "", operator: str = "", value: str = "", effect: str = "") -> PodWrapper:
        t = self.p.spec.tolerations.add()
        t.key, t.operator, t.value, t.effect = key, operator, value, effect
        return self

    def node_selector(self, selector: Mapping[str, str]) -> PodWrapper:
        self.p.spec.node_selector.update(selector)
        return self

    def _required_terms(self) -> pb.NodeSelector:
        return self.p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution

    def node_affinity_in(self, key: str, values: Sequence[str]) -> PodWrapper:
        term = self._required_terms().node_selector_terms.add()
        term.match_expressions.add(key=key, operator="In", values=values)
        return self

    def node_affinity_not_in(self, key: str, values: Sequence[str]) -> PodWrapper:
        term = self._required_terms().node_selector_terms.add()
        term.match_expressions.add(key=key, operator="NotIn", values=values)
        return self

    def spread_constraint(
        self,
        max_skew: int,
        topology_key: str,
        when: str,
        selector: pb.LabelSelector | None,
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: Sequence[str] | None = None,
    ) -> PodWrapper:
        c = self.p.spec.topology_spread_constraints.add()
        c.max_skew, c.topology_key, c.when_unsatisfiable = max_skew, topology_key, when
        if selector is not None:
            c.label_selector.CopyFrom(selector)
        if min_domains is not None:
            c.min_domains = min_domains
        if node_affinity_policy is not None:
            c.node_affinity_policy = node_affinity_policy
        if node_taints_policy is not None:
            c.node_taints_policy = node_taints_policy
        if match_label_keys:
            c.match_label_keys.extend(match_label_keys)
        return self

    def scheduling_gates(self, gates: Sequence[str]) -> PodWrapper:
        for g in gates:
            self.p.spec.scheduling_gates.add(name=g)
        return self


class NodeWrapper:
    def __init__(self) -> None:
        self.n = pb.Node()
        self.capacity({})

    def obj(self) -> pb.Node:
        return self.n

    def name(self, name: str) -> NodeWrapper:
        self.n.metadata.name = name
        return self

    def label(self, key: str, value: str) -> NodeWrapper:
        self.n.metadata.labels[key] = value
        return self

    def capacity(self, resources: Mapping[str, str]) -> NodeWrapper:
        """Capacity and allocatable; pods default to 32, as upstream's st.MakeNode."""
        res = {"pods": "32", **resources}
        for field in (self.n.status.capacity, self.n.status.allocatable):
            field.clear()
            field.update(res)
        return self

    def exact_resources(self, resources: Mapping[str, str]) -> NodeWrapper:
        """Capacity and allocatable exactly these (no pods entry)."""
        for field in (self.n.status.capacity, self.n.status.allocatable):
            field.clear()
            field.update(resources)
        return self

    def allocatable_only(self, resources: Mapping[str, str]) -> NodeWrapper:
        self.n.status.capacity.clear()
        self.n.status.allocatable.clear()
        self.n.status.allocatable.update(resources)
        return self

    def taints(self, taints: Iterable[tuple[str, str, str]]) -> NodeWrapper:
        for key, value, effect in taints:
            self.n.spec.taints.add(key=key, value=value, effect=effect)
        return self

    def unschedulable(self, value: bool = True) -> NodeWrapper:
        self.n.spec.unschedulable = value
        return self

    def images(self, images: Iterable[tuple[Sequence[str], int]]) -> NodeWrapper:
        for names, size in images:
            self.n.status.images.add(names=names, size_bytes=size)
        return self


def make_pod() -> PodWrapper:
    return PodWrapper()


def make_node() -> NodeWrapper:
    return NodeWrapper()


def resource_node(
    name: str, milli_cpu: int, memory: int, extended: Mapping[str, int] | None = None
) -> pb.Node:
    """upstream noderesources makeNode / makeNodeWithExtendedResource: cpu, memory and the
    extended resources, no pods capacity."""
    res = {"cpu": f"{milli_cpu}m", "memory": str(memory)}
    res.update({k: str(v) for k, v in (extended or {}).items()})
    return make_node().name(name).exact_resources(res).obj()


def label_selector(exists: Sequence[str] = (), labels: Mapping[str, str] | None = None) -> pb.LabelSelector:
    ls = pb.LabelSelector()
    for key in exists:
        ls.match_expressions.add(key=key, operator="Exists")
    if labels:
        ls.match_labels.update(labels)
    return ls


def node_info(node: pb.Node | None, *pods: pb.Pod) -> NodeInfo:
    ni = NodeInfo(*pods)
    if node is not None:
        ni.set_node(node)
    return ni


class FakeHandle:
    """A FrameworkHandle over a fixed snapshot; records binds."""

    def __init__(self, snapshot: Snapshot | None = None, bind_error: Exception | None = None) -> None:
        self.snapshot = snapshot or Snapshot()
        self.bound: list[tuple[str, str]] = []
        self.bind_error = bind_error

    def snapshot_shared_lister(self) -> Snapshot:
        return self.snapshot

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        if self.bind_error is not None:
            raise self.bind_error
        self.bound.append((pod.metadata.name, node_name))


def new_state() -> CycleState:
    return CycleState()


def score_all(
    plugin: Any, pod: pb.Pod, snapshot: Snapshot, run_pre_score: bool = True
) -> tuple[list[int], list[Status | None]]:
    """PreScore (optionally) then Score on every node of the snapshot, in order; when the plugin
    also has the batch `score_nodes`, assert it gives the same scores."""
    state = new_state()
    pod_info = PodInfo(pod)
    if run_pre_score:
        status = plugin.pre_score(state, pod_info, snapshot.list())
        assert status is None, status
    scores: list[int] = []
    statuses: list[Status | None] = []
    for ni in snapshot.list():
        score, status = plugin.score(state, pod_info, ni)
        scores.append(score)
        statuses.append(status)
    if hasattr(plugin, "score_nodes") and all(s is None for s in statuses):
        batch = plugin.score_nodes(state, pod_info, snapshot, np.arange(snapshot.num_nodes()))
        assert batch.tolist() == scores
    return scores, statuses
