"""`kse what-if`: one scheduling cycle for a pod against a cluster described in a file, with every
node evaluated and explained.

The cluster is the Nodes and the bound Pods (those with `spec.nodeName`) of a manifest
(multi-document YAML, JSON, or `kind: List`); other pods and kinds are ignored. The profile is
the default one, or the first profile of a KubeSchedulerConfiguration file. The cycle is the
scheduler's own (PreEnqueue, PreFilter, Filter, PreScore, Score, selection) with
percentageOfNodesToScore forced to 100, so that every node is filtered, and every feasible node
is scored even when only one fits (the scheduler itself would not score a single feasible node;
it picks the same node).

As the API server would store them: a node without `status.allocatable` gets its capacity
(upstream SetDefaults_NodeStatus); a pod without a namespace is in "default".

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
class WhatIfResult:
    pod: str  # namespace/name
    profile: str
    nodes: dict[str, NodeOutcome]  # in cluster order
    feasible: list[str]
    selected: str | None
    score_plugins: list[str]  # Score plugins that ran, in order
    weights: dict[str, int]
    message: str = ""  # when no node fits: the scheduler's FitError message

    def to_json(self) -> dict[str, Any]:
        """The `-o json` document."""
        return {
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
    nodes: list[pb.Node] = []
    pods: list[pb.Pod] = []
    for obj in _load(path, "cluster"):
        kind = obj.WhichOneof("kind")
        if kind == "node":
            nodes.append(_default_node(obj.node))
        elif kind == "pod" and obj.pod.spec.node_name:
            pods.append(_default_pod(obj.pod))
    return nodes, pods


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

    s = fwk.run_pre_enqueue_plugins(pod_info)
    if s is not None and s.code != Code.SUCCESS:
        return reject_all(s.plugin or None, s.reasons)

    state = CycleState()
    pre_res, s, plugins_with_nodes = fwk.run_pre_filter_plugins(state, pod_info)
    narrowing = ", ".join(sorted(plugins_with_nodes)) or None
    if s is not None and s.code != Code.SUCCESS:
        if not s.is_rejected():
            raise WhatIfError(f"scheduling failed: {s.message()}")
        return reject_all(s.plugin or narrowing, s.reasons)

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


def what_if_files(
    cluster: str | Path, pod: str | Path, config: str | Path | None = None, seed: int | None = 0
) -> WhatIfResult:
    nodes, bound = load_cluster(cluster)
    return what_if(nodes, bound, load_pod(pod), config=config, seed=seed)


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
    return out
