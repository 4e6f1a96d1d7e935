"""A rolling node upgrade, the `node-upgrade` fault: batch after batch, what an operator does to
upgrade kubelets (kubectl cordon, kubectl drain, upgrade, kubectl uncordon):

1. cordon every node of the batch (`kse.drain`), each recorded as a fault record "cordon" with
   `detail["revision"]` the resourceVersion of the node update that set spec.unschedulable (what
   `no_bind_to_cordoned` holds binds against);
2. drain the batch's nodes together with the `Drainer`, as `kubectl drain --force
   --ignore-daemonsets --delete-emptydir-data` (evictions, retried while a budget refuses: 429);
3. "upgrade": the batch's kubelets stopped in nodesim for `duration` s, then started reporting a
   new kubeletVersion (`KubeletSwitch`, the backend's `set_kubelets`);
4. wait until every node of the batch is Ready again with that version (polled, with a deadline);
5. uncordon each node (a record "uncordon" with its revision), then `pause` s before the next batch.

The whole fault is a window: a "node_upgrade" record with phase start and one with phase end (its
detail: nodes upgraded, evictions sent and refused); the cordons carry `part_of`. Retries are
every `RETRY_S` s rather than kubectl's 5 s, so a short run sees several refusals and retries.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from chaos.local_backend import natural_key
from chaos.scenario import FaultSpec
from kse.client.errors import ApiError
from kse.drain import CordonResult, Drainer, DrainError, DrainOptions, Progress

if TYPE_CHECKING:
    from kse.client.clientset import Clientset
    from proto import kse_pb2 as pb

__all__ = [
    "NODE_UPGRADE_RECORD",
    "KubeletSwitch",
    "NodeUpgradeError",
    "UpgradeStats",
    "pick_nodes",
    "run_node_upgrade",
]

NODE_UPGRADE_RECORD = "node_upgrade"
CORDON, UNCORDON = "cordon", "uncordon"
DEFAULT_DOWN_S = 1.0  # how long a batch's kubelets stay stopped when the fault gives no duration
READY_WITHIN_S = 60.0  # a restarted kubelet's node back Ready with its new version
RETRY_S = 1.0  # between evictions a budget refused (kubectl: 5 s)
# An operator re-runs a step that failed on a transient error (the API server restarting, a
# connection swapped by a certificate rotation): each step is retried for this long.
STEP_RETRY_WITHIN_S = 45.0
TRANSIENT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN"})
POLL_S = 0.25
UPGRADED_VERSION = "v1.33.0-kse.upgraded"

T = TypeVar("T")
Record = Callable[[float, str, str, dict[str, Any]], object]


class NodeUpgradeError(RuntimeError):
    """The upgrade could not go on: an unknown node, a drain that failed, a node not back Ready."""


class KubeletSwitch(Protocol):
    """Stops and starts simulated kubelets (the local backend: nodesim's `--control-file`)."""

    async def set_kubelets(self, stopped: Collection[str], versions: Mapping[str, str]) -> None: ...


@dataclass
class UpgradeStats:
    """What a node upgrade did, for its end record and for `kse bench drain`."""

    upgraded: list[str] = field(default_factory=list)
    evictions: int = 0  # eviction requests sent (retries included)
    refused: int = 0  # of them refused by a budget (429)
    evicted: int = 0  # pods gone after their eviction
    # per evicted pod (namespace/name): the wall time its eviction was accepted (its last send)
    evicted_at: dict[str, float] = field(default_factory=dict)
    first_cordon: float | None = None
    last_drained: float | None = None

    def on_progress(self, p: Progress) -> None:
        now = time.time()
        if p.kind == "evicting":
            self.evictions += 1
            self.evicted_at[p.pod] = now
        elif p.kind == "retry":
            self.refused += 1
        elif p.kind == "evicted":
            self.evicted += 1


def pick_nodes(spec_nodes: int | tuple[str, ...], names: Sequence[str]) -> list[str]:
    """The nodes a node-upgrade takes: the first N by natural name order, or the listed ones (each
    must exist)."""
    ordered = sorted(names, key=natural_key)
    if isinstance(spec_nodes, int):
        if spec_nodes > len(ordered):
            raise NodeUpgradeError(f"nodes: {spec_nodes} asked for, the cluster has {len(ordered)}")
        return ordered[:spec_nodes]
    missing = [n for n in spec_nodes if n not in names]
    if missing:
        raise NodeUpgradeError(f"nodes: no such node(s): {', '.join(missing)}")
    return list(spec_nodes)


async def _retrying(what: str, op: Callable[[], Awaitable[T]], say: Callable[[str], None]) -> T:
    """`op()`, again after a transient API error or a failed drain (kubectl drain is safe to run
    again: it lists the node's pods anew), for up to `STEP_RETRY_WITHIN_S`."""
    deadline = time.monotonic() + STEP_RETRY_WITHIN_S
    while True:
        try:
            return await op()
        except (ApiError, DrainError) as e:
            if isinstance(e, ApiError) and e.code_name not in TRANSIENT:
                raise NodeUpgradeError(f"{what}: {e.code_name}: {e.message}") from e
            if time.monotonic() >= deadline:
                raise NodeUpgradeError(f"{what}: {e}") from e
            say(f"node-upgrade: {what} failed ({e}); again")
            await asyncio.sleep(RETRY_S)


def batches(nodes: Sequence[str], size: int) -> list[list[str]]:
    return [list(nodes[i : i + size]) for i in range(0, len(nodes), size)]


def _ready_with(node: pb.Node, version: str) -> bool:
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    return ready and node.status.node_info.kubelet_version == version


async def _wait_ready(cs: Clientset, names: Sequence[str], version: str, within: float) -> None:
    deadline = time.monotonic() + within
    waiting = list(names)
    while waiting:
        waiting = [n for n in waiting if not _ready_with(await cs.nodes.get(n), version)]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise NodeUpgradeError(
                f"node(s) {', '.join(waiting)} not Ready with kubelet {version} within {within:g}s"
            )
        await asyncio.sleep(POLL_S)


async def _cordon(drainer: Drainer, node: str, desired: bool, say: Callable[[str], None]) -> CordonResult:
    what = f"{'cordon' if desired else 'uncordon'} {node}"
    return await _retrying(what, functools.partial(drainer.cordon, node, desired), say)


def drain_options(spec: FaultSpec) -> DrainOptions:
    """kubectl drain --force --ignore-daemonsets --delete-emptydir-data [--grace-period] [--timeout]."""
    return DrainOptions(
        force=True,
        ignore_daemonsets=True,
        delete_emptydir_data=True,
        grace_period=-1 if spec.grace is None else spec.grace,
        timeout=spec.timeout or 0.0,
        retry_interval=RETRY_S,
        poll_interval=POLL_S,
    )


async def run_node_upgrade(
    spec: FaultSpec,
    cs: Clientset,
    kubelets: KubeletSwitch,
    record: Record,
    *,
    say: Callable[[str], None] = lambda _m: None,
    stats: UpgradeStats | None = None,
    version: str = UPGRADED_VERSION,
) -> UpgradeStats:
    """Upgrade `spec.nodes` in batches of `spec.batch` (module doc); NodeUpgradeError on failure.
    Records go through `record(ts, fault, target, detail)`."""
    stats = stats if stats is not None else UpgradeStats()
    listing = await _retrying("list nodes", cs.nodes.list, say)
    names = [n.metadata.name for n in listing.items]
    nodes = pick_nodes(spec.nodes if spec.nodes is not None else 1, names)
    drainer = Drainer(cs, drain_options(spec), stats.on_progress)
    down = DEFAULT_DOWN_S if spec.duration is None else spec.duration
    versions: dict[str, str] = {}
    groups = batches(nodes, spec.batch or 1)
    start = {"phase": "start", "nodes": nodes, "batch": spec.batch or 1}
    record(time.time(), NODE_UPGRADE_RECORD, "nodes", start)
    try:
        for i, group in enumerate(groups, 1):
            part = {"part_of": NODE_UPGRADE_RECORD, "batch": i}
            say(f"node-upgrade: batch {i}/{len(groups)}: {', '.join(group)}")
            for node in group:
                ts = time.time()
                if stats.first_cordon is None:
                    stats.first_cordon = ts
                result = await _cordon(drainer, node, True, say)
                record(ts, CORDON, node, part | {"revision": result.revision, "changed": result.changed})
            drains = [_retrying(f"drain {n}", functools.partial(drainer.drain_node, n), say) for n in group]
            for outcome in await asyncio.gather(*drains, return_exceptions=True):
                if isinstance(outcome, BaseException):
                    raise outcome  # the first node's failure (the others' drains are through)
            stats.last_drained = time.time()  # every pod of the batch's nodes gone
            if not spec.upgrade_kubelets:
                stats.upgraded += group
                continue
            for node in group:
                versions[node] = version
            await kubelets.set_kubelets(group, versions)
            await asyncio.sleep(down)  # the "upgrade": the kubelets are down this long
            await kubelets.set_kubelets((), versions)
            ready = functools.partial(_wait_ready, cs, group, version, READY_WITHIN_S)
            await _retrying("wait for Ready", ready, say)
            for node in group:
                ts = time.time()
                result = await _cordon(drainer, node, False, say)
                record(ts, UNCORDON, node, part | {"revision": result.revision, "changed": result.changed})
                stats.upgraded.append(node)
            if spec.pause and i < len(groups):
                await asyncio.sleep(spec.pause)
    finally:
        record(
            time.time(),
            NODE_UPGRADE_RECORD,
            "nodes",
            {
                "phase": "end",
                "upgraded": list(stats.upgraded),
                "evictions": stats.evictions,
                "evictions_refused": stats.refused,
                "evicted": stats.evicted,
            },
        )
    return stats
