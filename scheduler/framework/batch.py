"""The numpy batch engine: Filter and Score over many nodes per plugin call.

The scheduler evaluates one pod against hundreds of nodes per cycle (upstream runs Filter and
Score on 16 goroutines; kse scans in one thread). So, when the framework is built with
`batch=True`, it works on numpy index arrays over `Snapshot.node_info_list` and calls a plugin's
optional batch method (`filter_nodes`, `score_nodes`, and `normalize_scores` on its
ScoreExtensions: `BatchFilterPlugin`, `BatchScorePlugin`, `BatchScoreExtensions` in
`interface.py`) when it has one, falling back to the scalar method per plugin otherwise.

Results are those of the literal node-by-node path (`Framework.run_filter_plugins` per node in
scan order, `Framework.run_score_plugins`): same feasible nodes, same rejected nodes with the
same statuses, same scores, same first Error. Tests check it on random clusters.

The engine is the framework's, not the algorithm's: `Framework.run_filter_plugins_over` and
`Framework.run_score_plugins_over` choose it or the literal path, so `algorithm.py` never
branches on batch vs scalar.
"""

from __future__ import annotations

import bisect
import logging
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BatchFilterPlugin,
    BatchScorePlugin,
    FilterPlugin,
    NodePluginScores,
    NodeScore,
    PluginScore,
    ScorePlugin,
)
from scheduler.framework.nodeinfo import NodeInfo, NodeInfoView, Snapshot
from scheduler.framework.plugin_status import (
    exception_status,
    failed,
    filter_failure,
    invalid_score,
    normalize_failure,
    score_failure,
)
from scheduler.framework.types import Code, PodInfo, Status

log = logging.getLogger(__name__)

I64 = npt.NDArray[np.int64]
IntP = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]

# Smallest number of nodes filtered in one batch (numpy calls cost the same for 1 or 64 rows).
_MIN_FILTER_CHUNK = 64
_MIN_SCALAR_CHUNK = 8

_score_of = operator.attrgetter("score")


# ------------------------------------------------------------------------------------ results


