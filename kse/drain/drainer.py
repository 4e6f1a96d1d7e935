"""Drain nodes as `kubectl drain` does: cordon, pick the pods (kse.drain.filters), evict each with
retry while a disruption budget says no, wait until each is gone.

    drainer = Drainer(cs, DrainOptions(ignore_daemonsets=True, timeout=60), progress=print_progress)
    outcome = await drainer.drain(["node-1", "node-2"])   # DrainOutcome: drained, failed, error

The semantics are upstream's staging/src/k8s.io/kubectl/pkg/drain/drain.go (Helper) and
pkg/cmd/drain/drain.go (RunDrain):

* every node is cordoned first, then drained one by one; the first node that fails stops the
  drain (the rest stay cordoned, as kubectl leaves them);
* the pods of a node are evicted concurrently; a TooManyRequests answer (RESOURCE_EXHAUSTED over
  gRPC, HTTP 429: "Cannot evict pod as it would violate the pod's disruption budget.") is retried
  after `retry_interval` (kubectl's fixed 5 s), NotFound means the pod is already gone, any other
  error fails that pod;
* after an accepted eviction the pod is polled every `poll_interval` (1 s) until it is gone or
  replaced by a new pod of the same name (another uid); a pod whose deletionTimestamp is older than
  `skip_wait_for_delete_timeout` is no longer waited for;
* `timeout` (0: none) bounds the whole eviction of a node, retries and waits included;
* `disable_eviction` deletes instead of evicting (no budget is consulted), then waits for all;
* `grace_period` < 0 leaves the pod's own terminationGracePeriodSeconds;
* dry run "client" changes nothing and reports what it would evict; "server" sends every write
  with dryRun and does not wait.

Everything the command prints comes through the `progress` callback as `Progress` records, so the
CLI prints kubectl's lines and other callers (a rolling-upgrade scenario) can log or count them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kse.client.clientset import Clientset
from kse.client.errors import ApiError, NotFoundError, TooManyRequestsError
from kse.drain import filters
from kse.drain.cordon import DRY_RUN_CLIENT, DRY_RUN_NONE, DRY_RUN_SERVER, CordonResult, set_unschedulable
from kse.durations import format_duration
from kse.objects.labels import parse_selector
from proto import kse_pb2 as pb

# Progress kinds, in the order a drain emits them.
CORDONED = "cordon"  # message: the CordonResult verb ("cordoned", "already cordoned", ...)
WARNING = "warning"  # message: the warnings of a node's pod list
EVICTING = "evicting"  # pod: an eviction (or its retry) is being sent
RETRY = "retry"  # pod, message: the budget said no; the server's message
EVICTED = "evicted"  # pod: gone after an eviction
DELETED = "deleted"  # pod: gone after a delete
SKIPPED_WAIT = "skipped-wait"  # pod: deletionTimestamp older than skip_wait_for_delete_timeout
PENDING = "pending"  # node, message: the error; pods: what is still on the node
DRAINED = "drained"  # node

# What kubectl (1.32) reports when --timeout ends a wait for pods to go: wait.PollUntilContextTimeout's
# context error.
CONTEXT_DEADLINE = "context deadline exceeded"


@dataclass(frozen=True)
class Progress:
    kind: str
    node: str = ""
    namespace: str = ""
    name: str = ""
    message: str = ""
    pods: tuple[str, ...] = ()

    @property
    def pod(self) -> str:
        return f"{self.namespace}/{self.name}"


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class DrainOptions:
    """kubectl drain's flags (same names, same defaults)."""

    force: bool = False
    ignore_daemonsets: bool = False
    delete_emptydir_data: bool = False
    grace_period: int = -1
    timeout: float = 0.0  # seconds; 0: no limit
    pod_selector: str = ""
    disable_eviction: bool = False
    skip_wait_for_delete_timeout: int = 0
    dry_run: str = DRY_RUN_NONE
    retry_interval: float = 5.0
    poll_interval: float = 1.0

    def filter_flags(self) -> filters.FilterFlags:
        return filters.FilterFlags(
            force=self.force,
            ignore_daemonsets=self.ignore_daemonsets,
            delete_emptydir_data=self.delete_emptydir_data,
            skip_wait_for_delete_timeout=self.skip_wait_for_delete_timeout,
        )

    def validate(self) -> None:
        """ValueError naming the flag, before anything is changed."""
        if self.dry_run not in (DRY_RUN_NONE, DRY_RUN_CLIENT, DRY_RUN_SERVER):
            raise ValueError(
                f'Invalid dry-run value ({self.dry_run}). Must be "none", "server", or "client".'
            )
        if self.timeout < 0:
            raise ValueError(f"--timeout must be >= 0, got {self.timeout:g}")
        if self.pod_selector:
            try:
                parse_selector(self.pod_selector)
            except ValueError:
                raise ValueError("--pod-selector=<pod_selector> must be a valid label selector") from None


