"""Per-node sums and label indexes over a Snapshot, kept across scheduling cycles.

Upstream's InterPodAffinity and PodTopologySpread scan every node (and its pods) in each PreFilter
and PreScore, on 16 goroutines. kse runs in one thread, so the plugins keep what such a scan
sums up and redo only the nodes that changed since: `Aggregate` for per-node contributions (a
changed node is found by its NodeInfo generation), `LabelIndex` for which nodes carry a label
pair (for the batch Filter and Score).
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.framework.nodeinfo import NodeInfo, Snapshot

TopologyPair = tuple[str, str]

_LABELS_OF = operator.attrgetter("labels")


class Aggregate:
    """The sum over a snapshot's nodes of per-node contributions (pair -> amount), kept up to
    date incrementally: a later cycle over the same node list recomputes only the nodes whose
    generation is newer than any seen before (the cache copies a changed node into the snapshot
    with its new, ever increasing generation; adding or removing a node rebuilds the list, which
    is then summed afresh). `refs` counts the contributing nodes of each pair, so a pair stays
    listed while any node contributes to it, even with a zero sum (upstream keeps such score
    entries)."""

    __slots__ = ("_contrib", "_generation", "_len", "_nodes", "refs", "sums")

    def __init__(self) -> None:
        self._nodes: list[NodeInfo] | None = None
        self._len = 0
        self._generation = -1
        self._contrib: dict[str, tuple[tuple[Hashable, int], ...]] = {}
        self.sums: dict[Hashable, int] = {}
        self.refs: dict[Hashable, int] = {}

    def tracks(self, nodes: list[NodeInfo]) -> bool:
        """Whether `update(nodes, ...)` goes on from the sums so far (else it starts afresh)."""
        return nodes is self._nodes and len(nodes) == self._len

    def update(
        self,
        nodes: list[NodeInfo],
        compute: Callable[[NodeInfo], tuple[tuple[Hashable, int], ...]],
        generations: npt.NDArray[np.int64] | None = None,
    ) -> None:
        """`generations` (the snapshot's array of the nodes' generations, in `nodes`' order)
        finds the changed nodes without a Python pass over all of them."""
        if not self.tracks(nodes):
            self._nodes, self._len, self._generation = nodes, len(nodes), -1
            self._contrib, self.sums, self.refs = {}, {}, {}
            changed: Iterable[NodeInfo] = nodes
        elif generations is not None:
            changed = map(nodes.__getitem__, np.flatnonzero(generations > self._generation).tolist())
        else:
            last = self._generation
            changed = [ni for ni in nodes if ni.generation > last]
        sums, refs, contrib = self.sums, self.refs, self._contrib
        newest = self._generation
        for ni in changed:
            newest = max(newest, ni.generation)
            for pair, n in contrib.pop(ni.name, ()):
                left = refs[pair] - 1
                if left:
                    refs[pair] = left
                    sums[pair] -= n
                else:
                    del refs[pair], sums[pair]
            new = compute(ni) if ni.node is not None else ()
            if new:
                contrib[ni.name] = new
                for pair, n in new:
                    sums[pair] = sums.get(pair, 0) + n
                    refs[pair] = refs.get(pair, 0) + 1
        self._generation = newest


class Aggregates:
    """A plugin's Aggregates by key (what is summed, for which pod shape): the last `keep` keys
    used are kept, so a workload's pods share theirs and a stream of one-off shapes cannot grow
    the memory."""

    __slots__ = ("_by_key", "_keep")

    def __init__(self, keep: int = 16) -> None:
        self._by_key: OrderedDict[Hashable, Aggregate] = OrderedDict()
        self._keep = keep

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def get(self, key: Hashable) -> Aggregate:
        got = self._by_key.get(key)
        if got is None:
            got = self._by_key[key] = Aggregate()
            if len(self._by_key) > self._keep:
                self._by_key.popitem(last=False)
        else:
            self._by_key.move_to_end(key)
        return got


class LabelIndex:
    """Which nodes of a snapshot carry each label pair: key -> value -> indices into
    `node_info_list`, for the batch Filter. Rebuilt only when some node's labels changed (a
    NodeInfo's labels dict is replaced on every node update and shared by its clones, so
    identity tells)."""

    __slots__ = ("_codes", "_labels", "_list", "_validated", "by_pair", "n", "pair_ix")

    def __init__(self, infos: Sequence[NodeInfo]) -> None:
        self._labels = [ni.labels for ni in infos]  # kept alive, so identities stay unique
        self.n = len(infos)
        by_pair: dict[str, dict[str, list[int]]] = {}
        for i, labels in enumerate(self._labels):
            for k, v in labels.items():
                by_pair.setdefault(k, {}).setdefault(v, []).append(i)
        self.by_pair = {
            k: {v: np.array(ix, np.intp) for v, ix in vals.items()} for k, vals in by_pair.items()
        }
        # the same arrays by (key, value): what the counts dicts are keyed by
        self.pair_ix: dict[TopologyPair, npt.NDArray[np.intp]] = {
            (k, v): ix for k, vals in self.by_pair.items() for v, ix in vals.items()
        }
        self._codes: dict[str, tuple[npt.NDArray[np.intp], list[str]]] = {}
        self._list: Sequence[NodeInfo] = infos
        self._validated = max((ni.generation for ni in infos), default=0)

    def nodes_of_positive(self, counts: Mapping[TopologyPair, int]) -> list[npt.NDArray[np.intp]]:
        """The node indices of every pair with a count > 0. Counts of matching pods are
        positive; only a preemption dry run's removals (update_with_pod) leave zeros or less,
        so the common case is C-level lookups (a `keys() &` would walk the larger index)."""
        pair_ix = self.pair_ix
        if not counts:
            return []
        if min(counts.values()) <= 0:
            return [ix for pair, n in counts.items() if n > 0 and (ix := pair_ix.get(pair)) is not None]
        common = list(filter(pair_ix.__contains__, counts))
        if not common:
            return []
        got = operator.itemgetter(*common)(pair_ix)
        return [got] if len(common) == 1 else list(got)

    def valid_for(self, infos: Sequence[NodeInfo]) -> bool:
        return len(infos) == self.n and all(map(operator.is_, self._labels, map(_LABELS_OF, infos)))

    def valid_for_snapshot(self, snapshot: Snapshot) -> bool:
        """`valid_for(snapshot.node_info_list)`, checking only the nodes whose generation moved
        since the last check (labels change only with `set_node`, which moves it, and the
        snapshot's generation array follows every change: what `Aggregate` relies on too).
        A full check per call costs a pass over every node, several times per cycle."""
        infos = snapshot.node_info_list
        if infos is not self._list or len(infos) != self.n:
            if not self.valid_for(infos):
                return False
            self._list = infos
        generations = snapshot.arrays().generation
        changed = np.flatnonzero(generations > self._validated)
        if len(changed):
            labels = self._labels
            if any(infos[j].labels is not labels[j] for j in changed.tolist()):
                return False
            self._validated = int(generations[changed].max())
        return True

    def nodes_with(self, key: str, value: str) -> npt.NDArray[np.intp] | None:
        return self.by_pair.get(key, {}).get(value)

    def has_key(self, key: str) -> npt.NDArray[np.bool_]:
        mask = np.zeros(self.n, dtype=bool)
        for ix in self.by_pair.get(key, {}).values():
            mask[ix] = True
        return mask

    def codes(self, key: str) -> tuple[npt.NDArray[np.intp], list[str]]:
        """Each node's value of `key` as a code into the returned values (-1: no such label),
        built once per key: what a per-domain table is indexed with (`table[codes]`). The
        array is read-only (shared by every caller)."""
        got = self._codes.get(key)
        if got is None:
            values = list(self.by_pair.get(key, {}))
            codes = np.full(self.n, -1, dtype=np.intp)
            for code, value in enumerate(values):
                codes[self.by_pair[key][value]] = code
            codes.flags.writeable = False
            got = self._codes[key] = (codes, values)
        return got


def current_label_index(index: LabelIndex | None, snapshot: Snapshot) -> LabelIndex:
    """`index` while it still describes the snapshot's nodes, else one built afresh."""
    if index is None or not index.valid_for_snapshot(snapshot):
        return LabelIndex(snapshot.node_info_list)
    return index
