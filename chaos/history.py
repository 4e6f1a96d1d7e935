"""The history of a chaos run: what happened, as recorded by the parties that saw it.

A run directory holds (every file optional, JSON lines unless noted; a torn last line, left by a
process killed mid-write, is skipped):

    audit*.jsonl        the API server's audit log (`kse.audit`), one per API server process;
                        written by the API server
    watch*.jsonl        `WatchDeliveryRecord`s: what each observer's informers delivered; written by
                        a `WatchRecorder` per process (scheduler replicas, the generator, ...)
    faults.jsonl        `FaultRecord`s; written by the nemesis
    rpc-errors*.jsonl   `RpcErrorRecord`s: failed RPCs as clients saw them; written by the clients
    origin.json         {"ts": wall clock, "what": ...}: the run's t=0 (the first leader elected),
                        the one time origin of its console lines, tables and plots; written by the
                        runner (`write_origin`)
    replicas.json       {"lives": [...]}: every start of every elected replica (`ReplicaLife`):
                        the timeline's lanes, standbys and restarts included; written by the runner
    final.json          a JSON object {"pods": [...], "nodes": [...], "created": [...]}: the final
                        state (and optionally every pod the generator created), objects in
                        protobuf's JSON mapping; written by the harness after the run (`write_snapshot`)

Clocks: `AuditRecord.ts` is the API server's wall clock, fault / RPC-error / watch-delivery `ts` the
wall clock of the process that wrote them. In a run on one machine (local processes, or containers
sharing the host kernel) they are the same clock, so they can be compared directly; across machines
they could not. Revisions (etcd's) are the order of record: everything that must be ordered exactly
is ordered by revision, and timestamps are only used for durations and for matching faults.

The lease history (`LeaseHistory`) is rebuilt from the audit log's accepted lease writes alone.
"""

from __future__ import annotations

import bisect
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from chaos.etcd_history import ETCD_HISTORY_FILE, EtcdWrite, load_etcd_history
from chaos.podtimeline import TIMELINE_FILE, PodStateRecord, read_timeline
from kse.audit import AuditRecord, read_audit_logs
from kse.client.informer import LIST, HistoryRecord
from kse.fileio import write_atomic
from kse.objects.meta import object_key  # re-exported (in __all__): the checkers' key
from kse.records import APPLICATION_CODES, JsonlWriter, RpcErrorRecord, RpcErrorRecorder, read_jsonl
from proto import kse_pb2 as pb

__all__ = [
    "APPLICATION_CODES",
    "AUDIT_GLOB",
    "CLOCK_SKEW",
    "CONT",
    "EXPIRE_CERTS",
    "FAULTS_FILE",
    "HEAL",
    "KILL",
    "LEADER_FAULTS",
    "LIST",
    "ORIGIN_FILE",
    "PARTITION",
    "PHASE_END",
    "PHASE_START",
    "REPLICAS_FILE",
    "RESTART",
    "ROTATE_CA",
    "ROTATE_CERTS",
    "ROTATION_FAULTS",
    "RPC_ERRORS_GLOB",
    "SCHEDULER_LEASE",
    "SCHEDULER_USERS",
    "SNAPSHOT_FILE",
    "STOP",
    "TERMINATE",
    "WATCH_GLOB",
    "FaultRecord",
    "FaultWindow",
    "History",
    "JsonlWriter",
    "LeaseHistory",
    "LeaseState",
    "LeaseTerm",
    "ReplicaLife",
    "RpcErrorRecord",
    "RpcErrorRecorder",
    "WatchDeliveryRecord",
    "WatchRecorder",
    "fault_windows",
    "load_snapshot",
    "load_snapshot_revision",
    "object_key",
    "read_jsonl",
    "read_origin",
    "read_replica_lives",
    "to_node",
    "to_pod",
    "write_origin",
    "write_replica_lives",
    "write_snapshot",
]

# ---------------------------------------------------------------- run directory layout

