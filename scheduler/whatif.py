"""`kse what-if`: one scheduling cycle for a pod against a cluster described in a file, with every
node evaluated and explained.

The cluster is the Nodes and the bound Pods (those with `spec.nodeName`) of a manifest
(multi-document YAML, JSON, or `kind: List`), with its Namespaces, PriorityClasses and
PodDisruptionBudgets; other pods and kinds are ignored. The profile is
the default one, or the first profile of a KubeSchedulerConfiguration file. The cycle is the
scheduler's own (PreEnqueue, PreFilter, Filter, PreScore, Score, selection) with
percentageOfNodesToScore forced to 100, so that every node is filtered, and every feasible node
is scored even when only one fits (the scheduler itself would not score a single feasible node;
it picks the same node).

As the API server would store them: a node without `status.allocatable` gets its capacity
(upstream SetDefaults_NodeStatus); a pod without a namespace is in "default"; a pod without
`spec.priority` gets the value (and preemptionPolicy) of its `priorityClassName`, or of the
globalDefault PriorityClass (priority admission; an unknown class is an error naming the field).

When no node passes Filter and the profile has PostFilter plugins (DefaultPreemption by
default), they run as in the scheduler, deleting nothing: the result says which node the pod
would be nominated to, the victims there, and every candidate node of the dry run with its
victims (`postFilter` in the JSON).

Per node: whether it passed Filter, else the plugin that rejected it and why (a PreEnqueue or
PreFilter rejection, e.g. scheduling gates or a nodeName not in the cluster, rejects every node
with that plugin); each Score plugin's score after its NormalizeScore and before its weight
(plugins that PreScore skipped for this pod do not appear); the weighted total.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kse.objects.manifest import ManifestError, load_manifests
from kse.objects.podaffinity import apply_match_label_keys
from proto import kse_pb2 as pb
from scheduler.algorithm import FeasibleNodes, SchedulingError, score_feasible
from scheduler.apis.config import ConfigError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodeinfo import Snapshot
from scheduler.framework.preemption.evaluator import Evaluator, default_offset_rand, last_outcomes
from scheduler.framework.runtime import Framework
from scheduler.framework.types import Code, Diagnosis, FitError, PodInfo, Status
from scheduler.profile import load_scheduler_config, new_framework

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"


class WhatIfError(Exception):
    """A problem with the inputs; `exit_code` is what the command exits with (1: a file,
    2: the scheduler configuration)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class NodeOutcome:
    passed: bool
    plugin: str | None = None
    reasons: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)  # after NormalizeScore, before weight
    total: int = 0  # weighted sum


@dataclass
class PostFilterOutcome:
    """What PostFilter (preemption) would do: the plugin, the node the pod would be nominated
    to (None: none), the victims there and each candidate node's victims ("ns/name", sorted)."""

    plugin: str
    nominated_node: str | None = None
    victims: list[str] = field(default_factory=list)
    candidates: dict[str, list[str]] = field(default_factory=dict)
    message: str = ""  # the PostFilter status message, for the table

    def to_json(self) -> dict[str, Any]:
        return {
            "plugin": self.plugin,
            "nominatedNode": self.nominated_node,
            "victims": list(self.victims),
            "candidates": {node: list(v) for node, v in self.candidates.items()},
        }


@dataclass
class Cluster:
    """The objects of a cluster file that what-if uses."""

    nodes: list[pb.Node] = field(default_factory=list)
    pods: list[pb.Pod] = field(default_factory=list)  # bound
    namespaces: list[pb.Namespace] = field(default_factory=list)
    priority_classes: list[pb.PriorityClass] = field(default_factory=list)
    pdbs: list[pb.PodDisruptionBudget] = field(default_factory=list)


@dataclass
class WhatIfResult:
    pod: str  # namespace/name
    profile: str
    nodes: dict[str, NodeOutcome]  # in cluster order
    feasible: list[str]
    selected: str | None
    score_plugins: list[str]  # Score plugins that ran, in order
    weights: dict[str, int]
    message: str = ""  # when no node fits: the scheduler's FitError message
    post_filter: PostFilterOutcome | None = None  # when no node fits and PostFilter ran

    def to_json(self) -> dict[str, Any]:
        """The `-o json` document."""
        out = {
            "pod": self.pod,
            "nodes": {
                name: {
                    "filter": {"pass": o.passed, "plugin": o.plugin, "reasons": list(o.reasons)},
                    "scores": dict(o.scores),
                    "total": o.total,
                }
                for name, o in self.nodes.items()
            },
            "feasible": list(self.feasible),
            "selected": self.selected,
        }
        if self.post_filter is not None:
            out["postFilter"] = self.post_filter.to_json()
        return out


