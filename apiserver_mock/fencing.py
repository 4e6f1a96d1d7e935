"""Leader fencing: a write that carries a `FenceToken` lands only while the token's Lease still has
the token's holder and leaseTransitions, decided in the same etcd transaction as the write.

The check (`Fencer.guard`): read the Lease, from the lease watch cache (hot: every scheduler write
names the same Lease) or from etcd when the cache does not have it or disagrees with the token;
compare holder and leaseTransitions in Python; if they match, the write's transaction gets one more
compare, `mod_revision(lease key) == the revision of the Lease version just checked`. When the
transaction fails, its failure branch reads the Lease back with the object, so the caller learns
what happened with no extra round trip:

* the Lease moved but still has the token's holder and transitions (a renewal landed in between,
  or the cache was behind): `Guard.renewed` re-derives the compare from the Lease just read, and the
  store retries at once (`Store`, bounded by `MAX_LEASE_RENEWALS`). A legitimate leader's write never
  fails because of its own renewals: a renewal changes renewTime only.
* holder or transitions differ, or the Lease is gone: `violated` says so and the registry answers
  FAILED_PRECONDITION (`FencedOff`), naming the lease, the token's holder/transitions and the
  current ones.

Safety: etcd revisions are never reused, so a Lease `mod_revision` names exactly one version of the
Lease (even across a delete and re-create). A fenced write is committed only if, at its commit
revision, the Lease's mod_revision is the one whose value was checked to carry the token's holder
and leaseTransitions: so at the revision the write lands, the Lease is held by that holder in that
term. Any write to the Lease in between (a takeover, a release, a delete) makes the transaction
fail; a refusal is decided only on a Lease read from etcd (never on the cache alone), so a new
leader's first writes are not refused because the cache has not yet seen its acquisition. Nothing
here depends on clocks, pauses or the order in which requests arrive.

A token with an empty holder is refused as invalid: a released Lease has holder "", and such a
token would otherwise match it. With fencing off (`--fencing off`) tokens are accepted and ignored,
and no token is required (to demonstrate what fencing prevents). `--require-fence-for USER` makes a
token mandatory for that user's writes, except its Lease writes (which are how it becomes leader).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from apiserver_mock.errors import FencedOff, Invalid, qualified_resource
from certs.identity import Identity
from kse.etcdclient import Compare, KeyValue
from kse.objects.kinds import BY_FIELD, Kind
from proto import kse_pb2 as pb

if TYPE_CHECKING:
    from apiserver_mock.storage import Store
    from apiserver_mock.watchcache.cache import WatchCache

log = logging.getLogger(__name__)

LEASE = BY_FIELD["lease"]
# Transactions a write retries when only its fence's Lease moved (renewals are seconds apart and a
# transaction takes milliseconds, so one retry is the norm and a second is already rare).
MAX_LEASE_RENEWALS = 8


@dataclass(frozen=True)
class Guard:
    """Extra compares for one write, and the keys whose current values explain a failure.

    For a fence: `compares` is `mod_revision(lease key) == lease_revision`, `keys` the lease key,
    `lease` its "namespace/name" (for messages)."""

    compares: tuple[Compare, ...] = ()
    keys: tuple[bytes, ...] = ()
    token: pb.FenceToken | None = field(default=None, compare=False)
    lease: str = ""
    lease_revision: int = 0

    def renewed(self, current: Sequence[KeyValue | None]) -> Guard | None:
        """After a failed transaction, given the current values of `keys`: the guard to retry with
        when the Lease moved but still matches the token, or None when the fence no longer holds
        (`violated` says why) or is not what failed."""
        if self.token is None or not current:
            return None
        kv = current[0]
        if kv is None or kv.mod_revision == self.lease_revision:
            return None
        if _mismatch(self.token, self.lease, _decode(kv)):
            return None
        return _guard(self.token, self.keys[0], self.lease, kv.mod_revision)


NO_GUARD = Guard()


def violated(guard: Guard, current: Sequence[KeyValue | None]) -> str:
    """Why the guard failed, given the current values of `guard.keys` ("" when it held)."""
    if guard.token is None or not current:
        return ""
    kv = current[0]
    return _mismatch(guard.token, guard.lease, _decode(kv) if kv is not None else None)


class Fencer:
    """Turns a request's fence token into the `Guard` its transaction carries."""

    def __init__(
        self,
        leases: WatchCache,
        store: Store,
        *,
        enabled: bool = True,
        require_for: Collection[str] = (),
    ) -> None:
        self.leases = leases
        self.store = store
        self.enabled = enabled
        self.require_for = frozenset(require_for)
        self._guards: dict[tuple[bytes, str, int], Guard] = {}  # the last guard per lease and token

    async def guard(
        self, ident: Identity, token: pb.FenceToken | None, kind: Kind, subresource: str, name: str
    ) -> Guard:
        """The guard for a write by `ident` carrying `token` (None or empty: no token).

        Raises FencedOff when the token does not match the Lease (or the Lease does not exist), or
        when `ident` must carry a token and did not; Invalid for a token without lease or holder."""
        if not self.enabled:
            return NO_GUARD
        if token is None or not token.ByteSize():
            if ident.user in self.require_for and kind is not LEASE:
                res = qualified_resource(kind, subresource)
                raise FencedOff(
                    f'{res} "{name}": User "{ident.user}" must send a fence token with its writes '
                    f"(the API server runs with --require-fence-for {ident.user})"
                )
            return NO_GUARD
        if not token.lease_name:
            raise Invalid("fence.leaseName: Required value")
        if not token.holder_identity:
            raise Invalid("fence.holderIdentity: Required value: a fence token names the lease holder")
        ns = token.lease_namespace or "default"
        key = self.leases.key(ns, token.lease_name)
        lease = f"{ns}/{token.lease_name}"
        cached = self.leases.get(key)
        if cached is not None:
            known = self._guards.get((key, token.holder_identity, token.lease_transitions))
            if known is not None and known.lease_revision == cached.revision:
                return known
            if not _mismatch(token, lease, cached.message):  # type: ignore[arg-type]
                return self._remember(_guard(token, key, lease, cached.revision))
        # Not in the cache, or the cache disagrees (it may be behind a new leader's acquisition):
        # decide on etcd's current Lease.
        kv, _ = await self.store.get(key)
        why = _mismatch(token, lease, _decode(kv) if kv is not None else None)
        if why:
            raise FencedOff(why)
        assert kv is not None
        return self._remember(_guard(token, key, lease, kv.mod_revision))

    def _remember(self, guard: Guard) -> Guard:
        token = guard.token
        assert token is not None
        if len(self._guards) >= 1024:
            self._guards.clear()
        self._guards[(guard.keys[0], token.holder_identity, token.lease_transitions)] = guard
        return guard


def _guard(token: pb.FenceToken, key: bytes, lease: str, revision: int) -> Guard:
    return Guard((Compare.mod_revision(key) == revision,), (key,), token, lease, revision)


def _decode(kv: KeyValue) -> pb.Lease | None:
    try:
        return pb.Lease.FromString(kv.value)
    except DecodeError:
        log.error("stored Lease %r at revision %d cannot be decoded", kv.key, kv.mod_revision)
        return None


def _mismatch(token: pb.FenceToken, lease: str, current: pb.Lease | None) -> str:
    """Why `current` (None: absent) does not carry the token's holder and transitions ("" if it does)."""
    want = f'fence token holder "{token.holder_identity}", leaseTransitions {token.lease_transitions}'
    if current is None:
        return f"fenced: lease {lease} does not exist ({want})"
    holder = current.spec.holder_identity
    transitions = current.spec.lease_transitions
    if holder == token.holder_identity and transitions == token.lease_transitions:
        return ""
    return (
        f'fenced: lease {lease} is held by "{holder}" with leaseTransitions {transitions}; '
        f"this write's {want}"
    )