AUDIT_GLOB = "audit*.jsonl"
WATCH_GLOB = "watch*.jsonl"
FAULTS_FILE = "faults.jsonl"
ORIGIN_FILE = "origin.json"
REPLICAS_FILE = "replicas.json"
RPC_ERRORS_GLOB = "rpc-errors*.jsonl"
SNAPSHOT_FILE = "final.json"

# ---------------------------------------------------------------- vocabulary

SCHEDULER_LEASE = "kube-system/kube-scheduler"
# Every kube-scheduler replica authenticates as this user (certs/layout.py); replicas are told apart
# by the holder named in their fence tokens.
SCHEDULER_USERS: frozenset[str] = frozenset({"system:kube-scheduler"})

# Fault names the nemesis writes (FaultRecord.fault). A fault is an instant unless it is a window:
# detail {"duration_s": d}, or a start record followed by one with detail {"phase": "end"} for the
# same fault and target.
KILL = "kill"  # SIGKILL
STOP = "stop"  # SIGSTOP (a pause); its end is a CONT, or a PHASE_END record
CONT = "cont"
TERMINATE = "terminate"  # SIGTERM: a graceful stop (a leader releases its lease)
RESTART = "restart"
PARTITION = "partition"  # the target cut off from the API server (TCP proxy); ends with HEAL / PHASE_END
HEAL = "heal"
ROTATE_CERTS = "rotate_certs"  # leaf certificates re-issued and swapped in while running
ROTATE_CA = "rotate_ca"  # CA rotation (bundle overlap, new leaves, old CA dropped)
EXPIRE_CERTS = "expire_certs"  # certificates let expire: errors are expected, not a rotation failure
CLOCK_SKEW = "clock_skew"  # a replica's clock set off (offset) and/or running fast or slow (rate)
PHASE_START = "start"
PHASE_END = "end"

# Faults that may end the target's term when it leads: the failover analysis times each one that hit
# the leader (an expired client certificate stops its renewals; a skewed clock should not, and is
# timed to show that it did not: "survived").
LEADER_FAULTS: frozenset[str] = frozenset(
    {KILL, STOP, TERMINATE, RESTART, PARTITION, EXPIRE_CERTS, CLOCK_SKEW}
)
ROTATION_FAULTS: frozenset[str] = frozenset({ROTATE_CERTS, ROTATE_CA})


# ---------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class WatchDeliveryRecord:
    """One change an observer's informer delivered (a `kse.client.informer.HistoryRecord`), stamped.

    `type` is ADDED / MODIFIED / DELETED, or LIST (key "") when the informer's state was replaced by
    a list at `resource_version`. `source` is "watch" or "list". `session` tells apart the recorder
    instances of one observer (a restarted process starts a new session, with its own initial list).
    `selector` is non-empty when the informer was filtered (label / field selector): the checker
    then cannot know which writes it should have seen, and judges it more narrowly. `namespace`
    restricts a namespaced informer.
    """

    ts: float
    observer: str
    resource: str
    type: str
    key: str
    resource_version: int
    source: str
    session: str = ""
    namespace: str = ""
    selector: str = ""

    @property
    def is_list(self) -> bool:
        return self.type == LIST

    def to_json(self) -> str:
        data = asdict(self)
        for k in ("session", "namespace", "selector"):
            if not data[k]:
                del data[k]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> WatchDeliveryRecord:
        data = json.loads(line)
        data["resource_version"] = _rv_int(data.get("resource_version", 0))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def _rv_int(rv: object) -> int:
    if isinstance(rv, int):
        return rv
    s = str(rv)
    return int(s) if s.isdigit() else 0


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """One fault the nemesis injected, at `ts` (its wall clock, epoch seconds).

    `target` names what was hit: a process ("scheduler-2", "apiserver-1", "etcd-0"), or a link for a
    partition. For faults on scheduler replicas the nemesis should put the replica's lease identity
    in `detail["identity"]` (the failover analysis needs it to tell whether the leader was hit).
    `detail` is free-form JSON; the keys the checker reads: "identity", "duration_s", "phase".
    """

    ts: float
    fault: str
    target: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> FaultRecord:
        data = json.loads(line)
        detail = data.get("detail") or {}
        if not isinstance(detail, dict):
            detail = {"message": str(detail)}
        return cls(
            ts=float(data["ts"]), fault=str(data["fault"]), target=str(data.get("target", "")), detail=detail
        )