# ------------------------------------------------------------------------------------ inputs


def _read(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise WhatIfError(f"cannot read {what} file {str(path)!r}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise WhatIfError(f"cannot read {what} file {str(path)!r}: not UTF-8 text") from None


def _load(path: str | Path, what: str) -> list[pb.Object]:
    text = _read(path, what)
    try:
        return load_manifests(text, str(path))
    except ManifestError as e:
        raise WhatIfError(f"invalid {what} file: {e}") from None


def _default_node(node: pb.Node) -> pb.Node:
    if not node.status.allocatable and node.status.capacity:
        node.status.allocatable.update(node.status.capacity)
    return node


def _default_pod(pod: pb.Pod) -> pb.Pod:
    if not pod.metadata.namespace:
        pod.metadata.namespace = DEFAULT_NAMESPACE
    return pod


def load_cluster(path: str | Path) -> tuple[list[pb.Node], list[pb.Pod]]:
    """The Nodes and the bound Pods of a manifest file."""
    cluster = load_cluster_objects(path)
    return cluster.nodes, cluster.pods


def load_cluster_objects(path: str | Path) -> Cluster:
    """The Nodes, bound Pods, Namespaces, PriorityClasses and PodDisruptionBudgets of a
    manifest file; the pods' priorities resolved from the PriorityClasses."""
    cluster = Cluster()
    for obj in _load(path, "cluster"):
        kind = obj.WhichOneof("kind")
        if kind == "node":
            cluster.nodes.append(_default_node(obj.node))
        elif kind == "pod" and obj.pod.spec.node_name:
            cluster.pods.append(_default_pod(obj.pod))
        elif kind == "namespace":
            cluster.namespaces.append(obj.namespace)
        elif kind == "priority_class":
            cluster.priority_classes.append(obj.priority_class)
        elif kind == "pod_disruption_budget":
            pdb = obj.pod_disruption_budget
            if not pdb.metadata.namespace:
                pdb.metadata.namespace = DEFAULT_NAMESPACE
            cluster.pdbs.append(pdb)
    for pod in cluster.pods:
        resolve_priority(pod, cluster.priority_classes)
    return cluster


# Built-in classes the API server always has (scheduling/v1 SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"


def resolve_priority(pod: pb.Pod, classes: Sequence[pb.PriorityClass]) -> pb.Pod:
    """Priority admission for a pod without `spec.priority`: its class's value and
    preemptionPolicy (the globalDefault class's, with the lowest value, when it names none; 0
    without one). A class the file does not have is a WhatIfError naming the field."""
    spec = pod.spec
    if spec.HasField("priority"):
        return pod
    value, policy = 0, PREEMPT_LOWER_PRIORITY
    by_name = {pc.metadata.name: pc for pc in classes}
    name = spec.priority_class_name
    if name:
        if name in SYSTEM_PRIORITY_CLASSES:
            value = SYSTEM_PRIORITY_CLASSES[name]
        elif name in by_name:
            value, policy = by_name[name].value, by_name[name].preemption_policy or policy
        else:
            raise WhatIfError(
                f"pod {pod.metadata.namespace}/{pod.metadata.name}: spec.priorityClassName: Not found: "
                f'"{name}": no PriorityClass with name {name} in the cluster file'
            )
    else:
        defaults = [pc for pc in classes if pc.global_default]
        if defaults:
            pc = min(defaults, key=lambda c: c.value)
            value, policy = pc.value, pc.preemption_policy or policy
    spec.priority = value
    if not spec.preemption_policy:
        spec.preemption_policy = policy
    return pod


def load_pod(path: str | Path) -> pb.Pod:
    """The first Pod of a manifest file."""
    for obj in _load(path, "pod"):
        if obj.WhichOneof("kind") == "pod":
            pod = _default_pod(obj.pod)
            apply_match_label_keys(pod)  # what the API server does when it creates the pod
            return pod
    raise WhatIfError(f"no Pod in {str(path)!r}")


def load_framework(config: str | Path | None, snapshot: Snapshot) -> Framework:
    """The framework of the default profile, or of the first profile of `config`, evaluating
    every node."""
    if config is not None:
        text = _read(config, "configuration")
        try:
            cfg = load_scheduler_config(text)
        except ConfigError as e:
            lines = "\n".join(f"  {line}" for line in e.errors)
            raise WhatIfError(f"invalid scheduler configuration {str(config)!r}:\n{lines}", 2) from None
    else:
        cfg = load_scheduler_config()
    if cfg.extenders:
        # Said, not silently skipped: what-if explains the plugins and calls no webhook.
        log.warning(
            "what-if runs the profile's plugins only: the configuration's %d extender(s) are not called",
            len(cfg.extenders),
        )
    try:
        return new_framework(cfg.profiles[0], snapshot=snapshot, percentage_of_nodes_to_score=100)
    except ValueError as e:
        raise WhatIfError(f"invalid scheduler configuration: {e}", 2) from None


# ------------------------------------------------------------------------------------ the cycle


def what_if(
    nodes: Sequence[pb.Node],
    bound_pods: Sequence[pb.Pod],
    pod: pb.Pod,
    *,
    config: str | Path | None = None,
    seed: int | None = 0,
    pdbs: Sequence[pb.PodDisruptionBudget] = (),
) -> WhatIfResult:
    """Run one scheduling cycle for `pod`. Raises WhatIfError (bad configuration, or a plugin
    failed with an error)."""
    pod = _default_pod(pod)
    if not pod.metadata.uid:
        pod.metadata.uid = f"what-if/{pod.metadata.namespace}/{pod.metadata.name}"
    snapshot = Snapshot.from_objects(bound_pods, list(nodes))
    fwk = load_framework(config, snapshot)
    pod_info = PodInfo(pod)
    names = [ni.name for ni in snapshot.node_info_list]
    key = pod_info.key
    result = WhatIfResult(key, fwk.profile_name, {}, [], None, [], {})

    def reject_all(plugin: str | None, reasons: list[str]) -> WhatIfResult:
        result.nodes = {name: NodeOutcome(False, plugin, list(reasons)) for name in names}
        diagnosis = Diagnosis(pre_filter_msg=", ".join(reasons))
        result.message = str(FitError(pod, len(names), diagnosis))
        return result

    def post_filter(statuses: dict[str, Status]) -> None:
        if fwk.has_post_filter_plugins() and names:
            result.post_filter = run_post_filter(fwk, state, pod_info, statuses, pdbs, seed)

    s = fwk.run_pre_enqueue_plugins(pod_info)
    if s is not None and s.code != Code.SUCCESS:
        return reject_all(s.plugin or None, s.reasons)

    state = CycleState()
    pre_res, s, plugins_with_nodes = fwk.run_pre_filter_plugins(state, pod_info)
    narrowing = ", ".join(sorted(plugins_with_nodes)) or None
    if s is not None and s.code != Code.SUCCESS:
        if not s.is_rejected():
            raise WhatIfError(f"scheduling failed: {s.message()}")
        reject_all(s.plugin or narrowing, s.reasons)
        post_filter({name: s for name in names})  # every node has PreFilter's status
        return result

    allowed = None if pre_res is None or pre_res.all_nodes() else pre_res.node_names or set()
    absent = Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        [f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins_with_nodes))}]"],
    )
    feasible_idx: list[int] = []
    diagnosis = Diagnosis()
    if allowed is not None:
        diagnosis.absent_nodes_status = absent
    for i, ni in enumerate(snapshot.node_info_list):
        if allowed is not None and ni.name not in allowed:
            result.nodes[ni.name] = NodeOutcome(False, narrowing, list(absent.reasons))
            continue
        st = fwk.run_filter_plugins(state, pod_info, ni)
        if st is None or st.code == Code.SUCCESS:
            result.nodes[ni.name] = NodeOutcome(True)
            feasible_idx.append(i)
        elif st.code == Code.ERROR:
            raise WhatIfError(f"scheduling failed on node {ni.name!r}: {st.message()}")
        else:
            result.nodes[ni.name] = NodeOutcome(False, st.plugin or None, list(st.reasons))
            diagnosis.node_to_status[ni.name] = st
    result.feasible = [names[i] for i in feasible_idx]
    if not feasible_idx:
        result.message = str(FitError(pod, len(names), diagnosis))
        post_filter({name: diagnosis.status_of(name) for name in names})
        return result

    feasible = FeasibleNodes(snapshot, np.array(feasible_idx, dtype=np.intp))
    rng = random.Random(seed)
    if not fwk.has_score_plugins():
        for name in result.feasible:
            result.nodes[name].total = 1
        result.selected = result.feasible[0] if len(feasible_idx) == 1 else rng.choice(result.feasible)
        return result
    try:
        matrix = score_feasible(fwk, state, pod_info, feasible)
    except SchedulingError as e:
        raise WhatIfError(f"scoring failed: {e}") from None
    result.score_plugins = list(matrix.plugins)
    result.weights = dict(zip(matrix.plugins, matrix.weights, strict=True))
    columns = matrix.scores.T.tolist()
    totals = matrix.totals.tolist()
    for j, name in enumerate(result.feasible):
        outcome = result.nodes[name]
        outcome.scores = dict(zip(matrix.plugins, columns[j], strict=True))
        outcome.total = totals[j]
    best = [j for j, t in enumerate(totals) if t == max(totals)]
    # The scheduler's own rule: one node fits, or uniformly at random among the best.
    pick = best[0] if len(best) == 1 else best[rng.randrange(len(best))]
    result.selected = result.feasible[pick]
    return result


