"""The live status of a `kse up` cluster, built only from the API and the process table.

`StatusTracker` runs three informers through the admin clientset: pods (all namespaces), Leases in
the scheduler's namespace, and nodes. From them it keeps, incrementally:

* pod counts: pending (no nodeName), bound (nodeName set; includes running), running
  (phase Running), and how many pods of this run's workload it has seen (`created`);
* binds: a pod update that sets nodeName is a bind, timestamped when the informer delivers it;
  the rate is over a sliding window;
* the scheduler Lease's history: every record observed, and from it each failover: the time the
  old holder's lease became *takeable* (its last observed renewTime + leaseDurationSeconds, or the
  moment it was released) to the new holder's acquireTime. All processes of a `kse up` run share
  one clock, so the Lease's own timestamps are exact; where one is missing or unparsable the
  informer's observation time stands in.

The process side (pids, restarts, backoff) is handed in as `ReplicaInfo`/`ProcessInfo`, read from
the process handles; a replica's role is its current identity matched against the Lease holder.
`render_view` turns a `StatusSnapshot` into a `rich` renderable for a terminal (`kse up` redraws it
with `rich.live.Live`), `render_line` into one plain line for a log or a pipe.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from kse.client.clientset import Clientset
from kse.client.informer import Informer, InformerFactory
from kse.objects.meta import uid_key
from kse.objects.timeutil import epoch_or_none
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

BIND_WINDOW_S = 5.0
RUN_LABEL = "kse.io/workload-run"  # the label `kse workload` puts on its pods (nodesim.workload)


# ---------------------------------------------------------------------------------------------- lease


@dataclass(frozen=True)
class LeaseObservation:
    """One state of the scheduler Lease as the informer delivered it."""

    holder: str
    lease_duration_s: float
    acquire_time: float | None  # epoch seconds, from the record (the writer's clock)
    renew_time: float | None
    transitions: int
    observed_at: float  # epoch seconds, when the informer delivered it
    resource_version: str = ""

    @classmethod
    def of(cls, lease: pb.Lease, observed_at: float) -> LeaseObservation:
        spec = lease.spec
        return cls(
            holder=spec.holder_identity if spec.HasField("holder_identity") else "",
            lease_duration_s=float(spec.lease_duration_seconds)
            if spec.HasField("lease_duration_seconds")
            else 0,
            acquire_time=epoch_or_none(spec.acquire_time),
            renew_time=epoch_or_none(spec.renew_time),
            transitions=spec.lease_transitions if spec.HasField("lease_transitions") else 0,
            observed_at=observed_at,
            resource_version=lease.metadata.resource_version,
        )

    @property
    def renewed_at(self) -> float:
        return self.renew_time if self.renew_time is not None else self.observed_at

    @property
    def takeable_at(self) -> float:
        """When another candidate may take this lease: at once if released, else after the duration."""
        if not self.holder:
            return self.renewed_at
        return self.renewed_at + self.lease_duration_s


@dataclass(frozen=True)
class Failover:
    """The lease passing from one holder to another."""

    from_identity: str
    to_identity: str
    takeable_at: float  # the old holder's lease lapsed or was released
    acquired_at: float  # the new holder's acquireTime
    last_renew_at: float  # the old holder's last renewTime seen
    released: bool
    lease_transitions: int
    observed_at: float

    @property
    def duration_s(self) -> float:
        """Takeable -> acquired: how long the election itself took."""
        return self.acquired_at - self.takeable_at

    @property
    def gap_s(self) -> float:
        """Old holder's last renew -> new holder's acquire: the longest stretch without a leader."""
        return self.acquired_at - self.last_renew_at

    def as_dict(self, names: Callable[[str], str | None] = lambda _: None) -> dict[str, Any]:
        return {
            "from": self.from_identity,
            "from_replica": names(self.from_identity),
            "to": self.to_identity,
            "to_replica": names(self.to_identity),
            "released": self.released,
            "takeable_at": round(self.takeable_at, 6),
            "acquired_at": round(self.acquired_at, 6),
            "duration_s": round(self.duration_s, 3),
            "gap_s": round(self.gap_s, 3),
            "lease_transitions": self.lease_transitions,
        }


class LeaseHistory:
    """Every observed state of one Lease, and the failovers they show (see the module doc).

    A handover whose old lease lapsed before `since` (a holder left over from an earlier run on the
    same data) is the first acquisition of this run, not a failover.
    """

    def __init__(self, since: float) -> None:
        self.since = since
        self.observations: list[LeaseObservation] = []
        self.failovers: list[Failover] = []
        self.first_acquired: LeaseObservation | None = None
        self._held: LeaseObservation | None = None  # the latest record with a holder
        self._released: LeaseObservation | None = None  # a release after `_held`

    @property
    def current(self) -> LeaseObservation | None:
        return self.observations[-1] if self.observations else None

    def observe(self, obs: LeaseObservation) -> Failover | None:
        """Record one state; returns the failover it completes, if any."""
        self.observations.append(obs)
        if not obs.holder:
            if self._held is not None:
                self._released = obs
            return None
        old, released = self._held, self._released
        self._held, self._released = obs, None
        acquired = obs.acquire_time if obs.acquire_time is not None else obs.observed_at
        if old is None:
            if self.first_acquired is None and acquired >= self.since:
                self.first_acquired = obs
            return None
        if old.holder == obs.holder:
            return None
        takeable = released.takeable_at if released is not None else old.takeable_at
        if takeable < self.since:
            if self.first_acquired is None:
                self.first_acquired = obs
            return None
        failover = Failover(
            from_identity=old.holder,
            to_identity=obs.holder,
            takeable_at=takeable,
            acquired_at=acquired,
            last_renew_at=old.renewed_at,
            released=released is not None,
            lease_transitions=obs.transitions,
            observed_at=obs.observed_at,
        )
        self.failovers.append(failover)
        return failover


# ---------------------------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class ReplicaInfo:
    """A scheduler replica as the process table knows it."""

    name: str
    identity: str  # current identity (the one a Lease holder is matched against)
    identities: tuple[str, ...]  # every identity it has run under, oldest first
    pid: int | None
    running: bool
    paused: bool
    restarts: int
    state: str  # running | backoff | held | exited
    backoff_remaining_s: float | None = None
    metrics: str = ""


@dataclass(frozen=True)
class ProcessInfo:
    name: str
    pid: int | None
    running: bool
    returncode: int | None
    paused: bool = False


@dataclass(frozen=True)
class ReplicaView:
    info: ReplicaInfo
    role: str  # leader | standby | stopped | backoff | held | exited | starting


@dataclass(frozen=True)
class StatusSnapshot:
    at: float
    uptime_s: float
    synced: bool
    replicas: list[ReplicaView]
    processes: list[ProcessInfo]
    lease: LeaseObservation | None
    leader: str | None  # replica name of the holder, if it is a live replica
    holder_replica: str | None  # replica name the holder identity belonged to (maybe dead)
    pods: dict[str, int]
    nodes: dict[str, int]
    binds_per_s: float
    binds_total: int
    failovers: list[Failover]
    hint: str = ""
    leader_election: bool = True
    notes: tuple[str, ...] = ()
    certs: str = ""  # short-lived certificates: renewals so far, the next one ("" when off)
    # Seconds since the view last moved: an event or bookmark on any of its watches. Lease
    # renewals and the API server's bookmarks (which need etcd's progress) move it every second or
    # two; past STALE_AFTER_S, the API server or etcd is not answering and the rest is old news.
    view_age_s: float = 0.0


# ---------------------------------------------------------------------------------------------- tracker


def _pod_category(pod: pb.Pod) -> str:
    if pod.metadata.deletion_timestamp:
        return "terminating"
    if not pod.spec.node_name:
        return "pending"
    if pod.status.phase == "Running":
        return "running"
    if pod.status.phase in ("Succeeded", "Failed"):
        return "finished"
    return "bound"


def _node_ready(node: pb.Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


class StatusTracker:
    """Informers on pods, the scheduler Lease's namespace and nodes, reduced to counters and history."""

    def __init__(
        self,
        clientset: Clientset,
        *,
        lease_namespace: str = "kube-system",
        lease_name: str = "kube-scheduler",
        run_id: str = "",
        clock: Callable[[], float] = time.time,
        bind_window_s: float = BIND_WINDOW_S,
    ) -> None:
        self.clock = clock
        self.started_at = clock()
        self.lease_namespace = lease_namespace
        self.lease_name = lease_name
        self.run_id = run_id
        self.bind_window_s = bind_window_s
        self.factory = InformerFactory(clientset)
        self.pods: Informer[pb.Pod] = self.factory.informer_for(clientset.pods)
        self.nodes: Informer[pb.Node] = self.factory.informer_for(clientset.nodes)
        self.leases: Informer[pb.Lease] = Informer(clientset.leases, namespace=lease_namespace, name="leases")
        self.lease_history = LeaseHistory(self.started_at)
        self.pod_counts: collections.Counter[str] = collections.Counter()
        self.created: set[str] = set()
        self.binds: collections.deque[float] = collections.deque()
        self.binds_total = 0
        self.first_bind_at: float | None = None
        self.last_bind_at: float | None = None
        self.node_total = 0
        self.node_ready = 0
        self._seen_revisions: tuple[str, ...] = ()
        self._moved_at = self.started_at
        self.on_failover: Callable[[Failover], None] | None = None
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.nodes.add_event_handler(self._node_added, self._node_updated, self._node_deleted)
        self.leases.add_event_handler(self._lease_seen, lambda _old, new: self._lease_seen(new), None)

    # ------------------------------------------------------------------ lifetime

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[StatusTracker]:
        async with self.factory.running(), self.leases.running():
            yield self

    @property
    def synced(self) -> bool:
        return self.factory.has_synced() and self.leases.has_synced()

    # ------------------------------------------------------------------ handlers

    def _count_pod(self, pod: pb.Pod, delta: int) -> None:
        self.pod_counts[_pod_category(pod)] += delta

    def _note_created(self, pod: pb.Pod) -> None:
        if self.run_id and pod.metadata.labels.get(RUN_LABEL) == self.run_id:
            self.created.add(uid_key(pod))

    def _bind_seen(self) -> None:
        now = self.clock()
        self.binds.append(now)
        self.binds_total += 1
        if self.first_bind_at is None:
            self.first_bind_at = now
        self.last_bind_at = now
        self._trim_binds(now)

    def _trim_binds(self, now: float) -> None:
        horizon = now - self.bind_window_s
        while self.binds and self.binds[0] < horizon:
            self.binds.popleft()

    def _pod_added(self, pod: pb.Pod) -> None:
        self._count_pod(pod, 1)
        self._note_created(pod)
        if pod.spec.node_name and self.pods.has_synced():
            self._bind_seen()  # created and bound while we were not watching (a relist)

    def _pod_updated(self, old: pb.Pod, new: pb.Pod) -> None:
        self._count_pod(old, -1)
        self._count_pod(new, 1)
        self._note_created(new)
        if not old.spec.node_name and new.spec.node_name:
            self._bind_seen()

    def _pod_deleted(self, pod: pb.Pod) -> None:
        self._count_pod(pod, -1)

    def _node_added(self, node: pb.Node) -> None:
        self.node_total += 1
        self.node_ready += _node_ready(node)

    def _node_updated(self, old: pb.Node, new: pb.Node) -> None:
        self.node_ready += _node_ready(new) - _node_ready(old)

    def _node_deleted(self, node: pb.Node) -> None:
        self.node_total -= 1
        self.node_ready -= _node_ready(node)

    def _lease_seen(self, lease: pb.Lease) -> None:
        if lease.metadata.name != self.lease_name:
            return
        failover = self.lease_history.observe(LeaseObservation.of(lease, self.clock()))
        if failover is not None and self.on_failover is not None:
            self.on_failover(failover)

    # ------------------------------------------------------------------ reading

    def binds_per_s(self) -> float:
        now = self.clock()
        self._trim_binds(now)
        window = min(self.bind_window_s, max(1e-3, now - self.started_at))
        return len(self.binds) / window

    def pod_totals(self) -> dict[str, int]:
        c = self.pod_counts
        return {
            "created": len(self.created),
            "total": sum(c.values()),
            "pending": c["pending"],
            "bound": c["bound"] + c["running"] + c["finished"],
            "running": c["running"],
        }

    def snapshot(
        self,
        replicas: Sequence[ReplicaInfo],
        processes: Sequence[ProcessInfo] = (),
        *,
        hint: str = "",
        leader_election: bool = True,
        notes: Sequence[str] = (),
        certs: str = "",
    ) -> StatusSnapshot:
        now = self.clock()
        revisions = tuple(i.last_synced_resource_version for i in (self.pods, self.nodes, self.leases))
        if revisions != self._seen_revisions:
            self._seen_revisions, self._moved_at = revisions, now
        lease = self.lease_history.current
        holder = lease.holder if lease is not None else ""
        views: list[ReplicaView] = []
        leader: str | None = None
        holder_replica: str | None = None
        for r in replicas:
            if holder and holder in r.identities:
                holder_replica = r.name
            role = replica_role(r, holder) if leader_election else replica_role(r, None)
            if role == "leader":
                leader = r.name
            views.append(ReplicaView(r, role))
        return StatusSnapshot(
            at=now,
            uptime_s=now - self.started_at,
            synced=self.synced,
            replicas=views,
            processes=list(processes),
            lease=lease,
            leader=leader,
            holder_replica=holder_replica,
            pods=self.pod_totals(),
            nodes={"total": self.node_total, "ready": self.node_ready},
            binds_per_s=self.binds_per_s(),
            binds_total=self.binds_total,
            failovers=list(self.lease_history.failovers),
            hint=hint,
            leader_election=leader_election,
            notes=tuple(notes),
            certs=certs,
            view_age_s=now - self._moved_at,
        )


