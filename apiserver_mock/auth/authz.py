"""Authorization decisions from the policy table, cached where they do not depend on the object.

`authorize()` answers in one of three ways: allowed (None), denied (raises Forbidden), or "allowed
if the stored object qualifies" (an `ObjectCheck` the registry runs on the object it read, before
its compare-and-swap on that same revision, so the checked object is the modified one).
The part that depends only on (identity, verb, resource, namespace) is computed once and cached;
name-scoped rules (a node's own Node or Lease) are then a string compare.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from apiserver_mock.auth.policy import ANY_NODE, POLICY, Grant, Scope
from apiserver_mock.errors import Forbidden, qualified_resource
from certs.identity import Identity
from kse.objects.kinds import Kind

_CACHE_LIMIT = 65536
NO_RELATIONSHIP = "no relationship found between node '{node}' and this object"


@dataclass(frozen=True, slots=True)
class _Static:
    allowed: bool
    conditional: tuple[tuple[Scope, str], ...] = ()  # (scope, node) of rules that may still match


_DENIED = _Static(False)
_ALLOWED = _Static(True)


@dataclass(frozen=True, slots=True)
class Request:
    """What is being asked, for the error message."""

    ident: Identity
    verb: str
    kind: Kind
    subresource: str
    namespace: str
    name: str

    @property
    def resource(self) -> str:
        return f"{self.kind.resource}/{self.subresource}" if self.subresource else self.kind.resource


def forbidden(req: Request, reason: str = "") -> Forbidden:
    """Forbidden with kube-apiserver's text (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/
    errors.go, `forbiddenMessage`): the object is named as the request's URL names it, so a create
    (POST to the collection) names none, while a create of a subresource (pods/NAME/binding) does."""
    res = qualified_resource(req.kind)
    named = req.name and not (req.verb == "create" and not req.subresource)
    subject = f'{res} "{req.name}"' if named else res
    where = f'in the namespace "{req.namespace}"' if req.namespace else "at the cluster scope"
    msg = (
        f'{subject} is forbidden: User "{req.ident.user}" cannot {req.verb} resource "{req.resource}" '
        f'in API group "{req.kind.group}" {where}'
    )
    return Forbidden(f"{msg}: {reason}" if reason else msg)


@dataclass(frozen=True, slots=True)
class ObjectCheck:
    """Allowed only if the stored object is a pod bound to one of `nodes` (ANY_NODE: any bound pod)."""

    req: Request
    nodes: tuple[str, ...]

    def check(self, stored: Message) -> None:
        node_name = stored.spec.node_name  # type: ignore[attr-defined]
        for node in self.nodes:
            if (node == ANY_NODE and node_name) or (node_name and node_name == node):
                return
        shown = next((n for n in self.nodes if n != ANY_NODE), "")
        raise forbidden(
            self.req, NO_RELATIONSHIP.format(node=shown) if shown else "the pod is not bound to a node"
        )


class Authorizer:
    def __init__(self, policy: tuple[Grant, ...] = POLICY) -> None:
        self._policy = policy
        self._cache: dict[tuple[Identity, str, str, str], _Static] = {}

    def authorize(
        self, ident: Identity, verb: str, kind: Kind, subresource: str, namespace: str, name: str
    ) -> ObjectCheck | None:
        resource = f"{kind.resource}/{subresource}" if subresource else kind.resource
        key = (ident, verb, resource, namespace)
        static = self._cache.get(key)
        if static is None:
            static = self._decide(ident, verb, resource, namespace)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = static
        if static.allowed:
            return None
        req = Request(ident, verb, kind, subresource, namespace, name)
        if not static.conditional:
            raise forbidden(req)
        object_nodes: list[str] = []
        for scope, node in static.conditional:
            if scope is Scope.OWN_NODE:
                if node == ANY_NODE or (name and name == node):
                    return None
            else:
                object_nodes.append(node)
        if object_nodes:
            return ObjectCheck(req, tuple(object_nodes))
        node = next((n for _, n in static.conditional if n != ANY_NODE), "")
        raise forbidden(req, NO_RELATIONSHIP.format(node=node))

    def _decide(self, ident: Identity, verb: str, resource: str, namespace: str) -> _Static:
        conditional: list[tuple[Scope, str]] = []
        for grant in self._policy:
            if not grant.applies_to(ident):
                continue
            for rule in grant.rules:
                if not rule.matches(verb, resource, namespace):
                    continue
                if rule.scope is Scope.ANY:
                    return _ALLOWED
                node = grant.node_of(ident)
                if node is not None:
                    conditional.append((rule.scope, node))
        return _Static(False, tuple(conditional)) if conditional else _DENIED
