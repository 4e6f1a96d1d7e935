"""Plain data the etcd client returns, and the Compare / Op builders for transactions.

Everything here is immutable and built once per request or event, so callers (the API server's
storage layer, its watch cache) can keep references without copying. Compare and Op hold the
ready-made protobuf message: a transaction only assembles them, it converts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kse.etcdclient import _proto as pb


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as etcd stores it. `mod_revision` is the Kubernetes resourceVersion."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0  # the etcd lease it is attached to (0: none); etcd deletes it when that expires


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A change to one key. For DELETE, `kv.mod_revision` is the revision of the delete and
    `kv.value` is empty; the deleted object is `prev_kv` (when the watch asked for prev_kv)."""

    type: Literal["PUT", "DELETE"]
    kv: KeyValue
    prev_kv: KeyValue | None


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """What a watch yields: all events of one revision, or a progress notification.

    With `progress=False`, `events` are every event of revision `revision` in the watched range
    (a txn touching several keys gives one batch). With `progress=True`, `events` is empty and the
    batch means "every event up to and including `revision` has been delivered": resuming a watch
    from `revision + 1` loses nothing and repeats nothing.
    """

    revision: int
    events: tuple[WatchEvent, ...]
    progress: bool


@dataclass(frozen=True, slots=True)
class RangeResult:
    """A range read: the keys, the store revision it reflects, whether a limit cut it short, and
    the total number of keys in the range (`count` ignores `limit`)."""

    kvs: list[KeyValue]
    revision: int
    more: bool
    count: int


@dataclass(frozen=True, slots=True)
class TxnResult:
    """A transaction's outcome. `responses` has one entry per op of the branch that ran: a
    `RangeResult` for a get, the previous `KeyValue` (or None) for a put or delete."""

    succeeded: bool
    revision: int
    responses: list[RangeResult | KeyValue | None]


@dataclass(frozen=True)
class EtcdTLS:
    """Client-side TLS towards etcd: the CA bundle that verifies etcd, and our client cert/key for
    etcd's `--client-cert-auth` (both None for server-only TLS)."""

    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("EtcdTLS: cert_file and key_file go together (both or neither)")


def prefix_range_end(prefix: bytes) -> bytes:
    """The `range_end` that makes [prefix, range_end) cover exactly the keys starting with `prefix`.

    Increment the last byte that is not 0xff and drop what follows; a prefix of only 0xff bytes (or
    an empty one) has no upper bound, which etcd spells b"\\x00" ("every key >= key").
    """
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\x00"


def kv_from_pb(kv: Any) -> KeyValue:
    """mvccpb.KeyValue -> KeyValue."""
    return KeyValue(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)


def range_result_from_pb(resp: Any) -> RangeResult:
    """etcdserverpb.RangeResponse -> RangeResult."""
    return RangeResult(
        [
            KeyValue(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)
            for kv in resp.kvs
        ],
        resp.header.revision,
        resp.more,
        resp.count,
    )


class Compare:
    """One condition of a transaction, built with comparison operators:

    ```
    Compare.version(key) == 0            # key does not exist (create)
    Compare.mod_revision(key) == rv      # nobody wrote key since rv (update with resourceVersion)
    Compare.create_revision(key) > 0
    Compare.value(key) != b"x"
    ```
    """

    __slots__ = ("pb",)

    def __init__(self, message: Any) -> None:
        self.pb = message

    @staticmethod
    def version(key: bytes) -> CompareTarget:
        """The key's version: 0 when it does not exist, 1 after its creation, +1 per write."""
        return CompareTarget(key, pb.TARGET_VERSION, "version")

    @staticmethod
    def mod_revision(key: bytes) -> CompareTarget:
        """The revision of the key's last write (0 when it does not exist)."""
        return CompareTarget(key, pb.TARGET_MOD, "mod_revision")

    @staticmethod
    def create_revision(key: bytes) -> CompareTarget:
        """The revision at which the key was created (0 when it does not exist)."""
        return CompareTarget(key, pb.TARGET_CREATE, "create_revision")

    @staticmethod
    def value(key: bytes) -> CompareTarget:
        """The key's value (bytes)."""
        return CompareTarget(key, pb.TARGET_VALUE, "value")

    def __repr__(self) -> str:
        m = self.pb
        op = {pb.CMP_EQUAL: "==", pb.CMP_NOT_EQUAL: "!=", pb.CMP_LESS: "<", pb.CMP_GREATER: ">"}[m.result]
        field = m.WhichOneof("target_union")
        return f"Compare({field}({m.key!r}) {op} {getattr(m, field)!r})"