def replica_role(r: ReplicaInfo, holder: str | None) -> str:
    """leader / standby from the Lease holder (None: no leader election, a running replica is
    "active"); otherwise what the process table says."""
    if r.running:
        if r.paused:
            return "stopped"
        if holder is None:
            return "active"
        return "leader" if holder and holder == r.identity else "standby"
    if r.state in ("backoff", "held"):
        return r.state
    return "exited"


# ---------------------------------------------------------------------------------------------- text

_ROLE_STYLE = {"leader": "green", "active": "green", "standby": "", "stopped": "yellow"}


def _fmt_age(seconds: float) -> str:
    if seconds < 0:
        return f"in {-seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.1f}s ago"
    return f"{seconds / 60:.0f}m ago"


def failover_text(f: Failover, names: Callable[[str], str | None]) -> str:
    src = names(f.from_identity) or f.from_identity
    dst = names(f.to_identity) or f.to_identity
    how = "released" if f.released else "expired"
    return f"{src} -> {dst} ({how}): {f.duration_s:.3f}s after takeable, {f.gap_s:.2f}s without a leader"


def _name_lookup(snap: StatusSnapshot) -> Callable[[str], str | None]:
    table = {ident: v.info.name for v in snap.replicas for ident in v.info.identities}
    return table.get


