"""The generic registry: Get, Create, Update, UpdateStatus, Delete, Bind, Evict for every kind.

One implementation, looked up by kind (`kse.objects.kinds`); per-kind behaviour comes from
`strategy.STRATEGIES` and `validation`. Every verb returns `(serialized Object, revision)`.

Write discipline (DESIGN.md "Storage"): an object is defaulted, authorized and validated completely,
then written with ONE etcd transaction guarded by a compare on its key (and the request's fence
guards). An update reads its base from the watch cache (no etcd read); if the cache was stale, the
transaction fails, its failure branch returns the current object, and the decision is re-made on
that. Nothing is ever written without a compare.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from google.protobuf.message import DecodeError, Message

from apiserver_mock import errors, wire
from apiserver_mock.auth.authz import Authorizer, ObjectCheck
from apiserver_mock.errors import Conflict, FencedOff, Invalid, NotFound
from apiserver_mock.fencing import Fencer, Guard, violated
from apiserver_mock.registry.graceful import IMMEDIATE, plan_pod_deletion
from apiserver_mock.registry.strategy import (
    MAX_NAME_GENERATION_ATTEMPTS,
    STRATEGIES,
    Strategy,
    generate_name,
)
from apiserver_mock.storage import Store, WriteResult
from apiserver_mock.storage.leases import LeaseManager
from apiserver_mock.validation import validate_binding, validate_object, validate_update
from apiserver_mock.validation.field import FieldErrors
from apiserver_mock.watchcache.cache import WatchCache
from certs.identity import Identity
from kse.etcdclient import KeyValue
from kse.objects.kinds import BY_FIELD, KINDS, Kind, UnknownKindError, lookup_resource
from kse.objects.timeutil import now_rfc3339
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

# Attempts of an unconditional update / delete against concurrent writers before giving up.
MAX_CAS_ATTEMPTS = 16
LEASE_CHURN = "the fencing lease kept changing during the write; please try again"
POD = BY_FIELD["pod"]


@dataclass(slots=True)
class Current:
    """The stored object a write is based on: its bytes, revision and decoded message (shared when
    it comes from the cache: copy before modifying)."""

    value: bytes
    revision: int
    msg: Message

    @classmethod
    def from_kv(cls, kind: Kind, kv: KeyValue) -> Current:
        return cls(kv.value, kv.mod_revision, kind.message.FromString(kv.value))


ETCD_MAX_REVISION = 2**63 - 1  # etcd revisions are int64


def parse_rv(text: str, what: str = "resourceVersion") -> int:
    """A resourceVersion as an etcd revision. Strict as the etcd3 storage's versioner
    (k8s.io/apiserver/pkg/storage/etcd3 ParseResourceVersion: strconv.ParseUint): ASCII digits
    only (Python's int() would take " 3", "+3", "1_0"), and within etcd's int64 revisions, so
    nothing out of range reaches an etcd request."""
    if text.startswith("-") and text[1:].isdigit() and text[1:].isascii():
        raise Invalid(f'invalid {what} "{text}": must not be negative')
    if not (text.isdigit() and text.isascii()):
        raise Invalid(f'invalid {what} "{text}": must be a decimal etcd revision')
    rv = int(text)
    if rv > ETCD_MAX_REVISION:
        raise Invalid(f'invalid {what} "{text}": out of range (etcd revisions are int64)')
    return rv


class Registry:
    def __init__(
        self,
        store: Store,
        caches: dict[str, WatchCache],
        authz: Authorizer,
        prefix: bytes,
        fencer: Fencer | None = None,
        *,
        ttls: dict[str, int] | None = None,
        leases: LeaseManager | None = None,
    ) -> None:
        """`ttls`: seconds objects of a resource live after their last write ("events":
        `--event-ttl`), through etcd leases from `leases`."""
        self.store = store
        self.caches = caches
        self.authz = authz
        self.prefix = prefix
        self.fencer = fencer or Fencer(caches["lease"], store)
        self.ttls = {r: t for r, t in (ttls or {}).items() if t > 0}
        if self.ttls and leases is None:
            raise ValueError("objects with a TTL need a LeaseManager")
        self.leases = leases

    async def _lease(self, kind: Kind) -> int:
        """The etcd lease a write of `kind` carries (0: it lives until deleted). Upstream sets the
        TTL on every create and update of an Event, so an Event lives `--event-ttl` past its last
        write (pkg/registry/core/event/storage/storage.go, TTLFunc)."""
        ttl = self.ttls.get(kind.resource)
        if ttl is None or self.leases is None:
            return 0
        return await self.leases.lease_for(ttl)

    # ------------------------------------------------------------------ helpers

    def kind_for(self, resource: str) -> Kind:
        try:
            return lookup_resource(resource)
        except UnknownKindError as e:
            raise NotFound(f"the server could not find the requested resource: {e}") from None

    def cache(self, kind: Kind) -> WatchCache:
        return self.caches[kind.field]

    @staticmethod
    def namespace_for(kind: Kind, namespace: str) -> str:
        if not kind.namespaced:
            return ""
        return namespace or "default"

    @staticmethod
    def object_of(obj: pb.Object) -> tuple[Kind, Message]:
        field = obj.WhichOneof("kind")
        if field is None:
            served = ", ".join(k.field for k in KINDS)
            raise Invalid(f"the request has no object: set one of {served}")
        kind = BY_FIELD[field]
        return kind, getattr(obj, field)

    async def _base(self, kind: Kind, key: bytes, want_rv: int | None = None) -> Current | None:
        """The object to base a write on: from the cache, or from etcd when the cache does not have
        it (yet) or has another revision than the one the client named."""
        cached = self.cache(kind).get(key)
        if cached is not None and (want_rv is None or cached.revision == want_rv):
            return Current(cached.value, cached.revision, cached.message)
        kv, _ = await self.store.get(key)
        return Current.from_kv(kind, kv) if kv is not None else None

    @staticmethod
    def _from(kind: Kind, kv: KeyValue | None) -> Current | None:
        """The current object a failed transaction read back (None: the key is gone)."""
        if kv is None:
            return None
        try:
            return Current.from_kv(kind, kv)
        except DecodeError as e:
            raise errors.APIError(f"stored object {kv.key!r} cannot be decoded: {e}") from None

    async def lookup(self, kind: Kind, namespace: str, name: str) -> Message | None:
        cache = self.cache(kind)
        key = cache.key(namespace, name)
        cached = cache.get(key)
        if cached is not None:
            return cached.message
        kv, _ = await self.store.get(key)
        return kind.message.FromString(kv.value) if kv is not None else None

    def list_all(self, kind: Kind) -> list[Message]:
        return [o.message for o in self.cache(kind).objects.values()]

    async def guard(
        self, ident: Identity, fence: pb.FenceToken | None, kind: Kind, subresource: str, name: str
    ) -> Guard:
        """The fence guard of a write (FencedOff at once when the token does not hold now)."""
        return await self.fencer.guard(ident, fence, kind, subresource, name)

    @staticmethod
    def check_guard(guard: Guard, res: WriteResult) -> None:
        """After a failed write: FAILED_PRECONDITION if it was the fence that failed."""
        if guard.keys:
            why = violated(guard, res.guard_values)
            if why:
                raise FencedOff(why)

    @staticmethod
    def _raise_invalid(kind: Kind, name: str, errs: FieldErrors) -> None:
        if errs:
            raise errors.invalid(kind, name, errs.items)

    # ------------------------------------------------------------------ get

    async def get(self, ident: Identity, req: pb.GetRequest) -> tuple[bytes, int]:
        kind = self.kind_for(req.resource)
        ns = self.namespace_for(kind, req.namespace)
        self.authz.authorize(ident, "get", kind, "", ns, req.name)
        if not req.name:
            raise Invalid("name is required")
        kv, rev = await self.store.get(self.cache(kind).key(ns, req.name))
        if kv is None:
            raise errors.not_found(kind, req.name)
        return wire.object_wire(kind, kv.value, kv.mod_revision), rev

    # ------------------------------------------------------------------ create

    async def create(self, ident: Identity, req: pb.WriteRequest) -> tuple[bytes, int]:
        kind, msg = self.object_of(req.object)
        meta: pb.ObjectMeta = msg.metadata  # type: ignore[attr-defined]
        if kind.namespaced and not meta.namespace:
            meta.namespace = "default"
        generated = not meta.name and bool(meta.generate_name)
        strategy = STRATEGIES[kind.field]
        strategy.prepare_for_create(kind, msg)
        self.authz.authorize(ident, "create", kind, "", meta.namespace, meta.name)
        self._raise_invalid(kind, meta.name, validate_object(kind, msg))
        await strategy.admit_create(msg, self.lookup, self.list_all)
        value = msg.SerializeToString()
        cache = self.cache(kind)
        guard = await self.guard(ident, req.fence, kind, "", meta.name)
        if req.dry_run:
            return wire.object_wire(kind, value), cache.revision
        lease = await self._lease(kind) if kind.resource in self.ttls else 0  # no await on the hot path
        res = await self.store.create(
            cache.key(meta.namespace, meta.name), value, guard, lease=lease, grouped=True
        )
        # A generated name that is taken is drawn again, as upstream's store does
        # (k8s.io/apiserver/pkg/registry/generic/registry/store.go, createWithGenerateNameRetry).
        for _ in range(MAX_NAME_GENERATION_ATTEMPTS - 1):
            if res.succeeded or not generated or res.current is None:
                break
            self.check_guard(guard, res)  # a fence that failed is reported, not retried
            meta.name = generate_name(meta.generate_name)
            value = msg.SerializeToString()
            res = await self.store.create(
                cache.key(meta.namespace, meta.name), value, guard, lease=lease, grouped=True
            )
        if not res.succeeded:
            self.check_guard(guard, res)
            if res.current is None:  # only the fence's Lease moved, MAX_LEASE_RENEWALS times
                raise errors.conflict(kind, meta.name, LEASE_CHURN)
            raise errors.already_exists(kind, meta.name)
        return wire.object_wire(kind, value, res.revision), res.revision

    # ------------------------------------------------------------------ update

    async def update(
        self, ident: Identity, req: pb.WriteRequest, *, status: bool = False
    ) -> tuple[bytes, int]:
        kind, msg = self.object_of(req.object)
        meta: pb.ObjectMeta = msg.metadata  # type: ignore[attr-defined]
        ns = self.namespace_for(kind, meta.namespace)
        if kind.namespaced:
            meta.namespace = ns
        strategy = STRATEGIES[kind.field]
        sub = "status" if status else ""
        if status and not strategy.has_status:
            raise NotFound(f'the server could not find the requested resource ("{kind.resource}/status")')
        check = self.authz.authorize(ident, "update", kind, sub, ns, meta.name)
        if not meta.name:
            self._raise_invalid(kind, meta.name, _required("metadata.name"))
        want_rv = parse_rv(meta.resource_version) if meta.resource_version else None
        key = self.cache(kind).key(ns, meta.name)
        guard = await self.guard(ident, req.fence, kind, sub, meta.name)
        base = await self._base(kind, key, want_rv)
        for _ in range(MAX_CAS_ATTEMPTS):
            if base is None:
                raise errors.not_found(kind, meta.name)
            if want_rv is not None and base.revision != want_rv:
                raise errors.conflict(kind, meta.name, errors.MODIFIED)
            if check is not None:
                check.check(base.msg)
            new = self._updated(kind, strategy, msg, base, status)
            self._raise_invalid(kind, meta.name, validate_update(kind, new, base.msg))
            value = new.SerializeToString()
            if req.dry_run:
                return wire.object_wire(kind, value, base.revision), base.revision
            lease = await self._lease(kind) if kind.resource in self.ttls else 0
            res = await self.store.update(key, value, base.revision, guard, lease=lease)
            if res.succeeded:
                return wire.object_wire(kind, value, res.revision), res.revision
            self.check_guard(guard, res)
            guard = res.guard
            base = self._from(kind, res.current)
        raise errors.conflict(kind, meta.name, errors.MODIFIED)

    @staticmethod
    def _updated(kind: Kind, strategy: Strategy, msg: Message, base: Current, status: bool) -> Message:
        if status:
            return strategy.prepare_for_status_update(msg.status, base.msg)  # type: ignore[attr-defined]
        new = type(msg)()
        new.CopyFrom(msg)
        strategy.prepare_for_update(kind, new, base.msg)
        return new

    # ------------------------------------------------------------------ delete

    async def delete(self, ident: Identity, req: pb.DeleteRequest) -> tuple[bytes, int]:
        kind = self.kind_for(req.resource)
        ns = self.namespace_for(kind, req.namespace)
        check = self.authz.authorize(ident, "delete", kind, "", ns, req.name)
        want_rv = parse_rv(req.resource_version) if req.resource_version else None
        if not req.name:
            raise Invalid("name is required")
        _check_propagation(req.propagation_policy)
        guard = await self.guard(ident, req.fence, kind, "", req.name)
        grace = req.grace_period_seconds if req.HasField("grace_period_seconds") else None
        return await self._delete(
            kind, ns, req.name, check, want_rv, req.uid, guard, grace=grace, dry_run=req.dry_run
        )

    async def evict(
        self, ident: Identity, req: pb.EvictRequest, notes: dict[str, object] | None = None
    ) -> tuple[bytes, int]:
        """pods/eviction: a delete that honours PodDisruptionBudgets (`eviction.evict`)."""
        from apiserver_mock.registry.eviction import evict  # the eviction module builds on this one

        return await evict(self, ident, req, notes)

    async def _delete(
        self,
        kind: Kind,
        ns: str,
        name: str,
        check: ObjectCheck | None,
        want_rv: int | None,
        want_uid: str,
        guard: Guard,
        *,
        grace: int | None = None,
        dry_run: bool = False,
    ) -> tuple[bytes, int]:
        """Delete, or for a pod start (or shorten) its graceful deletion (`graceful`): the answer
        is the object as deleted, or the terminating pod as stored."""
        key = self.cache(kind).key(ns, name)
        base = await self._base(kind, key, want_rv)
        for _ in range(MAX_CAS_ATTEMPTS):
            if base is None:
                raise errors.not_found(kind, name)
            failed = precondition_failure(base.msg.metadata.uid, base.revision, want_uid, want_rv)  # type: ignore[attr-defined]
            if failed:
                raise errors.conflict(kind, name, failed)
            if check is not None:
                check.check(base.msg)
            plan = plan_pod_deletion(base.msg, grace) if kind is POD else IMMEDIATE  # type: ignore[arg-type]
            if plan.pending:  # already terminating: nothing to change
                return wire.object_wire(kind, base.value, base.revision), base.revision
            value = plan.pod.SerializeToString() if plan.pod is not None else None
            if dry_run:
                return wire.object_wire(kind, value or base.value, base.revision), base.revision
            if value is None:
                res = await self.store.delete(key, base.revision, guard)
            else:
                res = await self.store.update(key, value, base.revision, guard)
            if res.succeeded:
                return wire.object_wire(kind, value or base.value, res.revision), res.revision
            self.check_guard(guard, res)
            guard = res.guard
            base = self._from(kind, res.current)
        raise errors.conflict(kind, name, errors.MODIFIED)

    # ------------------------------------------------------------------ bind

    async def bind(self, ident: Identity, req: pb.BindRequest) -> tuple[bytes, int]:
        """pods/binding: set spec.nodeName and PodScheduled=True in one CAS transaction.

        The hot path: the pod's bytes come from the watch cache (no etcd read) and are decoded once;
        one txn on its mod_revision. Only when that fails is the current pod (returned by the txn's
        failure branch) examined: bound -> ABORTED, precondition broken -> ABORTED, gone ->
        NOT_FOUND, merely a stale cache -> try again on the current pod.
        """
        binding = req.binding
        bmeta = binding.metadata
        ns = self.namespace_for(POD, bmeta.namespace)
        name = bmeta.name
        self.authz.authorize(ident, "create", POD, "binding", ns, name)
        errs = FieldErrors()
        validate_binding(errs, binding)
        if errs:
            body = errs.items[0] if len(errs) == 1 else "[" + ", ".join(errs.items) + "]"
            raise Invalid(f'Binding "{name}" is invalid: {body}', field_errors=tuple(errs.items), name=name)
        want_rv = parse_rv(bmeta.resource_version) if bmeta.resource_version else None
        key = self.cache(POD).key(ns, name)
        guard = await self.guard(ident, req.fence, POD, "binding", name)
        cached = self.cache(POD).get(key)
        current: tuple[bytes, int] | None
        from_cache = cached is not None
        if cached is not None:
            current = (cached.value, cached.revision)
        else:
            kv, _ = await self.store.get(key)
            current = (kv.value, kv.mod_revision) if kv is not None else None
        for _ in range(3):
            if current is None:
                raise errors.not_found(POD, name)
            value, revision = current
            pod = pb.Pod.FromString(value)
            problem = _binding_problem(pod, revision, ns, name, bmeta.uid, want_rv)
            if problem is not None:
                if from_cache:  # the cache may be behind etcd: decide on the current object
                    kv, _ = await self.store.get(key)
                    current = (kv.value, kv.mod_revision) if kv is not None else None
                    from_cache = False
                    continue
                raise problem
            new_value = _bind(pod, binding.target.name)
            res = await self.store.update(key, new_value, revision, guard, grouped=True)
            if res.succeeded:
                return wire.object_wire(POD, new_value, res.revision), res.revision
            self.check_guard(guard, res)
            guard = res.guard
            current = (res.current.value, res.current.mod_revision) if res.current is not None else None
            from_cache = False
        raise errors.conflict(POD, name, errors.MODIFIED)


def _binding_problem(
    pod: pb.Pod, revision: int, ns: str, name: str, want_uid: str, want_rv: int | None
) -> errors.APIError | None:
    """Why `pod` (stored at `revision`) cannot be bound as requested, or None."""
    if pod.spec.node_name:
        return _already_assigned(ns, name, pod.spec.node_name)
    failed = precondition_failure(pod.metadata.uid, revision, want_uid, want_rv)
    if failed:
        return errors.conflict(POD, name, failed)
    if pod.spec.scheduling_gates:
        return Invalid(f"pod {ns}/{name} has non-empty .spec.schedulingGates and cannot be bound")
    return None


_now_cache: list[object] = [0, ""]


def _now() -> str:
    """now_rfc3339(), computed at most once a second (Time has whole seconds)."""
    second = int(time.time())
    if _now_cache[0] != second:
        _now_cache[0], _now_cache[1] = second, now_rfc3339()
    return _now_cache[1]  # type: ignore[return-value]


def _bind(pod: pb.Pod, node: str) -> bytes:
    """The pod's new stored bytes: spec.nodeName set and the PodScheduled condition True."""
    pod.spec.node_name = node
    now = _now()
    for cond in pod.status.conditions:
        if cond.type == "PodScheduled":
            if cond.status != "True":
                cond.last_transition_time = now
            cond.status = "True"
            cond.reason = ""
            cond.message = ""
            break
    else:
        pod.status.conditions.add(type="PodScheduled", status="True", last_transition_time=now)
    pod.metadata.resource_version = ""
    return pod.SerializeToString()


def _already_assigned(ns: str, name: str, node: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on pods/binding "{name}": '
        f'pod {ns}/{name} is already assigned to node "{node}"'
    )


def precondition_failure(uid: str, revision: int, want_uid: str, want_rv: int | None) -> str:
    """Why a stored object (uid, revision) fails the uid / resourceVersion preconditions ("" if none)."""
    if want_uid and want_uid != uid:
        return f"Precondition failed: UID in precondition: {want_uid}, UID in object meta: {uid}"
    if want_rv is not None and want_rv != revision:
        return (
            f"Precondition failed: ResourceVersion in precondition: {want_rv}, "
            f"ResourceVersion in object meta: {revision}"
        )
    return ""


PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


def _check_propagation(policy: str) -> None:
    """DeleteOptions.propagationPolicy: accepted when valid (kse has no garbage collector, so every
    policy deletes just the object), refused naming the field otherwise."""
    if policy and policy not in PROPAGATION_POLICIES:
        raise Invalid(
            f'propagationPolicy: Unsupported value: "{policy}": supported values: '
            + ", ".join(f'"{p}"' for p in PROPAGATION_POLICIES)
        )


def _required(path: str) -> FieldErrors:
    errs = FieldErrors()
    errs.required(path)
    return errs