class CompareTarget:
    """The left-hand side of a Compare; `==`, `!=`, `<`, `>` with a value give the Compare."""

    __slots__ = ("field", "key", "target")
    __hash__ = None  # type: ignore[assignment]  # == builds a Compare, so instances are not hashable

    def __init__(self, key: bytes, target: int, field: str) -> None:
        if not isinstance(key, bytes):
            raise TypeError(f"etcd keys are bytes, got {type(key).__name__}")
        self.key = key
        self.target = target
        self.field = field

    def _compare(self, result: int, operand: object) -> Compare:
        if self.field == "value":
            if not isinstance(operand, bytes):
                raise TypeError(f"Compare.value() takes bytes, got {type(operand).__name__}")
        elif not isinstance(operand, int) or isinstance(operand, bool):
            raise TypeError(f"Compare.{self.field}() takes an int, got {type(operand).__name__}")
        return Compare(
            pb.CompareMsg(result=result, target=self.target, key=self.key, **{self.field: operand})
        )

    def __eq__(self, operand: object) -> Compare:  # type: ignore[override]
        return self._compare(pb.CMP_EQUAL, operand)

    def __ne__(self, operand: object) -> Compare:  # type: ignore[override]
        return self._compare(pb.CMP_NOT_EQUAL, operand)

    def __lt__(self, operand: object) -> Compare:
        return self._compare(pb.CMP_LESS, operand)

    def __gt__(self, operand: object) -> Compare:
        return self._compare(pb.CMP_GREATER, operand)


OpKind = Literal["get", "put", "delete"]


class Op:
    """One operation of a transaction branch: `Op.get`, `Op.put`, `Op.delete`."""

    __slots__ = ("kind", "pb")

    def __init__(self, kind: OpKind, message: Any) -> None:
        self.kind = kind
        self.pb = message

    @staticmethod
    def get(
        key: bytes,
        range_end: bytes | None = None,
        *,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
    ) -> Op:
        """Read `key` (or [key, range_end)) inside the txn; its result is a RangeResult."""
        return Op(
            "get",
            pb.RequestOp(
                request_range=pb.RangeRequest(
                    key=key,
                    range_end=range_end or b"",
                    limit=limit,
                    keys_only=keys_only,
                    count_only=count_only,
                )
            ),
        )

    @staticmethod
    def put(key: bytes, value: bytes, prev_kv: bool = False, *, lease: int = 0) -> Op:
        """Write `key`; with prev_kv its result is the previous KeyValue (None if it did not exist).
        With a `lease` (an ID from `EtcdClient.grant_lease`), etcd deletes the key when it expires."""
        request = pb.PutRequest(key=key, value=value, prev_kv=prev_kv, lease=lease)
        return Op("put", pb.RequestOp(request_put=request))

    @staticmethod
    def delete(key: bytes, prev_kv: bool = False, *, range_end: bytes | None = None) -> Op:
        """Delete `key` (or [key, range_end)); with prev_kv its result is the deleted KeyValue (the
        first one for a range) or None."""
        return Op(
            "delete",
            pb.RequestOp(
                request_delete_range=pb.DeleteRangeRequest(
                    key=key, range_end=range_end or b"", prev_kv=prev_kv
                )
            ),
        )

    def __repr__(self) -> str:
        return f"Op.{self.kind}({self.pb})"


def txn_response_from_pb(resp: Any) -> list[RangeResult | KeyValue | None]:
    """The per-op results of a TxnResponse, in op order."""
    out: list[RangeResult | KeyValue | None] = []
    for r in resp.responses:
        which = r.WhichOneof("response")
        if which == "response_range":
            out.append(range_result_from_pb(r.response_range))
        elif which == "response_put":
            prev = r.response_put.prev_kv
            out.append(kv_from_pb(prev) if prev.mod_revision else None)
        elif which == "response_delete_range":
            prevs = r.response_delete_range.prev_kvs
            out.append(kv_from_pb(prevs[0]) if prevs else None)
        else:
            out.append(None)
    return out