# The view moves with every Lease renewal (every retry period, 2 s by default) and every bookmark
# (1 s): a view older than this is not being kept up to date.
STALE_AFTER_S = 5.0


def render_view(snap: StatusSnapshot, events: Sequence[str] = ()) -> Group:
    """The full status for a terminal, redrawn every second by `rich.live.Live`: a header, the
    replicas as a table, then one line per item (lease, last failover, pods, nodes, processes,
    certificates, notes) and the last few `events`."""
    names = _name_lookup(snap)
    header = Text.assemble((f"kse up  uptime {snap.uptime_s:6.0f}s", "bold"))
    if not snap.synced:
        header.append("  (informers syncing...)", style="yellow")
    elif snap.view_age_s > STALE_AFTER_S:
        header.append(
            f"  NO UPDATE FOR {snap.view_age_s:.0f}s: the API server or etcd is not answering; "
            "what follows is how things were",
            style="bold red",
        )
    else:
        header.append(f"  view {snap.view_age_s:.1f}s old", style="dim")
    table = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 2, 0, 0), header_style="")
    table.add_column("REPLICA", no_wrap=True)
    table.add_column("ROLE", no_wrap=True)
    table.add_column("PID", justify="right", no_wrap=True)
    table.add_column("RESTARTS", justify="right", no_wrap=True)
    table.add_column("IDENTITY", no_wrap=True)
    for v in snap.replicas:
        r = v.info
        role = v.role
        if role == "backoff" and r.backoff_remaining_s is not None:
            role = f"backoff {r.backoff_remaining_s:.0f}s"
        pid = str(r.pid) if r.pid is not None and r.running else "-"
        style = _ROLE_STYLE.get(v.role, "red")
        table.add_row(r.name, Text(role, style=style), pid, str(r.restarts), r.identity)
    lines: list[Text] = []
    if not snap.leader_election:
        lines.append(Text("leader election: OFF (temporary fallback, one replica)", style="yellow"))
    elif snap.lease is None:
        lines.append(Text("lease: not created yet"))
    else:
        lease = snap.lease
        who = names(lease.holder) if lease.holder else None
        line = Text(f"lease: holder {lease.holder or '(released)'}" + (f" = {who}" if who else ""))
        if lease.holder and snap.leader is None:
            line.append(f" (gone; takeable {_fmt_age(snap.at - lease.takeable_at)})", style="red")
        line.append(
            f"  transitions {lease.transitions}  renewed {_fmt_age(snap.at - lease.renewed_at)}  "
            f"duration {lease.lease_duration_s:g}s"
        )
        lines.append(line)
    if snap.failovers:
        last = snap.failovers[-1]
        lines.append(Text(
            f"last failover {_fmt_age(snap.at - last.acquired_at)}: {failover_text(last, names)}"
            f"  [{len(snap.failovers)} total]"
        ))  # fmt: skip
    else:
        lines.append(Text("last failover: none"))
    p = snap.pods
    lines.append(Text(
        f"pods: {p['pending']} pending, {p['bound']} bound, {p['running']} running "
        f"({p['created']} created by the workload)   binds/s {snap.binds_per_s:.1f} "
        f"({snap.binds_total} seen)"
    ))  # fmt: skip
    lines.append(Text(f"nodes: {snap.nodes['ready']}/{snap.nodes['total']} ready"))
    if snap.processes:
        procs = Text("processes: ")
        for i, proc in enumerate(snap.processes):
            if i:
                procs.append(", ")
            procs.append(f"{proc.name} ")
            if proc.running:
                procs.append(f"{proc.pid}" + (" stopped" if proc.paused else ""))
            else:
                procs.append(f"exited {proc.returncode}", style="red" if proc.returncode else "dim")
        lines.append(procs)
    if snap.certs:
        lines.append(Text(snap.certs))
    lines += [Text(note, style="yellow") for note in snap.notes]
    lines.append(Text(""))
    if snap.hint:
        lines.append(Text(f"try: {snap.hint}"))
    lines.append(Text("Ctrl-C stops everything", style="dim"))
    if events:
        lines += [Text(""), Text("events:"), *(Text(e) for e in events)]
    return Group(header, Text(""), table, Text(""), *lines)


def render_line(snap: StatusSnapshot) -> str:
    """One compact line, for logs and pipes."""
    names = _name_lookup(snap)
    roles = " ".join(
        f"{v.info.name}={v.role}" + (f"(r{v.info.restarts})" if v.info.restarts else "")
        for v in snap.replicas
    )
    lease = snap.lease
    holder = (names(lease.holder) or lease.holder or "-") if lease and lease.holder else "-"
    p = snap.pods
    last = ""
    if snap.failovers:
        last = f" last-failover={snap.failovers[-1].duration_s:.2f}s"
    stale = (
        f" STALE(no update for {snap.view_age_s:.0f}s)"
        if snap.synced and snap.view_age_s > STALE_AFTER_S
        else ""
    )
    return (
        f"[{snap.uptime_s:5.0f}s]{stale} {roles} holder={holder} "
        f"transitions={lease.transitions if lease else 0} pods pending={p['pending']} "
        f"bound={p['bound']} running={p['running']} binds/s={snap.binds_per_s:.1f}{last}"
    )
