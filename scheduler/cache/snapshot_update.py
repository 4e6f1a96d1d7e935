"""The pieces of the cache that decide the snapshot's node order and patch a snapshot in place.

* `NodeTree`: the nodes of the cluster grouped by zone, listed round-robin across zones
  (upstream ``backend/cache/node_tree.go``). It is the source of truth for which nodes exist and
  for the snapshot's node order: scheduling starts each cycle where the last one stopped, so
  interleaving zones spreads consecutive pods across zones even when only a percentage of the
  nodes is evaluated.
* `copy_into`: overwrite a snapshot NodeInfo with a fresh clone of the cache's NodeInfo while
  keeping the snapshot object's identity (upstream ``*existing = *clone``), so every list of the
  snapshot that holds it (node list, affinity lists) stays valid without being rebuilt.
"""

from __future__ import annotations

import logging

from proto import kse_pb2 as pb
from scheduler.framework.nodeinfo import NodeInfo

log = logging.getLogger(__name__)

LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION = "topology.kubernetes.io/region"
LABEL_FAILURE_DOMAIN_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_FAILURE_DOMAIN_BETA_REGION = "failure-domain.beta.kubernetes.io/region"

_NODE_INFO_SLOTS: tuple[str, ...] = tuple(NodeInfo.__slots__)


def zone_key(node: pb.Node) -> str:
    """Upstream ``utilnode.GetZoneKey``: region and zone joined with a separator that no label
    value can contain; "" when the node has neither."""
    labels = node.metadata.labels
    zone = labels.get(LABEL_TOPOLOGY_ZONE, labels.get(LABEL_FAILURE_DOMAIN_BETA_ZONE, ""))
    region = labels.get(LABEL_TOPOLOGY_REGION, labels.get(LABEL_FAILURE_DOMAIN_BETA_REGION, ""))
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class NodeTree:
    """Node names by zone; `list()` interleaves the zones (upstream nodeTree).

    The order is stable: it only changes when a node is added, removed, or moves zone.
    """

    def __init__(self) -> None:
        self._tree: dict[str, list[str]] = {}  # zone -> node names, in insertion order
        self._zone_of: dict[str, str] = {}
        self.num_nodes = 0
        # Bumped whenever list() would change: a snapshot built from an older version must
        # rebuild its node list.
        self.version = 0

    def __contains__(self, name: object) -> bool:
        return name in self._zone_of

    def add_node(self, node: pb.Node) -> None:
        name = node.metadata.name
        if name in self._zone_of:
            log.debug("node %s already in the node tree", name)
            return
        zone = zone_key(node)
        self._tree.setdefault(zone, []).append(name)
        self._zone_of[name] = zone
        self.num_nodes += 1
        self.version += 1

    def remove_node(self, name: str) -> bool:
        zone = self._zone_of.pop(name, None)
        if zone is None:
            return False
        names = self._tree[zone]
        names.remove(name)
        if not names:
            del self._tree[zone]
        self.num_nodes -= 1
        self.version += 1
        return True

    def update_node(self, old: pb.Node | None, new: pb.Node) -> None:
        """A node changed; it moves only if its zone did (upstream updateNode)."""
        name = new.metadata.name
        current = self._zone_of.get(name)
        if current is not None and current == zone_key(new):
            return
        self.remove_node(name)
        self.add_node(new)

    def list(self) -> list[str]:
        """All node names, round-robin over the zones (zones in first-seen order)."""
        zones = list(self._tree.values())
        if len(zones) == 1:
            return list(zones[0])
        out: list[str] = []
        index = 0
        while len(out) < self.num_nodes:
            for names in zones:
                if index < len(names):
                    out.append(names[index])
            index += 1
        return out


def copy_into(dst: NodeInfo, src: NodeInfo) -> None:
    """Make `dst` an independent copy of `src`, keeping `dst`'s identity."""
    clone = src.clone()
    for slot in _NODE_INFO_SLOTS:
        setattr(dst, slot, getattr(clone, slot))


def empty_node_info() -> NodeInfo:
    return NodeInfo()