# ---------------------------------------------------------------- writers


class WatchRecorder:
    """An informer `history` callback that appends `WatchDeliveryRecord`s for one observer.

        rec = WatchRecorder(run_dir / "watch-scheduler-1.jsonl", "scheduler-1",
                            selectors={"pods": POD_FIELD_SELECTOR})
        factory = InformerFactory(cs, history=rec)
        ...
        rec.close()

    `selectors` maps a resource to the (label / field) selector its informer uses, if any: filtered
    resources are judged more narrowly by the checker. When two informers of one resource share a
    process, give each its own observer with `derive` (they share the file).
    """

    def __init__(
        self,
        path: Path | str,
        observer: str,
        *,
        selectors: Mapping[str, str] | None = None,
        namespace: str = "",
        clock: Callable[[], float] = time.time,
        _writer: JsonlWriter | None = None,
    ) -> None:
        self.observer = observer
        self.selectors = dict(selectors or {})
        self.namespace = namespace
        self.session = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._clock = clock
        self._owns_writer = _writer is None
        self._writer = _writer if _writer is not None else JsonlWriter(path)
        self.count = 0

    @property
    def path(self) -> Path:
        return self._writer.path

    def derive(
        self, observer: str, *, selectors: Mapping[str, str] | None = None, namespace: str = ""
    ) -> WatchRecorder:
        """Another observer writing to the same file (closing it does not close the file)."""
        return WatchRecorder(
            self.path,
            observer,
            selectors=selectors,
            namespace=namespace,
            clock=self._clock,
            _writer=self._writer,
        )

    def __call__(self, rec: HistoryRecord) -> None:
        self._writer.append(
            WatchDeliveryRecord(
                ts=self._clock(),
                observer=self.observer,
                resource=rec.resource,
                type=rec.type,
                key=rec.key,
                resource_version=_rv_int(rec.resource_version),
                source=rec.source,
                session=self.session,
                namespace=self.namespace,
                selector=self.selectors.get(rec.resource, ""),
            )
        )
        self.count += 1

    def close(self) -> None:
        if self._owns_writer:
            self._writer.close()

    def __enter__(self) -> WatchRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- snapshots


def _to_message(obj: Message | Mapping[str, Any], cls: type[Any]) -> Any:
    if isinstance(obj, cls):
        return obj
    if isinstance(obj, Message):
        raise TypeError(f"expected {cls.__name__}, got {type(obj).__name__}")
    msg = cls()
    json_format.ParseDict(dict(obj), msg, ignore_unknown_fields=True)
    return msg


def to_pod(obj: pb.Pod | Mapping[str, Any]) -> pb.Pod:
    """A pod from a pb.Pod or its JSON mapping (camelCase or snake_case field names)."""
    pod: pb.Pod = _to_message(obj, pb.Pod)
    return pod


def to_node(obj: pb.Node | Mapping[str, Any]) -> pb.Node:
    """A node from a pb.Node or its JSON mapping."""
    node: pb.Node = _to_message(obj, pb.Node)
    return node


def write_snapshot(
    path: Path | str,
    pods: Iterable[pb.Pod],
    nodes: Iterable[pb.Node],
    *,
    created: Iterable[pb.Pod] = (),
    pods_revision: int | None = None,
    pdbs: Iterable[pb.PodDisruptionBudget] = (),
    deployments: Iterable[pb.Deployment] = (),
) -> None:
    """Write the final state (and optionally every pod created during the run, the revision the
    pods were listed at, the disruption budgets and Deployments the drain invariants judge) as
    `final.json`."""

    def dump(objs: Iterable[Message]) -> list[dict[str, Any]]:
        return [json_format.MessageToDict(o) for o in objs]

    data = {
        "pods": dump(pods),
        "nodes": dump(nodes),
        "created": dump(created),
        "pods_revision": pods_revision,
        "pdbs": dump(pdbs),
        "deployments": dump(deployments),
    }
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(p)