def run_post_filter(
    fwk: Framework,
    state: CycleState,
    pod_info: PodInfo,
    statuses: dict[str, Status],
    pdbs: Sequence[pb.PodDisruptionBudget],
    seed: int | None,
) -> PostFilterOutcome:
    """The profile's PostFilter plugins, as the scheduler runs them after a FitError; a
    preemption plugin reports its dry run (it deletes nothing: there is no executor)."""
    preemptors = [(name, fwk.plugins_map[name]) for name in fwk.list_plugins().get("postFilter", [])]
    for _, plugin in preemptors:
        evaluator = getattr(plugin, "evaluator", None)
        if isinstance(evaluator, Evaluator):
            evaluator.pdbs = list(pdbs)
        if hasattr(plugin, "offset_rand"):
            plugin.offset_rand = default_offset_rand(random.Random(seed))
    res, s = fwk.run_post_filter_plugins(state, pod_info, statuses)
    if s is not None and s.code == Code.ERROR:
        raise WhatIfError(f"PostFilter failed: {s.message()}")
    nominated = res.nominated_node_name if res is not None and res.nominated_node_name else None
    name = (s.plugin if s is not None and s.plugin else "") or preemptors[0][0]
    outcome = PostFilterOutcome(name, nominated, message=s.message() if s is not None else "")
    for plugin_name, report in last_outcomes(fwk.plugins_map, [n for n, _ in preemptors]):
        if nominated is not None and report.chosen is not None and report.chosen.name == nominated:
            outcome.plugin = plugin_name
            outcome.victims = sorted(_key(v) for v in report.chosen.victims)
        for c in report.candidates:
            outcome.candidates.setdefault(c.name, sorted(_key(v) for v in c.victims))
    return outcome


