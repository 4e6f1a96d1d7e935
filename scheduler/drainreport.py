"""`kse drain --report`: a drain plan (scheduler.drainplan, as JSON) against what happened.

Two comparisons, both on the pods as they are now:

* per planned pod: the plan said the drain removes it (evict/delete) or leaves it (skip, blocked,
  blocked indefinitely); now it is gone, or still there (same uid);
* per controller (namespace/Kind/name) of the removed pods: the nodes the plan gave the
  replacements (null: Pending) against the nodes of the controller's new pods (uids the plan did not
  know, created at or after `since`, default the plan's time). Replacement pods have fresh names, so
  they are compared as multisets of nodes, not one by one. For a Pending replacement, the message
  of its PodScheduled=False condition (what the scheduler reported) is shown beside the predicted one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kse.drain.filters import controller_of
from kse.objects.timeutil import to_epoch
from proto import kse_pb2 as pb

REMOVING_ACTIONS = ("evict", "delete")


class ReportError(Exception):
    """The plan document is not one `kse drain --plan -o json` wrote."""


@dataclass
class PodCheck:
    pod: str
    planned: str  # removed | kept
    actual: str  # removed | kept
    match: bool


@dataclass
class ReplacementCheck:
    controller: str
    planned: list[str | None]
    actual: list[str | None]
    match: bool
    planned_messages: list[str] = field(default_factory=list)
    actual_messages: list[str] = field(default_factory=list)


@dataclass
class DrainReport:
    nodes: list[str]
    pods: list[PodCheck]
    replacements: list[ReplacementCheck]

    @property
    def mismatches(self) -> int:
        return sum(not c.match for c in self.pods) + sum(not c.match for c in self.replacements)

    @property
    def matches(self) -> int:
        return sum(c.match for c in self.pods) + sum(c.match for c in self.replacements)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "DrainReport",
            "nodes": list(self.nodes),
            "pods": [
                {"pod": c.pod, "planned": c.planned, "actual": c.actual, "match": c.match} for c in self.pods
            ],
            "replacements": [
                {
                    "controller": c.controller,
                    "planned": list(c.planned),
                    "actual": list(c.actual),
                    "match": c.match,
                    "plannedMessages": list(c.planned_messages),
                    "actualMessages": list(c.actual_messages),
                }
                for c in self.replacements
            ],
            "summary": {"matches": self.matches, "mismatches": self.mismatches},
        }


def _unschedulable_message(pod: pb.Pod) -> str:
    for c in pod.status.conditions:
        if c.type == "PodScheduled" and c.status == "False":
            return c.message
    return ""


def _sort_key(node: str | None) -> tuple[int, str]:
    return (1, "") if node is None else (0, node)


def compare(plan: dict[str, Any], pods: Sequence[pb.Pod], since: float | None = None) -> DrainReport:
    """The report of `plan` (its JSON document) against the current `pods`. Raises ReportError."""
    if (
        not isinstance(plan, dict)
        or plan.get("kind") != "DrainPlan"
        or not isinstance(plan.get("pods"), list)
    ):
        raise ReportError("not a drain plan (expected the JSON of `kse drain --plan -o json`)")
    if since is None:
        try:
            since = to_epoch(str(plan.get("createdAt", ""))) - 1.0  # its time has whole seconds
        except ValueError:
            raise ReportError("the plan has no valid createdAt; give --since") from None
    present = {p.metadata.uid for p in pods if not p.metadata.deletion_timestamp}
    checks: list[PodCheck] = []
    planned_reps: dict[str, list[tuple[str | None, str]]] = {}
    for item in plan["pods"]:
        removed = item.get("action") in REMOVING_ACTIONS and item.get("blockedBy") != "indefinitely"
        planned = "removed" if removed else "kept"
        actual = "kept" if item.get("uid") in present else "removed"
        checks.append(PodCheck(str(item.get("pod")), planned, actual, planned == actual))
        rep = item.get("replacement")
        if removed and isinstance(rep, dict) and item.get("controller"):
            key = f"{str(item['pod']).split('/', 1)[0]}/{item['controller']}"
            planned_reps.setdefault(key, []).append((rep.get("node"), str(rep.get("message") or "")))
    known = plan.get("knownUids") or {}
    actual_reps: dict[str, list[pb.Pod]] = {k: [] for k in planned_reps}
    for pod in pods:
        ref = controller_of(pod)
        if ref is None or pod.metadata.deletion_timestamp:
            continue
        key = f"{pod.metadata.namespace}/{ref.kind}/{ref.name}"
        if key not in actual_reps or pod.metadata.uid in set(known.get(key, ())):
            continue
        try:
            created = to_epoch(pod.metadata.creation_timestamp)
        except ValueError:
            continue
        if created >= since:
            actual_reps[key].append(pod)
    rep_checks = []
    for key, planned_list in planned_reps.items():
        want = sorted((n for n, _ in planned_list), key=_sort_key)
        got_pods = actual_reps[key]
        got = sorted((p.spec.node_name or None for p in got_pods), key=_sort_key)
        rep_checks.append(
            ReplacementCheck(
                key,
                want,
                got,
                Counter(want) == Counter(got),
                [m for n, m in planned_list if n is None],
                [_unschedulable_message(p) for p in got_pods if not p.spec.node_name],
            )
        )
    return DrainReport([str(n) for n in plan.get("nodes", [])], checks, rep_checks)


def format_table(report: DrainReport) -> str:
    from kse.printers import render_table

    def nodes(ns: list[str | None]) -> str:
        return ", ".join(n or "<pending>" for n in ns) or "-"

    out = render_table(
        ["POD", "PLANNED", "ACTUAL", "MATCH"],
        [[c.pod, c.planned, c.actual, "yes" if c.match else "NO"] for c in report.pods],
    )
    if report.replacements:
        out += "\n" + render_table(
            ["CONTROLLER", "PLANNED NODES", "ACTUAL NODES", "MATCH"],
            [
                [c.controller, nodes(c.planned), nodes(c.actual), "yes" if c.match else "NO"]
                for c in report.replacements
            ],
        )
        for c in report.replacements:
            for m in c.planned_messages:
                out += f"{c.controller}: predicted Pending: {m}\n"
            for m in c.actual_messages:
                out += f"{c.controller}: actually Pending: {m or '(not yet tried)'}\n"
    out += f"summary: {report.matches} match, {report.mismatches} mismatch\n"
    return out