def load_snapshot(path: Path | str) -> tuple[list[pb.Pod], list[pb.Node], list[pb.Pod]]:
    """(pods, nodes, created) from a snapshot file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return (
        [to_pod(o) for o in data.get("pods", [])],
        [to_node(o) for o in data.get("nodes", [])],
        [to_pod(o) for o in data.get("created", [])],
    )


def load_snapshot_revision(path: Path | str) -> int | None:
    """The revision the snapshot's pods were listed at (None for a snapshot without it)."""
    value = json.loads(Path(path).read_text(encoding="utf-8")).get("pods_revision")
    return int(value) if isinstance(value, int) and value > 0 else None


def load_workloads(path: Path | str) -> tuple[list[pb.PodDisruptionBudget], list[pb.Deployment]]:
    """(pdbs, deployments) from a snapshot file (empty for a snapshot written before they were)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    pdbs = [_to_message(o, pb.PodDisruptionBudget) for o in data.get("pdbs", [])]
    deployments = [_to_message(o, pb.Deployment) for o in data.get("deployments", [])]
    return pdbs, deployments


# ---------------------------------------------------------------- lease history


@dataclass(frozen=True, slots=True)
class LeaseState:
    """The Lease as one accepted write left it (holder "" = released, or deleted)."""

    lease: str  # "namespace/name"
    revision: int
    ts: float
    holder: str
    transitions: int
    renew_time: str = ""
    user: str = ""
    duration_s: float | None = None  # leaseDurationSeconds, if the audit record carries it
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class LeaseTerm:
    """One term: the writes with one (holder, transitions), from the acquiring write to the last
    renewal; `end_*` is the next write that changed the lease (a release or another term's
    acquisition), None if the term lasted to the end of the history."""

    lease: str
    holder: str
    transitions: int
    acquire_ts: float
    acquire_revision: int
    last_renew_ts: float
    last_renew_revision: int
    duration_s: float | None
    end_ts: float | None = None
    end_revision: int | None = None
    released: bool = False  # ended by a write that cleared the holder (or deleted the Lease)


class LeaseHistory:
    """Every lease's states in revision order, rebuilt from the audit log's accepted lease writes."""

    def __init__(self, states: Iterable[LeaseState]) -> None:
        self._states: dict[str, list[LeaseState]] = {}
        for s in sorted(states, key=lambda s: s.revision):
            self._states.setdefault(s.lease, []).append(s)
        self._revs = {k: [s.revision for s in v] for k, v in self._states.items()}
        self._by_ts = {k: sorted(v, key=lambda s: (s.ts, s.revision)) for k, v in self._states.items()}
        self._ts = {k: [s.ts for s in v] for k, v in self._by_ts.items()}

    @classmethod
    def from_audit(cls, records: Iterable[AuditRecord]) -> LeaseHistory:
        states = []
        for r in records:
            if r.resource != "leases" or r.code != "OK" or r.revision is None:
                continue
            if r.verb not in ("create", "update", "delete"):
                continue
            deleted = r.verb == "delete"
            dur = r.extra.get("lease_duration_seconds")
            states.append(
                LeaseState(
                    lease=object_key(r.namespace, r.name),
                    revision=r.revision,
                    ts=r.ts,
                    holder="" if deleted else (r.lease_holder or ""),
                    transitions=0 if deleted else (r.lease_transitions or 0),
                    renew_time=r.lease_renew_time or "",
                    user=r.user,
                    duration_s=float(dur) if isinstance(dur, int | float) else None,
                    deleted=deleted,
                )
            )
        return cls(states)

    def leases(self) -> list[str]:
        return sorted(self._states)

    def states(self, lease: str) -> list[LeaseState]:
        return list(self._states.get(lease, ()))

    def at_revision(self, lease: str, revision: int) -> LeaseState | None:
        """The state in force for a write at `revision`: the last lease write before it."""
        revs = self._revs.get(lease)
        if not revs:
            return None
        i = bisect.bisect_left(revs, revision)
        return self._states[lease][i - 1] if i > 0 else None

    def at_time(self, lease: str, ts: float) -> LeaseState | None:
        """The state at wall-clock `ts`: the last lease write completed at or before it."""
        tss = self._ts.get(lease)
        if not tss:
            return None
        i = bisect.bisect_right(tss, ts)
        return self._by_ts[lease][i - 1] if i > 0 else None

    def terms(self, lease: str) -> list[LeaseTerm]:
        """The lease's terms in order. A term is a maximal run of writes with one non-empty
        (holder, transitions); a write with another pair (or an empty holder) ends it."""
        out: list[LeaseTerm] = []
        cur: dict[str, Any] | None = None

        def close(end: LeaseState | None) -> None:
            nonlocal cur
            if cur is None:
                return
            out.append(
                LeaseTerm(
                    lease=lease,
                    holder=cur["holder"],
                    transitions=cur["transitions"],
                    acquire_ts=cur["acquire_ts"],
                    acquire_revision=cur["acquire_revision"],
                    last_renew_ts=cur["last_ts"],
                    last_renew_revision=cur["last_rev"],
                    duration_s=cur["duration_s"],
                    end_ts=end.ts if end else None,
                    end_revision=end.revision if end else None,
                    released=bool(end is not None and not end.holder),
                )
            )
            cur = None

        for s in self._states.get(lease, ()):
            if cur is not None and s.holder == cur["holder"] and s.transitions == cur["transitions"]:
                cur["last_ts"], cur["last_rev"] = s.ts, s.revision
                if s.duration_s is not None:
                    cur["duration_s"] = s.duration_s
                continue
            close(s)
            if s.holder:
                cur = {
                    "holder": s.holder,
                    "transitions": s.transitions,
                    "acquire_ts": s.ts,
                    "acquire_revision": s.revision,
                    "last_ts": s.ts,
                    "last_rev": s.revision,
                    "duration_s": s.duration_s,
                }
        close(None)
        return out


# ---------------------------------------------------------------- fault windows


@dataclass(frozen=True, slots=True)
class FaultWindow:
    fault: str
    target: str
    start: float
    end: float  # == start for an instantaneous fault


def fault_windows(faults: Iterable[FaultRecord], kinds: Iterable[str] | None = None) -> list[FaultWindow]:
    """The faults of `kinds` (all if None) as time windows.

    A record with detail {"duration_s": d} is the window [ts, ts + d]; a start record followed by a
    record for the same fault and target with detail {"phase": "end"} is the window between them
    (starts and ends of one fault and target pair up first-in first-out, so overlapping windows on
    one target, e.g. two rotations of the leader's pair, each keep their own extent; an unmatched
    start lasts to the last record's time); a record with detail {"part_of": <its own fault>} is a
    step inside such a window and no window itself; anything else is an instant.
    """
    wanted = None if kinds is None else set(kinds)
    recs = sorted(faults, key=lambda f: f.ts)
    last_ts = recs[-1].ts if recs else 0.0
    out: list[FaultWindow] = []
    open_: dict[tuple[str, str], list[FaultRecord]] = {}
    for f in recs:
        if wanted is not None and f.fault not in wanted:
            continue
        if f.detail.get("part_of") == f.fault:
            continue  # a step inside its own fault's window (rotate-ca's phases)
        phase = f.detail.get("phase")
        key = (f.fault, f.target)
        if phase == PHASE_END:
            starts = open_.get(key)
            if starts:
                start = starts.pop(0)
                out.append(FaultWindow(f.fault, f.target, start.ts, f.ts))
            continue
        dur = f.detail.get("duration_s")
        if isinstance(dur, int | float):
            out.append(FaultWindow(f.fault, f.target, f.ts, f.ts + float(dur)))
        elif phase == PHASE_START:
            open_.setdefault(key, []).append(f)
        else:
            out.append(FaultWindow(f.fault, f.target, f.ts, f.ts))
    out.extend(FaultWindow(s.fault, s.target, s.ts, max(last_ts, s.ts)) for v in open_.values() for s in v)
    return sorted(out, key=lambda w: (w.start, w.end))


# ---------------------------------------------------------------- the history


@dataclass(frozen=True, slots=True)
class ReplicaLife:
    """One start of an elected replica (`component` "scheduler" or "controller-manager"): its
    election identity, and when it started and was seen to end (wall clock; `ended_at` None: still
    running at the end of the run)."""

    replica: str
    component: str
    identity: str
    started_at: float
    ended_at: float | None = None
    exit_code: int | None = None


def write_replica_lives(run_dir: Path, lives: Iterable[ReplicaLife]) -> Path:
    path = run_dir / REPLICAS_FILE
    write_atomic(path, json.dumps({"lives": [asdict(x) for x in lives]}) + "\n")
    return path


def read_replica_lives(path: Path) -> list[ReplicaLife]:
    """The recorded lives, [] when there are none (an attached run, or one from before)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))["lives"]
        return [ReplicaLife(**x) for x in raw]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def write_origin(run_dir: Path, ts: float, what: str) -> Path:
    """Record the run's t=0 (`ORIGIN_FILE`), written whole or not at all."""
    path = run_dir / ORIGIN_FILE
    write_atomic(path, json.dumps({"ts": ts, "what": what}) + "\n")
    return path


