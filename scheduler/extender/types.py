"""The JSON an extender speaks (upstream ``staging/src/k8s.io/kube-scheduler/extender/v1/types.go``).

Field names are upstream's JSON tags: ExtenderArgs ``{"pod", "nodes", "nodenames"}``,
ExtenderFilterResult ``{"nodes", "nodenames", "failedNodes", "failedAndUnresolvableNodes",
"error"}``, HostPriorityList ``[{"host", "score"}]``, ExtenderBindingArgs ``{"podName",
"podNamespace", "podUID", "node"}``, ExtenderBindingResult ``{"error"}``, and for preemption
ExtenderPreemptionArgs ``{"pod", "nodeNameToVictims", "nodeNameToMetaVictims"}``, Victims ``{"pods",
"numPDBViolations"}``, MetaVictims ``{"pods": [{"uid"}], "numPDBViolations"}``,
ExtenderPreemptionResult ``{"nodeNameToMetaVictims"}``.

Decoding reads keys case-insensitively, as Go's ``encoding/json`` does (an extender written against
the untagged structs of older releases sends ``"NodeNames"``). Anything of the wrong shape raises
``WireError`` naming the field, never a KeyError or TypeError.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kse.objects.manifest import to_dict
from proto import kse_pb2 as pb

MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10  # upstream extenderv1.MaxExtenderPriority


class WireError(ValueError):
    """A response of the wrong shape; the message names the field."""


def _get(obj: Mapping[str, Any], key: str) -> Any:
    """``obj[key]`` matched case-insensitively (exact match first), as encoding/json; None if absent."""
    if key in obj:
        return obj[key]
    low = key.lower()
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


def _str_map(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise WireError(f"{path}: must be an object of node name to message")
    return dict(value)


def _names(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise WireError(f"{path}: must be a list of node names")
    return list(value)


def _node_list_names(value: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        raise WireError(f"{path}: must be a NodeList object")
    items = _get(value, "items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise WireError(f"{path}.items: must be a list")
    out = []
    for i, item in enumerate(items):
        meta = _get(item, "metadata") if isinstance(item, dict) else None
        name = _get(meta, "name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise WireError(f"{path}.items[{i}].metadata.name: Required value")
        out.append(name)
    return out


# ---------------------------------------------------------------- requests


def pod_json(pod: pb.Pod) -> dict[str, Any]:
    return to_dict(pod)


def node_list_json(nodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A v1.NodeList of already-encoded nodes."""
    return {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": list(nodes)}


def extender_args(
    pod: dict[str, Any], nodes: Sequence[dict[str, Any]] | None, names: Sequence[str] | None
) -> dict[str, Any]:
    """ExtenderArgs: ``nodenames`` for a nodeCacheCapable extender, else ``nodes``."""
    out: dict[str, Any] = {"pod": pod}
    if names is not None:
        out["nodenames"] = list(names)
    else:
        out["nodes"] = node_list_json(nodes or [])
    return out


def encode_extender_args(pod: bytes, nodes: Sequence[bytes] | None, names: Sequence[str] | None) -> bytes:
    """`extender_args` as JSON bytes, from the pod's and the nodes' JSON already encoded: the
    same nodes go out for every pod, so each is encoded once (per resourceVersion) and spliced."""
    if names is not None:
        return b'{"pod":' + pod + b',"nodenames":' + dumps_compact(list(names)) + b"}"
    head = b'{"pod":' + pod + b',"nodes":{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":['
    return head + b",".join(nodes or ()) + b"]}}"


def dumps_compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def binding_args(namespace: str, name: str, uid: str, node: str) -> dict[str, Any]:
    """ExtenderBindingArgs."""
    return {"podName": name, "podNamespace": namespace, "podUID": uid, "node": node}


# ---------------------------------------------------------------- responses


@dataclass
class FilterResult:
    """ExtenderFilterResult. ``names`` None: the extender sent neither nodes nor nodenames
    (upstream then treats it as "no node passed")."""

    names: list[str] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    failed_and_unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""


def parse_filter_result(body: Any, node_cache_capable: bool) -> FilterResult:
    """ExtenderFilterResult; upstream reads ``nodenames`` only from a nodeCacheCapable extender
    (and falls back to ``nodes``), ``nodes`` from the others."""
    if not isinstance(body, dict):
        raise WireError("ExtenderFilterResult: must be a JSON object")
    result = FilterResult(
        failed=_str_map(_get(body, "failedNodes"), "failedNodes"),
        failed_and_unresolvable=_str_map(
            _get(body, "failedAndUnresolvableNodes"), "failedAndUnresolvableNodes"
        ),
    )
    err = _get(body, "error")
    if err is not None and not isinstance(err, str):
        raise WireError("error: must be a string")
    result.error = err or ""
    names, nodes = _get(body, "nodenames"), _get(body, "nodes")
    if node_cache_capable and names is not None:
        result.names = _names(names, "nodenames")
    elif nodes is not None:
        result.names = _node_list_names(nodes, "nodes")
    return result


def parse_host_priority_list(body: Any) -> list[tuple[str, int]]:
    """HostPriorityList: ``[(host, score)]``. Null is an empty list, as in Go."""
    if body is None:
        return []
    if not isinstance(body, list):
        raise WireError("HostPriorityList: must be a JSON list")
    out = []
    for i, item in enumerate(body):
        if not isinstance(item, dict):
            raise WireError(f"[{i}]: must be an object with host and score")
        host, score = _get(item, "host"), _get(item, "score")
        if not isinstance(host, str):
            raise WireError(f"[{i}].host: must be a string")
        if score is None:
            score = 0
        if isinstance(score, bool) or not isinstance(score, int):
            raise WireError(f"[{i}].score: must be an integer")
        out.append((host, score))
    return out


def parse_error_result(body: Any, what: str) -> str:
    """The ``error`` of an ExtenderBindingResult (or any result with one)."""
    if not isinstance(body, dict):
        raise WireError(f"{what}: must be a JSON object")
    err = _get(body, "error")
    if err is not None and not isinstance(err, str):
        raise WireError("error: must be a string")
    return err or ""


# ---------------------------------------------------------------- preemption


@dataclass
class MetaVictims:
    """MetaVictims: the victims' UIDs on one node and the PDB violations that costs."""

    pod_uids: list[str] = field(default_factory=list)
    num_pdb_violations: int = 0


def preemption_args(
    pod: dict[str, Any],
    victims: Mapping[str, tuple[Sequence[pb.Pod], int]],
    node_cache_capable: bool,
) -> dict[str, Any]:
    """ExtenderPreemptionArgs: ``nodeNameToMetaVictims`` (UIDs) for a nodeCacheCapable extender,
    else ``nodeNameToVictims`` (whole pods)."""
    if node_cache_capable:
        meta = {
            node: {"pods": [{"uid": p.metadata.uid} for p in pods], "numPDBViolations": n}
            for node, (pods, n) in victims.items()
        }
        return {"pod": pod, "nodeNameToMetaVictims": meta}
    full = {
        node: {"pods": [to_dict(p) for p in pods], "numPDBViolations": n}
        for node, (pods, n) in victims.items()
    }
    return {"pod": pod, "nodeNameToVictims": full}


def parse_preemption_result(body: Any) -> dict[str, MetaVictims]:
    """ExtenderPreemptionResult: node name -> MetaVictims (the extender always answers with UIDs)."""
    if not isinstance(body, dict):
        raise WireError("ExtenderPreemptionResult: must be a JSON object")
    raw = _get(body, "nodeNameToMetaVictims")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise WireError("nodeNameToMetaVictims: must be an object of node name to MetaVictims")
    out: dict[str, MetaVictims] = {}
    for node, mv in raw.items():
        path = f"nodeNameToMetaVictims[{node}]"
        if not isinstance(mv, dict):
            raise WireError(f"{path}: must be an object")
        pods = _get(mv, "pods") or []
        if not isinstance(pods, list):
            raise WireError(f"{path}.pods: must be a list")
        uids = []
        for i, p in enumerate(pods):
            uid = _get(p, "uid") if isinstance(p, dict) else None
            if not isinstance(uid, str):
                raise WireError(f"{path}.pods[{i}].uid: must be a string")
            uids.append(uid)
        n = _get(mv, "numPDBViolations") or 0
        if isinstance(n, bool) or not isinstance(n, int):
            raise WireError(f"{path}.numPDBViolations: must be an integer")
        out[str(node)] = MetaVictims(uids, n)
    return out
