"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), on plain JSON values.

Both are pure functions over the object's JSON form; the handler reads the object, patches its
JSON, decodes the result as a new object and updates with the read resourceVersion as a
precondition (retrying on conflict, as kube-apiserver's patcher does). A patch that does not apply
raises `PatchError` (answered 400 or 422 as upstream: a failed `test` op is 422 Invalid... here
400 BadRequest, naming the operation).
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver_mock.http.codec import BadRequest


class PatchError(BadRequest):
    """A patch that is malformed or does not apply to the object."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'invalid JSON pointer "{path}": must start with "/"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, for_add: bool = False) -> int:
    if for_add and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f'invalid array index "{token}" in path "{path}"')
    i = int(token)
    if i > len(container) or (i == len(container) and not for_add):
        raise PatchError(f'array index {i} out of bounds in path "{path}"')
    return i


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f'path "{path}": "{token}" does not exist')
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path)]
        else:
            raise PatchError(f'path "{path}": cannot descend into a {type(node).__name__}')
    return node


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f'path "{path}" does not exist')
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path)]
    raise PatchError(f'path "{path}" does not exist')


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, for_add=True), value)
    else:
        raise PatchError(f'path "{path}": cannot add to a {type(parent).__name__}')
    return doc


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f'path "{path}" does not exist: cannot remove it')
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, path)]
    else:
        raise PatchError(f'path "{path}" does not exist: cannot remove it')
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 operations applied in order to a copy of `target`; all or nothing."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be an array of operations")
    doc = copy.deepcopy(target)
    for n, op in enumerate(ops):
        if (
            not isinstance(op, dict)
            or not isinstance(op.get("op"), str)
            or not isinstance(op.get("path"), str)
        ):
            raise PatchError(f'operation {n}: needs string fields "op" and "path"')
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f'operation {n} ({kind} "{path}"): missing "value"')
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # must exist
            doc = (
                _add(_remove(doc, path), path, copy.deepcopy(op["value"])) if _pointer(path) else op["value"]
            )
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f'operation {n} ({kind} "{path}"): missing "from"')
            value = copy.deepcopy(_get(doc, source))
            if kind == "move":
                doc = _remove(doc, source)
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f'operation {n}: test failed: "{path}" does not hold the given value')
        else:
            raise PatchError(f'operation {n}: unknown op "{kind}"')
    return doc
