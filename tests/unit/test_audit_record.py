"""`kse.audit.AuditRecord`: the JSON line format (to_json / from_json / read_audit_log)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from kse.audit import AuditFence, AuditRecord, read_audit_log

RECORDS = [
    AuditRecord(ts=1.5, user="u", verb="create", resource="pods", namespace="default", name="p", code="OK"),
    AuditRecord(
        ts=1796000000.123456,
        user="system:kube-scheduler",
        groups=("a", "b"),
        verb="bind",
        resource="pods",
        subresource="binding",
        namespace="default",
        name="p",
        code="OK",
        revision=0,
        fence=AuditFence("kube-system/kube-scheduler", "s1", 0),
        node="n1",
        uid="u-1",
        extra={"phase": "Running", "nested": {"k": [1, 2]}},
    ),
    AuditRecord(
        ts=2.0,
        user="s",
        verb="update",
        resource="leases",
        namespace="kube-system",
        name="kube-scheduler",
        code="OK",
        revision=9,
        lease_holder="s1",
        lease_transitions=0,
        lease_renew_time="2026-01-01T00:00:00.000000Z",
        extra={"lease_duration_seconds": 15},
    ),
    AuditRecord(
        ts=3.0, user="", verb="delete", resource="x", namespace="", name="", code="NOT_FOUND", message="gone"
    ),
]


def reference_json(r: AuditRecord) -> str:
    """The format as first written: asdict, groups as a list, empty values left out."""
    data = asdict(r)
    data["groups"] = list(r.groups)
    return json.dumps({k: v for k, v in data.items() if v not in (None, "", {}, [])}, sort_keys=True)


@pytest.mark.parametrize("record", RECORDS)
def test_to_json_is_the_reference_format_and_round_trips(record: AuditRecord) -> None:
    line = record.to_json()
    assert line == reference_json(record)
    assert "\n" not in line
    assert AuditRecord.from_json(line) == record


def test_empty_strings_read_back_as_empty() -> None:
    """Empty values are left out of the line; a required one (a cluster-scoped object's namespace)
    reads back as "", an optional lease_holder (a release) as None."""
    node = AuditRecord(
        ts=1.0, user="kse:admin", verb="create", resource="nodes", namespace="", name="n1", code="OK"
    )
    assert "namespace" not in json.loads(node.to_json())
    assert AuditRecord.from_json(node.to_json()) == node
    release = AuditRecord(
        ts=1.0,
        user="s",
        verb="update",
        resource="leases",
        namespace="ns",
        name="l",
        code="OK",
        lease_holder="",
    )
    assert AuditRecord.from_json(release.to_json()).lease_holder is None


def test_read_audit_log_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(r.to_json() + "\n" for r in RECORDS) + RECORDS[1].to_json()[:40])
    assert list(read_audit_log(path)) == RECORDS
