"""The values a fuzzer throws: valid objects of every served kind, and the nasty things that go in
their place (wrong types, out-of-range numbers, unknown enums, bad names and labels, huge strings
and maps, deep nesting).

Everything takes a `random.Random` and nothing else, so a value is a function of the RNG's seed:
the request stream of `kse fuzz apiserver` is reproducible from `--seed` and the request index.
Objects are JSON dicts (the HTTP door's shape); `chaos.fuzz.protogen` turns them into protobuf
messages for the gRPC door and mutates messages through their descriptors.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from kse.objects.kinds import KINDS, Kind

NAMESPACE = "fuzz"
# A small pool, so that requests meet each other's objects (update, delete and bind hit something).
NAMES = ("a", "b", "web", "fuzz-0", "fuzz-1", "n0")
NODE = "fuzz-node-0"  # the node identity's own node
LABELS: tuple[dict[str, str], ...] = ({"app": "web"}, {"app": "db", "tier": "x"}, {})

# Strings that are not valid in some field: DNS-1123 breakers, label breakers, control bytes.
BAD_STRINGS = (
    "",
    "UPPER",
    "a" * 254,
    "-lead",
    "trail-",
    "a/b",
    "..",
    "a b",
    "\x00",
    "é",
    "\ud7ff",
    "a" * 64,
    "x.y.z_",
    "1Gi!",
    "-1",
    "NaN",
    "0x10",
    "9" * 40,
    "${jndi}",
    "%00",
)
BAD_ENUMS = ("Bogus", "", "always", "NoSchedule ", "PreferNoSchedule\n", "Exists", "In", "true")
INTS = (0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30)
FLOATS = (0.5, -0.0, 1e308, -1e308, 3.0, 1e-300)


def huge_string(rng: random.Random) -> str:
    """A long string: 1 KiB to ~1.5 MiB, past the API server's per-object limit at the top end."""
    return rng.choice("ab-.Z") * rng.choice((1024, 70_000, 300_000, 1_600_000))


def huge_map(rng: random.Random) -> dict[str, str]:
    return {f"k{i}": "v" * rng.randint(0, 8) for i in range(rng.choice((300, 5000, 40_000)))}


def deep(rng: random.Random, depth: int | None = None) -> Any:
    """A value nested `depth` levels (lists and dicts alternating): past any object's real depth."""
    depth = depth or rng.choice((50, 200, 1000, 5000))
    value: Any = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def bad_value(rng: random.Random) -> Any:
    """Something that should not be where it is put."""
    pick = rng.randrange(12)
    if pick == 0:
        return rng.choice(INTS)
    if pick == 1:
        return rng.choice(FLOATS)
    if pick == 2:
        return rng.choice(BAD_STRINGS)
    if pick == 3:
        return rng.choice(BAD_ENUMS)
    if pick == 4:
        return rng.choice((None, True, False))
    if pick == 5:
        return [rng.choice(BAD_STRINGS), rng.choice(INTS)]
    if pick == 6:
        return {rng.choice(BAD_STRINGS): rng.choice(INTS)}
    if pick == 7:
        return huge_string(rng)
    if pick == 8:
        return huge_map(rng)
    if pick == 9:
        return deep(rng, rng.choice((20, 100, 300)))
    if pick == 10:
        return []
    return {}


# ---------------------------------------------------------------------- valid objects


def _container(rng: random.Random) -> dict[str, Any]:
    c: dict[str, Any] = {"name": rng.choice(("app", "web", "c")), "image": "registry.k8s.io/pause:3.10"}
    if rng.random() < 0.6:
        c["resources"] = {"requests": {"cpu": rng.choice(("10m", "1", "250m")), "memory": "16Mi"}}
    if rng.random() < 0.3:
        c["ports"] = [{"containerPort": rng.choice((80, 8080, 443))}]
    return c


def _meta(rng: random.Random, kind: Kind) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": rng.choice(NAMES)}
    if kind.namespaced:
        meta["namespace"] = NAMESPACE
    labels = rng.choice(LABELS)
    if labels:
        meta["labels"] = dict(labels)
    if rng.random() < 0.2:
        meta["annotations"] = {"fuzz/note": "x"}
    return meta