def read_origin(path: Path) -> float | None:
    """The recorded t=0, None when there is none (a run from before origins were recorded)."""
    try:
        ts = json.loads(path.read_text(encoding="utf-8")).get("ts")
    except (OSError, ValueError, AttributeError):
        return None
    return float(ts) if isinstance(ts, int | float) else None


@dataclass
class History:
    """Everything the checker judges. Build it with `History.load(run_dir)`, `History.from_files`,
    or directly (tests do).

    `pods` / `nodes` are the final snapshot (None when it was not taken); `created` optionally holds
    every pod created during the run, with its spec, for the time-resolved over-commit check (pods in
    the final snapshot are used too).
    """

    audit: list[AuditRecord] = field(default_factory=list)
    watch: list[WatchDeliveryRecord] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    rpc_errors: list[RpcErrorRecord] = field(default_factory=list)
    pods: list[pb.Pod] | None = None
    nodes: list[pb.Node] | None = None
    created: list[pb.Pod] = field(default_factory=list)
    # The revision `pods` were listed at (None: unknown). Attached to a cluster whose workload
    # goes on, pods created after it are in the audit log and the informer but not the snapshot.
    snapshot_revision: int | None = None
    # The drain invariants' inputs: the pods' availability timeline, the final budgets and
    # Deployments, and the cordons (faults "cordon" / "uncordon" with detail["revision"]).
    pod_states: list[PodStateRecord] = field(default_factory=list)
    pdbs: list[pb.PodDisruptionBudget] = field(default_factory=list)
    deployments: list[pb.Deployment] = field(default_factory=list)
    # etcd's own history of the run (chaos.etcd_history): what audit_matches_etcd judges.
    etcd_writes: list[EtcdWrite] = field(default_factory=list)
    # The run's t=0 (wall clock; the runner's `origin.json`); None: the first record is t=0.
    origin_ts: float | None = None
    # Every start of every elected replica (the runner's `replicas.json`), for the timeline's lanes.
    replica_lives: list[ReplicaLife] = field(default_factory=list)
    _lease_history: LeaseHistory | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.pods is not None:
            self.pods = [to_pod(p) for p in self.pods]
        if self.nodes is not None:
            self.nodes = [to_node(n) for n in self.nodes]
        self.created = [to_pod(p) for p in self.created]
        self.faults = sorted(self.faults, key=lambda f: f.ts)

    @classmethod
    def from_files(
        cls,
        *,
        audit: Sequence[Path] = (),
        watch: Sequence[Path] = (),
        faults: Sequence[Path] = (),
        rpc_errors: Sequence[Path] = (),
        snapshot: Path | None = None,
        timeline: Sequence[Path] = (),
        etcd_history: Path | None = None,
        origin: Path | None = None,
        replicas: Path | None = None,
    ) -> History:
        pods: list[pb.Pod] | None = None
        nodes: list[pb.Node] | None = None
        created: list[pb.Pod] = []
        snapshot_revision: int | None = None
        pdbs: list[pb.PodDisruptionBudget] = []
        deployments: list[pb.Deployment] = []
        if snapshot is not None and snapshot.exists():
            pods, nodes, created = load_snapshot(snapshot)
            snapshot_revision = load_snapshot_revision(snapshot)
            pdbs, deployments = load_workloads(snapshot)
        audit_recs = [r for p in audit for r in read_audit_logs(p)]  # rotated backups too
        audit_recs.sort(key=lambda r: r.ts)  # stable: file order within a log
        return cls(
            audit=audit_recs,
            watch=[r for p in watch for r in read_jsonl(p, WatchDeliveryRecord.from_json)],
            faults=[r for p in faults for r in read_jsonl(p, FaultRecord.from_json)],
            rpc_errors=[r for p in rpc_errors for r in read_jsonl(p, RpcErrorRecord.from_json)],
            pods=pods,
            nodes=nodes,
            created=created,
            snapshot_revision=snapshot_revision,
            pod_states=[r for p in timeline for r in read_timeline(p)],
            pdbs=pdbs,
            deployments=deployments,
            etcd_writes=load_etcd_history(etcd_history) if etcd_history is not None else [],
            origin_ts=read_origin(origin) if origin is not None else None,
            replica_lives=read_replica_lives(replicas) if replicas is not None else [],
        )

    @classmethod
    def load(cls, run_dir: Path | str) -> History:
        """The history in a run directory laid out as the module doc describes."""
        d = Path(run_dir)
        return cls.from_files(
            audit=sorted(d.glob(AUDIT_GLOB)),
            watch=sorted(d.glob(WATCH_GLOB)),
            faults=[d / FAULTS_FILE] if (d / FAULTS_FILE).exists() else [],
            rpc_errors=sorted(d.glob(RPC_ERRORS_GLOB)),
            snapshot=d / SNAPSHOT_FILE,
            timeline=[d / TIMELINE_FILE],
            etcd_history=d / ETCD_HISTORY_FILE,
            origin=d / ORIGIN_FILE,
            replicas=d / REPLICAS_FILE,
        )

    # -- derived views

    def accepted(self, resource: str | None = None) -> list[AuditRecord]:
        """Accepted writes (code OK, with a revision), optionally of one resource, in revision order."""
        out = [
            r
            for r in self.audit
            if r.code == "OK" and r.revision is not None and (resource is None or r.resource == resource)
        ]
        out.sort(key=lambda r: (r.revision or 0, r.ts))
        return out

    def cordons(self) -> list[tuple[str, str, int]]:
        """(node, "cordon"|"uncordon", revision) of every cordon the nemesis recorded."""
        out = []
        for f in self.faults:
            rev = f.detail.get("revision")
            if f.fault in ("cordon", "uncordon") and isinstance(rev, int):
                out.append((f.target, f.fault, rev))
        return out

    def lease_history(self) -> LeaseHistory:
        if self._lease_history is None:
            self._lease_history = LeaseHistory.from_audit(self.audit)
        return self._lease_history

    def origin(self) -> float:
        """The run's t=0 (wall clock): the runner's recorded origin, else the first record (0.0 for
        an empty history). Every table and plot of a run measures time from here."""
        if self.origin_ts is not None:
            return self.origin_ts
        span = self.time_range()
        return span[0] if span else 0.0

    def time_range(self) -> tuple[float, float] | None:
        """(first, last) timestamp over every record, None for an empty history."""
        tss = [r.ts for r in self.audit] + [f.ts for f in self.faults] + [e.ts for e in self.rpc_errors]
        tss += [w.ts for w in self.watch]
        return (min(tss), max(tss)) if tss else None
