"""Extenders in preemption (upstream ``callExtenders`` in
``pkg/scheduler/framework/preemption/preemption.go``).

After DefaultPreemption has found candidate nodes and their victims, each interested extender
that has a preemptVerb may narrow them: it gets the candidates, answers with the nodes (and
victims) it agrees with, and the next extender gets that answer. An extender that fails is
skipped when ignorable; otherwise preemption fails with its error. A node the answer leaves with
no victim is an error (``expected at least one victim pod on node "x"``), or dropped when the
extender is ignorable. Once no node is left, no later extender is asked.

The preemption evaluator's ``call_extenders`` (``Evaluator.preempt_async``, which the scheduler
runs when it has extenders) calls ``process_preemption(handle.extenders(), pod, victims,
pods_on_node)`` with its candidates as node name -> (victim pods, PDB violations) and turns the
answer back into candidates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from proto import kse_pb2 as pb

from .http import ExtenderError, HTTPExtender, Victims

log = logging.getLogger(__name__)


async def process_preemption(
    extenders: Sequence[HTTPExtender],
    pod: pb.Pod,
    victims: Mapping[str, Victims],
    pods_on_node: Callable[[str], Sequence[pb.Pod] | None],
) -> dict[str, Victims]:
    """The candidates (node name -> victims) once every interested preempting extender had its
    say. Raises ExtenderError from a failing non-ignorable extender."""
    current: dict[str, Victims] = dict(victims)
    if not extenders or not current:
        return current
    for extender in extenders:
        if not extender.supports_preemption() or not extender.is_interested(pod):
            continue
        try:
            answer = await extender.process_preemption(pod, current, pods_on_node)
        except ExtenderError as e:
            if extender.is_ignorable():
                log.info(
                    "Skipped extender %s as it returned error and has ignorable flag set: %s",
                    extender.name(),
                    e,
                )
                continue
            raise
        for node, (pods, _pdb) in list(answer.items()):
            if not pods:
                if extender.is_ignorable():
                    log.info(
                        "Ignored node %s for which the extender %s didn't report victims",
                        node,
                        extender.name(),
                    )
                    del answer[node]
                    continue
                raise ExtenderError(f'expected at least one victim pod on node "{node}"')
        current = answer
        if not current:
            break
    return current
