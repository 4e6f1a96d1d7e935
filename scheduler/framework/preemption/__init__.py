"""Preemption (upstream ``pkg/scheduler/framework/preemption``): the Evaluator that finds the
candidate nodes by dry runs, picks one, and prepares it (victims deleted asynchronously), and the
contract a PostFilter plugin implements to plug its own victim selection into it."""

from .evaluator import (
    Candidate,
    Evaluator,
    PreemptionExecutor,
    PreemptionHandle,
    PreemptionInterface,
    pick_one_node_for_preemption,
)
from .util import earliest_pod_start_time, more_important_pod, pod_start_time

__all__ = [
    "Candidate",
    "Evaluator",
    "PreemptionExecutor",
    "PreemptionHandle",
    "PreemptionInterface",
    "earliest_pod_start_time",
    "more_important_pod",
    "pick_one_node_for_preemption",
    "pod_start_time",
]