class DrainError(Exception):
    """A node could not be drained; the text is kubectl's. `errors` are the parts of an aggregate
    (upstream's utilerrors.Aggregate: "[a, b]" as text, one line each when kubectl exits), empty for
    a single plain error."""

    def __init__(self, message: str, errors: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)

    @classmethod
    def of(cls, errors: Sequence[str]) -> DrainError:
        return cls(filters.aggregate(list(errors)), errors)


@dataclass
class DrainOutcome:
    drained: list[str] = field(default_factory=list)
    failed: str | None = None  # the node that stopped the drain
    error: str = ""
    errors: list[str] = field(default_factory=list)  # the aggregate's parts (DrainError.errors)
    remaining: list[str] = field(default_factory=list)  # not drained (the failed node included)

    @property
    def ok(self) -> bool:
        return self.failed is None


def _key(pod: pb.Pod) -> tuple[str, str]:
    return pod.metadata.namespace, pod.metadata.name


class Drainer:
    """One drain's options and progress sink, over a clientset (module doc)."""

    def __init__(self, cs: Clientset, options: DrainOptions, progress: ProgressFn | None = None) -> None:
        options.validate()
        self.cs = cs
        self.options = options
        self._progress = progress

    def _emit(self, kind: str, pod: pb.Pod | None = None, **kw: object) -> None:
        if self._progress is None:
            return
        if pod is not None:
            kw.setdefault("namespace", pod.metadata.namespace)
            kw.setdefault("name", pod.metadata.name)
        self._progress(Progress(kind, **kw))  # type: ignore[arg-type]

    # ------------------------------------------------------------ cordon

    async def cordon(self, node: str, desired: bool = True) -> CordonResult:
        result = await set_unschedulable(self.cs, node, desired, dry_run=self.options.dry_run)
        self._emit(CORDONED, node=node, message=result.verb)
        return result

    # ------------------------------------------------------------ the pod list

    async def _daemonset_lookup(self, pods: Sequence[pb.Pod]) -> filters.DaemonSetLookup:
        found: dict[tuple[str, str], tuple[str, bool] | None] = {}
        for ns, name in sorted(filters.daemonset_keys(pods)):
            try:
                await self.cs.daemon_sets.get(ns, name)
                found[(ns, name)] = None
            except NotFoundError:
                found[(ns, name)] = filters.daemonset_not_found(name)
            except ApiError as e:
                found[(ns, name)] = (e.message, False)
        return lambda ns, name: found.get((ns, name))

    async def pods_for_deletion(self, node: str) -> filters.PodDeleteList:
        """Every pod on `node` (matching --pod-selector) with what the filters say of it."""
        page = await self.cs.pods.list_all(
            "", label_selector=self.options.pod_selector, field_selector=f"spec.nodeName={node}"
        )
        lookup = await self._daemonset_lookup(page.items)
        return filters.pods_for_deletion(page.items, self.options.filter_flags(), lookup)

    # ------------------------------------------------------------ evict or delete

    def _grace(self) -> int | None:
        return self.options.grace_period if self.options.grace_period >= 0 else None

    def _timeout_text(self) -> str:
        return format_duration(self.options.timeout) if self.options.timeout > 0 else "no limit"

    async def _gone(self, pod: pb.Pod) -> bool | None:
        """True: gone (or replaced by a pod of another uid); None: skip waiting for it; False: still there."""
        try:
            current = await self.cs.pods.get(*_key(pod))
        except NotFoundError:
            return True
        if current.metadata.uid != pod.metadata.uid:
            return True
        if filters.deleted_longer_than(current, self.options.skip_wait_for_delete_timeout):
            return None
        return False

    async def _wait_gone(self, pod: pb.Pod, deadline: float | None, evicted: bool) -> str | None:
        """Poll until `pod` is gone; the error text past `deadline`."""
        loop = asyncio.get_running_loop()
        while True:
            state = await self._gone(pod)
            if state is None:
                self._emit(
                    SKIPPED_WAIT,
                    pod,
                    message=f'pod "{pod.metadata.name}" has DeletionTimestamp older than '
                    f"{self.options.skip_wait_for_delete_timeout} seconds, skipping",
                )
                return None
            if state:
                self._emit(EVICTED if evicted else DELETED, pod)
                return None
            if deadline is not None and loop.time() >= deadline:
                return CONTEXT_DEADLINE
            await asyncio.sleep(self.options.poll_interval)

    def _deadline(self) -> float | None:
        t = self.options.timeout
        return asyncio.get_running_loop().time() + t if t > 0 else None

    async def _evict_one(self, pod: pb.Pod, deadline: float | None) -> str | None:
        """kubectl's per-pod eviction loop; the error text, or None when the pod is gone."""
        ns, name = _key(pod)
        loop = asyncio.get_running_loop()
        server_dry_run = self.options.dry_run == DRY_RUN_SERVER
        while True:
            self._emit(EVICTING, pod)
            if deadline is not None and loop.time() >= deadline:
                reached = f"global timeout reached: {self._timeout_text()}"
                return f'error when evicting pods/"{name}" -n "{ns}": {reached}'
            try:
                await self.cs.pods.evict(ns, name, grace_period_seconds=self._grace(), dry_run=server_dry_run)
            except NotFoundError:
                return None
            except TooManyRequestsError as e:
                self._emit(RETRY, pod, message=e.message)
                await asyncio.sleep(self.options.retry_interval)
                continue
            except ApiError as e:
                return f'error when evicting pods/"{name}" -n "{ns}": {e.message}'
            break
        if server_dry_run:
            return None
        err = await self._wait_gone(pod, deadline, evicted=True)
        if err is not None:
            return f'error when waiting for pod "{name}" in namespace "{ns}" to terminate: {err}'
        return None

    async def _evict(self, pods: Sequence[pb.Pod]) -> None:
        deadline = self._deadline()
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._evict_one(p, deadline)) for p in pods]
        errors = [e for e in (t.result() for t in tasks) if e is not None]
        if errors:
            raise DrainError.of(errors)

    async def _delete(self, pods: Sequence[pb.Pod]) -> None:
        server_dry_run = self.options.dry_run == DRY_RUN_SERVER
        for pod in pods:
            try:
                await self.cs.pods.delete(
                    *_key(pod), grace_period_seconds=self._grace(), dry_run=server_dry_run
                )
            except NotFoundError:
                pass
            except ApiError as e:
                raise DrainError(e.message) from None
        if server_dry_run:
            return
        deadline = self._deadline()
        loop = asyncio.get_running_loop()
        waiting = list(pods)
        while waiting:
            still = []
            for pod in waiting:
                state = await self._gone(pod)
                if state:
                    self._emit(DELETED, pod)
                elif state is None:
                    self._emit(
                        SKIPPED_WAIT,
                        pod,
                        message=f'pod "{pod.metadata.name}" has DeletionTimestamp '
                        f"older than {self.options.skip_wait_for_delete_timeout} seconds, skipping",
                    )
                else:
                    still.append(pod)
            waiting = still
            if not waiting:
                return
            if deadline is not None and loop.time() >= deadline:
                raise DrainError(CONTEXT_DEADLINE)
            await asyncio.sleep(self.options.poll_interval)

    async def delete_or_evict(self, pods: Sequence[pb.Pod]) -> None:
        """Evict (or, with disable_eviction, delete) `pods` and wait until they are gone; DrainError."""
        if not pods:
            return
        if self.options.disable_eviction:
            await self._delete(pods)
        else:
            await self._evict(pods)

    # ------------------------------------------------------------ a node, nodes

    async def drain_node(self, node: str) -> None:
        """Evict the pods of one (cordoned) node; DrainError with kubectl's text."""
        listing = await self.pods_for_deletion(node)
        errors = listing.errors()
        if errors:
            raise DrainError.of(errors)
        warnings = listing.warnings()
        if warnings:
            self._emit(WARNING, node=node, message=warnings)
        pods = listing.pods()
        if self.options.dry_run == DRY_RUN_CLIENT:
            for pod in pods:
                self._emit(EVICTING, pod)
            return
        try:
            await self.delete_or_evict(pods)
        except DrainError as e:
            after = await self.pods_for_deletion(node)
            left = tuple(p.metadata.name for p in after.pods())
            if left:
                self._emit(PENDING, node=node, message=str(e), pods=left)
            raise

    async def drain(self, nodes: Sequence[str]) -> DrainOutcome:
        """Cordon every node, then drain them in order, stopping at the first failure. API errors
        of the cordon (NotFound: no such node) propagate before anything is evicted."""
        for node in nodes:
            await self.cordon(node)
        outcome = DrainOutcome()
        for node in nodes:
            try:
                await self.drain_node(node)
            except DrainError as e:
                outcome.failed, outcome.error, outcome.errors = node, str(e), e.errors
                outcome.remaining = [n for n in nodes if n not in outcome.drained]
                return outcome
            outcome.drained.append(node)
            self._emit(DRAINED, node=node)
        return outcome
