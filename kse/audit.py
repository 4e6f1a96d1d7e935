"""The audit record: one JSON line per write request the API server handles.

The API server appends these (Kubernetes audit style) and the chaos checker and failover benchmark
read them back as the history of the run, so the record format lives here, in the package both
may import, and nowhere else.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class AuditFence:
    """The fencing token a write carried: the lease it names, its holder and transition count."""

    lease: str  # "namespace/name"
    holder: str
    transitions: int


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One write request and its outcome.

    `ts` is the API server's wall clock (epoch seconds) when the request completed; `revision` is the
    etcd revision the write produced (None when it was refused). For binds `node` is the target; for
    lease writes `lease_holder` / `lease_transitions` / `lease_renew_time` record the written spec, so
    the lease history can be rebuilt from the log alone.
    """

    ts: float
    user: str
    verb: str  # create | update | update_status | delete | bind | evict
    resource: str  # pods, nodes, leases, events, priorityclasses
    namespace: str
    name: str
    code: str  # gRPC status code name: OK, ABORTED, FAILED_PRECONDITION, ...
    groups: tuple[str, ...] = ()
    subresource: str = ""  # binding | status | eviction
    revision: int | None = None
    fence: AuditFence | None = None
    node: str = ""
    uid: str = ""
    lease_holder: str | None = None
    lease_transitions: int | None = None
    lease_renew_time: str | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """One line of JSON, keys sorted, empty fields (None, "", {}, []) left out.

        Built field by field rather than with `dataclasses.asdict`, whose deep copy made this the
        largest cost of an audited write in the API server (about 2.5x slower); same output."""
        data: dict[str, Any] = {}
        for name in _RECORD_FIELDS:
            value = getattr(self, name)
            if name == "groups":
                value = list(value)
            elif name == "fence" and value is not None:
                value = {f: getattr(value, f) for f in _FENCE_FIELDS}
            if value not in (None, "", {}, []):
                data[name] = value
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> AuditRecord:
        data = json.loads(line)
        # to_json leaves out empty strings, including required ones: a cluster-scoped object's
        # namespace, a refused request's user. Absent means "".
        for name in _REQUIRED_TEXT:
            data.setdefault(name, "")
        fence = data.pop("fence", None)
        groups = tuple(data.pop("groups", ()))
        known = set(cls.__dataclass_fields__)
        extra = {k: data.pop(k) for k in list(data) if k not in known}
        if extra:
            data.setdefault("extra", {}).update(extra)
        return cls(fence=AuditFence(**fence) if fence else None, groups=groups, **data)


_RECORD_FIELDS = tuple(f.name for f in fields(AuditRecord))
_FENCE_FIELDS = tuple(f.name for f in fields(AuditFence))
_REQUIRED_TEXT = ("user", "verb", "resource", "namespace", "name", "code")


_BACKUP_TIME = "%Y-%m-%dT%H-%M-%S"  # lumberjack's "2006-01-02T15-04-05.000", UTC


def audit_log_backup_name(path: Path, when: float) -> str:
    """The name a rotated audit log takes: `audit-2026-12-03T09-07-47.123.jsonl` for `audit.jsonl`,
    as kube-apiserver's (lumberjack) backups; fixed width, so names sort in time order."""
    stamp = time.strftime(_BACKUP_TIME, time.gmtime(when)) + f".{int(when * 1000) % 1000:03d}"
    return f"{path.stem}-{stamp}{path.suffix}"


def audit_log_backups(path: Path) -> list[Path]:
    """The rotated files of the audit log at `path`, oldest first."""
    pattern = re.compile(
        re.escape(path.stem) + r"-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}" + re.escape(path.suffix) + "$"
    )
    try:
        names = [p for p in path.parent.iterdir() if pattern.match(p.name)]
    except FileNotFoundError:
        return []
    return sorted(names, key=lambda p: p.name)


def audit_log_files(path: Path) -> list[Path]:
    """Every file of the audit log at `path` in write order: its rotated backups, then itself."""
    return [*audit_log_backups(path), *([path] if path.exists() else [])]


def read_audit_logs(path: Path) -> Iterator[AuditRecord]:
    """Every record of the audit log at `path`, its rotated backups first (`AuditLog` rotation)."""
    for p in audit_log_files(path):
        yield from read_audit_log(p)


def read_audit_log(path: Path) -> Iterator[AuditRecord]:
    """Records in file order; a torn last line (the server was killed mid-write) is skipped."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield AuditRecord.from_json(line)
            except (json.JSONDecodeError, TypeError):
                continue
