"""What the chaos runner and the failover benchmark set up alike: the API server's fencing flags, the
workload's churn, and the final state both judge.

One definition each, so a scenario run and a benchmark trial run the same cluster shape and read
their end state the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kse.client.clientset import Clientset
    from proto import kse_pb2 as pb

__all__ = ["SCHEDULER_USER", "churn_delete_after", "created_ts", "fencing_args", "final_state"]

SCHEDULER_USER = "system:kube-scheduler"


def fencing_args(on: bool = True) -> tuple[str, ...]:
    """Fencing on: the API server checks every fence token in the write's transaction, and refuses
    a scheduler write that carries none (Lease writes excepted), so nothing gets past unfenced."""
    if on:
        return ("--fencing", "on", "--require-fence-for", SCHEDULER_USER)
    return ("--fencing", "off")


def churn_delete_after(nodes: int, rate: float) -> float:
    """Workload churn: each pod is deleted this long after it runs (`kse up`'s default, see
    `harness.up.plan.steady_pod_lifetime`)."""
    from harness.up.plan import steady_pod_lifetime

    return steady_pod_lifetime(nodes, rate)


def created_ts(pod: pb.Pod) -> float | None:
    """The pod's creationTimestamp (RFC 3339) as epoch seconds; None if it has none."""
    text = pod.metadata.creation_timestamp
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


async def final_state(
    clientset: Clientset,
    *,
    stop_workload: Callable[[], Awaitable[object]] | None,
    settle_s: float,
    young_s: float = 0.0,
    until_ready: bool = False,
    say: Callable[[str], None] = lambda _m: None,
) -> tuple[list[pb.Pod], list[pb.Node], float, int]:
    """Stop the workload (if we own it), give the leader up to `settle_s` to bind what is pending,
    then list pods and nodes; returns them, the wall-clock time the pods were listed at, and the
    list's revision (a pod created after it cannot be in the snapshot: `no_pod_vanished`).
    `until_ready`: also wait (within `settle_s`) until every bound pod that is not terminating is
    Ready, for a measurement that ends when the workload is whole again (`kse bench drain`).

    With a workload still running (attached to a cluster we did not start), pods keep arriving:
    pending pods younger than `young_s` (by creationTimestamp) are not waited for; the checker is
    told the same (`check(..., young_after=...)`).
    """
    from kse.objects.disruption import is_pod_ready  # here: importing this module stays light

    if stop_workload is not None:
        await stop_workload()
    deadline = time.monotonic() + settle_s
    while True:
        listed_at = time.time()
        listed = await clientset.pods.list_all("")
        pods = listed.items
        cutoff = listed_at - young_s
        pending = [
            p
            for p in pods
            if not p.spec.node_name
            and not p.metadata.deletion_timestamp
            and (not young_s or (created_ts(p) or 0.0) < cutoff)
        ]
        unready: list[pb.Pod] = []
        if until_ready:
            unready = [
                p
                for p in pods
                if p.spec.node_name and not p.metadata.deletion_timestamp and not is_pod_ready(p)
            ]
        if not (pending or unready) or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.2)
    if pending:
        say(f"{len(pending)} pods still pending after {settle_s:g}s")
    if unready:
        say(f"{len(unready)} bound pods still not Ready after {settle_s:g}s")
    nodes = (await clientset.nodes.list_all("")).items
    return pods, nodes, listed_at, int(listed.resource_version or 0)