@dataclass
class ScoreMatrix:
    """Scores of the Score plugins that ran (not skipped), for nodes `indices` of the snapshot:
    `scores[k, j]` is plugin k's score of node j after NormalizeScore and before its weight."""

    plugins: list[str]
    weights: list[int]
    indices: IntP
    scores: I64  # shape (len(plugins), len(indices))
    totals: I64  # weighted sums, shape (len(indices),)

    @classmethod
    def of_node_plugin_scores(
        cls, scores: Sequence[NodePluginScores], score_weights: Mapping[str, int], indices: IntP
    ) -> ScoreMatrix:
        """The matrix of what the scalar `run_score_plugins` returned for the nodes `indices`."""
        plugins = [p.name for p in scores[0].scores] if scores else []
        weights = [score_weights[p] for p in plugins]
        raw = np.array(
            [[ps.score // w for ps, w in zip(nps.scores, weights, strict=True)] for nps in scores],
            dtype=np.int64,
        ).reshape(len(scores), len(plugins))
        totals = np.array([nps.total_score for nps in scores], dtype=np.int64)
        return cls(plugins, weights, indices, raw.T.copy(), totals)

    def node_plugin_scores(self, names: Sequence[str]) -> list[NodePluginScores]:
        out = []
        weighted = self.scores * np.asarray(self.weights, np.int64)[:, None]
        cols = weighted.T.tolist()
        totals = self.totals.tolist()
        for j, name in enumerate(names):
            out.append(
                NodePluginScores(
                    name, [PluginScore(p, s) for p, s in zip(self.plugins, cols[j], strict=True)], totals[j]
                )
            )
        return out


@dataclass
class FilterOutcome:
    """What a Filter scan over nodes found, in scan order: feasible snapshot indices, the
    rejected nodes with the status that rejected them, and an Error that stopped the scan."""

    feasible: IntP
    rejected: list[tuple[int, Status]]
    error: Status | None = None

    @property
    def processed(self) -> int:
        return len(self.feasible) + len(self.rejected)


# ------------------------------------------------------------------------------------ engine

_FilterChain = Sequence[tuple[str, FilterPlugin, Callable[..., BoolArray] | None]]


class BatchEngine:
    """Filter and Score of one profile's plugins over index arrays (see the module doc).

    Args:
        filters: the profile's Filter plugins, in order.
        scores: the profile's Score plugins, in order.
        score_weights: plugin name -> weight.
        use_batch_methods: False calls only the scalar methods (still over arrays): what
            `Framework(batch=False).filter_batch / score_matrix` compare against.
    """

    def __init__(
        self,
        filters: Sequence[tuple[str, FilterPlugin]],
        scores: Sequence[tuple[str, ScorePlugin]],
        score_weights: Mapping[str, int],
        *,
        use_batch_methods: bool = True,
    ) -> None:
        self._filter = list(filters)
        self._score = list(scores)
        self._score_weights = score_weights
        self._use_batch = use_batch_methods
        # Batch capabilities, resolved once (isinstance against a runtime-checkable Protocol
        # costs tens of microseconds).
        self._filter_batch: dict[str, Callable[..., BoolArray]] = {
            name: plugin.filter_nodes
            for name, plugin in self._filter
            if isinstance(plugin, BatchFilterPlugin)
        }
        self._score_batch: dict[str, Callable[..., I64]] = {
            name: plugin.score_nodes for name, plugin in self._score if isinstance(plugin, BatchScorePlugin)
        }

    # ------------------------------------------------------------------ Filter

    def filter(
        self,
        state: CycleState,
        pod_info: PodInfo,
        snapshot: Snapshot,
        order: IntP,
        num_to_find: int,
    ) -> FilterOutcome:
        """Run Filter on the nodes `order` (indices of `snapshot.node_info_list`, in scan order)
        until `num_to_find` nodes passed, as upstream findNodesThatPassFilters scanning one node
        after the other: the result is the same as calling `run_filter_plugins` per node in that
        order and stopping at the `num_to_find`-th feasible node (or at the first Error).

        Nodes are evaluated in chunks, plugin by plugin: a batch-capable plugin filters the whole
        chunk at once and its scalar `filter` is called only for the nodes it rejected, to get
        their status; other plugins are called per node still in the running."""
        skip = state.skip_filter_plugins
        batch = self._filter_batch if self._use_batch else {}
        chain = [(name, plugin, batch.get(name)) for name, plugin in self._filter if name not in skip]
        infos = snapshot.node_info_list
        feasible_parts: list[IntP] = []
        rejected: list[tuple[int, Status]] = []
        n = len(order)
        found = pos = 0
        # Nodes past the cutoff of a chunk are evaluated for nothing: cheap in a batch call, not
        # per node, so chunks stay small when a plugin runs per node.
        min_chunk = _MIN_FILTER_CHUNK if all(fn is not None for _, _, fn in chain) else _MIN_SCALAR_CHUNK
        chunk = max(num_to_find, min_chunk)
        while pos < n and found < num_to_find:
            cand = order[pos : pos + chunk]
            alive, statuses = _filter_chunk(chain, state, pod_info, snapshot, infos, cand)
            passing = np.flatnonzero(alive)
            need = num_to_find - found
            end = len(cand)
            if len(passing) >= need:
                passing = passing[:need]
                end = int(passing[-1]) + 1  # nodes after the last needed one are not processed
            # Rejected positions in scan order, up to the last node processed (an unschedulable
            # pod has one per node: thousands).
            at = sorted(statuses)
            if at and at[-1] >= end:
                at = at[: bisect.bisect_left(at, end)]
            error_at = next((p for p in at if statuses[p].code == Code.ERROR), None)
            if error_at is not None:
                # As a sequential scan, stop at the first Error; nodes before it stay processed.
                passing = passing[passing < error_at]
                feasible_parts.append(cand[passing])
                at = at[: bisect.bisect_left(at, error_at)]
                cand_list = cand.tolist()
                rejected.extend([(cand_list[p], statuses[p]) for p in at])
                return FilterOutcome(_concat(feasible_parts), rejected, statuses[error_at])
            feasible_parts.append(cand[passing])
            if at:
                cand_list = cand.tolist()
                rejected.extend([(cand_list[p], statuses[p]) for p in at])
            found += len(passing)
            pos += end
            chunk = max(2 * (num_to_find - found), min_chunk)
        return FilterOutcome(_concat(feasible_parts), rejected)

    # ------------------------------------------------------------------ Score

    def score(
        self, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, indices: IntP
    ) -> tuple[ScoreMatrix | None, Status | None]:
        """`run_score_plugins` for the nodes at `indices` of the snapshot, as arrays: a batch
        plugin scores all nodes at once (`score_nodes`) and normalizes an array
        (`normalize_scores`) when it can; other plugins run per node. (None, status) on failure."""
        plugins = [(n, p) for n, p in self._score if n not in state.skip_score_plugins]
        infos = snapshot.node_info_list
        n = len(indices)
        idx_list: list[int] | None = None
        raws: list[I64] = []
        for name, plugin in plugins:
            arr: I64 | None = None
            batch_fn = self._score_batch.get(name) if self._use_batch else None
            if batch_fn is not None:
                try:
                    arr = np.array(batch_fn(state, pod_info, snapshot, indices), dtype=np.int64)
                except Exception:
                    log.exception("batch Score of plugin %s failed; using its scalar Score", name)
            if arr is None:
                if idx_list is None:
                    idx_list = indices.tolist()
                values = []
                score = plugin.score
                for i in idx_list:
                    try:
                        value, s = score(state, pod_info, infos[i])
                    except Exception as e:
                        value, s = 0, exception_status(e)
                    if s is not None and s.code != Code.SUCCESS:
                        return None, score_failure(name, s)
                    values.append(value)
                arr = np.array(values, dtype=np.int64) if values else np.zeros(0, np.int64)
            raws.append(arr)
        view: NodeInfoView | None = None
        names: list[str] | None = None
        for k, (name, plugin) in enumerate(plugins):
            ext = plugin.score_extensions()
            if ext is None:
                continue
            if view is None:
                view = NodeInfoView(infos, indices.tolist() if idx_list is None else idx_list)
            normalize_batch = getattr(ext, "normalize_scores", None) if self._use_batch else None
            try:
                if normalize_batch is not None:
                    s = normalize_batch(state, pod_info, view, raws[k])
                else:
                    if names is None:
                        names = [
                            infos[i].name for i in (idx_list if idx_list is not None else indices.tolist())
                        ]
                    node_scores = list(map(NodeScore, names, raws[k].tolist()))
                    s = ext.normalize_score(state, pod_info, node_scores)
                    raws[k] = np.fromiter(map(_score_of, node_scores), np.int64, n)
            except Exception as e:
                s = exception_status(e)
            if failed(s):
                assert s is not None
                return None, normalize_failure(name, s)
        scores = np.vstack(raws) if raws else np.zeros((0, n), np.int64)
        if n and len(plugins) and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
            bad = (scores > MAX_NODE_SCORE) | (scores < MIN_NODE_SCORE)
            # upstream reports the first node (in node order) with an out-of-range score
            j = int(np.flatnonzero(bad.any(axis=0))[0])
            k = int(np.flatnonzero(bad[:, j])[0])
            return None, invalid_score(plugins[k][0], int(scores[k, j]))
        weights = [self._score_weights[name] for name, _ in plugins]
        totals = np.asarray(weights, np.int64) @ scores if plugins else np.zeros(n, np.int64)
        return ScoreMatrix([name for name, _ in plugins], weights, indices, scores, totals), None


def _filter_chunk(
    chain: _FilterChain,
    state: CycleState,
    pod_info: PodInfo,
    snapshot: Snapshot,
    infos: Sequence[NodeInfo],
    cand: IntP,
) -> tuple[BoolArray, dict[int, Status]]:
    """Filter the nodes `cand`: (passed mask over cand, position in cand -> status)."""
    m = len(cand)
    alive = np.ones(m, dtype=bool)
    statuses: dict[int, Status] = {}
    cand_list: list[int] | None = None
    for name, plugin, batch_fn in chain:
        # Positions still in the running; None while all are (the common case).
        positions = np.flatnonzero(alive) if statuses else None
        if positions is not None and not len(positions):
            break
        check: Iterable[int]
        if batch_fn is not None:
            try:
                ok = batch_fn(state, pod_info, snapshot, cand if positions is None else cand[positions])
                rejected = np.flatnonzero(~ok) if positions is None else positions[~ok]
                if not len(rejected):
                    continue
                rejected_list: list[int] = rejected.tolist()
                check = rejected_list
                statuses_fn = getattr(plugin, "filter_statuses", None)
                if statuses_fn is not None:
                    got = statuses_fn(state, pod_info, snapshot, cand[rejected])
                    if _batch_statuses(name, got, rejected_list, statuses, alive):
                        continue
            except Exception:
                log.exception("batch Filter of plugin %s failed; using its scalar Filter", name)
                check = range(m) if positions is None else positions.tolist()
        else:
            check = range(m) if positions is None else positions.tolist()
        if cand_list is None:
            cand_list = cand.tolist()
        f = plugin.filter
        # The scalar Filter gives the status of each node the batch rejected (and decides for
        # plugins without a batch method).
        for p in check:
            try:
                s = f(state, pod_info, infos[cand_list[p]])
            except Exception as e:
                s = exception_status(e)
            if s is not None and s.code != Code.SUCCESS:
                statuses[p] = filter_failure(name, s)
                alive[p] = False
    return alive, statuses


def _batch_statuses(
    name: str, got: Sequence[Status | None], check: list[int], statuses: dict[int, Status], alive: BoolArray
) -> bool:
    """The statuses a plugin's `filter_statuses` gave for the rejected positions `check` (it must
    reject every one of them, as its `filter_nodes` did; else False: use `filter`)."""
    if len(got) != len(check):
        return False
    # Nodes with the same reasons share one Status: wrap each distinct one once.
    wrapped: dict[int, Status] = {}
    for s in got:
        if id(s) not in wrapped:
            if s is None or s.code == Code.SUCCESS:
                return False
            wrapped[id(s)] = filter_failure(name, s)
    for p, s in zip(check, got, strict=True):
        statuses[p] = wrapped[id(s)]
    alive[check] = False
    return True


def _concat(parts: list[IntP]) -> IntP:
    if not parts:
        return np.zeros(0, np.intp)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts)
