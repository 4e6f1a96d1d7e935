"""`no_rotation_rpc_errors` with the windows the nemesis records: overlapping rotations of one target,
rotate-ca's steps, errors an expire-cert fault causes on purpose, errors of an API server outage;
and `pods_bound_once`'s young pods (attached runs)."""

from __future__ import annotations

from chaos.checker.invariants import no_rotation_rpc_errors, pods_bound_once
from chaos.history import FaultRecord, History, RpcErrorRecord, fault_windows
from kse.audit import AuditRecord
from proto import kse_pb2 as pb


def _rot(ts: float, target: str, phase: str, **extra: object) -> FaultRecord:
    return FaultRecord(ts, "rotate_certs", target, {"phase": phase, **extra})


def test_overlapping_windows_of_one_target_pair_first_in_first_out() -> None:
    faults = [
        _rot(10.0, "scheduler-1", "start"),
        _rot(12.0, "scheduler-1", "start"),
        _rot(13.0, "scheduler-1", "end"),
        _rot(15.0, "scheduler-1", "end"),
    ]
    spans = [(w.start, w.end) for w in fault_windows(faults)]
    assert spans == [(10.0, 13.0), (12.0, 15.0)]


def test_rotate_ca_steps_are_not_windows_of_their_own() -> None:
    faults = [
        FaultRecord(1.0, "rotate_ca", "all", {"phase": "start"}),
        FaultRecord(1.0, "rotate_ca", "all", {"part_of": "rotate_ca", "step": "add"}),
        FaultRecord(2.0, "restart", "etcd-0", {"part_of": "rotate_ca"}),
        FaultRecord(5.0, "rotate_ca", "all", {"part_of": "rotate_ca", "step": "switch"}),
        FaultRecord(9.0, "rotate_ca", "all", {"phase": "end"}),
    ]
    assert [(w.fault, w.start, w.end) for w in fault_windows(faults, ["rotate_ca"])] == [
        ("rotate_ca", 1.0, 9.0)
    ]


def test_expired_clients_errors_are_not_charged_to_a_rotation_but_others_are() -> None:
    h = History(
        faults=[
            FaultRecord(10.0, "expire_certs", "scheduler-2", {"phase": "start", "client": "scheduler-2"}),
            _rot(12.0, "apiserver", "start"),
            _rot(15.0, "apiserver", "end"),
            FaultRecord(30.0, "expire_certs", "scheduler-2", {"phase": "end", "client": "scheduler-2"}),
        ],
        rpc_errors=[
            RpcErrorRecord(13.0, "scheduler-2", "/Leases/Update", "UNAVAILABLE"),  # the expired one
            RpcErrorRecord(14.0, "nodesim", "/Nodes/UpdateStatus", "UNAVAILABLE"),  # a rotation's
            RpcErrorRecord(14.5, "workload", "/Pods/Create", "ALREADY_EXISTS"),  # an answer
        ],
    )
    r = no_rotation_rpc_errors(h)
    assert not r.passed
    assert [v["client"] for v in r.violations] == ["nodesim"]
    assert r.counts["expected_expiry_errors"] == 1 and r.counts["ignored_application_errors"] == 1
    assert "let expire" in r.detail


def test_expiry_errors_after_the_heal_and_its_grace_are_charged_again() -> None:
    h = History(
        faults=[
            FaultRecord(10.0, "expire_certs", "scheduler-2", {"phase": "start", "client": "scheduler-2"}),
            FaultRecord(12.0, "expire_certs", "scheduler-2", {"phase": "end", "client": "scheduler-2"}),
            _rot(20.0, "all", "start"),
            _rot(23.0, "all", "end"),
        ],
        rpc_errors=[RpcErrorRecord(21.0, "scheduler-2", "/Leases/Update", "UNAVAILABLE")],
    )
    assert not no_rotation_rpc_errors(h).passed


def test_errors_of_an_apiserver_outage_are_not_a_rotations() -> None:
    h = History(
        faults=[
            FaultRecord(10.0, "restart", "apiserver", {"pid": 1}),
            _rot(11.0, "all", "start"),
            FaultRecord(12.0, "restart", "apiserver", {"after": "restart", "ready": True}),
            _rot(16.0, "all", "end"),
        ],
        rpc_errors=[
            RpcErrorRecord(11.5, "scheduler-1", "/Pods/Bind", "UNAVAILABLE"),  # outage
            RpcErrorRecord(13.5, "nodesim", "/Nodes/UpdateStatus", "UNAVAILABLE"),  # outage grace (2 s)
            RpcErrorRecord(15.0, "workload", "/Pods/Create", "UNAVAILABLE"),  # the rotation's
        ],
    )
    r = no_rotation_rpc_errors(h)
    assert r.counts["apiserver_outage_errors"] == 2
    assert [v["client"] for v in r.violations] == ["workload"]


def _pod(name: str, created: str) -> pb.Pod:
    p = pb.Pod()
    p.metadata.namespace, p.metadata.name, p.metadata.uid = "default", name, f"uid-{name}"
    p.metadata.creation_timestamp = created
    return p


def test_young_pending_pods_pass_old_ones_do_not() -> None:
    audit = [
        AuditRecord(ts=100.0, user="w", verb="create", resource="pods", namespace="default", name="old",
                    code="OK", revision=5, uid="uid-old"),
        AuditRecord(ts=200.0, user="w", verb="create", resource="pods", namespace="default", name="new",
                    code="OK", revision=6, uid="uid-new"),
    ]  # fmt: skip
    h = History(
        audit=audit,
        pods=[_pod("old", "1970-01-01T00:01:40Z"), _pod("new", "1970-01-01T00:03:20Z")],
        nodes=[],
    )
    r = pods_bound_once(h, young_after=150.0)
    assert r.counts.get("young") == 1
    assert [v["pod"] for v in r.violations] == ["default/old"]
    assert not pods_bound_once(h).passed and len(pods_bound_once(h).violations) == 2