def _template(rng: random.Random, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": dict(labels)}, "spec": {"containers": [_container(rng)]}}


def valid_object(rng: random.Random, kind: Kind) -> dict[str, Any]:
    """An object of `kind` that the API server should accept (in JSON form, with kind/apiVersion)."""
    obj: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": _meta(rng, kind)}
    sel = {"app": rng.choice(("web", "db"))}
    if kind.kind == "Pod":
        obj["spec"] = {"containers": [_container(rng)]}
        if rng.random() < 0.2:
            obj["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    elif kind.kind == "Node":
        cap = {"cpu": rng.choice(("4", "32")), "memory": "16Gi", "pods": "110"}
        obj["status"] = {"capacity": cap, "allocatable": dict(cap)}
        if rng.random() < 0.3:
            obj["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    elif kind.kind == "Lease":
        obj["spec"] = {"holderIdentity": "fuzz", "leaseDurationSeconds": rng.choice((1, 15))}
    elif kind.kind == "Event":
        obj["involvedObject"] = {"kind": "Pod", "namespace": NAMESPACE, "name": rng.choice(NAMES)}
        obj["reason"] = "Fuzzed"
        obj["message"] = "fuzz"
        obj["type"] = "Normal"
    elif kind.kind == "PriorityClass":
        obj["value"] = rng.choice((0, 1000, -5))
    elif kind.kind == "Service":
        obj["spec"] = {"selector": sel, "ports": [{"port": rng.choice((80, 443)), "protocol": "TCP"}]}
    elif kind.kind in ("ReplicaSet", "Deployment"):
        obj["spec"] = {
            "replicas": rng.choice((0, 1, 3)),
            "selector": {"matchLabels": sel},
            "template": _template(rng, sel),
        }
    elif kind.kind == "DaemonSet":
        obj["spec"] = {"selector": {"matchLabels": sel}, "template": _template(rng, sel)}
    elif kind.kind == "PodDisruptionBudget":
        spec: dict[str, Any] = {"selector": {"matchLabels": sel}}
        spec["minAvailable" if rng.random() < 0.5 else "maxUnavailable"] = rng.choice((1, "50%"))
        obj["spec"] = spec
    return obj


# ---------------------------------------------------------------------- mutations


def _paths(value: Any, limit: int = 2000, max_depth: int = 12) -> list[tuple[Any, ...]]:
    """Paths (tuples of keys and indexes) into a JSON value, the root excluded: breadth first, at
    most `limit` of them and `max_depth` deep (a huge or deep value from an earlier mutation is
    mutated near its top)."""
    out: list[tuple[Any, ...]] = []
    frontier: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while frontier and len(out) < limit:
        prefix, node = frontier.pop(0)
        if len(prefix) >= max_depth:
            continue
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append((*prefix, k))
            frontier.append(((*prefix, k), v))
            if len(out) >= limit:
                break
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any) -> None:
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


MUTATIONS = ("replace", "unknown-field", "bad-name", "bad-labels", "drop", "wrong-kind", "huge", "deep")


def mutate(rng: random.Random, obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A copy of `obj` with one to three mutations, and what they were (for the finding's record)."""
    out = copy.deepcopy(obj)
    done: list[str] = []
    for _ in range(rng.randint(1, 3)):
        how = rng.choice(MUTATIONS)
        meta = out.setdefault("metadata", {}) if isinstance(out.get("metadata"), dict) else None
        paths = _paths(out)
        if how == "replace" and paths:
            path = rng.choice(paths)
            _set(out, path, bad_value(rng))
            done.append(f"replace {'/'.join(map(str, path))}")
        elif how == "unknown-field":
            target = out
            dict_paths = [p for p in paths if isinstance(_get(out, p), dict)]
            if dict_paths:
                target = _get(out, rng.choice(dict_paths))
            target[rng.choice(("bogus", "spec", "x-y", ""))] = bad_value(rng)
            done.append("unknown-field")
        elif how == "bad-name" and meta is not None:
            meta[rng.choice(("name", "namespace", "generateName"))] = rng.choice(BAD_STRINGS)
            done.append("bad-name")
        elif how == "bad-labels" and meta is not None:
            meta[rng.choice(("labels", "annotations"))] = {rng.choice(BAD_STRINGS): rng.choice(BAD_STRINGS)}
            done.append("bad-labels")
        elif how == "drop" and paths:
            path = rng.choice(paths)
            parent = _get(out, path[:-1])
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            elif isinstance(parent, list) and parent:
                parent.pop()
            done.append(f"drop {'/'.join(map(str, path))}")
        elif how == "wrong-kind":
            other = rng.choice(KINDS)
            out[rng.choice(("kind", "apiVersion"))] = rng.choice((other.kind, other.api_version, "v2", ""))
            done.append("wrong-kind")
        elif how == "huge" and meta is not None:
            meta[rng.choice(("labels", "annotations"))] = huge_map(rng)
            done.append("huge-map")
        elif how == "deep":
            out[rng.choice(("spec", "status", "bogus"))] = deep(rng)
            done.append("deep")
    return out, ", ".join(done) or "none"


def _get(root: Any, path: tuple[Any, ...]) -> Any:
    node = root
    for key in path:
        node = node[key]
    return node


# ---------------------------------------------------------------------- request parameters


def selector(rng: random.Random, *, field: bool) -> str:
    """A label or field selector, good or bad."""
    good_label = ("", "app=web", "app in (web,db)", "!app", "tier notin (x)", "app,tier=x")
    good_field = ("", "metadata.name=a", "spec.nodeName=", "status.phase!=Running", "metadata.namespace=fuzz")
    bad = (
        "app in web",
        "=",
        "app==",
        "a b c",
        "(",
        "app in (",
        "spec.bogus=x",
        "x" * 400,
        "app=" + "v" * 70,
        ",,",
    )
    if rng.random() < 0.5:
        return rng.choice(good_field if field else good_label)
    return rng.choice(bad)


def resource_version(rng: random.Random) -> str:
    return rng.choice(
        ("", "0", "1", "2", "abc", "-1", "99999999999", "18446744073709551616", "1.5", " 3", "0x1f")
    )


def namespace(rng: random.Random) -> str:
    return rng.choices(
        (NAMESPACE, "default", "kube-system", "", "Bad_NS", "nope", "a" * 70), (8, 2, 1, 2, 1, 1, 1)
    )[0]


def name(rng: random.Random) -> str:
    return rng.choice(NAMES) if rng.random() < 0.8 else rng.choice(BAD_STRINGS)
