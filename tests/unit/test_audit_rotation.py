"""The audit log's rotation (`--audit-log-maxsize` / `--audit-log-maxbackup`, as kube-apiserver's):
no record is split or lost across files while backups are kept, the oldest go first once capped,
the readers see every file in write order, and the runner's tail follows the log across a
rotation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from apiserver_mock.audit import AuditLog
from chaos.audit_tail import AuditTail
from kse.audit import AuditFence, AuditRecord, audit_log_backup_name, audit_log_backups, read_audit_logs


def _record(i: int, verb: str = "create") -> AuditRecord:
    fence = (
        AuditFence(holder="s1", transitions=0, lease="kube-system/kube-scheduler") if verb == "bind" else None
    )
    return AuditRecord(
        ts=float(i), user="u", verb=verb, resource="pods", namespace="default", name=f"p{i}", code="OK",
        revision=i, fence=fence,
    )  # fmt: skip


def test_a_rotated_log_keeps_every_record_once_in_order(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    size = len(_record(0).to_json()) + 1
    log = AuditLog(path, max_size_bytes=10 * size + size // 2)
    for i in range(100):
        log.write(_record(i))
    log.close()
    backups = audit_log_backups(path)
    assert log.rotations == len(backups) >= 9
    assert all(p.stat().st_size <= 10 * size + size // 2 for p in [*backups, path])
    assert [r.name for r in read_audit_logs(path)] == [f"p{i}" for i in range(100)]


def test_only_the_newest_backups_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    size = len(_record(0).to_json()) + 1
    log = AuditLog(path, max_size_bytes=5 * size, max_backups=2)
    for i in range(100):
        log.write(_record(i))
    log.close()
    assert len(audit_log_backups(path)) == 2
    names = [r.name for r in read_audit_logs(path)]
    assert names == [f"p{i}" for i in range(100 - len(names), 100)] and len(names) <= 15


def test_without_a_size_the_log_never_rotates(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    for i in range(50):
        log.write(_record(i))
    log.close()
    assert audit_log_backups(path) == [] and len(list(read_audit_logs(path))) == 50
    with pytest.raises(ValueError):
        AuditLog(tmp_path / "x.jsonl", max_size_bytes=-1)


def test_backup_names_sort_in_time_order_and_only_backups_match(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    t = time.time()
    for when in (t + 86400, t, t + 0.5):
        (tmp_path / audit_log_backup_name(path, when)).write_text("")
    (tmp_path / "audit-notes.jsonl").write_text("")
    (tmp_path / "other-2026-12-03T09-07-47.123.jsonl").write_text("")
    assert audit_log_backup_name(path, 1796287236.5) == "audit-2026-12-03T08-40-36.500.jsonl"
    found = [p.name for p in audit_log_backups(path)]
    assert found == sorted(found) and len(found) == 3


def test_the_runners_tail_follows_the_log_across_a_rotation(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    size = len(_record(0, "bind").to_json()) + 1
    log = AuditLog(path, max_size_bytes=3 * size)
    tail = AuditTail([path])
    for i in range(3):
        log.write(_record(i, "bind"))
    assert tail.count("s1") == 3
    for i in range(3, 5):  # the first of these rotates the file
        log.write(_record(i, "bind"))
    log.close()
    assert log.rotations == 1
    assert tail.count("s1") == 5


def test_the_tail_counts_a_holders_bind_rate_over_a_window(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    for i in range(10):  # binds at t = 0..9 s
        log.write(_record(i, "bind"))
    log.close()
    tail = AuditTail([path])
    assert tail.rate("s1", 2.0, now=9.0) == 1.5  # t = 7, 8, 9 in [7, 9]
    assert tail.rate("s1", 10.0, now=9.0) == 1.0
    assert tail.rate("s1", 2.0, now=30.0) == 0.0 and tail.rate("nobody", 2.0, now=9.0) == 0.0