def _key(pod: pb.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def what_if_files(
    cluster: str | Path, pod: str | Path, config: str | Path | None = None, seed: int | None = 0
) -> WhatIfResult:
    objects = load_cluster_objects(cluster)
    the_pod = resolve_priority(load_pod(pod), objects.priority_classes)
    return what_if(objects.nodes, objects.pods, the_pod, config=config, seed=seed, pdbs=objects.pdbs)


# ------------------------------------------------------------------------------------ output


def format_table(result: WhatIfResult) -> str:
    """A row per node, a column per Score plugin (its score before weight; "-" when the node
    did not pass), FILTER (PASS, or the rejecting plugin and reasons) and TOTAL; the selected
    node is marked with "*"."""
    from kse.printers import render_table

    header = ["", "NODE", "FILTER"]
    header += [f"{p} (x{result.weights.get(p, 1)})" for p in result.score_plugins]
    header.append("TOTAL")
    rows = []
    for name, o in result.nodes.items():
        if o.passed:
            verdict = "PASS"
        else:
            verdict = f"{o.plugin or '-'}: {'; '.join(o.reasons) or 'rejected'}"
        row = ["*" if name == result.selected else "", name, verdict]
        row += [str(o.scores[p]) if p in o.scores else "-" for p in result.score_plugins]
        row.append(str(o.total) if o.passed else "-")
        rows.append(row)
    out = f"pod {result.pod} (profile {result.profile})\n" + render_table(header, rows)
    if result.selected is not None:
        out += f"selected: {result.selected} ({len(result.feasible)}/{len(result.nodes)} nodes feasible)\n"
    else:
        out += f"no node fits: {result.message}\n"
    pf = result.post_filter
    if pf is not None:
        if pf.nominated_node is not None:
            victims = ", ".join(pf.victims)
            out += f"{pf.plugin}: would nominate {pf.nominated_node}, preempting {victims}\n"
        else:
            out += f"{pf.plugin}: {pf.message or 'no node nominated'}\n"
        if pf.candidates:
            rows = [[node, str(len(v)), ", ".join(v)] for node, v in pf.candidates.items()]
            out += render_table(["CANDIDATE", "VICTIMS", "PODS"], rows)
    return out
