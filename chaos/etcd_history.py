"""What etcd itself says was written: the check on the API server's audit log.

The audit log is the API server's account of what it accepted. An API server killed between
etcd's commit and its own audit line (the failpoint `storage/after-commit=crash` does exactly
this) leaves a write in etcd that the log never mentions; a bug in the audit path would too. So
after a run on a fresh cluster the runner reads etcd's own history of the cluster's prefix, every
PUT and DELETE since revision 1 (kse never compacts during a run), into `etcd-history.jsonl`, and
the `audit_matches_etcd` invariant holds the two against each other:

* every accepted write in the audit log is in etcd at its revision (nothing acknowledged lost);
* every write etcd has of the audited resources is in the audit log (nothing accepted unseen),
  except the API server's own bookkeeping keys and writes that landed while it was being killed,
  which are reported (as `unaudited`) but do not fail a run that killed the API server, and the
  deletions etcd made itself when a key's lease expired (Events past `--event-ttl`), which no
  request made and so no audit line records (as upstream's audit does not); those are counted
  as `expired`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kse.etcdclient import CompactedError, EtcdClient, EtcdTLS
from kse.etcdclient.model import prefix_range_end
from kse.objects.kinds import BY_RESOURCE
from kse.records import JsonlWriter, read_jsonl

log = logging.getLogger(__name__)

ETCD_HISTORY_FILE = "etcd-history.jsonl"


@dataclass(frozen=True)
class EtcdWrite:
    """One event of etcd's history under the cluster's prefix."""

    revision: int
    type: str  # PUT | DELETE
    resource: str  # "pods"; "" for a key that is not an object (the watch caches' progress marker)
    namespace: str
    name: str
    uid: str = ""
    lease: int = 0  # the etcd lease the key was attached to (a DELETE: before it; Events have one)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> EtcdWrite:
        data: dict[str, Any] = json.loads(line)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def parse_key(prefix: bytes, key: bytes) -> tuple[str, str, str]:
    """(resource, namespace, name) of `prefix/resource/[namespace/]name`; resource "" otherwise."""
    rest = key[len(prefix) :].decode(errors="replace").strip("/").split("/")
    kind = BY_RESOURCE.get(rest[0]) if rest else None
    if kind is None:
        return "", "", ""
    if kind.namespaced and len(rest) == 3:
        return kind.resource, rest[1], rest[2]
    if not kind.namespaced and len(rest) == 2:
        return kind.resource, "", rest[1]
    return "", "", ""


def _uid(resource: str, value: bytes) -> str:
    kind = BY_RESOURCE.get(resource)
    if kind is None or not value:
        return ""
    try:
        msg = kind.message.FromString(value)
    except Exception:
        return ""
    return str(msg.metadata.uid)  # type: ignore[attr-defined]


async def read_etcd_history(
    endpoints: list[str], tls: EtcdTLS | None, prefix: str, *, start_revision: int = 1, within: float = 60.0
) -> list[EtcdWrite]:
    """Every PUT and DELETE under `prefix` from `start_revision` to etcd's revision now (a progress
    notification at or past it ends the read: the last write may be under another prefix).

    When etcd has been compacted past `start_revision` (the API server compacts every
    --etcd-compaction-interval), the history starts at the compaction point instead: what came
    before is gone from etcd, and `audit_matches_etcd` judges only the window read."""
    try:
        return await _read_history(endpoints, tls, prefix, start_revision, within)
    except CompactedError as e:
        if e.compact_revision <= start_revision:
            raise
        log.info("etcd compacted up to revision %d: its history is read from there", e.compact_revision)
        return await _read_history(endpoints, tls, prefix, e.compact_revision, within)


async def _read_history(
    endpoints: list[str], tls: EtcdTLS | None, prefix: str, start_revision: int, within: float
) -> list[EtcdWrite]:
    key = prefix.rstrip("/").encode() + b"/"
    etcd = await EtcdClient.connect(endpoints, tls=tls)
    out: list[EtcdWrite] = []
    try:
        head = (await etcd.range(key, prefix_range_end(key), count_only=True)).revision
        if head < start_revision:
            return out
        async with (
            asyncio.timeout(within),
            etcd.watch(key, prefix_range_end(key), start_revision=start_revision, prev_kv=True) as watch,
        ):
            await etcd.request_progress()
            async for batch in watch:
                for ev in batch.events:
                    resource, ns, name = parse_key(key.rstrip(b"/"), ev.kv.key)
                    kv = ev.kv if ev.type == "PUT" else ev.prev_kv
                    value, lease = (kv.value, kv.lease) if kv is not None else (b"", 0)
                    out.append(
                        EtcdWrite(batch.revision, ev.type, resource, ns, name, _uid(resource, value), lease)
                    )
                if batch.revision >= head:
                    break
    finally:
        await etcd.close()
    return out


def write_etcd_history(path: Path, writes: list[EtcdWrite]) -> None:
    with JsonlWriter(path) as w:
        for rec in writes:
            w.append(rec)


def load_etcd_history(path: Path) -> list[EtcdWrite]:
    return list(read_jsonl(path, EtcdWrite.from_json)) if path.exists() else []
